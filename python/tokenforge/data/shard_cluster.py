"""Pretokenizing on a Dask cluster: one task per corpus partition (index version 3).

What :func:`~tokenforge.data.shards.pretokenize` does with ``client``; the
rule is in the comment block below, the layout in :mod:`tokenforge.data.shards`.
Each task runs the single-machine writer (:mod:`tokenforge.data.shard_writer`)
into its partition's sub-directory; the client writes the top-level index.

Not handled: see the comment block below (destinations other than local paths,
two live attempts of one task, losing every worker holding the tokenizer).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cluster import Runner, runner, task_threads
from .corpus import (
    Texts,
    check_errors,
    corpus_source,
)
from .fingerprint import tokenizer_fingerprint
from .partition import Partition, _sources, auto_target_bytes, plan_partitions
from .shard_reader import FORMAT, INDEX_FILE, VERSION, ShardError, ShardSet, _partition_dir, _read_index, _write_index
from .shard_writer import (
    _check_options,
    _check_settings,
    _clean_unlisted,
    _describe_source,
    _output_dir,
    _Pretokenizer,
    _settings,
)

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["pretokenize_on"]

# ---------------------------------------------------------------------------
# pretokenize(..., client=...): one task per corpus partition on a Dask cluster
# ---------------------------------------------------------------------------
# Pretokenizing on a Dask cluster: :func:`~tokenforge.data.shards.pretokenize` with ``client=``.
#
# The corpus is split into partitions (:func:`~tokenforge.data.partition.plan_partitions`);
# each becomes one task, which runs the single-machine pretokenizer of
# :mod:`tokenforge.data.shards` on that partition's documents
# (:func:`~tokenforge.data.partition.partition_documents`) into its own
# sub-directory. The directory then holds (index version 3)::
#
#     index.json              written first (settings; complete false), listing the
#                             shards of the finished partitions that begin the corpus
#                             (also after an error or Ctrl-C), and last (every shard,
#                             complete true)
#     part_00000/             partition 0: a complete single-directory shard set
#         index.json          (version 2; its "source" is the partition)
#         shard_00000.npy, shard_00000.docs.npy, ...
#     part_00001/ ...
#
# The top-level index records the settings of a single-machine index, with
# ``"source": {"kind": "partitions", "partitions": [...]}`` (each partition's
# ``dir``, ``Partition.describe()`` and size), and lists every shard of every
# partition, in partition order, by its path ``part_NNNNN/shard_MMMMM.npy``.
# Read through :class:`~tokenforge.data.shards.ShardSet`, the token stream, the
# document boundaries and the byte and character counts are those of the
# single-machine run on the same corpus; only the shard files differ (a
# partition always starts a new shard).
#
# How it runs: the client plans the partitions (without ``partition_bytes``,
# about four per worker thread, so that a worker that finishes early takes more;
# an unfinished job keeps the partitions its index records), compares the settings with an
# index already there (a different tokenizer, shard size, corpus or partitioning
# is refused; ``overwrite=True`` starts again), skips every partition whose
# sub-index is complete with these settings (an interrupted client resumes
# without redoing them), sends the tokenizer to the workers once
# (``runner.scatter``; a tokenizer pickles as the bytes of its own file) and runs
# one task per remaining partition (``runner.map``, progress in partition
# bytes). A worker that dies mid-task: Dask runs the task again elsewhere, and
# the single-machine resume takes over inside the partition (listed shards kept,
# the rest rewritten), so the result is the same. Each task checks that the
# tokenizer it received has the client's fingerprint. At the end the client reads
# every sub-index, checks it, and writes the top-level index atomically.
#
# ``client`` is a ``distributed.Client``, a scheduler address, or a
# :class:`tokenforge.cluster.LocalRunner` (the same code path in this process,
# one partition after the other).
#
# Not handled: destinations other than local paths and ``file://`` URLs (on a
# real cluster: a shared filesystem mounted at the same path on the client and
# every worker); the JSON-lines block encoder reads local files only (a
# partition of an fsspec URL goes through the Python reader); two live attempts of
# the same task at once (a worker Dask wrongly declared dead while it still
# writes) may disturb each other's temporary files; and losing every worker
# that holds the scattered tokenizer at once fails the job (run it again: it
# resumes).


def pretokenize_on(
    client: Any,
    corpus: object,
    tokenizer: Tokenizer,
    out_dir: str | os.PathLike[str],
    *,
    partition_bytes: int | None,
    shard_tokens: int,
    num_threads: int | None,
    batch_chars: int,
    bos: bool,
    text_field: str,
    split_on: str | None,
    progress: bool | None,
    overwrite: bool,
    errors: str,
) -> ShardSet:
    """:func:`~tokenforge.data.shards.pretokenize` with ``client`` (see the module docstring)."""
    _check_options(shard_tokens, batch_chars, num_threads)
    check_errors(errors)
    out = _output_dir(out_dir)
    with runner(client, progress=progress) as r:
        parts = _plan(
            corpus,
            partition_bytes,
            threads=r.threads,
            resume=None if overwrite else out,
            text_field=text_field,
            split_on=split_on,
            errors=errors,
        )
        return _run(
            r,
            parts,
            tokenizer,
            out,
            shard_tokens,
            num_threads,
            batch_chars,
            bos,
            text_field,
            split_on,
            overwrite,
            errors,
        )


def _run(
    r: Runner,
    parts: list[Partition],
    tokenizer: Tokenizer,
    out: Path,
    shard_tokens: int,
    num_threads: int | None,
    batch_chars: int,
    bos: bool,
    text_field: str,
    split_on: str | None,
    overwrite: bool,
    errors: str,
) -> ShardSet:
    """The job on runner ``r``, once the partitions are planned."""
    source = {
        "kind": "partitions",
        "partitions": [{"dir": _partition_dir(p.index), **p.describe(), "bytes": p.nbytes} for p in parts],
    }
    settings = _settings(
        tokenizer,
        out,
        bos=bos,
        shard_tokens=shard_tokens,
        source=source,
        text_field=text_field,
        split_on=split_on,
        errors=errors,
    )
    index = _plan_index(out, settings, overwrite)
    if index is None:
        return ShardSet(out)
    done = [_finished(out, p, settings) for p in parts]
    todo = [p for p, ok in zip(parts, done) if not ok]
    if todo:
        options = {
            "tokenizer": settings["tokenizer"],
            "shard_tokens": shard_tokens,
            "num_threads": task_threads(r, num_threads),
            "batch_chars": batch_chars,
            "bos": bos,
            "text_field": text_field,
            "split_on": split_on,
            "errors": errors,
            "job": uuid.uuid4().hex,
        }
        # Meanwhile the index lists the shards of the finished partitions that
        # begin the corpus, as a single-machine run lists the shards finished so far.
        _list_prefix(out, index, parts, settings, done)
        try:
            tok = r.scatter(tokenizer)
            handles = r.map(
                _encode_partition,
                todo,
                tok,
                os.path.abspath(out),
                options,
                desc="pretokenizing",
                weights=[p.nbytes for p in todo],
            )
            r.gather(handles)  # (small summaries; map has already raised the first task error)
        except BaseException:  # an error or Ctrl-C: what did finish is listed, for readers and the message
            try:
                _list_prefix(out, index, parts, settings, [_finished(out, p, settings) for p in parts])
            except Exception:  # (the original error matters more)
                pass
            raise
    index["shards"] = _assemble(out, parts, settings)
    index["complete"] = True
    _write_index(out, index, VERSION)
    return ShardSet(out)


def _plan(
    corpus: object, partition_bytes: int | None, *, threads: int = 1, resume: Path | None = None, **read: Any
) -> list[Partition]:
    """The corpus's partitions; a corpus of texts (not files) cannot be split among workers.

    ``partition_bytes`` None: about four per task thread of the cluster
    (:func:`~tokenforge.data.partition.auto_target_bytes`), so a cluster of
    another size would plan another partitioning; so an unfinished job in
    ``resume`` (the output directory, unless overwriting) keeps the
    partitions it recorded, when they still cover the corpus's files."""
    if isinstance(corpus_source(corpus, who="pretokenize"), Texts):
        raise ShardError(
            "pretokenize with client= reads files that every worker can open: pass a path or a list of "
            "paths (an iterator of texts cannot be split among workers)"
        )
    if partition_bytes is not None and (
        isinstance(partition_bytes, bool) or not isinstance(partition_bytes, int) or partition_bytes < 1
    ):
        raise ShardError(f"partition_bytes must be a positive int or None, not {partition_bytes!r}")
    absolute = lambda path: path if "://" in path else os.path.abspath(path)  # noqa: E731
    recorded = None
    if partition_bytes is None and resume is not None:
        recorded = _recorded_plan(resume, [absolute(f) for f in _sources(corpus, "pretokenize")])
    if recorded is not None:
        return recorded
    target = auto_target_bytes(corpus, threads, who="pretokenize") if partition_bytes is None else partition_bytes
    parts = plan_partitions(corpus, who="pretokenize", target_bytes=target, **read)
    # Workers may run in another directory: local paths travel absolute (and are recorded so).
    parts = [dataclasses.replace(p, path=absolute(p.path)) for p in parts]
    if len({p.index for p in parts}) != len(parts):
        raise ShardError("the partition plan gives two partitions the same index")  # (a bug in the planner)
    return parts


