"""Hostile inputs end in a TokenforgeError naming the file and the line or
offset (issue 10 items 4 and 5): integers of more than 4,300 digits, deep
nesting and lone surrogates in every JSON reader; lone surrogates in JSON-lines
corpora (an error by default, U+FFFD with errors="replace"); pickle bombs.

Pickles are built here byte by byte; nothing is given to pickle.load.
"""

from __future__ import annotations

import json
import pickle
import random
import re
import struct
from pathlib import Path

import pytest

import tokenforge as tf
from tokenforge.data.corpus import iter_documents, jsonl_block_documents, jsonl_blocks
from tokenforge.data.shards import ShardSet, pretokenize
from tokenforge.errors import CorpusError, FormatError, SyncError, TokenforgeError, UnsafePickleError
from tokenforge.formats import checksum
from tokenforge.formats._jsonutil import JsonProblem, loads_checked
from tokenforge.formats.seed003 import _RefusingUnpickler, load_plain_pickle

TEXTS = ["hello world, hello tokenizer", "the quick brown fox jumps over the lazy dog " * 3, "12345 67890 the then"]
BIG = "9" * 5000


# ---------------------------------------------------------------- the JSON parser
@pytest.mark.parametrize(
    "text, line, column, message",
    [
        ('{"a":\n [1,\n ' + BIG + "]}", 3, 2, "an integer of 5000 digits"),
        ('{"a": "' + BIG + '", "b":\n -' + BIG + "}", 2, 2, "an integer of 5000 digits"),  # not the string
        ("[" * 65 + "]" * 65, 1, 65, "nested more than 64 deep"),
        ('{"a": ' + "[" * 200000, 1, 70, "nested more than 64 deep"),
        ('{"a": "x\\ud83d"}', 1, 9, "\\ud83d is half a surrogate pair"),
        ('{"a":\n "\\udc00\\ud83d"}', 2, 3, "\\udc00 is half a surrogate pair"),
        ('{"a": 1,}', 1, 9, "Expecting property name"),
    ],
)
def test_loads_checked_names_line_and_column(text, line, column, message):
    with pytest.raises(JsonProblem) as e:
        loads_checked(text)
    assert message in e.value.message
    assert (e.value.line, e.value.column) == (line, column)


def test_loads_checked_is_linear_on_hostile_text():
    # Each of these took seconds to minutes when a regex retried from every quote,
    # digit or backslash (no timing is asserted: a regression makes this test slow).
    n = 20000
    with pytest.raises(JsonProblem, match="nested more than 64"):
        loads_checked("[" * 70 + '"' + '\\"' * n)
    with pytest.raises(JsonProblem, match="an integer of 4400 digits"):
        loads_checked("[" + ",".join(["1" * 4300] * 50) + "," + "2" * 4400 + "]")
    with pytest.raises(JsonProblem, match="half a surrogate pair"):
        loads_checked('["' + "\\\\" * n + '", "\\ud83d"]')


def test_loads_checked_accepts_what_is_fine():
    assert loads_checked('{"a": "\\ud83d\\ude00", "b": "\\\\ud83d"}') == {"a": "\U0001f600", "b": "\\ud83d"}
    deep_in_strings = json.dumps({"code": "[" * 1000 + "{" * 1000})
    assert loads_checked(deep_in_strings) == {"code": "[" * 1000 + "{" * 1000}
    assert loads_checked("[" * 64 + "]" * 64) is not None
    assert loads_checked('{"n": ' + "9" * 4300 + "}")["n"] == int("9" * 4300)


# ---------------------------------------------------------------- every JSON reader
@pytest.fixture(scope="module")
def json_files(tmp_path_factory):
    """One valid file of each JSON format we read, and how to load it."""
    d = tmp_path_factory.mktemp("json")
    bpe = tf.BPETokenizer.train_from_iterator(TEXTS, vocab_size=280, special_tokens=["<|bos|>"])
    bpe.save(d / "bpe.json")
    bpe.save_hf(d / "hf.json")
    tf.Mixedgram.train(text=" ".join(TEXTS) * 3).save(d / "mixedgram.json")
    g = tf.GrowingBPETokenizer()
    g.learn_merges(iter(TEXTS * 5), num_merges=5, min_frequency=2)
    g.save(d / "growing.json")
    pretokenize(iter(TEXTS), bpe, d / "shards", progress=False)
    return {
        "bpe.json": tf.load,
        "hf.json": tf.load,
        "mixedgram.json": tf.load,
        "growing.json": tf.load,
        "shards/index.json": ShardSet,
    }, d


