"""The encoder's fast path (short-token table, pair table, bounded piece caches,
batched lookups; ``src/bpe/fast.rs``) gives exactly the ids of the rule.

Against tiktoken with the real cl100k and o200k rank files (from the bpe-openai
wheel, as in test_gpt_patterns.py) and against the slow Python reference with
vocabularies our trainer makes, on pieces whose lengths sit at every limit of the
fast path (15/16 bytes: the short-token table; 31/32: the short cache; 63/64: the
long cache; 95/96: the long merge; 4096/4097 in their own test: the spill cache,
which also holds results with more ids than a fixed cache entry), pieces that cut characters (CJK, Cyrillic,
emoji), text with lone surrogates, and each text encoded three times (a piece is
cached from its second merge on: the third time is from the cache) through every entry point: encode_ordinary, encode_batch on two
threads (lists and numpy), encode_to_numpy.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenforge import BPETokenizer
from tokenforge.bpe import PATTERNS
from tokenforge.reference import bpe as ref

LIMITS = [1, 2, 3, 14, 15, 16, 17, 30, 31, 32, 33, 62, 63, 64, 65, 94, 95, 96, 97, 140]
ALPHABETS = ["abcdefghij", "абвгдежзик", "東京都大阪府", "αβγδε", "0123456789", "!?.,;:-", "😀🚀"]


def near_limit_texts(seed: int) -> list[str]:
    """Words of every limit length (in UTF-8 bytes, or just above when a
    character does not fit), alone, after a space, glued to others."""
    rnd = random.Random(seed)
    words = []
    for n in LIMITS:
        for alpha in ALPHABETS:
            w = ""
            while len((w + alpha[0]).encode()) <= n:
                w += rnd.choice(alpha)
            words.append(w or alpha[0])
    texts = [" ".join(words), "".join(words), "\n".join(words[::-1]) + "  \n"]
    texts += [" " + w for w in words]
    return texts


@functools.cache
def ranks(name: str) -> dict[bytes, int]:
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None and spec.submodule_search_locations, "bpe-openai (a dev dependency) is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    out = {}
    for line in gzip.decompress(path.read_bytes()).splitlines():
        if line:
            tok, rank = line.split()
            out[base64.b64decode(tok)] = int(rank)
    return out


@functools.cache
def pair(name: str):
    import tiktoken

    named = {"cl100k_base": "cl100k", "o200k_base": "o200k"}[name]
    enc = tiktoken.Encoding(name, pat_str=PATTERNS[named], mergeable_ranks=ranks(name), special_tokens={})
    return enc, BPETokenizer.from_tiktoken(ranks(name), pattern=named)


def all_paths(tok, texts: list[str]) -> list[list[list[int]]]:
    """The ids of `texts` by every entry point, each three times (merged; merged
    again, now kept in the caches, as a piece is kept from its second merge on;
    from the caches)."""
    got = []
    for _ in range(3):
        got.append([tok.encode_ordinary(t) for t in texts])
        got.append(tok.encode_batch(texts, num_threads=2))
        got.append([a.tolist() for a in tok.encode_batch(texts, num_threads=2, as_numpy=True)])
        got.append([tok.encode_to_numpy(t).tolist() for t in texts])
    return got


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_ids_equal_tiktoken_at_every_limit(name):
    enc, tok = pair(name)
    texts = near_limit_texts(1) + near_limit_texts(2)
    want = [enc.encode_ordinary(t) for t in texts]
    for k, got in enumerate(all_paths(tok, texts)):
        assert got == want, k


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_spill_cache_at_its_limits(name):
    """Pieces past the long cache (up to 4,096 bytes, and one byte more: not
    cached), and short pieces with more ids than a fixed cache entry holds
    (Cyrillic, CJK: 12 or more ids in 16-31 bytes), each encoded three times:
    the first from the rule, then from the spill cache."""
    enc, tok = pair(name)
    rnd = random.Random(7)
    texts = []
    for n in (4095, 4096, 4097, 1000, 200):
        for alpha in ("абвгдежзик", "東京都大阪府", "abcdefghij"):
            w = ""
            while len((w + alpha[0]).encode()) <= n:
                w += rnd.choice(alpha)
            texts += [w, " " + w]
    for alpha in ("ёжщъыэюя", "龍鬱鑿齉", "ǅʰß"):
        texts.append(" ".join("".join(rnd.choice(alpha) for _ in range(rnd.randint(6, 15))) for _ in range(200)))
    want = [enc.encode_ordinary(t) for t in texts]
    for _ in range(3):
        assert [tok.encode_ordinary(t) for t in texts] == want
    assert tok.encode_batch(texts, num_threads=2) == want


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(
        st.text(alphabet=st.sampled_from("ab éз東😀1.'\n"), min_size=1, max_size=70),
        min_size=1,
        max_size=8,
    )
)
def test_ids_equal_tiktoken_twice_on_random_words(words):
    text = " ".join(words)
    for name in ("cl100k_base", "o200k_base"):
        enc, tok = pair(name)
        want = enc.encode_ordinary(text)
        for _ in range(3):  # merged, merged and cached, from the cache
            assert tok.encode_ordinary(text) == want


def test_lone_surrogates_around_cached_pieces():
    # the rule (base.encode_around_surrogates): the text between runs of lone
    # surrogates is encoded, each surrogate is its three bytes' ids
    enc, tok = pair("cl100k_base")
    byte = {b: ranks("cl100k_base")[bytes([b])] for b in range(256)}
    for word in ["internationalization", "東京都大阪府東京都", "зазазазазазазазаза"]:
        text = f"{word}\ud800{word} {word}\udfff\ud800x"
        want = []
        for part in re.split("([\ud800-\udfff]+)", text):
            if part and "\ud800" <= part[0] <= "\udfff":
                want += [byte[b] for ch in part for b in ch.encode("utf-8", "surrogatepass")]
            elif part:
                want += enc.encode_ordinary(part)
        for _ in range(2):
            assert tok.encode_ordinary(text) == want
            assert tok.encode_batch([text, word], num_threads=2) == [want, enc.encode_ordinary(word)]


@pytest.fixture(scope="module")
def trained():
    rnd = random.Random(5)
    docs = []
    for _ in range(300):
        docs.append(
            " ".join("".join(rnd.choice(a) for _ in range(rnd.randint(1, 40))) for a in rnd.sample(ALPHABETS, 4))
        )
    tok = BPETokenizer.train_from_iterator(docs, 256 + 700, pattern="cl100k", special_tokens=None, progress=False)
    return tok, docs


def test_trained_vocabulary_equals_reference(trained):
    tok, docs = trained
    rk = tok.mergeable_ranks()
    assert max(len(t) for t in rk) > 16  # tokens long enough to reach the tables' limits
    texts = docs[:40] + near_limit_texts(3)
    want = [ref.encode_reference(rk, t, PATTERNS["cl100k"]) for t in texts]
    for k, got in enumerate(all_paths(tok, texts)):
        assert got == want, k


def test_numpy_and_lists_agree_on_a_big_batch():
    _, tok = pair("o200k_base")
    texts = near_limit_texts(4) * 20
    lists = tok.encode_batch(texts, num_threads=2)
    flat = tok.encode_batch(texts, num_threads=2, as_numpy=True)
    assert [a.tolist() for a in flat] == lists
    assert all(a.dtype == np.uint32 for a in flat)


def test_lists_share_one_int_per_id_and_outlive_the_model():
    """Lists hold the model's one int per id (made the first time a list
    needs it, from any thread), and keep them alive after the model is gone."""
    import gc
    import sys

    tok = BPETokenizer.from_tiktoken(ranks("o200k_base"), pattern="o200k")
    text = "naïve café, Привет мир, 東京都 and more words " * 50
    want = pair("o200k_base")[0].encode_ordinary(text)
    a = tok.encode_ordinary(text)
    b = tok.encode_batch([text] * 8, num_threads=2)
    assert a == want and all(x == want for x in b)
    for x in b:
        assert all(i is j for i, j in zip(x, a))  # the same objects
    big = max(a)
    assert big > 100_000 and sys.getrefcount(a[a.index(big)]) >= 3
    del tok, b
    gc.collect()
    assert a == want  # the lists' references keep the ints


def test_lists_are_ordinary_lists_and_release_what_they_hold():
    """The lists are built in an item array of exactly their length (not
    zeroed first): they grow, shrink, sort and copy like any list, the
    collector sees their items, and freeing them gives back every
    reference they took."""
    import gc
    import sys

    tok = BPETokenizer.from_tiktoken(ranks("o200k_base"), pattern="o200k")
    text = "naïve café, Привет мир, 東京都 and more words " * 40
    want = pair("o200k_base")[0].encode_ordinary(text)
    ids = tok.encode_ordinary(text)
    assert ids == want and type(ids) is list
    probe = next(i for i in ids if i > 1000)  # an int of the model's table, not a shared small one
    before = sys.getrefcount(probe)
    lists = [tok.encode_ordinary(text) for _ in range(5)] + tok.encode_batch([text] * 5, num_threads=2)
    count = want.count(probe)
    assert sys.getrefcount(probe) - before == 10 * count
    x = lists[0]
    x.append(7)  # the first growth past an array of exactly len(x) slots
    x.extend(range(1000))
    assert x[: len(want)] == want and x[len(want)] == 7 and len(x) == len(want) + 1001
    del x[len(want) :]
    x.sort()
    assert x == sorted(want)
    y = lists[1][::-1]
    assert y[::-1] == want
    held = gc.get_referents(lists[2])  # what the collector walks: every item
    assert sorted(map(id, held)) == sorted(map(id, lists[2]))
    assert tok.encode_ordinary("") == [] and tok.encode_batch(["", "a"]) == [[], tok.encode_ordinary("a")]
    del lists, x, y, held
    gc.collect()
    assert sys.getrefcount(probe) == before


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_lists_are_tracked_by_the_collector(threads):
    """A batch's lists are built untracked by the cycle collector (so that
    collections made while it is built do not walk them) and are all tracked
    again when handed out: a cycle made through any of them is collected."""
    import gc
    import weakref

    tok = BPETokenizer.from_tiktoken(ranks("cl100k_base"), pattern="cl100k")
    texts = [f"document {i}: " + "some words of text " * 60 for i in range(300)]  # many chunks on 2 threads
    lists = tok.encode_batch(texts, num_threads=threads)
    want = pair("cl100k_base")[0].encode_ordinary_batch(texts)
    assert lists == want
    assert gc.is_tracked(lists) and all(gc.is_tracked(x) for x in lists)

    class Box:
        pass

    refs = []
    for x in (lists[0], lists[len(lists) // 2], lists[-1]):
        b = Box()
        b.ids = x
        x.append(b)  # x -> b -> x: only the collector can free it
        refs.append(weakref.ref(b))
    del lists, x, b
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("where", [0, 150, 299])
def test_a_failing_text_names_its_place_in_the_batch(threads, where):
    """A text the split pattern fails on (the regex engine's backtracking
    limit) raises PatternError naming the text's index in the batch, for
    lists and arrays; the lists built before it are freed (untracked) and
    the tokenizer goes on working."""
    import gc

    from tokenforge.errors import PatternError

    pat = r"(?:(a|aa)+)\1*(?=b)|[\s\S]"  # a lookahead: fancy-regex's backtracking engine
    tok = BPETokenizer.from_tiktoken({bytes([b]): b for b in range(256)}, pattern=pat)
    texts = ["hello world " * 50] * 300
    texts[where] = "a" * 5000 + "c"
    for as_numpy in (False, True):
        with pytest.raises(
            PatternError, match=rf"^text {where} of the batch: split pattern failed on the text, searching from byte 0"
        ):
            tok.encode_batch(texts, num_threads=threads, as_numpy=as_numpy)
    gc.collect()
    good = texts[:where] + texts[where + 1 :]
    lists = tok.encode_batch(good, num_threads=threads)
    assert lists == [tok.encode_ordinary(t) for t in good] and all(gc.is_tracked(x) for x in lists)