def _recorded_plan(out: Path, files: list[str]) -> list[Partition] | None:
    """The partitions an unfinished index in ``out`` records, if they cover
    ``files`` in order, each file's pieces contiguous from its start to its
    end; else None (and the settings check then says what differs)."""
    try:
        source = _read_index(out).get("source") if (out / INDEX_FILE).is_file() else None
        if not isinstance(source, dict) or source.get("kind") != "partitions":
            return None
        parts = []
        for d in source["partitions"]:
            end, groups = d["end"], d["row_groups"]
            parts.append(
                Partition(
                    index=int(d["index"]),
                    path=str(d["path"]),
                    start=int(d["start"]),
                    end=None if end is None else int(end),
                    nbytes=int(d["bytes"]),
                    row_groups=None if groups is None else (int(groups[0]), int(groups[1])),
                )
            )
    except (ValueError, OSError, KeyError, TypeError, IndexError):
        return None
    if [p.index for p in parts] != list(range(len(parts))):
        return None
    paths = [p.path for k, p in enumerate(parts) if k == 0 or parts[k - 1].path != p.path]
    if paths != files:
        return None
    for k, p in enumerate(parts):
        first = k == 0 or parts[k - 1].path != p.path
        last = k == len(parts) - 1 or parts[k + 1].path != p.path
        if first and (p.start != 0 or (p.row_groups is not None and p.row_groups[0] != 0)):
            return None
        if last and p.end is not None:
            return None
        if not last:
            after = parts[k + 1]
            if p.end != after.start or (p.row_groups is None) != (after.row_groups is None):
                return None
            if p.row_groups is not None and after.row_groups is not None and p.row_groups[1] != after.row_groups[0]:
                return None
    return parts


