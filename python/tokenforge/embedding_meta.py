"""Embedding metadata: which parent and which "character" every id is made of.

The tree embedding modes of :mod:`tokenforge.torch` do not give every id its
own vector; they compose it from a *parent* row and a *character* row. This
module says where those indices come from, for any tokenizer, without torch.
It sits below both its users (``torch/`` and ``eval/``) and imports neither.

The hook: :meth:`tokenforge.base.Tokenizer.embedding_metadata` ``(mode)``
returns a dict with

``parent``       int64 array, one entry per id: the row of the parent table
                 (0 = no parent; the parent table has ``num_parents`` rows)
``char``         int64 array, one entry per id: the row of the character table
``num_chars``    rows of the character table
``num_parents``  rows of the parent table (optional; default ``len(parent)``)

and may say that it has no tree at all with ``"flat": True`` (or
``"structure": "flat"``), or by raising an error itself (the base class does:
a family without a tree). Tree modes refuse such a tokenizer with
:class:`EmbeddingModeError`.

Modes:

``flat``          no metadata (one row per id)
``structured``    the family's own decomposition (LZ78: the LZ78 parent, i.e. the
                  phrase the entry extended when it was created; BPE and the
                  growing vocabulary: :mod:`tokenforge.bpe_structure`)
``hierarchical``  the trie parent (LZ78: the longest proper prefix that is itself
                  an output entry)
``tuple``         the ``structured`` indices, concatenated then projected

Not handled: metadata for ids beyond :attr:`Tokenizer.model_vocab_size` (a
growing vocabulary's unused ids get rows only once they are in use).
"""

from __future__ import annotations

from typing import Any

from .errors import TokenforgeError

__all__ = [
    "MODES",
    "TREE_MODES",
    "EmbeddingModeError",
    "get_embedding_metadata",
    "validate_metadata",
    "model_vocab_size",
]

#: every embedding mode
MODES = ("flat", "structured", "hierarchical", "tuple")
#: the modes that need a parent/character decomposition
TREE_MODES = ("structured", "hierarchical", "tuple")


class EmbeddingModeError(TokenforgeError):
    """An embedding mode this tokenizer cannot provide (e.g. a tree mode on a flat dictionary)."""


def model_vocab_size(tok: Any) -> int:
    """Rows a language model needs for this tokenizer: the ids that can occur
    (:attr:`tokenforge.base.Tokenizer.model_vocab_size`; the growing vocabulary
    declares a maximum far above the ids in use)."""
    return int(tok.model_vocab_size)


def _metadata_mode(mode: str) -> str:
    if mode not in MODES:
        raise EmbeddingModeError(f"unknown embedding mode {mode!r}; expected one of {', '.join(MODES)}")
    return "structured" if mode == "tuple" else mode


def get_embedding_metadata(tok: Any, mode: str) -> dict | None:
    """The validated metadata a tokenizer offers for ``mode`` (None for ``flat``).

    Raises :class:`EmbeddingModeError` when the tokenizer has no such
    decomposition: a flat dictionary, or a family without a tree.
    """
    meta_mode = _metadata_mode(mode)
    if meta_mode == "flat":
        return None
    vocab = model_vocab_size(tok)
    name = type(tok).__name__
    try:
        meta = tok.embedding_metadata(meta_mode)
    except EmbeddingModeError:
        raise
    except TokenforgeError as e:  # e.g. LZ78's refusal of a flat dictionary: one error type for callers
        raise EmbeddingModeError(str(e)) from e
    return validate_metadata(meta, vocab, mode=mode, who=name)


def _is_flat(meta: dict) -> bool:
    return bool(meta.get("flat")) or meta.get("structure") == "flat"


def validate_metadata(
    meta: Any, vocab_size: int | None = None, *, mode: str = "structured", who: str = "tokenizer"
) -> dict:
    """Check a metadata dict and return a normalised copy (int64 arrays, num_parents set).

    Refuses flat metadata, arrays of the wrong length, and indices outside
    their tables, each with an :class:`EmbeddingModeError` naming the problem.
    """
    import numpy as np  # imported when first needed: `import tokenforge` does not load numpy

    if not isinstance(meta, dict):
        raise EmbeddingModeError(f"{who}.embedding_metadata returned {type(meta).__name__}, expected a dict")
    if _is_flat(meta):
        raise EmbeddingModeError(
            f"{who} has a flat dictionary (entries are independent strings, not parent + character), so the "
            f"{mode!r} embedding cannot be built; use mode 'flat'"
        )
    for key in ("parent", "char", "num_chars"):
        if key not in meta:
            raise EmbeddingModeError(f"{who}.embedding_metadata has no {key!r} entry (needs parent, char, num_chars)")
    parent = np.asarray(meta["parent"])
    char = np.asarray(meta["char"])
    if parent.ndim != 1 or char.ndim != 1 or len(parent) != len(char):
        raise EmbeddingModeError(
            f"{who}.embedding_metadata: parent and char must be 1-D arrays of one length (got shapes "
            f"{parent.shape} and {char.shape})"
        )
    if not (np.issubdtype(parent.dtype, np.integer) and np.issubdtype(char.dtype, np.integer)):
        raise EmbeddingModeError(f"{who}.embedding_metadata: parent and char must be integer arrays")
    if vocab_size is not None and len(parent) < vocab_size:
        raise EmbeddingModeError(
            f"{who}.embedding_metadata covers {len(parent)} ids but the vocabulary has {vocab_size}"
        )
    if vocab_size is not None:
        parent, char = parent[:vocab_size], char[:vocab_size]
    num_chars = int(meta["num_chars"])
    num_parents = int(meta.get("num_parents", len(parent)))
    if num_chars < 1 or num_parents < 1:
        raise EmbeddingModeError(f"{who}.embedding_metadata: num_chars and num_parents must be >= 1")
    if len(parent) and (parent.min() < 0 or parent.max() >= num_parents):
        bad = int(np.nonzero((parent < 0) | (parent >= num_parents))[0][0])
        raise EmbeddingModeError(
            f"{who}.embedding_metadata: id {bad} has parent {int(parent[bad])}, outside the parent table of {num_parents} rows"
        )
    if len(char) and (char.min() < 0 or char.max() >= num_chars):
        bad = int(np.nonzero((char < 0) | (char >= num_chars))[0][0])
        raise EmbeddingModeError(
            f"{who}.embedding_metadata: id {bad} has char {int(char[bad])}, outside the character table of {num_chars} rows"
        )
    out = {k: v for k, v in meta.items() if k not in ("parent", "char")}
    out.update(
        parent=parent.astype(np.int64, copy=True),
        char=char.astype(np.int64, copy=True),
        num_chars=num_chars,
        num_parents=num_parents,
        mode=mode,
    )
    return out


def duplicate_pairs(meta: dict) -> int:
    """How many ids share their (parent, char) pair with an earlier id.

    Such ids get identical vectors from the additive and tuple modes; a sound
    decomposition has none (reported, not refused).
    """
    import numpy as np  # imported when first needed: `import tokenforge` does not load numpy

    parent, char = np.asarray(meta["parent"], np.int64), np.asarray(meta["char"], np.int64)
    key = parent * int(meta["num_chars"]) + char
    return int(len(key) - len(np.unique(key)))
