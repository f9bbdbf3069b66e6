"""Long pieces (100 KB and more without a split point) give tiktoken's ids with
the real cl100k and o200k rank files.

The core encodes pieces of 96 bytes or more in windows stitched where the
result provably decomposes (``src/bpe/long.rs``); these tests feed it what
stresses that: runs of one byte, short periods, random letters, random text
over two or three letters (long runs of merges across every window), and
multibyte text without spaces. The Rust tests compare the same path with the
slow reference on random small vocabularies.
"""

import random
import string

import pytest
from test_gpt_patterns import tokenizers

SIZE = 100_000


def long_texts() -> dict[str, str]:
    rng = random.Random(20261123)
    letters = "".join(rng.choices(string.ascii_letters, k=SIZE))
    return {
        "a-run": "a" * SIZE,
        "space-run": " " * SIZE,
        "digit-run": "7" * SIZE,
        "period-2": "ab" * (SIZE // 2),
        "period-3": "abc" * (SIZE // 3) + "ab",
        "period-7": "xyzzyqw" * (SIZE // 7),
        "letters": letters,
        "two-letters": "".join(rng.choices("ab", k=SIZE)),
        "three-letters-runs": "".join(c * rng.randint(1, 40) for c in rng.choices("xyz", k=SIZE // 20)),
        "lowercase-apostrophes": "".join(rng.choices(string.ascii_lowercase + "'", k=SIZE)),
        "cjk": "".join(rng.choices("的一是不了人我在有他这为之大来以个中上们", k=SIZE // 3)),
        "cyrillic": "".join(rng.choices("абвгдеёжзийклмнопрстуфхцчшщъыьэюя", k=SIZE // 2)),
        "mixed-scripts": "".join(rng.choices(string.ascii_letters + "éüßçñ的是あア", k=SIZE // 2)),
        "runs-then-letters": "a" * 50_000 + letters[:50_000] + "b" * 30_000,
    }


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("kind", sorted(long_texts()))
def test_long_piece_equals_tiktoken(name, kind):
    enc, ours = tokenizers(name)
    text = long_texts()[kind]
    want = enc.encode_ordinary(text)
    for how, tok in ours.items():
        assert tok.encode_ordinary(text) == want, (name, how, kind)
