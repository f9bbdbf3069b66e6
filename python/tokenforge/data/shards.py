"""Pretokenized shards: any corpus, any tokenizer -> token files a model trains on.

:func:`pretokenize` streams the documents of a corpus (anything
:func:`~tokenforge.data.corpus.iter_documents` reads), encodes them in parallel
batches with the tokenizer's ``encode_batch_flat(num_threads=...)`` and writes a
directory::

    index.json               what the directory holds (below); written last
    shard_00000.npy          1-D token ids, uint16 when every id fits, else uint32;
                             each document starts with the tokenizer's BOS id
    shard_00000.docs.npy     int64 [documents, 2]: each document's token offset in
                             the shard (where its BOS is) and its byte count
    ...

``index.json`` (``"format": "tokenforge-shards"``, ``"version": 2``) records the
tokenizer's class, vocabulary size and fingerprint
(:func:`~tokenforge.data.fingerprint.tokenizer_fingerprint`), the dtype, the BOS
id, the corpus files (path and size), the target shard size, and one entry per
*finished* shard: its files, token/document/byte/character counts and the
SHA-256 of its tokens; from version 2 on it carries a checksum of its own
content (:mod:`tokenforge.formats.checksum`), so an altered index is refused
(version 1 indexes have none and still read). Version 3 is the layout of
``pretokenize(..., client=...)`` (the last section of this module): one
sub-directory per corpus partition, ``part_NNNNN/``, each a version 2 shard
directory of its own, and a top-level index listing their shards by paths one
sub-directory down (never ``..``, an absolute path, or a link leading out of
the directory). A single directory is still written as version 2. A
document's byte count is the sum of the exact byte lengths of its tokens
(``token_bytes``), i.e. the UTF-8 length of the text the tokenizer saw.

Guarantees:

- A shard ends at the first document boundary at or after ``shard_tokens``
  tokens, so the files do not depend on ``num_threads`` or on the batch size.
- Every file is written atomically (temporary file + rename) and a shard is
  listed in the index only after both of its files are in place: a crash or a
  Ctrl-C never leaves a listed shard that is incomplete.
- Running :func:`pretokenize` again on the same directory resumes: listed
  shards are kept (their documents are re-read, not re-encoded, and checked
  against the recorded counts), anything unlisted is rewritten. The result is
  byte-identical to an uninterrupted run. A different tokenizer or corpus is
  refused.

Throughput: the corpus is read on a background thread and encoded in batches
of about ``batch_chars`` characters with the GIL released; a writer thread
appends the results to the shard being built and writes finished shards
(hashing the tokens as they arrive), so reading, encoding and writing overlap.
For ``.jsonl`` corpora and families whose core does the whole encoding (BPE,
LZ78), blocks of raw lines go to the core, which parses the JSON, encodes and
counts bytes and characters on the encoding threads -- no Python string per
document -- with two blocks in flight so the threads do not wait for a block's
longest document. A block holding a line that only Python's ``json`` reads
(NaN, deep nesting, ...) or that is wrong is read by the Python reader
instead, with the same results and errors. Other corpora and families go
through :func:`~tokenforge.data.corpus.iter_documents` and the family's
``encode_batch_flat(num_threads=...)``. See ``bench/pretokenize.py``.

:class:`ShardSet` also reads the directories the old ``tokenforge lz78
pretokenize`` wrote (``"format": "tokenforge-token-shards"``: token files and
counts only); :func:`pretokenize` refuses to resume one (overwrite it).

Not handled: splitting one document across shards, and sharding a corpus
whose documents change between runs (refused on resume when detected).
"""

from __future__ import annotations

import os
from typing import Any

from .corpus import corpus_source
from .shard_cluster import pretokenize_on
from .shard_reader import (
    DEFAULT_BATCH_CHARS,
    DEFAULT_SHARD_TOKENS,
    FLAT_VERSION,
    FORMAT,
    INDEX_FILE,
    LEGACY_FORMAT,
    VERSION,
    ShardError,
    ShardSet,
)
from .shard_writer import pretokenize_here

__all__ = [
    "pretokenize",
    "pretokenize_on",
    "ShardSet",
    "ShardError",
    "FORMAT",
    "VERSION",
    "FLAT_VERSION",
    "INDEX_FILE",
    "LEGACY_FORMAT",
    "DEFAULT_SHARD_TOKENS",
    "DEFAULT_BATCH_CHARS",
]


def pretokenize(
    corpus: Any,
    tokenizer: Any,
    out_dir: str | os.PathLike[str],
    *,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    num_threads: int | None = None,
    batch_chars: int = DEFAULT_BATCH_CHARS,
    bos: bool = True,
    text_field: str = "text",
    split_on: str | None = None,
    progress: bool | None = None,
    overwrite: bool = False,
    errors: str = "strict",
    client: Any = None,
    partition_bytes: int | None = None,
) -> ShardSet:
    """Encode a corpus into shards under ``out_dir`` (resuming a previous run there).

    ``corpus``: a path or a list of paths (files), or an iterator of str (texts;
    the corpus rule, :func:`~tokenforge.data.corpus.corpus_source`: a list of str
    that names no files is an error, never the corpus; an iterable must yield
    the same documents again to resume). ``bos``: start every document with the
    tokenizer's BOS id. ``num_threads``: encoding threads (None: all cores; with
    ``client``, per task, None is one, as a Dask worker thread is a core).
    ``overwrite``: discard what ``out_dir`` holds instead of resuming.
    ``errors``: how bad UTF-8 and lone surrogate escapes in JSON lines are read
    (see :func:`~tokenforge.data.corpus.iter_documents`; recorded in the index
    when not "strict").
    ``client``: a ``distributed.Client`` or a scheduler address runs one task per
    partition of the corpus (files or byte ranges of them, about ``partition_bytes``
    each; None: about four per worker thread, at most
    :data:`~tokenforge.data.partition.DEFAULT_TARGET_BYTES`) on that Dask cluster,
    each writing its shards into ``out_dir/part_NNNNN/`` (index version 3; see
    :func:`pretokenize_on`); a
    :class:`tokenforge.cluster.LocalRunner` runs that same path here. The
    corpus must then be files (a path or a list of ``pathlib.Path``) and
    ``out_dir`` a directory every worker reaches at the same path.
    Ctrl-C stops cleanly; run again to resume. Returns the :class:`ShardSet`.
    """
    corpus = corpus_source(corpus, who="pretokenize")
    options: dict[str, Any] = dict(
        shard_tokens=shard_tokens,
        num_threads=num_threads,
        batch_chars=batch_chars,
        bos=bos,
        text_field=text_field,
        split_on=split_on,
        progress=progress,
        overwrite=overwrite,
        errors=errors,
    )
    if client is not None:
        return pretokenize_on(client, corpus, tokenizer, out_dir, partition_bytes=partition_bytes, **options)
    if partition_bytes is not None:
        raise ShardError("partition_bytes applies to pretokenize(..., client=...) only")
    return pretokenize_here(corpus, tokenizer, out_dir, **options)
