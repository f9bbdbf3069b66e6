"""Writing pretokenized shards on this machine: one run of :func:`pretokenize_here`.

The corpus is read on a background thread, encoded in batches (or blocks of
raw JSON lines for the core's block encoder), and a writer thread appends the
results to the shard being built and writes finished shards atomically; the
guarantees (shard boundaries, resuming, byte-identical results) and the
layout are in :mod:`tokenforge.data.shards`, whose :func:`~tokenforge.data.shards.pretokenize`
calls this module without a client.

Not handled: splitting one document across shards, and a corpus whose
documents change between runs (refused on resume when detected).
"""

from __future__ import annotations

import collections
import hashlib
import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..batching import batched
from ..formats.atomic import atomic_open
from ..ids import ids_dtype
from ..progress import Progress, progress_bar
from .corpus import (
    JsonlBlock,
    _lines_before,
    check_errors,
    corpus_bytes,
    corpus_files,
    is_jsonl,
    iter_documents,
    jsonl_block_documents,
    jsonl_blocks,
)
from .fingerprint import tokenizer_fingerprint
from .partition import Partition, partition_documents
from .shard_reader import (
    _PARTITION_DIR,
    FORMAT,
    INDEX_FILE,
    VERSION,
    ShardError,
    ShardSet,
    _model_vocab,
    _read_index,
    _shard_name,
    _write_index,
)

if TYPE_CHECKING:
    from ..base import Tokenizer


__all__ = ["pretokenize_here"]


def _describe_source(source: object) -> dict:
    if isinstance(source, Partition):
        return {"kind": "partition", **source.describe(), "bytes": source.nbytes}
    files = corpus_files(source)
    if files:
        return {"kind": "files", "files": [{"path": str(p), "bytes": p.stat().st_size} for p in files]}
    return {"kind": "iterable"}


class _Writer:
    """Collects encoded documents and writes a shard whenever one is full."""

    def __init__(self, out: Path, index: dict, dtype: type[np.unsignedinteger], shard_tokens: int) -> None:
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

    def __init__(self, tokens: np.ndarray, ntok: np.ndarray, nbytes: np.ndarray, nchars: np.ndarray) -> None:
        self.tokens, self.ntok, self.nbytes, self.nchars = tokens, ntok, nbytes, nchars

    @classmethod
    def of(
        cls,
        flat: np.ndarray,
        offsets: np.ndarray,
        texts: Sequence[str],
        bos: int | None,
        dtype: type[np.unsignedinteger],
        token_bytes: np.ndarray,
    ) -> "_Flat":
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

    def __init__(self, index: dict, out: Path) -> None:
        self.shards, self.out = list(index["shards"]), out  # those listed before this run
        self.remaining = sum(int(s["num_documents"]) for s in self.shards)
        self.k, self.n, self.chars = 0, 0, 0

    def add(self, nchars: Sequence[int] | np.ndarray) -> None:
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


class _Reader(threading.Thread):
    """Produces the items of an iterator (batches or blocks) on a background
    thread, at most ``depth`` ahead of the consumer."""

    def __init__(self, items: Iterator, depth: int = 2) -> None:
        super().__init__(name="tokenforge-pretokenize-reader", daemon=True)
        self.items = items
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()

    def _put(self, item: tuple[str, Any]) -> bool:
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

    def __iter__(self) -> Iterator[Any]:
        while True:
            kind, item = self.q.get()
            if kind == "item":
                yield item
            elif kind == "end":
                return
            else:
                raise item


def _block_encoder(tokenizer: Tokenizer, corpus: object) -> Callable[..., Any] | None:
    """The tokenizer's JSON-lines block encoder when the corpus is ``.jsonl``
    files only and the family has one; else None (documents go through
    ``iter_documents`` and ``encode_batch_flat``)."""
    encoder = tokenizer.jsonl_block_encoder()
    if encoder is None:
        return None
    files = _source_files(corpus)
    if not files or not all(is_jsonl(p) for p in files):
        return None
    return encoder


def _source_files(source: object) -> list[Path]:
    """The files of a corpus, or of a partition of a local file (the JSON-lines
    block reader reads local files, whole or a byte range); else empty."""
    if isinstance(source, Partition):
        return [Path(source.path)] if "://" not in source.path else []
    return corpus_files(source)


