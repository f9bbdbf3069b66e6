"""The growing vocabulary: layout, seed files, encode/decode, learning, backward compatibility, parity."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from growing_helpers import FIXTURE, SOURCE_A, SOURCE_B, corpus_texts
from tokenforge import GrowingBPETokenizer, NeuroTokenizer, Tokenizer
from tokenforge.errors import (
    CorpusError,
    FormatError,
    SpecialTokenError,
    TokenforgeError,
    VersionError,
    VocabSizeError,
)
from tokenforge.formats.growing_json import sniff_growing_json
from tokenforge.growing import get_neuro_tokenizer
from tokenforge.reference import growing as ref

SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
HELLO_IDS = [285, 270, 121, 54, 42, 129, 268, 290, 43]


def merges_dict(tok) -> dict:
    return dict(tok.merges)


# ---- layout ----------------------------------------------------------------------
def test_fresh_layout():
    t = GrowingBPETokenizer()
    assert NeuroTokenizer is GrowingBPETokenizer
    assert (t.PAD_ID, t.BOS_ID, t.EOS_ID, t.UNK_ID) == (0, 1, 2, 3)
    assert (t.pad_token_id, t.bos_token_id, t.eos_token_id, t.unk_token_id) == (0, 1, 2, 3)
    assert t.current_vocab_size == t.next_merge_id == len(t) == 266
    assert t.vocab_size == 10_000_000
    assert dict(t.merges) == {} and t.sources_contributed == {}
    assert t.special_tokens == {"<|pad|>": 0, "<|bos|>": 1, "<|eos|>": 2, "<|unk|>": 3}
    assert t.get_bos_token_id() == 1
    assert t.token_bytes().tolist() == [0] * 10 + [1] * 256
    assert isinstance(get_neuro_tokenizer(), GrowingBPETokenizer)


@pytest.mark.parametrize("path", [None, FIXTURE])
def test_every_byte_alone_is_b_plus_10(path):
    t = GrowingBPETokenizer() if path is None else GrowingBPETokenizer.load(path)
    for b in range(256):
        assert t._model.encode_piece(bytes([b])) == [b + 10]
        assert t.decode_bytes([b + 10]) == bytes([b])
        assert t.id_to_bytes(b + 10) == bytes([b])
    for b in range(128):
        assert t.encode_ordinary(chr(b)) == [b + 10]
    # a character of several bytes, with no merges, is its bytes
    assert GrowingBPETokenizer().encode_ordinary("é") == [0xC3 + 10, 0xA9 + 10]


# ---- the seed's file ------------------------------------------------------------------
def test_hand_written_seed_file_loads():
    raw = json.loads(FIXTURE.read_text())
    assert "merge_to_tokens" not in raw and "format" not in raw
    t = GrowingBPETokenizer.load(FIXTURE)
    assert t.current_vocab_size == 291 and t.next_merge_id == 291
    assert t.sources_contributed == {"hand-written": 25}
    assert t.merges[(118, 118)] == 270 and t.merge_to_tokens[285] == (82, 111)
    assert t.path == FIXTURE
    ids = t.encode_for_model("Hello, world!")  # the seed's encode: BOS ... EOS
    assert ids == [1, *HELLO_IDS, 2]
    assert t.encode("Hello, world!") == HELLO_IDS  # the contract's (and the seed's documented example)
    assert t.encode_for_model("Hello, world!", add_special_tokens=False) == HELLO_IDS
    assert t.decode(ids) == "Hello, world!"
    assert t.id_to_bytes(267) == b"012"
    # tokenforge.load recognises it
    t2 = tokenforge.load(FIXTURE)
    assert isinstance(t2, GrowingBPETokenizer) and t2.merge_list == t.merge_list


def test_save_writes_both_tables_and_reloads(tmp_path):
    t = GrowingBPETokenizer.load(FIXTURE)
    out = tmp_path / "tok.json"
    t.save(out)
    doc = json.loads(out.read_text())
    assert doc["format"] == "tokenforge-growing" and doc["version"] == 2 and doc["checksum"].startswith("sha256:")
    assert doc["merges"]["118_118"] == 270 and doc["merge_to_tokens"]["270"] == [118, 118]
    assert doc["next_merge_id"] == 291 and doc["vocab_size"] == 10_000_000
    assert doc["sources_contributed"] == {"hand-written": 25}
    assert doc["normalization"] == "NFC" and doc["pattern"] == tokenforge._core.CL100K_PATTERN
    back = tokenforge.load(out)
    assert isinstance(back, GrowingBPETokenizer)
    assert back.merge_list == t.merge_list and back.sources_contributed == t.sources_contributed
    # the seed's own loader logic only needs these keys: they are all there
    for key in ("vocab_size", "next_merge_id", "total_tokens_processed", "sources_contributed", "merges"):
        assert key in doc
    # a directory gets tokenizer.json; save() without a path rewrites the same file
    t.save(tmp_path)
    assert (tmp_path / "tokenizer.json").read_bytes() == out.read_bytes()
    t.save()
    assert t.path == tmp_path / "tokenizer.json"
    assert isinstance(tokenforge.load(tmp_path), GrowingBPETokenizer)  # a directory holding tokenizer.json


def test_seed_file_with_merge_to_tokens_only(tmp_path):
    p = tmp_path / "m2t.json"
    p.write_text(json.dumps({"next_merge_id": 268, "merge_to_tokens": {"266": [10, 11], "267": [266, 12]}}))
    t = GrowingBPETokenizer.load(p)
    assert t.merge_list == [(10, 11, 266), (266, 12, 267)]


def test_save_is_atomic(tmp_path, monkeypatch):
    t = GrowingBPETokenizer.load(FIXTURE)
    p = tmp_path / "tok.json"
    t.save(p)
    before = p.read_bytes()
    t.learn_merges(iter(SOURCE_A), 20, source="A")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        t.save(p)
    assert p.read_bytes() == before
    assert [x.name for x in tmp_path.iterdir()] == ["tok.json"]


def test_sniffers_tell_the_files_apart(tmp_path):
    from tokenforge import BPETokenizer
    from tokenforge.formats.hf_json import sniff_hf_json
    from tokenforge.formats.tfjson import sniff_tfjson

    seed = FIXTURE.read_bytes()
    assert sniff_growing_json(FIXTURE, seed) and not sniff_hf_json(FIXTURE, seed) and not sniff_tfjson(FIXTURE, seed)
    ours = tmp_path / "ours.json"
    GrowingBPETokenizer.load(FIXTURE).save(ours)
    assert sniff_growing_json(ours, ours.read_bytes()) and not sniff_hf_json(ours, ours.read_bytes())
    bpe = BPETokenizer.train_from_iterator(SOURCE_A, 300, special_tokens=None, progress=False)
    bpe.save(tmp_path / "bpe.json")
    head = (tmp_path / "bpe.json").read_bytes()[:4096]
    assert not sniff_growing_json(tmp_path / "bpe.json", head)
    assert isinstance(tokenforge.load(tmp_path / "bpe.json"), BPETokenizer)
    bpe.save_hf(tmp_path / "tokenizer.json")
    head = (tmp_path / "tokenizer.json").read_bytes()[:4096]
    assert not sniff_growing_json(tmp_path / "tokenizer.json", head)
    assert isinstance(tokenforge.load(tmp_path / "tokenizer.json"), BPETokenizer)
    assert not sniff_growing_json(tmp_path, b"")
    assert not sniff_growing_json(tmp_path / "x", b"[1, 2]")


# ---- validation: errors name the key --------------------------------------------------------
def _write(tmp_path, merges, **extra) -> str:
    doc = {"vocab_size": 10_000_000, **extra}
    if merges is not None:
        doc["merges"] = merges
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc, indent=2))
    return p


BAD_MERGES = [
    ({"10_11": 266, "300_10": 267}, "merges.300_10", "unknown id"),
    ({"10_267": 266, "10_11": 267}, "merges.10_267", "later merge"),
    ({"10_11": 266, "12_13": 266}, "merges.12_13", "also given to"),
    ({"10_11": 266, "12_13": 268}, "merges.12_13", "gap"),
    ({"10_11": 265}, "merges.10_11", "below 266"),
    ({"10_11": 266, "0_10": 267}, "merges.0_10", "special"),
    ({"10_11": 266, "10_7": 267}, "merges.10_7", "reserved"),
    ({"ab_cd": 266}, "merges.ab_cd", "left_right"),
    ({"10_11": "266"}, "merges.10_11", "integer"),
    ({"10_11": True}, "merges.10_11", "integer"),
    ({"010_11": 266}, "merges.010_11", "left_right"),
    ([["10", "11"]], "merges", "expected an object"),
]


@pytest.mark.parametrize("merges,key,what", BAD_MERGES)
def test_bad_merges_name_the_key(tmp_path, merges, key, what):
    p = _write(tmp_path, merges)
    with pytest.raises(FormatError) as e:
        GrowingBPETokenizer.load(p)
    msg = str(e.value)
    assert key in msg and what in msg and str(p) in msg
    assert e.value.line is not None


def test_duplicate_json_key_is_an_error(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text('{"merges": {"10_11": 266, "12_13": 267, "10_11": 268}}')
    with pytest.raises(FormatError, match=r"merges\.10_11.*more than once"):
        GrowingBPETokenizer.load(p)


@pytest.mark.parametrize(
    "extra,key",
    [
        ({"next_merge_id": 300}, "next_merge_id"),
        ({"vocab_size": 267}, "vocab_size"),
        ({"vocab_size": -1}, "vocab_size"),
        ({"sources_contributed": {"a": -3}}, "sources_contributed.a"),
        ({"sources_contributed": [1]}, "sources_contributed"),
        ({"total_tokens_processed": 1.5}, "total_tokens_processed"),
        ({"merge_to_tokens": {"266": [10, 12], "267": [266, 12]}}, "merge_to_tokens.266"),
        ({"merge_to_tokens": {"266": [10, 11]}}, "merge_to_tokens"),
        ({"normalization": "NFKC"}, "normalization"),
        ({"format": "tokenforge-bpe", "version": 1}, "format"),
        ({"format": "tokenforge-growing", "version": 1, "extra": 1}, "extra"),
    ],
)
def test_bad_fields_name_the_key(tmp_path, extra, key):
    vocab = extra.pop("vocab_size", 10_000_000)
    p = _write(tmp_path, {"10_11": 266, "266_12": 267}, **extra)
    doc = json.loads(p.read_text())
    doc["vocab_size"] = vocab
    p.write_text(json.dumps(doc, indent=2))
    with pytest.raises(FormatError) as e:
        GrowingBPETokenizer.load(p)
    assert key in str(e.value)


def test_newer_version_and_broken_json(tmp_path):
    p = _write(tmp_path, {}, format="tokenforge-growing", version=3)
    with pytest.raises(VersionError, match="version 3"):
        GrowingBPETokenizer.load(p)
    text = FIXTURE.read_text()
    p.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match="truncated or corrupt") as e:
        GrowingBPETokenizer.load(p)
    assert e.value.line is not None
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(FormatError, match="UTF-8"):
        GrowingBPETokenizer.load(p)
    with pytest.raises(FileNotFoundError):
        GrowingBPETokenizer.load(tmp_path / "missing.json")


# ---- encode / decode -------------------------------------------------------------------------
def test_encode_for_model_is_the_seeds_encode():
    t = GrowingBPETokenizer.load(FIXTURE)
    s = "Hello, world!"
    assert t.encode_for_model(s) == [1, *HELLO_IDS, 2]
    assert t.encode_for_model(s, max_length=5, truncation=True) == [1, *HELLO_IDS[:4]]
    assert t.encode_for_model(s, max_length=15, padding=True) == [1, *HELLO_IDS, 2, 0, 0, 0, 0]
    assert t.encode_for_model(s, max_length=5) == [1, *HELLO_IDS, 2]  # neither flag: max_length alone does nothing
    assert t.encode_for_model([s, "0123"], add_special_tokens=False) == [HELLO_IDS, [267, 61]]
    assert t.encode_for_model([s, "0123"]) == [[1, *HELLO_IDS, 2], [1, 267, 61, 2]]
    batch = t.batch_encode([s, "x"], max_length=4)
    assert batch["input_ids"] == [[1, *HELLO_IDS[:3]], [1, 130, 2, 0]]
    assert batch["attention_mask"] == [[1, 1, 1, 1], [1, 1, 1, 0]]
    # special-token text is plain text unless allowed
    assert t.encode_for_model("<|eos|>", add_special_tokens=False) == t.encode_ordinary("<|eos|>")
    assert t.encode_for_model("a<|eos|>", add_special_tokens=False, allowed_special="all") == [107, 2]
    with pytest.raises(SpecialTokenError, match="two ways|allowed_special"):
        t.encode_for_model("a<|eos|>", disallowed_special="all")
    with pytest.raises(TypeError):
        t.encode_for_model(b"bytes")
    with pytest.raises(TokenforgeError):
        t.encode_for_model("x", max_length=-1)


def test_encode_is_the_contracts():
    """``encode`` has Tokenizer.encode's signature and answer, as in every family:
    no BOS/EOS unless asked with nanochat's prepend/append."""
    t = GrowingBPETokenizer.load(FIXTURE)
    s = "Hello, world!"
    assert inspect.signature(GrowingBPETokenizer.encode) == inspect.signature(Tokenizer.encode)
    assert t.encode(s) == HELLO_IDS == t.encode_ordinary(s)
    assert t.encode([s, "0123"]) == [HELLO_IDS, [267, 61]]
    assert t.encode(s, prepend="<|bos|>", append=2) == [1, *HELLO_IDS, 2] == t.encode_for_model(s)
    assert t.encode("a<|eos|>", allowed_special="all") == [107, 2]
    assert t.encode("a<|eos|>") == t.encode_ordinary("a<|eos|>")
    with pytest.raises(SpecialTokenError, match="allowed_special"):
        t.encode("a<|eos|>", disallowed_special="all")
    with pytest.raises(TypeError):
        t.encode(b"bytes")
    assert t.encode("cafe\u0301") == t.encode("caf\u00e9")  # NFC first, in encode too
    assert t.encode_to_numpy(s).tolist() == HELLO_IDS
    assert [a.tolist() for a in t.encode_batch([s, ""], as_numpy=True)] == [HELLO_IDS, []]


