"""PyTorch helpers (the ``torch`` extra). Importing this package does not import
torch; each helper imports it when first used.

Embedding modes (:mod:`tokenforge.torch.embeddings`): :class:`FlatEmbedding`,
:class:`StructuredEmbedding`, :class:`HierarchicalEmbedding`,
:class:`TupleEmbedding`, :func:`build_embedding`. The small GPT of the
bits-per-byte harness (:mod:`tokenforge.torch.gpt`): :class:`GPT`,
:class:`GPTConfig`. Training windows over pretokenized shards
(:mod:`tokenforge.torch.dataset`): :class:`ShardDataset`.
"""

from __future__ import annotations

import importlib

# public name -> submodule that defines it (loaded on first access)
_LAZY = {
    "FlatEmbedding": "embeddings",
    "StructuredEmbedding": "embeddings",
    "HierarchicalEmbedding": "embeddings",
    "TupleEmbedding": "embeddings",
    "build_embedding": "embeddings",
    "GPT": "gpt",
    "GPTConfig": "gpt",
    "ShardDataset": "dataset",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tokenforge.torch' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
