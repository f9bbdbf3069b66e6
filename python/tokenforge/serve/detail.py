"""What the playground shows about one token: its piece and its family's detail.

A *piece* is the JSON form of one id's bytes: the text they spell when they
are valid in the tokenizer's text encoding (UTF-8 for every family but
mixedgram, whose text is latin1, so every byte is a character), otherwise
``{"hex": "e282"}`` (a token cut inside a UTF-8 character, a byte fallback).
The bytes of the pieces of an encoding, joined, are the bytes the tokenizer
saw (:func:`piece_bytes` undoes a piece).

The *detail* is what the family knows about how an id came to be, looked up by
the family's name from the registry record (:func:`tokenforge.registry.family_of`);
one function per family, in this module only:

- ``bpe``: the two parts of the merge (``left``, ``right``: ids with pieces),
  or ``byte`` for a base byte;
- ``growing``: the same, plus the ``source`` that added the merge when the
  tokenizer's per-source counts add up to its merges (sources are credited in
  the order they were learned; otherwise ``source`` is absent);
- ``lz78``: the entry's ``parent`` (its code and pattern; code 0 is the empty
  root) and ``char``, the character that extends it; a compressed (Patricia)
  dictionary gives the parent node's pattern and the edge label; a flat one
  has no parent; byte-fallback ids say ``byte``;
- ``mixedgram``: ``n`` (the n-gram's length in bytes) and its training
  ``count`` when the file kept counts;
- any family: ``special`` for a special token.

Not handled: families outside the registry (their detail is ``{}``); merges
imported from a vocabulary without merge structure show no parts.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["TokenInfo", "piece_of", "piece_bytes", "text_encoding"]

#: families whose text is not UTF-8 (the default)
_TEXT_ENCODING = {"mixedgram": "latin-1"}


def text_encoding(tok) -> str:
    """The encoding the tokenizer reads its text in: "utf-8" or "latin-1"."""
    return _TEXT_ENCODING.get(tok.family, "utf-8")


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

    Thread-safe for the server's worker threads: the caches only grow, and a
    family's index (the BPE merge table, the LZ78 node list) is built once
    under a lock."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.encoding = text_encoding(tok)
        self._pieces: dict[int, Any] = {}
        self._lengths: dict[int, int] = {}
        self._index: Any = None
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

    def _family_index(self):
        with self._lock:
            if self._index is None:
                build = _INDEX.get(self.tok.family)
                self._index = build(self.tok) if build is not None else {}
            return self._index

    def detail(self, id: int) -> dict:
        """What the family knows about ``id`` (see the module docstring)."""
        tok = self.tok
        for text, sid in tok.special_tokens.items():
            if sid == id:
                return {"special": text}
        fn = _DETAIL.get(tok.family)
        if fn is None:
            return {}
        return fn(self, self._family_index(), id)

    def ref(self, id: int) -> dict:
        return {"id": int(id), "piece": self.piece(int(id))}


# ---------------------------------------------------------------------------
# bpe and growing: the merge's two parts
# ---------------------------------------------------------------------------
def _bpe_index(tok) -> dict:
    return {"parts": {c: (a, b) for a, b, c in tok.merges}}


def _growing_index(tok) -> dict:
    merges = tok.merge_list
    parts = {c: (a, b) for a, b, c in merges}
    sources = tok.sources_contributed
    source_of: list[tuple[int, str]] = []  # (first id after the source's merges, name)
    if merges and sum(sources.values()) == len(merges):
        end = merges[0][2]
        for name, n in sources.items():
            end += n
            source_of.append((end, name))
    return {"parts": parts, "sources": source_of}


def _merge_detail(info: TokenInfo, index: dict, id: int) -> dict:
    ab = index["parts"].get(id)
    if ab is None:
        data = info.tok.id_to_bytes(id)
        return {"byte": data[0]} if len(data) == 1 else {}
    out = {"left": info.ref(ab[0]), "right": info.ref(ab[1])}
    for end, name in index.get("sources", ()):
        if id < end:
            out["source"] = name
            break
    return out


# ---------------------------------------------------------------------------
# lz78: the parent and the character
# ---------------------------------------------------------------------------
def _lz78_index(tok) -> dict:
    data = tok.data
    index = {"structure": data.structure, "nodes": data.nodes, "n": tok.num_codes}
    if data.structure == "compressed":  # Patricia: output id -> node index
        index["node_of"] = {node[2]: k + 1 for k, node in enumerate(data.nodes) if node[2] > 0}
    return index


def _lz78_detail(info: TokenInfo, index: dict, id: int) -> dict:
    n = index["n"]
    if id > n:
        return {"byte": id - n - 1}
    if id < 1:
        return {}
    nodes = index["nodes"]
    structure = index["structure"]
    if structure == "tree":  # output entries are codes 1..N
        parent, char, _pattern, _out = nodes[id - 1]
        return {"parent": {"code": parent, "pattern": nodes[parent - 1][2] if parent else ""}, "char": char}
    if structure == "compressed":
        k = index["node_of"].get(id)
        if k is None:
            return {}
        parent, label, _out, _pattern = nodes[k - 1]
        return {"parent": {"node": parent, "pattern": nodes[parent - 1][3] if parent else ""}, "edge": label}
    return {"flat": True}


# ---------------------------------------------------------------------------
# mixedgram: the n-gram's length and count
# ---------------------------------------------------------------------------
def _mixedgram_index(tok) -> dict:
    return {"counts": tok.counts}


def _mixedgram_detail(info: TokenInfo, index: dict, id: int) -> dict:
    if id < 256:
        return {"byte": id}
    out: dict = {"n": len(info.tok.id_to_bytes(id))}
    counts = index["counts"]
    if counts is not None and id - 256 < len(counts):
        out["count"] = int(counts[id - 256])
    return out


_INDEX: dict[str, Callable[[Any], Any]] = {
    "bpe": _bpe_index,
    "growing": _growing_index,
    "lz78": _lz78_index,
    "mixedgram": _mixedgram_index,
}
_DETAIL: dict[str, Callable[[TokenInfo, Any, int], dict]] = {
    "bpe": _merge_detail,
    "growing": _merge_detail,
    "lz78": _lz78_detail,
    "mixedgram": _mixedgram_detail,
}