def test_nfc_normalisation():
    t = GrowingBPETokenizer()
    decomposed = "cafe\u0301"
    assert t.encode_ordinary(decomposed) == t.encode_ordinary("caf\u00e9")
    assert t.decode(t.encode(decomposed)) == "caf\u00e9"
    raw = GrowingBPETokenizer(normalization=None)
    assert raw.decode(raw.encode(decomposed)) == decomposed


def test_decode_rules():
    t = GrowingBPETokenizer.load(FIXTURE)
    n = t.current_vocab_size
    assert t.decode([0, 1, 2, 3, 285, 2, 0]) == "He"
    assert t.decode([4, 9, 285]) == "<unk><unk>He"  # reserved ids
    for bad, at in (([285, n], 1), ([n + 5], 0), ([285, 285, 10_000_000], 2), ([285, -1], 1)):
        with pytest.raises(TokenforgeError, match=rf"token id {bad[at]} \(at position {at}\) is not in the vocabulary"):
            t.decode(bad)  # one rule for invalid ids in every family (issue 32 item 10)
    assert t.decode([1, 285, 2], skip_special_tokens=False) == "<|bos|>He<|eos|>"
    assert t.decode_bytes([1, 285, 0]) == b"<|bos|>He<|pad|>"
    assert t.decode(np.array([285, 270], dtype=np.uint32)) == "Hell"
    assert t.decode(np.array([285, 270], dtype=np.int64)) == "Hell"
    assert t.decode([]) == "" and t.decode(np.array([], dtype=np.uint16)) == ""
    assert t.decode([10 + 0xC3]) == "\ufffd"  # half a character
    assert t.decode_batch([[285], [270]]) == ["He", "ll"]
    with pytest.raises(TypeError):
        t.decode("285")
    with pytest.raises(TypeError):
        t.decode([285, 1.5])
    with pytest.raises(TokenforgeError, match="out of range"):
        t.decode([285, 2**70])
    with pytest.raises(TokenforgeError):
        t.id_to_bytes(5)
    with pytest.raises(TokenforgeError):
        t.id_to_bytes(n)
    assert t.id_to_bytes(1) == b"<|bos|>"
    assert len(t.token_bytes()) == n and t.token_bytes()[267] == 3


