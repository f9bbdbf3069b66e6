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
import os
import re
import tempfile
import unicodedata
from contextlib import closing
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import _core
from .batching import batched, feed_in_batches, read_ahead
from .cluster import Runner, runner, task_threads
from .data.corpus import (
    Texts,
    check_options,
    corpus_documents,
    corpus_files,
    corpus_paths,
    file_documents,
    is_jsonl,
    is_url,
    jsonl_block_documents,
    jsonl_blocks,
)
from .data.partition import Partition, auto_target_bytes, partition_documents, plan_partitions
from .errors import TokenforgeError, warn_user
from .progress import Progress, progress_bar

__all__ = ["DocRule", "count_pieces", "BATCH_CHARS", "memory_budget", "parse_memory", "settle_budget", "settle_shared"]

#: characters per text batch shipped to a worker
BATCH_CHARS = 4 << 20
#: characters per batch handed to the core counter: its UTF-8 copy and per-thread
#: maps live while the batch is counted (1 MB: 4 MB less peak memory than 4 MB
#: batches, at the same speed)
COUNT_BATCH_CHARS = 1 << 20
#: a memory budget's shares: the counting table spills past SPILL_SHARE of it (the
#: per-thread tables of a batch and the batch itself come on top while it is counted,
#: and the runs' merge keeps a read buffer per run), and training keeps the pieces whose
#: cost (``_core`` ``train_cost``: the merge loop's arena and pair positions) fits KEEP_SHARE
SPILL_SHARE = 0.35
KEEP_SHARE = 0.6
#: the default budget: this share of the available memory
DEFAULT_SHARE = 0.75
#: a budget nothing passes: counted in memory, nothing dropped (parity training's dev
#: texts, kept whole, their cost charged to the real budget before the training text's)
UNBOUNDED = 1 << 62
#: the smallest budget accepted (the interpreter and the batch buffers alone take tens of MB)
MIN_BUDGET = 16 << 20
#: a budget whose kept pieces make up less of the corpus's piece occurrences is an error
MIN_COVERAGE = 0.5
#: bytes of JSON lines per block handed to the core counter (read, parsed, split and
#: counted on every thread; the block, the next one being read, and one unescaped copy
#: live while it is counted). 16 MB: each thread's table of a block then sums four times
#: the text before its counts are added to the counter's, one cache miss per distinct
#: piece: 2 GB of web-like text, one thread: 35.4 M such additions instead of 49.7 M,
#: 12.64 CPU s instead of 13.58 (0.25 GB: 1.41-1.48 instead of 1.65-1.68); 64 MB was
#: slower (1.64: the per-thread tables outgrow the caches). Under a memory budget a
#: block is at most BLOCK_SHARE of it (at least 1 MB): 16 MB blocks, read ahead, held
#: ~64 MB more than a 48 MB budget's child had room for (tests/memory_limit.py)
COUNT_BLOCK_BYTES = 16 << 20
BLOCK_SHARE = 1 / 32


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


def _count_docs(
    docs: Iterable[str],
    pattern: str | None,
    rule: DocRule,
    num_threads: int | None,
    prune_below: int | None,
    bar: Progress | None = None,
) -> _core.WordCounter:
    counter = _core.WordCounter(pattern)
    feed_in_batches(counter.add_texts, rule.apply(docs), num_threads, COUNT_BATCH_CHARS, bar)
    if prune_below:
        counter.prune_below(prune_below)
    return counter


def _local_files(corpus: object, who: str) -> list[Path] | None:
    """The local files of ``train(corpus)`` in reading order; None for texts or fsspec URLs."""
    if isinstance(corpus, Texts):
        return None
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    if any(is_url(item) for item in items):
        return None
    return [f for p in corpus_paths(corpus, who=who) for f in corpus_files(p)]


