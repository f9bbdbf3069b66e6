"""Slow, obviously-correct byte-level BPE, used only by tests.

Nothing here is fast and nothing here is meant for users: every function is the
plainest loop that states the rule, so that the Rust engine (and tiktoken,
rustbpe, HF tokenizers) can be checked against it on small inputs.

Training (:func:`train_reference`) recounts every adjacent pair over every
word at every step -- O(merges x corpus) -- and picks the best pair by one of
two documented tie-breaking rules:

``"pair_ids"``
    highest count, ties to the smallest ``(left_id, right_id)``; this is
    rustbpe's (nanochat's) rule.
``"lexicographic"``
    highest count, ties to the lexicographically largest
    ``(bytes(left), bytes(right))`` (then to the smaller ids, when two pairs
    spell the same bytes); this is gpt_from_scratch's rule, minus its
    "scan only the 1000 most common pairs" shortcut, which can miss the maximum.

Encoding (:func:`encode_reference`) follows tiktoken: a pre-token that is
itself in the vocabulary is one id; otherwise start from single bytes and keep
merging the adjacent pair whose concatenated bytes has the lowest rank
(leftmost on a tie) until no adjacent pair is in the vocabulary.

Not handled here: special tokens (callers add them), streaming input, and
anything about speed.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

import regex

from ..errors import TokenforgeError, VocabSizeError

__all__ = [
    "GPT4_PATTERN",
    "GPT2_PATTERN",
    "TIE_BREAKS",
    "split",
    "count_words",
    "train_reference",
    "train_reference_texts",
    "merges_to_ranks",
    "encode_reference",
]

#: nanochat's split pattern: GPT-4's (cl100k) with at most 2 digits per number
#: and possessive quantifiers.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)

#: GPT-2's split pattern.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

#: the tie-breaking rules :func:`train_reference` knows.
TIE_BREAKS = ("pair_ids", "lexicographic")

#: nanochat appends this many special tokens after the merges.
_NANOCHAT_NUM_SPECIAL = 9


def split(text: str, pattern: str | None) -> list[str]:
    """Pre-tokenize ``text``: every match of ``pattern`` and the text between them, in order.

    Text no match covers is a piece of its own (as Hugging Face's
    ``Split(pattern, "isolated")``); empty matches are skipped; so the pieces
    concatenate to ``text``. With ``pattern=None`` there is no
    pre-tokenization: the whole text is one piece (and the empty text gives no
    pieces). (For a pattern that can match the empty string, Python's
    ``regex`` may place the non-empty matches differently from the engine's
    fancy-regex; the built-in patterns cannot match it.)
    """
    if pattern is None:
        return [text] if text else []
    pieces: list[str] = []
    done = 0
    for m in regex.finditer(pattern, text):
        if m.end() == m.start():
            continue
        if m.start() > done:
            pieces.append(text[done : m.start()])
        pieces.append(m.group())
        done = m.end()
    if done < len(text):
        pieces.append(text[done:])
    return pieces


def count_words(texts: Iterable[str], pattern: str | None) -> dict[bytes, int]:
    """How often each pre-token occurs in ``texts``, as UTF-8 bytes."""
    counts: Counter[bytes] = Counter()
    for text in texts:
        for piece in split(text, pattern):
            counts[piece.encode("utf-8")] += 1
    return dict(counts)


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``word``, left to right, never overlapping."""
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _count_pairs(words: list[list[int]], counts: list[int]) -> Counter[tuple[int, int]]:
    """Every adjacent pair of every word, weighted by the word's count."""
    pairs: Counter[tuple[int, int]] = Counter()
    for word, n in zip(words, counts):
        for pair in zip(word, word[1:]):
            pairs[pair] += n
    return pairs


