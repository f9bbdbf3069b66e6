"""Atomic file writes: a crash or an exception never leaves half a file behind.

Data goes to a temporary file in the destination's directory, is flushed and
fsynced, then renamed over the destination (atomic on POSIX). If anything
fails before the rename, the temporary file is removed and the previous file,
if any, is untouched. Every writer in tokenforge (tokenizer files, shards,
indexes, ``.npy`` outputs) goes through :func:`atomic_open`.

What a save does to the file's identity:

- **Mode.** A new file gets the mode ``open()`` would give it (0666 minus the
  umask: the temporary file is created with 0666 and the kernel applies the
  umask and any default ACL). A file that is replaced keeps its permission
  bits (copied onto the temporary file before the rename).
- **Symlinks.** Saving to a symlink writes the file the link points to (the
  temporary file is made beside the *target*, so the rename stays within one
  file system); the link itself is left alone. A dangling link creates its
  target.
- **Leftovers.** A temporary file is named ``.<target name>.tf<pid>-<host>-<random>.tmp``.
  A process killed mid-save (SIGKILL, power cut) leaves one behind; the next
  save of the same target removes those that are clearly stale: written on
  this host by a process that no longer exists, or (from another host or pid
  namespace, or an older tokenforge that named them ``.<name>.<random>.tmp``)
  untouched for :data:`STALE_SECONDS`. A concurrent writer's temporary file
  (its pid alive, or recently modified) is never removed. The directory is
  listed only when it may hold something new: a process remembers the
  directory's mtime after its own saves there and the targets it found clean,
  so rewriting one file after each of many others (a shard index) stays linear;
  writers of many distinct files in a directory they clean themselves (the
  shards) pass ``clean=False``.

Not handled: preserving a replaced file's owner, group, extended attributes or
hard links (the rename gives the path a new inode, as every atomic writer
does); saves to the same path from two processes at once both succeed and the
last rename wins; durability of the rename itself on file systems where
fsyncing the directory is not supported (we try, and ignore the failure); a
leftover that another process makes in the same clock tick (a few ms) as one
of our saves in that directory is noticed only by a later change there or by
the next process (cleaning is a courtesy, never needed for correctness).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

__all__ = [
    "atomic_write",
    "atomic_write_all",
    "atomic_open",
    "resolve_target",
    "clean_stale_temporaries",
    "STALE_SECONDS",
]

#: a temporary file of ours untouched for this long is stale even if we cannot tell whether its writer lives
STALE_SECONDS = 3600.0


@functools.cache
def _host_tag() -> str:
    # Letters and digits only, so the name parses back unambiguously; short to leave room for the target's name.
    # Asked on first write, not at import: socket (like secrets) costs milliseconds that a reader never needs.
    import socket

    h = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:16]
    return h or "host"


# .<name>.tf<pid>-<host>-<random>.tmp (ours) and .<name>.<8 chars>.tmp (tempfile.mkstemp, older versions)
_OURS = re.compile(r"^tf(\d+)-([A-Za-z0-9]+)-[0-9a-f]+$")
_LEGACY = re.compile(r"^[A-Za-z0-9_]{8}$")


# directory -> [its mtime_ns after this process's last save there, targets found with no temporaries left]
_dirs: dict[str, list] = {}
_dirs_lock = threading.Lock()


def resolve_target(path: str | os.PathLike[str]) -> Path:
    """The file a save to ``path`` writes: ``path`` itself, or where its symlink(s) lead."""
    p = Path(path)
    if p.is_symlink():
        # realpath follows every link in the chain (also relative ones) and stops at a dangling end
        return Path(os.path.realpath(p))
    return p


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid we can judge: treat as alive (never delete)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's) or cannot tell
    return True


def clean_stale_temporaries(path: str | os.PathLike[str], *, now: float | None = None) -> list[Path]:
    """Remove stale temporary files left by interrupted saves of ``path``; returns what was removed.

    Only files named like our temporaries *of this target* are considered, and
    only those whose writer is gone (same host, pid not running) or that have
    not been modified for :data:`STALE_SECONDS` are removed. Errors are ignored
    (cleaning is a courtesy; the save itself must not fail because of it).
    """
    return _scan(path, now)[0]


def _scan(path: str | os.PathLike[str], now: float | None = None) -> tuple[list[Path], int]:
    """(removed, how many temporaries of this target were kept or could not be read)."""
    p = Path(path)
    directory = p.parent if str(p.parent) else Path(".")
    prefix, suffix = f".{p.name}.", ".tmp"
    now = time.time() if now is None else now
    removed: list[Path] = []
    kept = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return removed, 1
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)) or len(name) <= len(prefix) + len(suffix):
            continue
        middle = name[len(prefix) : -len(suffix)]
        m = _OURS.match(middle)
        if m is None and _LEGACY.match(middle) is None:
            continue  # not a name we make: not ours to judge
        f = directory / name
        try:
            st = f.lstat()
        except OSError:
            kept += 1
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        stale = now - st.st_mtime > STALE_SECONDS
        if m is not None and m.group(2) == _host_tag() and int(m.group(1)) != os.getpid():
            stale = stale or not _pid_alive(int(m.group(1)))
        if stale:
            try:
                f.unlink()
                removed.append(f)
            except OSError:
                kept += 1
        else:
            kept += 1
    return removed, kept


def _dir_mtime(directory: Path) -> int | None:
    try:
        return os.stat(directory).st_mtime_ns
    except OSError:
        return None


def _clean_before_save(path: Path, directory: Path, clean: bool) -> None:
    key = os.path.abspath(directory)
    mtime = _dir_mtime(directory)
    with _dirs_lock:
        entry = _dirs.get(key)
        if entry is None or mtime is None or entry[0] != mtime:  # changed by someone else: judge afresh
            entry = _dirs[key] = [mtime, set()]
        if not clean or path.name in entry[1]:
            return
    _, kept = _scan(path)
    if not kept:
        with _dirs_lock:
            entry[1].add(path.name)


def _after_save(directory: Path) -> None:
    key = os.path.abspath(directory)
    mtime = _dir_mtime(directory)
    with _dirs_lock:
        entry = _dirs.get(key)
        if entry is not None:
            entry[0] = mtime


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    for _ in range(100):
        tmp = directory / f".{name}.tf{os.getpid()}-{_host_tag()}-{os.urandom(4).hex()}.tmp"
        try:
            # 0o666: the kernel applies the umask (and default ACLs), as for any new file
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not create a unique temporary file", str(directory))


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "wb", encoding: str | None = None, *, clean: bool = True
) -> Iterator[IO]:
    """Open a temporary file beside ``path`` (or beside its symlink's target);
    rename it over that file on success. See the module docstring for modes,
    symlinks and leftovers (``clean``). An ``OSError`` names ``path``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports modes 'w' and 'wb', not {mode!r}")
    shown = os.fspath(path)
    path = resolve_target(path)
    directory = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _clean_before_save(path, directory, clean)
        try:
            keep = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            keep = None
        fd, tmp = _create_temp(directory, path.name)
        try:
            if keep is not None:
                os.fchmod(fd, keep)
            f: IO[Any]
            if mode == "w":
                f = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline="")
            else:
                f = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _after_save(directory)
        _fsync_dir(directory)
    except OSError as e:
        ours = (
            e.filename is None
            or os.fspath(e.filename) == os.fspath(directory)
            or (Path(e.filename).parent == directory and Path(e.filename).name.startswith(f".{path.name}."))
        )
        if e.errno is None or not ours:
            raise
        # name the file the user asked for, not our temporary one (disk full, read-only directory, ...)
        raise OSError(e.errno, e.strerror or os.strerror(e.errno), shown) from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_write_all(items: Sequence[tuple[str | os.PathLike[str], bytes]]) -> None:
    """Write several files as one save: every temporary file is written and
    synced before any is renamed over its target, so a failure while writing
    (disk full, an interruption) replaces none of them. The renames follow in
    reverse order of ``items`` (put the file readers trust first: it is
    replaced last)."""
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(atomic_open(path, "wb")) for path, _ in items]
        for f, (_, data) in zip(files, items):
            f.write(data)
        for f in files:
            f.flush()
            os.fsync(f.fileno())


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str, encoding: str = "utf-8", *, clean: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically (bytes as-is, str encoded)."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_open(path, "wb", clean=clean) as f:
        f.write(data)
