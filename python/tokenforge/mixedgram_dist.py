"""Mixedgram training on a Dask cluster (or in this process): the same n-grams, counts and statistics.

:meth:`Mixedgram.train(..., client=...) <tokenforge.mixedgram.Mixedgram.train>`
cuts the training text (the files' bytes joined by ``b"\\n"``, NULs removed)
into *pieces* and runs the level-wise counting of the single machine (see
``src/ngram/count.rs``) with one task per piece and level:

1. each worker reads its piece (a byte range of a file: latin1 needs no
   alignment; with another ``encoding`` a whole file, decoded and turned into
   latin1 there), removes its NULs and keeps the text for the seven levels
   (the handle of :func:`load_piece`); the ``b"\\n"`` between two files is a
   piece of its own;
2. the driver (:class:`tokenforge._core.NgramSelector`) gets every piece's
   length, first and last 7 bytes (:func:`piece_edge`), from which it counts
   the n-grams crossing a cut itself, exactly once;
3. per level n = 2..8 the driver ships the frequent (n-1)-grams once
   (``scatter``), every worker counts its piece's n-grams (:func:`count_level`),
   the counts are merged in a tree (:func:`merge_counts`) and handed to the
   selector, which takes the step ``top_ngrams`` takes (threshold, best list,
   next frequent set).

The selection, and so the tokenizer and its ``.mxgram`` file, is byte-identical
to single-machine training, for any cut (``tests/mixedgram/
test_mixedgram_distributed.py``; Rust proptests in ``src/ngram/dist.rs``).

Not handled: the memory of a level's merged counts sits on the driver as it
does on a single machine (bounded by the distinct n-grams counted at that level,
not divided among the workers); compressed files (``.gz``) are read as their
bytes, as single-machine training reads them; a URL with another encoding than
latin1 is read whole by one worker.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Sequence, TypeGuard

from . import _core
from .cluster import runner, task_threads
from .data.corpus import corpus_files, corpus_paths
from .data.partition import DEFAULT_TARGET_BYTES
from .latin1 import is_latin1, latin1_of_file

__all__ = [
    "DEFAULT_TARGET_BYTES",
    "Piece",
    "plan_pieces",
    "plan_text_pieces",
    "corpus_items",
    "load_piece",
    "piece_edge",
    "count_level",
    "merge_counts",
    "select",
]


@dataclasses.dataclass(frozen=True)
class Piece:
    """One piece of the training text, in order: bytes ``start:end`` of ``path``
    (a local path or an fsspec URL; ``end`` None: the whole file, decoded with
    ``encoding``), or ``data`` itself (the newline between files, or a slice of
    a text given in memory)."""

    path: str | None = None
    start: int = 0
    end: int | None = None
    data: bytes | None = None
    encoding: str = "latin-1"
    errors: str = "strict"

    @property
    def nbytes(self) -> int:
        if self.data is not None:
            return len(self.data)
        return 0 if self.end is None else self.end - self.start


def _is_url(s: object) -> TypeGuard[str]:
    return isinstance(s, str) and "://" in s


def _size(path: str) -> int:
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(path)
        return int(fs.size(p))
    return os.path.getsize(path)


def corpus_items(corpus: object, who: str = "Mixedgram.train") -> list[str]:
    """The files of ``train(corpus)`` as strings, in order; fsspec URLs (``"s3://..."``)
    are kept as given, everything else follows the corpus rule."""
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    out: list[str] = []
    for item in items:
        if _is_url(item):
            out.append(item)
        else:
            out += [str(f) for p in corpus_paths(item, who=who) for f in (corpus_files(p) if p.is_dir() else [p])]
    return out


def plan_pieces(
    files: Sequence[str], *, target_bytes: int, encoding: str = "latin-1", errors: str = "strict"
) -> list[Piece]:
    """The pieces of ``files`` joined by newlines: byte ranges of at most
    ``target_bytes`` (latin1; any cut is fine, the selector counts the n-grams
    across it), whole files for other encodings."""
    if target_bytes < 1:
        raise ValueError(f"partition_bytes must be at least 1, not {target_bytes!r}")
    latin1 = is_latin1(encoding)
    out: list[Piece] = []
    for i, f in enumerate(files):
        if i:
            out.append(Piece(data=b"\n"))
        if not latin1:
            out.append(Piece(path=f, encoding=encoding, errors=errors))
            continue
        size = _size(f)
        for s in range(0, max(size, 1), target_bytes):
            out.append(Piece(path=f, start=s, end=min(s + target_bytes, size)))
    return out


def plan_text_pieces(data: bytes, *, target_bytes: int) -> list[Piece]:
    """Slices of a latin1 text held in memory."""
    if target_bytes < 1:
        raise ValueError(f"partition_bytes must be at least 1, not {target_bytes!r}")
    return [Piece(data=data[s : s + target_bytes]) for s in range(0, max(len(data), 1), target_bytes)]


def _read_range(path: str, start: int, end: int) -> bytes:
    if _is_url(path):
        import fsspec

        with fsspec.open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def load_piece(piece: Piece) -> tuple[bytes, int]:
    """(the piece's latin1 text without NULs, the NULs removed) -- on a worker."""
    if piece.data is not None:
        raw = piece.data
    elif piece.path is None:
        raise ValueError("a Piece holds its data or names its path")
    elif piece.end is not None:
        raw = _read_range(piece.path, piece.start, piece.end)
        if len(raw) != piece.end - piece.start:
            from .errors import CorpusError

            raise CorpusError(
                f"{piece.path}: expected {piece.end - piece.start} bytes at offset {piece.start}, read {len(raw)} "
                "(the file changed while training?)"
            )
    else:
        if _is_url(piece.path):
            import fsspec

            with fsspec.open(piece.path, "rb") as f:
                whole = f.read()
        else:
            whole = Path(piece.path).read_bytes()
        raw = latin1_of_file(whole, piece.path, piece.encoding, piece.errors)
    text, removed = _core.mixedgram_strip_nul(raw)
    return text, removed


def piece_edge(loaded: tuple[bytes, int]) -> tuple[int, int, bytes, bytes]:
    """(NULs removed, length, head, tail) of a loaded piece: what the driver needs."""
    text, removed = loaded
    return (removed, *_core.mixedgram_edge(text))


def count_level(loaded: tuple[bytes, int], n: int, frequent: Any, num_threads: int | None = None) -> _core.NgramCounts:
    """The piece's level-``n`` counts, given the frequent (n-1)-grams."""
    return _core.mixedgram_count_piece(loaded[0], n, frequent, num_threads)


def merge_counts(*parts: _core.NgramCounts) -> _core.NgramCounts:
    return _core.NgramCounts.merge(list(parts))


def select(
    pieces: Sequence[Piece], k: int, *, client: Any = None, num_threads: int | None = None, progress: bool = False
) -> tuple[list[tuple[bytes, int]], dict]:
    """``(top, stats)`` as ``_core.mixedgram_train`` gives them for the whole
    text of ``pieces``, counted by ``client``'s workers (see the module docs)."""
    pieces = list(pieces) or [Piece(data=b"")]
    r = runner(client, progress=progress)
    try:
        weights = [max(p.nbytes, 1) for p in pieces]
        handles = r.map(load_piece, pieces, desc="mixedgram: reading", weights=weights)
        edges = r.gather(r.map(piece_edge, handles, desc="mixedgram: edges", unit="parts"))
        removed = sum(e[0] for e in edges)
        lengths = [max(e[1], 1) for e in edges]
        sel = _core.NgramSelector(k, [e[1:] for e in edges])
        num_threads = task_threads(r, num_threads)
        while (n := sel.level) is not None:
            frequent = sel.frequent()
            shipped = None if frequent is None else r.scatter(frequent)
            counts = r.map(
                count_level, handles, n, shipped, num_threads, desc=f"mixedgram: counting {n}-grams", weights=lengths
            )
            sel.add(r.gather(r.reduce(merge_counts, counts)))
        top, stats = sel.finish()
    finally:
        if r is not client:  # a runner made here (a Client given by the caller stays open)
            r.close()
    stats["nul_removed"] = removed
    return top, stats
