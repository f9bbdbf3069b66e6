"""Following a published growing vocabulary: the sync protocol and its downloader.

:meth:`GrowingBPETokenizer.sync <tokenforge.growing.GrowingBPETokenizer.sync>`
and :meth:`~tokenforge.growing.GrowingBPETokenizer.auto_sync` are thin methods
over this module. The rules live here:

- **Only an extension is taken.** A remote vocabulary replaces the local one
  only if every local merge has the same id there and it has more merges
  (:func:`extension`); an equal or older remote changes nothing; one that
  rewrites a merge, or uses another split pattern or normalisation, is refused.
- **A pinned hash** (``sha256=``) must match the bytes downloaded, else nothing
  changes.
- **Bounded downloads** (:func:`fetch_vocabulary`): one deadline for the whole
  download (connection, headers and body, however slowly the server sends),
  at most ``max_bytes`` (:data:`DEFAULT_MAX_BYTES`), streamed to an anonymous
  temporary file and hashed as it arrives; every failure is a
  :class:`~tokenforge.errors.SyncError` naming the source.
- **AutoSync** (:class:`AutoSync`): a daemon thread that syncs every
  ``interval`` seconds, backs off after failures and stops promptly, also in
  the middle of a download.

The module knows vocabularies (:class:`~tokenforge.formats.growing_json.GrowingData`),
not the tokenizer class: installing a new vocabulary (its lock, its file) stays
in :mod:`tokenforge.growing`; :class:`AutoSync` only calls the tokenizer's ``sync``.
Log messages go to the logger ``tokenforge.growing`` (the name users and the
CLI configure).

Not handled: the time a DNS lookup takes (the resolver cannot be interrupted;
connecting, headers and body are within the deadline); HTTP proxies' own
authentication schemes beyond what urllib does; resuming a broken download
(the next check starts over).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Protocol

import numpy as np

from . import _core
from .errors import FormatError, SyncError, TokenforgeError
from .formats.growing_json import MERGE_OFFSET, GrowingData, parse_growing_json

if TYPE_CHECKING:
    import http.client
    import socket
    import urllib.request


__all__ = [
    "SyncReport",
    "AutoSync",
    "DEFAULT_MAX_BYTES",
    "check_sync_options",
    "fetch_vocabulary",
    "extension",
    "start_auto_sync",
]

log = logging.getLogger("tokenforge.growing")

#: sync refuses remote files larger than this unless told otherwise (``max_bytes=``, ``--max-bytes``).
#: A merge costs about 70 bytes in our tokenizer.json at 7-digit ids (it is listed in ``merges`` and
#: in ``merge_to_tokens``), about 30 in the seed's (``merges`` only). 256 MiB holds ~3.8 million merges
#: in ours (~9 million in the seed's): 38 sources at the seed's ~100K merges each, 15x the largest
#: vocabularies in use (~256K ids). Parsing a file costs a few times its size in memory, so the cap is
#: also the bound on what a sync can make this process hold.
DEFAULT_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class SyncReport:
    """What :meth:`GrowingBPETokenizer.sync <tokenforge.growing.GrowingBPETokenizer.sync>` did.

    ``status`` is "updated" (the remote extended the local vocabulary and was
    taken), "up-to-date" (same merges) or "older" (the remote has fewer merges
    and was ignored).
    """

    source: str
    status: str
    old_next_merge_id: int
    new_next_merge_id: int
    merges_added: int
    sources_changed: dict = field(default_factory=dict)
    written: str | None = None
    sha256: str = ""

    @property
    def updated(self) -> bool:
        return self.status == "updated"

    def __str__(self) -> str:
        if self.status == "updated":
            src = ", ".join(f"{k} +{v}" for k, v in self.sources_changed.items()) or "no source counts"
            where = f"; wrote {self.written}" if self.written else " (in memory only)"
            return (
                f"updated from {self.source}: {self.merges_added} new merges, vocabulary "
                f"{self.old_next_merge_id} -> {self.new_next_merge_id} ({src}){where}"
            )
        if self.status == "up-to-date":
            return f"{self.source} has the same {self.old_next_merge_id - MERGE_OFFSET} merges; nothing to do"
        return (
            f"{self.source} is older ({self.new_next_merge_id - MERGE_OFFSET} merges, local has "
            f"{self.old_next_merge_id - MERGE_OFFSET}); ignored"
        )


# ---- the protocol --------------------------------------------------------------
def _check_max_bytes(max_bytes: object) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)):
        raise TypeError(f"max_bytes must be an int, not {type(max_bytes).__name__}")
    if int(max_bytes) < 1:
        raise TokenforgeError(f"max_bytes must be >= 1, not {int(max_bytes)}")
    return int(max_bytes)


def check_sync_options(
    source: object, sha256: object, timeout: object, max_bytes: object
) -> tuple[str, str | None, float, int]:
    """The options of one sync, checked: ``(source as str, sha256 lower-case or None, timeout, max_bytes)``."""
    src = os.fspath(source) if isinstance(source, os.PathLike) else source
    if not isinstance(src, str) or not src:
        raise TypeError(f"sync source must be a URL or a path, not {type(source).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0 or timeout == float("inf"):
        raise TokenforgeError(f"timeout must be a positive number of seconds, not {timeout!r}")
    max_bytes = _check_max_bytes(max_bytes)
    if sha256 is not None:
        if not isinstance(sha256, str) or len(sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha256):
            raise TokenforgeError(f"sha256 must be 64 hex digits, not {sha256!r}")
        sha256 = sha256.lower()
    return src, sha256, float(timeout), max_bytes


def fetch_vocabulary(
    src: str, *, sha256: str | None, timeout: float, max_bytes: int, cancel: threading.Event | None = None
) -> tuple[GrowingData, str]:
    """``(vocabulary, sha256 hex of the bytes)`` published at ``src`` (a URL or a path).

    Every problem is a :class:`SyncError` saying that nothing changed: the
    download's (see :func:`_fetch`), a ``sha256`` mismatch, bytes that are not
    UTF-8, a document that is not a valid tokenizer.json."""
    with _fetch(src, timeout, max_bytes, cancel) as (body, digest):
        if sha256 is not None and digest != sha256:
            raise SyncError(f"{src}: sha256 mismatch (expected {sha256}, got {digest}); nothing changed")
        raw = body.read(max_bytes + 1)
    if len(raw) > max_bytes:  # a local file that grew while we read it
        raise SyncError(f"{src}: more than the {max_bytes}-byte limit; nothing changed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SyncError(f"{src}: not UTF-8 at byte {e.start}; not a tokenizer.json; nothing changed") from None
    del raw
    try:
        remote = parse_growing_json(text, src)
    except FormatError as e:
        raise SyncError(f"remote tokenizer.json is not valid: {e}; nothing changed") from e
    return remote, digest


def extension(
    local: GrowingData, remote: GrowingData, src: str, digest: str, written: str | None
) -> tuple[SyncReport, GrowingData | None]:
    """The rule of a sync: ``(report, the vocabulary to install or None)``.

    ``remote`` is taken only if it extends ``local`` (same pattern and
    normalisation, every local merge with the same id, more merges); equal or
    fewer merges give "up-to-date" or "older" and None; anything else raises
    :class:`SyncError`. ``written``: the file the caller will write the new
    vocabulary to (for the report), or None."""
    if remote.pattern != local.pattern or remote.normalization != local.normalization:
        what = "split pattern" if remote.pattern != local.pattern else "normalization"
        raise SyncError(
            f"{src} uses another {what} than the local tokenizer; its ids would mean other text. Nothing changed"
        )
    n = min(len(local.pairs), len(remote.pairs))
    if local.pairs[:n] != remote.pairs[:n]:
        k = next(i for i in range(n) if local.pairs[i] != remote.pairs[i])
        la, lb = local.pairs[k]
        ra, rb = remote.pairs[k]
        raise SyncError(
            f"{src} rewrites existing merge {MERGE_OFFSET + k} (local {la}_{lb}, remote {ra}_{rb}); "
            "it does not extend the local vocabulary, so it is refused and nothing changed"
        )
    old_n = local.next_merge_id
    if len(remote.pairs) <= len(local.pairs):
        status = "up-to-date" if len(remote.pairs) == len(local.pairs) else "older"
        return SyncReport(src, status, old_n, remote.next_merge_id, 0, {}, None, digest), None
    new = GrowingData(
        pairs=remote.pairs,
        vocab_size=max(remote.vocab_size, remote.next_merge_id),
        sources_contributed=dict(remote.sources_contributed),
        total_tokens_processed=remote.total_tokens_processed,
        pattern=local.pattern,
        normalization=local.normalization,
    )
    changed = {}
    for name, count in new.sources_contributed.items():
        before = local.sources_contributed.get(name, 0)
        if count != before:
            changed[name] = count - before
    report = SyncReport(
        src, "updated", old_n, new.next_merge_id, len(new.pairs) - len(local.pairs), changed, written, digest
    )
    return report, new


def start_auto_sync(
    tokenizer: Syncable,
    source: str | os.PathLike[str],
    interval: float,
    *,
    sha256: str | None,
    timeout: float,
    path: str | os.PathLike[str] | None,
    max_bytes: int,
    max_backoff: float | None,
    on_update: Callable[[SyncReport], object] | None,
) -> "AutoSync":
    """Check the options of an auto-sync in the caller's thread, then start its :class:`AutoSync` thread."""
    if (
        isinstance(interval, bool)
        or not isinstance(interval, (int, float))
        or not interval > 0
        or interval == float("inf")
    ):
        raise TokenforgeError(f"interval must be a positive number of seconds, not {interval!r}")
    if max_backoff is None:
        max_backoff = max(float(interval), 3600.0)
    elif isinstance(max_backoff, bool) or not isinstance(max_backoff, (int, float)) or not max_backoff >= interval:
        raise TokenforgeError(f"max_backoff must be a number of seconds >= interval ({interval}), not {max_backoff!r}")
    kwargs = {"sha256": sha256, "timeout": timeout, "path": path, "max_bytes": max_bytes}
    # check the arguments now, in the caller's thread, not as a logged failure later
    if sha256 is not None and (not isinstance(sha256, str) or len(sha256) != 64):
        raise TokenforgeError(f"sha256 must be 64 hex digits, not {sha256!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise TokenforgeError(f"timeout must be a positive number of seconds, not {timeout!r}")
    _check_max_bytes(max_bytes)
    handle = AutoSync(tokenizer, source, float(interval), float(max_backoff), kwargs, on_update)
    handle._start()
    return handle


class Syncable(Protocol):
    """What :class:`AutoSync` calls: a tokenizer's ``sync`` (the growing family's)."""

    @property
    def sync(self) -> Callable[..., SyncReport]: ...


class AutoSync:
    """The handle :meth:`GrowingBPETokenizer.auto_sync <tokenforge.growing.GrowingBPETokenizer.auto_sync>` returns: a background thread that syncs periodically.

    ``stop()`` ends it and waits for the thread; ``running``, ``checks``,
    ``updates``, ``failures`` (in a row), ``last_report`` and ``last_error``
    say how it goes; ``wait_for_checks(n, timeout)`` waits until ``n`` checks
    are done. Usable as a context manager (stops on exit).
    """

    def __init__(
        self,
        tokenizer: Syncable,
        source: str | os.PathLike[str],
        interval: float,
        max_backoff: float,
        kwargs: dict,
        on_update: Callable[[SyncReport], object] | None,
    ) -> None:
        self.tokenizer = tokenizer
        self.source = os.fspath(source) if isinstance(source, os.PathLike) else source
        self.interval = interval
        self.max_backoff = max_backoff
        self._kwargs = kwargs
        self._on_update = on_update
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self.checks = 0
        self.updates = 0
        self.failures = 0
        self.last_report: SyncReport | None = None
        self.last_error: BaseException | None = None
        self.next_delay = interval
        self._thread = threading.Thread(target=self._run, name=f"tokenforge-auto-sync({self.source})", daemon=True)

    def _start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _check(self) -> None:
        try:
            report = self.tokenizer.sync(self.source, _cancel=self._stop, **self._kwargs)
        except Exception as e:  # every failure keeps the vocabulary; a bug is logged with its traceback
            if self._stop.is_set():
                return
            self.failures += 1
            self.last_error = e
            self.next_delay = min(self.interval * (2 ** min(self.failures, 60)), self.max_backoff)
            if isinstance(e, TokenforgeError):
                log.warning(
                    "auto-sync from %s failed (%d in a row): %s; next try in %.0f s",
                    self.source,
                    self.failures,
                    e,
                    self.next_delay,
                )
            else:
                log.exception(
                    "auto-sync from %s failed (%d in a row); next try in %.0f s",
                    self.source,
                    self.failures,
                    self.next_delay,
                )
            return
        self.failures = 0
        self.last_error = None
        self.last_report = report
        self.next_delay = self.interval
        if report.updated:
            self.updates += 1
            log.info("auto-sync: %s", report)
            if self._on_update is not None:
                try:
                    self._on_update(report)
                except Exception:
                    log.exception("auto-sync: on_update raised")
        else:
            log.debug("auto-sync: %s", report)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._check()
            with self._cond:
                self.checks += 1
                self._cond.notify_all()
            self._stop.wait(self.next_delay)
        with self._cond:
            self._cond.notify_all()

    def wait_for_checks(self, n: int, timeout: float | None = None) -> bool:
        """Wait until at least ``n`` checks are done (or the thread ended); True if they are."""
        with self._cond:
            self._cond.wait_for(lambda: self.checks >= n or not self._thread.is_alive(), timeout)
            return self.checks >= n

    def stop(self, timeout: float | None = None) -> bool:
        """Stop polling (a download in progress is cut off) and wait for the thread; True if it ended."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (it ends only after :meth:`stop`)."""
        self._thread.join(timeout)

    def __enter__(self) -> "AutoSync":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"AutoSync({self.source!r}, every {self.interval:g} s, {state}, {self.checks} checks, {self.updates} updates)"


# ---- fetching ----------------------------------------------------------------
# How the deadline holds: urllib's ``timeout`` bounds each socket operation, not the download, so a
# server that sends a header byte every few seconds keeps a plain urlopen() forever. Here every
# socket urllib opens (also for redirects and proxies) is registered with a _Deadline, whose timer
# shuts the sockets down when the time is up (or when auto_sync's stop() cancels): a blocked read
# then returns at once, and the error is reported as the timeout it is. Connect gets the remaining
# time as its own timeout. The body goes to an anonymous temporary file (unlinked from the start,
# so nothing is left behind even after SIGKILL) in chunks of 64 KiB, hashed as it arrives.
_CHUNK = 1 << 16


class _Deadline:
    def __init__(self, seconds: float, cancel: threading.Event | None) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self.cancelled = False
        self._cancel = cancel
        self._socks: list = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True
        self._timer.start()
        self._watch = None
        if cancel is not None:
            self._watch = threading.Thread(target=self._watch_cancel, args=(cancel,), daemon=True)
            self._watch.start()

    def _watch_cancel(self, cancel: threading.Event) -> None:
        while not cancel.wait(0.05):
            if self.expired:
                return
        self.cancelled = True
        self.expire()

    def remaining(self) -> float:
        return max(0.001, self.end - time.monotonic())

    def over(self) -> bool:
        return self.expired or time.monotonic() >= self.end or (self._cancel is not None and self._cancel.is_set())

    def register(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self.expired = True  # also ends the cancel watcher
            self._socks.clear()


def _shut(sock: socket.socket) -> None:
    import socket

    try:
        # the plain socket's shutdown also for TLS sockets: it acts on the descriptor, which wakes the reader
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    import http.client
    import socket
    import urllib.request

    def create_connection(
        address: tuple[str, int],
        timeout: object = None,
        source_address: tuple[str, int] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> socket.socket:
        sock = socket.create_connection(address, deadline.remaining(), source_address, *args, **kwargs)
        deadline.register(sock)
        return sock

    def watched(cls: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            kwargs["timeout"] = deadline.remaining()
            conn = cls(host, **kwargs)
            conn._create_connection = create_connection  # type: ignore[attr-defined]  # a private hook typeshed leaves out
            return conn

        return make

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(watched(http.client.HTTPConnection), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(watched(http.client.HTTPSConnection), req, context=self._context)  # type: ignore[attr-defined]  # private, not in typeshed

    return urllib.request.build_opener(HTTP, HTTPS)


def _timed_out(source: str, deadline: _Deadline, during: str) -> SyncError:
    if deadline.cancelled:
        return SyncError(f"{source}: cancelled while {during}; nothing changed")
    return SyncError(f"{source}: timed out after {deadline.seconds:g} s while {during}; nothing changed")


@contextlib.contextmanager
def _fetch(
    source: str, timeout: float, max_bytes: int, cancel: threading.Event | None = None
) -> Iterator[tuple[IO[bytes], str]]:
    """Yield ``(file, sha256 hex)``: the bytes at a URL or path, in a temporary file at offset 0.

    Every failure is a SyncError naming the source: more than ``max_bytes``,
    more than ``timeout`` seconds in all, a refused or broken connection, an
    HTTP error, a truncated body.
    """
    import socket
    import tempfile
    import urllib.error
    import urllib.parse

    scheme = urllib.parse.urlsplit(source).scheme.lower() if "://" in source else ""
    if not scheme:
        p = Path(source)
        try:
            f = open(p, "rb")
        except FileNotFoundError:
            raise SyncError(f"{source}: no such file") from None
        except OSError as e:
            raise SyncError(f"{source}: cannot read ({e.strerror or e})") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise SyncError(f"{source} is {size} bytes, above the {max_bytes}-byte limit; nothing changed")
            h = hashlib.sha256()
            try:
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    h.update(chunk)
                f.seek(0)
            except OSError as e:
                raise SyncError(f"{source}: cannot read ({e.strerror or e})") from None
            yield f, h.hexdigest()
        return
    if scheme not in ("http", "https", "file"):
        raise SyncError(f"{source}: unsupported URL scheme {scheme!r}; use http, https, file or a path")
    import http.client
    import urllib.request

    req = urllib.request.Request(
        source,
        headers={"User-Agent": f"tokenforge/{_core.__version__}", "Accept-Encoding": "identity"},
    )
    deadline = _Deadline(timeout, cancel)
    during = "connecting"
    try:
        with tempfile.TemporaryFile(prefix="tokenforge-sync-") as tmp:
            try:
                with _opener(deadline).open(req, timeout=deadline.remaining()) as resp:
                    during = "downloading"
                    length = resp.headers.get("Content-Length") if scheme != "file" else None
                    if length is not None:
                        try:
                            length = int(length)
                        except ValueError:
                            length = None
                    if length is not None and length > max_bytes:
                        raise SyncError(
                            f"{source}: remote file is {length} bytes, above the {max_bytes}-byte limit; nothing changed"
                        )
                    h = hashlib.sha256()
                    got = 0
                    read = getattr(resp, "read1", resp.read)
                    while True:
                        if deadline.over():
                            raise _timed_out(source, deadline, during)
                        chunk = read(_CHUNK)
                        if not chunk:
                            break
                        got += len(chunk)
                        if got > max_bytes:
                            raise SyncError(
                                f"{source}: remote file exceeds the {max_bytes}-byte limit; nothing changed"
                            )
                        h.update(chunk)
                        tmp.write(chunk)
                    if deadline.over():  # the reads ended because the deadline shut the socket
                        raise _timed_out(source, deadline, during)
                    if length is not None and got != length:
                        raise SyncError(f"{source}: truncated download ({got} of {length} bytes); nothing changed")
            except SyncError:
                raise
            except urllib.error.HTTPError as e:
                raise SyncError(f"{source}: HTTP {e.code} {e.reason}; nothing changed") from None
            except Exception as e:
                if deadline.over():
                    raise _timed_out(
                        source, deadline, "waiting for the server" if during == "connecting" else during
                    ) from None
                if isinstance(e, urllib.error.URLError):
                    reason = e.reason
                    if isinstance(reason, (socket.timeout, TimeoutError)):
                        raise _timed_out(source, deadline, during) from None
                    if isinstance(reason, ConnectionRefusedError):
                        raise SyncError(f"{source}: connection refused; nothing changed") from None
                    raise SyncError(f"{source}: cannot fetch ({reason}); nothing changed") from None
                if isinstance(e, (socket.timeout, TimeoutError)):
                    raise _timed_out(source, deadline, during) from None
                if isinstance(e, http.client.IncompleteRead):
                    raise SyncError(
                        f"{source}: truncated download ({len(e.partial)} bytes received); nothing changed"
                    ) from None
                if isinstance(e, ConnectionError):
                    raise SyncError(f"{source}: connection failed ({e}); nothing changed") from None
                if isinstance(e, (http.client.HTTPException, OSError)):
                    raise SyncError(f"{source}: download failed ({type(e).__name__}: {e}); nothing changed") from None
                raise
            finally:
                deadline.close()
            tmp.seek(0)
            yield tmp, h.hexdigest()
    except OSError as e:  # the temporary file itself (disk full in the temp directory)
        raise SyncError(
            f"{source}: cannot store the download in a temporary file ({e.strerror or e}); nothing changed"
        ) from None
