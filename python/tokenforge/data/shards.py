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

import collections
import dataclasses
import hashlib
import json
import os
import queue
import re
import sys
import threading
import uuid
from pathlib import Path
from typing import Iterator

import numpy as np

from ..cluster import runner
from ..errors import FormatError, TokenforgeError, VersionError, warn_user
from ..formats import checksum
from ..formats._jsonutil import JsonDoc, parse_json
from ..formats.atomic import atomic_open, atomic_write
from ..progress import progress_bar
from .corpus import (
    Texts,
    _lines_before,
    check_errors,
    corpus_bytes,
    corpus_files,
    corpus_source,
    is_jsonl,
    iter_documents,
    jsonl_block_documents,
    jsonl_blocks,
)
from .fingerprint import tokenizer_fingerprint
from .partition import Partition, _sources, auto_target_bytes, partition_documents, plan_partitions

__all__ = ["pretokenize", "ShardSet", "ShardError", "FORMAT", "VERSION", "INDEX_FILE", "LEGACY_FORMAT"]

FORMAT = "tokenforge-shards"
#: the newest index version (read; written by the partitioned layout)
VERSION = 3  # 2: a checksum of the index's content; 3: shard files one sub-directory down (part_NNNNN/)
#: the version a single directory of shards is written with (readable by older tokenforge)
FLAT_VERSION = 2
INDEX_FILE = "index.json"
#: default shard size in tokens (32 MiB of uint16)
DEFAULT_SHARD_TOKENS = 1 << 24
#: default batch handed to encode_batch_flat, in characters
DEFAULT_BATCH_CHARS = 4 << 20


class ShardError(TokenforgeError):
    """A shard directory that cannot be written or resumed as asked."""


def _model_vocab(tok) -> int:
    return int(tok.model_vocab_size)


def _dtype_for(vocab: int):
    return np.uint16 if vocab <= 1 << 16 else np.uint32


def _shard_name(i: int) -> str:
    return f"shard_{i:05d}"


def _describe_source(source) -> dict:
    if isinstance(source, Partition):
        return {"kind": "partition", **source.describe(), "bytes": source.nbytes}
    files = corpus_files(source)
    if files:
        return {"kind": "files", "files": [{"path": str(p), "bytes": p.stat().st_size} for p in files]}
    return {"kind": "iterable"}


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
class _Writer:
    """Collects encoded documents and writes a shard whenever one is full."""

    def __init__(self, out: Path, index: dict, dtype, shard_tokens: int):
        self.out, self.index, self.dtype = out, index, dtype
        self.shard_tokens = shard_tokens
        self._reset()

    def _reset(self) -> None:
        self.parts: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.nbytes: list[np.ndarray] = []
        self.ntok = 0
        self.ndocs = 0
        self.nchars = 0
        self.sha = hashlib.sha256()  # of the shard's tokens, as they arrive

    def add(self, batch: "_Flat") -> None:
        """Append a batch of documents, writing each shard as it fills."""
        n = len(batch.ntok)
        ends = np.cumsum(batch.ntok, dtype=np.int64)  # end of each document in batch.tokens
        first, pos = 0, 0  # the first document not yet taken, and where its tokens start
        while first < n:
            # The shard ends with the first document whose end reaches shard_tokens.
            last = int(np.searchsorted(ends, pos + self.shard_tokens - self.ntok, side="left"))
            full = last < n
            last = min(last, n - 1)
            end = int(ends[last])
            starts = ends[first : last + 1] - batch.ntok[first : last + 1] - pos + self.ntok
            part = np.ascontiguousarray(batch.tokens[pos:end], dtype=self.dtype)
            self.parts.append(part)
            self.sha.update(part.data)  # (the array's own buffer, C-contiguous)
            self.starts.append(starts)
            self.nbytes.append(batch.nbytes[first : last + 1])
            self.ntok += end - pos
            self.ndocs += last + 1 - first
            self.nchars += int(batch.nchars[first : last + 1].sum())
            first, pos = last + 1, end
            if full:
                self.flush()

    def flush(self) -> None:
        if not self.ndocs:
            return
        i = len(self.index["shards"])
        name = _shard_name(i)
        ntok = sum(len(p) for p in self.parts)
        docs = np.stack([np.concatenate(self.starts), np.concatenate(self.nbytes)], axis=1).astype(np.int64)
        # clean=False: a new name per shard; _clean_unlisted removes an interrupted run's leftovers
        with atomic_open(self.out / f"{name}.npy", "wb", clean=False) as f:
            # np.save's layout, written part by part instead of from one concatenated copy
            header = {
                "descr": np.lib.format.dtype_to_descr(np.dtype(self.dtype)),
                "fortran_order": False,
                "shape": (ntok,),
            }
            np.lib.format.write_array_header_1_0(f, header)
            for p in self.parts:
                f.write(p.data.cast("B"))
        with atomic_open(self.out / f"{name}.docs.npy", "wb", clean=False) as f:
            np.save(f, docs, allow_pickle=False)
        self.index["shards"].append(
            {
                "tokens": f"{name}.npy",
                "documents": f"{name}.docs.npy",
                "num_tokens": int(ntok),
                "num_documents": int(len(docs)),
                "num_bytes": int(docs[:, 1].sum()),
                "num_chars": int(self.nchars),
                "sha256": self.sha.hexdigest(),
                # the seal of the rest: file sizes (checked at open) and the table's hash (by verify)
                "documents_sha256": hashlib.sha256(docs.tobytes()).hexdigest(),
                "tokens_size": (self.out / f"{name}.npy").stat().st_size,
                "documents_size": (self.out / f"{name}.docs.npy").stat().st_size,
            }
        )
        _write_index(self.out, self.index)  # the shard is listed only now, after its files exist
        self._reset()