@SETTINGS
@given(st.text(max_size=200))
def test_round_trip_any_text(s):
    t = _trained()
    assert t.decode(t.encode(s)) == unicodedata.normalize("NFC", s)
    assert t.decode_bytes(t.encode_ordinary(s)) == unicodedata.normalize("NFC", s).encode("utf-8")


@SETTINGS
@given(st.lists(st.integers(min_value=0, max_value=2000), max_size=60))
def test_decode_any_ids_never_fails(ids):
    t = _trained()
    if any(i >= t.current_vocab_size for i in ids):
        with pytest.raises(TokenforgeError, match="is not in the vocabulary"):
            t.decode(ids)
        return
    out = t.decode(ids)
    expected = b""
    for i in ids:
        if i < 4:
            continue
        expected += t.id_to_bytes(i) if 10 <= i < t.current_vocab_size else b"<unk>"
    assert out == expected.decode("utf-8", errors="replace")


_CACHE = {}


def _trained() -> GrowingBPETokenizer:
    if "t" not in _CACHE:
        t = GrowingBPETokenizer()
        t.learn_merges(iter(SOURCE_A), 200, source="A")
        t.learn_merges(iter(SOURCE_B), 200, source="B")
        _CACHE["t"] = t
    return _CACHE["t"]


# ---- learning --------------------------------------------------------------------------------
def test_learn_appends_and_records_sources():
    t = GrowingBPETokenizer()
    n = t.learn_merges(iter(SOURCE_A), 50, source="A")
    assert n == 50 and t.current_vocab_size == 316 and t.sources_contributed == {"A": 50}
    assert [z for _, _, z in t.merge_list] == list(range(266, 316))
    assert t.total_tokens_processed == sum(len(s.encode()) for s in SOURCE_A)
    assert t.learn_merges(iter(SOURCE_A), 10, source="A") == 10
    assert t.sources_contributed == {"A": 60}
    assert t.learn_merges(iter(SOURCE_B), 5) == 5  # no source: not recorded
    assert t.sources_contributed == {"A": 60}
    assert t.has_source_contributed("A") and not t.has_source_contributed("B")
    assert t.learn_merges(iter(SOURCE_B), 0, source="B") == 0
    stats = t.get_stats()
    assert stats["num_merges"] == 65 and stats["current_vocab"] == 331 and stats["can_learn_more"]


