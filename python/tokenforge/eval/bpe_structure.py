"""The "structured" embedding decomposition of a BPE vocabulary.

Every BPE merge ``(left, right) -> new`` builds ``new`` from two existing
tokens. The structured mode embeds ``new`` as

    ParentEmbed[1 + left] + CharEmbed[right]

so ``left`` plays the LZ78 parent and ``right`` (a whole token, not a single
character) plays the extending character. Ids that no merge produces (the 256
byte tokens, special tokens, unused slots) have no parent (row 0) and their
own character row ``CharEmbed[id]``. The parent table therefore has
``vocab + 1`` rows (row 0 = no parent) and the character table ``vocab`` rows;
every id gets a distinct (parent, char) pair, because a BPE vocabulary never
holds the same pair twice.

Not provided: a "hierarchical" mode. A BPE token's longest proper prefix that
is itself a token does not leave a single token as the remainder, so there is
no trie parent + character split; :func:`bpe_embedding_metadata` refuses it.

Works for any tokenizer with ``merge_list`` (the growing vocabulary) or
``merges`` as ``(left, right, new_id)`` triples (:class:`tokenforge.BPETokenizer`).
"""

from __future__ import annotations

import numpy as np

from .structure import EmbeddingModeError, model_vocab_size

__all__ = ["bpe_embedding_metadata", "merge_triples"]


def merge_triples(tok) -> list[tuple[int, int, int]]:
    """``(left, right, new_id)`` for every merge of a BPE-like tokenizer."""
    ml = getattr(tok, "merge_list", None)
    if ml is not None:
        triples = ml() if callable(ml) else ml
    else:
        triples = tok.merges
        if hasattr(triples, "items"):  # {(left, right): new_id}
            triples = [(a, b, n) for (a, b), n in triples.items()]
    return [(int(a), int(b), int(n)) for a, b, n in triples]


def bpe_embedding_metadata(tok, mode: str = "structured") -> dict:
    """Parent/character indices of a BPE vocabulary (see the module docstring)."""
    if mode == "tuple":
        mode = "structured"
    if mode != "structured":
        raise EmbeddingModeError(
            f"{type(tok).__name__} (BPE) offers only the 'structured' decomposition (the two parts of each "
            f"merge), not {mode!r}; use 'structured', 'tuple' or 'flat'"
        )
    vocab = model_vocab_size(tok)
    parent = np.zeros(vocab, dtype=np.int64)
    char = np.arange(vocab, dtype=np.int64)
    triples = merge_triples(tok)
    if triples:
        t = np.asarray(triples, dtype=np.int64)
        keep = t[:, 2] < vocab
        t = t[keep]
        parent[t[:, 2]] = t[:, 0] + 1
        char[t[:, 2]] = t[:, 1]
    return {
        "parent": parent,
        "char": char,
        "num_parents": vocab + 1,
        "num_chars": vocab,
        "description": "BPE merge (left, right): parent row = 1 + left (0 = none), char row = right (own id when not a merge)",
    }