def parse_memory(value: object) -> int:
    """Bytes from an int or a str such as ``"4GB"``, ``"512 MiB"``, ``"1e9"``
    (k/M/G/T: powers of 1000; Ki/Mi/Gi/Ti: of 1024)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"max_memory must be an int (bytes) or a str such as '4GB', not {type(value).__name__}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([kKMGT]i?)?[bB]?\s*", value)
        if m is None:
            raise ValueError(f"max_memory {value!r}: expected a size such as '4GB', '512MiB' or a number of bytes")
        unit = m.group(2) or ""
        scale = (1024 if unit.endswith("i") else 1000) ** (" KMGT".index(unit[:1].upper()) if unit else 0)
        n = int(float(m.group(1)) * scale)
    if n < MIN_BUDGET:
        raise ValueError(f"max_memory must be at least {MIN_BUDGET >> 20} MiB, got {value!r}")
    return n


def available_memory() -> int | None:
    """The system's available memory in bytes (``MemAvailable`` of /proc/meminfo), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_budget(max_memory: int | str | None) -> int | None:
    """The budget in bytes: ``max_memory`` parsed, or None -> ``DEFAULT_SHARE`` of the
    available memory (None, unbounded, where it cannot be read)."""
    if max_memory is not None:
        return parse_memory(max_memory)
    avail = available_memory()
    return None if avail is None else max(MIN_BUDGET, int(avail * DEFAULT_SHARE))


def spill_parent(tmp_dir: str | os.PathLike[str] | None) -> str:
    """The directory counting spills under: ``tmp_dir``, or the system's temporary directory."""
    return tempfile.gettempdir() if tmp_dir is None else os.fspath(tmp_dir)


def settle_budget(counter: Any, budget: int, who: str) -> tuple[int, int, int]:
    """The end of counting under a budget: exact counts from the runs, the pieces that
    fit training's share of it kept, and a warning saying exactly what was dropped.
    ``counter``: anything with ``settle``, ``unique`` and ``total_pieces`` (a
    ``WordCounter``, an ``Lz78Trainer``'s chunk counts). Returns (distinct pieces
    dropped, their occurrences, the count threshold), all 0 when nothing was."""
    return _settle(counter, budget, int(budget * KEEP_SHARE), 1 / KEEP_SHARE, who, "the memory budget")


def settle_shared(
    counters: list[Any], names: list[str], budget: int, who: str, held: int = 0
) -> list[tuple[int, int, int]]:
    """:func:`settle_budget` for several counters under one budget (parity training's
    languages, ``names``): each gets the share of training's part of the budget
    (less ``held``, the training cost of what is kept whole beside them) that its
    distinct pieces would cost (``WordCounter.train_cost_total``), so nothing is
    dropped from any of them when all fit, and otherwise each keeps its most
    frequent pieces in the same fraction of its own cost. Returns each one's drop."""
    keep = int(budget * KEEP_SHARE) - held
    if keep <= 0:
        raise TokenforgeError(
            f"{who}: max_memory={budget} bytes: the memory budget is too small: what is kept whole (the dev texts) "
            f"takes about {held} bytes for training, all of its {int(budget * KEEP_SHARE)} bytes for it; a budget "
            f"of at least {int(2 * held / KEEP_SHARE)} bytes"
        )
    costs = [int(c.train_cost_total()) for c in counters]
    total = max(1, sum(costs))
    out = []
    for c, name, cost in zip(counters, names, costs):
        if total <= keep or cost == 0:
            out.append(_settle(c, budget, keep, 1 / KEEP_SHARE, f"{who} ({name})", "the memory budget"))
            continue
        # a share of keep in proportion to the cost: the budget that would keep
        # a given cost here is that cost times total / (cost * KEEP_SHARE)
        share = keep * cost // total
        what = f"its {100 * cost / total:.1f}% share of the memory budget"
        out.append(_settle(c, budget, share, total / (cost * KEEP_SHARE), f"{who} ({name})", what))
    return out


def _settle(counter: Any, budget: int, keep: int, per_keep: float, who: str, what: str) -> tuple[int, int, int]:
    """``counter.settle(keep)`` with the budget's error and warning (``what``: the part of it held)."""
    try:
        dropped, occurrences, below = counter.settle(keep, MIN_COVERAGE, per_keep)
    except TokenforgeError as e:
        raise TokenforgeError(f"{who}: max_memory={budget} bytes: {e}") from None
    if dropped:
        warn_user(
            f"{who}: {what} of {budget} bytes holds {counter.unique} distinct pieces: dropped the "
            f"{dropped} pieces counted fewer than {below} times ({occurrences} occurrences, "
            f"{100 * occurrences / max(1, counter.total_pieces):.2f}% of the corpus's pieces); the file records "
            "it (budget_dropped_*). A larger max_memory keeps them"
        )
    return dropped, occurrences, below


