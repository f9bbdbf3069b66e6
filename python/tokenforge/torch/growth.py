"""Growing a model with its vocabulary: embedding and output head in chunks, masked sampling.

A model trained with :class:`tokenforge.GrowingBPETokenizer` has room for
``capacity`` ids (a multiple of 32,000) while only ``current_vocab_size`` of
them are in use. When the tokenizer grows past the capacity,
:func:`expand_vocabulary` adds rows to the input embedding and the output head
(tied or not) in place: every old row is copied bit for bit, so the outputs for
old ids do not change; new rows are drawn from N(0, init_std). Before
sampling, :func:`mask_logits` sets the logits of ids not in use to -inf, and
:func:`sample_next_token` samples with that mask applied.

tokenforge's own :class:`~tokenforge.torch.GPT` grows too, in every embedding
mode (the tree modes with the grown tokenizer's parents and characters).

Not handled: sharded/distributed parameters (expand each shard yourself),
models whose head is not an ``nn.Linear``, and tokenizers that renumber old
ids (an LZ78 dictionary of another size): those need a new model.
"""

from __future__ import annotations

import math

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("tokenforge.torch needs PyTorch: pip install 'tokenforge[torch]'") from e

from ..errors import TokenforgeError, VocabSizeError

__all__ = [
    "DEFAULT_CHUNK",
    "DEFAULT_MAX_SIZE",
    "expand_vocabulary",
    "vocab_capacity",
    "mask_logits",
    "sample_next_token",
]

#: rows are added in chunks of this many ids (the seed's "32K")
DEFAULT_CHUNK = 32_000
#: the seed's declared maximum vocabulary
DEFAULT_MAX_SIZE = 10_000_000

_EMBED_NAMES = ("embedding", "embed_tokens", "tok_embeddings", "token_embedding", "wte", "embed")
_HEAD_NAMES = ("lm_head", "head", "output", "unembedding")


def _find_modules(obj) -> tuple[nn.Embedding, nn.Linear | None]:
    """(embedding, head or None) from a module, an nn.Embedding, a pair or a dict."""
    if isinstance(obj, nn.Embedding):
        return obj, None
    if isinstance(obj, dict):
        emb = next((obj[k] for k in _EMBED_NAMES if k in obj), None)
        head = next((obj[k] for k in _HEAD_NAMES if k in obj), None)
        return _check_pair(emb, head)
    if isinstance(obj, (tuple, list)):
        if len(obj) not in (1, 2):
            raise TokenforgeError("pass (embedding,) or (embedding, head)")
        return _check_pair(obj[0], obj[1] if len(obj) == 2 else None)
    if not isinstance(obj, nn.Module):
        raise TypeError(
            f"expected an nn.Module, an nn.Embedding, (embedding, head) or a dict, not {type(obj).__name__}"
        )
    emb = next((getattr(obj, k) for k in _EMBED_NAMES if isinstance(getattr(obj, k, None), nn.Embedding)), None)
    if emb is None:
        embs = [m for m in obj.modules() if isinstance(m, nn.Embedding)]
        if not embs:
            raise TokenforgeError("the model has no nn.Embedding; pass (embedding, head) explicitly")
        biggest = max(m.num_embeddings for m in embs)
        embs = [m for m in embs if m.num_embeddings == biggest]
        if len(embs) > 1:
            raise TokenforgeError(
                "the model has several token embeddings of the same size; pass (embedding, head) explicitly"
            )
        emb = embs[0]
    head = next((getattr(obj, k) for k in _HEAD_NAMES if isinstance(getattr(obj, k, None), nn.Linear)), None)
    if head is None:
        heads = [
            m
            for m in obj.modules()
            if isinstance(m, nn.Linear) and m.out_features == emb.num_embeddings and m.in_features == emb.embedding_dim
        ]
        if len(heads) > 1:
            raise TokenforgeError(
                "the model has several linear layers the size of the vocabulary; pass (embedding, head) explicitly"
            )
        head = heads[0] if heads else None
    return _check_pair(emb, head)