def _plan_index(out: Path, settings: dict, overwrite: bool) -> dict | None:
    """The top-level index to finish (written now, listing no shard), or None when
    ``out`` already holds the complete result of these settings."""
    if (out / INDEX_FILE).exists() and not overwrite:
        index = _read_index(out)
        if index.get("legacy"):
            raise ShardError(
                f"{out} holds shards in the old lz78 layout ({index['legacy']}), which cannot be resumed; "
                "pass overwrite=True (--overwrite) to replace them, or choose another directory"
            )
        _check_settings(out, index, settings)
        if index.get("complete"):
            return None
    # Top-level shard files belong to no index of this layout; with overwrite the
    # partition sub-directories go too (else finished ones are kept, checked below).
    _clean_unlisted(out, {"shards": []}, all_shards=overwrite)
    index = {"format": FORMAT, "version": VERSION, **settings, "shards": [], "complete": False}
    _write_index(out, index, VERSION)
    return index


def _part_settings(settings: dict, part: Partition) -> dict:
    """What the sub-index of ``part`` records: the settings, with the partition as the source."""
    return {**settings, "source": _describe_source(part)}


def _finished(out: Path, part: Partition, settings: dict) -> bool:
    """Whether ``part``'s sub-directory holds its complete shards, made with these settings."""
    sub = out / _partition_dir(part.index)
    if not (sub / INDEX_FILE).is_file():
        return False
    try:
        index = _read_index(sub)
        _check_settings(sub, index, _part_settings(settings, part))
    except (ValueError, OSError):  # damaged or other: the task resumes there or says why it cannot
        return False
    return bool(index.get("complete"))


