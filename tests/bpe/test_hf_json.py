"""Hugging Face tokenizer.json: export parity with tiktoken, import, strictness."""

from __future__ import annotations

import json
import random
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_strategies import bpe_data, canonical, fail_writes_halfway, same_vocabulary
from tokenforge.errors import FormatError
from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.hf_json import (
    bytes_to_unicode,
    effective_split,
    hf_json_dict,
    read_hf_json,
    sniff_hf_json,
    write_hf_json,
)
from tokenforge.formats.patterns import GPT2_PATTERN, GPT4_PATTERN
from tokenforge.formats.tiktoken_io import data_from_ranks, mergeable_ranks, to_tiktoken

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("tiktoken")

SETTINGS = settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def hf_from(data: BPEData):
    return tokenizers.Tokenizer.from_str(json.dumps(hf_json_dict(data)))


def hf_ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def small_data(**kw) -> BPEData:
    fields = dict(
        byte_ids=list(range(256)),
        merges=[(97, 98, 256), (256, 99, 257), (32, 257, 258)],
        special_tokens={"<|endoftext|>": 259},
        pattern=GPT2_PATTERN,
        pattern_name="gpt2",
    )
    fields.update(kw)
    return BPEData(**fields)


# ---------------------------------------------------------------- the byte alphabet
def test_bytes_to_unicode_is_gpt2s_table():
    table = bytes_to_unicode()
    assert len(set(table)) == 256
    assert table[ord("a")] == "a" and table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a"
    assert table[0] == "\u0100" and table[0xAD] == "\u0143" and table[0xFF] == "\xff"
    assert all(ch.isprintable() and not ch.isspace() for ch in table)


# ---------------------------------------------------------------- why effective splits
def test_recorded_merges_would_disagree_with_tiktoken_effective_splits_do_not():
    """ "abc" is recorded as a + bc, but tiktoken builds it from ab + c (ab ranks first).

    A merge list holding the recorded split never merges ab + c, so Hugging Face
    would stop at [ab, c, a] where tiktoken reaches [abc, a].
    """
    data = small_data(merges=[(97, 98, 256), (98, 99, 257), (97, 257, 258)], special_tokens={})
    ranks = mergeable_ranks(data)
    assert effective_split(b"abc", ranks) == (b"ab", b"c")
    tik = to_tiktoken(data)
    assert tik.encode_ordinary("abca") == [258, 97]

    naive = hf_json_dict(data)
    naive["model"]["merges"] = ["a b", "b c", "a bc"]
    naive_tok = tokenizers.Tokenizer.from_str(json.dumps(naive))
    assert hf_ids(naive_tok, "abca") == [256, 99, 97]  # the disagreement

    ours = hf_from(data)
    assert hf_json_dict(data)["model"]["merges"] == ["a b", "b c", "ab c"]
    assert hf_ids(ours, "abca") == [258, 97]


def test_token_only_reachable_whole_gets_no_merge():
    """ "abcd" cannot be built by merging (a|bc|d is stuck); tiktoken only emits it whole."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"bc": 256, b"cd": 257, b"ab": 258})
    data = data_from_ranks(ranks, GPT2_PATTERN)
    data = BPEData(data.byte_ids, data.merges + [(258, 257, 259)], {}, GPT2_PATTERN, "gpt2")  # abcd = ab + cd
    ranks = mergeable_ranks(data)
    assert effective_split(b"abcd", ranks) is None
    assert "ab cd" not in hf_json_dict(data)["model"]["merges"]
    tik, hf = to_tiktoken(data), hf_from(data)
    for text in ("abcd", "xabcd", "abcdabcd", "aabcdd"):
        assert hf_ids(hf, text) == tik.encode_ordinary(text), text
    assert tik.encode_ordinary("abcd") == [259]


def test_effective_split_may_use_a_later_token():
    """bc (rank 258) forms before abc (rank 257) can: abc's split is a + bc."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"ab": 300, b"abc": 257, b"bc": 258})
    assert effective_split(b"abc", ranks) == (b"a", b"bc")


@SETTINGS
@given(data=bpe_data(max_merges=60), words=st.lists(st.text(alphabet="ab c\nxé", max_size=12), max_size=8))
def test_hf_export_gives_tiktoken_ids(data, words):
    """Any vocabulary (hand-made ones included), any layout, specials in the text."""
    specials = list(data.special_tokens)
    text = "".join(w + (specials[k % len(specials)] if specials and k % 3 == 2 else "") for k, w in enumerate(words))
    tik, hf = to_tiktoken(data), hf_from(data)
    expected = tik.encode(text, allowed_special="all")
    assert hf_ids(hf, text) == expected
    assert hf.decode(expected, skip_special_tokens=False) == text


# ---------------------------------------------------------------- real vocabularies
def stdlib_sources() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size > 2000)
    if len(files) < 60:
        pytest.skip("the standard library's sources are not installed")
    return files