def _spoil(text: str, how: str) -> str:
    """Put something hostile into the first JSON array (not a "[" inside a string)."""
    at = next(m.end() for m in re.finditer(r'"(?:[^"\\]|\\.)*"|\[', text) if m.group() == "[")
    if how == "big-int":
        return text[:at] + BIG + ", " + text[at:]
    if how == "deep":
        return text[:at] + "[" * 100000 + text[at:]
    if how == "surrogate":
        return text[:at] + '"\\ud83d", ' + text[at:]
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["big-int", "deep", "surrogate"])
@pytest.mark.parametrize("name", ["bpe.json", "hf.json", "mixedgram.json", "growing.json", "shards/index.json"])
def test_every_json_reader_refuses_hostile_values_with_file_and_line(json_files, tmp_path, name, how):
    loaders, d = json_files
    good = (d / name).read_text(encoding="utf-8")
    bad = tmp_path / Path(name).name
    bad.write_text(_spoil(good, how), encoding="utf-8")
    with pytest.raises(FormatError) as e:
        loaders[name](bad)
    assert e.value.path == str(bad) and e.value.line is not None, str(e.value)
    assert "invalid JSON" in str(e.value)


def test_growing_json_merge_key_of_many_digits(tmp_path):
    g = tf.GrowingBPETokenizer()
    g.learn_merges(iter(TEXTS * 5), num_merges=5, min_frequency=2)
    g.save(tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    key = next(iter(doc["merges"]))
    doc["merges"] = {("7" * 5000 + key[key.index("_") :]) if k == key else k: v for k, v in doc["merges"].items()}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="merge key"):
        tf.load(tmp_path / "t.json")


def test_sync_refuses_a_hostile_remote_with_a_sync_error(tmp_path):
    g = tf.GrowingBPETokenizer()
    g.save(tmp_path / "local.json")
    (tmp_path / "remote.json").write_text('{"merges": {"116_104": ' + BIG + "}}")
    with pytest.raises(SyncError, match="5000 digits"):
        g.sync(tmp_path / "remote.json")
    (tmp_path / "remote.json").write_text('{"merges": ' + "[" * 100000 + "}")
    with pytest.raises(SyncError, match="nested"):
        g.sync(tmp_path / "remote.json")


def test_lz78_header_json_values(tmp_path):
    lz = tf.LZ78Tokenizer.train_from_iterator(TEXTS, strategy="standard", vocab_size=300)
    lz.save(tmp_path / "d.tsv")
    lines = (tmp_path / "d.tsv").read_text(encoding="utf-8").split("\n")
    k = next(i for i, line in enumerate(lines) if line.startswith("# params"))
    for value in (BIG, "[" * 100000, '"\\ud83d"'):
        spoiled = lines[:k] + [f"# params = {value}"] + lines[k + 1 :]
        (tmp_path / "bad.tsv").write_text("\n".join(spoiled), encoding="utf-8")
        with pytest.raises(FormatError, match="setting params") as e:
            tf.load(tmp_path / "bad.tsv")
        assert e.value.path == str(tmp_path / "bad.tsv") and e.value.line == k + 1
    k = next(i for i, line in enumerate(lines) if line.startswith("# specials"))
    for value in ("5", '"<|x|>"', "null", '[""]', "[1]"):  # (a TypeError before)
        spoiled = lines[:k] + [f"# specials = {value}"] + lines[k + 1 :]
        (tmp_path / "bad.tsv").write_text("\n".join(spoiled), encoding="utf-8")
        with pytest.raises(FormatError, match="setting specials must be a JSON list") as e:
            tf.load(tmp_path / "bad.tsv")
        assert e.value.line == k + 1


