"""Progress of long jobs: a tqdm bar, a quiet periodic line, or nothing.

:func:`progress_bar` is the one helper every long job shares (training,
corpus reading, pretokenizing, mixedgram compression, bits-per-byte runs):
``with progress_bar(total=..., desc=..., unit="B") as p: p.update(n)``.
tqdm is used when it is installed and the output is a terminal; otherwise a
line is printed at most every ``interval`` seconds, and short jobs stay
silent. :func:`run_sliced` is the one runner of a core training job in slices
(BPE's and the growing vocabulary's merging), with its bar.

A run made of many such jobs (``compare``: tokenizers to train, then models
to train per seed) also says where the whole run stands: :class:`RunEstimate`
counts its steps by kind and gives, after each one, a line with the steps
done, the time so far and the time left, estimated from the steps done so far.

Not handled: nested bars (each job gets its own), rates smoothed over a
window (the line's rate is the mean since the start), and estimated time
left in a job's own line (the whole run's :class:`RunEstimate` gives one).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Protocol, TextIO

__all__ = ["Progress", "progress_bar", "run_sliced", "RunEstimate", "duration"]


def _human(n: float, unit: str) -> str:
    """``12.3 MB`` for bytes (decimal units), ``1,234 docs`` otherwise."""
    if unit == "B":
        for prefix in ("", "k", "M", "G", "T"):
            if abs(n) < 1000 or prefix == "T":
                return f"{n:.0f} B" if not prefix else f"{n:.1f} {prefix}B"
            n /= 1000
    return f"{n:,.0f} {unit}"


class Progress:
    """Progress of a long job: a tqdm bar, a quiet periodic line, or nothing.

    ``mode`` is "auto" (tqdm when it is installed and ``file`` is a terminal,
    else lines), "tqdm" (tqdm whenever installed), "lines" or "off". Line mode
    writes at most one line per ``interval`` seconds, and a final line on
    ``close`` only if it wrote any, so short jobs stay silent.
    ``enabled=False`` is the same as ``mode="off"``.
    """

    def __init__(
        self,
        total: int | None = None,
        desc: str = "",
        unit: str = "B",
        *,
        enabled: bool = True,
        mode: str = "auto",
        file: TextIO | None = None,
        interval: float = 10.0,
    ) -> None:
        if mode not in ("auto", "tqdm", "lines", "off"):
            raise ValueError(f"unknown progress mode {mode!r}; expected auto, tqdm, lines or off")
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.interval = interval
        self._file = file if file is not None else sys.stderr
        self._start = self._last = time.monotonic()
        self._lines_written = 0
        self._bar = None
        self._closed = False
        self.mode = self._choose_mode(mode if enabled else "off")
        if self.mode == "tqdm":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, desc=desc or None, unit=unit, unit_scale=unit == "B", file=self._file, dynamic_ncols=True
            )

    def _choose_mode(self, mode: str) -> str:
        if mode in ("lines", "off"):
            return mode
        try:
            import tqdm  # noqa: F401
        except ImportError:
            return "lines"
        if mode == "tqdm":
            return "tqdm"
        isatty = getattr(self._file, "isatty", None)
        return "tqdm" if isatty is not None and isatty() else "lines"

    def update(self, n: int = 1) -> None:
        """Record ``n`` more units done."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "lines":
            now = time.monotonic()
            if now - self._last >= self.interval:
                self._last = now
                self._write_line(now)

    def _write_line(self, now: float) -> None:
        done = _human(self.n, self.unit)
        if self.total:
            done += f" / {_human(self.total, self.unit)} ({100 * self.n / self.total:.1f}%)"
        rate = self.n / max(now - self._start, 1e-9)
        prefix = f"{self.desc}: " if self.desc else ""
        print(f"{prefix}{done}, {_human(rate, self.unit)}/s", file=self._file, flush=True)
        self._lines_written += 1

    def close(self) -> None:
        """Finish: close the bar, or write the last line if lines were written."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.mode == "lines" and self._lines_written:
            self._write_line(time.monotonic())

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    total: int | None = None, desc: str = "", unit: str = "B", enabled: bool = True, **kwargs: Any
) -> Progress:
    """A :class:`Progress`, to use as ``with progress_bar(...) as p: p.update(n)``."""
    return Progress(total=total, desc=desc, unit=unit, enabled=enabled, **kwargs)


class _Sliced(Protocol):
    """A core job that runs in slices (``_core.BpeTrainer``): ``run(seconds=)``
    works for about that long and returns the units it finished."""

    @property
    def done(self) -> bool: ...
    def run(self, max_merges: int = ..., seconds: float = ...) -> int: ...


#: how long a core job runs between two looks from Python: short enough that
#: Ctrl-C (checked between slices) and the bar answer at once, long enough that
#: the slices cost nothing (a slice is one call with the GIL released)
SLICE_SECONDS = 0.2


def run_sliced(job: _Sliced, total: int, desc: str, unit: str, enabled: bool = True) -> None:
    """The one runner of a core training job: ``job.run`` slice after slice until
    ``job.done``, the bar (``total`` units) updated after each; Ctrl-C stops it
    between two slices."""
    with progress_bar(total=total, desc=desc, unit=unit, enabled=enabled) as bar:
        while not job.done:
            bar.update(job.run(seconds=SLICE_SECONDS))


def duration(seconds: float) -> str:
    """``45s``, ``12m05s``, ``3h07m``: a duration as a person reads it."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class RunEstimate:
    """Where a run of several kinds of steps stands, and how long it has left.

    ``totals`` is the number of steps of each kind, in the order the line names
    them (``{"tokenizers": 4, "bits-per-byte runs": 12}``); ``names`` may give a
    kind a singular name for "known after the first ...". After each step,
    :meth:`step` records its kind and whether it was computed (its seconds count
    in that kind's mean) or reused (done, but its time says nothing about the
    others), and returns the line. The time left is, over the kinds, the steps
    left times the mean seconds of that kind's computed steps; while a kind with
    steps left has none computed yet, the line says the estimate comes after its
    first. :meth:`drop` takes steps that will not run (a tokenizer that failed
    takes its models with it) out of the totals. ``clock`` is ``time.monotonic``
    but in tests; ``start``, the clock's reading when the run began (default: now).
    """

    def __init__(
        self,
        totals: dict[str, int],
        *,
        names: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        start: float | None = None,
    ) -> None:
        self.totals = {k: int(v) for k, v in totals.items()}
        self.names = names or {}
        self.done = {k: 0 for k in totals}
        self._seconds = {k: 0.0 for k in totals}
        self._computed = {k: 0 for k in totals}
        self._clock = clock
        self._start = clock() if start is None else start

    def step(self, kind: str, seconds: float | None) -> str:
        """One step of ``kind`` done, computed in ``seconds`` (None: reused); the line."""
        self.done[kind] += 1
        if seconds is not None:
            self._seconds[kind] += float(seconds)
            self._computed[kind] += 1
        return self.line()

    def drop(self, kind: str, n: int) -> None:
        """``n`` steps of ``kind`` will not run."""
        self.totals[kind] = max(self.done[kind], self.totals[kind] - int(n))

    def left(self) -> float | None:
        """Estimated seconds left; None while a kind with steps left has no computed step."""
        total = 0.0
        for kind, n in self.totals.items():
            remaining = n - self.done[kind]
            if remaining <= 0:
                continue
            if not self._computed[kind]:
                return None
            total += remaining * self._seconds[kind] / self._computed[kind]
        return total

    def line(self) -> str:
        done, total = sum(self.done.values()), sum(self.totals.values())
        kinds = ", ".join(f"{k} {self.done[k]}/{n}" for k, n in self.totals.items() if n)
        out = f"{done} of {total} steps done ({kinds}), {duration(self._clock() - self._start)} so far"
        if done >= total:
            return out
        left = self.left()
        if left is not None:
            return out + f", about {duration(left)} left"
        first = next(k for k, n in self.totals.items() if n > self.done[k] and not self._computed[k])
        return out + f", time left known after the first {self.names.get(first, first)}"
