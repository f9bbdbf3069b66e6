"""A toy tokenizer family that lives outside the package: the walk-through of
``docs/architecture.md`` ("Adding a family"), in code.

:class:`CharTokenizer` gives each of the most frequent characters of its
training text an id of its own and encodes every other character as the ids
of its UTF-8 bytes. Id layout: ``0 .. n-1`` the characters (most frequent
first, ties by code point), ``n .. n+255`` the bytes 0..255, then the special
tokens in the order given. ``decode(encode(s)) == s`` for every str: a lone
surrogate is encoded as the byte ids of its "surrogatepass" bytes, which
:func:`tokenforge.base.decode_utf8` turns back into it.

Its file is one JSON document of its own format::

    {"format": "tokenforge-toy-chars", "version": 1,
     "chars": ["e", " ", ...], "special_tokens": ["<|bos|>"],
     "checksum": "sha256:..."}

written atomically (:func:`tokenforge.formats.atomic.atomic_write`), with the
checksum rule of :func:`tokenforge.formats.checksum.json_checksum`; the reader
refuses a newer version (:class:`VersionError`), an altered file
(:class:`ChecksumError`) and anything malformed (:class:`FormatError` naming
the file and the line).

:data:`TOY` is its :class:`tokenforge.registry.Family` record. Nothing here
registers itself: a test does, with :func:`tokenforge.registry.registered`.
No module of the package is edited for it.

Not handled: characters beyond the table inside special tokens' text (specials
are matched as whole strings by the base class); pairs or longer pieces (one
character is the longest token); reading or writing any other format.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import numpy as np

from tokenforge.base import Tokenizer
from tokenforge.data.corpus import Texts, corpus_documents
from tokenforge.errors import (
    ChecksumError,
    FormatError,
    SpecialTokenError,
    TokenforgeError,
    VersionError,
    VocabSizeError,
)
from tokenforge.formats.atomic import atomic_write
from tokenforge.formats.checksum import json_checksum
from tokenforge.ids import check_text
from tokenforge.registry import Family, Format, ReportRule, SpecRule

FORMAT_NAME = "tokenforge-toy-chars"
FORMAT_VERSION = 1
_KEYS = ("format", "version", "chars", "special_tokens", "checksum")
_SNIFF = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + FORMAT_NAME.encode() + rb'"')
_SURROGATE = re.compile("[\ud800-\udfff]")


class CharTokenizer(Tokenizer):
    """Character-level tokenizer with byte fallback (see the module docstring)."""

    family = "toy"

    def __init__(self, chars, special_tokens=("<|bos|>",)):
        self._chars = list(chars)
        self._ids = {c: i for i, c in enumerate(self._chars)}
        n = len(self._chars)
        self._specials = {s: n + 256 + k for k, s in enumerate(special_tokens)}
        if len(self._ids) != n or len(self._specials) != len(special_tokens):
            raise TokenforgeError("characters and special tokens must be unique")

    # ---- training: the one corpus rule of tokenforge.data.corpus -----------
    @classmethod
    def train(
        cls,
        corpus,
        vocab_size: int = 512,
        *,
        min_count: int = 1,
        special_tokens=("<|bos|>",),
        text_field: str = "text",
        errors: str = "strict",
        progress=False,
    ) -> "CharTokenizer":
        """Train on files: a path or a list of paths (``str`` or ``PathLike``)."""
        specials = _special_list(special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256 + len(specials):
            raise VocabSizeError(
                f"vocab_size must be an int >= 256 + {len(specials)} special tokens, not {vocab_size!r}"
            )
        counts: collections.Counter = collections.Counter()
        for doc in corpus_documents(
            corpus, who="CharTokenizer.train", text_field=text_field, errors=errors, progress=progress
        ):
            counts.update(doc)
        ranked = sorted(
            ((c, k) for k, c in counts.items() if c >= min_count and not _SURROGATE.match(k)),
            key=lambda ck: (-ck[0], ck[1]),
        )
        return cls([k for _, k in ranked[: vocab_size - 256 - len(specials)]], specials)

    @classmethod
    def train_from_iterator(cls, texts, vocab_size: int = 512, **kwargs) -> "CharTokenizer":
        """Train on texts: an iterable of str."""
        return cls.train(Texts(texts), vocab_size, **kwargs)

    # ---- the contract ------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self._chars) + 256 + len(self._specials)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        check_text(text)
        n, ids, out = len(self._chars), self._ids, []
        for ch in text:
            i = ids.get(ch)
            if i is None:
                out.extend(n + b for b in ch.encode("utf-8", "surrogatepass"))
            else:
                out.append(i)
        return out

    def id_to_bytes(self, id: int) -> bytes:
        i, n = self.check_id(id), len(self._chars)
        if i < n:
            return self._chars[i].encode("utf-8", "surrogatepass")
        if i < n + 256:
            return bytes([i - n])
        return next(s for s, j in self._specials.items() if j == i).encode("utf-8")

    def decode_bytes(self, ids) -> bytes:
        return b"".join(self.id_to_bytes(i) for i in ids)

    def token_bytes(self) -> np.ndarray:
        out = np.zeros(self.vocab_size, dtype=np.int32)
        n = len(self._chars)
        out[:n] = [len(c.encode("utf-8", "surrogatepass")) for c in self._chars]
        out[n : n + 256] = 1
        return out

    def byte_id(self, b: int) -> int:
        return len(self._chars) + b

    # ---- optional hooks declared on Tokenizer ------------------------------
    def inspect_extra(self) -> dict:
        return {"toy_chars": len(self._chars)}

    def fingerprint_files(self) -> dict[str, bytes]:
        return {"tokenizer.json": self.to_bytes()}

    # ---- the file format (and pickling through it) -------------------------
    def to_bytes(self) -> bytes:
        value = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "chars": self._chars,
            "special_tokens": list(self._specials),
        }
        value["checksum"] = json_checksum(value)
        return (json.dumps(value, ensure_ascii=True, indent=1) + "\n").encode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "CharTokenizer":
        return read_toy(data, "<pickled CharTokenizer>")

    def save(self, path) -> None:
        """Write the tokenizer as one JSON file at ``path`` (atomically)."""
        atomic_write(path, self.to_bytes())

    @classmethod
    def load(cls, path) -> "CharTokenizer":
        return read_toy(Path(path).read_bytes(), path)


def _special_list(special_tokens) -> list[str]:
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        return [special_tokens]
    out = list(special_tokens)
    if not all(isinstance(s, str) and s for s in out):
        raise SpecialTokenError(f"special tokens must be non-empty strings, not {out!r}")
    return out


def sniff_toy(path, head: bytes) -> bool:
    """A file whose first bytes open a tokenforge-toy-chars JSON document."""
    return bool(_SNIFF.match(head))


def read_toy(raw: bytes, path) -> CharTokenizer:
    """Parse the bytes of a toy file; every problem is a FormatError naming ``path``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 ({e.reason})", path=path, offset=e.start) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(f"invalid JSON: {e.msg}", path=path, line=e.lineno) from None
    except RecursionError:
        raise FormatError("JSON nested too deeply", path=path) from None
    if not isinstance(value, dict) or value.get("format") != FORMAT_NAME:
        raise FormatError(f'expected an object with "format": "{FORMAT_NAME}"', path=path, line=1)
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise FormatError(f"version: expected an integer, found {json.dumps(version)[:40]}", path=path)
    if version > FORMAT_VERSION:
        raise VersionError(f"version {version} is newer than this reader ({FORMAT_VERSION})", path=path)
    if version < 1:
        raise FormatError(f"version: expected 1, found {version}", path=path)
    unknown = [k for k in value if k not in _KEYS]
    missing = [k for k in _KEYS if k not in value]
    if unknown or missing:
        raise FormatError(f"keys: unknown {unknown}, missing {missing}", path=path)
    chars, specials = value["chars"], value["special_tokens"]
    if not isinstance(chars, list) or not all(isinstance(c, str) and len(c) == 1 for c in chars):
        raise FormatError("chars: expected a list of one-character strings", path=path)
    if not isinstance(specials, list) or not all(isinstance(s, str) and s for s in specials):
        raise FormatError("special_tokens: expected a list of non-empty strings", path=path)
    if value["checksum"] != json_checksum(value):
        raise ChecksumError(
            "the file was altered after it was written: its content does not match its checksum", path=path
        )
    try:
        return CharTokenizer(chars, specials)
    except TokenforgeError as e:
        raise FormatError(str(e), path=path) from None