def _check_pair(emb, head):
    if not isinstance(emb, nn.Embedding):
        raise TypeError(f"the embedding must be an nn.Embedding, not {type(emb).__name__}")
    if head is not None:
        if not isinstance(head, nn.Linear):
            raise TypeError(f"the output head must be an nn.Linear, not {type(head).__name__}")
        if head.out_features != emb.num_embeddings:
            raise TokenforgeError(
                f"the output head has {head.out_features} outputs but the embedding {emb.num_embeddings} rows; "
                "they must cover the same ids"
            )
    return emb, head


def vocab_capacity(model_or_modules) -> int:
    """How many ids the model has rows for (the embedding's ``num_embeddings``)."""
    ours = _tokenforge_embedding(model_or_modules)
    if ours is not None:
        return ours[0].vocab_size
    return _find_modules(model_or_modules)[0].num_embeddings


def _grow_rows(old: torch.Tensor, rows: int, init_std: float, generator) -> torch.Tensor:
    """``old`` with ``rows`` rows: the old ones copied exactly, the new ones N(0, init_std)."""
    n = old.shape[0]
    new = torch.empty((rows, *old.shape[1:]), dtype=old.dtype, device=old.device)
    new[:n].copy_(old)
    if rows > n:
        dev = generator.device if generator is not None else old.device
        fresh = torch.randn((rows - n, *old.shape[1:]), generator=generator, device=dev, dtype=torch.float32)
        new[n:].copy_(fresh.mul_(init_std).to(device=old.device, dtype=old.dtype))
    return new


def _swap_in_optimizer(optimizer, old: torch.Tensor, new: nn.Parameter) -> None:
    """Point the optimizer at ``new`` and grow its per-parameter state with zeros."""
    for group in optimizer.param_groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    state = optimizer.state.pop(old, None)
    if state is None:
        return
    for k, v in list(state.items()):
        if torch.is_tensor(v) and v.shape == old.shape:
            grown = torch.zeros(new.shape, dtype=v.dtype, device=v.device)
            grown[: old.shape[0]].copy_(v)
            state[k] = grown
    optimizer.state[new] = state


def _grow_param(module: nn.Module, name: str, rows: int, std: float, generator, optimizer) -> nn.Parameter:
    """Replace ``module.<name>`` by a parameter of ``rows`` rows (old rows exact, new N(0, std))."""
    old = getattr(module, name)
    new = nn.Parameter(_grow_rows(old.data, rows, std, generator), requires_grad=old.requires_grad)
    setattr(module, name, new)
    if optimizer is not None:
        _swap_in_optimizer(optimizer, old, new)
    return new


def _grow_head(head: nn.Linear, old: int, cap: int, init_std: float, generator, optimizer, tied_to=None) -> None:
    if tied_to is not None:
        head.weight = tied_to
    else:
        _grow_param(head, "weight", cap, init_std, generator, optimizer)
    if head.bias is not None:
        old_b = head.bias
        grown = torch.zeros(cap, dtype=old_b.dtype, device=old_b.device)
        grown[:old].copy_(old_b.data)
        new_b = nn.Parameter(grown, requires_grad=old_b.requires_grad)
        head.bias = new_b
        if optimizer is not None:
            _swap_in_optimizer(optimizer, old_b, new_b)
    head.out_features = cap