def _count_files(
    counter: _core.WordCounter,
    files: list[Path],
    text_field: str,
    split_on: str | None,
    errors: str,
    num_threads: int | None,
    bar: Progress | None,
    block_bytes: int,
) -> None:
    """The piece counts of local files, documents as :func:`~tokenforge.data.corpus.iter_documents`
    reads them. JSON lines go to the core a block at a time (``WordCounter.add_jsonl_block``):
    no Python string per document -- ``json.loads`` and a str per line cost more than splitting
    and counting the text (bench/scale.py's profile) -- and the core answers None for a block
    with a line only Python's reader reads right (or reports right), which then reads it."""
    for path in files:
        if not is_jsonl(path):
            docs = file_documents(path, text_field=text_field, split_on=split_on, errors=errors)
            feed_in_batches(counter.add_texts, docs, num_threads, COUNT_BATCH_CHARS, bar)
            continue
        lines = 0  # lines of the file before the block
        # the next block is read while the core counts this one; closed (its thread
        # stopped, the file closed) as soon as counting stops, an error too. `hold`:
        # each counting thread keeps its most counted pieces from block to block,
        # added to the counter's table once, by flush() (the Rust WordCounter's notes)
        try:
            with closing(read_ahead(jsonl_blocks([path], block_bytes, progress=bar))) as blocks:
                for block in blocks:
                    args = (block.head, block.body, block.end, text_field, block.offset == 0, num_threads)
                    got = counter.add_jsonl_block(*args, hold=True)
                    if got is None:
                        docs = jsonl_block_documents(block, lines + 1, text_field, errors)
                        feed_in_batches(counter.add_texts, docs, num_threads, COUNT_BATCH_CHARS)
                        got = block.count_lines()
                    lines += got
        finally:
            counter.flush()


def count_partition(
    part: Partition, pattern: str | None, rule: DocRule, options: dict, num_threads: int | None, prune_below: int | None
) -> _core.WordCounter:
    """A worker's task: the piece counts of one partition."""
    return _count_docs(partition_documents(part, **options), pattern, rule, num_threads, prune_below)


def count_texts(
    texts: list[str], pattern: str | None, rule: DocRule, num_threads: int | None, prune_below: int | None
) -> _core.WordCounter:
    """A worker's task: the piece counts of a batch of texts shipped to it."""
    return _count_docs(texts, pattern, rule, num_threads, prune_below)


def merge_counts(*counters: _core.WordCounter) -> _core.WordCounter:
    """A worker's task: one counter holding the sum of ``counters`` (unchanged)."""
    return counters[0] if len(counters) == 1 else _core.WordCounter.merged(list(counters))