def train_reference(
    word_counts: dict[bytes, int],
    num_merges: int,
    tie_break: str = "pair_ids",
    byte_ids: list[int] | None = None,
    first_merge_id: int = 256,
    min_frequency: int = 1,
) -> list[tuple[int, int, int]]:
    """Learn up to ``num_merges`` merges from pre-token counts, the naive way.

    ``byte_ids[b]`` is the id of byte value ``b`` (default: ``b`` itself); merge
    ``k`` gets id ``first_merge_id + k``. Each step recounts all adjacent pairs
    (weighted by word count), takes the highest count, breaks ties by
    ``tie_break`` (see the module docstring), and merges that pair left to
    right without overlap in every word. Training stops early when no pair
    occurs at least ``max(1, min_frequency)`` times.

    Returns ``[(left_id, right_id, new_id), ...]`` in merge order.
    """
    if tie_break not in TIE_BREAKS:
        raise TokenforgeError(f"unknown tie_break {tie_break!r}; expected one of {', '.join(TIE_BREAKS)}")
    if byte_ids is None:
        byte_ids = list(range(256))
    if len(byte_ids) != 256:
        raise TokenforgeError(f"byte_ids must give an id for each of the 256 byte values, got {len(byte_ids)}")
    if num_merges < 0:
        raise VocabSizeError(f"num_merges must be >= 0, got {num_merges}")
    threshold = max(1, min_frequency)

    id_bytes = {byte_ids[b]: bytes([b]) for b in range(256)}
    words = [[byte_ids[b] for b in w] for w in word_counts]
    counts = list(word_counts.values())
    merges: list[tuple[int, int, int]] = []
    for k in range(num_merges):
        pairs = _count_pairs(words, counts)
        best_count = max(pairs.values(), default=0)
        if best_count < threshold:
            break
        tied = [p for p, c in pairs.items() if c == best_count]
        if tie_break == "pair_ids":
            pair = min(tied)
        else:
            # sorted first: of two pairs with the same bytes, the smaller ids
            pair = max(sorted(tied), key=lambda p: (id_bytes[p[0]], id_bytes[p[1]]))
        new_id = first_merge_id + k
        id_bytes[new_id] = id_bytes[pair[0]] + id_bytes[pair[1]]
        words = [_merge_word(w, pair, new_id) for w in words]
        merges.append((pair[0], pair[1], new_id))
    return merges


def train_reference_texts(
    texts: Iterable[str],
    vocab_size: int,
    pattern: str | None = GPT4_PATTERN,
    tie_break: str = "pair_ids",
    *,
    num_special: int = _NANOCHAT_NUM_SPECIAL,
    min_frequency: int = 1,
) -> list[tuple[int, int, int]]:
    """Train on texts in nanochat's layout: bytes 0..255, merges from 256, then specials.

    ``vocab_size`` counts the ``num_special`` special tokens (nanochat's 9 by
    default), so ``vocab_size - 256 - num_special`` merges are learned, as
    nanochat asks rustbpe for ``vocab_size - len(SPECIAL_TOKENS)`` tokens.
    Pass ``num_special=0`` to compare with a bare ``rustbpe`` run.
    """
    num_merges = vocab_size - 256 - num_special
    if num_merges < 0:
        raise VocabSizeError(
            f"vocab_size {vocab_size} is below 256 bytes + {num_special} special tokens = {256 + num_special}"
        )
    return train_reference(count_words(texts, pattern), num_merges, tie_break=tie_break, min_frequency=min_frequency)


def merges_to_ranks(merges: Iterable[tuple[int, int, int]], byte_ids: list[int] | None = None) -> dict[bytes, int]:
    """The ``token bytes -> id`` table (tiktoken's ``mergeable_ranks``) of bytes plus merges."""
    if byte_ids is None:
        byte_ids = list(range(256))
    id_bytes = {byte_ids[b]: bytes([b]) for b in range(256)}
    for left, right, new_id in merges:
        id_bytes[new_id] = id_bytes[left] + id_bytes[right]
    return {tok: i for i, tok in id_bytes.items()}


def _encode_piece(ranks: dict[bytes, int], piece: bytes) -> list[int]:
    """tiktoken's rule for one pre-token (see the module docstring)."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [piece[i : i + 1] for i in range(len(piece))]
    for p in parts:
        if p not in ranks:
            raise TokenforgeError(f"byte {p!r} has no id in this vocabulary")
    while len(parts) > 1:
        best_i, best_rank = -1, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_i, best_rank = i, rank
        if best_rank is None:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return [ranks[p] for p in parts]


def encode_reference(ranks: dict[bytes, int], text: str, pattern: str | None) -> list[int]:
    """Encode ``text`` with the ``token bytes -> id`` table ``ranks``, tiktoken's way.

    Ranks double as ids (as in tiktoken and nanochat, where a merge's id is
    its rank). Special tokens are not recognised: their text is plain text.
    """
    ids: list[int] = []
    for piece in split(text, pattern):
        ids.extend(_encode_piece(ranks, piece.encode("utf-8")))
    return ids
