"""Shared harness for the benchmark scripts in bench/.

Every measurement runs in its own child process, so each tool's peak memory is
its own and a crash, a hang or a leak in one tool does not disturb the others:

* :func:`run_function` runs ``fn(setup(*args, **kwargs))`` in a fresh Python
  interpreter (not a fork of this one, whose memory would count against the
  child). ``setup`` (optional) builds the inputs and is not timed; ``fn`` is
  timed ``repeat`` times and the best wall time is kept; ``after`` (optional)
  runs untimed at the end, e.g. to save a trained model. The functions must
  be module-level, and their arguments JSON values: pass file names and sizes,
  and let ``setup`` load the data inside the child.
* :func:`run_command` runs an external command ``repeat`` times.
* :func:`interleaved` times several variants back to back in one child, round
  after round, for ratios between them (e.g. 1 thread against 2) that a
  shared machine's bursts of load cannot skew.

Peak memory is the child's high-water mark of resident memory: the child resets
it after ``setup`` (``/proc/self/clear_refs``) and reads ``VmHWM`` after the
timed runs, so it covers the timed work plus what was resident when it started
(the loaded input, the interpreter). ``base`` is the resident size when timing
started. The parent also records the child's ``ru_maxrss`` from ``wait4``
(its whole life, setup included) for commands and as a fallback.

A child that runs longer than ``timeout`` seconds is killed and reported as
"> N s". A child that fails is reported with its error, and the run goes on.

:class:`Bench` collects :class:`Result` rows, prints one aligned table with
ratios against a baseline tool per group ("ours / theirs" time per MB, "x
faster" = how many times faster the baseline is, and the peak-memory ratio),
acceptance targets beside the rows they concern, and writes a JSON file under
``bench/results/`` (git-ignored).

:func:`load_text` reads the corpus made by ``python bench/build_corpus.py``.

Minimal use::

    from common import Bench, run_function, load_text

    def setup(mb):
        return load_text("train_10mb", mb=mb)

    def count_words(text):
        return {"words": len(text.split())}

    if __name__ == "__main__":
        b = Bench("example")
        b.add(run_function(count_words, 10, setup=setup, group="split", tool="str.split", mb=10, repeat=3))
        b.print_table()
        b.save()
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import importlib
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
CORPUS_DIR = Path(os.environ.get("TOKENFORGE_BENCH_CORPUS", BENCH_DIR / "data" / "corpus"))
MB = 1_000_000  # bytes; MB/s everywhere in bench/ is 10**6 bytes of UTF-8 per second


# --------------------------------------------------------------------------
# corpus access
# --------------------------------------------------------------------------
class CorpusMissing(FileNotFoundError):
    pass


def corpus_path(name: str) -> Path:
    """Path of a corpus file; ``name`` may omit ``.txt`` (``"train_50mb"``, ``"heldout"``)."""
    p = CORPUS_DIR / name
    if not p.suffix:
        p = p.with_suffix(".txt")
    if not p.is_file():
        raise CorpusMissing(
            f"benchmark corpus file {p} is missing.\n"
            f"Build the corpus first:  python bench/build_corpus.py   (about 3 minutes, needs root for apt-get)"
        )
    return p


def load_text(name: str = "train_50mb", mb: float | None = None) -> str:
    """The text of a corpus file, optionally cut to its first ``mb`` MB.

    The cut falls on a line break (or at least a character boundary), so the
    result is at most ``mb`` MB of valid UTF-8.
    """
    p = corpus_path(name)
    with open(p, "rb") as f:
        data = f.read() if mb is None else f.read(int(mb * MB))
    if mb is not None and len(data) == int(mb * MB):
        nl = data.rfind(b"\n")
        data = data[:nl] if nl > len(data) // 2 else data
    return data.decode("utf-8", errors="ignore")


def load_docs(name: str = "train", mb: float | None = None) -> list[str]:
    """Documents of a ``.jsonl`` corpus file, in file order, up to ``mb`` MB."""
    p = corpus_path(name if name.endswith(".jsonl") else name + ".jsonl")
    out, total = [], 0
    with open(p, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            total += len(text.encode())
            out.append(text)
            if mb is not None and total >= mb * MB:
                break
    return out


def split_docs(text: str, size: int = 4096) -> list[str]:
    """Cut text into pieces of about ``size`` characters at paragraph breaks.

    Pieces end just after a blank line ("\\n\\n") when there is one in the
    window, else after a line break, else at ``size``. Concatenated, the
    pieces give back ``text`` exactly.
    """
    out = []
    i, n = 0, len(text)
    while i < n:
        j = min(n, i + size)
        if j < n:
            k = text.rfind("\n\n", i + size // 2, j + size // 2)
            if k >= 0:
                j = k + 2
            else:
                k = text.rfind("\n", i + size // 2, j + size // 2)
                if k >= 0:
                    j = k + 1
        out.append(text[i:j])
        i = j
    return out


def text_mb(text: str) -> float:
    return len(text.encode("utf-8")) / MB


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    """One measured row: a tool doing one job (group) on ``mb`` MB of input."""

    group: str
    tool: str
    mb: float | None = None  # input size, for MB/s
    times: list[float] = dataclasses.field(default_factory=list)  # wall seconds of each timed run
    peak_rss_mb: float | None = None
    base_rss_mb: float | None = None
    timeout: float | None = None  # set when the child was killed after this many seconds
    error: str | None = None
    extra: dict = dataclasses.field(default_factory=dict)  # whatever fn returned (a dict), and notes

    @property
    def name(self) -> str:
        return f"{self.group}/{self.tool}"

    @property
    def ok(self) -> bool:
        return bool(self.times) and self.error is None and self.timeout is None

    @property
    def best(self) -> float | None:
        return min(self.times) if self.times else None

    @property
    def mbps(self) -> float | None:
        return self.mb / self.best if self.ok and self.mb and self.best else None

    def per_mb(self) -> float | None:
        """Seconds per MB (or plain seconds when the size is unknown)."""
        if not self.ok:
            return None
        return self.best / self.mb if self.mb else self.best

    def status(self) -> str:
        if self.timeout is not None:
            return f"> {self.timeout:g} s"
        if self.error is not None:
            return "error"
        return "ok" if self.times else "not run"

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(best=self.best, mbps=self.mbps, status=self.status())
        return d


@dataclasses.dataclass
class Target:
    """An acceptance target shown beside row ``row`` of the table.

    ``measured`` is the number compared with ``goal`` (a speed ratio, an MB/s,
    a memory ratio); ``None`` when it could not be measured.
    """

    row: str
    label: str
    measured: float | None
    goal: float
    higher_is_better: bool = True
    unit: str = "x"

    @property
    def status(self) -> str:
        if self.measured is None:
            return "n/a"
        ok = self.measured >= self.goal if self.higher_is_better else self.measured <= self.goal
        return "PASS" if ok else "FAIL"

    def render(self) -> str:
        m = "-" if self.measured is None else f"{self.measured:.2f}{self.unit}"
        return f"{self.label}: {m} {self.status}"


# --------------------------------------------------------------------------
# child processes
# --------------------------------------------------------------------------
def _fn_ref(fn: Callable) -> tuple[str, str]:
    """(module name or file path, qualified name) that a fresh interpreter can import."""
    mod = fn.__module__
    if mod == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise ValueError("run_function needs functions defined in a file, not in an interactive session")
        return os.path.abspath(path), fn.__qualname__
    return mod, fn.__qualname__


def _wait(proc: subprocess.Popen, timeout: float | None) -> tuple[int | None, float, float | None]:
    """Reap ``proc`` with wait4: (exit code or None on timeout, wall s, ru_maxrss MB).

    The child runs in its own session; it is killed with its whole process group
    on timeout, and also when the parent is interrupted (Ctrl-C).
    """
    t0 = time.perf_counter()
    deadline = None if timeout is None else t0 + timeout
    delay = 0.001
    try:
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not reap again
                return proc.returncode, time.perf_counter() - t0, ru.ru_maxrss / 1024
            if deadline is not None and time.perf_counter() > deadline:
                _kill_group(proc)
                _, status, ru = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                return None, time.perf_counter() - t0, ru.ru_maxrss / 1024
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    except BaseException:
        if proc.returncode is None:
            _kill_group(proc)
            proc.wait()
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_function(
    fn: Callable,
    *args,
    setup: Callable | None = None,
    after: Callable | None = None,
    group: str,
    tool: str,
    mb: float | None = None,
    repeat: int = 1,
    timeout: float | None = None,
    env: dict | None = None,
    quiet: bool = False,
    **kwargs,
) -> Result:
    """Time ``fn`` in a fresh child interpreter; see the module docstring.

    With ``setup``, the child calls ``state = setup(*args, **kwargs)`` once and
    times ``fn(state)``; without it, it times ``fn(*args, **kwargs)``. If ``fn``
    returns a dict, it is stored in ``Result.extra`` (it must be JSON-able).
    ``after(state)`` (needs ``setup``) runs once after the timed runs and after
    peak memory is read, untimed: e.g. to save what ``fn`` left in ``state``;
    a dict it returns is merged into ``extra``.
    ``env`` adds environment variables for the child (e.g. thread counts).
    """
    res = Result(group=group, tool=tool, mb=mb)
    payload = {
        "fn": _fn_ref(fn),
        "setup": _fn_ref(setup) if setup else None,
        "after": _fn_ref(after) if after else None,
        "args": args,
        "kwargs": kwargs,
        "repeat": max(1, int(repeat)),
        "sys_path": [p for p in sys.path if p],
    }
    with tempfile.TemporaryDirectory(prefix="tfbench-") as tmp:
        pin, pout = Path(tmp) / "in.json", Path(tmp) / "out.json"
        try:
            pin.write_text(json.dumps(payload))
        except TypeError as e:
            raise TypeError(f"run_function: arguments must be JSON values (file names, sizes...): {e}") from None
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(pin), str(pout)]
        if not quiet:
            print(f"  running {res.name} ...", end="", flush=True, file=sys.stderr)
        proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, start_new_session=True)
        code, wall, ru_mb = _wait(proc, timeout)
        if code is None:
            res.timeout = timeout
        elif pout.is_file():
            out = json.loads(pout.read_text())
            res.times = out.get("times", [])
            res.peak_rss_mb = out.get("peak_rss_mb") or ru_mb
            res.base_rss_mb = out.get("base_rss_mb")
            res.error = out.get("error")
            if isinstance(out.get("return"), dict):
                res.extra.update(out["return"])
        else:
            res.error = f"child exited with code {code} and no result"
        res.extra.setdefault("child_ru_maxrss_mb", round(ru_mb, 1))
    if not quiet:
        _report(res, wall)
    return res


def interleaved(state: dict, runs: dict[str, Callable[[], Any]]) -> dict:
    """One round of an interleaved comparison, for a timed ``fn`` that calls it.

    Runs each callable of ``runs`` once, in order, timing each, and keeps the
    best time per name across rounds in ``state``. Returns
    ``{"best_<name>": seconds, ...}``. Timed back to back in one process, the
    compared runs meet the same machine: on a shared host, a burst of load
    that would hit one separately-timed row hits both (bench/bpe.py and
    bench/pretokenize.py take their scaling targets from this).
    """
    best = state.setdefault("_interleaved_best", {})
    for name, run in runs.items():
        gc.collect()
        t = time.perf_counter()
        run()
        dt = time.perf_counter() - t
        best[name] = min(best.get(name, dt), dt)
    return {f"best_{k}": v for k, v in best.items()}


def run_command(
    cmd: Sequence[str],
    *,
    group: str,
    tool: str,
    mb: float | None = None,
    repeat: int = 1,
    timeout: float | None = None,
    env: dict | None = None,
    cwd: str | None = None,
    quiet: bool = False,
) -> Result:
    """Run an external command ``repeat`` times; wall time and ``ru_maxrss`` of each run.

    Its output goes to a temporary file (kept in ``extra["output_tail"]`` on
    failure). The timeout applies to each run.
    """
    res = Result(group=group, tool=tool, mb=mb)
    if not quiet:
        print(f"  running {res.name} ...", end="", flush=True, file=sys.stderr)
    wall = 0.0
    for _ in range(max(1, int(repeat))):
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(
                list(cmd),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
            code, wall, ru_mb = _wait(proc, timeout)
            res.peak_rss_mb = max(res.peak_rss_mb or 0.0, ru_mb)
            if code is None:
                res.timeout = timeout
                break
            if code != 0:
                log.seek(0)
                res.error = f"exit code {code}"
                res.extra["output_tail"] = log.read()[-2000:].decode("utf-8", "replace")
                break
            res.times.append(wall)
    if not quiet:
        _report(res, wall)
    return res


def _report(res: Result, wall: float) -> None:
    if res.ok:
        mbps = f", {res.mbps:.2f} MB/s" if res.mbps else ""
        mem = f", peak {res.peak_rss_mb:.0f} MB" if res.peak_rss_mb else ""
        print(f" {res.best:.3f} s{mbps}{mem}", file=sys.stderr, flush=True)
    elif res.timeout is not None:
        print(f" killed after {res.timeout:g} s", file=sys.stderr, flush=True)
    else:
        err = (res.error or "").strip().splitlines()
        print(f" FAILED: {err[-1] if err else res.status()}", file=sys.stderr, flush=True)


def _proc_status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _import_ref(ref: tuple[str, str]):
    mod_name, qualname = ref
    if mod_name.endswith(".py") and os.path.isfile(mod_name):
        sys.path.insert(0, os.path.dirname(mod_name))
        spec = importlib.util.spec_from_file_location("_bench_target", mod_name)
        mod = sys.modules.get("_bench_target")
        if mod is None or getattr(mod, "__file__", None) != mod_name:
            mod = importlib.util.module_from_spec(spec)
            sys.modules["_bench_target"] = mod
            spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(mod_name)
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _child_main(pin: str, pout: str) -> int:
    out: dict[str, Any] = {"times": []}
    try:
        payload = json.loads(Path(pin).read_text())
        for p in reversed(payload["sys_path"]):
            if p not in sys.path:
                sys.path.insert(0, p)
        fn = _import_ref(payload["fn"])
        args, kwargs = payload["args"], payload["kwargs"]
        if payload["setup"]:
            state = _import_ref(payload["setup"])(*args, **kwargs)
            call = lambda: fn(state)  # noqa: E731
        else:
            call = lambda: fn(*args, **kwargs)  # noqa: E731
        gc.collect()
        out["base_rss_mb"] = (_proc_status_kb("VmRSS") or 0) / 1024
        try:  # reset the high-water mark so that setup's transient peak is not counted
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        ret = None
        for _ in range(payload["repeat"]):
            gc.collect()
            t0 = time.perf_counter()
            ret = call()
            out["times"].append(time.perf_counter() - t0)
        hwm = _proc_status_kb("VmHWM")
        out["peak_rss_mb"] = hwm / 1024 if hwm else None
        if isinstance(ret, dict):
            out["return"] = dict(ret)
        if payload.get("after") and payload["setup"]:
            extra = _import_ref(payload["after"])(state)
            if isinstance(extra, dict):
                out.setdefault("return", {}).update(extra)
    except BaseException:
        out["error"] = traceback.format_exc(limit=8)
    try:
        text = json.dumps(out)
    except (TypeError, ValueError):
        out.pop("return", None)
        out["error"] = (out.get("error") or "") + "\nfn returned a dict that is not JSON-able"
        text = json.dumps(out)
    Path(pout).write_text(text)
    return 0


# --------------------------------------------------------------------------
# table and JSON
# --------------------------------------------------------------------------
def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> str:
    """An aligned plain-text table."""
    cells = [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    right = right or [False] * len(headers)

    def line(r):
        return "  ".join(c.rjust(w) if rt else c.ljust(w) for c, w, rt in zip(r, widths, right)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


class Bench:
    """Collects results, prints the table and writes ``bench/results/<name>_*.json``.

    ``baseline`` names the tool every other row of the same group is compared
    with (per group: ``baselines={"encode-batch": "tokenforge-1t"}``).
    """

    def __init__(
        self, name: str, baseline: str | None = None, baselines: dict[str, str] | None = None, meta: dict | None = None
    ):
        self.name = name
        self.baseline = baseline
        self.baselines = dict(baselines or {})
        self.results: list[Result] = []
        self.targets: list[Target] = []
        self.meta = {
            "started": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_start": _loadavg(),
            **(meta or {}),
        }

    def add(self, result: Result) -> Result:
        self.results.append(result)
        return result

    def get(self, group: str, tool: str) -> Result | None:
        for r in self.results:
            if r.group == group and r.tool == tool:
                return r
        return None

    def baseline_of(self, group: str) -> Result | None:
        tool = self.baselines.get(group, self.baseline)
        return self.get(group, tool) if tool else None

    def speedup(self, group: str, tool: str, base_tool: str | None = None) -> float | None:
        """How many times faster the baseline is than ``tool`` (per MB when sizes are known)."""
        r = self.get(group, tool)
        b = self.get(group, base_tool) if base_tool else self.baseline_of(group)
        if not (r and b and r.ok and b.ok):
            return None
        return r.per_mb() / b.per_mb() if r.mb and b.mb else r.best / b.best

    def mem_ratio(self, group: str, tool: str, base_tool: str | None = None) -> float | None:
        """Peak RSS of the baseline / peak RSS of ``tool``."""
        r = self.get(group, tool)
        b = self.get(group, base_tool) if base_tool else self.baseline_of(group)
        if not (r and b and r.ok and b.ok and r.peak_rss_mb and b.peak_rss_mb):
            return None
        return b.peak_rss_mb / r.peak_rss_mb

    def target(
        self, row: str, label: str, measured: float | None, goal: float, higher_is_better: bool = True, unit: str = "x"
    ) -> Target:
        t = Target(row, label, measured, goal, higher_is_better, unit)
        self.targets.append(t)
        return t

    def table(self) -> str:
        headers = ["bench", "tool", "MB", "best s", "MB/s", "peak MB", "ours/theirs", "x faster", "mem o/t", "target"]
        rows = []
        for r in self.results:
            b = self.baseline_of(r.group)
            ratio = speed = mem = ""
            if b is r:
                ratio = "baseline"
            elif b is not None:
                s = self.speedup(r.group, r.tool)
                m = self.mem_ratio(r.group, r.tool)
                ratio = "" if s is None else f"{1 / s:.2f}"
                speed = "" if s is None else f"{s:.2f}x"
                mem = "" if m is None else f"{m:.2f}"
            elif r.group in self.baselines or self.baseline:
                ratio = "n/a"
            best = f"{r.best:.3f}" if r.ok else r.status()
            tg = "; ".join(t.render() for t in self.targets if t.row == r.name)
            rows.append(
                [
                    r.group,
                    r.tool,
                    "" if r.mb is None else f"{r.mb:.1f}",
                    best,
                    "" if r.mbps is None else f"{r.mbps:.2f}",
                    "" if r.peak_rss_mb is None or not r.ok else f"{r.peak_rss_mb:.0f}",
                    ratio,
                    speed,
                    mem,
                    tg,
                ]
            )
        orphan = [t for t in self.targets if t.row not in {r.name for r in self.results}]
        for t in orphan:
            rows.append([t.row.split("/")[0], t.row.split("/", 1)[-1], "", "not run", "", "", "", "", "", t.render()])
        right = [False, False, True, True, True, True, True, True, True, False]
        note = (
            "ours/theirs: baseline time per MB / this row's; x faster: how many times faster the baseline is; "
            "mem o/t: baseline peak RSS / this row's"
        )
        return format_table(headers, rows, right) + "\n" + note

    def print_table(self) -> None:
        print()
        print(self.table())
        load, cpus = self.meta.get("loadavg_start"), os.cpu_count() or 1
        if load is not None and load > 0.5 * cpus:
            print(
                f"WARNING: the machine was busy when the run started (1-minute load {load:.1f} on {cpus} CPUs): "
                "timings are unreliable"
            )
        print()

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "meta": {**self.meta, "loadavg_end": _loadavg()},
            "baseline": self.baseline,
            "baselines": self.baselines,
            "results": [r.to_json() for r in self.results],
            "targets": [dict(dataclasses.asdict(t), status=t.status) for t in self.targets],
        }

    def save(self, directory: Path = RESULTS_DIR) -> Path:
        """Write ``<name>_<timestamp>.json`` and ``<name>_latest.json``; returns the first."""
        directory.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        data = json.dumps(self.to_json(), indent=2) + "\n"
        path = directory / f"{self.name}_{stamp}.json"
        for p in (path, directory / f"{self.name}_latest.json"):
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_text(data)
            os.replace(tmp, p)
        print(f"results written to {path}")
        return path


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(_child_main(sys.argv[2], sys.argv[3]))
    print(__doc__)