class _Flat:
    """Encoded documents of one batch: their ids back to back (each after its
    BOS), and per document its id count, byte count and character count."""

    __slots__ = ("tokens", "ntok", "nbytes", "nchars")

    def __init__(self, tokens: np.ndarray, ntok: np.ndarray, nbytes: np.ndarray, nchars: np.ndarray):
        self.tokens, self.ntok, self.nbytes, self.nchars = tokens, ntok, nbytes, nchars

    @classmethod
    def of(cls, flat, offsets, texts, bos: int | None, dtype, token_bytes: np.ndarray) -> "_Flat":
        """From ``encode_batch_flat``'s ids and offsets and the texts: whole-batch
        array operations, no Python step per document."""
        flat, offsets = np.asarray(flat), np.asarray(offsets, dtype=np.int64)
        if len(flat) and (int(flat.max()) >= len(token_bytes) or int(flat.min()) < 0):
            raise ShardError(f"the tokenizer produced an id outside its {len(token_bytes)} ids")
        # byte counts per document: differences of the running byte total at the offsets
        run = np.zeros(len(flat) + 1, dtype=np.int64)
        np.cumsum(token_bytes[flat], out=run[1:])
        nbytes = run[offsets[1:]] - run[offsets[:-1]]
        ntok = np.diff(offsets)
        tokens = flat.astype(dtype, copy=False)
        if bos is not None:
            tokens = np.insert(tokens, offsets[:-1], np.asarray(bos, dtype=dtype))
            ntok = ntok + 1
        return cls(tokens, ntok, nbytes, np.array([len(t) for t in texts], np.int64))


class _Resume:
    """Checks that the documents skipped on resuming are those of the listed shards."""

    def __init__(self, index: dict, out: Path):
        self.shards, self.out = list(index["shards"]), out  # those listed before this run
        self.remaining = sum(int(s["num_documents"]) for s in self.shards)
        self.k, self.n, self.chars = 0, 0, 0

    def add(self, nchars) -> None:
        """Account for skipped documents, given their character counts in order."""
        nchars = np.asarray(nchars, dtype=np.int64)
        self.remaining -= len(nchars)
        pos = 0
        while pos < len(nchars):
            want = int(self.shards[self.k]["num_documents"])
            take = min(want - self.n, len(nchars) - pos)
            self.n += take
            self.chars += int(nchars[pos : pos + take].sum())
            pos += take
            if self.n == want:
                self._check()
                self.k, self.n, self.chars = self.k + 1, 0, 0

    def _check(self) -> None:
        shard = self.shards[self.k]
        if self.n != shard["num_documents"] or self.chars != shard.get("num_chars", self.chars):
            raise ShardError(
                f"{self.out}: cannot resume, the corpus changed: shard {self.k} was made from "
                f"{shard['num_documents']} documents of {shard.get('num_chars')} characters, the corpus now gives "
                f"{self.n} documents of {self.chars}; pass overwrite=True to start again"
            )

    def finish(self) -> None:
        """At the end of the corpus: every listed shard's documents must have been seen."""
        if self.k < len(self.shards):
            self._check()


def _write_index(out: Path, index: dict, version: int = FLAT_VERSION) -> None:
    # also when resuming a version 1 index: it is rewritten with a checksum
    index["version"] = version
    atomic_write(out / INDEX_FILE, checksum.seal_json_text(json.dumps(index, indent=1) + "\n", indent=" "))


def _read_index(path: Path) -> dict:
    p = path / INDEX_FILE if path.is_dir() else path
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no shard index at {p} (make one with tokenforge.data.shards.pretokenize)") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"not a valid shard index: not UTF-8 ({e.reason})", path=p, offset=e.start) from None
    index = parse_json(text, p, "a shard index")
    if isinstance(index, dict) and index.get("format") == LEGACY_FORMAT:
        return _legacy_index(index, p)
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise FormatError(f'not a tokenforge shard index (expected "format": "{FORMAT}")', path=p)
    v = index.get("version")
    if not isinstance(v, int) or v < 1 or v > VERSION:
        raise VersionError(f"shard index version {v!r}; this tokenforge reads versions 1..{VERSION}", path=p)
    for key in ("tokenizer", "dtype", "shards"):
        if key not in index:
            raise FormatError(f"shard index has no {key!r} entry", path=p)
    _check_index_entries(index, p, v)
    checksum.check_json(JsonDoc(p, text, index), FORMAT, v)
    index.pop(checksum.KEY, None)  # never carried over: _write_index computes its own
    return index


#: the index format the old ``tokenforge lz78 pretokenize`` wrote (read, never written)
LEGACY_FORMAT = "tokenforge-token-shards"


