"""The Rust core's seams as Python sees them: every encoder family class offers
the same methods (one binding, ``src/py/encoder.rs``), and every error the
core raises is a class of ``tokenforge.errors`` (one mapping, ``src/py/mod.rs``).

Not handled: the families' own behaviour (their test files cover it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tokenforge import _core
from tokenforge.errors import FormatError, PatternError, SpecialTokenError, TokenforgeError, VocabSizeError

SHARED = [
    "vocab_size",
    "pattern",
    "encode_ordinary",
    "encode_ordinary_numpy",
    "encode",
    "encode_batch",
    "encode_batch_numpy",
    "encode_jsonl_block",
    "decode_bytes",
    "id_bytes",
    "token_lengths",
    "find_special",
]

TEXTS = ["hello world", "", "a<e>b<e>", "héllo\nwörld  ", "abcabc"]


def models():
    bpe = _core.BpeModel(list(range(256)), [(104, 101, 256), (108, 108, 257)], [("<e>", 258)], _core.GPT4_PATTERN)
    lz = _core.Lz78Model(["he", "ll", "o w", "abc"], [("<e>", 4 + 257)], _core.GPT4_PATTERN)
    return [("bpe", bpe, 258), ("lz78", lz, 4 + 257)]


@pytest.mark.parametrize("name", SHARED)
def test_both_encoder_families_offer_the_shared_methods(name):
    for _, m, _ in models():
        assert hasattr(m, name)


@pytest.mark.parametrize("family", ["bpe", "lz78"])
def test_shared_methods_agree_with_each_other(family):
    _, m, special = next(x for x in models() if x[0] == family)
    one = [m.encode_ordinary(t) for t in TEXTS]
    assert m.encode_batch(TEXTS, 1) == one == m.encode_batch(TEXTS, 2)
    flat, offsets = m.encode_batch_numpy(TEXTS, 2)
    assert flat.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(TEXTS) + 1
    assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(TEXTS))] == one
    assert [m.decode_bytes(ids) for ids in one] == [t.encode() for t in TEXTS]
    assert m.encode_ordinary_numpy(TEXTS[0]).tolist() == one[0]
    with_specials = [m.encode(t) for t in TEXTS]
    assert m.encode_batch(TEXTS, 2, None, True) == with_specials
    assert m.encode_batch_numpy(TEXTS, 1, None, True)[0].tolist() == sum(with_specials, [])
    assert with_specials[2].count(special) == 2
    assert special not in m.encode_batch(TEXTS, 1, [], True)[2]
    assert m.id_bytes(special) == b"<e>" and m.find_special("xx<e>") == ("<e>", 2)
    lengths = m.token_lengths()
    assert len(lengths) == m.vocab_size and lengths[special] == 0
    assert m.pattern == _core.GPT4_PATTERN


def _trained_counter():
    wc = _core.WordCounter(None)
    _core.BpeTrainer(wc, list(range(256)), [], 256, 3)
    return wc


def _finished_lz78():
    t = _core.Lz78Trainer("standard", 10, None)
    t.finish()
    return t


BPE = _core.BpeModel(list(range(256)), [], [("<a>", 256)], None)
MX = _core.MixedgramModel([b"ab"])

CASES = [
    (lambda: _core.BpeModel(list(range(255)), [], [], None), TokenforgeError, "byte_ids must have 256 entries"),
    (lambda: _core.BpeModel(list(range(256)), [], [], None, "x"), TokenforgeError, "unknown merge rule"),
    (lambda: _core.BpeModel(list(range(256)), [], [("", 256)], None), SpecialTokenError, "empty string"),
    (lambda: _core.BpeModel(list(range(256)), [], [("<a>", 5)], None), SpecialTokenError, "already uses"),
    (lambda: _core.BpeModel(list(range(256)), [], [], "("), PatternError, "does not compile"),
    (lambda: BPE.encode_batch(["a"], 0), TokenforgeError, "num_threads must be at least 1"),
    (lambda: BPE.decode_bytes([-1]), TokenforgeError, "out of range"),
    (lambda: BPE.decode_bytes([999]), TokenforgeError, "not in the vocabulary"),
    (
        lambda: BPE.encode_jsonl_block(b"a\n", b"", 0, "text", True, 0, None, False),
        TokenforgeError,
        "head without newlines",
    ),
    (lambda: _core.bpe_rank_splits([(b"a", 0)], "nope"), TokenforgeError, "unknown rule"),
    (lambda: _core.bpe_rank_splits([(b"a", 0)], "all_but_own", [3]), TokenforgeError, "out of range"),
    (lambda: _trained_counter().add_word(b"a", 1), TokenforgeError, "already used"),
    (
        lambda: _core.BpeTrainer(_core.WordCounter(None), list(range(256)), [], 256, 3, "zzz"),
        TokenforgeError,
        "tie_break",
    ),
    (
        lambda: _core.Lz78Trainer("standard", 10, None, {"bogus": 1}),
        TokenforgeError,
        "strategy standard: unknown LZ78 parameter",
    ),
    (lambda: _core.Lz78Trainer("standard", 10, None, {"rounds": "x"}), TokenforgeError, "expected a positive int"),
    (lambda: _core.Lz78Trainer("standard", 0, None), VocabSizeError, "at least one entry"),
    (lambda: _core.Lz78Model(["a"], [("<a>", 3)], None), SpecialTokenError, "a code or byte uses"),
    (lambda: _finished_lz78().feed(["a"]), TokenforgeError, "has finished"),
    (lambda: MX.encode_range(b"abc", 5, 6), TokenforgeError, "past the end"),
    (lambda: MX.encode_range(b"a\0c", 0, 3), TokenforgeError, "NUL-free"),
    (lambda: _core.MixedgramModel([b"ab"], [(300, b"")]), SpecialTokenError, "empty text"),
]


@pytest.mark.parametrize("call,cls,match", CASES, ids=[c[2] for c in CASES])
def test_core_errors_are_typed(call, cls, match):
    with pytest.raises(cls, match=match) as e:
        call()
    assert isinstance(e.value, ValueError)  # every class of the hierarchy still is one


def test_format_errors_carry_the_byte_offset():
    with pytest.raises(FormatError, match="the file ends after 2 bytes") as e:
        _core.mixedgram_decompress(b"xx")
    assert e.value.offset == 2
    with pytest.raises(FormatError, match="not a multiple of 3") as e:
        _core.mixedgram_unpack(b"\x00\x00")
    assert e.value.offset == 0
