"""The JSON-lines fast path of pretokenize: the core parses and encodes blocks of
lines; shards must equal those of the Python reader + encode_batch path, line
for line, including fallbacks, errors, compression and resuming."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge.data import shard_writer as shards_mod
from tokenforge.data.corpus import jsonl_block_documents, jsonl_blocks
from tokenforge.data.shards import ShardSet, pretokenize
from tokenforge.errors import CorpusError

DOCS = [
    f"Doc {i}: "
    + ("the quick brown fox jumps over the lazy dog.\n" * (i % 5 + 1))
    + ('ünïcödé 日本 🙂\t"q"\\\n' * (i % 3))
    for i in range(80)
] + ["", "x", "<|bos|> is only text here", "\u2028 line sep \x7f"]


@pytest.fixture(scope="module")
def bpe():
    return tokenforge.BPETokenizer.train_from_iterator(DOCS, 420, progress=False)


@pytest.fixture(scope="module")
def lz78():
    return tokenforge.LZ78Tokenizer.train_from_iterator(
        DOCS, vocab_size=300, strategy="frequency_gated", progress=False
    )


def _write_jsonl(path, lines, gz=False):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _lines(docs):
    return [
        json.dumps({"id": i, "text": d, "meta": {"n": [i, None]}}, ensure_ascii=i % 2 == 0) for i, d in enumerate(docs)
    ]


def _shard_data(s: ShardSet):
    return [(s.tokens(i).tolist(), s.documents(i).tolist()) for i in range(s.num_shards)], [
        {k: v for k, v in e.items()} for e in json.loads((s.dir / "index.json").read_text())["shards"]
    ]


def _no_fast_path(monkeypatch):
    monkeypatch.setattr(shards_mod, "_block_encoder", lambda *a: None)


def _reference(tmp_path, tok, path, **kw):
    """The same corpus through the Python reader and encode_batch."""
    mp = pytest.MonkeyPatch()
    try:
        _no_fast_path(mp)
        return pretokenize(path, tok, tmp_path / "ref", progress=False, **kw)
    finally:
        mp.undo()


@pytest.mark.parametrize("family", ["bpe", "lz78"])
@pytest.mark.parametrize("gz", [False, True])
def test_fast_path_equals_the_python_path(tmp_path, request, family, gz):
    tok = request.getfixturevalue(family)
    assert tok.jsonl_block_encoder() is not None
    path = _write_jsonl(tmp_path / ("c.jsonl.gz" if gz else "c.jsonl"), _lines(DOCS) + ["", "  ", '{"text": null}'], gz)
    kw = dict(shard_tokens=700, batch_chars=900)
    fast = pretokenize(path, tok, tmp_path / "fast", progress=False, **kw)
    ref = _reference(tmp_path, tok, path, **kw)
    assert fast.num_shards > 3 and fast.num_documents == len(DOCS)
    assert _shard_data(fast) == _shard_data(ref)
    assert [tok.decode(a) for a in fast.iter_documents()] == DOCS
    fast.verify()


def test_shards_do_not_depend_on_block_size_or_threads(tmp_path, bpe):
    path = _write_jsonl(tmp_path / "c.jsonl", _lines(DOCS))
    a = pretokenize(path, bpe, tmp_path / "a", shard_tokens=500, batch_chars=1, num_threads=1, progress=False)
    b = pretokenize(path, bpe, tmp_path / "b", shard_tokens=500, batch_chars=1 << 20, num_threads=2, progress=False)
    assert _shard_data(a) == _shard_data(b)


def test_lines_only_python_reads_fall_back_to_python(tmp_path, bpe):
    # NaN, a 200-deep nesting and a line of U+001C (whitespace to Python's str.strip)
    # are not read by the core; their blocks go through the Python reader.
    deep = "[" * 200 + "]" * 200
    lines = _lines(DOCS[:10]) + ['{"x": NaN, "text": "nan doc"}', f'{{"x": {deep}, "text": "deep doc"}}', "\x1c"]
    lines += _lines(DOCS[10:20])
    path = _write_jsonl(tmp_path / "c.jsonl", ["\ufeff" + lines[0]] + lines[1:])
    s = pretokenize(path, bpe, tmp_path / "s", shard_tokens=300, batch_chars=400, progress=False)
    want = DOCS[:10] + ["nan doc", "deep doc"] + DOCS[10:20]
    assert [bpe.decode(a) for a in s.iter_documents()] == want
    assert _shard_data(s) == _shard_data(_reference(tmp_path, bpe, path, shard_tokens=300, batch_chars=400))


@pytest.mark.parametrize(
    "bad, message",
    [
        ('{"title": "t"}', "line 4: no 'text' field"),
        ('{"text": 5}', "line 4: field 'text' is int"),
        ("[1]", "line 4: expected a JSON object"),
        ('{"text": "a"', "line 4: not valid JSON"),
    ],
)
def test_bad_lines_report_file_and_line(tmp_path, bpe, bad, message):
    path = _write_jsonl(tmp_path / "c.jsonl", _lines(DOCS[:3]) + [bad] + _lines(DOCS[:3]))
    with pytest.raises(CorpusError, match=message):
        pretokenize(path, bpe, tmp_path / "s", batch_chars=200, progress=False)
    assert not ShardSet(tmp_path / "s", allow_incomplete=True).complete


def test_invalid_utf8_reports_the_byte_offset(tmp_path, bpe):
    good = "".join(line + "\n" for line in _lines(DOCS[:5])).encode()
    path = tmp_path / "c.jsonl"
    path.write_bytes(good + b'{"text": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=f"line 6, byte offset {len(good) + 13}: invalid UTF-8"):
        pretokenize(path, bpe, tmp_path / "s", progress=False)


@pytest.mark.parametrize("blocks_before_stop", [1, 4, 9])
def test_interrupted_fast_path_resumes_to_identical_shards(tmp_path, bpe, monkeypatch, blocks_before_stop):
    path = _write_jsonl(tmp_path / "c.jsonl", _lines(DOCS))
    kw = dict(shard_tokens=200, batch_chars=700, progress=False)
    ref = pretokenize(path, bpe, tmp_path / "ref", **kw)
    real = shards_mod._block_encoder

    def interrupting(*args):
        enc = real(*args)
        calls = []

        def wrapped(*a):
            calls.append(1)
            if len(calls) > blocks_before_stop:
                raise KeyboardInterrupt
            return enc(*a)

        return wrapped

    monkeypatch.setattr(shards_mod, "_block_encoder", interrupting)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        pretokenize(path, bpe, out, **kw)
    monkeypatch.setattr(shards_mod, "_block_encoder", real)
    part = ShardSet(out, allow_incomplete=True)
    assert not part.complete and part.num_shards >= (blocks_before_stop > 1)
    done = pretokenize(path, bpe, out, **kw)
    assert done.complete
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {p.name: p.read_bytes() for p in ref.dir.iterdir()}
    # a corpus that changed (same size, other characters) is refused, as on the Python path
    if part.num_shards:
        monkeypatch.setattr(shards_mod, "_block_encoder", interrupting)
        with pytest.raises(KeyboardInterrupt):
            pretokenize(path, bpe, tmp_path / "run2", **kw)
        monkeypatch.setattr(shards_mod, "_block_encoder", real)
        size = path.stat().st_size
        path.write_bytes(path.read_bytes().replace("ü".encode(), b"ue").replace(b"\\u00fc", b"uuuuue"))
        assert path.stat().st_size == size
        with pytest.raises(shards_mod.ShardError, match="corpus changed"):
            pretokenize(path, bpe, tmp_path / "run2", **kw)


def test_blocks_end_at_lines_and_keep_line_numbers(tmp_path):
    lines = _lines(DOCS)
    path = _write_jsonl(tmp_path / "c.jsonl", lines)
    blocks = list(jsonl_blocks([path], block_bytes=500))
    assert len(blocks) > 5
    assert b"".join(b.data for b in blocks) == path.read_bytes()
    assert all(b.data.endswith(b"\n") for b in blocks)
    assert [b.offset for b in blocks] == [sum(len(x.data) for x in blocks[:i]) for i in range(len(blocks))]
    assert all(b.count_lines() == b.data.count(b"\n") for b in blocks)
    firsts = [1 + sum(x.count_lines() for x in blocks[:i]) for i in range(len(blocks))]
    assert [d for b, f in zip(blocks, firsts) for d in jsonl_block_documents(b, f)] == DOCS
    # a last line without a newline, and lines longer than a block
    path.write_bytes(b'{"text": "' + b"y" * 1300 + b'"}\n{"text": "z"}')
    blocks = list(jsonl_blocks([path], block_bytes=500))
    assert b"".join(b.data for b in blocks) == path.read_bytes()
    assert sum(b.count_lines() for b in blocks) == 2
    assert [d for b in blocks for d in jsonl_block_documents(b, 1)] == ["y" * 1300, "z"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=12), st.booleans(), st.integers(0, 14))
def test_core_block_encoder_matches_encode_batch(bpe, docs, ascii_only, skip):
    data = "".join(json.dumps({"text": d}, ensure_ascii=ascii_only) + "\n" for d in docs).encode(
        "utf-8", "surrogatepass"
    )
    enc = bpe.jsonl_block_encoder()
    try:
        [t.encode("utf-8") for t in docs]
    except UnicodeEncodeError:  # lone surrogates: not text the core reads; Python's path decides
        assert enc(b"", data, len(data), "text", True, 0, None, True, 1) is None
        return
    cut = max(0, data.find(b"\n")) // 2  # the head: part of the first line, carried over from a previous read
    got = enc(data[:cut], data[cut:] + b"ignored", len(data) - cut, "text", True, skip, 7, True, 2)
    assert got is not None
    tokens, ntok, nbytes, nchars, nlines = got
    assert nlines == len(docs)
    k = min(skip, len(docs))
    ids = bpe.encode_batch(docs[k:])
    assert tokens.dtype == np.uint16
    assert tokens.tolist() == [x for one in ids for x in [7] + one]
    assert ntok.tolist() == [0] * k + [len(one) + 1 for one in ids]
    assert nbytes.tolist() == [0] * k + [len(d.encode()) for d in docs[k:]]
    assert nchars.tolist() == [len(d) for d in docs]


def test_shard_files_are_what_np_save_writes(tmp_path, bpe):
    path = _write_jsonl(tmp_path / "c.jsonl", _lines(DOCS))
    s = pretokenize(path, bpe, tmp_path / "s", shard_tokens=300, batch_chars=500, progress=False)
    for i in range(s.num_shards):
        f = s.dir / f"shard_{i:05d}.npy"
        again = tmp_path / "again.npy"
        np.save(again, np.load(f), allow_pickle=False)
        assert again.read_bytes() == f.read_bytes()


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["text", "id", "te\\u0078t", "meta", ""]), _json_values, max_size=4),
    st.one_of(st.none(), st.text(max_size=30)),
    st.booleans(),
    st.one_of(
        st.none(),
        st.tuples(
            st.integers(0, 200),
            st.sampled_from(['"', "\\", "{", "}", ",", ":", " ", "\t", "x", "\x01", "\\u", "\\ud800", "NaN"]),
        ),
    ),
)
def test_core_reads_a_line_as_python_does_or_hands_it_over(bpe, obj, text, ascii_only, mutation):
    """For any line: where Python's reader accepts it, the core gives the same
    text or hands the block to Python; where Python's reader raises, the core
    hands it over (so the error is Python's)."""
    from tokenforge.data.corpus import _jsonl_line

    if text is not None:
        obj = {**obj, "text": text}
    line = json.dumps(obj, ensure_ascii=ascii_only).replace('"te\\\\u0078t"', '"te\\u0078t"')
    if mutation is not None:
        at, piece = mutation
        at = min(at, len(line))
        line = line[:at] + piece + line[at:]
    raw = line.encode("utf-8", "surrogatepass")
    try:
        want = _jsonl_line(raw, "c.jsonl", 2, 0, "text", "strict", False)
        ok = True
    except Exception:
        ok = False
    got = bpe.jsonl_block_encoder()(b"", raw, len(raw), "text", False, 0, None, True, 1)
    if not ok:
        assert got is None, (line, got)
        return
    if got is None:
        return  # handed to Python's reader, which reads it as above
    tokens, ntok, nbytes, nchars, nlines = got
    assert nlines == 1
    if want is None:
        assert len(ntok) == 0
    else:
        assert bpe.decode(tokens.tolist()) == want and nchars.tolist() == [len(want)]
