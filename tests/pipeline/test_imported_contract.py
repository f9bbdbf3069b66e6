"""Imported tokenizers meet the tokenizer contract, and what cannot be reproduced is refused.

Saving (our sealed tokenforge-pipeline JSON) and loading back, pickling,
batches and numpy ids, token bytes; byte-level BPE tokenizer.json files still
load as BPETokenizer; every unsupported construct is a FormatError naming it;
hostile SentencePiece files (truncated, mutated, a damaged charsmap) are
FormatErrors; pretrained encodings load by name from the package that ships them.
"""

from __future__ import annotations

import base64
import collections
import json
import pickle
import random
import struct

import pytest
from imported_models import hf_pair, spm_pair

import tokenforge
from tiny_corpus import TINY_DOCS
from tokenforge import BPETokenizer, PipelineTokenizer
from tokenforge.errors import ChecksumError, FormatError, TokenforgeError


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("imported")


@pytest.mark.parametrize("which", ["hf:wordpiece-bert", "hf:bpe-llama", "spm:unigram-bytes", "spm:bpe"])
def test_save_load_and_pickle_give_the_same_tokenizer(which, models_dir, tmp_path):
    kind = which.split(":")[1]
    _, tok, _ = hf_pair(kind, models_dir) if which.startswith("hf") else spm_pair(kind, models_dir)
    path = tmp_path / "tok.json"
    tok.save(path)
    assert json.loads(path.read_text())["format"] == "tokenforge-pipeline"
    again = tokenforge.load(path)
    copied = pickle.loads(pickle.dumps(tok))
    for other in (again, copied):
        assert isinstance(other, PipelineTokenizer) and other.source == tok.source
        assert other.encode_batch(TINY_DOCS) == tok.encode_batch(TINY_DOCS)
        assert other.vocab_size == tok.vocab_size and other.special_tokens == tok.special_tokens
        assert other.token_bytes().tolist() == tok.token_bytes().tolist()
    text = path.read_text().replace('"version": 1', '"version": 1 ', 1)
    path.write_text(text.replace("[UNK]", "[UNX]").replace("<unk>", "<unx>"))
    with pytest.raises(ChecksumError):
        tokenforge.load(path)


def test_batches_numpy_and_token_bytes(models_dir):
    _, tok, _ = spm_pair("unigram-bytes", models_dir)
    lists = tok.encode_batch(TINY_DOCS, num_threads=2)
    batch = tok.encode_batch(TINY_DOCS, num_threads=2, as_numpy=True)
    assert batch.tolist() == lists == [tok.encode(d) for d in TINY_DOCS]
    tb = tok.token_bytes()
    assert len(tb) == tok.vocab_size
    ids = tok.encode("hello world")
    assert b"".join(tok.id_to_bytes(i) for i in ids) == b" hello world"  # the dummy prefix is a space
    byte_a = tok._pipe.model.byte_ids[0x41]
    assert tok.id_to_bytes(byte_a) == b"A" and tb[byte_a] == 1
    assert tok.special_tokens == {"<s>": 1, "</s>": 2}
    assert tok.encode("a</s>b", allowed_special="all")[1:2] == [2] or 2 in tok.encode("a</s>b", allowed_special="all")
    assert 2 not in tok.encode("a</s>b")


def test_wordpiece_pieces_and_bytes(models_dir):
    _, tok, _ = hf_pair("wordpiece-bert", models_dir)
    ids = tok.encode("tokenizers")
    pieces = [tok.piece(i) for i in ids]
    assert "".join(p.removeprefix("##") for p in pieces) == "tokenizers"
    assert b"".join(tok.id_to_bytes(i) for i in ids) == b" tokenizers"  # a word's first piece: after a space
    assert tok.normalize("Hello,  World") == " hello , world"  # what the tokens spell (token_bytes adds up to it)
    assert sum(tok.token_bytes()[tok.encode("Hello,  World")]) == len(" hello , world")
    assert tok.piece_detail(ids[0])["piece"] == pieces[0]