def _tokenforge_embedding(obj):
    """(embedding, head or None, GPT or None) when ``obj`` is, or holds, one of
    :mod:`tokenforge.torch.embeddings`' modules; else None."""
    from .embeddings import FlatEmbedding, _Tree
    from .gpt import GPT

    ours = (FlatEmbedding, _Tree)
    if isinstance(obj, GPT):
        return obj.embed, obj.head, obj
    if isinstance(obj, ours):
        return obj, None, None
    if isinstance(obj, (tuple, list)) and obj and isinstance(obj[0], ours):
        if len(obj) > 2:
            raise TokenforgeError("pass (embedding,) or (embedding, head)")
        head = obj[1] if len(obj) == 2 else None
        if head is not None and not isinstance(head, nn.Linear):
            raise TypeError(f"the output head must be an nn.Linear, not {type(head).__name__}")
        return obj[0], head, None
    if isinstance(obj, dict):
        emb = next((obj[k] for k in _EMBED_NAMES if k in obj), None)
        if isinstance(emb, ours):
            return emb, next((obj[k] for k in _HEAD_NAMES if k in obj), None), None
        return None
    if not isinstance(obj, nn.Module):
        return None
    found = [m for m in obj.modules() if isinstance(m, ours)]
    if not found:
        return None
    if len(found) > 1:
        raise TokenforgeError("the model has several tokenforge embedding modules; pass (embedding, head) explicitly")
    emb = found[0]
    head = next((getattr(obj, k) for k in _HEAD_NAMES if isinstance(getattr(obj, k, None), nn.Linear)), None)
    if head is None:
        heads = [m for m in obj.modules() if isinstance(m, nn.Linear) and m.out_features == emb.vocab_size]
        if len(heads) > 1:
            raise TokenforgeError(
                "the model has several linear layers the size of the vocabulary; pass (embedding, head) explicitly"
            )
        head = heads[0] if heads else None
    return emb, head, None


def _tree_metadata(emb, cap: int, new_size: int, tokenizer, metadata):
    """The grown parent/char arrays (``cap`` entries) and table sizes for a tree-mode embedding."""
    import numpy as np

    from ..embedding_meta import EmbeddingModeError, get_embedding_metadata, validate_metadata

    mode = emb.mode
    if tokenizer is None and metadata is None:
        raise EmbeddingModeError(
            f"the {mode} embedding composes each id from its parent's row and its character's row, so new ids need "
            "their parents and characters: pass tokenizer= (the grown tokenizer) or metadata= (its "
            "embedding_metadata)"
        )
    if metadata is not None:
        meta = validate_metadata(metadata, mode=mode, who="metadata")
    else:
        meta = get_embedding_metadata(tokenizer, mode)
    parent, char = meta["parent"], meta["char"]
    if len(parent) < new_size:
        raise EmbeddingModeError(f"the metadata covers {len(parent)} ids, fewer than the {new_size} asked for")
    old = emb.vocab_size
    old_p, old_c = emb.parent.cpu().numpy(), emb.char.cpu().numpy()
    diff = np.nonzero((parent[:old] != old_p) | (char[:old] != old_c))[0]
    if len(diff):
        k = int(diff[0])
        raise EmbeddingModeError(
            f"the {mode} embedding cannot grow to this tokenizer: it gives old id {k} another parent/character "
            f"({int(old_p[k])}/{int(old_c[k])} before, {int(parent[k])}/{int(char[k])} now), so its old rows would "
            "no longer be its own. Only a tokenizer that appends ids (e.g. the growing BPE vocabulary) can grow a "
            "model; an LZ78 dictionary of another size moves its byte-fallback and special ids: train a new model"
        )
    num_parents = max(int(meta["num_parents"]), emb.num_parents)
    num_chars = max(int(meta["num_chars"]), emb.num_chars)
    parent, char = parent[:cap], char[:cap]
    if len(parent) < cap:
        # capacity beyond the tokenizer's ids: no parent, and one new character row of their own
        pad = cap - len(parent)
        parent = np.concatenate([parent, np.zeros(pad, np.int64)])
        char = np.concatenate([char, np.full(pad, num_chars, np.int64)])
        num_chars += 1
    return parent, char, num_parents, num_chars


