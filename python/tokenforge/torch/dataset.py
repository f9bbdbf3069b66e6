"""A torch ``Dataset`` of training windows over pretokenized shards.

``ShardDataset(shards, seq_len)`` memory-maps the shards of a
:class:`~tokenforge.data.shards.ShardSet` (or a path to one) and yields
``(inputs, targets)``, each an int64 tensor ``(seq_len,)``, where ``targets`` is
``inputs`` shifted by one token. Window ``k`` of a shard starts at token
``k * stride`` (``stride`` defaults to ``seq_len``, so every token is a target
once); windows never cross a shard boundary, and the last
``(num_tokens - 1) % stride`` tokens of a shard that do not fill a window are
left out. Windows may span documents: every document starts with BOS, which
the model learns to read as a boundary.

``targets`` hold ``-1`` at positions whose target is a special token when
``mask_special`` is given (a set of ids): such targets carry no bytes and are
not scored by the bits-per-byte harness.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
from torch.utils.data import Dataset

from ..data.shards import ShardSet

__all__ = ["ShardDataset"]


class ShardDataset(Dataset):
    """``(inputs, targets)`` windows of ``seq_len`` tokens over memory-mapped shards."""

    def __init__(
        self,
        shards: ShardSet | str | os.PathLike[str],
        seq_len: int,
        *,
        stride: int | None = None,
        mask_special: Iterable[int] | None = None,
        allow_incomplete: bool = False,
    ) -> None:
        # an unfinished pretokenize run is refused unless allow_incomplete=True (then warned): see ShardSet
        self.shards = (
            shards if isinstance(shards, ShardSet) else ShardSet(Path(shards), allow_incomplete=allow_incomplete)
        )
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
            raise ValueError(f"seq_len must be a positive int, not {seq_len!r}")
        self.seq_len = seq_len
        self.stride = int(stride or seq_len)
        if self.stride < 1:
            raise ValueError(f"stride must be >= 1, not {stride!r}")
        self.mask_special = None
        if mask_special:
            self.mask_special = np.asarray(sorted(int(i) for i in mask_special), dtype=np.int64)
        counts = []
        for i in range(self.shards.num_shards):
            n = self.shards.index["shards"][i]["num_tokens"]
            counts.append(0 if n < seq_len + 1 else (n - seq_len - 1) // self.stride + 1)
        self._starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(f"window {k} out of range ({n} windows)")
        shard = int(np.searchsorted(self._starts, k, side="right") - 1)
        start = (k - int(self._starts[shard])) * self.stride
        chunk = np.asarray(self.shards.tokens(shard)[start : start + self.seq_len + 1], dtype=np.int64)
        x = torch.from_numpy(chunk[:-1].copy())
        y = chunk[1:].copy()
        if self.mask_special is not None:
            y[np.isin(y, self.mask_special)] = -1
        return x, torch.from_numpy(y)
