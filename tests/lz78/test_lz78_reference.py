"""Parity: the Rust strategies against the slow pure-Python rules, and Patricia against the plain trie."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenforge import LZ78Tokenizer, _core
from tokenforge.formats.lz78_tsv import LZ78Data
from tokenforge.reference import lz78 as ref

pytest.importorskip("regex")

TEXTS = [
    "the cat sat on the mat. the hat was on the cat, and then the mat sat on the hat!",
    "She sells sea shells by the sea shore; the shells she sells are sea shells, I'm sure.",
    "1234 5678 12 34 56 — numbers and déjà vu, naïve café; 日本語 日本 語.\n\n  indented\tline\r\n",
    "def f(x):\n    return x * x  # the square of x\n\ndef g(y):\n    return f(y) + f(y)\n",
    "How much wood would a woodchuck chuck if a woodchuck could chuck wood? " * 3,
]


def rust_dict(texts, strategy, n, chunking=True, **params):
    t = _core.Lz78Trainer(strategy, n, _core.GPT4_PATTERN if chunking else None, params)
    t.feed(list(texts))
    entries, flat, _ = t.finish()
    return [(p, c, pat, out) for p, c, pat, out in entries]


CASES = [
    ("standard", {}),
    ("frequency_gated", {}),
    ("frequency_gated", {"evict_interval": 7, "evict_fraction": 0.3}),
    ("frequency_gated", {"evict_interval": 5, "evict_threshold": 2}),
    ("frequency_gated", {"evict_interval": 9, "decay": 0.5}),
    ("multi_round", {"rounds": 1}),
    ("multi_round", {"rounds": 3}),
    ("multi_round", {"pool": "standard", "pool_factor": 3.0, "rounds": 2}),
    ("cost_adjusted", {"rounds": 1}),
    ("cost_adjusted", {"rounds": 3}),
    ("smart_prune", {"rounds": 3}),
    ("smart_prune", {"pool_factor": 2.5, "rounds": 1, "evict_interval": 11}),
    ("compressed", {}),
    ("flat_prune", {}),
    ("flat_prune", {"pool_factor": 3.0, "max_chars": 5, "drop_fraction": 0.25}),
]


@pytest.mark.parametrize("chunking", [True, False])
@pytest.mark.parametrize("n", [12, 40])
@pytest.mark.parametrize("strategy,params", CASES)
def test_parity_with_reference(strategy, params, n, chunking):
    got = rust_dict(TEXTS, strategy, n, chunking, **params)
    want = ref.train(TEXTS, strategy, n, chunking, **params)
    assert got == want


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab cde\n.é", min_size=1, max_size=80), min_size=1, max_size=4),
    strategy=st.sampled_from(["frequency_gated", "multi_round", "cost_adjusted", "smart_prune", "flat_prune"]),
    n=st.integers(3, 20),
)
def test_parity_on_random_small_corpora(texts, strategy, n):
    params = {"evict_interval": 4} if strategy != "flat_prune" else {}
    assert rust_dict(texts, strategy, n, True, **params) == ref.train(texts, strategy, n, True, **params)


def test_patricia_rows_match_reference():
    entries = rust_dict(TEXTS, "smart_prune", 40)
    items, k = [], 0
    for _, _, pat, out in entries:
        k += out
        items.append((pat, k if out else -1))
    rows, trie_nodes = _core.lz78_patricia(items)
    assert [tuple(r) for r in rows] == ref.patricia(items)
    assert trie_nodes >= len(rows)


# ---- Patricia == plain trie -----------------------------------------------------------
def _random_dictionary(rng: random.Random, alphabet: str, size: int):
    """A random prefix-closed tree with random prefix-only nodes (smart_prune's shape)."""
    pats = set()
    while len(pats) < size:
        w = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        for k in range(1, len(w) + 1):
            pats.add(w[:k])
    pats = sorted(pats, key=lambda p: (len(p), p))
    return [(p, rng.random() < 0.6) for p in pats]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**9), text=st.text(alphabet="abcé🙂 x\n", max_size=120), chunking=st.booleans())
def test_patricia_equals_plain_trie(seed, text, chunking):
    rng = random.Random(seed)
    d = _random_dictionary(rng, "abcé🙂 ", rng.randint(1, 60))
    if not any(o for _, o in d):
        d[0] = (d[0][0], True)
    nodes, code = [], {}
    outs = [p for p, o in d if o] + [p for p, o in d if not o]
    for i, p in enumerate(outs):
        code[p] = i + 1
    out_set = {p for p, o in d if o}
    for p in outs:
        nodes.append((code.get(p[:-1], 0), p[-1], p, p in out_set))
    tok = LZ78Tokenizer(LZ78Data("tree", nodes, {"chunking": chunking}))
    n = tok.num_codes
    items = [(p, code[p] if p in out_set else -1) for p in outs]
    pattern = _core.GPT4_PATTERN if chunking else None
    assert _core.lz78_patricia_encode(items, n, text, pattern) == tok.encode(text)
    assert tok.to_compressed().encode(text) == tok.encode(text)


def test_patricia_equals_plain_trie_on_real_text():
    from tokenforge.data.default_corpus import _topics

    texts = _topics()[:300] or TEXTS
    tok = LZ78Tokenizer.train_from_iterator(texts, 2000, strategy="smart_prune", progress=False)
    comp = tok.to_compressed()
    big = "\n".join(texts)
    assert comp.encode(big) == tok.encode(big)
    items, k = [], 0
    for _, _, pat, out in tok.data.nodes:
        k += out
        items.append((pat, k if out else -1))
    assert _core.lz78_patricia_encode(items, tok.num_codes, big, _core.GPT4_PATTERN) == tok.encode(big)
