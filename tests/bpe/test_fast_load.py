"""The engine's fast readers agree with the Python readers (issue 14 item 5).

Each BPE format has two readers: the engine's (``_core.bpe_model_from_tiktoken``,
``_core.bpe_model_from_tfjson``, ``_core.bpe_read_hf_json``), which builds the
model straight from the file's bytes and hands out the merges lazily, and the
Python reader, the fallback for anything unusual and the one that words every
error. These tests hold the two to one behaviour:

* on valid files (tokenizers trained here with every pattern, special-token
  setting and id layout, saved with and without a checksum, with a BOM, with
  CRLF; random vocabularies from ``bpe_strategies``; the real cl100k/o200k rank
  files) the fast path is taken and gives the same BPEData and the same
  tokenizer (ids of sample texts, specials included) as the Python reader;
* on broken files (targeted edits and seeded random mutations) the fast path
  declines, so the error (type and message) is the Python reader's, the same
  with the fast path on as off;
* the lazily made ``merges`` are safe to read from two threads, detach the
  engine model once handed out or replaced, and a lazily loaded tokenizer
  pickles and saves to the same bytes as one the Python reader loaded.

The slow path is forced by replacing the three ``_core`` functions with ones
that decline (return None), exactly what the engine does with a file it does
not take.

Not handled: timing (bench/load.py measures the load times).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import importlib.util
import json
import pickle
import re
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge as tf
from bpe_strategies import bpe_data
from fuzz_formats import MUTATIONS
from tiny_corpus import TINY_DOCS
from tokenforge import _core
from tokenforge.errors import TokenforgeError
from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.hf_json import hf_json_dict, read_hf_json, write_hf_json
from tokenforge.formats.patterns import NAMED_PATTERNS
from tokenforge.formats.tfjson import read_tfjson, tfjson_text
from tokenforge.formats.tiktoken_io import read_tiktoken_file, tiktoken_file_text

FAST = ("bpe_model_from_tiktoken", "bpe_model_from_tfjson", "bpe_read_hf_json")
FORMATS = ("tfjson", "hf", "tiktoken")
SETTINGS = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@contextlib.contextmanager
def slow_path():
    """The Python readers only: the engine's readers decline every file."""
    saved = {name: getattr(_core, name) for name in FAST}
    for name in FAST:
        setattr(_core, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for name, f in saved.items():
            setattr(_core, name, f)


def write(fmt: str, path: Path, data: BPEData) -> None:
    if fmt == "tfjson":
        path.write_bytes(tfjson_text(data).encode("utf-8"))
    elif fmt == "hf":
        write_hf_json(path, data)
    else:
        path.write_bytes(tiktoken_file_text(data).encode("ascii"))


def reader(fmt: str, pattern=None, specials=None):
    """``path -> BPEData`` of one format (a .tiktoken file needs its pattern and specials)."""
    if fmt == "tfjson":
        return read_tfjson
    if fmt == "hf":
        return read_hf_json
    return lambda path: read_tiktoken_file(path, pattern, specials)


def fields(data: BPEData) -> dict:
    return {
        "byte_ids": list(data.byte_ids),
        "merges": [tuple(m) for m in data.merges],
        "special_tokens": list(data.special_tokens.items()),  # (order too: it is the file's)
        "pattern": data.pattern,
        "pattern_name": data.pattern_name,
        "training": data.training,
        "split_specials": data.split_specials,
    }


def sample_texts(specials) -> list[str]:
    texts = [d for d in TINY_DOCS[:12]] + ["", " ", "hello world", "   \n\n\t x 12345 😀 naïve"]
    texts += [f"a{s}b {s}{s}\n{s} c" for s in specials]
    return texts


def same_tokenizer(fast: tf.BPETokenizer, slow: tf.BPETokenizer) -> None:
    assert fast.vocab_size == slow.vocab_size and fast.special_tokens == slow.special_tokens
    for text in sample_texts(slow.special_tokens):
        assert fast.encode(text) == slow.encode(text), text
        assert fast.encode_ordinary(text) == slow.encode_ordinary(text), text
        if slow.special_tokens:
            ids = slow.encode(text, allowed_special="all")
            assert fast.encode(text, allowed_special="all") == ids, text
            assert fast.decode(ids) == text
    assert list(fast.token_bytes()) == list(slow.token_bytes())


def agree(read, path: Path, slow_tok: tf.BPETokenizer | None = None) -> BPEData:
    """Read ``path`` both ways: the fast path must take it and give what the
    Python reader gives (data, and the tokenizer: ``slow_tok`` if given, else
    built from the Python reader's data). Returns the fast reader's data (its
    merges now made)."""
    fast = read(path)
    model = fast.engine_model()
    assert model is not None, "the fast path declined a valid file"
    tok = tf.BPETokenizer(fast)
    assert tok._model is model, "the tokenizer did not reuse the fast reader's model"
    with slow_path():
        slow = read(path)
    assert slow.engine_model() is None
    same_tokenizer(tok, slow_tok or tf.BPETokenizer(slow))
    assert fields(fast) == fields(slow)
    return fast


def outcome(read, path: Path):
    """("ok", fields) or (error type, message) of reading ``path``."""
    try:
        data = read(path)
    except TokenforgeError as e:
        return type(e).__name__, str(e)
    return "ok", fields(data)


def same_outcome(read, path: Path):
    """Reading ``path`` gives the same result or error with the fast path as without."""
    fast = outcome(read, path)
    with slow_path():
        slow = outcome(read, path)
    assert fast == slow, path.read_bytes()[:200]
    return fast


# ---------------------------------------------------------------- tokenizers trained here
CUSTOM = r"[A-Za-z]+|[0-9]{1,2}|\s+|[^\sA-Za-z0-9]+"
TRAINED = {
    "gpt4": dict(pattern="gpt4"),
    "cl100k": dict(pattern="cl100k", special_tokens=["<|endoftext|>", "<|fim_prefix|>"]),
    "o200k": dict(pattern="o200k", special_tokens=None),
    "gpt2-specials-first": dict(pattern="gpt2", layout="specials_first", special_tokens=["<s>", "</s>", "<pad>"]),
    "custom": dict(pattern=CUSTOM, special_tokens=["<|ü|>", "[SEP]"]),
    "none": dict(pattern=None, special_tokens=["<|bos|>"]),
}


@functools.cache
def trained(name: str) -> tf.BPETokenizer:
    return tf.BPETokenizer.train_from_iterator(TINY_DOCS, vocab_size=420, **TRAINED[name])


def variants(fmt: str, text: bytes) -> dict[str, bytes]:
    """The saved file and the spellings of it both readers must take."""
    out = {"plain": text, "crlf": text.replace(b"\n", b"\r\n")}
    if fmt != "tiktoken":
        out["bom"] = b"\xef\xbb\xbf" + text
        out["compact"] = json.dumps(json.loads(text), separators=(",", ":")).encode()
        out["indented"] = json.dumps(json.loads(text), indent=1, ensure_ascii=False).encode()
    if fmt == "tfjson" and b'"split_specials"' not in text:  # version 1: no checksum
        v1 = re.sub(rb',\n  "checksum": "sha256:[0-9a-f]{64}"', b"", text).replace(b'"version": 2', b'"version": 1')
        assert v1 != text
        out["v1"] = v1
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(TRAINED))
@pytest.mark.parametrize("split_specials", [False, True])
def test_trained_tokenizers_read_the_same_both_ways(tmp_path, fmt, name, split_specials):
    tok = trained(name)
    if split_specials:
        tok = tf.BPETokenizer(BPEData(**{**fields(tok.data), "special_tokens": tok.data.special_tokens}))
        tok.split_specials = True
    data = tok.data
    read = reader(fmt, data.pattern, data.special_tokens)
    path = tmp_path / f"tok.{fmt}"
    write(fmt, path, data)
    for how, raw in variants(fmt, path.read_bytes()).items():
        path.write_bytes(raw)
        got = agree(read, path)
        assert got.byte_ids == data.byte_ids and got.special_tokens == data.special_tokens, how
        if fmt == "tfjson":
            assert fields(got) == fields(data), how  # everything round-trips through our JSON
        else:
            assert got.token_bytes_list() == data.token_bytes_list(), how
    # through tokenforge.load (the registry picks the reader from the file)
    if fmt != "tiktoken":
        write(fmt, path, data)
        loaded = tf.load(path)
        assert loaded.data.engine_model() is not None
        with slow_path():
            same_tokenizer(loaded, tf.load(path))