def test_shard_index_entries_are_checked(json_files, tmp_path):
    _, d = json_files
    index = json.loads((d / "shards" / "index.json").read_text())
    for change, message in [
        (lambda ix: ix["shards"][0].pop("sha256"), "'sha256' must be a string"),
        (lambda ix: ix["shards"][0].update(tokens="../../etc/passwd"), "file name in the shard directory"),
        (lambda ix: ix["shards"][0].update(num_tokens="12"), "'num_tokens' must be a non-negative integer"),
        (lambda ix: ix.update(dtype="object"), '"dtype" must be'),
        (lambda ix: ix["shards"][0].update(tokens="shard_99999.npy"), "shard_99999.npy (shard 0), which is missing"),
    ]:
        shutil_copy(d / "shards", tmp_path / "s")
        spoiled = json.loads(json.dumps(index))
        change(spoiled)
        spoiled.pop("checksum", None)
        (tmp_path / "s" / "index.json").write_text(json.dumps(spoiled))
        if spoiled.get("version", 1) >= 2:
            checksum.reseal(tmp_path / "s" / "index.json")  # a deliberate edit: the reader's own checks are tested
        with pytest.raises(FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
            s = ShardSet(tmp_path / "s")
            list(s.iter_documents())


def shutil_copy(src: Path, dst: Path) -> None:
    import shutil

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


# ---------------------------------------------------------------- JSON-lines corpora
LINES = '{"text": "hello world"}\n{"text": "bad \\ud83d here", "id": 2}\n{"text": "pair \\ud83d\\ude00 ok"}\n'


def test_lone_surrogate_in_jsonl_is_a_corpus_error_at_file_and_line(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(LINES)
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 2: field 'text' holds the escape \\ud83d") as e:
        list(iter_documents(p))
    assert e.value.line == 2 and e.value.path == str(p)
    assert list(iter_documents(p, errors="replace")) == ["hello world", "bad \ufffd here", "pair \U0001f600 ok"]
    assert list(iter_documents(p, errors="ignore")) == ["hello world", "bad  here", "pair \U0001f600 ok"]
    # a surrogate in another field does not matter
    p.write_text('{"text": "fine", "meta": "\\udc00"}\n')
    assert list(iter_documents(p)) == ["fine"]


def test_jsonl_lines_with_big_ints_or_deep_nesting_are_corpus_errors(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "a"}\n{"text": "b", "n": ' + BIG + "}\n")
    with pytest.raises(CorpusError, match=r"line 2: not valid JSON \(an integer of 5000 digits .* at column 20\)"):
        list(iter_documents(p))
    p.write_text('{"text": "a"}\n\n{"text": "b", "x": ' + "[" * 100000 + "]" * 100000 + "}\n")
    with pytest.raises(CorpusError, match="line 3: not valid JSON"):
        list(iter_documents(p))
    p.write_text('{"text": "' + "[" * 5000 + '"}\n')  # brackets in the text are text
    assert list(iter_documents(p)) == ["[" * 5000]


def test_error_handlers_that_make_surrogates_are_refused(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(LINES)
    for handler in ("surrogateescape", "surrogatepass"):
        with pytest.raises(CorpusError, match="lone surrogates"):
            iter_documents(p, errors=handler)


def test_training_on_a_dirty_jsonl_corpus(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(LINES * 20)
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 2"):
        tf.BPETokenizer.train(p, vocab_size=270)
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 2"):
        tf.LZ78Tokenizer.train(p, strategy="standard", vocab_size=300)
    texts = list(iter_documents(p, errors="replace"))
    assert tf.BPETokenizer.train(p, vocab_size=270, errors="replace").mergeable_ranks() == (
        tf.BPETokenizer.train_from_iterator(texts, vocab_size=270).mergeable_ranks()
    )
    lz = tf.LZ78Tokenizer.train(p, strategy="standard", vocab_size=300, errors="replace")
    assert lz.encode("bad \ufffd here") == tf.LZ78Tokenizer.train_from_iterator(
        texts, strategy="standard", vocab_size=300
    ).encode("bad \ufffd here")


def test_pretokenize_a_dirty_jsonl_corpus_matches_the_python_reader(tmp_path):
    rng = random.Random(5)
    rows = []
    for i in range(300):
        t = " ".join(rng.choice(["alpha", "beta", "gamma", "ü", "日本"]) for _ in range(rng.randrange(1, 30)))
        rows.append(json.dumps({"text": t}) if i % 37 else '{"text": "lone \\ud83d ' + t + '"}')
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(rows) + "\n")
    tok = tf.BPETokenizer.train_from_iterator(TEXTS, vocab_size=300, special_tokens=["<|bos|>"])
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 1:"):
        pretokenize(p, tok, tmp_path / "strict", progress=False)
    fast = pretokenize(p, tok, tmp_path / "fast", progress=False, errors="replace", batch_chars=500)
    texts = list(iter_documents(p, errors="replace"))
    assert sum("\ufffd" in t for t in texts) == 9
    slow = pretokenize(iter(texts), tok, tmp_path / "slow", progress=False)
    a = [x.tolist() for x in fast.iter_documents()]
    b = [x.tolist() for x in slow.iter_documents()]
    assert a == b and len(a) == 300
    # the block reader gives the same documents
    docs, line = [], 1
    for block in jsonl_blocks([p], 700):
        docs += list(jsonl_block_documents(block, line, "text", "replace"))
        line += block.count_lines()
    assert docs == texts
    # resuming with another handler is refused
    with pytest.raises(TokenforgeError, match="errors"):
        pretokenize(p, tok, tmp_path / "fast", progress=False)


# ---------------------------------------------------------------- pickle bombs
def _write(tmp_path, raw: bytes) -> Path:
    p = tmp_path / "bpe_vocab.pkl"
    p.write_bytes(raw)
    return p


def billion_laughs(levels=9, width=10) -> bytes:
    out = b"\x80\x04" + b"C\x03lol" + b"\x94" + b"0"  # SHORT_BINBYTES, MEMOIZE (memo 0), POP
    for level in range(1, levels + 1):
        out += b"(" + (b"h" + bytes([level - 1])) * width + b"l\x94"  # MARK, BINGET x width, LIST, MEMOIZE
        if level < levels:
            out += b"0"
    return out + b"."


@pytest.mark.parametrize(
    "raw, message",
    [
        (billion_laughs(), "more than 1156 items"),
        (billion_laughs(levels=30, width=2), "items"),
        (b"\x80\x04" + b"]" * 200000 + b"a" * 199999 + b".", "nested more than 100 levels"),
        (b"\x80\x04" + b"N" + b"\x85" * 200000 + b".", "nested more than 100 levels"),  # TUPLE1
        (b"\x80\x04" + b"N" + b"r" + struct.pack("<I", 1 << 26) + b".", "memo index 67108864"),
        (b"\x80\x04]\x94h\x00a.", "contains itself"),
    ],
)
def test_pickle_bombs_are_refused_before_unpickling(tmp_path, raw, message, monkeypatch):
    def never(*a, **k):
        raise AssertionError("a bomb reached the unpickler")

    monkeypatch.setattr(_RefusingUnpickler, "load", never)
    with pytest.raises(UnsafePickleError, match=message):
        load_plain_pickle(_write(tmp_path, raw))


def test_billion_laughs_is_refused_through_the_seed_reader(tmp_path):
    _write(tmp_path, billion_laughs())
    (tmp_path / "bpe_merges.pkl").write_bytes(pickle.dumps([]))
    with pytest.raises(UnsafePickleError):
        tf.load(tmp_path)


def test_shared_references_in_a_real_pickle_still_load(tmp_path):
    """Seed files share bytes objects between merges (memo GETs): fine."""
    rng = random.Random(0)
    vocab = {i: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12))) for i in range(50000)}
    values = list(vocab.values())
    merges = [(values[rng.randrange(50000)], values[rng.randrange(50000)]) for _ in range(50000)]
    for obj in (vocab, merges, {"a": [merges[:10]] * 3}):
        for protocol in (3, 4, 5):  # (protocol 2 pickles bytes through a global: refused)
            p = tmp_path / "x.pkl"
            p.write_bytes(pickle.dumps(obj, protocol=protocol))
            assert load_plain_pickle(p) == obj


def test_huge_ints_in_a_seed_vocab(tmp_path):
    for key in (1 << 40, 10**5000):
        raw = pickle.dumps({key: b"a"}, protocol=4)
        _write(tmp_path, raw)
        (tmp_path / "bpe_merges.pkl").write_bytes(pickle.dumps([]))
        with pytest.raises(FormatError, match="32 bits"):
            tf.load(tmp_path)


@pytest.mark.parametrize("line", [1, "code", "N"])
def test_lz78_numbers_of_any_length_are_format_errors(tmp_path, line):
    """A version, code or N of thousands of digits is a FormatError, never int()'s ValueError (found by bench/fuzz.py)."""
    tok = tf.LZ78Tokenizer.train_from_iterator(
        ["the cat sat on the mat, the dog sat on the log. "] * 20, 300, strategy="standard", progress=False
    )
    p = tmp_path / "d.tsv"
    tok.save(p)
    lines = p.read_text(encoding="utf-8").split("\n")
    big = "9" * 5000
    if line == 1:
        lines[0] = "# tokenforge lz78 v" + big
    elif line == "N":
        lines = [("# N=" + big) if x.startswith("# N=") else x for x in lines]
    else:
        k = next(i for i, x in enumerate(lines) if x[:1].isdigit())
        lines[k] = big + lines[k][lines[k].index("\t") :]
    p.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(FormatError) as e:
        tf.load(p)
    assert len(str(e.value)) < 600
