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

A token cut inside a multi-byte character has a piece of bytes; :func:`char_parts`
says which character each such token holds bytes of, and which of its bytes,
so the playground can show the character, grouped, instead of bare hex.

A tokenizer that refuses some of a text (mixedgram, latin1 only, given a
character outside latin1) still cuts the rest: :func:`encode_what_it_can`
encodes the runs of characters its text encoding holds, one by one, and names
the runs it left out and where.

The playground (:mod:`tokenforge.serve`) shows all of these; ``compare``'s report
(:mod:`tokenforge.eval.report`) shows the pieces of its side-by-side sample.

Not handled: families outside the registry, or whose record has no ``detail``
hook (their detail is ``{}`` but for special tokens); merges imported from a
vocabulary without merge structure show no parts; a tokenizer that refuses
text its text encoding holds (that is an error, not a gap); the ids at the
edge of a left-out run are those of the runs encoded apart (no token can span
text the tokenizer cannot read anyway).
"""

from __future__ import annotations

import codecs
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

from ..registry import family_of

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["TokenInfo", "piece_of", "piece_bytes", "text_encoding", "char_parts", "encode_what_it_can"]


#: a token's piece as the playground's API gives it: its text, or ``{"hex": ...}``
Piece = Union[str, dict[str, str]]


def text_encoding(tok: Tokenizer) -> str:
    """The encoding the tokenizer reads its text in (its record's ``text_encoding``;
    "utf-8" for a tokenizer outside the registry)."""
    fam = family_of(tok)
    return fam.text_encoding if fam is not None else "utf-8"


def _no_detail(id: int, ref: Callable[[int], dict]) -> dict:
    return {}


def piece_of(data: bytes, encoding: str = "utf-8") -> Piece:
    """The JSON piece of a token's bytes: their text, or ``{"hex": ...}``."""
    try:
        return data.decode(encoding)  # strict: a lone surrogate's bytes are not UTF-8 either
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def piece_bytes(piece: Piece, encoding: str = "utf-8") -> bytes:
    """The bytes a piece stands for (the inverse of :func:`piece_of`)."""
    if isinstance(piece, dict):
        return bytes.fromhex(piece["hex"])
    return piece.encode(encoding)


class TokenInfo:
    """Pieces and details of one tokenizer's ids, computed on first use and kept.

    Thread-safe for the server's worker threads: the caches only grow, and the
    family's detail function (which indexes the BPE merge table, the LZ78 node
    list, once) is made once under a lock."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.encoding = text_encoding(tok)
        self._pieces: dict[int, Any] = {}
        self._lengths: dict[int, int] = {}
        self._detail: Callable[[int, Callable[[int], dict]], dict] | None = None
        self._lock = threading.Lock()

    def piece(self, id: int) -> Piece:
        p = self._pieces.get(id)
        if p is None:
            data = self.tok.id_to_bytes(id)
            p = self._pieces[id] = piece_of(data, self.encoding)
            self._lengths[id] = len(data)
        return p

    def pieces(self, ids: Iterable[int]) -> tuple[list, int]:
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


def char_parts(pieces: Sequence[Piece], encoding: str = "utf-8") -> dict[int, list[dict]]:
    """For each piece that is bytes (``{"hex": ...}``) under UTF-8, the characters
    its bytes belong to: ``{k: [{"char", "at", "from", "to", "of"}, ...]}`` where
    ``at`` is the character's first byte in the joined pieces, and the token holds
    its bytes ``from``..``to`` (0-based, end excluded) of ``of``. ``char`` is the
    character, or None for bytes that are no character JSON can carry (a lone
    surrogate's three bytes: ``of`` 3; a stray byte: ``of`` 1). Nothing for
    latin1 (every byte is a character) or for pieces that are text.

    Linear: each byte piece looks back at most three bytes for its character's
    first byte."""
    if encoding != "utf-8":
        return {}
    data = bytearray()
    spans: list[tuple[int, int, int]] = []  # (k, start, end) of the byte pieces
    for k, p in enumerate(pieces):
        b = piece_bytes(p, encoding)
        if isinstance(p, dict):
            spans.append((k, len(data), len(data) + len(b)))
        data += b
    out: dict[int, list[dict]] = {}
    for k, b0, b1 in spans:
        c = b0
        while c > 0 and b0 - c < 3 and 0x80 <= data[c] < 0xC0:
            c -= 1
        frags = []
        while c < b1:
            n = _utf8_length(data[c])
            ch: str | None = None
            if data[c] < 0x80:
                ch = chr(data[c])
            elif n > 1 and c + n <= len(data) and all(0x80 <= x < 0xC0 for x in data[c + 1 : c + n]):
                try:
                    ch = bytes(data[c : c + n]).decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:  # an overlong form, a code point past U+10FFFF
                    n = 1
                else:
                    ch = None if 0xD800 <= ord(ch) < 0xE000 else ch  # a lone surrogate: three bytes, no char
            else:
                n = 1  # a byte that starts no character it completes: one byte on its own
            if c + n > b0:
                frags.append({"char": ch, "at": c, "from": max(b0, c) - c, "to": min(b1, c + n) - c, "of": n})
            c += n
        out[k] = frags
    return out


def _utf8_length(lead: int) -> int:
    return 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1


class _Gaps(threading.local):
    runs: list[tuple[int, int]]


_GAPS = _Gaps()


def _record_gap(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):  # registered for encoding only
        raise e
    _GAPS.runs.append((e.start, e.end))
    return "", e.end


codecs.register_error("tokenforge.pieces.gaps", _record_gap)


def unencodable_runs(text: str, encoding: str) -> list[tuple[int, int]]:
    """``(start, end)`` character runs of ``text`` that ``encoding`` cannot hold
    (UTF-8 holds everything: lone surrogates go through as their three bytes). One
    pass of the codec; adjacent runs merged."""
    if encoding == "utf-8":
        return []
    _GAPS.runs = []
    text.encode(encoding, "tokenforge.pieces.gaps")
    runs: list[tuple[int, int]] = []
    for a, b in _GAPS.runs:
        if runs and runs[-1][1] == a:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((a, b))
    return runs


def encode_what_it_can(encode: Callable[[str], list[int]], text: str, encoding: str) -> tuple[list[int], list]:
    """``(ids, gaps)``: ``encode`` (a tokenizer's ``encode_ordinary``, say) applied
    to each run of ``text`` that ``encoding`` holds, and ``[[k, run], ...]`` for
    each run it does not, ``k`` the index of the first id after it. The whole text
    when it is all encodable; the caller calls this after ``encode`` refused it."""
    ids: list[int] = []
    gaps: list = []
    pos = 0
    for a, b in unencodable_runs(text, encoding):
        if a > pos:
            ids += encode(text[pos:a])
        gaps.append([len(ids), text[a:b]])
        pos = b
    if pos < len(text):
        ids += encode(text[pos:])
    return ids, gaps
