"""What the playground shows about one token: its piece and its family's detail.

A *piece* is the JSON form of one id's bytes: the text they spell when they
are valid in the tokenizer's text encoding (UTF-8 for every family but
mixedgram, whose text is latin1, so every byte is a character), otherwise
``{"hex": "e282"}`` (a token cut inside a UTF-8 character, a byte fallback).
The bytes of the pieces of an encoding, joined, are the bytes the tokenizer
saw (:func:`piece_bytes` undoes a piece).

The *detail* is what the family knows about how an id came to be: ``special``
for a special token of any family, otherwise what the ``detail`` hook of the
family's record (:class:`tokenforge.registry.Family`) answers (each family
documents its own: a merge's two parts, an LZ78 entry's parent and character,
an n-gram's length and count). The text encoding is the record's too.

The playground (:mod:`tokenforge.serve`) shows both; ``compare``'s report
(:mod:`tokenforge.eval.report`) shows the pieces of its side-by-side sample.

Not handled: families outside the registry, or whose record has no ``detail``
hook (their detail is ``{}`` but for special tokens); merges imported from a
vocabulary without merge structure show no parts.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ..registry import family_of

__all__ = ["TokenInfo", "piece_of", "piece_bytes", "text_encoding"]


def text_encoding(tok) -> str:
    """The encoding the tokenizer reads its text in (its record's ``text_encoding``;
    "utf-8" for a tokenizer outside the registry)."""
    fam = family_of(tok)
    return fam.text_encoding if fam is not None else "utf-8"


def _no_detail(id: int, ref: Callable[[int], dict]) -> dict:
    return {}


def piece_of(data: bytes, encoding: str = "utf-8"):
    """The JSON piece of a token's bytes: their text, or ``{"hex": ...}``."""
    try:
        return data.decode(encoding)  # strict: a lone surrogate's bytes are not UTF-8 either
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def piece_bytes(piece, encoding: str = "utf-8") -> bytes:
    """The bytes a piece stands for (the inverse of :func:`piece_of`)."""
    if isinstance(piece, dict):
        return bytes.fromhex(piece["hex"])
    return piece.encode(encoding)


class TokenInfo:
    """Pieces and details of one tokenizer's ids, computed on first use and kept.

    Thread-safe for the server's worker threads: the caches only grow, and the
    family's detail function (which indexes the BPE merge table, the LZ78 node
    list, once) is made once under a lock."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.encoding = text_encoding(tok)
        self._pieces: dict[int, Any] = {}
        self._lengths: dict[int, int] = {}
        self._detail: Callable[[int, Callable[[int], dict]], dict] | None = None
        self._lock = threading.Lock()

    def piece(self, id: int):
        p = self._pieces.get(id)
        if p is None:
            data = self.tok.id_to_bytes(id)
            p = self._pieces[id] = piece_of(data, self.encoding)
            self._lengths[id] = len(data)
        return p

    def pieces(self, ids) -> tuple[list, int]:
        """The pieces of ``ids`` and their total length in bytes."""
        out = [self.piece(i) for i in ids]
        lengths = self._lengths
        return out, sum(lengths[i] for i in ids)

    def _family_detail(self) -> Callable[[int, Callable[[int], dict]], dict]:
        with self._lock:
            if self._detail is None:
                fam = family_of(self.tok)
                hook = fam.detail if fam is not None else None
                self._detail = hook(self.tok) if hook is not None else _no_detail
            return self._detail

    def detail(self, id: int) -> dict:
        """What the family knows about ``id`` (see the module docstring)."""
        tok = self.tok
        for text, sid in tok.special_tokens.items():
            if sid == id:
                return {"special": text}
        return self._family_detail()(id, self.ref)

    def ref(self, id: int) -> dict:
        return {"id": int(id), "piece": self.piece(int(id))}