def count_pieces(
    corpus: object,
    pattern: str | None,
    *,
    client: Any = None,
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
    max_memory: int | str | None = None,
    tmp_dir: str | os.PathLike[str] | None = None,
    budget_share: float = 1.0,
    settle: bool = True,
) -> _core.WordCounter:
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

    ``max_memory`` (bytes, or ``"4GB"``; None: ``DEFAULT_SHARE`` of the available
    memory), counting here: the table spills sorted runs to a new directory under
    ``tmp_dir`` (None: the system's) past ``SPILL_SHARE`` of it, the runs are
    merged into exact counts, and the most frequent pieces whose training cost
    fits ``KEEP_SHARE`` of it are kept (``WordCounter.settle``; a warning says
    what was dropped, ``counter.budget_dropped`` records it). Counts are exact,
    and identical to unbounded counting, whenever nothing had to be dropped.
    With a client, the budget holds the same way on the client: each partition's
    counter comes back as its task finishes and is merged into the client's
    spilling counter (no tree of merges on the workers; a worker holds only the
    counters of its own partitions until the client takes them).

    ``budget_share`` and ``settle=False`` are for callers that count several
    corpora under one budget (parity training): the table spills past
    ``budget_share`` of the budget's spill share, and the caller settles (and
    then applies ``prune_below`` when counting here).
    """
    if prune_below is not None and (
        isinstance(prune_below, bool) or not isinstance(prune_below, int) or prune_below < 1
    ):
        raise ValueError(f"prune_below must be a positive int or None, not {prune_below!r}")
    budget = memory_budget(max_memory)
    counter = _core.WordCounter(pattern)
    if budget is not None:
        counter.spill_to(spill_parent(tmp_dir), int(budget * SPILL_SHARE * budget_share))
    if client is None:
        with progress_bar(total=None, desc=desc, unit="B", enabled=progress is not False) as bar:
            files = _local_files(corpus, who)
            if files is not None and rule == DocRule():
                check_options(split_on, 1 << 20, errors)
                block = COUNT_BLOCK_BYTES
                if budget is not None:
                    block = min(block, max(1 << 20, int(budget * BLOCK_SHARE)))
                _count_files(counter, files, text_field, split_on, errors, num_threads, bar, block)
            else:
                docs = corpus_documents(corpus, who=who, text_field=text_field, split_on=split_on, errors=errors)
                feed_in_batches(counter.add_texts, rule.apply(docs), num_threads, COUNT_BATCH_CHARS, bar)
        if budget is not None and settle:
            settle_budget(counter, budget, who)
        if prune_below and (settle or budget is None):  # else the caller prunes once it has settled
            counter.prune_below(prune_below)
        return counter
    run = runner(client, progress=progress)
    try:
        threads = task_threads(run, num_threads)
        into = counter if budget is not None else None
        tasks = _Tasks(pattern, rule, threads, prune_below, split_every, desc, who, into)
        if isinstance(corpus, Texts):
            got = _count_shipped_texts(run, corpus, tasks)
        else:
            options = {"text_field": text_field, "split_on": split_on, "errors": errors}
            got = _count_partitions(run, corpus, tasks, options, target_bytes)
    finally:
        if run is not client:
            run.close()
    if budget is not None and settle:
        settle_budget(got, budget, who)
    return got


@dataclasses.dataclass(frozen=True)
class _Tasks:
    """How the counting tasks of a cluster run and come together: each task's
    arguments, the merge tree's width, the progress label, and ``into``: None
    (the workers merge the counters in a tree, and the root comes back), or the
    client's spilling counter (a budget), each task's counter merged into it
    here as the task finishes."""

    pattern: str | None
    rule: DocRule
    threads: int | None
    prune_below: int | None
    split_every: int
    desc: str
    who: str
    into: _core.WordCounter | None


def _count_partitions(
    run: Runner, corpus: object, t: _Tasks, options: dict, target_bytes: int | None
) -> _core.WordCounter:
    """The corpus's partitions counted on the workers (see :class:`_Tasks`)."""
    parts = plan_partitions(
        corpus,
        who=t.who,
        **options,
        target_bytes=auto_target_bytes(corpus, run.threads, who=t.who) if target_bytes is None else target_bytes,
    )
    weights = [p.nbytes for p in parts]
    args = (t.pattern, t.rule, options, t.threads, t.prune_below)
    if t.into is not None:
        run.map_each(count_partition, parts, *args, consume=t.into.merge, desc=t.desc, weights=weights)
        return t.into
    merged = run.map_reduce(
        count_partition, parts, *args, merge=merge_counts, split_every=t.split_every, desc=t.desc, weights=weights
    )
    return run.gather(merged)


def _count_shipped_texts(run: Runner, corpus: Texts, t: _Tasks) -> _core.WordCounter:
    """Texts from the client's memory, shipped in batches, ``2 * workers`` at a time
    (see :class:`_Tasks`)."""
    from .data.corpus import iterator_documents

    window = 2 * run.workers
    results = []
    pending: list[list[str]] = []

    args = (t.pattern, t.rule, t.threads, t.prune_below)

    def flush() -> None:
        if not pending:
            return
        if t.into is not None:
            run.map_each(count_texts, list(pending), *args, consume=t.into.merge, desc=t.desc)
        else:
            handles = run.map(count_texts, list(pending), *args, desc=t.desc)
            results.append(run.reduce(merge_counts, handles, t.split_every))
        pending.clear()

    for batch in batched(
        iterator_documents(corpus.texts, who=t.who.replace("train", "train_from_iterator", 1)), BATCH_CHARS
    ):
        pending.append(batch)
        if len(pending) >= window:
            flush()
    if not (results or pending):
        pending.append([])  # no text at all: one empty count, as here
    flush()
    if t.into is not None:
        return t.into
    return run.gather(run.reduce(merge_counts, results, t.split_every))
