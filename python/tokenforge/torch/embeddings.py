"""Input embeddings for language models, in the four modes of the LZ78 study.

Every module maps a LongTensor of ids of any shape ``(...)`` to a float tensor
``(..., dim)`` and works on any device (the index tables are buffers, so
``module.to("cuda")`` moves them with the weights).

``FlatEmbedding``          one learned row per id: ``E[id]``
``StructuredEmbedding``    ``P[parent[id]] + C[char[id]]``, with the family's own
                           decomposition (LZ78: the LZ78 parent; BPE: the left
                           part of the merge as parent, the right part as char)
``HierarchicalEmbedding``  the same sum with the trie parent (the longest proper
                           prefix that is itself an output entry)
``TupleEmbedding``         ``W [P[parent[id]] ; C[char[id]]]``: the two rows
                           concatenated, then a linear projection to ``dim``

Shapes: ``P`` is ``(num_parents, dim)`` (row 0 = no parent), ``C`` is
``(num_chars, dim)``; in the tuple mode ``P`` is ``(num_parents, parent_dim)``,
``C`` is ``(num_chars, char_dim)`` and ``W`` is ``(dim, parent_dim + char_dim)``.
``parent`` and ``char`` are int64 buffers of one entry per id.

Build them from a tokenizer with :func:`build_embedding` (which reads
``embedding_metadata`` through :func:`tokenforge.embedding_meta.get_embedding_metadata`
and refuses flat dictionaries for the tree modes), or from a metadata dict with
``from_metadata``. Not provided: weight tying with the output layer (a composed
embedding has no single row per id to tie).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from ..embedding_meta import EmbeddingModeError, get_embedding_metadata, model_vocab_size, validate_metadata

__all__ = [
    "FlatEmbedding",
    "StructuredEmbedding",
    "HierarchicalEmbedding",
    "TupleEmbedding",
    "build_embedding",
    "EMBEDDINGS",
]

DEFAULT_STD = 0.02


class FlatEmbedding(nn.Module):
    """One learned vector per id: ``(...) -> (..., dim)``; weight ``(vocab_size, dim)``."""

    mode = "flat"

    def __init__(self, vocab_size: int, dim: int, *, init_std: float = DEFAULT_STD) -> None:
        super().__init__()
        self.vocab_size, self.dim = int(vocab_size), int(dim)
        self.weight = nn.Parameter(torch.empty(self.vocab_size, self.dim))
        nn.init.normal_(self.weight, std=init_std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, dim={self.dim}"


class _Tree(nn.Module):
    """Shared part of the tree modes: the per-id parent and character index buffers."""

    mode = "tree"
    # buffers (register_buffer) and the subclasses' tables, for the type checker
    parent: torch.Tensor
    char: torch.Tensor
    parent_embed: nn.Embedding
    char_embed: nn.Embedding

    def __init__(self, parent: ArrayLike, char: ArrayLike, num_parents: int | None, num_chars: int) -> None:
        super().__init__()
        meta = validate_metadata(
            {
                "parent": np.asarray(parent),
                "char": np.asarray(char),
                "num_chars": num_chars,
                **({} if num_parents is None else {"num_parents": num_parents}),
            },
            mode=self.mode,
            who=type(self).__name__,
        )
        self.vocab_size = len(meta["parent"])
        self.num_parents, self.num_chars = meta["num_parents"], meta["num_chars"]
        self.register_buffer("parent", torch.from_numpy(meta["parent"]))
        self.register_buffer("char", torch.from_numpy(meta["char"]))

    @classmethod
    def from_metadata(cls, meta: dict, dim: int, **kwargs: Any) -> nn.Module:
        """Build from an ``embedding_metadata`` dict (see :mod:`tokenforge.embedding_meta`)."""
        meta = validate_metadata(meta, mode=cls.mode, who="metadata")
        build: Callable[..., _Tree] = cls  # one of the modes' classes, whose constructors all take dim
        return build(
            meta["parent"],
            meta["char"],
            num_parents=meta["num_parents"],
            num_chars=meta["num_chars"],
            dim=dim,
            **kwargs,
        )

    def _rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.parent[ids], self.char[ids]


class StructuredEmbedding(_Tree):
    """``P[parent[id]] + C[char[id]]``: ``(...) -> (..., dim)``.

    ``parent_embed.weight`` is ``(num_parents, dim)``, ``char_embed.weight``
    ``(num_chars, dim)``. Each table starts at ``init_std / sqrt(2)`` so the sum
    has the spread of a flat embedding.
    """

    mode = "structured"

    def __init__(
        self,
        parent: ArrayLike,
        char: ArrayLike,
        *,
        num_chars: int,
        dim: int,
        num_parents: int | None = None,
        init_std: float = DEFAULT_STD,
    ) -> None:
        super().__init__(parent, char, num_parents, num_chars)
        self.dim = int(dim)
        self.parent_embed = nn.Embedding(self.num_parents, self.dim)
        self.char_embed = nn.Embedding(self.num_chars, self.dim)
        for t in (self.parent_embed, self.char_embed):
            nn.init.normal_(t.weight, std=init_std / 2**0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        p, c = self._rows(ids)
        return self.parent_embed(p) + self.char_embed(c)

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, num_parents={self.num_parents}, num_chars={self.num_chars}, dim={self.dim}"
        )


class HierarchicalEmbedding(StructuredEmbedding):
    """The structured sum over the *trie* parent (``embedding_metadata("hierarchical")``)."""

    mode = "hierarchical"


class TupleEmbedding(_Tree):
    """``W [P[parent[id]] ; C[char[id]]]``: ``(...) -> (..., dim)``.

    ``parent_embed.weight`` is ``(num_parents, parent_dim)``, ``char_embed.weight``
    ``(num_chars, char_dim)``, ``proj.weight`` ``(dim, parent_dim + char_dim)``
    (no bias). ``parent_dim`` and ``char_dim`` default to ``dim``.
    """

    mode = "tuple"

    def __init__(
        self,
        parent: ArrayLike,
        char: ArrayLike,
        *,
        num_chars: int,
        dim: int,
        num_parents: int | None = None,
        parent_dim: int | None = None,
        char_dim: int | None = None,
        init_std: float = DEFAULT_STD,
    ) -> None:
        super().__init__(parent, char, num_parents, num_chars)
        self.dim = int(dim)
        self.parent_dim = int(parent_dim or dim)
        self.char_dim = int(char_dim or dim)
        self.parent_embed = nn.Embedding(self.num_parents, self.parent_dim)
        self.char_embed = nn.Embedding(self.num_chars, self.char_dim)
        self.proj = nn.Linear(self.parent_dim + self.char_dim, self.dim, bias=False)
        nn.init.normal_(self.parent_embed.weight, std=1.0)
        nn.init.normal_(self.char_embed.weight, std=1.0)
        # unit-variance inputs, so the projection sets the output spread to init_std
        nn.init.normal_(self.proj.weight, std=init_std / (self.parent_dim + self.char_dim) ** 0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        p, c = self._rows(ids)
        return self.proj(torch.cat([self.parent_embed(p), self.char_embed(c)], dim=-1))

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, num_parents={self.num_parents}, num_chars={self.num_chars}, "
            f"parent_dim={self.parent_dim}, char_dim={self.char_dim}, dim={self.dim}"
        )


#: mode name -> class
EMBEDDINGS: dict[str, type[Any]] = {
    "flat": FlatEmbedding,
    "structured": StructuredEmbedding,
    "hierarchical": HierarchicalEmbedding,
    "tuple": TupleEmbedding,
}


def build_embedding(source: object, mode: str, dim: int, *, vocab_size: int | None = None, **kwargs: Any) -> nn.Module:
    """An embedding module of ``mode`` for a tokenizer (or a metadata dict).

    ``source``: a tokenizer, a metadata dict (tree modes), or None (flat mode
    with ``vocab_size``). ``vocab_size`` defaults to the ids the tokenizer can
    produce. Raises :class:`~tokenforge.embedding_meta.EmbeddingModeError` for
    an unknown mode or a tokenizer without the needed structure.
    """
    if mode not in EMBEDDINGS:
        raise EmbeddingModeError(f"unknown embedding mode {mode!r}; expected one of {', '.join(EMBEDDINGS)}")
    if mode == "flat":
        if vocab_size is None:
            if source is None or isinstance(source, dict):
                raise EmbeddingModeError("the flat embedding needs vocab_size (or a tokenizer)")
            vocab_size = model_vocab_size(source)
        return FlatEmbedding(vocab_size, dim, **kwargs)
    if isinstance(source, dict):
        meta = validate_metadata(source, vocab_size, mode=mode, who="metadata")
    elif source is None:
        raise EmbeddingModeError(f"the {mode!r} embedding needs a tokenizer or its embedding metadata")
    else:
        got = get_embedding_metadata(source, mode)
        if got is None:  # (only flat, handled above, has none)
            raise EmbeddingModeError(f"{type(source).__name__} has no {mode!r} embedding metadata")
        meta = got
        if vocab_size is not None:
            meta = validate_metadata(meta, vocab_size, mode=mode, who=type(source).__name__)
    return EMBEDDINGS[mode].from_metadata(meta, dim, **kwargs)
