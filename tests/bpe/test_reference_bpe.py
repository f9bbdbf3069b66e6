"""The slow BPE reference: hand-checked vectors, then parity with rustbpe and tiktoken."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenforge.errors import TokenforgeError, VocabSizeError
from tokenforge.reference.bpe import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    count_words,
    encode_reference,
    merges_to_ranks,
    split,
    train_reference,
    train_reference_texts,
)

rustbpe = pytest.importorskip("rustbpe")
tiktoken = pytest.importorskip("tiktoken")

SAMPLE = (
    "Hello, world! Don't panic: it's 2024 and we've 1234567 reasons.\n\n"
    "    def f(x):\n        return x**2  # squares\n"
    "Ünïcödé text — with dashes, 日本語のテキスト, emoji 🙂🙂 and tabs\tand\r\nCRLF lines.\n"
) * 3

# Small alphabets make many repeated pairs and many ties, which is where trainers disagree.
tie_heavy_text = st.text(alphabet="ab c\n1é🙂'", max_size=60)

# Code points unassigned in this Python's Unicode tables (category Cn) are left
# out: the regex module and the Rust regex crate behind tiktoken ship different
# Unicode versions, so they disagree on whether a newly assigned character is a
# letter (e.g. U+3D000, a letter to regex 2026.x but not to tiktoken 0.14).
assigned_text = st.text(alphabet=st.characters(exclude_categories=("Cs", "Cn")), max_size=60)


# ---- split and count ----------------------------------------------------------
def test_split_gpt4_examples():
    assert split("Hello, world!", GPT4_PATTERN) == ["Hello", ",", " world", "!"]
    assert split("123456 7", GPT4_PATTERN) == ["12", "34", "56", " ", "7"]
    assert split("don't", GPT4_PATTERN) == ["don", "'t"]
    assert split("a  \n\nb", GPT4_PATTERN) == ["a", "  \n\n", "b"]


def test_split_gpt2_examples():
    assert split("Hello, world!", GPT2_PATTERN) == ["Hello", ",", " world", "!"]
    assert split("123456 7", GPT2_PATTERN) == ["123456", " 7"]
    assert split("we've", GPT2_PATTERN) == ["we", "'ve"]


def test_split_without_pattern():
    assert split("any text, whole", None) == ["any text, whole"]
    assert split("", None) == []


@given(st.text(max_size=80))
def test_split_pieces_cover_the_text(text):
    for pattern in (GPT4_PATTERN, GPT2_PATTERN):
        pieces = split(text, pattern)
        assert "".join(pieces) == text
        assert pieces == regex.findall(pattern, text)
        assert all(pieces)


def test_count_words():
    counts = count_words(["a a", "a b"], GPT2_PATTERN)
    assert counts == {b"a": 2, b" a": 1, b" b": 1}
    assert count_words(["xy", "xy", ""], None) == {b"xy": 2}


# ---- training: hand-computed vectors ------------------------------------------
def test_train_hand_vector():
    # (a,b) occurs 2*2 + 1 = 5 times, (b,a) 2 times: merge ab, then (ab,ab) twice.
    merges = train_reference({b"abab": 2, b"ab": 1}, 10)
    assert merges == [(97, 98, 256), (256, 256, 257)]


def test_train_merges_left_to_right_without_overlap():
    # "aaa" has two overlapping (a,a) pairs; merging leaves [aa, a], then (aa, a).
    assert train_reference({b"aaa": 1}, 5) == [(97, 97, 256), (256, 97, 257)]
    # "aaaa" becomes [aa, aa]: the middle (a,a) is not merged a second time.
    assert train_reference({b"aaaa": 1}, 5) == [(97, 97, 256), (256, 256, 257)]


def test_tie_breaks_pick_opposite_ends():
    counts = {b"ab": 1, b"cd": 1}
    assert train_reference(counts, 1, tie_break="pair_ids") == [(97, 98, 256)]
    assert train_reference(counts, 1, tie_break="lexicographic") == [(99, 100, 256)]


def test_lexicographic_compares_bytes_not_ids():
    # Step 1 merges "aa" (7 times) into id 256. Step 2 ties (aa, x) and (b, c) at 2:
    # by ids (256, 120) is the larger pair, but by bytes (b"b", b"c") > (b"aa", b"x").
    counts = {b"aa": 5, b"aax": 2, b"bc": 2}
    merges = train_reference(counts, 2, tie_break="lexicographic")
    assert merges == [(97, 97, 256), (98, 99, 257)]


def test_custom_byte_ids_and_first_merge_id():
    byte_ids = [b + 10 for b in range(256)]
    merges = train_reference({b"abab": 2, b"ab": 1}, 10, byte_ids=byte_ids, first_merge_id=266)
    assert merges == [(107, 108, 266), (266, 266, 267)]
    ranks = merges_to_ranks(merges, byte_ids)
    assert ranks[b"ab"] == 266 and ranks[b"abab"] == 267 and ranks[b"a"] == 107


def test_min_frequency_stops_training():
    counts = {b"abab": 2, b"ab": 1}
    assert train_reference(counts, 10, min_frequency=3) == [(97, 98, 256)]
    assert train_reference(counts, 10, min_frequency=6) == []


def test_training_stops_when_no_pairs_remain():
    assert train_reference({b"a": 9, b"": 3}, 10) == []
    assert train_reference({}, 10) == []


def test_train_rejects_bad_arguments():
    with pytest.raises(TokenforgeError, match="tie_break"):
        train_reference({b"ab": 1}, 1, tie_break="random")
    with pytest.raises(TokenforgeError, match="256"):
        train_reference({b"ab": 1}, 1, byte_ids=[0, 1])
    with pytest.raises(VocabSizeError):
        train_reference_texts(["ab"], vocab_size=260)  # below 256 + 9 specials


def test_train_reference_texts_counts_specials():
    texts = ["hello hello hello world world"]
    merges = train_reference_texts(texts, vocab_size=256 + 9 + 3)
    assert len(merges) == 3
    assert merges == train_reference_texts(texts, vocab_size=256 + 3, num_special=0)
    # Pieces "hello" x1, " hello" x2, " world" x2: (h,e), (e,l), (l,l), (l,o) all occur
    # 3 times and the smallest ids win: "el", then (h, el), then (l, o).
    assert merges == [(101, 108, 256), (104, 256, 257), (108, 111, 258)]
    ranks = merges_to_ranks(merges)
    assert ranks[b"el"] == 256 and ranks[b"hel"] == 257 and ranks[b"lo"] == 258


# ---- encoding: hand-computed vectors ------------------------------------------
def _byte_ranks() -> dict[bytes, int]:
    return {bytes([b]): b for b in range(256)}


def test_encode_merges_lowest_rank_first():
    ranks = _byte_ranks() | {b"bc": 256, b"ab": 257}
    # (b,c) has the lower rank, so "abc" -> [a, bc]; "abc" itself is not a token.
    assert encode_reference(ranks, "abc", None) == [97, 256]
    assert encode_reference(ranks, "abab", None) == [257, 257]


def test_encode_leftmost_on_tie():
    ranks = _byte_ranks() | {b"aa": 256}
    assert encode_reference(ranks, "aaa", None) == [256, 97]


def test_encode_whole_piece_when_it_is_a_token():
    # "abc" is in the table without any merge path leading to it: emitted whole.
    ranks = _byte_ranks() | {b"abc": 256}
    assert encode_reference(ranks, "abc", None) == [256]
    assert encode_reference(ranks, "abcd", None) == [97, 98, 99, 100]


def test_encode_missing_byte_is_an_error():
    ranks = {b"a": 0}
    with pytest.raises(TokenforgeError, match="no id"):
        encode_reference(ranks, "ab", None)


# ---- parity with rustbpe --------------------------------------------------------
def _rustbpe_ranks(texts, vocab_size, pattern) -> dict[bytes, int]:
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(texts), vocab_size, pattern=pattern)
    return {bytes(k): v for k, v in tok.get_mergeable_ranks()}, tok


@pytest.mark.parametrize("pattern", [GPT4_PATTERN, GPT2_PATTERN])
@pytest.mark.parametrize("num_merges", [1, 40, 150])
def test_training_matches_rustbpe(pattern, num_merges):
    texts = [SAMPLE, "hello hello hello world world", "aaaaaaa bbbb aaaa"]
    ours = merges_to_ranks(train_reference_texts(texts, 256 + num_merges, pattern, num_special=0))
    theirs, _ = _rustbpe_ranks(texts, 256 + num_merges, pattern)
    assert ours == theirs


def test_training_matches_rustbpe_on_python_source():
    import argparse
    import inspect
    import textwrap

    texts = [inspect.getsource(textwrap), inspect.getsource(argparse)[:20000]]
    ours = merges_to_ranks(train_reference_texts(texts, 256 + 120, GPT4_PATTERN, num_special=0))
    theirs, tok = _rustbpe_ranks(texts, 256 + 120, GPT4_PATTERN)
    assert ours == theirs
    assert tok.encode(SAMPLE) == encode_reference(ours, SAMPLE, GPT4_PATTERN)


def test_training_stops_like_rustbpe_when_pairs_run_out():
    texts = ["ab ab abc"]
    ours = merges_to_ranks(train_reference_texts(texts, 256 + 50, GPT4_PATTERN, num_special=0))
    theirs, _ = _rustbpe_ranks(texts, 256 + 50, GPT4_PATTERN)
    assert ours == theirs and len(ours) < 256 + 50


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(tie_heavy_text, max_size=6), num_merges=st.integers(0, 25))
def test_training_matches_rustbpe_property(texts, num_merges):
    ours = merges_to_ranks(train_reference_texts(texts, 256 + num_merges, GPT4_PATTERN, num_special=0))
    theirs, _ = _rustbpe_ranks(texts, 256 + num_merges, GPT4_PATTERN)
    assert ours == theirs


# ---- parity with tiktoken -------------------------------------------------------
def _tiktoken(ranks, pattern):
    return tiktoken.Encoding(name="reference-test", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


@pytest.fixture(scope="module")
def trained_ranks():
    return merges_to_ranks(train_reference_texts([SAMPLE], 256 + 200, GPT4_PATTERN, num_special=0))


def test_encode_matches_tiktoken_on_sample(trained_ranks):
    enc = _tiktoken(trained_ranks, GPT4_PATTERN)
    for text in (SAMPLE, "Hello, world!", "", "   ", "unseen wörds 12345"):
        assert encode_reference(trained_ranks, text, GPT4_PATTERN) == enc.encode_ordinary(text)


@settings(max_examples=150, deadline=None)
@given(text=assigned_text)
def test_encode_matches_tiktoken_property(trained_ranks, text):
    enc = _tiktoken(trained_ranks, GPT4_PATTERN)
    ids = encode_reference(trained_ranks, text, GPT4_PATTERN)
    assert ids == enc.encode_ordinary(text)
    assert enc.decode_bytes(ids) == text.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(text=assigned_text)
def test_split_matches_tiktoken(text):
    # Make every piece of our split a whole token: tiktoken then emits exactly
    # one id per piece of *its* split, so equal ids mean equal splits.
    for pattern in (GPT4_PATTERN, GPT2_PATTERN):
        ranks = _byte_ranks()
        for piece in split(text, pattern):
            ranks.setdefault(piece.encode("utf-8"), len(ranks))
        enc = _tiktoken(ranks, pattern)
        pieces = enc.decode_tokens_bytes(enc.encode_ordinary(text))
        assert pieces == [p.encode("utf-8") for p in split(text, pattern)]