def _list_prefix(out: Path, index: dict, parts: list[Partition], settings: dict, done: list[bool]) -> None:
    """Write the index listing the shards of the leading finished partitions (complete false)."""
    n = done.index(False) if False in done else len(done)
    index["shards"] = _assemble(out, parts[:n], settings)
    _write_index(out, index, VERSION)


#: (job, id of the tokenizer object) -> its fingerprint, computed on this worker: the
#: tasks of one job get the same scattered object, kept alive by the job, so a
#: worker fingerprints it once per job, not once per partition (0.05 s for
#: 8,192 ids, more for larger vocabularies). A few recent jobs only.
_FINGERPRINTS: dict[tuple[str, int], str] = {}
_FINGERPRINTS_LOCK = threading.Lock()


def _worker_fingerprint(tokenizer: Tokenizer, job: str, scratch: Path) -> str:
    key = (job, id(tokenizer))
    with _FINGERPRINTS_LOCK:
        got = _FINGERPRINTS.get(key)
    if got is None:
        got = tokenizer_fingerprint(tokenizer, scratch_dir=scratch)
        with _FINGERPRINTS_LOCK:
            _FINGERPRINTS[key] = got
            while len(_FINGERPRINTS) > 8:
                del _FINGERPRINTS[next(iter(_FINGERPRINTS))]
    return got


def _encode_partition(part: Partition, tokenizer: Tokenizer, out: str, options: dict) -> dict:
    """One task: ``part``'s documents into ``out/part_NNNNN/`` (resuming what an
    earlier attempt left there); a small summary back."""
    sub = Path(out) / _partition_dir(part.index)
    fingerprint = _worker_fingerprint(tokenizer, options["job"], Path(out)) if "job" in options else None
    run = _Pretokenizer(
        part,
        tokenizer,
        sub,
        shard_tokens=options["shard_tokens"],
        num_threads=options["num_threads"],
        batch_chars=options["batch_chars"],
        bos=options["bos"],
        text_field=options["text_field"],
        split_on=options["split_on"],
        overwrite=False,
        errors=options["errors"],
        fingerprint=fingerprint,
    )
    _same_tokenizer(run.settings["tokenizer"], options["tokenizer"], part)
    shards = run.run(progress=False)
    return {"partition": part.index, "shards": shards.num_shards, "tokens": shards.num_tokens}


def _same_tokenizer(got: dict, want: dict, part: Partition) -> None:
    if got != want:
        raise ShardError(
            f"partition {part.index} ({part.path}): the tokenizer on the worker is not the client's (fingerprint "
            f"{str(got.get('fingerprint'))[:19]}... there, {str(want.get('fingerprint'))[:19]}... on the client); "
            "do the workers run the same tokenforge version as the client?"
        )


def _assemble(out: Path, parts: list[Partition], settings: dict) -> list[dict]:
    """Every partition's shard entries, in partition order, with paths relative to ``out``."""
    shards = []
    for part in parts:
        name = _partition_dir(part.index)
        sub = out / name
        index = _read_index(sub)
        if not index.get("complete"):
            raise ShardError(f"{sub}: partition {part.index} ({part.path}) did not finish; run again to resume")
        _same_tokenizer(index["tokenizer"], settings["tokenizer"], part)
        _check_settings(sub, index, _part_settings(settings, part))
        for e in index["shards"]:
            shards.append({**e, "tokens": f"{name}/{e['tokens']}", "documents": f"{name}/{e['documents']}"})
    return shards
