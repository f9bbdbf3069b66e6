"""Reading pretokenized shards: the index format and :class:`ShardSet`.

The layout a shard directory holds (``index.json`` and the token files, index
versions 1-3, and the old LZ78 layout) is described in
:mod:`tokenforge.data.shards`; this module holds what every reader and writer
of that layout shares -- its constants, :class:`ShardError`, writing, reading
and checking an index, the names of shard files and partition sub-directories
-- and :class:`ShardSet`, which reads a directory through memory maps.

Not handled: shard directories on remote filesystems (read a local or mounted
copy), and indexes of a newer version (refused).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import FormatError, TokenforgeError, VersionError, warn_user
from ..formats import checksum
from ..formats._jsonutil import JsonDoc, parse_json
from ..formats.atomic import atomic_write
from .fingerprint import tokenizer_fingerprint

__all__ = ["ShardSet", "ShardError", "FORMAT", "VERSION", "FLAT_VERSION", "INDEX_FILE", "LEGACY_FORMAT"]

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
#: tokens read at a time when :class:`ShardSet` checks the BOS ids at open (8 MiB of uint16)
_READ_TOKENS = 1 << 22


class ShardError(TokenforgeError):
    """A shard directory that cannot be written or resumed as asked."""


def _model_vocab(tok: Any) -> int:
    return int(tok.model_vocab_size)


def _shard_name(i: int) -> str:
    return f"shard_{i:05d}"


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

    def count(value: object, what: str) -> int:
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


def _is_count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 63


def _partition_dir(i: int) -> str:
    """The sub-directory of partition ``i`` in the partitioned layout (version 3)."""
    return f"part_{i:05d}"


_PARTITION_DIR = re.compile(r"part_[0-9]{5,}\Z")


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
    and BOS ids -- the BOS ids read from the token files a block at a time, so
    opening maps no shard into memory); :meth:`verify` checks the hashes
    (reads everything).

    Directories written by the old ``tokenforge lz78 pretokenize``
    (``"format": "tokenforge-token-shards"``) are read too (:attr:`legacy`):
    their tokens, token and document counts, and (with a BOS id) their
    documents; they record no byte counts, document tables or checksums, so
    :attr:`num_bytes`, :meth:`documents` and :meth:`verify` raise
    :class:`ShardError` on them, saying to pretokenize again.
    """

    def __init__(self, path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> None:
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
    def _load(p: Path, dtype: Any, shape: tuple, **kw: Any) -> np.ndarray:
        """The array in ``p``, after its .npy header is checked against what the
        index says (``dtype``, ``shape``) and the file's size: a damaged header
        never sizes an allocation, and is a FormatError naming the file."""
        ShardSet._data_start(p, dtype, shape)
        try:
            return np.load(p, allow_pickle=False, **kw)
        except (ValueError, EOFError, OSError) as e:  # (cannot happen after the checks above)
            raise FormatError(f"not a readable shard array: {str(e)[:200]}", path=p) from None

    @staticmethod
    def _data_start(p: Path, dtype: Any, shape: tuple) -> int:
        """Where the array's data starts in the .npy file ``p``, once its header
        is checked as :meth:`_load` says."""
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
        return start

    def _tokens_at(self, i: int, at: np.ndarray) -> np.ndarray:
        """Shard ``i``'s tokens at the positions ``at`` (increasing, inside the
        shard), read from the file a block at a time through one reused buffer.

        Performance: a document starts every few hundred tokens, so the first
        token of every document lies on nearly every page of the file; read
        through the memory map (:meth:`tokens`), checking them at open mapped
        the whole shard into the process (``pretokenize`` of 2 GB of text ended
        with 1.1 GB of shard pages in its peak RSS). Reads through a buffer of
        :data:`_READ_TOKENS` tokens keep the process's memory at that buffer
        (the pages stay in the system's file cache, as they were) for about the
        cost of a copy (~0.1 s per GB)."""
        p = self._file(i, "tokens")
        n = int(self.index["shards"][i]["num_tokens"])
        start = self._data_start(p, self.dtype, (n,))
        out = np.empty(len(at), self.dtype)
        buf = np.empty(min(n, _READ_TOKENS), self.dtype)
        with open(p, "rb") as f:
            lo = 0
            while lo < len(at):
                first = int(at[lo])
                hi = int(np.searchsorted(at, first + len(buf), side="left"))
                count = min(len(buf), n - first)
                f.seek(start + first * self.dtype.itemsize)
                view = buf[:count].data.cast("B")
                got = f.readinto(view)
                if got != len(view):
                    raise FormatError(f"ends before the {n} tokens its header says (shard {i})", path=p)
                out[lo:hi] = buf[at[lo:hi] - first]
                lo = hi
        return out

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
        elif self.bos_id is not None and len(arr) and np.any(self._tokens_at(i, offsets) != self.bos_id):
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

    def check_tokenizer(self, tok: Any) -> None:
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
