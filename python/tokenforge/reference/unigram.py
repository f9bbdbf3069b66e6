"""Slow, obviously-correct Unigram segmentation: the one Viterbi loop of both
imported Unigram engines' rules, used by tests against the Rust engine
(``tokenforge._core.WordModel`` / ``SpmEncoder``) and by the pipeline
family for text the Rust engine cannot take (lone surrogates).

:func:`best_path` walks a character trie of the pieces (nested dicts; ``""``
marks a piece's end with its id) from each character, keeps per end position
the best-scoring path (a later candidate must score strictly more, so the
first found, shorter, one wins a tie), and gives a character with no
single-character piece an unknown node. What differs between the libraries is
passed in:

* ``score_of(id, piece_bytes, here)``: the candidate's path score, or None when
  the piece is not a node (SentencePiece's unused pieces);
* ``unk_score(here)``: an unknown character's candidate;
* ``store``: how a winning score is kept (``f32`` for SentencePiece, which sums
  in float32; ``float`` for tokenizers, which sums in float64).

What each library then does with unknown nodes (ids per run, bytes, the fused
string looked up again) is its caller's: :mod:`tokenforge.pipeline.spm` and
:class:`tokenforge.pipeline.steps.Unigram`.

Not handled: sampling and n-best.
"""

from __future__ import annotations

from typing import Callable

from ..errors import FormatError

__all__ = ["best_path"]


def best_path(
    s: str,
    trie: dict,
    score_of: Callable[[int, int, float], float | None],
    unk_id: int | None,
    unk_score: Callable[[float], float],
    store: Callable[[float], float] = float,
) -> list[tuple[int, int, int]]:
    """The best segmentation of ``s`` as ``(start, end, id)`` nodes (character
    offsets), first to last; ``score_of`` gets the piece's UTF-8 length."""
    n = len(s)
    score_at = [0.0] * (n + 1)
    start_at = [-1] * (n + 1)
    id_at = [0] * (n + 1)
    for i in range(n):
        here = score_at[i]
        single = False
        node = trie
        end = i
        while end < n:
            nxt = node.get(s[end])
            if nxt is None:
                break
            node = nxt
            end += 1
            pid = node.get("")
            if pid is None:
                continue
            cand = score_of(pid, len(s[i:end].encode("utf-8", "surrogatepass")), here)
            if cand is None:
                continue
            if start_at[end] == -1 or cand > score_at[end]:
                score_at[end], start_at[end], id_at[end] = store(cand), i, pid
            if end == i + 1:
                single = True
        if not single:
            if unk_id is None:
                raise FormatError(
                    f"the Unigram model has no unk_id, so a character it has no piece for cannot be encoded: {s[i]!r}"
                )
            cand = unk_score(here)
            if start_at[i + 1] == -1 or cand > score_at[i + 1]:
                score_at[i + 1], start_at[i + 1], id_at[i + 1] = store(cand), i, unk_id
    out: list[tuple[int, int, int]] = []
    end = n
    while end > 0:
        a = start_at[end]
        out.append((a, end, id_at[end]))
        end = a
    out.reverse()
    return out