# ---- the record: everything tokenforge needs to know about the family -------
def _toy_formats() -> list[Format]:
    return [Format(FORMAT_NAME, sniff_toy, CharTokenizer.load)]


def _toy_train(words, options, docs, vocab_size, *, num_threads=None, progress=False) -> CharTokenizer:
    return CharTokenizer.train_from_iterator(docs, vocab_size, progress=progress, **options)


def add_parser(subparsers) -> None:
    """The family's ``tokenforge toy`` subcommand (the record names this module as its ``cli``)."""
    p = subparsers.add_parser("toy", help="the toy family (tests only): show a tokenizer's character table")
    p.add_argument("tokenizer")
    p.set_defaults(func=_cmd_toy)


def token_detail(tok: CharTokenizer):
    """The playground's detail (the record's ``detail`` hook): a character id's
    rank by training frequency (0 = the most frequent), or ``byte``."""
    n = len(tok._chars)

    def detail(id: int, ref) -> dict:
        return {"rank": id} if id < n else {"byte": id - n}

    return detail


def _measure(tok: CharTokenizer, train_docs, num_threads) -> dict:
    """The report's own measurement: training characters the table lacks (they go through bytes)."""
    seen = {c for d in train_docs for c in d}
    return {"chars": len(tok._chars), "missing": len(seen - set(tok._chars))}


def _table(rows: list[dict]):
    head = ["tokenizer", "characters", "training characters without an id"]
    return head, [[r["label"], f"{r['toy']['chars']:,}", f"{r['toy']['missing']:,}"] for r in rows]


def _cmd_toy(args) -> int:
    tok = CharTokenizer.load(args.tokenizer)
    print(f"{len(tok._chars)} characters: {''.join(tok._chars)!r}")
    return 0


TOY = Family(
    "toy",
    __name__,
    "CharTokenizer",
    _toy_formats,
    SpecRule(options={"min_count": 1, "special_tokens": ("<|bos|>",)}, train=_toy_train),
    cli=__name__,
    detail=token_detail,
    report=ReportRule(
        title="Toy character tables",
        note="Characters without an id are encoded as their UTF-8 bytes.",
        measure=_measure,
        table=_table,
    ),
    sniff_rank=0,  # ranks first, yet is tried after every built-in family: it cannot shadow their files
)