@pytest.mark.parametrize("fmt", FORMATS)
@SETTINGS
@given(data=bpe_data(unique_bytes=True))
def test_random_vocabularies_read_the_same_both_ways(tmp_path, fmt, data):
    """Any vocabulary: read alike both ways; or, as a .tiktoken file whose
    tokens the ranks alone cannot build, refused alike."""
    path = tmp_path / f"tok.{fmt}"
    write(fmt, path, data)
    read = reader(fmt, data.pattern, data.special_tokens)
    kind, _ = same_outcome(read, path)
    assert kind == "ok" or fmt == "tiktoken"
    if kind == "ok":
        agree(read, path)


@SETTINGS
@given(data=bpe_data(unique_bytes=False))
def test_hand_made_vocabularies_read_the_same_both_ways(tmp_path, data):
    """Our JSON keeps any merge list (duplicate bytes, gaps in ids): both readers agree."""
    path = tmp_path / "tok.json"
    write("tfjson", path, data)
    fast = agree(read_tfjson, path)
    assert fields(fast) == fields(data)


# ---------------------------------------------------------------- the real rank files
def real_rank_file(name: str, directory: Path) -> Path:
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None and spec.submodule_search_locations, "bpe-openai (a dev dependency) is not installed"
    src = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    dst = directory / f"{name}.tiktoken"
    dst.write_bytes(gzip.decompress(src.read_bytes()))
    return dst