def _expand_tokenforge(found, new_size, chunk, max_size, init_std, generator, optimizer, tokenizer, metadata) -> int:
    """expand_vocabulary for tokenforge's own embedding modules and GPT."""
    from .embeddings import FlatEmbedding, TupleEmbedding, _Tree

    emb, head, gpt = found
    old = emb.vocab_size
    if head is not None and head.out_features != old:
        raise TokenforgeError(
            f"the output head has {head.out_features} outputs but the embedding {old} ids; they must cover the same ids"
        )
    if new_size <= old:
        return old
    cap = min(-(-new_size // chunk) * chunk, max_size)
    with torch.no_grad():
        if isinstance(emb, FlatEmbedding):
            tied = head is not None and head.weight is emb.weight
            new_w = _grow_param(emb, "weight", cap, init_std, generator, optimizer)
        elif isinstance(emb, _Tree):
            tied, new_w = False, None
            parent, char, num_parents, num_chars = _tree_metadata(emb, cap, new_size, tokenizer, metadata)
            # new table rows as the module initialised its own (structured: init_std/sqrt(2); tuple: unit)
            std = 1.0 if isinstance(emb, TupleEmbedding) else init_std / 2**0.5
            for table, rows in ((emb.parent_embed, num_parents), (emb.char_embed, num_chars)):
                if rows > table.num_embeddings:
                    _grow_param(table, "weight", rows, std, generator, optimizer)
                    table.num_embeddings = rows
            dev = emb.parent.device
            emb.parent = torch.from_numpy(parent).to(dev)
            emb.char = torch.from_numpy(char).to(dev)
            emb.num_parents, emb.num_chars = num_parents, num_chars
        else:  # pragma: no cover - _tokenforge_embedding returns only these
            raise TokenforgeError(f"cannot grow a {type(emb).__name__}")
        emb.vocab_size = cap
        if head is not None:
            _grow_head(head, old, cap, init_std, generator, optimizer, tied_to=new_w if tied else None)
    if gpt is not None:
        gpt.config.vocab_size = cap
    return cap


def expand_vocabulary(
    model_or_modules,
    new_size: int,
    chunk: int = DEFAULT_CHUNK,
    max_size: int = DEFAULT_MAX_SIZE,
    *,
    init_std: float = 0.02,
    generator: torch.Generator | None = None,
    optimizer=None,
    tokenizer=None,
    metadata: dict | None = None,
) -> int:
    """Make room for ``new_size`` ids; returns the capacity (rows) afterwards.

    ``model_or_modules``: a model (its token embedding and, if any, its output
    head -- an ``nn.Linear`` of the same size -- are found by name or shape), an
    ``nn.Embedding``, ``(embedding, head)`` or ``{"embedding": ..., "head": ...}``.
    The capacity becomes the smallest multiple of ``chunk`` that holds
    ``new_size``, capped at ``max_size``; it never shrinks (a model already
    large enough is left alone). Old rows (and the head's bias) are copied
    exactly; new rows are N(0, ``init_std``) (seeded by ``generator``), new
    bias entries 0. A tied head keeps sharing the embedding's weight. The
    weights become new ``nn.Parameter`` objects: pass ``optimizer`` to have
    it updated (its state grows with zeros), or build a new optimizer. A model
    attribute ``vocab_capacity`` (int) is updated too.

    tokenforge's own :class:`~tokenforge.torch.GPT` (and any model holding
    one module of :mod:`tokenforge.torch.embeddings`) grows in every mode:
    ``flat`` as above; the tree modes (``structured``, ``hierarchical``,
    ``tuple``) take the new ids' parents and characters from ``tokenizer``
    (the grown tokenizer) or ``metadata`` (its ``embedding_metadata``), grow
    the parent and character tables to the new table sizes (old rows exact;
    new rows as the module initialises its own) and refuse, with
    :class:`~tokenforge.embedding_meta.EmbeddingModeError` saying why, a
    tokenizer that gives an old id another parent or character, or no
    metadata at all. Capacity beyond the tokenizer's ids gets parent 0 and
    one new character row. The GPT's output head and ``config.vocab_size``
    follow.
    """
    for name, v in (("new_size", new_size), ("chunk", chunk), ("max_size", max_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TokenforgeError(f"{name} must be a positive int, not {v!r}")
    if new_size > max_size:
        raise VocabSizeError(f"cannot grow to {new_size} ids: the maximum is {max_size}")
    if not (isinstance(init_std, (int, float)) and math.isfinite(init_std) and init_std >= 0):
        raise TokenforgeError(f"init_std must be a finite number >= 0, not {init_std!r}")
    ours = _tokenforge_embedding(model_or_modules)
    if ours is not None:
        return _expand_tokenforge(
            ours, new_size, chunk, max_size, float(init_std), generator, optimizer, tokenizer, metadata
        )
    if tokenizer is not None or metadata is not None:
        raise TokenforgeError("tokenizer= and metadata= are for tokenforge's tree-mode embeddings; this model has none")
    emb, head = _find_modules(model_or_modules)
    old = emb.num_embeddings
    if new_size <= old:
        return old
    cap = min(-(-new_size // chunk) * chunk, max_size)
    tied = head is not None and head.weight is emb.weight
    with torch.no_grad():
        old_w = emb.weight
        new_w = nn.Parameter(_grow_rows(old_w.data, cap, init_std, generator), requires_grad=old_w.requires_grad)
        emb.weight = new_w
        emb.num_embeddings = cap
        if optimizer is not None:
            _swap_in_optimizer(optimizer, old_w, new_w)
        if head is not None:
            _grow_head(head, old, cap, init_std, generator, optimizer, tied_to=new_w if tied else None)
    if isinstance(model_or_modules, nn.Module) and isinstance(getattr(model_or_modules, "vocab_capacity", None), int):
        model_or_modules.vocab_capacity = cap  # type: ignore[assignment]  # a plain int attribute, not a submodule
    return cap


def mask_logits(logits: torch.Tensor, current_vocab_size: int, inplace: bool = False) -> torch.Tensor:
    """``logits`` with every id >= ``current_vocab_size`` (last dimension) set to -inf."""
    if not torch.is_tensor(logits):
        raise TypeError(f"logits must be a torch.Tensor, not {type(logits).__name__}")
    if isinstance(current_vocab_size, bool) or not isinstance(current_vocab_size, int) or current_vocab_size < 1:
        raise TokenforgeError(f"current_vocab_size must be a positive int, not {current_vocab_size!r}")
    if current_vocab_size >= logits.shape[-1]:
        return logits
    out = logits if inplace else logits.clone()
    out[..., current_vocab_size:] = float("-inf")
    return out


def sample_next_token(
    logits: torch.Tensor,
    current_vocab_size: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sample one id per row of ``logits`` (shape ``(..., V)``) among ids < ``current_vocab_size``.

    Returns a long tensor of shape ``(..., 1)``. ``temperature`` 0 is argmax;
    ``top_k`` keeps the k most likely valid ids. Ids at or above
    ``current_vocab_size`` are never returned.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise TokenforgeError(f"temperature must be a number >= 0, not {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise TokenforgeError(f"top_k must be a positive int or None, not {top_k!r}")
    if not torch.is_tensor(logits):
        raise TypeError(f"logits must be a torch.Tensor, not {type(logits).__name__}")
    if isinstance(current_vocab_size, bool) or not isinstance(current_vocab_size, int) or current_vocab_size < 1:
        raise TokenforgeError(f"current_vocab_size must be a positive int, not {current_vocab_size!r}")
    n = min(current_vocab_size, logits.shape[-1])
    # Only ids < current_vocab_size take part: slicing them out is the mask
    # (the same distribution as -inf on the rest) without copying the unused tail.
    masked = logits[..., :n].float()
    flat = masked.reshape(-1, n)
    if temperature == 0:
        ids = flat.argmax(dim=-1, keepdim=True)
    else:
        if top_k is not None and top_k < n:
            vals, idx = torch.topk(flat, top_k, dim=-1)
            probs = torch.softmax(vals / temperature, dim=-1)
            choice = torch.multinomial(probs, 1, generator=generator)
            ids = idx.gather(-1, choice)
        else:
            probs = torch.softmax(flat / temperature, dim=-1)
            ids = torch.multinomial(probs, 1, generator=generator)
    return ids.reshape(*logits.shape[:-1], 1)
