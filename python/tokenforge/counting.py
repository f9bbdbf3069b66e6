"""Counting the pieces of a corpus, here or on a Dask cluster, with one result.

Every trainer that starts from piece counts (BPE, the growing vocabulary's
merge learning, the LZ78 strategies that rank chunks) calls
:func:`count_pieces`. Without a client the documents are fed to one
``_core.WordCounter`` in this process, as always. With one
(:mod:`tokenforge.cluster`), each partition of the corpus
(:mod:`tokenforge.data.partition`) is counted on a worker, and the counters
are merged in a tree (``split_every`` at a time) on the workers as the partitions finish (``map_reduce``); only the merged
counter comes back. Counts are sums, so the result -- and everything a
trainer derives from it -- is the single-machine one: the partitions hold
exactly the single-machine documents.

Texts held in memory (``train_from_iterator``, ``learn_merges``) travel to
the workers in batches, a few per worker at a time, so the client never holds
more than that many batches.

Not handled: normalisations other than NFC (the growing vocabulary's only
one), and weighting documents.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Iterable, Iterator

from . import _core
from .base import feed_in_batches
from .cluster import LocalRunner, runner
from .data.corpus import Texts, corpus_documents
from .data.partition import Partition, auto_target_bytes, partition_documents, plan_partitions
from .progress import progress_bar

__all__ = ["DocRule", "count_pieces", "BATCH_CHARS"]

#: characters per text batch shipped to a worker
BATCH_CHARS = 4 << 20
#: characters per batch handed to the core counter: its UTF-8 copy and per-thread
#: maps live while the batch is counted (1 MB: 4 MB less peak memory than 4 MB
#: batches, at the same speed)
COUNT_BATCH_CHARS = 1 << 20


@dataclasses.dataclass(frozen=True)
class DocRule:
    """What happens to each document before it is counted (plain data: it
    travels to the workers). ``split_at``: cut at these strings, longest
    first, dropping them and empty pieces (seed 003's special tokens);
    ``normalization``: "NFC" or None."""

    split_at: tuple[str, ...] = ()
    normalization: str | None = None

    def apply(self, docs: Iterable[str]) -> Iterator[str]:
        if self.split_at:
            import re

            splitter = re.compile("|".join(re.escape(t) for t in sorted(self.split_at, key=len, reverse=True)))
            docs = (piece for doc in docs for piece in splitter.split(doc) if piece)
        if self.normalization == "NFC":
            docs = (unicodedata.normalize("NFC", d) for d in docs)
        elif self.normalization is not None:
            raise ValueError(f"unknown normalization {self.normalization!r}")
        return iter(docs)


def _count_docs(docs: Iterable[str], pattern, rule: DocRule, num_threads, prune_below: int | None, bar=None):
    counter = _core.WordCounter(pattern)
    feed_in_batches(counter.add_texts, rule.apply(docs), num_threads, COUNT_BATCH_CHARS, bar)
    if prune_below:
        counter.prune_below(prune_below)
    return counter


def count_partition(part: Partition, pattern, rule: DocRule, options: dict, num_threads, prune_below):
    """A worker's task: the piece counts of one partition."""
    return _count_docs(partition_documents(part, **options), pattern, rule, num_threads, prune_below)


def count_texts(texts: list[str], pattern, rule: DocRule, num_threads, prune_below):
    """A worker's task: the piece counts of a batch of texts shipped to it."""
    return _count_docs(texts, pattern, rule, num_threads, prune_below)


def merge_counts(*counters):
    """A worker's task: one counter holding the sum of ``counters`` (unchanged)."""
    return counters[0] if len(counters) == 1 else _core.WordCounter.merged(list(counters))


def count_pieces(
    corpus,
    pattern,
    *,
    client=None,
    who: str = "train",
    rule: DocRule = DocRule(),
    text_field: str = "text",
    split_on: str | None = None,
    errors: str = "strict",
    num_threads: int | None = None,
    progress: bool | None = None,
    target_bytes: int | None = None,
    prune_below: int | None = None,
    split_every: int = 8,
    desc: str = "counting pieces",
):
    """The piece counts (a ``_core.WordCounter``) of ``corpus`` split with ``pattern``.

    ``corpus`` follows the corpus rule (a path or a list of paths; a
    :class:`~tokenforge.data.corpus.Texts` of texts). ``client``: None (count
    here), or a ``distributed.Client``, a scheduler address, or a runner of
    :mod:`tokenforge.cluster`. ``num_threads``: counting threads per task
    (None: all cores here; one per task on a cluster, where Dask runs one task
    per worker thread). ``target_bytes``: the partition size (None: about four
    partitions per worker thread, :func:`~tokenforge.data.partition.auto_target_bytes`).
    ``prune_below`` is the bounded mode
    (``WordCounter.prune_below`` per partition; not exact, see
    :mod:`tokenforge.counting`'s Rust twin); None is exact.
    """
    if prune_below is not None and (
        isinstance(prune_below, bool) or not isinstance(prune_below, int) or prune_below < 1
    ):
        raise ValueError(f"prune_below must be a positive int or None, not {prune_below!r}")
    if client is None:
        docs = corpus_documents(corpus, who=who, text_field=text_field, split_on=split_on, errors=errors)
        with progress_bar(total=None, desc=desc, unit="B", enabled=progress is not False) as bar:
            return _count_docs(docs, pattern, rule, num_threads, prune_below, bar)
    run = runner(client, progress=progress)
    try:
        threads = num_threads if num_threads is not None else (None if isinstance(run, LocalRunner) else 1)
        if isinstance(corpus, Texts):
            return _count_shipped_texts(run, corpus, pattern, rule, threads, prune_below, split_every, desc, who)
        options = {"text_field": text_field, "split_on": split_on, "errors": errors}
        parts = plan_partitions(
            corpus,
            who=who,
            text_field=text_field,
            split_on=split_on,
            errors=errors,
            target_bytes=auto_target_bytes(corpus, run.threads, who=who) if target_bytes is None else target_bytes,
        )
        merged = run.map_reduce(
            count_partition,
            parts,
            pattern,
            rule,
            options,
            threads,
            prune_below,
            merge=merge_counts,
            split_every=split_every,
            desc=desc,
            weights=[p.nbytes for p in parts],
        )
        return run.gather(merged)
    finally:
        if run is not client:
            run.close()


def _count_shipped_texts(run, corpus: Texts, pattern, rule, threads, prune_below, split_every, desc, who):
    """Texts from the client's memory, shipped in batches, ``2 * workers`` at a time."""
    from .data.corpus import iterator_documents

    window = 2 * run.workers
    results = []
    batch: list[str] = []
    size = 0
    pending: list[list[str]] = []

    def flush():
        if pending:
            handles = run.map(count_texts, list(pending), pattern, rule, threads, prune_below, desc=desc)
            results.append(run.reduce(merge_counts, handles, split_every))
            pending.clear()

    for text in iterator_documents(corpus.texts, who=who.replace("train", "train_from_iterator", 1)):
        batch.append(text)
        size += len(text)
        if size >= BATCH_CHARS:
            pending.append(batch)
            batch, size = [], 0
            if len(pending) >= window:
                flush()
    if batch or not (results or pending):
        pending.append(batch)
    flush()
    return run.gather(run.reduce(merge_counts, results, split_every))
