"""``encode_batch_flat``: one flat ``uint32`` array of ids and ``int64`` offsets
for every family (the core families, growing, mixedgram and the default of
:class:`tokenforge.base.Tokenizer` through the toy family), equal to encoding
the texts one by one, on one and two threads, with empty texts, an empty batch
and lone surrogates; and no Python object per text on the core path."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from tokenforge import BPETokenizer, GrowingBPETokenizer, LZ78Tokenizer, Mixedgram
from toy_family import CharTokenizer

CORPUS = ["hello world, the quick brown fox.\n", "def f(x):\n    return x + 1\n", "héllo wörld ünïcode 漢字"] * 20


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _grown() -> GrowingBPETokenizer:
    tok = GrowingBPETokenizer()
    tok.learn_merges(iter(CORPUS), 40)
    return tok


FAMILIES = {
    "bpe": lambda: BPETokenizer.train_from_iterator(CORPUS, 300, progress=False),
    "lz78": lambda: _quiet(LZ78Tokenizer.train_from_iterator, CORPUS, 300, strategy="standard", progress=False),
    "growing": _grown,
    "mixedgram": lambda: Mixedgram.train(text="".join(t for t in CORPUS if t.isascii())),
    "toy": lambda: CharTokenizer.train_from_iterator(CORPUS, 300),
}
_cache: dict[str, object] = {}


@pytest.fixture(params=sorted(FAMILIES))
def tok(request):
    if request.param not in _cache:
        _cache[request.param] = FAMILIES[request.param]()
    return _cache[request.param]


def _texts(tok) -> list[str]:
    texts = ["", "hello world", "", "def f(x):\n    return x", "the fox " * 40, ""]
    if not isinstance(tok, Mixedgram):  # latin1 only
        texts += ["héllo wörld 漢字", "a\ud800b", "\udfff", "x\ud83d\ude00y\udc00"]
    # enough text for several chunks on two threads (chunks are at least 64 KiB)
    return texts + [f"document {i}: " + "hello world " * (i % 97) for i in range(400)] + [""]


def _check(tok, texts, flat, offsets):
    one = [list(tok.encode_ordinary(t)) for t in texts]
    assert isinstance(flat, np.ndarray) and isinstance(offsets, np.ndarray)
    assert flat.dtype == np.uint32 and flat.ndim == 1
    assert offsets.dtype == np.int64 and offsets.shape == (len(texts) + 1,)
    assert offsets[0] == 0 and offsets[-1] == len(flat)
    assert np.all(np.diff(offsets) >= 0)
    for i, ids in enumerate(one):
        assert flat[offsets[i] : offsets[i + 1]].tolist() == ids, i
    assert flat.tolist() == [i for ids in one for i in ids]


@pytest.mark.parametrize("threads", [1, 2, None])
def test_flat_equals_one_by_one(tok, threads):
    texts = _texts(tok)
    flat, offsets = tok.encode_batch_flat(texts, num_threads=threads)
    _check(tok, texts, flat, offsets)
    # the list-of-arrays form stays, views of the same ids
    arrays = tok.encode_batch(texts, num_threads=threads, as_numpy=True)
    assert [a.tolist() for a in arrays] == [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]


def test_empty_batch_and_empty_texts(tok):
    flat, offsets = tok.encode_batch_flat([])
    assert flat.dtype == np.uint32 and flat.shape == (0,)
    assert offsets.dtype == np.int64 and offsets.tolist() == [0]
    flat, offsets = tok.encode_batch_flat(["", "", ""], num_threads=2)
    assert flat.shape == (0,) and offsets.tolist() == [0, 0, 0, 0]
    _check(tok, ("a", "", "b"), *tok.encode_batch_flat(("a", "", "b")))  # any sequence of str


def test_rejects_a_single_str_and_non_str_items(tok):
    with pytest.raises(TypeError):
        tok.encode_batch_flat("hello")
    with pytest.raises(TypeError, match="item 1"):
        tok.encode_batch_flat(["a", b"b"])


def test_surrogates_round_trip():
    tok = _cache.get("bpe") or FAMILIES["bpe"]()
    texts = ["a\ud800b", "ok", "\udc00\ud800"]
    flat, offsets = tok.encode_batch_flat(texts, num_threads=2)
    _check(tok, texts, flat, offsets)
    assert [tok.decode(flat[offsets[i] : offsets[i + 1]]) for i in range(3)] == texts


_PEAK = """
import sys, tracemalloc
sys.path[:0] = [{tests!r}, {core!r}]
from test_batch_flat import FAMILIES
tok = FAMILIES[{family!r}]()
texts = [f"hello world {{i % 10}}" for i in range(20_000)]  # ASCII: no cached UTF-8 copies either
tok.encode_batch_flat(texts[:10], num_threads=2)  # warm: imports, thread pool
tracemalloc.start()
flat, offsets = tok.encode_batch_flat(texts, num_threads=2)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
ok = len(offsets) == len(texts) + 1 and len(flat) > len(texts) and flat.base is not None
print(peak if ok else -1)
"""


@pytest.mark.parametrize("family", ["bpe", "lz78", "growing"])
def test_no_python_object_per_text(family):
    """The core path allocates no Python object per text: the traced Python
    allocations of a 20,000-text batch stay far below one small list or
    array per text (at least 56 bytes each); the id buffer is the core's own,
    which numpy wraps (it is not a Python allocation, and not copied). In a
    fresh interpreter: tracemalloc counts every thread's allocations, and the
    test session runs others (the Dask client's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = _PEAK.format(tests=os.path.dirname(here), core=here, family=family)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    peak = int(out.stdout.split()[-1])
    assert peak >= 0, "wrong shape, or the ids were copied into a numpy-owned buffer"
    # list(texts) is one pointer per text (8 bytes); a list or array per text would be >= 56
    assert peak < 16 * 20_000, peak
