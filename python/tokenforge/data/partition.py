"""Partitions of a corpus: the units of work a cluster hands to its workers.

A :class:`Partition` is one piece of a corpus in corpus order: a whole file,
a byte range of an uncompressed ``.txt``/``.jsonl`` file, or a run of row
groups of a ``.parquet`` file, cut where the single-machine reader ends a
document anyway (see :func:`plan_partitions`). It is plain data (a path or
fsspec URL and a few ints), cheap to ship to a worker.

The one guarantee everything distributed rests on::

    [d for p in plan_partitions(corpus, ...) for d in partition_documents(p, ...)]
        == list(iter_documents(corpus_paths(corpus), ...))

for every ``target_bytes`` (with the same ``text_field``, ``split_on``,
``block_bytes`` and ``errors``): the documents, their order and their text
are those of the single-machine reader, so counts, merges and token streams
computed per partition and combined are the single-machine ones. Errors
(byte offsets in the file, true line numbers) and progress (bytes on disk)
are the single-machine reader's too: one reader
(:func:`tokenforge.data.corpus.file_documents`) serves both.

Where a file is cut (targets every ``target_bytes``; a file no larger than
that stays whole):

``.jsonl``         at the first line start at or after the target.
``.txt`` blocks    at a block start of the whole file's reading: that reading
                   is a chain (the next block starts after the last newline
                   in ``block_bytes`` bytes, or at a character boundary), which
                   the planner follows with one small read backwards from the
                   end of each block's window, never reading the file through.
``.txt split_on``  right after the first separator at or after the target that
                   the reader's left-to-right, non-overlapping scan finds too.
``.parquet``       between row groups (from the file's metadata).
``.gz``/``.zst``   never: a compressed file is one partition.

A cut searched for in :data:`SEARCH_BYTES` bytes after its target and not
found (a line or document longer than that) is skipped: fewer, larger
partitions, never a wrong cut.

Paths may be fsspec URLs (anything with ``"://"``, e.g. ``"s3://bucket/a.jsonl"``
or ``"file:///data/a.txt"``): they are sized and read through fsspec (imported
only for them; the planner's reads are ranged reads, ``fs.cat_file``).

Not handled: a URL naming a directory (list its files yourself: only local
directories are expanded), files that change between planning and reading,
and cheap planning of a ``.txt`` read in blocks whose lines are longer than
the blocks (the planner then reads the long lines through, to find where the
blocks end). Planning ``.txt`` blocks costs one small read per
``block_bytes`` of the file (one request each for a remote file); ``.jsonl``
and ``split_on`` cost one per partition. A range of a ``.jsonl`` file learns
its first line number only when an error must name a line (then it counts the
newlines before it).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Iterator

from ..errors import CorpusError
from ..progress import Progress, progress_bar
from .corpus import (
    _kind,
    _kind_of,
    _supported,
    _utf8_prefix_len,
    check_options,
    corpus_files,
    corpus_paths,
    file_documents,
    file_size,
    is_url,
    open_binary,
    url_filesystem,
)

__all__ = [
    "Partition",
    "plan_partitions",
    "partition_documents",
    "DEFAULT_TARGET_BYTES",
    "auto_target_bytes",
    "TRAIN_BLOCK_BYTES",
    "SEARCH_BYTES",
]

#: the partition size aimed at when planning (bytes on disk)
DEFAULT_TARGET_BYTES = 64 << 20
#: an automatic plan (:func:`auto_target_bytes`) aims at this many partitions per
#: worker thread, in partitions of at least MIN_AUTO_TARGET_BYTES
PARTS_PER_THREAD = 4
MIN_AUTO_TARGET_BYTES = 4 << 20
#: the ``.txt`` block size of the trainers' reader (iter_documents' default)
TRAIN_BLOCK_BYTES = 1 << 20
#: how far past a target the planner looks for a line start or separator
SEARCH_BYTES = 4 << 20
# One planner read: big enough that a scan for the last newline before a
# block's end usually takes one read, small enough that a plan of a large
# file reads a small fraction of it.
_CHUNK = 16 << 10


@dataclasses.dataclass(frozen=True)
class Partition:
    """One unit of work: ``path`` (a local path or an fsspec URL), in corpus
    order ``index``; ``start``/``end`` a byte range of it (``end`` None: to the
    end of the file); ``row_groups`` ``(first, stop)`` the row groups of a
    parquet file it holds (None: all); ``nbytes`` its size on disk, for
    progress (the progress its reading reports)."""

    index: int
    path: str
    start: int = 0
    end: int | None = None
    nbytes: int = 0
    row_groups: tuple[int, int] | None = None

    def describe(self) -> dict:
        """JSON-able identity of the partition (recorded in shard indexes)."""
        groups = None if self.row_groups is None else list(self.row_groups)
        return {"index": self.index, "path": self.path, "start": self.start, "end": self.end, "row_groups": groups}


def plan_partitions(
    corpus: object,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    who: str = "train",
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = TRAIN_BLOCK_BYTES,
    errors: str = "strict",
) -> list[Partition]:
    """The partitions of ``train(corpus)``'s files (the corpus rule of
    :func:`~tokenforge.data.corpus.corpus_paths`; items that are fsspec URLs
    name one file each), in corpus order, each about ``target_bytes`` on disk
    (see the module docstring for where files are cut). ``split_on`` and
    ``block_bytes`` must be those the partitions will be read with."""
    check_options(split_on, block_bytes, errors)
    if not isinstance(target_bytes, int) or isinstance(target_bytes, bool) or target_bytes < 1:
        raise ValueError(f"target_bytes must be a positive int, got {target_bytes!r}")
    parts: list[Partition] = []
    for path in _sources(corpus, who):
        for start, end, nbytes, groups in _plan_file(path, target_bytes, split_on, block_bytes):
            parts.append(Partition(len(parts), path, start, end, nbytes, groups))
    return parts


def auto_target_bytes(corpus: object, threads: int, *, who: str = "train") -> int:
    """The ``target_bytes`` a cluster of ``threads`` task threads plans ``corpus``
    with when the caller names none: about :data:`PARTS_PER_THREAD` partitions
    per thread, within [:data:`MIN_AUTO_TARGET_BYTES`, :data:`DEFAULT_TARGET_BYTES`].

    Why several per thread: tasks are taken in order, so with one partition per
    thread the slowest partition (dense text, a busy machine) sets the end, and
    a 125 MB file at 64 MB per partition keeps one of two workers idle half the
    time; with four, a thread that finishes early takes the next one and the
    tail is a quarter of a share. The floor keeps the per-task costs (a task
    round trip, a counter to merge, a shard directory) small against the work.
    """
    total = sum(file_size(path) for path in _sources(corpus, who))
    per = -(-total // (PARTS_PER_THREAD * max(1, int(threads))))
    return max(MIN_AUTO_TARGET_BYTES, min(DEFAULT_TARGET_BYTES, per))


def partition_documents(
    part: Partition,
    *,
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = TRAIN_BLOCK_BYTES,
    errors: str = "strict",
    progress: bool | Progress | None = None,
) -> Iterator[str]:
    """The documents of one partition, as the single-machine reader yields them
    (the same options as planned with). ``progress``: None/False, True (a bar
    over the partition's bytes) or a Progress updated with bytes read from disk."""
    check_options(split_on, block_bytes, errors)
    path = part.path if is_url(part.path) else Path(part.path)
    if _kind(path) is None:
        raise CorpusError(f"{part.path}: unsupported corpus file suffix; expected {_supported()}")
    options = dict(text_field=text_field, split_on=split_on, block_bytes=block_bytes, errors=errors)
    return _read(part, path, progress, options)


def _read(
    part: Partition, path: str | os.PathLike[str], progress: bool | Progress | None, options: dict
) -> Iterator[str]:
    """The lazy half of :func:`partition_documents`."""
    own_bar = None
    bar: Progress | None
    if progress is True:
        bar = own_bar = progress_bar(total=part.nbytes, desc="reading partition", unit="B")
    else:
        bar = None if progress is False else progress
    try:
        yield from file_documents(
            path, progress=bar, start=part.start, end=part.end, row_groups=part.row_groups, **options
        )
    finally:
        if own_bar is not None:
            own_bar.close()


# ---------------------------------------------------------------------------
# which files
# ---------------------------------------------------------------------------
def _sources(corpus: object, who: str) -> list[str]:
    """The files of the corpus as str: local ones by the corpus rule, URLs as given."""
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    if not any(is_url(item) for item in items):
        return [str(f) for p in corpus_paths(corpus, who=who) for f in corpus_files(p)]
    out = []
    for item in items:
        if is_url(item):
            if _kind(item) is None:
                raise CorpusError(
                    f"{item}: unsupported corpus file suffix; expected {_supported()} "
                    "(a URL must name a file: directories are expanded only when local)"
                )
            out.append(item)
        else:
            out.extend(str(f) for p in corpus_paths(item, who=who) for f in corpus_files(p))
    return out


# ---------------------------------------------------------------------------
# one file
# ---------------------------------------------------------------------------
def _plan_file(path: str, target: int, split_on: str | None, block_bytes: int) -> list[tuple]:
    """``(start, end, nbytes, row_groups)`` of each partition of one file."""
    fmt, compression = _kind_of(path)
    size = file_size(path)
    whole = [(0, None, size, None)]
    if compression or size <= target:
        return whole
    if fmt == ".parquet":
        return _row_group_ranges(path, size, target) or whole
    with _Source(path, size) as src:
        if fmt == ".jsonl":
            cuts = _line_cuts(src, target)
        elif split_on is not None:
            cuts = _separator_cuts(src, target, split_on.encode("utf-8"))
        else:
            cuts = _block_cuts(src, target, block_bytes)
    starts, ends = [0, *cuts], [*cuts, None]
    return [(s, e, (size if e is None else e) - s, None) for s, e in zip(starts, ends)]


class _Source:
    """Ranged reads of one file: seek + read of a local file, ``fs.cat_file``
    of a URL (exactly the bytes asked for, no read-ahead of the file object)."""

    def __init__(self, path: str, size: int) -> None:
        self.path, self.size = path, size
        if is_url(path):
            self.fs, self.inner = url_filesystem(path)
            self.file = None
        else:
            self.file = open(path, "rb", buffering=0)

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()

    def read(self, at: int, n: int) -> bytes:
        """``n`` bytes at offset ``at`` (``at + n <= size``)."""
        if self.file is None:
            data = bytes(self.fs.cat_file(self.inner, start=at, end=at + n))
        else:
            self.file.seek(at)
            pieces, got = [], 0
            while got < n:
                piece = self.file.read(n - got)
                if not piece:
                    break
                pieces.append(piece)
                got += len(piece)
            data = b"".join(pieces)
        if len(data) != n:
            raise CorpusError(
                f"{self.path}: {len(data)} bytes at offset {at}, expected {n} (the file changed while it was planned?)"
            )
        return data


def _occurrences(src: _Source, pat: bytes, first: int, limit: int) -> Iterator[int]:
    """The offsets ``p`` of every occurrence of ``pat`` (overlapping ones too)
    with ``first <= p < limit``, in order, read a bounded window at a time."""
    n = len(pat)
    pos = first
    while pos < limit:
        stop = min(limit, pos + _CHUNK)  # this window's starts: [pos, stop)
        data = src.read(pos, min(src.size, stop + n - 1) - pos)
        i = data.find(pat)
        while 0 <= i < stop - pos:
            yield pos + i
            i = data.find(pat, i + 1)
        pos = stop


def _line_cuts(src: _Source, target: int) -> list[int]:
    """Line starts, the first at or after each target (every ``target`` bytes after the last cut)."""
    cuts, t = [], target
    while t < src.size:
        p = next(_occurrences(src, b"\n", t - 1, min(src.size, t - 1 + SEARCH_BYTES)), None)
        if p is None:  # a line longer than the search: no cut for this target
            t += target
            continue
        if p + 1 >= src.size:
            break
        cuts.append(p + 1)
        t = p + 1 + target
    return cuts


def _separator_cuts(src: _Source, target: int, sep: bytes) -> list[int]:
    """Ends of separators the reader's scan finds, the first at or after each target.

    The reader finds occurrences left to right and skips those that overlap
    one it found (``"aa"`` in ``"aaa"`` is found at 0, not 1). An occurrence
    that overlaps no earlier one is always found: nothing found before it
    covers it. So the cut follows the first occurrence at or after the target
    with no other occurrence starting in the ``len(sep) - 1`` bytes before it.
    """
    n = len(sep)
    cuts, t = [], target
    while t < src.size:
        p, prev = None, None
        for q in _occurrences(src, sep, max(0, t - n + 1), min(src.size, t + SEARCH_BYTES)):
            if q >= t and (prev is None or q - prev >= n):
                p = q
                break
            prev = q
        if p is None:  # a document longer than the search: no cut for this target
            t += target
            continue
        if p + n >= src.size:
            break
        cuts.append(p + n)
        t = p + n + target
    return cuts


class _Window:
    """The last bytes read, so that following the chain of small blocks reads each byte once."""

    def __init__(self, src: _Source) -> None:
        self.src, self.at, self.data = src, 0, b""

    def get(self, lo: int, hi: int) -> bytes:
        if self.at <= lo and hi <= self.at + len(self.data):
            return self.data[lo - self.at : hi - self.at]
        self.at, self.data = lo, self.src.read(lo, min(self.src.size, lo + max(hi - lo, _CHUNK)) - lo)
        return self.data[: hi - lo]


def _block_cuts(src: _Source, target: int, block_bytes: int) -> list[int]:
    """Block starts of the reading of the whole file in ``block_bytes`` blocks,
    the first at or after each target.

    The reader fills a window of ``block_bytes`` bytes from each block start
    ``s`` and ends the block after the window's last newline, or, without
    one, at its last character boundary; when the window reached the end of
    the file, the next block is the rest of the file whatever it holds. So a
    range may start at a block start whose previous window did not reach the
    end: from there a reader that starts afresh fills the same windows.
    """
    window = _Window(src)
    cuts, t, s = [], target, 0
    while s + block_bytes < src.size and t < src.size:
        s = _next_block_start(window, s, block_bytes)
        if s >= t:
            cuts.append(s)
            t = s + target
    return cuts


def _next_block_start(window: _Window, s: int, block_bytes: int) -> int:
    """Where the block that starts at ``s`` ends, its window ``[s, s + block_bytes)``
    lying inside the file; read backwards from the window's end a chunk at a time."""
    hi, tail = s + block_bytes, b""
    while hi > s:
        lo = max(s, hi - _CHUNK)
        chunk = window.get(lo, hi)
        if not tail:
            # the character-boundary rule looks at the last (up to 4) bytes only
            tail = chunk[-8:]
        i = chunk.rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        hi = lo
    return s + block_bytes - len(tail) + _utf8_prefix_len(bytearray(tail))


def _row_group_ranges(path: str, size: int, target: int) -> list[tuple] | None:
    """Runs of row groups of about ``target`` bytes (compressed size, from the
    metadata), or None to keep the file whole (one group, or metadata that
    cannot be read: the reader then reports the problem where it would)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    try:
        if is_url(path):
            with open_binary(path) as f:
                meta = pq.ParquetFile(f).metadata
        else:
            meta = pq.ParquetFile(path).metadata
    except Exception:  # any failure to read is the reader's to report, in corpus order
        return None
    groups = meta.num_row_groups
    if groups < 2:
        return None
    out, first, acc = [], 0, 0
    for g in range(groups):
        rg = meta.row_group(g)
        acc += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if acc >= target and g + 1 < groups:
            out.append((first, g + 1))
            first, acc = g + 1, 0
    out.append((first, groups))

    def share(g: int) -> int:  # the reader's progress after group g (an equal share per group)
        return size * g // groups

    return [(0, None, share(b) - share(a), (a, b)) for a, b in out]