def _legacy_index(old: dict, p: Path) -> dict:
    """An old ``tokenforge-token-shards`` v1 index, as an index of this format.

    Those directories hold ``shard_NNNNN.npy`` token files only: no document
    tables, byte counts, checksums or tokenizer fingerprint (the index kept
    the SHA-256 of the tokenizer's TSV file instead). What they lack stays
    ``None`` and the readers that need it say so (:attr:`ShardSet.legacy`).
    """
    from ..formats.lz78_tsv import LEGACY_SHARDS_TOKENIZER

    v = old.get("version")
    if v != 1:
        raise VersionError(f"old lz78 shard index version {v!r}; this tokenforge reads version 1", path=p)

    def count(value, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FormatError(f"{what} must be a count (an int >= 0), not {value!r}", path=p)
        return value

    dtype = old.get("dtype")
    if dtype not in ("uint16", "uint32"):
        raise FormatError(f"dtype must be uint16 or uint32, not {dtype!r}", path=p)
    bos = old.get("bos_id")
    if bos is not None:
        count(bos, "bos_id")
    shards = old.get("shards")
    if not isinstance(shards, list):
        raise FormatError("shard index has no 'shards' list", path=p)
    out = []
    for i, sh in enumerate(shards):
        if not isinstance(sh, dict):
            raise FormatError(f"shards[{i}] is not an object", path=p)
        name = sh.get("file")
        if not isinstance(name, str) or not name or Path(name).name != name or name.startswith("."):
            raise FormatError(f"shards[{i}].file must be a file name in the directory, not {name!r}", path=p)
        out.append(
            {
                "tokens": name,
                "documents": None,
                "num_tokens": count(sh.get("tokens"), f"shards[{i}].tokens"),
                "num_documents": count(sh.get("documents"), f"shards[{i}].documents"),
                "num_bytes": None,
                "num_chars": None,
                "sha256": None,
            }
        )
    return {
        "format": FORMAT,
        "version": VERSION,
        "legacy": f"{LEGACY_FORMAT} v1",
        "tokenizer": {
            **LEGACY_SHARDS_TOKENIZER,
            "vocab_size": count(old.get("vocab_size"), "vocab_size"),
            "fingerprint": None,
            "tsv_sha256": old.get("tokenizer_sha256"),
        },
        "dtype": dtype,
        "bos_id": bos,
        "shards": out,
        "complete": bool(old.get("complete")),
    }


_SHARD_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\Z")  # a plain name inside the directory
# from version 3: also one sub-directory down (no "..", no absolute path: no part may start with ".")
_SHARD_PATH = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,200}/)?[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\Z")
_SHARD_COUNTS = ("num_tokens", "num_documents", "num_bytes")


def _check_index_entries(index: dict, p: Path, version: int = FLAT_VERSION) -> None:
    """The types of what readers of the index use, so that a damaged index is a
    FormatError here rather than a KeyError or TypeError later."""

    def bad(what: str) -> FormatError:
        return FormatError(f"shard index: {what}", path=p)

    if index["dtype"] not in ("uint16", "uint32"):
        raise bad(f'"dtype" must be "uint16" or "uint32", not {str(index["dtype"])[:40]!r}')
    tok = index["tokenizer"]
    if not isinstance(tok, dict) or not isinstance(tok.get("fingerprint"), str) or not _is_count(tok.get("vocab_size")):
        raise bad('"tokenizer" must be an object with a "fingerprint" string and an integer "vocab_size"')
    bos = index.get("bos_id")
    if bos is not None and not _is_count(bos):
        raise bad('"bos_id" must be a non-negative integer or null')
    if not isinstance(index["shards"], list):
        raise bad('"shards" must be a list')
    names, where = (_SHARD_PATH, " or one sub-directory of it") if version >= 3 else (_SHARD_FILE, "")
    for j, e in enumerate(index["shards"]):
        if not isinstance(e, dict):
            raise bad(f"shard {j} is not an object")
        for key in ("tokens", "documents"):
            if not isinstance(e.get(key), str) or not names.match(e[key]):
                raise bad(f"shard {j}: {key!r} must be a file name in the shard directory{where}")
        for key in _SHARD_COUNTS:
            if not _is_count(e.get(key)):
                raise bad(f"shard {j}: {key!r} must be a non-negative integer")
        if "num_chars" in e and not _is_count(e["num_chars"]):
            raise bad(f"shard {j}: 'num_chars' must be a non-negative integer")
        if not isinstance(e.get("sha256"), str):
            raise bad(f"shard {j}: 'sha256' must be a string")
        for key in ("tokens_size", "documents_size"):
            if key in e and not _is_count(e[key]):
                raise bad(f"shard {j}: {key!r} must be a non-negative integer")
        if "documents_sha256" in e and not isinstance(e["documents_sha256"], str):
            raise bad(f"shard {j}: 'documents_sha256' must be a string")


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 63


class _Reader(threading.Thread):
    """Produces the items of an iterator (batches or blocks) on a background
    thread, at most ``depth`` ahead of the consumer."""

    def __init__(self, items: Iterator, depth: int = 2):
        super().__init__(name="tokenforge-pretokenize-reader", daemon=True)
        self.items = items
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for item in self.items:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except BaseException as e:  # handed to the main thread, which re-raises it
            self._put(("error", e))

    def __iter__(self):
        while True:
            kind, item = self.q.get()
            if kind == "item":
                yield item
            elif kind == "end":
                return
            else:
                raise item


def _batched(docs: Iterator[str], batch_chars: int) -> Iterator[list[str]]:
    batch, size = [], 0
    for d in docs:
        batch.append(d)
        size += len(d)
        if size >= batch_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _block_encoder(tokenizer, corpus):
    """The tokenizer's JSON-lines block encoder when the corpus is ``.jsonl``
    files only and the family has one; else None (documents go through
    ``iter_documents`` and ``encode_batch_flat``)."""
    encoder = tokenizer._jsonl_block_encoder()
    if encoder is None:
        return None
    files = _source_files(corpus)
    if not files or not all(is_jsonl(p) for p in files):
        return None
    return encoder


def _source_files(source) -> list[Path]:
    """The files of a corpus, or of a partition of a local file (the JSON-lines
    block reader reads local files, whole or a byte range); else empty."""
    if isinstance(source, Partition):
        return [Path(source.path)] if "://" not in source.path else []
    return corpus_files(source)


def pretokenize(
    corpus,
    tokenizer,
    out_dir,
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
    client=None,
    partition_bytes: int | None = None,
) -> "ShardSet":
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
    if client is not None:
        return pretokenize_on(
            client,
            corpus,
            tokenizer,
            out_dir,
            partition_bytes=partition_bytes,
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
    if partition_bytes is not None:
        raise ShardError("partition_bytes applies to pretokenize(..., client=...) only")
    run = _Pretokenizer(
        corpus,
        tokenizer,
        out_dir,
        shard_tokens=shard_tokens,
        num_threads=num_threads,
        batch_chars=batch_chars,
        bos=bos,
        text_field=text_field,
        split_on=split_on,
        overwrite=overwrite,
        errors=errors,
    )
    return run.run(progress)


def _check_options(shard_tokens, batch_chars, num_threads) -> None:
    _positive_int(shard_tokens, "shard_tokens")
    _positive_int(batch_chars, "batch_chars")
    _positive_int(num_threads, "num_threads", none_ok=True)


def _output_dir(out_dir) -> Path:
    """``out_dir`` as a local directory, created if needed. A ``file://`` URL is its
    path; other URLs (``s3://``, ...) are refused: shards are written with local
    atomic renames (on a cluster: a shared filesystem mounted at the same path
    on every worker)."""
    text = os.fspath(out_dir) if isinstance(out_dir, os.PathLike) else out_dir
    if isinstance(text, str) and "://" in text:
        scheme, _, rest = text.partition("://")
        host, slash, path = rest.partition("/")
        if scheme.lower() != "file" or host not in ("", "localhost") or not slash:
            raise ShardError(
                f"cannot write shards to {text!r}: only local directories (and file:// URLs) are supported; on a "
                "cluster, use a shared filesystem mounted at the same path on the client and every worker"
            )
        from urllib.parse import unquote

        out_dir = "/" + unquote(path)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ShardError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _settings(
    tokenizer, out: Path, *, bos: bool, shard_tokens: int, source: dict, text_field, split_on, errors, fingerprint=None
) -> dict:
    """What an index records about how its shards were made (compared on resuming).
    ``fingerprint``: the tokenizer's, when the caller has just computed it."""
    vocab = _model_vocab(tokenizer)
    bos_id = int(tokenizer.get_bos_token_id()) if bos else None
    settings = {
        "tokenizer": {
            "class": type(tokenizer).__name__,
            "family": tokenizer.family,
            "vocab_size": vocab,
            "fingerprint": fingerprint or tokenizer_fingerprint(tokenizer, scratch_dir=out),
        },
        "dtype": np.dtype(_dtype_for(vocab)).name,
        "bos_id": bos_id,
        "shard_tokens": shard_tokens,
        "source": source,
        "text_field": text_field,
        "split_on": split_on,
    }
    check_errors(errors)
    if errors != "strict":  # (absent when strict, so older shard sets still resume)
        settings["errors"] = errors
    return settings


def _check_settings(out: Path, index: dict, settings: dict) -> None:
    """Refuse to continue an index made with other settings."""
    for key, want in {"errors": None, **settings}.items():
        if index.get(key) != want:
            what = "tokenizer" if key == "tokenizer" else key
            raise ShardError(
                f"{out} holds shards made with a different {what} ({index.get(key)!r} there, {want!r} now); "
                "pass overwrite=True (--overwrite) to replace them, or choose another directory"
            )


def _positive_int(value, name: str, none_ok: bool = False) -> None:
    if none_ok and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ShardError(f"{name} must be a positive int{' or None' if none_ok else ''}, not {value!r}")


class _Pretokenizer:
    """One run of :func:`pretokenize`, in four steps:

    1. :meth:`__init__` checks the arguments, creates ``out_dir`` and settles
       what the index records (:attr:`settings`: tokenizer, dtype, BOS, source);
    2. :meth:`_plan` compares them with an index already there (resume, refuse,
       or nothing left to do), removes unlisted leftovers and writes the index;
    3. the document source: :meth:`_items` reads the corpus as blocks of raw
       JSON lines for the core's block encoder (:meth:`_encode_block`,
       :meth:`_finish_block`) or as batches of texts for ``encode_batch_flat``
       (:meth:`_encode_texts`); both skip what listed shards hold (:class:`_Resume`);
    4. :meth:`_stream` overlaps reading, encoding and writing (:class:`_Reader`,
       :class:`_Writer`, which writes shard files and the index atomically and
       hashes tokens as they arrive) and stops every thread on an error or Ctrl-C;
       :meth:`run` then marks the index complete.
    """

    def __init__(
        self,
        corpus,
        tokenizer,
        out_dir,
        *,
        shard_tokens: int,
        num_threads,
        batch_chars: int,
        bos: bool,
        text_field: str,
        split_on,
        overwrite: bool,
        errors: str,
        fingerprint: str | None = None,
    ):
        _check_options(shard_tokens, batch_chars, num_threads)
        self.corpus, self.tokenizer = corpus, tokenizer
        self.shard_tokens, self.batch_chars = shard_tokens, batch_chars
        self.text_field, self.split_on, self.errors, self.overwrite = text_field, split_on, errors, overwrite
        self.workers = num_threads or os.cpu_count() or 1
        out = self.out = _output_dir(out_dir)
        vocab = _model_vocab(tokenizer)
        token_bytes = np.asarray(tokenizer.token_bytes(), dtype=np.int64)
        if len(token_bytes) < vocab:
            token_bytes = np.concatenate([token_bytes, np.zeros(vocab - len(token_bytes), np.int64)])
        self.token_bytes = token_bytes
        self.settings = _settings(
            tokenizer,
            out,
            bos=bos,
            shard_tokens=shard_tokens,
            source=_describe_source(corpus),
            text_field=text_field,
            split_on=split_on,
            errors=errors,
            fingerprint=fingerprint,
        )
        self.dtype = np.dtype(self.settings["dtype"]).type
        self.bos_id = self.settings["bos_id"]
        self._line: dict = {}  # JSON-lines file -> lines read before its next block (from where reading began)
        self._first_line: int | None = None  # the line number reading began at, for a byte range (counted lazily)

    # ---- 2. plan: what the directory already holds ---------------------------------------
    def _plan(self) -> dict | None:
        """The index to continue (written back, leftovers removed), or None when
        ``out_dir`` already holds the complete result of these settings."""
        out, index = self.out, None
        if (out / INDEX_FILE).exists() and not self.overwrite:
            index = _read_index(out)
            if index.get("legacy"):
                raise ShardError(
                    f"{out} holds shards in the old lz78 layout ({index['legacy']}), which cannot be resumed; "
                    "pass overwrite=True (--overwrite) to replace them, or choose another directory"
                )
            _check_settings(out, index, self.settings)
            if index.get("complete"):
                return None
        if index is None:
            index = {"format": FORMAT, "version": VERSION, **self.settings, "shards": [], "complete": False}
        _clean_unlisted(out, index, all_shards=self.overwrite)
        if self.overwrite:
            index["shards"] = []
            index["complete"] = False
        _write_index(out, index)
        return index

    def run(self, progress: bool | None) -> "ShardSet":
        """Plan, then stream the corpus into shards with a progress bar in UTF-8 bytes
        (off when ``progress`` is False); the index is marked complete only at the end."""
        index = self._plan()
        if index is None:
            return ShardSet(self.out)
        total = self.corpus.nbytes if isinstance(self.corpus, Partition) else corpus_bytes(self.corpus)
        self.encoder = _block_encoder(self.tokenizer, self.corpus)
        self.resume = _Resume(index, self.out)
        self.narrow = np.dtype(self.dtype) == np.uint16
        with progress_bar(total=total, desc="pretokenizing", unit="B", enabled=progress is not False) as bar:
            writer = _Writer(self.out, index, self.dtype, self.shard_tokens)
            self._stream(_Reader(self._items(bar)), writer)
        index["complete"] = True
        _write_index(self.out, index)
        return ShardSet(self.out)

    # ---- 3. the document source -----------------------------------------------------------
    def _items(self, bar) -> Iterator:
        """Blocks of raw JSON lines (the core's block encoder) or batches of texts."""
        if self.encoder is None:
            read = partition_documents if isinstance(self.corpus, Partition) else iter_documents
            docs = read(self.corpus, text_field=self.text_field, split_on=self.split_on, errors=self.errors)
            return _batched(_metered(docs, bar), self.batch_chars)
        if isinstance(self.corpus, Partition):
            # A byte range of a .jsonl file starts at a line start (where the planner cuts).
            start, end = self.corpus.start, self.corpus.end
            return jsonl_blocks(_source_files(self.corpus), self.batch_chars, progress=bar, start=start, end=end)
        return jsonl_blocks(_source_files(self.corpus), self.batch_chars, progress=bar)

    def _encode_texts(self, texts: list[str]):
        """Documents, after those still to skip, to a _Flat maker (the _Flat is built on the writer thread)."""
        resume = self.resume
        n = min(resume.remaining, len(texts))
        if n:
            resume.add([len(t) for t in texts[:n]])
            texts = texts[n:]
        if not texts:
            return None
        flat, offsets = self.tokenizer.encode_batch_flat(texts, num_threads=self.workers)
        bos_id, dtype, token_bytes = self.bos_id, self.dtype, self.token_bytes
        return lambda: _Flat.of(flat, offsets, texts, bos_id, dtype, token_bytes)

    def _start_line(self, path) -> int:
        """The line number of the first line read from ``path``: 1, or for a
        partition that starts inside the file, one more than the newlines
        before it (counted only when a line needs the Python reader)."""
        start = self.corpus.start if isinstance(self.corpus, Partition) else 0
        if not start:
            return 1
        if self._first_line is None:
            self._first_line = _lines_before(path, start) + 1
        return self._first_line

    def _encode_block(self, block, skip: int):
        """The core's encoding of a block of JSON lines (None: a line for the Python reader)."""
        return self.encoder(
            block.head,
            block.body,
            block.end,
            self.text_field,
            block.offset == 0,
            skip,
            self.bos_id,
            self.narrow,
            self.workers,
        )

    def _finish_block(self, block, skip: int, got):
        """In file order: the block's result (or its Python reading) to a _Flat maker."""
        before = self._line.get(block.path, 0)
        if got is None:  # a line only the Python reader reads right (or reports right)
            self._line[block.path] = before + block.count_lines()
            first = before + self._start_line(block.path)
            # (blocks are finished in order, so what is still to skip is this block's ``skip``)
            return self._encode_texts(list(jsonl_block_documents(block, first, self.text_field, self.errors)))
        tokens, ntok, nbytes, nchars, nlines = got
        self._line[block.path] = before + nlines
        n = min(skip, len(ntok))
        if n:
            self.resume.add(nchars[:n])
        if n == len(ntok):
            return None
        # skipped documents have no ids in ``tokens``
        flat = _Flat(tokens, ntok[n:].astype(np.int64), nbytes[n:].astype(np.int64), nchars[n:].astype(np.int64))
        return lambda: flat

    # ---- 4. reading, encoding and writing at once -----------------------------------------
    def _stream(self, reader: "_Reader", writer: _Writer) -> None:
        """Every item of ``reader`` encoded and handed to ``writer`` in order; then the
        resume check and the last shard. On any error or Ctrl-C every thread is stopped."""
        from concurrent.futures import ThreadPoolExecutor

        encoder, resume = self.encoder, self.resume
        self._writer = writer
        self._pending: collections.deque = collections.deque()  # writes, in order
        self._inflight: collections.deque = collections.deque()  # (block, skip, Future.result), in order
        reader.start()
        pools: list = []
        try:
            # The family encodes each batch on ``num_threads`` with the GIL released.
            # Meanwhile the reader thread prepares the next batches and a writer thread
            # appends earlier results to the shard being built and writes finished
            # shards. JSON-lines blocks are also parsed in the core, and two blocks are
            # in flight at once, so the encoding threads do not idle at the end of a
            # block while its longest document finishes. (Several Python threads each
            # calling a single-threaded encode_batch instead would serialise on the
            # extension's shared one-thread pool.)
            self._writing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenforge-shard-writer")
            pools.append(self._writing)
            encoding = None
            if encoder is not None:
                encoding = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tokenforge-encode")
                pools.append(encoding)
            for item in reader:
                if encoder is None:
                    self._write(self._encode_texts(item))
                elif resume.remaining:  # still skipping what listed shards hold: one block at a time
                    self._settle(0)
                    skip = resume.remaining
                    self._write(self._finish_block(item, skip, self._encode_block(item, skip)))
                else:
                    self._inflight.append((item, 0, encoding.submit(self._encode_block, item, 0).result))
                    self._settle(1)
            self._settle(0)
            while self._pending:
                self._pending.popleft().result()
            resume.finish()
            writer.flush()
        finally:
            reader.stop.set()
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)
            reader.join(timeout=5)

    def _write(self, make) -> None:
        """Hand a _Flat maker to the writer thread (None: nothing to write)."""
        if make is None:
            return
        # One writer thread keeps the batches in order. Up to two may wait, so
        # writing a finished shard does not hold up the encoding of the next.
        while len(self._pending) >= 2:
            self._pending.popleft().result()
        self._pending.append(self._writing.submit(self._add, make))

    def _add(self, make) -> None:  # on the writer thread
        self._writer.add(make())

    def _settle(self, keep: int) -> None:
        """Finish the oldest blocks in flight, in order, until ``keep`` are left."""
        while len(self._inflight) > keep:
            block, skip, get = self._inflight.popleft()
            self._write(self._finish_block(block, skip, get()))


def _metered(docs, bar):
    """Progress in UTF-8 bytes of the documents (a close estimate: characters)."""
    for d in docs:
        bar.update(len(d))
        yield d


def _partition_dir(i: int) -> str:
    """The sub-directory of partition ``i`` in the partitioned layout (version 3)."""
    return f"part_{i:05d}"


_PARTITION_DIR = re.compile(r"part_[0-9]{5,}\Z")


def _clean_unlisted(out: Path, index: dict, all_shards: bool) -> None:
    """Remove shard files and temporary files the index does not list (leftovers of an interruption);
    with ``all_shards``, every shard file and the partition sub-directories' shards and indexes too."""
    if all_shards:
        for sub in out.iterdir():
            if _PARTITION_DIR.match(sub.name) and sub.is_dir() and not sub.is_symlink():
                _clean_unlisted(sub, {"shards": []}, all_shards=False)
                (sub / INDEX_FILE).unlink(missing_ok=True)
                try:
                    sub.rmdir()
                except OSError:  # it holds files of someone else's: left as they are
                    pass
    listed = set()
    if not all_shards:
        for s in index["shards"]:
            listed.add(s["tokens"])
            listed.add(s["documents"])
    for p in out.iterdir():
        name = p.name
        is_shard = name.startswith("shard_") and name.endswith(".npy")
        is_tmp = name.startswith((".shard_", f".{INDEX_FILE}.")) and name.endswith(".tmp")
        if (is_shard and name not in listed) or is_tmp:
            p.unlink()


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
class ShardSet:
    """A pretokenized shard directory, read through memory maps.

    ``ShardSet(path)`` reads ``index.json`` (a directory or the file itself).
    Only shards listed in the index are visible. An unfinished run (``complete``
    False) is refused with a :class:`ShardError`, so that nothing trains on part
    of a corpus unawares; ``allow_incomplete=True`` reads the shards finished so
    far, with a warning.

    The index seals every shard: the SHA-256 of its tokens and of its document
    table, and both files' sizes. Opening checks what is cheap (the sizes, each
    .npy header against the index, every document table's offsets, byte counts
    and BOS ids); :meth:`verify` checks the hashes (reads everything).

    Directories written by the old ``tokenforge lz78 pretokenize``
    (``"format": "tokenforge-token-shards"``) are read too (:attr:`legacy`):
    their tokens, token and document counts, and (with a BOS id) their
    documents; they record no byte counts, document tables or checksums, so
    :attr:`num_bytes`, :meth:`documents` and :meth:`verify` raise
    :class:`ShardError` on them, saying to pretokenize again.
    """

    def __init__(self, path, *, allow_incomplete: bool = False):
        p = Path(path)
        self.dir = p if p.is_dir() else p.parent
        self.index = _read_index(p)
        self.dtype = np.dtype(self.index["dtype"])
        self._tokens: dict[int, np.ndarray] = {}
        self._tables: dict[int, np.ndarray] = {}
        if not self.complete:
            if not allow_incomplete:
                raise ShardError(
                    f"{self.dir} is an unfinished pretokenize run ({self.num_shards} shard(s) of an unknown number; "
                    "its index says complete: false): run the same pretokenize again to finish it, or pass "
                    "allow_incomplete=True to read the finished shards only"
                )
            warn_user(
                f"reading an unfinished pretokenize run in {self.dir}: {self.num_shards} shard(s), part of the corpus"
            )
        for i, e in enumerate(self.index["shards"]):  # cheap checks of the seal at open: sizes, then tables
            for key in ("tokens", "documents"):
                size = e.get(f"{key}_size")
                if size is not None and self._file(i, key).stat().st_size != size:
                    raise FormatError(
                        f"{e[key]} (shard {i}) is {self._file(i, key).stat().st_size} bytes, the index says {size}",
                        path=self._file(i, key),
                    )
            if e.get("documents") is not None and not self.legacy:
                self.documents(i)

    # ---- summary -------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return bool(self.index.get("complete"))

    @property
    def fingerprint(self) -> str:
        return self.index["tokenizer"]["fingerprint"]

    @property
    def vocab_size(self) -> int:
        return int(self.index["tokenizer"]["vocab_size"])

    @property
    def bos_id(self) -> int | None:
        return self.index.get("bos_id")

    @property
    def num_shards(self) -> int:
        return len(self.index["shards"])

    @property
    def num_tokens(self) -> int:
        return sum(s["num_tokens"] for s in self.index["shards"])

    @property
    def num_documents(self) -> int:
        return sum(s["num_documents"] for s in self.index["shards"])

    @property
    def legacy(self) -> str | None:
        """The old format's name when the index was written by the old lz78 pretokenize, else None."""
        return self.index.get("legacy")

    def _no_legacy(self, what: str) -> None:
        if self.legacy:
            raise ShardError(
                f"{self.dir} was written by the old lz78 pretokenize ({self.legacy}), which records no {what}; "
                "pretokenize again (tokenforge lz78 pretokenize --overwrite) to get them"
            )

    @property
    def num_bytes(self) -> int:
        self._no_legacy("byte counts")
        return sum(s["num_bytes"] for s in self.index["shards"])

    def __len__(self) -> int:
        return self.num_shards

    def __repr__(self) -> str:
        return (
            f"ShardSet({str(self.dir)!r}, shards={self.num_shards}, tokens={self.num_tokens:,}, "
            f"documents={self.num_documents:,}, complete={self.complete})"
        )

    # ---- data ----------------------------------------------------------------
    def _file(self, i: int, key: str) -> Path:
        if not 0 <= i < self.num_shards:
            raise IndexError(f"shard {i} out of range ({self.num_shards} shards)")
        p = self.dir / self.index["shards"][i][key]
        if "/" in self.index["shards"][i][key] and not p.resolve().is_relative_to(self.dir.resolve()):
            # (the index's names cannot hold ".." or start at the root; a linked sub-directory could lead out)
            raise FormatError(
                f"the index lists {self.index['shards'][i][key]} (shard {i}), which leads out of {self.dir}",
                path=self.dir / INDEX_FILE,
            )
        if not p.is_file():
            name = self.index["shards"][i][key]
            raise FormatError(f"the index lists {name} (shard {i}), which is missing", path=self.dir / INDEX_FILE)
        return p

    @staticmethod
    def _load(p: Path, dtype, shape: tuple, **kw) -> np.ndarray:
        """The array in ``p``, after its .npy header is checked against what the
        index says (``dtype``, ``shape``) and the file's size: a damaged header
        never sizes an allocation, and is a FormatError naming the file."""
        try:
            with open(p, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                got_shape, fortran, got_dtype = read(f)
                start = f.tell()
        except Exception as e:  # noqa: BLE001 -- numpy parses the header with ast (SyntaxError, TokenError, ...)
            raise FormatError(f"not a readable shard array (its .npy header): {str(e)[:200]}", path=p) from None
        if got_dtype != np.dtype(dtype) or tuple(got_shape) != tuple(shape) or fortran:
            raise FormatError(
                f"the .npy header says {got_dtype}{list(got_shape)}{' (Fortran order)' if fortran else ''}, "
                f"the index says {np.dtype(dtype)}{list(shape)}",
                path=p,
            )
        want = start + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        size = p.stat().st_size
        if size != want:
            raise FormatError(f"holds {size} bytes, its header and the index say {want}", path=p)
        try:
            return np.load(p, allow_pickle=False, **kw)
        except (ValueError, EOFError, OSError) as e:  # (cannot happen after the checks above)
            raise FormatError(f"not a readable shard array: {str(e)[:200]}", path=p) from None

    def tokens(self, i: int) -> np.ndarray:
        """Shard ``i``'s token ids, memory-mapped (read-only)."""
        if i not in self._tokens:
            p = self._file(i, "tokens")
            want = self.index["shards"][i]["num_tokens"]
            arr = self._load(p, self.dtype, (want,), mmap_mode="r")
            if arr.dtype != self.dtype or arr.ndim != 1 or len(arr) != want:
                raise FormatError(f"shard holds {arr.dtype}[{len(arr)}], the index says {self.dtype}[{want}]", path=p)
            self._tokens[i] = arr
        return self._tokens[i]

    def documents(self, i: int) -> np.ndarray:
        """Shard ``i``'s document table: int64 [documents, 2] = (token offset, byte count)."""
        self._no_legacy("document tables")
        if i in self._tables:
            return self._tables[i]
        p = self._file(i, "documents")
        e = self.index["shards"][i]
        arr = self._load(p, np.int64, (e["num_documents"], 2))
        # the table's sanity (cheap, linear in documents): offsets start at 0, never
        # decrease and stay inside the shard; byte counts are >= 0 and add up; with a
        # BOS id every document starts with it
        offsets, nbytes = arr[:, 0], arr[:, 1]
        least = 0 if self.bos_id is None else 1  # tokens of a document: with BOS, never none
        problem = None
        if len(arr) and offsets[0] != 0:
            problem = f"the first document starts at token {offsets[0]}, not 0"
        elif len(arr) and (np.any(np.diff(offsets) < least) or offsets[-1] > e["num_tokens"] - least):
            problem = f"document offsets are not increasing within the shard's {e['num_tokens']} tokens"
        elif np.any(nbytes < 0) or int(nbytes.sum()) != e["num_bytes"]:
            problem = f"document byte counts are negative or do not add up to the index's {e['num_bytes']}"
        elif self.bos_id is not None and len(arr) and np.any(self.tokens(i)[offsets] != self.bos_id):
            problem = f"a document does not start with the BOS id {self.bos_id}"
        if problem is not None:
            raise FormatError(f"document table of shard {i}: {problem}", path=p)
        self._tables[i] = arr
        return arr

    def iter_documents(self) -> Iterator[np.ndarray]:
        """Every document's ids, without its BOS, in corpus order."""
        skip = 0 if self.bos_id is None else 1
        for i in range(self.num_shards):
            toks = self.tokens(i)
            offsets = self._legacy_offsets(i, toks) if self.legacy else self.documents(i)[:, 0]
            ends = np.append(offsets[1:], len(toks))
            for a, b in zip(offsets.tolist(), ends.tolist()):
                yield np.asarray(toks[a + skip : b])

    def _legacy_offsets(self, i: int, toks: np.ndarray) -> np.ndarray:
        """An old-format shard's document starts: where its BOS ids are."""
        if self.bos_id is None:
            self._no_legacy("document boundaries (it was written without BOS)")
        offsets = np.flatnonzero(np.asarray(toks) == self.bos_id)
        want = self.index["shards"][i]["num_documents"]
        if len(offsets) != want or (len(toks) and (not len(offsets) or offsets[0] != 0)):
            raise FormatError(
                f"holds {len(offsets)} documents starting with BOS, the index says {want}", path=self._file(i, "tokens")
            )
        return offsets

    def verify(self) -> None:
        """Check every listed shard's tokens and document table against their
        recorded SHA-256 (reads everything)."""
        self._no_legacy("checksums")
        for i, s in enumerate(self.index["shards"]):
            digest = hashlib.sha256(np.ascontiguousarray(self.tokens(i)).tobytes()).hexdigest()
            if digest != s["sha256"]:
                raise FormatError("shard contents do not match the SHA-256 in the index", path=self._file(i, "tokens"))
            want = s.get("documents_sha256")  # (indexes before issue 32 did not seal the tables)
            if want is not None and hashlib.sha256(self.documents(i).tobytes()).hexdigest() != want:
                raise FormatError(
                    "document table does not match the SHA-256 in the index", path=self._file(i, "documents")
                )

    def check_tokenizer(self, tok) -> None:
        """Raise :class:`ShardError` unless ``tok`` is the tokenizer that made these shards.

        An old-format directory records no fingerprint: only the vocabulary
        size and BOS id are checked, and a warning says so.
        """
        if self.legacy:
            vocab = _model_vocab(tok)
            if vocab != self.vocab_size or (self.bos_id is not None and int(tok.get_bos_token_id()) != self.bos_id):
                raise ShardError(
                    f"{self.dir} was made by another tokenizer ({self.vocab_size} ids, BOS {self.bos_id}); "
                    f"this one has {vocab} ids"
                )
            warn_user(
                f"{self.dir} ({self.legacy}) records no tokenizer fingerprint: only the vocabulary size and BOS id "
                "were checked",
            )
            return
        fp = tokenizer_fingerprint(tok, scratch_dir=self.dir)
        if fp != self.fingerprint:
            raise ShardError(
                f"{self.dir} was made by another tokenizer ({self.index['tokenizer'].get('class')}, "
                f"fingerprint {self.fingerprint[:19]}...); this one is {fp[:19]}..."
            )


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
    client,
    corpus,
    tokenizer,
    out_dir,
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
    r, parts, tokenizer, out, shard_tokens, num_threads, batch_chars, bos, text_field, split_on, overwrite, errors
):
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
            "num_threads": num_threads,
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


def _plan(corpus, partition_bytes, *, threads: int = 1, resume: Path | None = None, **read) -> list[Partition]:
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
            if p.row_groups is not None and p.row_groups[1] != after.row_groups[0]:
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


def _task_threads(num_threads: int | None) -> int | None:
    """Encoding threads for a task: as asked; else, on a Dask worker, one (None:
    all cores, off a cluster).

    Why one: in Dask's model a worker thread is a core (``threads_per_worker``
    is how a cluster is given cores), and a worker cannot see the other workers
    on its machine: two workers of one thread on 2 cores, each encoding with
    every core, ran 4 encoding threads on 2 cores (1.92 s instead of 1.73 s for
    125 MB, bench/dask.py). The pipeline's reader and writer threads still
    overlap with the encoding. ``count_pieces`` counts with one thread per task
    too."""
    if num_threads is not None:
        return num_threads
    distributed = sys.modules.get("distributed")  # imported on a worker; never imported here for this
    if distributed is None:
        return None
    try:
        distributed.get_worker()
    except ValueError:  # not on a worker (LocalRunner)
        return None
    return 1


#: (job, id of the tokenizer object) -> its fingerprint, computed on this worker: the
#: tasks of one job get the same scattered object, kept alive by the job, so a
#: worker fingerprints it once per job, not once per partition (0.05 s for
#: 8,192 ids, more for larger vocabularies). A few recent jobs only.
_FINGERPRINTS: dict[tuple[str, int], str] = {}
_FINGERPRINTS_LOCK = threading.Lock()


def _worker_fingerprint(tokenizer, job: str, scratch: Path) -> str:
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


def _encode_partition(part: Partition, tokenizer, out: str, options: dict) -> dict:
    """One task: ``part``'s documents into ``out/part_NNNNN/`` (resuming what an
    earlier attempt left there); a small summary back."""
    sub = Path(out) / _partition_dir(part.index)
    fingerprint = _worker_fingerprint(tokenizer, options["job"], Path(out)) if "job" in options else None
    run = _Pretokenizer(
        part,
        tokenizer,
        sub,
        shard_tokens=options["shard_tokens"],
        num_threads=_task_threads(options["num_threads"]),
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
