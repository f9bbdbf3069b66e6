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

:class:`tokenforge.BPETokenizer` and the growing vocabulary both answer their
``embedding_metadata`` hook with it, from their ``(left, right, new_id)`` triples.

Not handled: a "hierarchical" mode. A BPE token's longest proper prefix that
is itself a token does not leave a single token as the remainder, so there is
no trie parent + character split; :func:`bpe_embedding_metadata` refuses it.
"""

from __future__ import annotations

from .embedding_meta import EmbeddingModeError

__all__ = ["bpe_embedding_metadata"]


def bpe_embedding_metadata(triples, vocab_size: int, mode: str = "structured", *, who: str = "BPE tokenizer") -> dict:
    """Parent/character indices of a BPE vocabulary of ``vocab_size`` ids built by
    the merges ``triples`` (``(left, right, new_id)``; see the module docstring)."""
    import numpy as np  # imported when first needed: `import tokenforge` does not load numpy

    if mode == "tuple":
        mode = "structured"
    if mode != "structured":
        raise EmbeddingModeError(
            f"{who} (BPE) offers only the 'structured' decomposition (the two parts of each "
            f"merge), not {mode!r}; use 'structured', 'tuple' or 'flat'"
        )
    vocab = int(vocab_size)
    parent = np.zeros(vocab, dtype=np.int64)
    char = np.arange(vocab, dtype=np.int64)
    triples = [(int(a), int(b), int(n)) for a, b, n in triples]
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