REAL = {
    "cl100k_base": ("cl100k", {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|endofprompt|>": 100276}),
    "o200k_base": ("o200k", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


@pytest.mark.parametrize("name", list(REAL))
def test_real_rank_files_read_the_same_in_every_format(tmp_path, name):
    pattern_name, specials = REAL[name]
    pattern = NAMED_PATTERNS[pattern_name]
    path = real_rank_file(name, tmp_path)
    data = agree(reader("tiktoken", pattern, specials), path)
    assert data.pattern_name == pattern_name and data.special_tokens == specials
    assert len(data.merges) == sum(1 for t in data.token_bytes_list() if t is not None) - 256
    tok = tf.BPETokenizer(data)  # (built from the merges list, not the fast reader's model)
    tok.save(tmp_path / "tok.json")
    tok.save_hf(tmp_path / "tokenizer.json")
    for fmt, p in (("tfjson", tmp_path / "tok.json"), ("hf", tmp_path / "tokenizer.json")):
        again = agree(reader(fmt), p, slow_tok=tok)
        assert again.token_bytes_list() == data.token_bytes_list() and again.special_tokens == specials, fmt


# ---------------------------------------------------------------- broken files: the Python reader's errors
SMALL = dict(pattern="gpt4", special_tokens=["<|endoftext|>", "<|bos|>"])


@functools.cache
def small_files() -> dict[str, bytes]:
    tok = tf.BPETokenizer.train_from_iterator(TINY_DOCS[:6], vocab_size=300, **SMALL)
    data = tok.data
    return {
        "tfjson": tfjson_text(data).encode(),
        "hf": json.dumps(hf_json_dict(data), indent=2).encode(),
        "tiktoken": tiktoken_file_text(data).encode(),
        "specials": json.dumps(data.special_tokens).encode(),
    }


def small_reader(fmt: str):
    return reader(fmt, NAMED_PATTERNS["gpt4"], json.loads(small_files()["specials"]))


def _json_edit(fmt: str, edit) -> bytes:
    value = json.loads(small_files()[fmt])
    edit(value)
    return json.dumps(value, indent=1).encode()


def _sub(fmt: str, old: bytes, new: bytes, count: int = 1) -> bytes:
    raw = small_files()[fmt]
    assert old in raw, old
    return raw.replace(old, new, count)


def tfjson_hostile() -> dict[str, bytes]:
    raw = small_files()["tfjson"]
    merges_at = raw.index(b'"merges": [') + len(b'"merges": [')
    first_pair = re.search(rb"\[(\d+), (\d+)\]", raw[merges_at:])
    return {
        "truncated": raw[: len(raw) // 2],
        "empty": b"",
        "not json": b"hello",
        "a list": b"[1, 2]",
        "digit changed": raw.replace(b'"byte_ids": [0, 1,', b'"byte_ids": [0, 7,', 1),
        "duplicate key": raw.replace(b'  "training"', b'  "pattern_name": "gpt4",\n  "training"', 1),
        "duplicate byte_ids": raw.replace(b'  "training"', b'  "byte_ids": [],\n  "training"', 1),
        "merge of undefined id": raw[:merges_at] + b"\n    [4000, 1]," + raw[merges_at:],
        "merge of itself": raw[:merges_at] + b"\n    [256, 1]," + raw[merges_at:],
        "merge id huge": raw.replace(b'"first_merge_id": 256', b'"first_merge_id": 4294967295', 1),
        "merge id past 32 bits": raw.replace(b'"first_merge_id": 256', b'"first_merge_id": 4294967296', 1),
        "merge id beyond limit": raw.replace(b'"first_merge_id": 256', b'"first_merge_id": 5000', 1),
        "byte id negative": raw.replace(b'"byte_ids": [0,', b'"byte_ids": [-1,', 1),
        "byte id float": raw.replace(b'"byte_ids": [0,', b'"byte_ids": [0.0,', 1),
        "byte id exponent": raw.replace(b'"byte_ids": [0,', b'"byte_ids": [0e0,', 1),
        "byte id leading zero": raw.replace(b'"byte_ids": [0, 1,', b'"byte_ids": [0, 01,', 1),
        "byte id true": raw.replace(b'"byte_ids": [0,', b'"byte_ids": [true,', 1),
        "byte ids short": raw.replace(b'"byte_ids": [0, ', b'"byte_ids": [', 1),
        "pair of three": raw[:merges_at] + raw[merges_at:].replace(first_pair.group(0), b"[1, 2, 3]", 1),
        "pair of strings": raw[:merges_at] + raw[merges_at:].replace(first_pair.group(0), b'["a", "b"]', 1),
        "pair NaN": raw[:merges_at] + raw[merges_at:].replace(first_pair.group(0), b"[NaN, 1]", 1),
        "training NaN": raw.replace(b'"training": {', b'"training": {"x": NaN, ', 1),
        "training infinity": raw.replace(b'"training": {', b'"training": {"x": 1e999, ', 1),
        "training deep": raw.replace(b'"training": {', b'"training": {"x": ' + b"[" * 100 + b"]" * 100 + b", ", 1),
        "training very deep": raw.replace(
            b'"training": {', b'"training": {"x": ' + b"[" * 5000 + b"]" * 5000 + b", ", 1
        ),
        "training big int": raw.replace(b'"training": {', b'"training": {"x": ' + b"9" * 5000 + b", ", 1),
        "training lone surrogate": raw.replace(b'"training": {', b'"training": {"x": "\\ud800", ', 1),
        "checksum wrong": re.sub(rb"sha256:[0-9a-f]", b"sha256:f" if b"sha256:0" in raw else b"sha256:0", raw, count=1),
        "checksum missing": re.sub(rb',\n  "checksum": "sha256:[0-9a-f]{64}"', b"", raw),
        "checksum in v1": raw.replace(b'"version": 2', b'"version": 1'),
        "version 3": raw.replace(b'"version": 2', b'"version": 3'),
        "version string": raw.replace(b'"version": 2', b'"version": "2"'),
        "format wrong": raw.replace(b'"tokenforge-bpe"', b'"tokenforge-bpx"'),
        "pattern name wrong": raw.replace(b'"pattern_name": "gpt4"', b'"pattern_name": "gpt2"'),
        "pattern broken": raw.replace(b'"pattern_name": "gpt4"', b'"pattern_name": "custom"').replace(
            b'"pattern": "', b'"pattern": "(', 1
        ),
        "special id used": _sub("tfjson", b'"<|endoftext|>": ', b'"<|endoftext|>": 1, "x": '),
        "special duplicate": _sub("tfjson", b'"<|bos|>"', b'"<|endoftext|>"'),
        "special empty": _sub("tfjson", b'"<|bos|>"', b'""'),
        "special id string": re.sub(rb'("<\|bos\|>": )(\d+)', rb'\1"\2"', raw),
        "split_specials number": _sub("tfjson", b'  "training"', b'  "split_specials": 1,\n  "training"'),
        "unknown key": _sub("tfjson", b'  "training"', b'  "extra": 1,\n  "training"'),
        "both merge id keys": _sub("tfjson", b'"first_merge_id": 256,', b'"first_merge_id": 256, "merge_ids": [],'),
        "merge_ids not increasing": _json_edit(
            "tfjson",
            lambda v: (
                v.pop("first_merge_id"),
                v.__setitem__("merge_ids", [256 + (k ^ 1) for k in range(len(v["merges"]))]),
            ),
        ),
        "not utf-8": raw.replace(b'"training": {', b'"training": {"\xff": 1, ', 1),
        "bom twice": b"\xef\xbb\xbf\xef\xbb\xbf" + raw,
        "special duplicate key": _sub("tfjson", b'"<|endoftext|>": ', b'"<|bos|>": 999, "<|endoftext|>": '),
        "special escaped": _sub("tfjson", b'"<|bos|>"', b'"<|b\\u006fs|>"'),
        "training duplicate key": raw.replace(b'"training": {', b'"training": {"x": 1, "x": 2, ', 1),
        "pattern null": _json_edit("tfjson", lambda v: v.__setitem__("pattern", None)),
        "pattern number": _json_edit("tfjson", lambda v: v.__setitem__("pattern", 5)),
        "merges null": _json_edit("tfjson", lambda v: v.__setitem__("merges", None)),
        "specials a list": _json_edit("tfjson", lambda v: v.__setitem__("special_tokens", [])),
        "first_merge_id float": raw.replace(b'"first_merge_id": 256', b'"first_merge_id": 256.0', 1),
        "first_merge_id bool": raw.replace(b'"first_merge_id": 256', b'"first_merge_id": true', 1),
        "trailing garbage": raw + b"x",
    }


def hf_hostile() -> dict[str, bytes]:
    raw = small_files()["hf"]
    value = json.loads(raw)
    vocab = value["model"]["vocab"]
    key = next(k for k, i in vocab.items() if i == 300 - 10)  # a merged token

    def edit(f):
        return _json_edit("hf", f)

    return {
        "truncated": raw[: len(raw) // 3],
        "empty": b"",
        "digit changed": raw.replace(b'": 257,', b'": 258,', 1),
        "duplicate vocab key": raw.replace(b'"vocab": {', b'"vocab": {\n      "a": 5,', 1),
        "duplicate top key": raw.replace(b'"truncation": null,', b'"truncation": null,\n  "truncation": null,', 1),
        "vocab id huge": edit(lambda v: v["model"]["vocab"].__setitem__(key, 2**32)),
        "vocab id beyond limit": edit(lambda v: v["model"]["vocab"].__setitem__(key, 100000)),
        "vocab id negative": edit(lambda v: v["model"]["vocab"].__setitem__(key, -3)),
        "vocab id float": edit(lambda v: v["model"]["vocab"].__setitem__(key, 290.0)),
        "vocab id NaN": _sub("hf", b": 290,", b": NaN,"),
        "vocab id twice": edit(lambda v: v["model"]["vocab"].__setitem__(key, 289)),
        "vocab key not byte-level": edit(lambda v: v["model"]["vocab"].__setitem__("日本", 300)),
        "byte missing": edit(lambda v: v["model"]["vocab"].pop("a")),
        "merge undefined": edit(lambda v: v["model"]["merges"].insert(0, "zz qq")),
        "merge of three": edit(lambda v: v["model"]["merges"].insert(0, "a b c")),
        "merge list of three": edit(lambda v: v["model"]["merges"].insert(0, ["a", "b", "c"])),
        "merge empty part": edit(lambda v: v["model"]["merges"].insert(0, " a")),
        "merge number": edit(lambda v: v["model"]["merges"].insert(0, 5)),
        "merges out of order": edit(lambda v: v["model"]["merges"].reverse()),
        "merges dropped": edit(lambda v: v["model"].__setitem__("merges", [])),
        "merge of special": edit(lambda v: v["model"]["merges"].insert(0, "<|bos|> a")),
        "added not special": edit(lambda v: v["added_tokens"][0].__setitem__("special", False)),
        "added id differs": edit(lambda v: v["added_tokens"][0].__setitem__("id", 5)),
        "added id huge": edit(lambda v: v["added_tokens"][0].__setitem__("id", 2**40)),
        "added id bool": edit(lambda v: v["added_tokens"][0].__setitem__("id", True)),
        "added twice": edit(lambda v: v["added_tokens"].append(dict(v["added_tokens"][0]))),
        "added content number": edit(lambda v: v["added_tokens"][0].__setitem__("content", 5)),
        "added not a list": edit(lambda v: v.__setitem__("added_tokens", {})),
        "model not BPE": edit(lambda v: v["model"].__setitem__("type", "WordPiece")),
        "normalizer": edit(lambda v: v.__setitem__("normalizer", {"type": "NFC"})),
        "prefix space": edit(lambda v: v["pre_tokenizer"]["pretokenizers"][1].__setitem__("add_prefix_space", True)),
        "dropout": edit(lambda v: v["model"].__setitem__("dropout", 0.1)),
        "dropout NaN": raw.replace(b'"dropout": null', b'"dropout": NaN', 1),
        "byte_fallback": edit(lambda v: v["model"].__setitem__("byte_fallback", True)),
        "split broken": edit(lambda v: v["pre_tokenizer"]["pretokenizers"][0]["pattern"].__setitem__("Regex", "(")),
        "deep": raw.replace(b'"truncation": null', b'"truncation": ' + b"[" * 100 + b"]" * 100, 1),
        "very deep": raw.replace(b'"truncation": null', b'"truncation": ' + b"[" * 5000 + b"]" * 5000, 1),
        "big int": raw.replace(b'"truncation": null', b'"truncation": ' + b"9" * 5000, 1),
        "lone surrogate": raw.replace(b'"truncation": null', b'"truncation": "\\udc00"', 1),
        "vocab lone surrogate": raw.replace(b'"vocab": {', b'"vocab": {\n      "\\ud800": 299,', 1),
        "not utf-8": raw.replace(b'"truncation": null', b'"truncation": "\xff"', 1),
        "a list": b"[]",
        "trailing garbage": raw + b"]",
        "empty vocab key": edit(lambda v: v["model"]["vocab"].__setitem__("", 300)),
        "special id differs in vocab": edit(lambda v: v["model"]["vocab"].__setitem__("<|bos|>", 297)),
        "special id of an ordinary token": edit(lambda v: v["added_tokens"][0].__setitem__("id", 290)),
        "special not in vocab": edit(lambda v: v["model"]["vocab"].pop("<|bos|>")),
        "special flag a number": edit(lambda v: v["added_tokens"][0].__setitem__("special", 1)),
        "special flag missing": edit(lambda v: v["added_tokens"][0].pop("special")),
        "added extra field": edit(lambda v: v["added_tokens"][0].__setitem__("extra", [1])),
        "non-special added in vocab": edit(
            lambda v: v["added_tokens"].append({"id": 290, "content": key, "special": False})
        ),
        "merge of a new token": edit(
            lambda v: (v["model"]["vocab"].__setitem__("<|", 300), v["model"]["merges"].append("< |"))
        ),
        "merges as lists": edit(
            lambda v: v["model"].__setitem__("merges", [m.split(" ") for m in v["model"]["merges"]])
        ),
        "merge repeated": edit(lambda v: v["model"]["merges"].append(v["model"]["merges"][0])),
        "model without type": edit(lambda v: v["model"].pop("type")),
        "model without merges": edit(lambda v: v["model"].pop("merges")),
        "no added_tokens": edit(lambda v: v.pop("added_tokens")),
        "added_tokens null": edit(lambda v: v.__setitem__("added_tokens", None)),
        "duplicate key in model": raw.replace(b'"type": "BPE",', b'"type": "BPE",\n    "type": "BPE",', 1),
        "duplicate key in an added token": raw.replace(b'"special": true', b'"special": true, "special": false', 1),
        "pre_tokenizer ByteLevel only": edit(
            lambda v: v.__setitem__("pre_tokenizer", v["pre_tokenizer"]["pretokenizers"][1])
        ),
        "pre_tokenizer GPT-2 ByteLevel": edit(
            lambda v: v.__setitem__("pre_tokenizer", {**v["pre_tokenizer"]["pretokenizers"][1], "use_regex": True})
        ),
    }


def tiktoken_hostile() -> dict[str, bytes]:
    raw = small_files()["tiktoken"]
    lines = raw.split(b"\n")[:-1]
    last = lines[-1]
    b64, rank = last.split(b" ")

    def with_lines(ls):
        return b"\n".join(ls) + b"\n"

    return {
        "truncated": raw[: len(raw) // 2],
        "no final newline": raw[:-1],
        "empty": b"",
        "blank line": raw + b"\n",
        "digit changed": with_lines(lines[:-1] + [b64 + b" " + str(int(rank) - 5).encode()]),
        "rank huge": with_lines(lines[:-1] + [b64 + b" 4294967295"]),
        "rank past 32 bits": with_lines(lines[:-1] + [b64 + b" 4294967296"]),
        "rank of 11 digits": with_lines(lines[:-1] + [b64 + b" 00000000001"]),
        "rank leading zeros": with_lines(lines[:-1] + [b64 + b" 0" + rank]),
        "rank beyond limit": with_lines(lines[:-1] + [b64 + b" 9000"]),
        "rank negative": with_lines(lines[:-1] + [b64 + b" -1"]),
        "ranks out of order": with_lines(lines[:256] + lines[256:][::-1]),
        "two spaces": with_lines(lines[:-1] + [b64 + b"  " + rank]),
        "tab": with_lines(lines[:-1] + [b64 + b"\t" + rank]),
        "token twice": with_lines(lines + [b64 + b" " + str(int(rank) + 1).encode()]),
        "rank twice": with_lines(lines + [b"enp6eno= " + rank]),
        "byte missing": with_lines(lines[1:]),
        "non-canonical base64": with_lines(lines[:-1] + [b64[:-2] + b"x=" if b64.endswith(b"=") else b64 + b"=="]),
        "base64 bad padding": with_lines(lines[:-1] + [b64.rstrip(b"=") + b" " + rank]),
        "base64 unused bits": with_lines(lines[:-1] + [b"IR== " + rank]),
        "base64 urlsafe": with_lines(lines[:-1] + [b"-_-_ " + rank]),
        "unreachable token": with_lines(lines + [b"enp6eno= " + str(int(rank) + 1).encode()]),
        "bom": b"\xef\xbb\xbf" + raw,
        "cr only": raw.replace(b"\n", b"\r"),
        "nul": raw.replace(b" ", b"\x00", 1),
    }


HOSTILE = {"tfjson": tfjson_hostile, "hf": hf_hostile, "tiktoken": tiktoken_hostile}
#: the edits that leave a file the Python reader takes (all others must be refused)
LOADS = {
    "tfjson": {"duplicate key", "special duplicate key", "special escaped"},
    "hf": {
        "duplicate vocab key",
        "duplicate top key",
        "merges dropped",
        "added twice",
        "special not in vocab",
        "special flag a number",
        "added extra field",
        "non-special added in vocab",
        "merge of a new token",
        "merges as lists",
        "merge repeated",
        "model without type",
        "duplicate key in model",
        "pre_tokenizer ByteLevel only",
        "pre_tokenizer GPT-2 ByteLevel",
    },
    "tiktoken": {"rank leading zeros", "ranks out of order"},
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_broken_files_give_the_python_readers_errors(tmp_path, fmt):
    read = small_reader(fmt)
    path = tmp_path / f"tok.{fmt}"
    path.write_bytes(small_files()[fmt])
    assert agree(read, path) is not None  # (the unbroken file takes the fast path)
    results = {}
    for what, raw in HOSTILE[fmt]().items():
        path.write_bytes(raw)
        results[what] = same_outcome(read, path)
    loaded = {what for what, (kind, _) in results.items() if kind == "ok"}
    assert loaded <= LOADS[fmt], loaded - LOADS[fmt]  # (the others are errors, alike both ways)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(r=st.randoms(use_true_random=False), count=st.sampled_from([1, 1, 2, 3]))
def test_random_mutations_give_the_same_result_both_ways(tmp_path, fmt, r, count):
    """Random edits (bit flips, digits, truncation, huge numbers, deep nesting,
    duplicated or swapped lines, ...; ``fuzz_formats.MUTATIONS``) of a small
    valid file: loaded alike or refused with the same error either way."""
    read = small_reader(fmt)
    path = tmp_path / f"tok.{fmt}"
    b = bytearray(small_files()[fmt])
    for name in r.choices(sorted(MUTATIONS), k=count):
        MUTATIONS[name](r, b)
    path.write_bytes(bytes(b))
    same_outcome(read, path)


def read_and_build(read, path: Path):
    """("ok", fields, ids of a sample) or (step, error type, message) of
    reading ``path`` and making a tokenizer of it (a bad pattern fails there)."""
    try:
        data = read(path)
    except TokenforgeError as e:
        return "read", type(e).__name__, str(e)
    try:
        tok = tf.BPETokenizer(data)
    except TokenforgeError as e:
        return "build", type(e).__name__, str(e)
    return "ok", fields(data), tok.encode(" ".join(TINY_DOCS[:3]))


@pytest.mark.parametrize(
    "pattern, specials",
    [
        ("(", None),  # regression: the fast reader raised PatternError where the Python reader read the file
        ("[a-z", {"<|x|>": 400}),
        (r"\w+|\s+", {"<|x|>": 400}),
        ("gpt4", {"<|x|>": 5}),
        ("gpt4", {"<|x|>": 10**6}),
        ("gpt4", {"<|x|>": 2**32}),
        ("gpt4", {"<|x|>": -1}),
        ("gpt4", {"<|x|>": 400, "<|y|>": 400}),
        ("gpt4", {"": 400}),
        ("gpt4", {5: 400}),
        ("gpt4", {"<|x|>": True}),
        (None, {"<|x|>": 400.0}),
    ],
)
def test_tiktoken_caller_settings_give_the_same_result_both_ways(tmp_path, pattern, specials):
    """The pattern and specials a .tiktoken file is read with come from the
    caller: bad ones are reported alike (and at the same step) either way."""
    pattern = NAMED_PATTERNS.get(pattern, pattern)
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(small_files()["tiktoken"])
    read = reader("tiktoken", pattern, specials)
    fast = read_and_build(read, path)
    with slow_path():
        assert read_and_build(read, path) == fast


# ---------------------------------------------------------------- lazily made merges
@pytest.fixture
def small_paths(tmp_path):
    paths = {fmt: tmp_path / f"small.{fmt}" for fmt in FORMATS}
    for fmt, p in paths.items():
        p.write_bytes(small_files()[fmt])
    return paths


@pytest.mark.parametrize("fmt", FORMATS)
def test_merges_read_from_two_threads_are_one_list(small_paths, fmt):
    read = small_reader(fmt)
    with slow_path():
        want = read(small_paths[fmt]).merges
    for _ in range(20):
        data = read(small_paths[fmt])
        assert data.engine_model() is not None
        barrier = threading.Barrier(4)
        got: list = []

        def run():
            barrier.wait()
            got.append(data.merges)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(m is got[0] for m in got) and got[0] == want
        assert data.engine_model() is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_engine_model_detaches_once_merges_change(small_paths, fmt):
    read = small_reader(fmt)
    data = read(small_paths[fmt])
    model = data.engine_model()
    assert model is not None
    tok = tf.BPETokenizer(data)
    text = " ".join(TINY_DOCS[:4]) + "<|endoftext|>"
    ids = tok.encode(text, allowed_special="all")
    merges = tok.merges  # handed out: the model is no longer the data's own
    assert data.engine_model() is None
    assert tok.encode(text, allowed_special="all") == ids  # the tokenizer keeps encoding the same
    assert tf.BPETokenizer(data).encode(text, allowed_special="all") == ids  # rebuilt from the list
    # replaced merges: a new model from them, never the old one
    data2 = read(small_paths[fmt])
    data2.merges = merges[:10]
    assert data2.engine_model() is None
    short = tf.BPETokenizer(data2)
    assert short._model is not model and short.merges == merges[:10]
    assert len(short.encode(text, allowed_special="all")) > len(ids)
    # other fields changed in place: the stale model is not reused
    for change in ("byte_ids", "special_tokens", "pattern"):
        data3 = read(small_paths[fmt])
        if change == "byte_ids":
            data3.byte_ids[0], data3.byte_ids[1] = data3.byte_ids[1], data3.byte_ids[0]
        elif change == "special_tokens":
            data3.special_tokens["<|endoftext|>"], data3.special_tokens["<|bos|>"] = (
                data3.special_tokens["<|bos|>"],
                data3.special_tokens["<|endoftext|>"],
            )
        else:
            data3.pattern = None
            data3.pattern_name = "none"
        assert data3.engine_model() is None, change


@pytest.mark.parametrize("fmt", FORMATS)
def test_lazily_loaded_tokenizer_pickles_and_saves_as_the_slow_one(tmp_path, small_paths, fmt):
    read = small_reader(fmt)
    fast = tf.BPETokenizer(read(small_paths[fmt]))
    with slow_path():
        slow = tf.BPETokenizer(read(small_paths[fmt]))
    assert fast.data.engine_model() is not None
    assert pickle.dumps(fast) == pickle.dumps(slow)
    back = pickle.loads(pickle.dumps(fast))
    assert back.data.engine_model() is not None  # (unpickling reads our JSON: the fast path)
    same_tokenizer(back, slow)
    for tok, d in ((fast, tmp_path / "fast"), (slow, tmp_path / "slow")):
        d.mkdir()
        tok.save(d / "tok.json")
        tok.save_hf(d / "tokenizer.json")
        tok.save_tiktoken(d / "ranks.tiktoken")
    for name in ("tok.json", "tok.vocab.txt", "tokenizer.json", "ranks.tiktoken"):
        assert (tmp_path / "fast" / name).read_bytes() == (tmp_path / "slow" / name).read_bytes(), name
    assert fast.data.engine_model() is None  # saving needed the merges
    same_tokenizer(fast, slow)