def test_byte_level_tokenizer_json_still_loads_as_bpe(tmp_path):
    bpe = BPETokenizer.train_from_iterator(TINY_DOCS, vocab_size=300)
    bpe.save_hf(tmp_path / "tokenizer.json")
    again = tokenforge.load(tmp_path / "tokenizer.json")
    assert type(again) is BPETokenizer
    assert again.encode_batch(TINY_DOCS) == bpe.encode_batch(TINY_DOCS)


def _refused(tmp_path, models_dir, change, *needles):
    _, _, path = hf_pair("wordpiece-bert", models_dir)
    doc = json.loads(path.read_text())
    change(doc)
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError) as e:
        tokenforge.load(p)
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_unsupported_constructs_are_refused_by_name(tmp_path, models_dir):
    cases = [
        (
            lambda d: d.update(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}),
            "normalizer.precompiled_charsmap",
            "too short",
        ),
        (
            lambda d: d.update(normalizer={"type": "Precompiled", "precompiled_charsmap": "not base64!"}),
            "not base64",
        ),
        (lambda d: d.update(pre_tokenizer={"type": "UnicodeScripts"}), "UnicodeScripts", "pre_tokenizer"),
        (
            lambda d: d.update(normalizer={"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}),
            "Regex",
            "normalizer.pattern",
        ),
        (lambda d: d["added_tokens"].append({**d["added_tokens"][0], "id": 999}), "added twice", "added_tokens[3]"),
        (
            lambda d: d["added_tokens"].append({**d["added_tokens"][0], "content": "\x00", "normalized": True}),
            "normalizes to nothing",
        ),
        (lambda d: d.update(truncation={"max_length": 5}), "truncation"),
        (lambda d: d["model"].update(type="Mystery"), "Mystery"),
        (lambda d: d.update(decoder={"type": "CTC"}), "CTC", "decoder"),
        (lambda d: d["model"].update(max_input_chars_per_word="x"), "max_input_chars_per_word"),
        (lambda d: d["model"]["vocab"].update({"zzz": 10**6}), "ids are dense"),
    ]
    for change, *needles in cases:
        _refused(tmp_path, models_dir, change, *needles)


def test_bpe_dropout_and_metaspace_first_after_strip_are_refused(tmp_path, models_dir):
    _, _, path = hf_pair("bpe-metaspace-first", models_dir)
    for change, needle in [
        (lambda d: d["model"].update(dropout=0.1), "dropout"),
        (lambda d: d.update(normalizer={"type": "Strip", "strip_left": True, "strip_right": True}), "prepend_scheme"),
    ]:
        doc = json.loads(path.read_text())
        change(doc)
        p = tmp_path / "t.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(FormatError, match=needle):
            tokenforge.load(p)


def _field(num: int, wire: int, payload: bytes) -> bytes:
    def varint(n):
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    key = varint(num << 3 | wire)
    return key + (varint(len(payload)) + payload if wire == 2 else payload)


def test_hostile_sentencepiece_files_are_format_errors(models_dir, tmp_path):
    _, _, path = spm_pair("unigram", models_dir)
    good = path.read_bytes()
    bad = {
        "truncated": good[: len(good) // 2],
        "group": good[:0] + _field(1, 3, b"") + good,
        "huge length": b"\x0a\xff\xff\xff\xff\x0f" + good,
        "long varint": b"\x0a" + b"\xff" * 11 + good,
        "no unk": _field(1, 2, _field(1, 2, b"a") + _field(3, 0, b"\x01")) + _field(1, 2, _field(1, 2, b"b")),
        "charsmap size": _field(1, 2, _field(1, 2, b"<unk>") + _field(3, 0, b"\x02"))
        + _field(3, 2, _field(2, 2, struct.pack("<I", 1 << 30) + b"\0" * 8)),
        "bad utf-8 piece": _field(1, 2, _field(1, 2, b"\xff")),
    }
    for name, data in bad.items():
        p = tmp_path / f"{name.replace(' ', '_')}.model"
        p.write_bytes(data)
        with pytest.raises(FormatError):
            tok = tokenforge.load(p)
            tok.encode("some text 日本")  # a damaged trie may only show when walked
    r = random.Random(7)
    for k in range(200):
        b = bytearray(good)
        for _ in range(r.randrange(1, 4)):
            b[r.randrange(len(b))] = r.randrange(256)
        p = tmp_path / "m.model"
        p.write_bytes(bytes(b))
        try:
            tok = tokenforge.load(p)
            tok.encode("The quick brown fox, 日本語 🙂")
            tok.decode(tok.encode("x y"))
        except TokenforgeError:
            pass


def test_byte_pieces_must_be_spelled_as_sentencepiece_spells_them(models_dir, tmp_path):
    """256 byte pieces of which one is not <0xNN> (bench/fuzz.py found '<0x-1>',
    which int() reads as -1, and then a KeyError): a FormatError naming the piece."""
    _, _, path = spm_pair("unigram-bytes", models_dir)
    good = path.read_bytes()
    for spelled in (b"<0x-1>", b"<0x+2>", b"<0x0a>", b"<0x 1>"):
        assert good.count(b"<0x12>") == 1
        p = tmp_path / "m.model"
        p.write_bytes(good.replace(b"<0x12>", spelled))
        with pytest.raises(FormatError, match="byte piece"):
            tokenforge.load(p)


def test_charsmap_trie_pointing_outside_itself_is_a_format_error():
    from tokenforge.pipeline.spm import Charsmap
    from tokenforge.pipeline.steps import Desc

    units = [0] * 256  # the root (offset 0): the child for byte c is unit c
    units[0x61] = 0x61 | 1 << 8 | 0x3FFFF << 10  # "a": a leaf whose value unit is far outside
    blob = struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + b"b\0"
    cm = Charsmap(blob, Desc({}, "normalizer", None))
    assert cm.first[0x61] and not cm.first[0x62]
    with pytest.raises(FormatError, match="outside itself"):
        cm.longest(b"abc", 0)
    units[0x61] = 0x61 | 1 << 8 | 0x62 << 10  # the value unit 0x61 ^ 0x62 = 3 holds 0: "b"
    cm = Charsmap(struct.pack("<I", 1024) + struct.pack("<256I", *units) + b"b\0", Desc({}, "n", None))
    assert cm.longest(b"abc", 0) == (1, 0) and cm.replacement(0) == "b"


def test_train_with_the_reference_libraries():
    for algorithm in ("spm_unigram", "spm_bpe", "hf_wordpiece", "hf_unigram"):
        tok = PipelineTokenizer.train_from_iterator(TINY_DOCS, 400, algorithm=algorithm)
        assert isinstance(tok, PipelineTokenizer)
        assert tok.encode(TINY_DOCS[0])
    with pytest.raises(TokenforgeError, match="unknown algorithm"):
        PipelineTokenizer.train_from_iterator(TINY_DOCS, 400, algorithm="spm_magic")


def test_pretrained_encodings_load_by_name():
    import gzip
    import importlib.util
    from pathlib import Path

    import tiktoken

    from tokenforge.formats.named import NAMED

    text = "\n\n".join(TINY_DOCS)
    for name in ("cl100k_base", "o200k_base"):
        tok = tokenforge.load(name)
        entry = NAMED[name]
        path = Path(next(iter(importlib.util.find_spec("bpe_openai").submodule_search_locations))) / entry.file
        lines = [line.split() for line in gzip.decompress(path.read_bytes()).splitlines() if line]
        ranks = {base64.b64decode(a): int(b) for a, b in lines}
        enc = tiktoken.Encoding(name, pat_str=entry.pattern, mergeable_ranks=ranks, special_tokens=entry.special_tokens)
        assert tok.encode(text) == enc.encode(text, disallowed_special=())
        assert tok.special_tokens == entry.special_tokens
    with pytest.raises(TokenforgeError, match="tiktoken downloads it"):
        tokenforge.load("gpt2")
    with pytest.raises(FileNotFoundError):
        tokenforge.load("cl100k_basis")


def test_unigram_scores_are_read_as_tokenizers_reads_them(tmp_path):
    """Two segmentations of '^' + three backslashes tie in correctly rounded scores;
    tokenizers' serde_json reads -10.501558751962467 one ulp off, which breaks the tie."""
    from tokenizers import Tokenizer

    from tokenforge.formats.hf_pipeline import serde_json_float

    assert serde_json_float("-10.501558751962467") != float("-10.501558751962467")
    assert serde_json_float("-8.667044840796787") == float("-8.667044840796787")
    assert serde_json_float("1.5e-7") == 15 / 1e8 and serde_json_float("-0.0") == 0.0
    assert serde_json_float("1." + "0" * 5000) == 1.0 and serde_json_float("2e999999999") == float("inf")
    vocab = (
        '[["<unk>", 0.0], ["^", -9.210575190375707], ["\\\\", -8.667044840796787], ["\\\\\\\\", -10.501558751962467]]'
    )
    text = '{"version": "1.0", "model": {"type": "Unigram", "unk_id": 0, "vocab": %s}}' % vocab
    (tmp_path / "tokenizer.json").write_text(text)
    ref = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok = tokenforge.load(tmp_path / "tokenizer.json")
    for s in ["^\\\\\\", "\\\\\\", "^^\\\\\\\\\\"]:
        assert tok.encode(s) == ref.encode(s, add_special_tokens=False).ids, s


def test_a_transformers_directory_of_an_imported_tokenizer_loads(models_dir, tmp_path):
    t, tok, path = hf_pair("wordpiece-bert", models_dir)
    (tmp_path / "tokenizer.json").write_bytes(path.read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizerFast"}')
    again = tokenforge.load(tmp_path)
    assert isinstance(again, PipelineTokenizer) and again.encode_batch(TINY_DOCS) == tok.encode_batch(TINY_DOCS)


def test_sentencepiece_training_reads_long_documents_line_by_line():
    """sentencepiece skips every sentence longer than max_sentence_length (4,192 bytes by
    default): PipelineTokenizer.train hands it the documents' lines, so a corpus of long
    documents trains the vocabulary asked for instead of one from what is left."""
    long_doc = "\n".join(TINY_DOCS * 6)
    assert len(long_doc.encode()) > 4192 * 3
    tok = PipelineTokenizer.train_from_iterator([long_doc] * 2, 300, algorithm="spm_unigram")
    assert tok.vocab_size == 300


def test_hostile_precompiled_charsmaps_are_format_errors(tmp_path):
    """A tokenizer.json's Precompiled charsmap damaged anywhere (trie units, sizes,
    replacement strings): the load or the encode is a FormatError naming the
    charsmap, never a crash, a hang or an error outside the hierarchy (tokenizers
    itself panics on some of these). Seeded mutations of a small charsmap."""
    from fuzz_formats import _write_precompiled

    path = tmp_path / "tokenizer.json"
    _write_precompiled(path)
    doc = json.loads(path.read_text())
    blob = bytearray(base64.b64decode(doc["normalizer"]["precompiled_charsmap"]))
    probe = "A\u0301 \ufb01\u3000x\t\u2460 \x7fy " + "".join(map(chr, range(32, 127)))
    rng = random.Random(31)
    outcomes = collections.Counter()
    for trial in range(300):
        bad = bytearray(blob)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(bad))
            if rng.random() < 0.2:
                del bad[at:]  # truncated
                if not bad:
                    break
            else:
                bad[at] = rng.randrange(256)
        doc["normalizer"]["precompiled_charsmap"] = base64.b64encode(bytes(bad)).decode()
        path.write_text(json.dumps(doc))
        try:
            tok = tokenforge.load(path)
            tok.encode(probe)
            tok.encode_batch([probe, probe[::-1]])
            outcomes["ok"] += 1
        except FormatError as e:
            assert "precompiled_charsmap" in str(e), str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 20 and outcomes["ok"] > 20, outcomes
