"""Piece counts that travel: WordCounter's transport bytes, merge, bounded mode."""

from __future__ import annotations

import pickle
import random

import pytest

from tokenforge import _core
from tokenforge.errors import FormatError, TokenforgeError
from transport_helpers import seal

TEXTS = ["hello world", "hello there, world!", "  spaces\n\nand lines", "été 2024 ünïcode 🙂", "x\x00y"]


def counted(texts, pattern=_core.GPT4_PATTERN) -> _core.WordCounter:
    wc = _core.WordCounter(pattern)
    wc.add_texts(texts)
    return wc


@pytest.mark.parametrize("pattern", [_core.GPT4_PATTERN, _core.GPT2_PATTERN, r"\w+|\s+", None])
def test_any_grouping_merges_to_the_whole(pattern):
    rng = random.Random(7)
    texts = [rng.choice(TEXTS) * rng.randint(1, 3) for _ in range(40)]
    whole = counted(texts, pattern).to_bytes()
    for trial in range(10):
        cuts = sorted(rng.sample(range(1, len(texts)), rng.randint(1, 6)))
        parts = [counted(texts[a:b], pattern) for a, b in zip([0, *cuts], [*cuts, len(texts)])]
        rng.shuffle(parts)  # order does not matter
        assert _core.WordCounter.merged(parts).to_bytes() == whole
        acc = parts[0]
        for p in parts[1:]:
            acc.merge(p)
        assert acc.to_bytes() == whole


def test_round_trip_pickle_and_items():
    wc = counted(TEXTS)
    blob = wc.to_bytes()
    back = _core.WordCounter.from_bytes(blob)
    assert back.to_bytes() == blob
    assert pickle.loads(pickle.dumps(wc)).to_bytes() == blob
    assert (back.unique, back.total_pieces, back.total_bytes) == (wc.unique, wc.total_pieces, wc.total_bytes)
    assert back.pattern == _core.GPT4_PATTERN
    assert back.count(b" world") == wc.count(b" world") == 2
    assert back.items() == wc.items()  # (items() consumes the counter)


def test_merge_refuses_other_patterns_and_itself():
    a, b = counted(TEXTS), counted(TEXTS, None)
    with pytest.raises(TokenforgeError, match="different split patterns"):
        a.merge(b)
    with pytest.raises(TokenforgeError, match="into itself"):
        a.merge(a)
    with pytest.raises(TokenforgeError, match="at least one"):
        _core.WordCounter.merged([])
    merged = _core.WordCounter.merged([a, counted(TEXTS)])
    assert merged.count(b" world") == 4 and a.count(b" world") == 2  # inputs unchanged


def test_bounded_mode_records_what_it_dropped():
    wc = counted(["a a a a b b c"])  # "a" 1, " a" 3, " b" 2, " c" 1
    assert wc.prune_below(3) == 3
    assert wc.dropped == (3, 4, 3)
    assert wc.items() == [(b" a", 3)]
    other = counted(["a a a"])  # "a" 1, " a" 2
    other.prune_below(2)
    m = _core.WordCounter.merged([_core.WordCounter.from_bytes(counted(["z"]).to_bytes()), other])
    assert m.dropped == (1, 1, 2)
    assert m.count(b" a") == 2 and m.count(b"z") == 1
    assert counted(["q"]).dropped == (0, 0, 0)  # exact by default


def test_damaged_bytes_are_format_errors_never_crashes():
    blob = counted(TEXTS).to_bytes()
    rng = random.Random(1)
    for cut in range(len(blob)):
        with pytest.raises(FormatError):
            _core.WordCounter.from_bytes(blob[:cut])
    for _ in range(300):
        bad = bytearray(blob)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        with pytest.raises(FormatError):
            _core.WordCounter.from_bytes(bytes(bad))
    with pytest.raises(FormatError, match="kind"):
        _core.WordCounter.from_bytes(b"TFCT\x01\x02" + blob[6:])


def test_counts_read_from_the_data_are_bounded_by_it():
    # a valid checksum over a header that claims 2**63 - 1 pieces: refused before any allocation
    body = b"TFCT\x01\x01\x00" + b"\x00" * 5 + b"\xff" * 8 + b"\x7f"
    with pytest.raises(FormatError, match="cannot fit"):
        _core.WordCounter.from_bytes(seal(body))
    # pieces out of order, and a zero count
    ok = b"TFCT\x01\x01\x00" + b"\x00" * 5
    with pytest.raises(FormatError, match="increasing"):
        _core.WordCounter.from_bytes(seal(ok + b"\x02\x01b\x01\x01a\x01"))
    with pytest.raises(FormatError, match="count 0"):
        _core.WordCounter.from_bytes(seal(ok + b"\x01\x01a\x00"))
    assert _core.WordCounter.from_bytes(seal(ok + b"\x02\x01a\x01\x01b\x05")).count(b"b") == 5


def test_counting_leaves_no_utf8_copy_on_the_callers_strs():
    """CPython caches a UTF-8 copy inside a non-ASCII str once asked for its
    UTF-8 view, for the str's lifetime (``sys.getsizeof`` counts it): counting
    reads the texts through temporary bytes, so a corpus held in memory does
    not grow by its UTF-8 size."""
    import sys

    texts = ["été à Zürich " * 200, "日本語のテキスト " * 100, "plain ascii " * 50]
    before = [sys.getsizeof(t) for t in texts]
    c = _core.WordCounter(None)
    c.add_texts(texts, 2)
    assert c.total_bytes == sum(len(t.encode()) for t in texts)
    assert [sys.getsizeof(t) for t in texts] == before
    with pytest.raises(UnicodeEncodeError):
        c.add_texts(["ok", "lone \ud800 surrogate"])
