"""The default build is the stable-ABI (abi3) extension, and it builds lists of ids inline.

The abi3 build checks at import that the running CPython lays out its lists as
3.10-3.14 with the GIL do (``check_list_layout`` in src/py/mod.rs) and then
builds lists the way the per-version build does (item array, reference counts
inline); ``bench/abi3.py --callgrind`` shows both at the same instructions per
byte. These tests pin that the fast path is the one running here, and that its
reference counting balances.
"""

from __future__ import annotations

import gc
import sys

import pytest

from tokenforge import _core


def test_the_extension_is_the_abi3_build():
    assert _core.__file__.endswith(".abi3.so"), f"{_core.__file__}: `make` builds the abi3 extension by default"


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 14),
    reason="the inline list layout is known for CPython 3.10-3.14 only",
)
def test_lists_are_built_inline_on_a_known_cpython():
    assert _core.lists_built_inline()


def test_reference_counts_balance_through_many_lists(tiny_bpe):
    text = "the quick brown fox, the lazy dog " * 20
    ids = tiny_bpe.encode(text)
    probe = max(ids)  # the IntTable's int for a merged id: not one of CPython's shared small ints
    assert probe > 256
    for _ in range(3):  # warm: every int of the text made and kept by the table
        tiny_bpe.encode_batch([text] * 4)
    gc.collect()
    before = sys.getrefcount(probe)
    for _ in range(200):
        lists = tiny_bpe.encode_batch([text] * 50, num_threads=2)
        one = tiny_bpe.encode_ordinary(text)
        del lists, one
    gc.collect()
    assert sys.getrefcount(probe) == before
