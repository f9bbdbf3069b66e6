"""Shared pieces of the growing-vocabulary tests: the committed fixture and small corpora."""

from __future__ import annotations

from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "growing_seed_tokenizer.json"

#: a small English-ish source
SOURCE_A = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.",
    "Then the fox jumped again, and the other foxes followed the first one there.",
    "In the morning the three dogs ate their breakfast in the garden together.",
    "There is nothing the fox likes more than the thrill of the chase at dawn.",
] * 3

#: a second source with other frequent pairs (code and numbers)
SOURCE_B = [
    "def encode(self, text):\n    return [b + 10 for b in text.encode('utf-8')]\n",
    "for i in range(1000):\n    total += values[i] * 2024\n",
    "if x == 12345 and y != 67890:\n    print(f'{x} {y}')\n",
    "Ünïcödé naïve café — 日本語のテキスト, emoji 🙂🙂 and digits 3141592653.",
] * 3


def corpus_texts(seed: int, n: int = 40) -> list[str]:
    """Deterministic pseudo-random texts over a small alphabet (many ties and overlaps)."""
    import random

    rng = random.Random(seed)
    words = ["ab", "aab", "ba", "abab", "aaa", "b", "café", "12", "3456", "xyz", "zz", "  ", "\n"]
    out = []
    for _ in range(n):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
    return out
