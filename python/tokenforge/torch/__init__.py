"""PyTorch helpers (the ``torch`` extra). Importing this package does not import
torch; each helper imports it when first used.

Vocabulary growth (:mod:`tokenforge.torch.growth`): :func:`expand_vocabulary`,
:func:`vocab_capacity`, :func:`mask_logits`, :func:`sample_next_token`.

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
    "expand_vocabulary": "growth",
    "vocab_capacity": "growth",
    "mask_logits": "growth",
    "sample_next_token": "growth",
    "DEFAULT_CHUNK": "growth",
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


def __getattr__(name: str) -> object:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tokenforge.torch' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
