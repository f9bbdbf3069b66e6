"""Growing a model with its vocabulary: embedding and output head in chunks, masked sampling.

A model trained with :class:`tokenforge.GrowingBPETokenizer` has room for
``capacity`` ids (a multiple of 32,000) while only ``current_vocab_size`` of
them are in use. When the tokenizer grows, :func:`expand_vocabulary` adds rows
to the input embedding and the output head (tied or not) in place: every old
row is copied bit for bit, so the outputs for old ids do not change. A new
token's row starts from what the model knows (``init="parts"``, the default):
the mean of the rows of the old tokens it is made of (its merge's two parts,
recursively), rescaled to the median norm of the old rows; ``init="normal"``
draws N(0, init_std) rows instead. Before sampling, :func:`mask_logits` sets
the logits of ids not in use to -inf, and :func:`sample_next_token` samples
with that mask applied.

tokenforge's own :class:`~tokenforge.torch.GPT` grows too, in every embedding
mode (the tree modes with the grown tokenizer's parents and characters).

Not handled: sharded/distributed parameters (expand each shard yourself),
models whose head is not an ``nn.Linear``, and tokenizers that renumber old
ids (an LZ78 dictionary of another size): those need a new model. LZ78
entries have no parts (a parent may be a prefix with no id, and the extending
character is not an id), so their new rows fall back to the mean row. The tree
embedding modes keep their own initialisation of new parent/character rows
(only their untied output head takes the parts rule), and they do not refresh
the parents of ids that were capacity (not tokens) before the call.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("tokenforge.torch needs PyTorch: pip install 'tokenforge[torch]'") from e

from ..errors import TokenforgeError, VocabSizeError

if TYPE_CHECKING:
    from ..base import Tokenizer

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


def _find_modules(obj: object) -> tuple[nn.Embedding, nn.Linear | None]:
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


def _check_pair(emb: object, head: object) -> tuple[nn.Embedding, nn.Linear | None]:
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


def vocab_capacity(model_or_modules: object) -> int:
    """How many ids the model has rows for (the embedding's ``num_embeddings``)."""
    ours = _tokenforge_embedding(model_or_modules)
    if ours is not None:
        return ours[0].vocab_size
    return _find_modules(model_or_modules)[0].num_embeddings


def _grow_rows(old: torch.Tensor, rows: int, init_std: float, generator: torch.Generator | None) -> torch.Tensor:
    """``old`` with ``rows`` rows: the old ones copied exactly, the new ones N(0, init_std)."""
    n = old.shape[0]
    new = torch.empty((rows, *old.shape[1:]), dtype=old.dtype, device=old.device)
    new[:n].copy_(old)
    if rows > n:
        dev = generator.device if generator is not None else old.device
        fresh = torch.randn((rows - n, *old.shape[1:]), generator=generator, device=dev, dtype=torch.float32)
        new[n:].copy_(fresh.mul_(init_std).to(device=old.device, dtype=old.dtype))
    return new


def _swap_in_optimizer(optimizer: torch.optim.Optimizer, old: torch.Tensor, new: nn.Parameter) -> None:
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


def _grow_param(
    module: nn.Module,
    name: str,
    rows: int,
    std: float,
    generator: torch.Generator | None,
    optimizer: torch.optim.Optimizer | None,
) -> nn.Parameter:
    """Replace ``module.<name>`` by a parameter of ``rows`` rows (old rows exact, new N(0, std))."""
    old = getattr(module, name)
    new = nn.Parameter(_grow_rows(old.data, rows, std, generator), requires_grad=old.requires_grad)
    setattr(module, name, new)
    if optimizer is not None:
        _swap_in_optimizer(optimizer, old, new)
    return new


def _grow_head(
    head: nn.Linear,
    old: int,
    cap: int,
    init_std: float,
    generator: torch.Generator | None,
    optimizer: torch.optim.Optimizer | None,
    tied_to: nn.Parameter | None = None,
) -> None:
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


#: rows per block when reading the old rows' mean and norms (bounds the float64 copy)
_STAT_BLOCK = 65_536


class _PartsInit:
    """``init="parts"`` for the new ids ``old .. hi - 1``: each id's row is the mean
    of the old rows it decomposes into, rescaled to the old rows' median norm.

    A merged id's parts are followed recursively down to ids below ``old`` (rows
    that were trained), so a new token built from new tokens still ends at old
    rows: its row is the plain mean over that multiset (e.g. ``c = (b, 7)`` with
    ``b = (3, 4)`` new: the mean of rows 3, 4 and 7). Ids with no parts (and
    parts that are such ids) take the mean of all old rows. Work is one pass per
    merge depth over the new ids, never per byte of a token; the old rows are
    read in blocks for their mean and norms, never copied whole.
    """

    def __init__(self, parts: Mapping, old: int, hi: int) -> None:
        import numpy as np

        self.old, self.hi = old, hi
        n = hi - old
        left = np.full(n, -1, np.int64)
        right = np.full(n, -1, np.int64)
        level = np.zeros(n, np.int64)
        for k in range(n):
            i = old + k
            p = parts.get(i)
            if p is None:
                continue
            try:
                a, b = (int(x) for x in p)
            except (TypeError, ValueError):
                raise TokenforgeError(f"the parts of id {i} must be two ids (left, right), not {p!r}") from None
            if not (0 <= a < i and 0 <= b < i):
                raise TokenforgeError(
                    f"the parts of id {i} are ({a}, {b}); parts must be smaller ids (a merge builds a token from "
                    "tokens that exist before it)"
                )
            left[k], right[k] = a, b
            level[k] = 1 + max(level[a - old] if a >= old else 0, level[b - old] if b >= old else 0)
        self.left, self.right, self.level = left, right, level

    def rows(self, weight: torch.Tensor, rescale: bool) -> torch.Tensor:
        """The new rows (``hi - old`` of them, ``weight``'s dtype) from ``weight[:old]``."""
        import numpy as np

        old, n, dev = self.old, self.hi - self.old, weight.device
        total = torch.zeros(weight.shape[1:], dtype=torch.float64, device=dev)
        norms = []
        for start in range(0, old, _STAT_BLOCK):
            blk = weight[start : min(old, start + _STAT_BLOCK)].double()
            total += blk.sum(0)
            if rescale:
                norms.append(blk.norm(dim=1).cpu().numpy())
        mean = total / old
        sums = torch.empty((n, *weight.shape[1:]), dtype=torch.float64, device=dev)
        counts = torch.ones(n, dtype=torch.float64, device=dev)
        sums[torch.from_numpy(self.left < 0).to(dev)] = mean

        def gather(ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
            t = torch.from_numpy(ids).to(dev)
            is_old = t < old
            out = torch.empty((len(ids), *weight.shape[1:]), dtype=torch.float64, device=dev)
            cnt = torch.ones(len(ids), dtype=torch.float64, device=dev)
            out[is_old] = weight[t[is_old]].double()
            out[~is_old] = sums[t[~is_old] - old]
            cnt[~is_old] = counts[t[~is_old] - old]
            return out, cnt

        for d in range(1, int(self.level.max(initial=0)) + 1):
            ks = np.nonzero(self.level == d)[0]
            (ra, ca), (rb, cb) = gather(self.left[ks]), gather(self.right[ks])
            kt = torch.from_numpy(ks).to(dev)
            sums[kt] = ra + rb
            counts[kt] = ca + cb
        out = sums / counts.view(-1, *([1] * (sums.dim() - 1)))
        if rescale:
            target = float(np.median(np.concatenate(norms)))
            have = out.norm(dim=1, keepdim=True)
            out = torch.where(have > 0, out * (target / have.clamp_min(1e-300)), out)
        return out.to(weight.dtype)

    def apply(self, param: torch.Tensor, optimizer: torch.optim.Optimizer | None, rescale: bool = True) -> None:
        """Overwrite rows ``old .. hi - 1`` of ``param`` (in place) and zero their optimizer state."""
        param.data[self.old : self.hi] = self.rows(param.data, rescale)
        if optimizer is not None:
            for v in optimizer.state.get(param, {}).values():
                if torch.is_tensor(v) and v.shape == param.shape:
                    v[self.old : self.hi] = 0


def _parts_plan(
    init: str, tokenizer: Tokenizer | None, parts: Mapping | None, old_vocab: int, new_size: int
) -> _PartsInit | None:
    """The parts initialisation of ids ``old_vocab .. new_size - 1``, or None (``init="normal"`` or no new ids)."""
    if init == "normal" or old_vocab >= new_size:
        return None
    if parts is None:
        if tokenizer is None:
            raise TokenforgeError(
                'init="parts" (the default) builds each new row from the rows of the new token\'s parts, so it '
                'needs tokenizer= (the grown tokenizer) or parts= ({id: (left, right)}); pass init="normal" '
                "for N(0, init_std) rows"
            )
        parts = tokenizer.merge_parts()
    if not isinstance(parts, Mapping):
        raise TypeError(f"parts must be a mapping {{id: (left, right)}}, not {type(parts).__name__}")
    return _PartsInit(parts, old_vocab, new_size)


def _resolve_old_vocab(model: object, old_vocab_size: object, capacity: int) -> int:
    """The ids whose rows were trained: ``old_vocab_size``, else the model's int
    attribute ``current_vocab_size``, else every row (the capacity)."""
    if old_vocab_size is None and isinstance(model, nn.Module):
        rec = getattr(model, "current_vocab_size", None)
        if isinstance(rec, int) and not isinstance(rec, bool):
            old_vocab_size = rec
    if old_vocab_size is None:
        return capacity
    if isinstance(old_vocab_size, bool) or not isinstance(old_vocab_size, int) or not 1 <= old_vocab_size <= capacity:
        raise TokenforgeError(
            f"old_vocab_size must be an int from 1 to the model's {capacity} rows (the ids it was trained on), "
            f"not {old_vocab_size!r}"
        )
    return old_vocab_size


def _tokenforge_embedding(obj: object) -> tuple[Any, Any, Any] | None:
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


def _tree_metadata(
    emb: Any, cap: int, new_size: int, tokenizer: Tokenizer | None, metadata: dict | None
) -> tuple[Any, Any, int, int]:
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
        got = get_embedding_metadata(tokenizer, mode)
        if got is None:  # (a tree mode always has metadata)
            raise EmbeddingModeError(f"{type(tokenizer).__name__} has no {mode!r} embedding metadata")
        meta = got
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


def _expand_tokenforge(
    found: tuple[Any, Any, Any],
    new_size: int,
    cap: int,
    init_std: float,
    generator: torch.Generator | None,
    optimizer: torch.optim.Optimizer | None,
    tokenizer: Tokenizer | None,
    metadata: dict | None,
    plans: tuple[_PartsInit | None, _PartsInit | None],
) -> int:
    """expand_vocabulary for tokenforge's own embedding modules and GPT."""
    from .embeddings import FlatEmbedding, TupleEmbedding, _Tree

    emb, head, gpt = found
    old = emb.vocab_size
    with torch.no_grad():
        if isinstance(emb, FlatEmbedding):
            tied = head is not None and head.weight is emb.weight
            new_w = _grow_param(emb, "weight", cap, init_std, generator, optimizer) if cap > old else emb.weight
        elif isinstance(emb, _Tree):
            tied, new_w = False, None
            if cap > old:
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
        if head is not None and cap > old:
            _grow_head(head, old, cap, init_std, generator, optimizer, tied_to=new_w if tied else None)
        emb_plan, head_plan = plans
        if emb_plan is not None and new_w is not None:
            emb_plan.apply(new_w, optimizer)
        if head_plan is not None and head is not None and not tied:
            _parts_head(head, head_plan, optimizer)
    if gpt is not None:
        gpt.config.vocab_size = cap
    return cap


def _parts_head(head: nn.Linear, plan: _PartsInit, optimizer: torch.optim.Optimizer | None) -> None:
    """The parts rule on an untied head: rows rescaled to the median norm, bias entries the plain mean."""
    plan.apply(head.weight, optimizer)
    if head.bias is not None:
        plan.apply(head.bias, optimizer, rescale=False)


def expand_vocabulary(
    model_or_modules: object,
    new_size: int,
    chunk: int = DEFAULT_CHUNK,
    max_size: int = DEFAULT_MAX_SIZE,
    *,
    init: str = "parts",
    head_init: str | None = None,
    init_std: float = 0.02,
    generator: torch.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Tokenizer | None = None,
    parts: Mapping | None = None,
    old_vocab_size: int | None = None,
    metadata: dict | None = None,
) -> int:
    """Make room for ``new_size`` ids and initialise the new ones; returns the capacity (rows) afterwards.

    ``model_or_modules``: a model (its token embedding and, if any, its output
    head -- an ``nn.Linear`` of the same size -- are found by name or shape), an
    ``nn.Embedding``, ``(embedding, head)`` or ``{"embedding": ..., "head": ...}``.
    The capacity becomes the smallest multiple of ``chunk`` that holds
    ``new_size``, capped at ``max_size``; it never shrinks. Rows of the ids the
    model was trained on (below ``old_vocab_size``) and their bias entries are
    kept exactly. A tied head keeps sharing the embedding's weight. Grown
    weights become new ``nn.Parameter`` objects: pass ``optimizer`` to have it
    updated (its state grows with zeros, and re-initialised rows get zero
    state), or build a new optimizer. Model attributes ``vocab_capacity`` and
    ``current_vocab_size`` (ints), if the model has them, are updated.

    ``init="parts"`` (default): the new ids ``old_vocab_size .. new_size - 1``
    get, in the embedding and in an untied head, the mean of the rows of the
    old tokens they are made of -- the merge's two parts (``tokenizer``'s
    :meth:`~tokenforge.base.Tokenizer.merge_parts`, or ``parts={id: (left,
    right)}``), followed recursively down to ids below ``old_vocab_size`` --
    rescaled to the median row norm of the old rows; ids without parts get the
    mean of all old rows, rescaled the same way; head bias entries the plain
    mean of their parts' biases. Rows of capacity beyond ``new_size`` are drawn
    as with ``"normal"``. Without ``tokenizer`` or ``parts`` (and with new ids to
    initialise) it raises :class:`~tokenforge.errors.TokenforgeError`.

    ``old_vocab_size``: the ids the model was trained on. Default: the model's
    int attribute ``current_vocab_size`` if it has one, else every existing row.
    Capacity grows in chunks, so after ``tokenforge grow learn`` a model usually
    has rows for ids it never saw: pass the vocabulary size it was trained with,
    and those rows (between it and the old capacity) are re-initialised by the
    parts rule too, even when no row has to be added.

    ``init="normal"``: today's rule, unchanged -- rows added are N(0,
    ``init_std``) drawn from ``generator`` (embedding first, then an untied
    head), new bias entries 0, existing rows never touched.

    ``head_init``: the rule for an untied head's new rows, when it should
    differ from ``init`` (default: ``init``; a tied head is the embedding).
    ``bench/growth.py`` measured ``init="parts", head_init="normal"`` best
    right after growth: the head's parts rows at the median norm give the new
    tokens high logits everywhere.

    tokenforge's own :class:`~tokenforge.torch.GPT` (and any model holding
    one module of :mod:`tokenforge.torch.embeddings`) grows in every mode:
    ``flat`` as above; the tree modes (``structured``, ``hierarchical``,
    ``tuple``) take the new ids' parents and characters from ``tokenizer``
    (the grown tokenizer) or ``metadata`` (its ``embedding_metadata``), grow
    the parent and character tables to the new table sizes (old rows exact;
    new rows as the module initialises its own, whatever ``init``) and refuse,
    with :class:`~tokenforge.embedding_meta.EmbeddingModeError` saying why, a
    tokenizer that gives an old id another parent or character, or no
    metadata at all. Capacity beyond the tokenizer's ids gets parent 0 and
    one new character row. The GPT's output head (untied: ``init`` applies)
    and ``config.vocab_size`` follow.
    """
    for name, v in (("new_size", new_size), ("chunk", chunk), ("max_size", max_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TokenforgeError(f"{name} must be a positive int, not {v!r}")
    if new_size > max_size:
        raise VocabSizeError(f"cannot grow to {new_size} ids: the maximum is {max_size}")
    if not (isinstance(init_std, (int, float)) and math.isfinite(init_std) and init_std >= 0):
        raise TokenforgeError(f"init_std must be a finite number >= 0, not {init_std!r}")
    if head_init is None:
        head_init = init
    for what, rule in (("init", init), ("head_init", head_init)):
        if rule not in ("parts", "normal"):
            raise TokenforgeError(f"{what} must be 'parts' or 'normal', not {rule!r}")
    ours = _tokenforge_embedding(model_or_modules)
    if ours is not None:
        emb, head = ours[0], ours[1]
        old = emb.vocab_size
        if head is not None and head.out_features != old:
            raise TokenforgeError(
                f"the output head has {head.out_features} outputs but the embedding {old} ids; "
                "they must cover the same ids"
            )
    else:
        if metadata is not None:
            raise TokenforgeError("metadata= is for tokenforge's tree-mode embeddings; this model has none")
        emb, head = _find_modules(model_or_modules)
        old = emb.num_embeddings
    old_vocab = _resolve_old_vocab(model_or_modules, old_vocab_size, old)
    cap = old if new_size <= old else min(-(-new_size // chunk) * chunk, max_size)
    plan = _parts_plan("parts" if "parts" in (init, head_init) else "normal", tokenizer, parts, old_vocab, new_size)
    plans = (plan if init == "parts" else None, plan if head_init == "parts" else None)
    if cap == old and plan is None:
        return old
    if ours is not None:
        _expand_tokenforge(ours, new_size, cap, float(init_std), generator, optimizer, tokenizer, metadata, plans)
    else:
        tied = head is not None and head.weight is emb.weight
        with torch.no_grad():
            new_w = emb.weight
            if cap > old:
                new_w = nn.Parameter(
                    _grow_rows(emb.weight.data, cap, init_std, generator), requires_grad=new_w.requires_grad
                )
                if optimizer is not None:
                    _swap_in_optimizer(optimizer, emb.weight, new_w)
                emb.weight = new_w
                emb.num_embeddings = cap
                if head is not None:
                    _grow_head(head, old, cap, init_std, generator, optimizer, tied_to=new_w if tied else None)
            if plans[0] is not None:
                plans[0].apply(new_w, optimizer)
            if plans[1] is not None and head is not None and not tied:
                _parts_head(head, plans[1], optimizer)
    if isinstance(model_or_modules, nn.Module):
        for attr, value in (("vocab_capacity", cap), ("current_vocab_size", max(new_size, old_vocab))):
            if isinstance(getattr(model_or_modules, attr, None), int):
                setattr(model_or_modules, attr, value)
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
