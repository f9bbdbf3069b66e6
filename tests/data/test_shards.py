"""Pretokenized shards: round trips, index contents, determinism, interruption and resume."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenforge
from eval_stubs import DictTokenizer
from tokenforge.data.fingerprint import tokenizer_fingerprint
from tokenforge.data.shards import INDEX_FILE, ShardError, ShardSet, pretokenize
from tokenforge.errors import FormatError, VersionError

DOCS = [
    f"Document {i}: "
    + ("the quick brown fox jumps over the lazy dog. " * (i % 7 + 1))
    + ("ünïcödé 日本 🙂\n" * (i % 3))
    for i in range(60)
] + ["", "x", "<|bos|> is only text here"]


@pytest.fixture(scope="module")
def bpe():
    return tokenforge.BPETokenizer.train_from_iterator(DOCS, 420, progress=False)


def _files(d):
    return {p: (d / p).read_bytes() for p in sorted(os.listdir(d))}


def test_round_trip_decode_of_shards_is_the_corpus(tmp_path, bpe):
    s = pretokenize(iter(DOCS), bpe, tmp_path / "s", shard_tokens=500, progress=False)
    assert s.complete and s.num_shards > 3 and s.num_documents == len(DOCS)
    assert [bpe.decode(a) for a in s.iter_documents()] == DOCS
    bos = bpe.get_bos_token_id()
    for i in range(s.num_shards):
        toks, docs = s.tokens(i), s.documents(i)
        assert toks.dtype == np.uint16
        assert (toks[docs[:, 0]] == bos).all()  # every document starts with BOS
        assert int((toks == bos).sum()) == len(docs)  # and BOS appears nowhere else
    s.verify()


def test_index_records_fingerprint_offsets_and_bytes(tmp_path, bpe):
    s = pretokenize(iter(DOCS), bpe, tmp_path / "s", shard_tokens=700, progress=False)
    index = json.loads((tmp_path / "s" / INDEX_FILE).read_text())
    assert index["format"] == "tokenforge-shards" and index["version"] == 2
    assert index["tokenizer"]["fingerprint"] == tokenizer_fingerprint(bpe)
    assert index["tokenizer"]["vocab_size"] == bpe.vocab_size
    assert index["bos_id"] == bpe.get_bos_token_id() and index["dtype"] == "uint16"
    rows = np.concatenate([s.documents(i) for i in range(s.num_shards)])
    assert rows[:, 1].tolist() == [len(d.encode("utf-8")) for d in DOCS]
    assert s.num_bytes == sum(len(d.encode()) for d in DOCS)
    for i, shard in enumerate(index["shards"]):
        offsets = s.documents(i)[:, 0]
        assert offsets[0] == 0 and (np.diff(offsets) > 0).all()
        assert shard["num_tokens"] == len(s.tokens(i))
    s.check_tokenizer(bpe)
    other = tokenforge.BPETokenizer.train_from_iterator(DOCS, 400, progress=False)
    with pytest.raises(ShardError, match="another tokenizer"):
        s.check_tokenizer(other)


def test_files_do_not_depend_on_threads_or_batches(tmp_path, bpe):
    a = pretokenize(iter(DOCS), bpe, tmp_path / "a", shard_tokens=600, num_threads=1, batch_chars=50, progress=False)
    b = pretokenize(
        iter(DOCS), bpe, tmp_path / "b", shard_tokens=600, num_threads=2, batch_chars=1 << 20, progress=False
    )
    assert _files(a.dir) == _files(b.dir)


class _Interrupting:
    """Yields the documents, raising KeyboardInterrupt before document ``at`` (once)."""

    def __init__(self, docs, at):
        self.docs, self.at = docs, at

    def __iter__(self):
        for i, d in enumerate(self.docs):
            if i == self.at:
                raise KeyboardInterrupt
            yield d


@pytest.mark.parametrize("at", [1, 17, 45])
def test_interrupted_pretokenization_resumes_to_identical_shards(tmp_path, bpe, at):
    ref = pretokenize(iter(DOCS), bpe, tmp_path / "ref", shard_tokens=400, batch_chars=200, progress=False)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        pretokenize(_Interrupting(DOCS, at), bpe, out, shard_tokens=400, batch_chars=200, progress=False)
    part = ShardSet(out, allow_incomplete=True)
    assert not part.complete
    assert part.num_documents <= at
    # every listed shard is whole and matches the uninterrupted run
    for i in range(part.num_shards):
        assert np.array_equal(part.tokens(i), ref.tokens(i))
    # leftovers of a crash between writing a shard and listing it: an unlisted shard and a temp file
    (out / f"shard_{part.num_shards:05d}.npy").write_bytes(b"garbage")
    (out / f".shard_{part.num_shards:05d}.npy.abcd.tmp").write_bytes(b"half")
    done = pretokenize(iter(DOCS), bpe, out, shard_tokens=400, batch_chars=200, progress=False)
    assert done.complete
    assert _files(out) == _files(ref.dir)


def test_resume_refuses_another_tokenizer_or_corpus(tmp_path, bpe):
    out = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        pretokenize(_Interrupting(DOCS, 40), bpe, out, shard_tokens=300, batch_chars=100, progress=False)
    assert ShardSet(out, allow_incomplete=True).num_shards > 0
    other = tokenforge.BPETokenizer.train_from_iterator(DOCS, 400, progress=False)
    with pytest.raises(ShardError, match="different tokenizer"):
        pretokenize(iter(DOCS), other, out, shard_tokens=300, progress=False)
    with pytest.raises(ShardError, match="different shard_tokens"):
        pretokenize(iter(DOCS), bpe, out, shard_tokens=301, progress=False)
    changed = ["changed " + d for d in DOCS]
    with pytest.raises(ShardError, match="corpus changed"):
        pretokenize(iter(changed), bpe, out, shard_tokens=300, progress=False)
    s = pretokenize(iter(changed), bpe, out, shard_tokens=300, progress=False, overwrite=True)
    assert [bpe.decode(a) for a in s.iter_documents()] == changed


def test_complete_directory_is_reused_without_work(tmp_path, bpe):
    out = tmp_path / "s"
    pretokenize(iter(DOCS), bpe, out, progress=False)
    before = _files(out)

    def boom():
        raise AssertionError("the corpus should not be read again")
        yield  # pragma: no cover

    s = pretokenize(boom(), bpe, out, progress=False)
    assert s.complete and _files(out) == before


def test_from_files_and_stub_tokenizer_with_byte_fallback(tmp_path):
    tok = DictTokenizer()
    path = tmp_path / "c.jsonl"
    docs = ["hello world", "héllo ex", "lo lo lo 🙂", ""]
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    s = pretokenize(path, tok, tmp_path / "s", progress=False)
    assert [tok.decode(a) for a in s.iter_documents()] == docs
    assert s.index["source"]["files"][0]["bytes"] == path.stat().st_size
    rows = s.documents(0)
    assert rows[:, 1].tolist() == [len(d.encode()) for d in docs]


def test_wide_vocabulary_uses_uint32(tmp_path):
    tok = DictTokenizer(extra_vocab=70_000)
    s = pretokenize(iter(["hello", "world"]), tok, tmp_path / "s", progress=False)
    assert s.dtype == np.uint32 and s.tokens(0).dtype == np.uint32


def test_no_bos(tmp_path, bpe):
    s = pretokenize(iter(DOCS[:5]), bpe, tmp_path / "s", bos=False, progress=False)
    assert s.bos_id is None
    assert [bpe.decode(a) for a in s.iter_documents()] == DOCS[:5]
    assert s.num_tokens == sum(len(bpe.encode_ordinary(d)) for d in DOCS[:5])


def test_bad_index_files(tmp_path, bpe):
    out = tmp_path / "s"
    pretokenize(iter(DOCS[:3]), bpe, out, progress=False)
    index = json.loads((out / INDEX_FILE).read_text())
    (out / INDEX_FILE).write_text(json.dumps({**index, "version": 99}))
    with pytest.raises(VersionError):
        ShardSet(out)
    (out / INDEX_FILE).write_text("{not json")
    with pytest.raises(FormatError, match="index.json"):
        ShardSet(out)
    (out / INDEX_FILE).write_text(json.dumps({**index, "format": "other"}))
    with pytest.raises(FormatError, match="tokenforge shard index"):
        ShardSet(out)
    (out / INDEX_FILE).write_text(json.dumps(index))
    np.save(out / "shard_00000.npy", np.zeros(3, np.uint16))
    with pytest.raises(FormatError, match="the index says"):
        ShardSet(out).tokens(0)
    with pytest.raises(FileNotFoundError):
        ShardSet(tmp_path / "nothing")
    with pytest.raises(ShardError):
        pretokenize(iter(DOCS), bpe, tmp_path / "x", shard_tokens=0)


def test_reader_errors_reach_the_caller(tmp_path, bpe):
    def bad():
        yield "fine"
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        pretokenize(bad(), bpe, tmp_path / "s", progress=False)
    assert not ShardSet(tmp_path / "s", allow_incomplete=True).complete


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=12), st.integers(1, 60))
def test_round_trip_any_text(tmp_path_factory, docs, shard_tokens):
    bpe = _BPE[0]
    out = tmp_path_factory.mktemp("h")
    s = pretokenize(iter(docs), bpe, out, shard_tokens=shard_tokens, batch_chars=37, progress=False)
    assert [bpe.decode_bytes(a).decode("utf-8", "surrogatepass") for a in s.iter_documents()] == docs
    assert s.num_bytes == sum(len(d.encode("utf-8", "surrogatepass")) for d in docs)


_BPE = [tokenforge.BPETokenizer.train_from_iterator(DOCS, 300, progress=False)]


# ---- the torch Dataset --------------------------------------------------------
def test_shard_dataset_windows(tmp_path, bpe):
    torch = pytest.importorskip("torch")
    from tokenforge.torch import ShardDataset

    s = pretokenize(iter(DOCS), bpe, tmp_path / "s", shard_tokens=800, progress=False)
    ds = ShardDataset(s, 16)
    want = sum((s.index["shards"][i]["num_tokens"] - 17) // 16 + 1 for i in range(s.num_shards))
    assert len(ds) == want
    x, y = ds[0]
    assert x.shape == y.shape == (16,) and x.dtype == torch.int64
    assert torch.equal(x[1:], y[:-1])
    assert torch.equal(x, torch.from_numpy(s.tokens(0)[:16].astype(np.int64)))
    x, y = ds[-1]
    with pytest.raises(IndexError):
        ds[len(ds)]
    bos = bpe.get_bos_token_id()
    masked = ShardDataset(tmp_path / "s", 16, stride=8, mask_special=[bos])
    xs, ys = zip(*(masked[k] for k in range(len(masked))))
    assert all(
        ((yy == -1) == (s_next == bos)).all()
        for yy, s_next in zip(ys, (ShardDataset(s, 16, stride=8)[k][1] for k in range(len(masked))))
    )
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True)
    xb, yb = next(iter(loader))
    assert xb.shape == (4, 16)
