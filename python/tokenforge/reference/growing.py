"""Slow, obviously-correct continued BPE in the growing vocabulary's layout (tests and bench only).

Layout: byte b is id b + 10, merges from 266. Text is NFC-normalised and
split with GPT-4's (cl100k) pattern, as :class:`tokenforge.GrowingBPETokenizer` does.

- :func:`encode_piece` / :func:`encode_reference`: the seed's encoding rule --
  apply learned merges, the lowest merge id first, leftmost on a tie, until no
  adjacent pair is a learned merge (a pair that is not a learned merge never
  merges, even if its bytes happen to form a token).
- :func:`learn_reference`: continued BPE, the plainest way. Every piece is
  first encoded with the existing merges; then each step recounts every
  adjacent pair over every piece (weighted by the piece's count), takes the
  highest count (ties to the smallest ``(left, right)``), and merges it left to
  right without overlap. Stops below ``min_frequency``.
- :func:`learn_seed_algorithm`: the seed's own incremental algorithm (pair
  counts plus a pair -> words index, updated after each merge; the best pair
  found by scanning every pair count, as ``Counter.most_common(1)`` does), with
  the same deterministic tie-break. Same result as :func:`learn_reference`;
  this is the pure-Python speed baseline of ``bench/growing.py``.

Not handled: special tokens, vocabulary capacity, anything about speed.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Iterable

from .bpe import split as split_text

__all__ = [
    "CL100K_PATTERN",
    "BYTE_OFFSET",
    "MERGE_OFFSET",
    "split",
    "count_words",
    "encode_piece",
    "encode_reference",
    "decode_reference",
    "learn_reference",
    "learn_seed_algorithm",
]

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)
BYTE_OFFSET = 10
MERGE_OFFSET = 266


def split(text: str, pattern: str | None = CL100K_PATTERN) -> list[str]:
    """NFC-normalise ``text`` and cut it into pieces (the whole text if ``pattern`` is None)."""
    return split_text(unicodedata.normalize("NFC", text), pattern)


def count_words(texts: Iterable[str], pattern: str | None = CL100K_PATTERN) -> dict[bytes, int]:
    """How often each piece occurs, as UTF-8 bytes."""
    counts: Counter[bytes] = Counter()
    for text in texts:
        for piece in split(text, pattern):
            counts[piece.encode("utf-8")] += 1
    return dict(counts)


def encode_piece(merges: dict[tuple[int, int], int], piece: bytes) -> list[int]:
    """The seed's rule on one piece: lowest merge id first, leftmost on a tie."""
    ids = [b + BYTE_OFFSET for b in piece]
    while len(ids) > 1:
        best_i, best_id = -1, None
        for i in range(len(ids) - 1):
            z = merges.get((ids[i], ids[i + 1]))
            if z is not None and (best_id is None or z < best_id):
                best_i, best_id = i, z
        if best_id is None:
            break
        ids[best_i : best_i + 2] = [best_id]
    return ids


def encode_reference(merges: dict[tuple[int, int], int], text: str, pattern: str | None = CL100K_PATTERN) -> list[int]:
    """Ids of ``text`` (no BOS/EOS)."""
    out: list[int] = []
    for piece in split(text, pattern):
        out.extend(encode_piece(merges, piece.encode("utf-8")))
    return out


def decode_reference(merges: dict[tuple[int, int], int], ids: Iterable[int]) -> bytes:
    """Bytes of ids 10.. (recursive expansion, as the seed decodes)."""
    parts = {z: p for p, z in merges.items()}

    def expand(t: int) -> bytes:
        if BYTE_OFFSET <= t < MERGE_OFFSET:
            return bytes([t - BYTE_OFFSET])
        a, b = parts[t]
        return expand(a) + expand(b)

    return b"".join(expand(t) for t in ids)


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _start(
    word_counts: dict[bytes, int], merges: dict[tuple[int, int], int], next_id: int
) -> list[tuple[list[int], int]]:
    if merges and sorted(merges.values()) != list(range(MERGE_OFFSET, next_id)):
        raise ValueError("existing merges must have the ids 266 .. next_id - 1")
    if not merges and next_id != MERGE_OFFSET:
        raise ValueError("without merges next_id must be 266")
    return [(encode_piece(merges, w), c) for w, c in word_counts.items()]


def learn_reference(
    word_counts: dict[bytes, int],
    num_merges: int,
    merges: dict[tuple[int, int], int] | None = None,
    next_id: int = MERGE_OFFSET,
    min_frequency: int = 2,
) -> list[tuple[int, int, int]]:
    """New merges ``[(left, right, id), ...]`` learned on top of ``merges`` (recount every step)."""
    merges = dict(merges or {})
    words = _start(word_counts, merges, next_id)
    out: list[tuple[int, int, int]] = []
    for _ in range(num_merges):
        pairs: Counter[tuple[int, int]] = Counter()
        for w, c in words:
            for p in zip(w, w[1:]):
                pairs[p] += c
        if not pairs:
            break
        best = max(pairs.values())
        if best < max(1, min_frequency):
            break
        pair = min(p for p, c in pairs.items() if c == best)
        z = next_id + len(out)
        out.append((pair[0], pair[1], z))
        words = [(_merge_word(w, pair, z), c) for w, c in words]
    return out


def learn_seed_algorithm(
    word_counts: dict[bytes, int],
    num_merges: int,
    merges: dict[tuple[int, int], int] | None = None,
    next_id: int = MERGE_OFFSET,
    min_frequency: int = 2,
    deadline: float | None = None,
) -> list[tuple[int, int, int]]:
    """The seed's incremental algorithm (see the module docstring); same result as
    :func:`learn_reference`. ``deadline`` (a ``time.perf_counter()`` value) stops it
    early, for timing a prefix of a long run."""
    import time

    merges = dict(merges or {})
    word_tokens: dict[tuple[int, ...], int] = {}
    for start, c in _start(word_counts, merges, next_id):
        t = tuple(start)
        word_tokens[t] = word_tokens.get(t, 0) + c
    pair_counts: Counter[tuple[int, int]] = Counter()
    pair_words: dict[tuple[int, int], set] = {}
    for w, c in word_tokens.items():
        for p in zip(w, w[1:]):
            pair_counts[p] += c
            pair_words.setdefault(p, set()).add(w)
    out: list[tuple[int, int, int]] = []
    while len(out) < num_merges:
        if deadline is not None and time.perf_counter() > deadline:
            break
        if not pair_counts:
            break
        # one scan over every pair, like Counter.most_common(1); ties to the smaller pair
        best_pair: tuple[int, int] | None = None
        best = 0
        for p, c in pair_counts.items():
            if best_pair is None or c > best or (c == best and p < best_pair):
                best_pair, best = p, c
        if best_pair is None or best < max(1, min_frequency):
            break
        z = next_id + len(out)
        out.append((best_pair[0], best_pair[1], z))
        for w in list(pair_words.pop(best_pair, ())):
            if w not in word_tokens:
                continue
            c = word_tokens.pop(w)
            for p in zip(w, w[1:]):
                left = pair_counts[p] - c
                if left > 0:
                    pair_counts[p] = left
                else:
                    del pair_counts[p]
                s = pair_words.get(p)
                if s is not None:
                    s.discard(w)
            nw = tuple(_merge_word(list(w), best_pair, z))
            word_tokens[nw] = word_tokens.get(nw, 0) + c
            for p in zip(nw, nw[1:]):
                pair_counts[p] += c
                pair_words.setdefault(p, set()).add(nw)
    return out
