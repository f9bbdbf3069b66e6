"""Pretokenized shards: any corpus, any tokenizer -> token files a model trains on.

:func:`pretokenize` streams the documents of a corpus (anything
:func:`~tokenforge.data.corpus.iter_documents` reads), encodes them in parallel
batches with the tokenizer's ``encode_batch(num_threads=...)`` and writes a
directory::

    index.json               what the directory holds (below); written last
    shard_00000.npy          1-D token ids, uint16 when every id fits, else uint32;
                             each document starts with the tokenizer's BOS id
    shard_00000.docs.npy     int64 [documents, 2]: each document's token offset in
                             the shard (where its BOS is) and its byte count
    ...

``index.json`` (``"format": "tokenforge-shards"``, ``"version": 1``) records the
tokenizer's class, vocabulary size and fingerprint
(:func:`~tokenforge.data.fingerprint.tokenizer_fingerprint`), the dtype, the BOS
id, the corpus files (path and size), the target shard size, and one entry per
*finished* shard: its files, token/document/byte/character counts and the
SHA-256 of its tokens. A document's byte count is the sum of the exact byte
lengths of its tokens (``token_bytes``), i.e. the UTF-8 length of the text the
tokenizer saw.

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

Throughput: documents are read (and JSON-parsed) on a background thread, in
batches of about ``batch_chars`` characters; the main thread encodes each batch
with the family's ``encode_batch(num_threads=...)`` (GIL released), and a writer
thread appends the previous batch's ids to the shard being built and writes
finished shards. Reading, encoding and writing overlap; see
``bench/pretokenize.py``.

Not handled: splitting one document across shards, and sharding a corpus
whose documents change between runs (refused on resume when detected).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import FormatError, TokenforgeError, VersionError
from ..formats.atomic import atomic_open, atomic_write
from .corpus import corpus_bytes, corpus_files, iter_documents, progress_bar
from .fingerprint import tokenizer_fingerprint

__all__ = ["pretokenize", "ShardSet", "ShardError", "FORMAT", "VERSION", "INDEX_FILE"]

FORMAT = "tokenforge-shards"
VERSION = 1
INDEX_FILE = "index.json"
#: default shard size in tokens (32 MiB of uint16)
DEFAULT_SHARD_TOKENS = 1 << 24
#: default batch handed to encode_batch, in characters
DEFAULT_BATCH_CHARS = 4 << 20


class ShardError(TokenforgeError):
    """A shard directory that cannot be written or resumed as asked."""


def _model_vocab(tok) -> int:
    cur = getattr(tok, "current_vocab_size", None)
    return int(cur) if cur is not None else int(tok.vocab_size)


def _dtype_for(vocab: int):
    return np.uint16 if vocab <= 1 << 16 else np.uint32


def _shard_name(i: int) -> str:
    return f"shard_{i:05d}"


def _describe_source(source) -> dict:
    files = corpus_files(source)
    if files:
        return {"kind": "files", "files": [{"path": str(p), "bytes": p.stat().st_size} for p in files]}
    return {"kind": "iterable"}


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
class _Writer:
    """Collects encoded documents and writes a shard whenever one is full."""

    def __init__(self, out: Path, index: dict, dtype, bos: int | None, shard_tokens: int, token_bytes: np.ndarray):
        self.out, self.index, self.dtype, self.bos = out, index, dtype, bos
        self.shard_tokens = shard_tokens
        self.token_bytes = token_bytes
        self._reset()

    def _reset(self) -> None:
        self.parts: list[np.ndarray] = []
        self.doc_rows: list[tuple[int, int]] = []
        self.ntok = 0
        self.nchars = 0

    def add_batch(self, arrays, texts) -> None:
        # Per document rather than over one concatenated batch: the gathers stay in
        # cache, and no batch-sized temporaries are built (those cost more than the rest).
        tb = self.token_bytes
        bos = None if self.bos is None else np.array([self.bos], dtype=self.dtype)
        for a, t in zip(arrays, texts):
            a = np.asarray(a)
            if a.dtype != self.dtype:
                if len(a) and (int(a.max()) >= len(tb) or int(a.min()) < 0):
                    raise ShardError(f"the tokenizer produced an id outside its {len(tb)} ids")
                a = a.astype(self.dtype)
            self.doc_rows.append((self.ntok, int(tb[a].sum()) if len(a) else 0))
            if bos is not None:
                self.parts.append(bos)
                self.ntok += 1
            self.parts.append(a)
            self.ntok += len(a)
            self.nchars += len(t)
            if self.ntok >= self.shard_tokens:
                self.flush()

    def flush(self) -> None:
        if not self.doc_rows:
            return
        i = len(self.index["shards"])
        name = _shard_name(i)
        tokens = np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=self.dtype)
        if len(tokens) and int(tokens.max()) >= len(self.token_bytes):
            raise ShardError(f"the tokenizer produced id {int(tokens.max())}, beyond its {len(self.token_bytes)} ids")
        docs = np.asarray(self.doc_rows, dtype=np.int64).reshape(-1, 2)
        with atomic_open(self.out / f"{name}.npy", "wb") as f:
            np.save(f, tokens, allow_pickle=False)
        with atomic_open(self.out / f"{name}.docs.npy", "wb") as f:
            np.save(f, docs, allow_pickle=False)
        self.index["shards"].append(
            {
                "tokens": f"{name}.npy",
                "documents": f"{name}.docs.npy",
                "num_tokens": int(len(tokens)),
                "num_documents": int(len(docs)),
                "num_bytes": int(docs[:, 1].sum()),
                "num_chars": int(self.nchars),
                "sha256": hashlib.sha256(tokens.tobytes()).hexdigest(),
            }
        )
        _write_index(self.out, self.index)  # the shard is listed only now, after its files exist
        self._reset()


def _write_index(out: Path, index: dict) -> None:
    atomic_write(out / INDEX_FILE, json.dumps(index, indent=1) + "\n")


def _read_index(path: Path) -> dict:
    p = path / INDEX_FILE if path.is_dir() else path
    try:
        index = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no shard index at {p} (make one with tokenforge.data.shards.pretokenize)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"not a valid shard index: {e}", path=p) from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise FormatError(f"not a tokenforge shard index (expected \"format\": \"{FORMAT}\")", path=p)
    v = index.get("version")
    if not isinstance(v, int) or v < 1 or v > VERSION:
        raise VersionError(f"shard index version {v!r}; this tokenforge reads versions 1..{VERSION}", path=p)
    for key in ("tokenizer", "dtype", "shards"):
        if key not in index:
            raise FormatError(f"shard index has no {key!r} entry", path=p)
    return index


class _Reader(threading.Thread):
    """Reads documents into batches of about ``batch_chars`` characters, ahead of the encoder."""

    def __init__(self, docs: Iterator[str], batch_chars: int, depth: int = 2):
        super().__init__(name="tokenforge-pretokenize-reader", daemon=True)
        self.docs, self.batch_chars = docs, batch_chars
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
            batch, size = [], 0
            for d in self.docs:
                batch.append(d)
                size += len(d)
                if size >= self.batch_chars:
                    if not self._put(("batch", batch)):
                        return
                    batch, size = [], 0
            if batch and not self._put(("batch", batch)):
                return
            self._put(("end", None))
        except BaseException as e:  # handed to the main thread, which re-raises it
            self._put(("error", e))

    def batches(self):
        while True:
            kind, item = self.q.get()
            if kind == "batch":
                yield item
            elif kind == "end":
                return
            else:
                raise item


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
) -> "ShardSet":
    """Encode a corpus into shards under ``out_dir`` (resuming a previous run there).

    ``corpus``: a path, a list of ``pathlib.Path`` or an iterable of str (see
    :func:`~tokenforge.data.corpus.iter_documents`; an iterable must yield the
    same documents again to resume). ``bos``: start every document with the
    tokenizer's BOS id. ``num_threads``: encoding threads (None: all cores).
    ``overwrite``: discard what ``out_dir`` holds instead of resuming.
    Ctrl-C stops cleanly; run again to resume. Returns the :class:`ShardSet`.
    """
    if isinstance(shard_tokens, bool) or not isinstance(shard_tokens, int) or shard_tokens < 1:
        raise ShardError(f"shard_tokens must be a positive int, not {shard_tokens!r}")
    if isinstance(batch_chars, bool) or not isinstance(batch_chars, int) or batch_chars < 1:
        raise ShardError(f"batch_chars must be a positive int, not {batch_chars!r}")
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
        raise ShardError(f"num_threads must be a positive int or None, not {num_threads!r}")
    workers = num_threads or os.cpu_count() or 1
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ShardError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    vocab = _model_vocab(tokenizer)
    dtype = _dtype_for(vocab)
    bos_id = int(tokenizer.get_bos_token_id()) if bos else None
    token_bytes = np.asarray(tokenizer.token_bytes(), dtype=np.int64)
    if len(token_bytes) < vocab:
        token_bytes = np.concatenate([token_bytes, np.zeros(vocab - len(token_bytes), np.int64)])
    source = _describe_source(corpus)
    settings = {
        "tokenizer": {
            "class": type(tokenizer).__name__,
            "family": getattr(tokenizer, "family", None),
            "vocab_size": vocab,
            "fingerprint": tokenizer_fingerprint(tokenizer, scratch_dir=out),
        },
        "dtype": np.dtype(dtype).name,
        "bos_id": bos_id,
        "shard_tokens": shard_tokens,
        "source": source,
        "text_field": text_field,
        "split_on": split_on,
    }
    index = None
    if (out / INDEX_FILE).exists() and not overwrite:
        index = _read_index(out)
        for key, want in settings.items():
            if index.get(key) != want:
                what = "tokenizer" if key == "tokenizer" else key
                raise ShardError(
                    f"{out} holds shards made with a different {what} ({index.get(key)!r} there, {want!r} now); "
                    "pass overwrite=True (--overwrite) to replace them, or choose another directory"
                )
        if index.get("complete"):
            return ShardSet(out)
    if index is None:
        index = {"format": FORMAT, "version": VERSION, **settings, "shards": [], "complete": False}
    _clean_unlisted(out, index, all_shards=overwrite)
    if overwrite:
        index["shards"] = []
        index["complete"] = False
    _write_index(out, index)

    total = corpus_bytes(corpus)
    docs = iter_documents(corpus, text_field=text_field, split_on=split_on)
    with progress_bar(total=total, desc="pretokenizing", unit="B", enabled=progress is not False) as bar:
        docs = _skip_done(docs, index, out, bar)
        writer = _Writer(out, index, dtype, bos_id, shard_tokens, token_bytes)
        reader = _Reader(_metered(docs, bar, total is not None), batch_chars)
        reader.start()
        pool = None
        try:
            # The family's encode_batch parallelises one batch over ``num_threads`` with
            # the GIL released; meanwhile the reader thread parses the next batches and a
            # writer thread turns the previous result into shard files. (Calling a
            # single-threaded encode_batch from several Python threads instead would
            # serialise on the extension's shared one-thread pool.)
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenforge-shard-writer")
            written = None
            for batch in reader.batches():
                arrays = tokenizer.encode_batch(batch, num_threads=workers, as_numpy=True)
                if written is not None:
                    written.result()  # in order, and at most one batch waiting to be written
                written = pool.submit(writer.add_batch, arrays, batch)
            if written is not None:
                written.result()
            writer.flush()
        finally:
            reader.stop.set()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            reader.join(timeout=5)
    index["complete"] = True
    _write_index(out, index)
    return ShardSet(out)


def _metered(docs, bar, by_file: bool):
    """Progress in UTF-8 bytes of the documents (a close estimate: characters)."""
    for d in docs:
        bar.update(len(d))
        yield d


def _skip_done(docs, index: dict, out: Path, bar) -> Iterator[str]:
    """Skip the documents of the listed shards, checking they are the ones recorded."""
    it = iter(docs)
    for k, shard in enumerate(index["shards"]):
        n, chars = 0, 0
        for _ in range(shard["num_documents"]):
            try:
                d = next(it)
            except StopIteration:
                break
            n += 1
            chars += len(d)
        bar.update(chars)
        if n != shard["num_documents"] or chars != shard.get("num_chars", chars):
            raise ShardError(
                f"{out}: cannot resume, the corpus changed: shard {k} was made from {shard['num_documents']} documents "
                f"of {shard.get('num_chars')} characters, the corpus now gives {n} documents of {chars}; "
                "pass overwrite=True to start again"
            )
    return it


def _clean_unlisted(out: Path, index: dict, all_shards: bool) -> None:
    """Remove shard files and temporary files the index does not list (leftovers of an interruption)."""
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
    Only shards listed in the index are visible; an unfinished run shows the
    shards finished so far and ``complete`` False.
    """

    def __init__(self, path):
        p = Path(path)
        self.dir = p if p.is_dir() else p.parent
        self.index = _read_index(p)
        self.dtype = np.dtype(self.index["dtype"])
        self._tokens: dict[int, np.ndarray] = {}

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
    def num_bytes(self) -> int:
        return sum(s["num_bytes"] for s in self.index["shards"])

    def __len__(self) -> int:
        return self.num_shards

    def __repr__(self) -> str:
        return (f"ShardSet({str(self.dir)!r}, shards={self.num_shards}, tokens={self.num_tokens:,}, "
                f"documents={self.num_documents:,}, complete={self.complete})")

    # ---- data ----------------------------------------------------------------
    def _file(self, i: int, key: str) -> Path:
        if not 0 <= i < self.num_shards:
            raise IndexError(f"shard {i} out of range ({self.num_shards} shards)")
        return self.dir / self.index["shards"][i][key]

    def tokens(self, i: int) -> np.ndarray:
        """Shard ``i``'s token ids, memory-mapped (read-only)."""
        if i not in self._tokens:
            p = self._file(i, "tokens")
            arr = np.load(p, mmap_mode="r", allow_pickle=False)
            want = self.index["shards"][i]["num_tokens"]
            if arr.dtype != self.dtype or arr.ndim != 1 or len(arr) != want:
                raise FormatError(f"shard holds {arr.dtype}[{len(arr)}], the index says {self.dtype}[{want}]", path=p)
            self._tokens[i] = arr
        return self._tokens[i]

    def documents(self, i: int) -> np.ndarray:
        """Shard ``i``'s document table: int64 [documents, 2] = (token offset, byte count)."""
        p = self._file(i, "documents")
        arr = np.load(p, allow_pickle=False)
        if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) != self.index["shards"][i]["num_documents"]:
            raise FormatError("document table does not match the index", path=p)
        return arr

    def iter_documents(self) -> Iterator[np.ndarray]:
        """Every document's ids, without its BOS, in corpus order."""
        skip = 0 if self.bos_id is None else 1
        for i in range(self.num_shards):
            toks = self.tokens(i)
            offsets = self.documents(i)[:, 0]
            ends = np.append(offsets[1:], len(toks))
            for a, b in zip(offsets.tolist(), ends.tolist()):
                yield np.asarray(toks[a + skip : b])

    def verify(self) -> None:
        """Check every listed shard against its recorded SHA-256 (reads everything)."""
        for i, s in enumerate(self.index["shards"]):
            digest = hashlib.sha256(np.ascontiguousarray(self.tokens(i)).tobytes()).hexdigest()
            if digest != s["sha256"]:
                raise FormatError("shard contents do not match the SHA-256 in the index", path=self._file(i, "tokens"))

    def check_tokenizer(self, tok) -> None:
        """Raise :class:`ShardError` unless ``tok`` is the tokenizer that made these shards."""
        fp = tokenizer_fingerprint(tok, scratch_dir=self.dir)
        if fp != self.fingerprint:
            raise ShardError(
                f"{self.dir} was made by another tokenizer ({self.index['tokenizer'].get('class')}, "
                f"fingerprint {self.fingerprint[:19]}...); this one is {fp[:19]}..."
            )
