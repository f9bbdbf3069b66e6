"""The plain, in-memory description of a byte-level BPE vocabulary.

Every BPE reader returns one and every writer takes one. Ids are the ids the
tokenizer emits; ranks are ids (the merge created later has the larger id), as
in tiktoken.

Ids are bounded by the number of entries (:func:`id_limit`): tables indexed
by id are as long as the largest id, and ids come from files, so one id near
2^32 in a file would otherwise ask for ~100 GB.

A reader whose engine model was built straight from the file (the fast
loaders: ``.tiktoken``) hands out BPEData whose ``merges`` list is made from
that model on first access (:func:`from_engine`): encoding never needs the
list, and 200,000 Python tuples cost more than the rest of the load. The
model stays attached, so the tokenizer reuses it instead of building and
checking a second one, only while the merges have not been handed out and
the byte ids, specials and pattern are still the ones it was built with.

The total bytes of the tokens are bounded too (:func:`check_token_bytes`): a
merge's token is its parents' bytes, so merges that double a token describe
2^k bytes in a file of k lines; every reader sums the lengths from the merge
table, in one linear pass, before anything is built, and refuses a total past
:func:`token_bytes_limit` of the file's size.

Not handled: vocabularies that are not byte-level (every byte has an id).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from ..errors import FormatError
from .patterns import pattern_name_problem

if TYPE_CHECKING:
    from .. import _core

__all__ = ["BPEData", "id_limit", "MAX_ID", "MAX_TOKEN_BYTES", "token_bytes_limit", "check_token_bytes"]

#: Ids are stored by the engine as unsigned 32-bit integers.
MAX_ID = 2**32 - 1


def id_limit(entries: int) -> int:
    """The first id a vocabulary of ``entries`` ids (bytes, merges, specials) may not use.

    ``entries`` plus a slack of ``max(1024, entries // 8)``: real vocabularies
    are dense or nearly so (cl100k_base leaves 16 ids unused among its
    specials). The Rust engine applies the same bound (``bpe::ranks::id_limit``).
    """
    return entries + max(1024, entries // 8)


def show_int(i: int) -> str:
    """``str(i)``, or its size in bits when it is too long to print (or to convert)."""
    return str(i) if i.bit_length() <= 128 else f"<an integer of {i.bit_length()} bits>"


def id_error(what: str, i: int, entries: int, noun: str = "id") -> str:
    """The message for an id (or rank) at or beyond :func:`id_limit` (or beyond 32 bits)."""
    if i > MAX_ID:
        return f"{what} has {noun} {show_int(i)}, which does not fit in 32 bits ({noun}s are 0..{MAX_ID})"
    limit = id_limit(entries)
    return (
        f"{what} has {noun} {i}, too large for a vocabulary of {entries} entries "
        f"({noun}s must be below {limit}: the number of entries plus a slack of {limit - entries})"
    )


_LAZY_LOCK = threading.Lock()


#: The hard cap on the total bytes of a vocabulary's tokens; the engine refuses a model past it
#: too (``MAX_TOKEN_BYTES`` in src/bpe/ranks.rs, the same number: a test checks).
MAX_TOKEN_BYTES = 1 << 30
#: A file may describe this many bytes of tokens per byte of its own (real vocabularies hold
#: well under one: cl100k's tokens are 0.7 MB in a 2.6 MB tokenforge-bpe file) ...
TOKEN_BYTES_PER_FILE_BYTE = 64
#: ... and any file at least this many.
MIN_TOKEN_BYTES_LIMIT = 16 << 20


def token_bytes_limit(file_bytes: int) -> int:
    """The most token bytes a file of ``file_bytes`` bytes may describe:
    :data:`TOKEN_BYTES_PER_FILE_BYTE` per byte, at least :data:`MIN_TOKEN_BYTES_LIMIT`,
    at most :data:`MAX_TOKEN_BYTES`."""
    return min(MAX_TOKEN_BYTES, max(MIN_TOKEN_BYTES_LIMIT, TOKEN_BYTES_PER_FILE_BYTE * file_bytes))


def check_token_bytes(
    byte_ids: Iterable[int],
    merges: Iterable[tuple[int, int, int]],
    file_bytes: int | None,
    path: str | os.PathLike[str] | None = None,
) -> None:
    """Refuse, before anything is built, merges whose tokens add up to more than
    :func:`token_bytes_limit` of the file (or :data:`MAX_TOKEN_BYTES` without one).

    ``merges`` are ``(left, right, new)`` ids. One linear pass over lengths only:
    ids do not bound the bytes (30 merges that each join a token with itself
    make a 1 GiB token), so the total is summed here, capped as it grows."""
    limit = MAX_TOKEN_BYTES if file_bytes is None else token_bytes_limit(file_bytes)
    length = {i: 1 for i in byte_ids}
    total = len(length)
    for a, b, new in merges:
        n = length.get(a, 0) + length.get(b, 0)
        length[new] = n
        total += n
        if total > limit:
            where = "" if file_bytes is None else f" for a file of {file_bytes:,} bytes"
            raise FormatError(
                f"the merges define tokens of more than {limit:,} bytes in all, the limit{where} "
                f"(merges that repeatedly join a token with itself double its length; reached at merge "
                f"{new} -> {n:,} bytes); refused before anything is built",
                path=path,
            )


class _Deferred:
    """The merges of a BPEData, still inside the engine model ``model``."""

    __slots__ = ("model",)

    def __init__(self, model: _core.BpeModel) -> None:
        self.model = model


class _MergesField:
    """The ``merges`` field: a plain list, or :class:`_Deferred` until first
    read, then the list made once (under a lock, so two threads reading at
    once get the same list). Setting it, or reading it, detaches the engine
    model (``_engine``): a list handed out may be changed in place."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: object, cls: type | None = None) -> list[tuple[int, int, int]]:
        if obj is None:
            raise AttributeError("merges has no default")  # (dataclasses: a required field)
        value = obj.__dict__[self.slot]
        if isinstance(value, _Deferred):
            with _LAZY_LOCK:
                value = obj.__dict__[self.slot]
                if isinstance(value, _Deferred):
                    value = value.model.merges()
                    obj.__dict__[self.slot] = value
                    obj.__dict__.pop("_engine", None)
        else:
            obj.__dict__.pop("_engine", None)
        return value

    def __set__(self, obj: object, value: list[tuple[int, int, int]] | _Deferred) -> None:
        obj.__dict__[self.slot] = value
        obj.__dict__.pop("_engine", None)


@dataclass
class BPEData:
    """A byte-level BPE vocabulary.

    byte_ids:       256 ints, the id of each single byte b (nanochat: b; growing: b + 10).
    merges:         (left_id, right_id, new_id) in the order they were learned;
                    new_id strictly increasing.
    special_tokens: special token text -> id (ids not used by bytes or merges).
    pattern:        the pre-tokenization regex, or None (whole documents are sequences).
    pattern_name:   "gpt4", "cl100k", "gpt2", "o200k", "custom" or "none" (see formats.patterns).
    training:       free-form settings recorded at training time (JSON-serialisable).
    split_specials: how ``encode`` treats special-token text by default. False
                    (tokenforge's policy): it stays text unless the caller allows
                    it. True (seed 003's, for tokenizers made or loaded through
                    its entry points): every special token is split out first,
                    longest first, and becomes its id.
    """

    byte_ids: list[int]
    merges: _MergesField = _MergesField()  # reads as list[tuple[int, int, int]]
    special_tokens: dict[str, int] = field(default_factory=dict)
    pattern: str | None = None
    pattern_name: str = "custom"
    training: dict = field(default_factory=dict)
    split_specials: bool = False

    @property
    def vocab_size(self) -> int:
        ids = list(self.byte_ids) + [m[2] for m in self.merges] + list(self.special_tokens.values())
        return max(ids) + 1 if ids else 0

    @classmethod
    def from_engine(
        cls,
        model: _core.BpeModel,
        special_tokens: dict[str, int],
        pattern: str | None,
        pattern_name: str,
        training: dict | None = None,
        split_specials: bool = False,
    ) -> "BPEData":
        """BPEData of an engine model a fast reader built and checked (its
        merges made from it when first read; see the module doc)."""
        data = cls(
            list(model.byte_ids()),
            _Deferred(model),
            dict(special_tokens),
            pattern,
            pattern_name,
            dict(training or {}),
            split_specials,
        )
        data.__dict__["_engine"] = (model, tuple(data.byte_ids), tuple(data.special_tokens.items()), pattern)
        return data

    def engine_model(self) -> _core.BpeModel | None:
        """The engine model this data came with, if it still describes it
        exactly (merges never handed out, byte ids, specials and pattern
        unchanged); else None."""
        engine = self.__dict__.get("_engine")
        if engine is None or not isinstance(self.__dict__.get("_merges"), _Deferred):
            return None
        model, byte_ids, specials, pattern = engine
        same = tuple(self.byte_ids) == byte_ids and tuple(self.special_tokens.items()) == specials
        return model if same and self.pattern == pattern else None

    def token_bytes_list(self) -> list[bytes | None]:
        """Bytes of every id (None for special or unused ids)."""
        out: list[bytes | None] = [None] * self.vocab_size
        for b, i in enumerate(self.byte_ids):
            out[i] = bytes([b])
        for a, b, new in self.merges:
            left, right = out[a], out[b]
            if left is None or right is None:  # validate() refuses such merges
                raise FormatError(f"merge ({a}, {b}) -> {new}: a part is neither a byte nor an earlier merge")
            out[new] = left + right
        return out

    def validate(self, path: str | os.PathLike[str] | None = None) -> None:
        """Raise FormatError if ids overlap, merges reference unknown/later ids, etc."""
        problem = pattern_name_problem(self.pattern, self.pattern_name)
        if problem is not None:
            raise FormatError(problem, path=path)
        if len(self.byte_ids) != 256:
            raise FormatError(f"expected 256 byte ids, found {len(self.byte_ids)}", path=path)
        if self.engine_model() is not None:
            return  # the engine checked every id when it built the model from the same content
        entries = 256 + len(self.merges) + len(self.special_tokens)
        limit = id_limit(entries)
        seen: dict[int, str] = {}
        for b, i in enumerate(self.byte_ids):
            if not isinstance(i, int) or isinstance(i, bool) or i < 0:
                raise FormatError(f"byte {b} has invalid id {i!r}", path=path)
            if i >= limit:
                raise FormatError(id_error(f"byte {b}", i, entries), path=path)
            if i in seen:
                raise FormatError(f"id {i} used twice ({seen[i]} and byte {b})", path=path)
            seen[i] = f"byte {b}"
        last = -1
        for k, (a, b, new) in enumerate(self.merges):
            if not isinstance(new, int) or isinstance(new, bool) or new < 0:
                raise FormatError(f"merge {k} has invalid id {new!r}", path=path)
            if new >= limit:
                raise FormatError(id_error(f"merge {k}", new, entries), path=path)
            for x in (a, b):
                if x not in seen or seen[x].startswith("special"):
                    raise FormatError(
                        f"merge {k} ({a}, {b}) -> {new} references id {x} that is not defined before it", path=path
                    )
            if new in seen:
                raise FormatError(f"merge {k} produces id {new}, already used by {seen[new]}", path=path)
            if new <= last:
                raise FormatError(
                    f"merge {k} produces id {new}, not larger than the previous merge's {last}", path=path
                )
            last = new
            seen[new] = f"merge {k}"
        for text, i in self.special_tokens.items():
            if not isinstance(text, str) or not text:
                raise FormatError(f"special token {text!r} must be a non-empty string", path=path)
            if not isinstance(i, int) or isinstance(i, bool) or i < 0:
                raise FormatError(f"special token {text!r} has invalid id {i!r}", path=path)
            if i >= limit:
                raise FormatError(id_error(f"special token {text!r}", i, entries), path=path)
            if i in seen:
                raise FormatError(f"special token {text!r} has id {i}, already used by {seen[i]}", path=path)
            seen[i] = f"special {text!r}"