def test_learn_stops_at_capacity_and_min_frequency():
    t = GrowingBPETokenizer(vocab_size=270)
    assert t.learn_merges(iter(SOURCE_A), 100, source="A") == 4
    assert t.current_vocab_size == 270 and t.is_full
    assert t.learn_merges(iter(SOURCE_A), 100, source="A") == 0
    assert t.sources_contributed == {"A": 4}
    with pytest.raises(VocabSizeError):
        t.vocab_size = 269
    t.vocab_size = 1000
    assert t.learn_merges(iter(SOURCE_A), 5) == 5
    # min_frequency: each pair of "abc" occurs once
    u = GrowingBPETokenizer()
    assert u.learn_merges(iter(["abc"]), 10) == 0
    assert u.learn_merges(iter(["abc"]), 10, min_frequency=1) == 2
    v = GrowingBPETokenizer()
    assert v.learn_merges(iter(["ab ab cd"]), 10) == ref.learn_reference(ref.count_words(["ab ab cd"]), 10).__len__()


def test_learn_bad_arguments():
    t = GrowingBPETokenizer()
    with pytest.raises(CorpusError, match="not an existing file or directory.*iterator of str"):
        t.learn_merges("a single string", 10)
    with pytest.raises(TypeError):
        t.learn_merges(iter(["ok", 3]), 10)
    with pytest.raises(TokenforgeError):
        t.learn_merges(iter(["x"]), -1)
    with pytest.raises(TokenforgeError):
        t.learn_merges(iter(["x"]), 1, min_frequency=0)
    with pytest.raises(TokenforgeError):
        t.learn_merges(iter(["x"]), 1, source="")
    with pytest.raises(AttributeError):
        t.merges = {}
    with pytest.raises(TypeError):
        t.merges[(1, 2)] = 3
    assert t.current_vocab_size == 266