def pretokenize_here(corpus: Any, tokenizer: Any, out_dir: Any, *, progress: bool | None, **options: Any) -> ShardSet:
    """:func:`~tokenforge.data.shards.pretokenize` without a client: encode
    ``corpus`` (already checked by the corpus rule) into shards under
    ``out_dir`` on this machine, resuming a previous run there. ``options``:
    :func:`~tokenforge.data.shards.pretokenize`'s (``shard_tokens``,
    ``num_threads``, ``batch_chars``, ``bos``, ``text_field``, ``split_on``,
    ``overwrite``, ``errors``)."""
    return _Pretokenizer(corpus, tokenizer, out_dir, **options).run(progress)


def _check_options(shard_tokens: object, batch_chars: object, num_threads: object) -> None:
    _positive_int(shard_tokens, "shard_tokens")
    _positive_int(batch_chars, "batch_chars")
    _positive_int(num_threads, "num_threads", none_ok=True)


def _output_dir(out_dir: str | os.PathLike[str]) -> Path:
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
    tokenizer: Tokenizer,
    out: Path,
    *,
    bos: bool,
    shard_tokens: int,
    source: dict,
    text_field: str,
    split_on: str | None,
    errors: str,
    fingerprint: str | None = None,
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
        "dtype": np.dtype(ids_dtype(vocab)).name,
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


def _positive_int(value: object, name: str, none_ok: bool = False) -> None:
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
        corpus: object,
        tokenizer: Tokenizer,
        out_dir: str | os.PathLike[str],
        *,
        shard_tokens: int,
        num_threads: int | None,
        batch_chars: int,
        bos: bool,
        text_field: str,
        split_on: str | None,
        overwrite: bool,
        errors: str,
        fingerprint: str | None = None,
    ) -> None:
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
    def _items(self, bar: Progress) -> Iterator:
        """Blocks of raw JSON lines (the core's block encoder) or batches of texts."""
        if self.encoder is None:
            field, split_on, errors = self.text_field, self.split_on, self.errors
            if isinstance(self.corpus, Partition):
                docs = partition_documents(self.corpus, text_field=field, split_on=split_on, errors=errors)
            else:
                docs = iter_documents(self.corpus, text_field=field, split_on=split_on, errors=errors)
            return batched(_metered(docs, bar), self.batch_chars)
        if isinstance(self.corpus, Partition):
            # A byte range of a .jsonl file starts at a line start (where the planner cuts).
            start, end = self.corpus.start, self.corpus.end
            return jsonl_blocks(_source_files(self.corpus), self.batch_chars, progress=bar, start=start, end=end)
        return jsonl_blocks(_source_files(self.corpus), self.batch_chars, progress=bar)

    def _encode_texts(self, texts: list[str]) -> Callable[[], _Flat] | None:
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

    def _start_line(self, path: str | os.PathLike[str]) -> int:
        """The line number of the first line read from ``path``: 1, or for a
        partition that starts inside the file, one more than the newlines
        before it (counted only when a line needs the Python reader)."""
        start = self.corpus.start if isinstance(self.corpus, Partition) else 0
        if not start:
            return 1
        if self._first_line is None:
            self._first_line = _lines_before(path, start) + 1
        return self._first_line

    def _encode_block(self, block: JsonlBlock, skip: int) -> Any:
        """The core's encoding of a block of JSON lines (None: a line for the Python reader)."""
        encoder = self.encoder
        assert encoder is not None  # blocks are read only when there is a block encoder (_items)
        return encoder(
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

    def _finish_block(self, block: JsonlBlock, skip: int, got: Any) -> Callable[[], _Flat] | None:
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
                    assert encoding is not None  # made above whenever there is a block encoder
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

    def _write(self, make: Callable[[], _Flat] | None) -> None:
        """Hand a _Flat maker to the writer thread (None: nothing to write)."""
        if make is None:
            return
        # One writer thread keeps the batches in order. Up to two may wait, so
        # writing a finished shard does not hold up the encoding of the next.
        while len(self._pending) >= 2:
            self._pending.popleft().result()
        self._pending.append(self._writing.submit(self._add, make))

    def _add(self, make: Callable[[], _Flat]) -> None:  # on the writer thread
        self._writer.add(make())

    def _settle(self, keep: int) -> None:
        """Finish the oldest blocks in flight, in order, until ``keep`` are left."""
        while len(self._inflight) > keep:
            block, skip, get = self._inflight.popleft()
            self._write(self._finish_block(block, skip, get()))


def _metered(docs: Iterable[str], bar: Progress) -> Iterator[str]:
    """Progress in UTF-8 bytes of the documents (a close estimate: characters)."""
    for d in docs:
        bar.update(len(d))
        yield d


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
