"""Compression metrics of any tokenizer on any text.

:func:`compression_metrics` encodes the texts (in parallel, through
``encode_batch``) and reports:

``bytes_per_token``      UTF-8 bytes of the text / tokens (higher = more compression)
``chars_per_token``      characters of the text / tokens
``vocab_utilisation``    share of the usable ids (those with bytes, i.e. not
                         special, reserved or unused) that occur at least once
``renyi_efficiency``     Rényi entropy of order α (default 2.5) of the unigram
                         distribution of the ids, divided by log of the number of
                         usable ids: H_α(p) = log(Σ p_i^α) / (1 − α). 1 means the
                         ids are used evenly; low values mean a few very frequent
                         ids (Zouhar et al., 2023, tie this to downstream quality)
``token_length_histogram``  {byte length: occurrences} over the encoded text
``vocab_length_histogram``  {byte length: ids} over the usable vocabulary
``lossless``             whether the tokens' bytes add up to the text's bytes
                         (False for a tokenizer that cannot represent the text)

Texts whose encoding fails (e.g. characters a latin1-only tokenizer refuses)
raise; pass them through the tokenizer's own error policy first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from ..batching import batched
from ..embedding_meta import model_vocab_size

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["compression_metrics", "renyi_efficiency", "token_counts"]

DEFAULT_ALPHA = 2.5


def token_counts(
    tok: Tokenizer, texts: Sequence[str], *, num_threads: int | None = None, batch_chars: int = 8 << 20
) -> np.ndarray:
    """Occurrences of every id (int64, one entry per id the model can see) when encoding ``texts``."""
    vocab = model_vocab_size(tok)
    counts = np.zeros(vocab, dtype=np.int64)
    for batch in batched(texts, batch_chars):
        ids, _ = tok.encode_batch_flat(batch, num_threads=num_threads)
        if len(ids):  # one count over the whole batch's flat ids
            counts[:] += np.bincount(ids, minlength=vocab)[:vocab]
    return counts


def renyi_efficiency(counts: np.ndarray, alpha: float = DEFAULT_ALPHA, vocab: int | None = None) -> float:
    """H_α of the distribution ``counts`` divided by ``log(vocab)`` (default: len(counts))."""
    c = np.asarray(counts, dtype=np.float64)
    total = c.sum()
    n = int(vocab if vocab is not None else len(c))
    if total <= 0 or n <= 1:
        return 0.0
    p = c[c > 0] / total
    if alpha == 1.0:
        h = float(-(p * np.log(p)).sum())
    else:
        h = float(np.log((p**alpha).sum()) / (1.0 - alpha))
    return h / math.log(n)


def _hist(lengths: np.ndarray, weights: np.ndarray | None = None) -> dict[int, int]:
    if len(lengths) == 0:
        return {}
    b = np.bincount(lengths, weights=weights).astype(np.int64)
    return {int(k): int(v) for k, v in enumerate(b) if v}


def compression_metrics(
    tok: Tokenizer, texts: Iterable[str] | str, *, alpha: float = DEFAULT_ALPHA, num_threads: int | None = None
) -> dict:
    """The metrics of the module docstring for ``tok`` on ``texts`` (a str or an iterable of str)."""
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    counts = token_counts(tok, texts, num_threads=num_threads)
    vocab = len(counts)
    tb = np.asarray(tok.token_bytes(), dtype=np.int64)
    tb = np.concatenate([tb, np.zeros(max(0, vocab - len(tb)), np.int64)])[:vocab]
    usable = tb > 0
    tokens = int(counts.sum())
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    chars = sum(len(t) for t in texts)
    token_bytes_total = int((counts * tb).sum())
    seen_bytes = sum(len(tok.normalize(t).encode("utf-8")) for t in texts)  # the hook: identity for most families
    return {
        "tokens": tokens,
        "bytes": text_bytes,
        "chars": chars,
        "bytes_per_token": text_bytes / tokens if tokens else 0.0,
        "chars_per_token": chars / tokens if tokens else 0.0,
        "vocab_size": int(tok.vocab_size),
        "model_vocab_size": model_vocab_size(tok),
        "usable_ids": int(usable.sum()),
        "ids_used": int((counts[usable] > 0).sum()),
        "vocab_utilisation": float((counts[usable] > 0).sum() / max(1, usable.sum())),
        "renyi_alpha": alpha,
        "renyi_efficiency": renyi_efficiency(counts[usable], alpha, vocab=int(usable.sum())),
        "token_length_histogram": _hist(tb, counts.astype(np.float64)),
        "vocab_length_histogram": _hist(tb[usable]),
        "mean_token_bytes": token_bytes_total / tokens if tokens else 0.0,
        "lossless": token_bytes_total == seen_bytes,
    }
