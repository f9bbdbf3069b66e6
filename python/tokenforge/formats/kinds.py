"""A file kind a reader recognises (:class:`Format`), and the one rule that picks
the reader of a path from a list of them (:func:`identify`, :func:`read_any`).

A family module lists its own readers (its public ``file_formats()``, most
specific first); :func:`tokenforge.registry.load` tries every family's list in
the registry's order, and a family's own loader (``BPETokenizer.from_file``)
tries only its own list, both through :func:`read_any`. It sits below the
families and the registry and imports only :mod:`tokenforge.errors`.

Not handled: sniffing more than the first :data:`HEAD_BYTES` bytes of a file (a
sniffer that needs more opens the file itself); choosing between two readers
that both accept a file (the first one in the list wins).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import FormatError

__all__ = ["Format", "HEAD_BYTES", "identify", "read_any", "dir_holding"]

#: how much of a file each sniffer is shown
HEAD_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Format:
    """One file kind a family reads: ``sniff(path, head)`` gets the path and its
    first 4 KiB (b"" for a directory) and says whether ``read(path)`` can read it."""

    name: str
    sniff: Callable[[Path, bytes], bool]
    read: Callable[[Path], Any]


def dir_holding(file_name: str) -> Callable[[Path, bytes], bool]:
    """The sniffer of a family's save directory: a directory holding ``file_name``."""

    def sniff(path: Path, head: bytes) -> bool:
        return path.is_dir() and (path / file_name).is_file()

    return sniff


def identify(
    path: str | os.PathLike[str], formats: Sequence[Format], what: str = "a tokenizer file tokenforge recognises"
) -> Format:
    """The first of ``formats`` whose sniffer says yes to ``path``.

    The sniffers see the first :data:`HEAD_BYTES` bytes of a file (``b""`` for a
    directory); a sniffer that hits an ``OSError`` counts as no. A missing path
    is ``FileNotFoundError``; a path no sniffer accepts is a :class:`FormatError`
    saying it is not ``what`` and listing the kinds that were tried."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    head = b""
    if p.is_file():
        with open(p, "rb") as f:
            head = f.read(HEAD_BYTES)
    for fmt in formats:
        try:
            ok = fmt.sniff(p, head)
        except OSError:
            ok = False
        if ok:
            return fmt
    kinds = ", ".join(f.name for f in formats)
    raise FormatError(f"not {what} (known kinds: {kinds})", path=p)


def read_any(
    path: str | os.PathLike[str], formats: Sequence[Format], what: str = "a tokenizer file tokenforge recognises"
) -> Any:
    """Read ``path`` with the reader :func:`identify` picks from ``formats``."""
    return identify(path, formats, what).read(Path(path))
