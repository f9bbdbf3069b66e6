"""A small GPT for measuring tokenizers (the bits-per-byte harness's model).

Decoder-only transformer, pre-norm: input embedding (any mode of
:mod:`tokenforge.torch.embeddings`) -> ``n_layer`` blocks of causal
self-attention with rotary position encoding and a GELU MLP -> LayerNorm ->
an untied output layer over the vocabulary. No biases, no dropout by default.

Shapes: ``forward(ids)`` takes int64 ``(B, T)`` with ``T <= seq_len`` and gives
logits ``(B, T, vocab_size)``; ``token_nll(ids, targets)`` gives float32
``(B, T)`` natural-log losses (0 where the target is ``-1``).

The default (4 layers, width 128, 4 heads, MLP ×4) has 0.79M parameters in the
blocks; the input embedding and the output layer add ``vocab × 128`` each for
a flat embedding (1.05M each at 8,192 ids).

Not handled: KV caching and generation (a measuring model only scores text),
weight tying (composed embeddings have no row per id to tie).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F

from .embeddings import build_embedding

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["GPT", "GPTConfig"]


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    seq_len: int = 256
    mlp_ratio: int = 4
    dropout: float = 0.0
    embedding: str = "flat"

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise ValueError(f"n_embd ({self.n_embd}) must split into {self.n_head} heads of even width")
        for name in ("vocab_size", "n_layer", "n_head", "n_embd", "seq_len", "mlp_ratio"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)!r}")


def _rotary(seq_len: int, head_dim: int, device: torch.device | str | None) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    t = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv)  # (T, head_dim / 2)
    return freqs.cos()[None, None], freqs.sin()[None, None]  # (1, 1, T, head_dim / 2)


def _apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class _Attention(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd, bias=False)
        self.out = nn.Linear(c.n_embd, c.n_embd, bias=False)
        self.dropout = c.dropout

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        q, k = _apply_rotary(q, cos, sin), _apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class _Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c.n_embd, bias=False)
        self.attn = _Attention(c)
        self.ln2 = nn.LayerNorm(c.n_embd, bias=False)
        self.fc = nn.Linear(c.n_embd, c.mlp_ratio * c.n_embd, bias=False)
        self.proj = nn.Linear(c.mlp_ratio * c.n_embd, c.n_embd, bias=False)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), cos, sin))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    """The measuring GPT. ``embedding`` overrides the module built from
    ``config.embedding`` (which, for tree modes, needs ``tokenizer``)."""

    rope_cos: torch.Tensor  # buffers (register_buffer), for the type checker
    rope_sin: torch.Tensor

    def __init__(
        self, config: GPTConfig, *, tokenizer: Tokenizer | None = None, embedding: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.config = config
        if embedding is None:
            embedding = build_embedding(tokenizer, config.embedding, config.n_embd, vocab_size=config.vocab_size)
        self.embed = embedding
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=False)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self._init_weights()
        cos, sin = _rotary(config.seq_len, config.n_embd // config.n_head, None)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if name.startswith("embed."):
                continue  # the embedding module initialised itself
            if p.dim() == 2:
                std = 0.02
                if name.endswith(("attn.out.weight", ".proj.weight")):
                    std = 0.02 / math.sqrt(2 * self.config.n_layer)  # residual branches (GPT-2)
                nn.init.normal_(p, std=std)

    def num_parameters(self, part: str = "all") -> int:
        """Parameters of ``"all"``, ``"blocks"`` (outside the embedding and the output layer),
        ``"embedding"`` or ``"head"``."""
        groups = {
            "embedding": list(self.embed.parameters()),
            "head": list(self.head.parameters()),
            "blocks": [p for n, p in self.named_parameters() if not n.startswith(("embed.", "head."))],
            "all": list(self.parameters()),
        }
        return sum(p.numel() for p in groups[part])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, vocab_size)`` for ids ``(B, T)``."""
        T = ids.shape[1]
        if T > self.config.seq_len:
            raise ValueError(f"sequence of {T} tokens is longer than the model's seq_len {self.config.seq_len}")
        x = self.drop(self.embed(ids))
        cos, sin = self.rope_cos[:, :, :T], self.rope_sin[:, :, :T]
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.ln_f(x))

    def token_nll(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-position negative log-likelihood in nats, float32 ``(B, T)``; 0 where ``targets == -1``."""
        logits = self.forward(ids).float()
        nll = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1, reduction="none")
        return nll.view(targets.shape)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean NLL over the scored positions (``targets != -1``)."""
        logits = self.forward(ids)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=-1)