def test_learning_is_deterministic_across_threads():
    texts = corpus_texts(7, 200)
    a, b = GrowingBPETokenizer(), GrowingBPETokenizer()
    a.learn_merges(iter(texts), 300, num_threads=1)
    b.learn_merges(iter(texts), 300, num_threads=2)
    assert a.merge_list == b.merge_list


def test_backward_compatibility_a_then_b(tmp_path):
    t = GrowingBPETokenizer()
    t.learn_merges(iter(SOURCE_A), 120, source="A")
    merges_a = t.merge_list
    text = "The fox and the dog: def encode(text) -> 12345 café 🙂"
    ids_a = t.encode(text)
    bytes_a = {i: t.id_to_bytes(i) for i in range(10, t.current_vocab_size)}
    t.save(tmp_path / "a.json")

    n = t.learn_merges(iter(SOURCE_B), 150, source="B")
    assert n > 0
    assert t.merge_list[: len(merges_a)] == merges_a
    assert all(z >= 266 + len(merges_a) for _, _, z in t.merge_list[len(merges_a) :])
    assert t.sources_contributed == {"A": 120, "B": n}
    assert t.decode(ids_a) == text
    assert all(t.id_to_bytes(i) == b for i, b in bytes_a.items())
    assert t.decode(t.encode(text)) == text
    # the old file still decodes the same way; the new vocabulary reads the old ids
    old = GrowingBPETokenizer.load(tmp_path / "a.json")
    assert old.decode(ids_a) == t.decode(ids_a) == text


