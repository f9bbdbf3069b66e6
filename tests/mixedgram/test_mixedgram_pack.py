"""Mixedgram's 12-bit packing: exhaustive values, the stream grammar, its errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenforge.errors import FormatError, TokenforgeError
from tokenforge.mixedgram import pack, pack12, unpack, unpack12
from tokenforge.reference import mixedgram as ref

ALL = list(range(4096))
SETTINGS = settings(max_examples=200, deadline=None, database=None)


def formula(x: int, y: int) -> bytes:
    return bytes([x >> 4, ((x & 0xF) << 4) | (y >> 8), y & 0xFF])


def test_every_value_in_first_position():
    partners = [(v * 2654435761) % 4096 for v in ALL]  # a fixed permutation-ish partner for each value
    ids = [x for pair in zip(ALL, partners) for x in pair]
    data = pack12(ids)
    assert data == b"".join(formula(x, y) for x, y in zip(ALL, partners))
    assert unpack12(data) == ids


def test_every_value_in_second_position():
    partners = [(v * 40503 + 7) % 4096 for v in ALL]
    ids = [x for pair in zip(partners, ALL) for x in pair]
    data = pack12(ids)
    assert data == b"".join(formula(x, y) for x, y in zip(partners, ALL))
    assert unpack12(data) == ids


def test_every_value_with_every_fixed_partner_in_both_positions():
    for other in (0, 1, 0x0F0, 0x800, 0xFFF):
        for v in ALL:
            assert unpack12(pack12([v, other])) == [v, other]
            assert unpack12(pack12([other, v])) == [other, v]


def test_every_nonzero_value_last_in_an_odd_and_an_even_stream():
    for v in ALL[1:]:
        for ids in ([v], [7, v], [v, 9, v], [4095, 1, 2, v]):
            data = pack(ids)
            assert len(data) == 3 * ((len(ids) + 1) // 2)
            assert data == ref.pack_stream(ids)
            assert unpack(data) == ids


def test_lengths_are_whole_triples_for_odd_and_even_counts():
    for n in range(0, 21):
        ids = [(i * 37) % 4095 + 1 for i in range(n)]
        data = pack(ids)
        assert len(data) % 3 == 0
        assert len(data) == 3 * ((n + 1) // 2)
        assert unpack(data) == ids
        raw = unpack12(data)
        assert len(raw) == n + n % 2
        if n % 2:
            assert raw[-1] == 0  # the padding


def test_the_seed_example_sixteen_bytes_in_three():
    assert pack([256, 257]) == bytes([0x10, 0x01, 0x01])


def test_numpy_ids_are_accepted():
    ids = np.arange(1, 4096, dtype=np.uint16)
    assert unpack(pack(ids), as_numpy=True).tolist() == ids.tolist()
    assert pack(ids.astype(np.int64)) == pack(ids.tolist())


@SETTINGS
@given(st.lists(st.integers(1, 4095), max_size=300))
def test_stream_round_trip(ids):
    data = pack(ids)
    assert len(data) % 3 == 0
    assert data == ref.pack_stream(ids)
    assert unpack(data) == ids


@SETTINGS
@given(st.lists(st.integers(0, 4095), max_size=300))
def test_raw_round_trip(ids):
    data = pack12(ids)
    assert len(data) % 3 == 0
    assert unpack12(data) == ids + [0] * (len(ids) % 2)


def test_unpackable_ids_are_refused():
    with pytest.raises(TokenforgeError, match="reserved"):
        pack([5, 0, 6])
    with pytest.raises(TokenforgeError, match="12 bits"):
        pack([4096])
    with pytest.raises(TokenforgeError, match="12 bits"):
        pack12([1, 70000])
    with pytest.raises(ValueError):
        pack([-1])
    with pytest.raises(TypeError):
        pack("abc")


@pytest.mark.parametrize("size", [1, 2, 4, 5, 7])
def test_a_stream_that_is_not_whole_triples_names_the_offset(size):
    data = pack(list(range(1, 9)))[:size]
    with pytest.raises(FormatError) as e:
        unpack(data)
    assert e.value.offset == size - size % 3
    assert "not a multiple of 3" in str(e.value)


def test_a_zero_before_the_end_names_its_triple():
    data = formula(5, 6) + formula(0, 7) + formula(8, 0)
    with pytest.raises(FormatError) as e:
        unpack(data)
    assert e.value.offset == 3
    assert "padding" in str(e.value)
    data = formula(5, 0) + formula(8, 9)
    with pytest.raises(FormatError) as e:
        unpack(data)
    assert e.value.offset == 0
    assert unpack(formula(5, 6) + formula(8, 0)) == [5, 6, 8]
