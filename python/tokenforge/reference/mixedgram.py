"""Slow, obviously-correct mixedgram, used only by tests.

Every function is the plainest loop that states the spec's rule, so that the
Rust core can be checked against it on small inputs:

- :func:`vocabulary`: count every 2..8-gram with overlaps, sort by
  ``(-n*count, -n, bytes)``, keep the first ``slots``;
- :func:`greedy`: at each position the longest vocabulary n-gram, else the byte;
- :func:`min_tokens`: the fewest tokens any cut into vocabulary n-grams and
  bytes can reach (shortest path);
- :func:`pack_stream` / :func:`mxgram_file`: the 12-bit packing and the
  ``.mxgram`` layout written out byte by byte.

Text here is NUL-free ``bytes``. Not handled: anything about speed.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["vocabulary", "greedy", "min_tokens", "pack_stream", "header", "mxgram_file"]


def vocabulary(text: bytes, slots: int = 3840) -> list[tuple[bytes, int]]:
    """The top ``slots`` (n-gram, count) in vocabulary order."""
    counts: Counter[bytes] = Counter()
    for n in range(2, 9):
        for i in range(len(text) - n + 1):
            counts[text[i : i + n]] += 1
    ranked = sorted(counts.items(), key=lambda gc: (-len(gc[0]) * gc[1], -len(gc[0]), gc[0]))
    return ranked[:slots]


def greedy(ngrams: list[bytes], text: bytes) -> list[int]:
    """Greedy longest match; ``ngrams[i]`` is id 256 + i."""
    ids = {g: 256 + i for i, g in enumerate(ngrams) if g}
    out = []
    i = 0
    while i < len(text):
        for n in range(8, 1, -1):
            g = text[i : i + n]
            if len(g) == n and g in ids:
                out.append(ids[g])
                i += n
                break
        else:
            out.append(text[i])
            i += 1
    return out


def min_tokens(ngrams: list[bytes], text: bytes) -> int:
    """The fewest tokens that spell ``text``."""
    vocab = {g for g in ngrams if g}
    best = [0] * (len(text) + 1)
    for i in range(len(text) - 1, -1, -1):
        best[i] = best[i + 1] + 1
        for n in range(2, 9):
            if i + n <= len(text) and text[i : i + n] in vocab:
                best[i] = min(best[i], best[i + n] + 1)
    return best[0]


def pack_stream(ids: list[int]) -> bytes:
    """Two ids per three bytes, most significant bits first; odd count: Y = 0."""
    ids = list(ids) + ([0] if len(ids) % 2 else [])
    out = bytearray()
    for x, y in zip(ids[0::2], ids[1::2]):
        out += bytes([x >> 4, ((x & 0xF) << 4) | (y >> 8), y & 0xFF])
    return bytes(out)


def header(ngrams: list[bytes]) -> bytes:
    """3840 entries: n-gram right-aligned in 8 bytes, then the id big-endian; unused: zeros."""
    out = bytearray()
    for i in range(3840):
        g = ngrams[i] if i < len(ngrams) else b""
        if g:
            out += bytes(8 - len(g)) + g + (256 + i).to_bytes(2, "big")
        else:
            out += bytes(10)
    return bytes(out)


def mxgram_file(ngrams: list[bytes], ids: list[int]) -> bytes:
    return header(ngrams) + pack_stream(ids)