def varied_text(seed: int, n_words: int) -> str:
    """Words from several scripts, numbers, punctuation, odd whitespace and emoji."""
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "àáâäæçèéêëìíîïñòóôöøùúûüÿßÀÉÖÜ",
        "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔ",
        "абвгдежзийклмнопрстуфхцчшщыэюяАБВГД",
        "的一是不了人我在有他这中大来上个国到说们为子和你地出道",
        "あいうえおかきくけこさしすせそアイウエオ",
        "0123456789",
        "٠١٢٣٤٥٦٧٨٩",
        ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
        "😀🎉👍🚀❤️🇫🇷",
    ]
    spaces = [" ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000", " \n "]
    out = []
    for _ in range(n_words):
        pool = rng.choice(pools)
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 9))))
        if rng.random() < 0.2:
            out.append(rng.choice(["'s", "'ll", "'VE", "n't"]))
        out.append(rng.choice(spaces))
    return "".join(out)


@pytest.fixture(scope="module")
def rustbpe_vocab():
    rustbpe = pytest.importorskip("rustbpe")
    files = stdlib_sources()
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files[:40]]
    texts.append(varied_text(0, 20000))
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(texts), 3000, pattern=GPT4_PATTERN)
    data = data_from_ranks(dict(tok.get_mergeable_ranks()), GPT4_PATTERN, {"<|bos|>": 3000, "<|eos|>": 3001})
    return tok, data, files[40:]


def test_rustbpe_vocabulary_recovers_exactly(rustbpe_vocab):
    tok, data, files = rustbpe_vocab
    assert len(data.merges) == 3000 - 256
    sample = files[0].read_text(encoding="utf-8", errors="replace")
    assert to_tiktoken(data).encode_ordinary(sample) == tok.encode(sample)


def test_hf_export_of_rustbpe_vocabulary_matches_tiktoken(rustbpe_vocab, tmp_path):
    _, data, files = rustbpe_vocab
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, data)
    hf = tokenizers.Tokenizer.from_file(str(path))
    tik = to_tiktoken(data)
    texts, total = [], 0
    for p in files:
        if total > 400_000:
            break
        texts.append(p.read_text(encoding="utf-8", errors="replace"))
        total += len(texts[-1])
    texts += [varied_text(seed, 3000) for seed in range(1, 6)]
    assert sum(map(len, texts)) > 450_000
    for text in texts:
        ids = tik.encode_ordinary(text)
        assert hf_ids(hf, text) == ids
        assert hf.decode(ids) == text
    assert read_hf_json(path) == BPEData(data.byte_ids, data.merges, data.special_tokens, GPT4_PATTERN, "gpt4", {})


