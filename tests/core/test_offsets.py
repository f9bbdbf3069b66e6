"""encode_with_offsets: the character span each id covers, in every family.

For byte-level BPE the spans equal Hugging Face tokenizers' ``offsets`` on the
exported ``tokenizer.json``; in every family they tile the text in order.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenforge
from tiny_corpus import TINY_DOCS
from tokenforge import BPETokenizer, GrowingBPETokenizer, LZ78Tokenizer, Mixedgram
from tokenforge.offsets import char_starts, normalized_spans


def _families():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tokenforge.TokenforgeWarning)
        bpe = BPETokenizer.train_from_iterator(TINY_DOCS, 400)
        grow = GrowingBPETokenizer(100_000)
        grow.learn_merges(iter(TINY_DOCS), num_merges=200, min_frequency=1)
        return {
            "bpe": bpe,
            "lz78": LZ78Tokenizer.train_from_iterator(TINY_DOCS, 400, strategy="standard"),
            "mixedgram": Mixedgram.train_from_iterator(TINY_DOCS, errors="replace"),
            "growing": grow,
        }


FAMILIES = _families()
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


def _check_tiling(text: str, ids, spans) -> None:
    assert len(ids) == len(spans)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
        # the next token starts where this one ends, or inside its last character (or NFC cluster)
        assert s0 <= s1 <= e0 <= e1
    assert all(s < e for s, e in spans)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=60, deadline=None)
@given(text=TEXT)
def test_spans_tile_the_text_in_every_family(name, text):
    tok = FAMILIES[name]
    if name == "mixedgram":  # latin1; its NULs are dropped (test_mixedgram_skips_nul)
        text = text.encode("latin-1", "replace").decode("latin-1").replace("\x00", "")
    ids, spans = tok.encode_with_offsets(text)
    assert ids == tokenforge.Tokenizer.encode(tok, text)
    _check_tiling(text, ids, spans)


@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_bpe_offsets_equal_hugging_faces_on_the_exported_file(text):
    tok = FAMILIES["bpe"]
    hf = tok.to_hf()
    enc = hf.encode(text, add_special_tokens=False)
    ids, spans = tok.encode_with_offsets(text, allowed_special="all")
    assert enc.ids == ids
    assert [tuple(o) for o in enc.offsets] == spans


def test_a_character_split_across_tokens_gives_each_token_its_span():
    tok = FAMILIES["bpe"]
    text = "a\U0001f9ec\u4e2d b"
    ids, spans = tok.encode_with_offsets(text)
    pieces = [tok.id_to_bytes(i) for i in ids]
    assert b"".join(pieces) == text.encode()
    for piece, (s, e) in zip(pieces, spans):
        assert piece in text[s:e].encode() or text[s:e].encode() in piece


def test_special_tokens_allowed_in_the_text_cover_their_literal():
    tok = FAMILIES["bpe"]
    text = "hi<|bos|>there"
    ids, spans = tok.encode_with_offsets(text, allowed_special="all")
    k = ids.index(tok.special_tokens["<|bos|>"])
    assert spans[k] == (2, 9)
    _check_tiling(text, ids, spans)
    plain_ids, _ = tok.encode_with_offsets(text)
    assert tok.special_tokens["<|bos|>"] not in plain_ids


def test_lone_surrogates_are_three_bytes_one_character():
    tok = FAMILIES["bpe"]
    text = "x\ud800y"
    ids, spans = tok.encode_with_offsets(text)
    _check_tiling(text, ids, spans)
    assert char_starts(text, "utf-8").tolist() == [0, 1, 4, 5]


def test_growing_maps_nfc_back_to_the_callers_characters():
    grow = FAMILIES["growing"]
    text = "Cafe\u0301 A\u030a!"
    ids, spans = grow.encode_with_offsets(text)
    _check_tiling(text, ids, spans)
    covered = {text[s:e] for s, e in spans}
    assert any("e\u0301" in c for c in covered) and any("A\u030a" in c for c in covered)
    # the seed-style encode (BOS/EOS) is not what offsets describe
    assert len(ids) == len(grow.encode_ordinary(text))


def test_normalized_spans_fall_back_to_the_whole_text_when_not_cluster_by_cluster():
    import unicodedata

    text = "\u1100\u1161x"  # Hangul jamo: NFC joins two characters of combining class 0
    nfc = unicodedata.normalize("NFC", text)
    starts, ends = normalized_spans(text, nfc, lambda t: unicodedata.normalize("NFC", t))
    assert starts.tolist() == [0] * len(nfc) and ends.tolist() == [len(text)] * len(nfc)
    assert normalized_spans("abc", "abc", str) is None


def test_mixedgram_skips_nul():
    ids, spans = FAMILIES["mixedgram"].encode_with_offsets("\x00ab\x00\x00c\x00")
    assert "".join("\x00ab\x00\x00c\x00"[s:e] for s, e in spans).replace("\x00", "") == "abc"
    assert all("\x00" not in "\x00ab\x00\x00c\x00"[s:e] for s, e in spans)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_batch_equals_one_by_one(name):
    tok = FAMILIES[name]
    texts = ["hello world", "", "naïve café, 2024!", TINY_DOCS[0][:300]]
    if name == "mixedgram":
        texts = [t.encode("latin-1", "replace").decode("latin-1") for t in texts]
    assert tok.encode_batch_with_offsets(texts, num_threads=2) == [tok.encode_with_offsets(t) for t in texts]
