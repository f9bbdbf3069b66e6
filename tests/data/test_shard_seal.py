"""The index seals shard directories (issue 32 item 6): sizes and document tables
checked at open, hashes by verify(), an unfinished run refused unless asked for."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tokenforge
from tokenforge import TokenforgeWarning
from tokenforge.data.shards import ShardError, ShardSet, pretokenize
from tokenforge.errors import FormatError

DOCS = [f"doc {i}: " + "the quick brown fox jumps. " * (i % 5 + 1) for i in range(40)]


@pytest.fixture(scope="module")
def bpe():
    return tokenforge.BPETokenizer.train_from_iterator(DOCS, 300, progress=False)


@pytest.fixture()
def shards(tmp_path, bpe):
    return pretokenize(iter(DOCS), bpe, tmp_path / "s", shard_tokens=200, progress=False).dir


def _edit_table(d, edit):
    p = d / "shard_00000.docs.npy"
    arr = np.load(p)
    edit(arr)
    np.save(p, arr, allow_pickle=False)
    return p


def test_the_index_seals_every_file(shards):
    index = json.loads((shards / "index.json").read_text())
    for e in index["shards"]:
        assert e["tokens_size"] == (shards / e["tokens"]).stat().st_size
        assert e["documents_size"] == (shards / e["documents"]).stat().st_size
        assert len(e["documents_sha256"]) == 64
    ShardSet(shards).verify()


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda a: a.__setitem__((1, 0), -3), "not increasing"),  # a negative offset
        (lambda a: a.__setitem__((2, 0), a[1, 0]), "not increasing"),  # two documents merged, one empty
        (lambda a: a.__setitem__((2, 0), a[2, 0] + 1), "BOS"),  # a boundary moved
        (lambda a: a.__setitem__((0, 0), 1), "starts at token 1"),
        (lambda a: a.__setitem__((3, 1), -1), "byte counts"),
        (lambda a: a.__setitem__((3, 1), a[3, 1] + 1), "byte counts"),
    ],
)
def test_a_damaged_document_table_is_refused_at_open(shards, edit, problem):
    p = _edit_table(shards, edit)
    with pytest.raises(FormatError, match=f"document table of shard 0: .*{problem}") as e:
        ShardSet(shards)
    assert e.value.path == str(p)


@pytest.mark.parametrize("block", [1, 2, 7, 1 << 22])
def test_the_bos_check_reads_the_tokens_in_blocks(shards, monkeypatch, block):
    """Opening reads each document's first token from the file a block at a time
    (not through the memory map): every BOS is checked whatever the block size,
    a damaged one anywhere is found, and no shard is mapped by the check."""
    monkeypatch.setattr("tokenforge.data.shard_reader._READ_TOKENS", block)
    s = ShardSet(shards)
    assert not s._tokens  # nothing mapped at open
    for i in range(s.num_shards):
        assert (s.tokens(i)[s.documents(i)[:, 0]] == s.bos_id).all()
    last = s.num_shards - 1
    docs, ntok, size = s.documents(last), len(s.tokens(last)), s.dtype.itemsize
    p = shards / s.index["shards"][last]["tokens"]
    for k in (0, len(docs) // 2, len(docs) - 1):
        at = p.stat().st_size - ntok * size + int(docs[k, 0]) * size
        with open(p, "r+b") as f:  # (in place: the file stays the size the index says)
            f.seek(at)
            f.write((s.bos_id + 1).to_bytes(size, "little"))
        with pytest.raises(FormatError, match=f"document table of shard {last}: .*BOS"):
            ShardSet(shards)
        with open(p, "r+b") as f:
            f.seek(at)
            f.write(s.bos_id.to_bytes(size, "little"))
    ShardSet(shards).verify()


def test_verify_catches_what_the_cheap_checks_cannot(shards):
    def swap_bytes(a):
        a[1, 1], a[2, 1] = a[2, 1], a[1, 1]  # same sum, same offsets

    _edit_table(shards, swap_bytes)
    s = ShardSet(shards)  # passes the cheap checks
    with pytest.raises(FormatError, match="document table does not match the SHA-256"):
        s.verify()


@pytest.mark.parametrize(
    "header",
    [b"{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999,), }", b"{'descr': 5, 'shape': (1,)}", b"[["],
)
def test_a_damaged_npy_header_is_a_format_error(shards, header):
    p = shards / "shard_00000.npy"
    raw = p.read_bytes()
    hlen = int.from_bytes(raw[8:10], "little")
    body = header.ljust(hlen - 1) + b"\n"
    p.write_bytes(raw[:10] + body[:hlen] + raw[10 + hlen :])
    with pytest.raises(FormatError) as e:
        s = ShardSet(shards)
        s.tokens(0)
    assert e.value.path == str(p)


def test_a_changed_file_size_is_refused_at_open(shards):
    p = shards / "shard_00001.npy"
    p.write_bytes(p.read_bytes() + b"\0\0")
    with pytest.raises(FormatError, match="the index says"):
        ShardSet(shards)


def test_an_unfinished_run_is_refused_unless_asked_for(tmp_path, bpe):
    class Stop(Exception):
        pass

    def docs():
        yield from DOCS[:30]
        raise Stop

    out = tmp_path / "run"
    with pytest.raises(Stop):
        pretokenize(docs(), bpe, out, shard_tokens=40, batch_chars=50, progress=False)
    with pytest.raises(ShardError, match="unfinished pretokenize run.*allow_incomplete=True"):
        ShardSet(out)
    with pytest.warns(TokenforgeWarning, match="part of the corpus"):
        part = ShardSet(out, allow_incomplete=True)
    assert not part.complete and part.num_shards > 0
    torch = pytest.importorskip("torch")
    from tokenforge.torch.dataset import ShardDataset

    with pytest.raises(ShardError, match="unfinished"):
        ShardDataset(out, 8)
    with pytest.warns(TokenforgeWarning):
        assert len(ShardDataset(out, 8, allow_incomplete=True)) > 0
    del torch