def test_import_a_file_written_by_hugging_face(tmp_path):
    """A GPT-2-style byte-level BPE trained and saved by tokenizers itself."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    texts = [p.read_text(encoding="utf-8", errors="replace") for p in stdlib_sources()[:15]] + [varied_text(7, 5000)]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert sniff_hf_json(path, path.read_bytes()[:4096])

    data = read_hf_json(path)
    assert data.pattern == GPT2_PATTERN and data.pattern_name == "gpt2"
    assert data.special_tokens == {"<|endoftext|>": 0}
    assert data.vocab_size == 1200
    tik = to_tiktoken(data)
    for text in [varied_text(8, 4000), stdlib_sources()[20].read_text(encoding="utf-8", errors="replace")]:
        assert tik.encode_ordinary(text) == tok.encode(text).ids
    # and our export of what we read encodes the same way again
    write_hf_json(tmp_path / "again.json", data)
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    text = varied_text(9, 2000)
    assert hf_ids(again, text) == tok.encode(text).ids


# ---------------------------------------------------------------- round trips
@SETTINGS
@given(data=bpe_data())
def test_hf_json_round_trip(tmp_path, data):
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, data)
    got = read_hf_json(path)
    assert same_vocabulary(got, data)
    assert got.pattern_name == data.pattern_name and got.training == {}
    assert mergeable_ranks(got) == mergeable_ranks(data)
    try:
        canon = canonical(data)
    except FormatError:
        return
    if canon.merges == data.merges:  # a vocabulary trained by BPE: merges come back exactly
        assert got.merges == data.merges


def test_hf_json_without_pattern_has_no_split(tmp_path):
    data = small_data(pattern=None, pattern_name="none")
    doc = hf_json_dict(data)
    assert doc["pre_tokenizer"] == {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    path = tmp_path / "t.json"
    write_hf_json(path, data)
    assert read_hf_json(path).pattern is None
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert hf_ids(hf, "c abc\n abc") == to_tiktoken(data).encode_ordinary("c abc\n abc") == [99, 258, 10, 258]


def test_hf_json_document_shape():
    doc = hf_json_dict(small_data())
    assert doc["model"]["ignore_merges"] is True and doc["model"]["type"] == "BPE"
    assert doc["model"]["vocab"]["\u0120abc"] == 258 and doc["model"]["vocab"]["<|endoftext|>"] == 259
    assert doc["added_tokens"] == [
        {
            "id": 259,
            "content": "<|endoftext|>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    ]
    split, byte_level = doc["pre_tokenizer"]["pretokenizers"]
    assert split == {"type": "Split", "pattern": {"Regex": GPT2_PATTERN}, "behavior": "Isolated", "invert": False}
    assert byte_level["type"] == "ByteLevel" and byte_level["use_regex"] is False
    assert doc["decoder"]["type"] == "ByteLevel"


def test_hf_export_refuses_confusable_special_tokens(tmp_path):
    with pytest.raises(FormatError, match="same text as the byte-level key"):
        write_hf_json(tmp_path / "t.json", small_data(special_tokens={"ab": 259}))
    with pytest.raises(FormatError, match="for the ordinary text '  '"):
        write_hf_json(tmp_path / "t.json", small_data(special_tokens={"\u0120\u0120": 259}))
    assert not (tmp_path / "t.json").exists()


def test_failed_hf_write_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, small_data())
    before = path.read_bytes()
    fail_writes_halfway(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        write_hf_json(path, small_data(special_tokens={"<|x|>": 259}))
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.json"] and path.read_bytes() == before


# ---------------------------------------------------------------- strict import
def written(tmp_path, change=None, data=None) -> Path:
    path = tmp_path / "tokenizer.json"
    doc = hf_json_dict(data or small_data())
    if change:
        change(doc)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["model"].update(type="WordPiece"), 'model type "WordPiece" is not BPE'),
        (lambda d: d["model"].update(type="Unigram"), "only byte-level BPE"),
        (lambda d: d.update(normalizer={"type": "NFC"}), "a normalizer is not supported"),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True), "add_prefix_space"),
        (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "not a byte-level BPE"),
        (lambda d: d.update(pre_tokenizer=None), "not a byte-level BPE"),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"), '"Isolated"'),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"String": " "}), "String pattern"),
        (lambda d: d["model"].update(byte_fallback=True), "byte_fallback"),
        (lambda d: d["model"].update(continuing_subword_prefix="##"), "continuing_subword_prefix"),
        (lambda d: d["model"]["vocab"].pop("\u0120"), "byte 0x20"),
        (lambda d: d["model"]["vocab"].update({"x\u4e00": 400}), "not a byte-level token"),
        (lambda d: d["model"]["vocab"].update({"\u0120\u0120": 258}), "also the id of"),
        (lambda d: d["model"]["merges"].append("zz q"), "'zz' is not an ordinary token"),
        (lambda d: d["model"]["merges"].append("\u0120 c"), "(the merged token) is not in the vocabulary"),
        (lambda d: d["model"]["merges"].append(["a"]), "expected"),
        (lambda d: d["model"].update(merges=list(reversed(d["model"]["merges"]))), "increasing id order"),
        (lambda d: d["model"]["merges"].insert(0, "ab c"), "increasing id order"),
        (lambda d: d["added_tokens"][0].update(id=300), "has id 300 in added_tokens but 259 here"),
        (lambda d: d["added_tokens"].append({"id": 400, "content": "hi", "special": False}), "non-special added"),
        (lambda d: d["model"]["vocab"].update({"qqq": 400}), "cannot be split into two tokens of lower id"),
    ],
)
def test_hf_import_refuses_what_it_cannot_represent(tmp_path, change, message):
    path = written(tmp_path, change)
    with pytest.raises(FormatError) as e:
        read_hf_json(path)
    assert message in str(e.value)
    assert e.value.path == str(path) and e.value.line is not None


def test_hf_import_names_the_line_of_a_bad_merge(tmp_path):
    path = written(tmp_path, lambda d: d["model"]["merges"].__setitem__(1, "ab zz"))
    with pytest.raises(FormatError, match=r"model\.merges\[1\]") as e:
        read_hf_json(path)
    assert '"ab zz"' in path.read_text().split("\n")[e.value.line - 1]


def test_hf_import_syntax_error_and_truncation(tmp_path):
    path = written(tmp_path)
    raw = path.read_bytes()
    for cut in (len(raw) - 2, len(raw) // 2, 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(FormatError, match="invalid JSON") as e:
            read_hf_json(path)
        assert e.value.line == raw[:cut].count(b"\n") + 1


def test_hf_import_accepts_merge_pairs_and_later_duplicates(tmp_path):
    path = written(tmp_path, lambda d: d["model"].update(merges=[m.split(" ") for m in d["model"]["merges"]]))
    assert read_hf_json(path).merges == small_data().merges
    # a later duplicate of a token's merge (as tiktoken converters write) is accepted and dropped
    path = written(
        tmp_path,
        lambda d: d["model"]["merges"].append("a bc"),
        data=small_data(merges=[(97, 98, 256), (98, 99, 257), (256, 99, 258)]),
    )
    assert read_hf_json(path).merges == [(97, 98, 256), (98, 99, 257), (256, 99, 258)]


def test_sniff_hf_json(tmp_path):
    path = written(tmp_path)
    assert sniff_hf_json(path, path.read_bytes()[:4096])
    assert not sniff_hf_json(path, b'{\n  "format": "tokenforge-bpe",\n  "version": 1, "model": 1')
    assert not sniff_hf_json(path, b"IQ== 0\n")