# ---- parity with the pure-Python reference ------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_parity_with_reference_continued(seed):
    a = corpus_texts(seed, 30)
    b = corpus_texts(seed + 100, 30) + SOURCE_B[:4]
    t = GrowingBPETokenizer()
    t.learn_merges(iter(a), 40, min_frequency=2)
    t.learn_merges(iter(b), 60, min_frequency=1)

    m1 = ref.learn_reference(ref.count_words(a), 40, min_frequency=2)
    known = {(x, y): z for x, y, z in m1}
    m2 = ref.learn_reference(ref.count_words(b), 60, known, 266 + len(m1), min_frequency=1)
    assert t.merge_list == m1 + m2
    # the seed's incremental algorithm gives the same merges
    s1 = ref.learn_seed_algorithm(ref.count_words(a), 40, min_frequency=2)
    s2 = ref.learn_seed_algorithm(ref.count_words(b), 60, {(x, y): z for x, y, z in s1}, 266 + len(s1), min_frequency=1)
    assert s1 + s2 == m1 + m2
    allm = {(x, y): z for x, y, z in m1 + m2}
    for s in a[:5] + b[:5]:
        assert t.encode_ordinary(s) == ref.encode_reference(allm, s)
        assert ref.decode_reference(allm, t.encode_ordinary(s)) == unicodedata.normalize("NFC", s).encode()


def test_parity_on_real_text():
    t = GrowingBPETokenizer()
    t.learn_merges(iter(SOURCE_A), 80, source="A")
    t.learn_merges(iter(SOURCE_B), 80, source="B")
    m1 = ref.learn_seed_algorithm(ref.count_words(SOURCE_A), 80)
    m2 = ref.learn_seed_algorithm(ref.count_words(SOURCE_B), 80, {(x, y): z for x, y, z in m1}, 266 + len(m1))
    assert t.merge_list == m1 + m2


@settings(max_examples=40, deadline=None, database=None)
@given(
    st.lists(st.text(alphabet="ab c\n1é", max_size=25), min_size=1, max_size=6),
    st.lists(st.text(alphabet="abc d2é", max_size=25), min_size=1, max_size=6),
    st.integers(0, 15),
    st.integers(0, 15),
)
def test_parity_property(a, b, n1, n2):
    t = GrowingBPETokenizer()
    t.learn_merges(iter(a), n1, min_frequency=1)
    t.learn_merges(iter(b), n2, min_frequency=1)
    m1 = ref.learn_reference(ref.count_words(a), n1, min_frequency=1)
    m2 = ref.learn_reference(ref.count_words(b), n2, {(x, y): z for x, y, z in m1}, 266 + len(m1), min_frequency=1)
    assert t.merge_list == m1 + m2


# ---- import hygiene ---------------------------------------------------------------------------------
def test_import_does_not_pull_torch(tmp_path):
    code = (
        "import sys, tokenforge, tokenforge.torch\n"
        "from tokenforge import GrowingBPETokenizer\n"
        f"tokenforge.load({str(FIXTURE)!r})\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
