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
``embedding_metadata`` hook with it, from their ``(left, right, new_id)`` triples,
and their playground detail with :func:`merge_detail` (a merged id's two parts).

Not handled: a "hierarchical" mode. A BPE token's longest proper prefix that
is itself a token does not leave a single token as the remainder, so there is
no trie parent + character split; :func:`bpe_embedding_metadata` refuses it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from .embedding_meta import EmbeddingModeError

__all__ = ["bpe_embedding_metadata", "merge_detail", "Detail", "Ref"]

#: ``ref(id)``: the playground's reference to another id (``{"id", "piece"}``)
Ref = Callable[[int], dict]
#: ``detail(id, ref)``: what a family knows about how ``id`` came to be (a family record's ``detail`` hook)
Detail = Callable[[int, Ref], dict]


def merge_detail(
    triples: Iterable[tuple[int, int, int]],
    id_to_bytes: Callable[[int], bytes],
    sources: Sequence[tuple[int, str]] = (),
) -> Detail:
    """The playground detail of a BPE vocabulary built by ``triples``
    (``(left, right, new_id)``): a merged id's two parts (``left``, ``right``),
    ``byte`` for a base byte, and the ``source`` whose merges end before
    ``end`` for the first ``(end, source)`` of ``sources`` above the id (the
    growing vocabulary's per-source credit; none: no ``source``).

    The table of parts is built once, here (one dict over the merges), so each
    lookup is one dict probe."""
    parts = {c: (a, b) for a, b, c in triples}

    def detail(id: int, ref: Ref) -> dict:
        ab = parts.get(id)
        if ab is None:
            data = id_to_bytes(id)
            return {"byte": data[0]} if len(data) == 1 else {}
        out: dict[str, Any] = {"left": ref(ab[0]), "right": ref(ab[1])}
        for end, name in sources:
            if id < end:
                out["source"] = name
                break
        return out

    return detail


def bpe_embedding_metadata(
    triples: Iterable[tuple[int, int, int]], vocab_size: int, mode: str = "structured", *, who: str = "BPE tokenizer"
) -> dict:
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
