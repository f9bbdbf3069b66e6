"""Character offsets of tokens: which span of the text each id covers.

:meth:`tokenforge.Tokenizer.encode_with_offsets` gives, per id, the span
``(start, end)`` of characters of the caller's text that the id's bytes cover:
the first character its first byte belongs to and one past the character its
last byte belongs to. A token inside one multi-byte character gets that
character's span (as Hugging Face tokenizers' ``offsets`` do for byte-level
BPE), so two tokens that split a character both name it.

How it is computed, linearly: the ids' byte lengths are laid end to end over
the text's bytes as the tokenizer saw them (UTF-8 with lone surrogates as their
three bytes, or latin1 for mixedgram: :attr:`Tokenizer.text_encoding`); each
byte belongs to one character. A tokenizer that normalises first (the growing
vocabulary's NFC) covers the normalised text: its characters are mapped back
to the caller's through :func:`normalized_spans`, which normalises one cluster
at a time (a character and the combining marks after it) and maps each
cluster's output to the cluster's input span.

Not handled: a normalisation that does not act cluster by cluster (NFC joining
Hangul jamo, which have no combining class, across what we take for two
clusters) is detected (the clusters' outputs do not add up to the normalised
text) and mapped coarsely: every token then spans the whole text.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .errors import TokenforgeError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["char_starts", "normalized_spans", "token_spans", "spans_of"]


def char_starts(text: str, encoding: str) -> "np.ndarray":
    """Byte offset of every character of ``text`` and the total: ``len(text) + 1``
    int64 values, for ``encoding`` "utf-8" (surrogatepass) or "latin-1" (one byte each)."""
    import numpy as np

    out = np.zeros(len(text) + 1, dtype=np.int64)
    if encoding == "latin-1":
        out[1:] = np.arange(1, len(text) + 1)
        return out
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    widths = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    np.cumsum(widths, out=out[1:])
    return out


def normalized_spans(
    text: str, normalized: str, normalize: Callable[[str], str]
) -> "tuple[np.ndarray, np.ndarray] | None":
    """For each character of ``normalized`` (= ``normalize(text)``), the span of
    ``text`` it came from, as (starts, ends); None when the text normalises
    unchanged. Clusters: a character with the combining marks after it."""
    import numpy as np

    if normalized == text:
        return None
    starts = np.zeros(len(normalized), dtype=np.int64)
    ends = np.zeros(len(normalized), dtype=np.int64)
    pos = 0
    i = 0
    n = len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        out = normalize(text[i:j])
        k = pos + len(out)
        if normalized[pos:k] != out:
            break
        starts[pos:k] = i
        ends[pos:k] = j
        pos = k
        i = j
    if i < n or pos != len(normalized):  # not cluster by cluster: one span for everything
        starts[:] = 0
        ends[:] = n
    return starts, ends


def token_spans(byte_lengths: "np.ndarray", starts: "np.ndarray") -> "tuple[np.ndarray, np.ndarray]":
    """Character spans (start, end) of tokens of ``byte_lengths`` bytes laid end
    to end over text whose characters start at ``starts`` (:func:`char_starts`)."""
    import numpy as np

    ends_b = np.cumsum(byte_lengths, dtype=np.int64)
    begins_b = ends_b - byte_lengths
    first = np.searchsorted(starts, begins_b, side="right") - 1
    last = np.searchsorted(starts, np.maximum(ends_b - 1, begins_b), side="right")
    empty = byte_lengths == 0
    last = np.where(empty, first, last)
    return first, last


def spans_of(tok: Any, text: str, ids: Sequence[int]) -> list[tuple[int, int]]:
    """The character span of ``text`` each of ``ids`` covers; ``ids`` are what
    ``tok`` (a :class:`tokenforge.Tokenizer`: its ``normalize``, ``text_encoding``,
    ``special_tokens`` and ``token_bytes``; not imported here, which the base
    class does) encoded ``text`` to (special tokens allowed in the text included)."""
    import numpy as np

    if not isinstance(text, str):
        raise TypeError(f"offsets need a str, not {type(text).__name__}")
    seen = tok.normalize(text)
    encoding = tok.text_encoding
    starts = char_starts(seen, encoding)
    specials = {i: name for name, i in tok.special_tokens.items()}
    table = tok.token_bytes()
    arr = np.asarray(ids, dtype=np.int64)
    lengths = table[arr].astype(np.int64) if len(arr) else np.zeros(0, dtype=np.int64)
    for k, i in enumerate(ids):
        if i in specials:  # a special token allowed in the text covers its literal
            lengths[k] = len(specials[i].encode(encoding, "surrogatepass" if encoding == "utf-8" else "strict"))
    total = int(lengths.sum())
    if total != int(starts[-1]):
        raise TokenforgeError(
            f"{type(tok).__name__}: the ids cover {total} bytes but the text has {int(starts[-1])}; "
            "offsets need ids that cover the text exactly"
        )
    first, last = token_spans(lengths, starts)
    back = normalized_spans(text, seen, tok.normalize)
    if back is not None:
        n_seen = len(seen)
        lo = np.minimum(first, max(n_seen - 1, 0))
        hi = np.maximum(np.minimum(last, n_seen) - 1, 0)
        first, last = back[0][lo], back[1][hi]
        if n_seen == 0:
            first = last = np.zeros_like(first)
    return list(zip(first.tolist(), last.tolist()))
