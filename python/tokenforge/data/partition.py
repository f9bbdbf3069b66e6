"""Partitions of a corpus: the units of work a cluster hands to its workers.

A :class:`Partition` is one piece of a corpus in corpus order: a whole file,
or a byte range of an uncompressed ``.txt``/``.jsonl`` file cut where the
single-machine reader would end a document anyway (see
:func:`plan_partitions`). It is plain data (a path or fsspec URL and a few
ints), cheap to ship to a worker.

The one guarantee everything distributed rests on::

    [d for p in plan_partitions(corpus, ...) for d in partition_documents(p, ...)]
        == list(iter_documents(corpus_paths(corpus), ...))

for every ``target_bytes``: the documents, their order and their text are
those of the single-machine reader, so counts, merges and token streams
computed per partition and combined are the single-machine ones.

Not handled: (this first version) byte ranges: every partition is a whole file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

from .corpus import corpus_files, corpus_paths, iter_documents

__all__ = ["Partition", "plan_partitions", "partition_documents", "DEFAULT_TARGET_BYTES", "TRAIN_BLOCK_BYTES"]

#: the partition size aimed at when planning (bytes on disk)
DEFAULT_TARGET_BYTES = 64 << 20
#: the ``.txt`` block size of the trainers' reader (iter_documents' default)
TRAIN_BLOCK_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Partition:
    """One unit of work: ``path`` (a local path or an fsspec URL), in corpus
    order ``index``; ``start``/``end`` a byte range of it (``end`` None: to the
    end of the file); ``nbytes`` its size on disk, for progress."""

    index: int
    path: str
    start: int = 0
    end: int | None = None
    nbytes: int = 0

    def describe(self) -> dict:
        """JSON-able identity of the partition (recorded in shard indexes)."""
        return {"index": self.index, "path": self.path, "start": self.start, "end": self.end}


def plan_partitions(
    corpus,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    who: str = "train",
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = TRAIN_BLOCK_BYTES,
    errors: str = "strict",
) -> list[Partition]:
    """The partitions of ``train(corpus)``'s files (the corpus rule of
    :func:`~tokenforge.data.corpus.corpus_paths`), in corpus order."""
    files = [f for p in corpus_paths(corpus, who=who) for f in corpus_files(p)]
    return [Partition(i, str(f), 0, None, f.stat().st_size) for i, f in enumerate(files)]


def partition_documents(
    part: Partition,
    *,
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = TRAIN_BLOCK_BYTES,
    errors: str = "strict",
    progress=None,
) -> Iterator[str]:
    """The documents of one partition, as the single-machine reader yields them."""
    return iter_documents(
        [Path(part.path)],
        text_field=text_field,
        split_on=split_on,
        block_bytes=block_bytes,
        errors=errors,
        progress=progress,
    )
