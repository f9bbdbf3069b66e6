"""Atomic file writes: a crash or an exception never leaves half a file behind.

Data goes to a temporary file in the destination's directory, is flushed and
fsynced, then renamed over the destination (atomic on POSIX). If anything
fails before the rename, the temporary file is removed and the previous file,
if any, is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_write", "atomic_open"]


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` on success."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports modes 'w' and 'wb', not {mode!r}")
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        if mode == "w":
            f = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline="")
        else:
            f = os.fdopen(fd, "wb")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path, data: bytes | str, encoding: str = "utf-8") -> None:
    """Write ``data`` to ``path`` atomically (bytes as-is, str encoded)."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_open(path, "wb") as f:
        f.write(data)
