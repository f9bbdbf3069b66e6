"""Distributed mixedgram training (``Mixedgram.train(..., client=...)``): the
same tokenizer, counts, statistics and saved files as training here, for any
cut of the text into pieces; the NgramCounts that travel between workers read
back strictly. Most tests run the distributed code path in this process
(``LocalRunner``); one runs it on a real two-process ``LocalCluster``."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenforge import Mixedgram, _core
from tokenforge.cluster import LocalRunner
from tokenforge.errors import FormatError, TokenforgeError
from transport_helpers import seal

SETTINGS = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def local():
    return LocalRunner(progress=False)


def saved(tok: Mixedgram, path) -> bytes:
    tok.save(path)
    return path.read_bytes()


def assert_same(a: Mixedgram, b: Mixedgram, tmp_path, name: str = "x") -> None:
    assert a.ngrams == b.ngrams
    assert a.counts == b.counts
    assert a.training == b.training
    assert saved(a, tmp_path / f"{name}_a.json") == saved(b, tmp_path / f"{name}_b.json")
    if not a.special_tokens:
        assert saved(a, tmp_path / f"{name}_a.mxgram") == saved(b, tmp_path / f"{name}_b.mxgram")


@pytest.fixture
def files(tmp_path):
    """Several files: repetitive text, random bytes (NULs included), only NULs, empty, one byte."""
    rng = random.Random(13)
    words = [b"the ", b"cat ", b"sat ", b"on ", b"\xe9t\xe9 ", b"mat", b"\n", b"\x00"]
    contents = [
        b"".join(rng.choice(words) for _ in range(700)),
        bytes(rng.choice(b"ab\x00c \n\xff") for _ in range(1500)),
        b"\x00" * 500,
        b"",
        b"z",
        b"".join(rng.choice(words[:4]) for _ in range(400)),
    ]
    out = []
    for i, c in enumerate(contents):
        p = tmp_path / f"part{i}.txt"
        p.write_bytes(c)
        out.append(p)
    return out


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("partition_bytes", [1, 2, 7, 8, 15, 333, 4096, 1 << 30])
def test_files_any_partition_size(files, tmp_path, partition_bytes):
    want = Mixedgram.train(files)
    got = Mixedgram.train(files, client=local(), partition_bytes=partition_bytes)
    assert_same(want, got, tmp_path)
    assert got.training["nul_removed"] > 500
    assert got.training["text_bytes"] == want.training["text_bytes"]


def test_nul_only_files_and_one_file(tmp_path):
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"\x00" * 100)
    for corpus in ([nul], [nul, nul], nul):
        assert_same(Mixedgram.train(corpus), Mixedgram.train(corpus, client=local(), partition_bytes=3), tmp_path)
    small = tmp_path / "small.txt"
    small.write_bytes(b"ab")
    assert_same(Mixedgram.train([small, nul, small]), Mixedgram.train([small, nul, small], client=local()), tmp_path)


@SETTINGS
@given(
    text=st.lists(st.sampled_from([b"ab", b"a", b"b", b"\x00", b"the ", b"\xff\xfe", b"\n"]), max_size=300).map(
        b"".join
    ),
    partition_bytes=st.integers(1, 120),
)
def test_any_text_any_cut(tmp_path, text, partition_bytes):
    want = Mixedgram.train(text)
    got = Mixedgram.train(text, client=local(), partition_bytes=partition_bytes)
    assert (got.ngrams, got.counts, got.training) == (want.ngrams, want.counts, want.training)


def test_text_path_and_directory_forms(files, tmp_path):
    data = files[0].read_bytes()
    want = Mixedgram.train(text=data)
    assert_same(want, Mixedgram.train(text=data, client=local(), partition_bytes=100), tmp_path, "text")
    assert_same(want, Mixedgram.train(path=files[0], client=local(), partition_bytes=100), tmp_path, "path")
    assert_same(want, Mixedgram.train(str(files[0]), client=local(), partition_bytes=100), tmp_path, "str")
    d = tmp_path / "dir"
    d.mkdir()
    for i, f in enumerate(files[:3]):
        (d / f"{i}.txt").write_bytes(f.read_bytes())
    assert_same(Mixedgram.train(d), Mixedgram.train(d, client=local(), partition_bytes=500), tmp_path, "dir")
    docs = ["the cat", "sat on the mat \xe9t\xe9", ""]
    assert_same(
        Mixedgram.train_from_iterator(docs),
        Mixedgram.train_from_iterator(docs, client=local(), partition_bytes=4),
        tmp_path,
        "iter",
    )


def test_special_tokens_keep_fewer_slots(files, tmp_path):
    want = Mixedgram.train(files, special_tokens="nanochat")
    got = Mixedgram.train(files, special_tokens="nanochat", client=local(), partition_bytes=999)
    assert got.special_tokens == want.special_tokens
    assert_same(want, got, tmp_path)


def test_other_encodings_read_whole_files(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("caf\u00e9 na\u00efve \u00e9t\u00e9 " * 200, encoding="utf-8")
    b.write_text("\u00e9t\u00e9 \x00 the end " * 100, encoding="utf-8")
    want = Mixedgram.train([a, b], encoding="utf-8")
    got = Mixedgram.train([a, b], encoding="utf-8", client=local(), partition_bytes=5)
    assert_same(want, got, tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    with pytest.raises(FormatError) as e:
        Mixedgram.train([a, bad], encoding="utf-8", client=local())
    assert e.value.offset == 3 and "bad.txt" in str(e.value)


def test_fsspec_urls(files, tmp_path):
    urls = [f"file://{f}" for f in files[:2]]
    want = Mixedgram.train(files[:2])
    assert_same(want, Mixedgram.train(urls, client=local(), partition_bytes=777), tmp_path)


def test_instance_train_and_bad_arguments(files, tmp_path):
    tok = Mixedgram(parse="optimal")
    assert tok.train(files, client=local(), partition_bytes=1000) is tok
    assert tok.parse == "optimal" and tok.ngrams == Mixedgram.train(files).ngrams
    with pytest.raises(ValueError, match="partition_bytes"):
        Mixedgram.train(files, client=local(), partition_bytes=0)
    with pytest.raises(TypeError):
        Mixedgram.train(files, text="x", client=local())
    with pytest.raises(TokenforgeError):
        Mixedgram.train("no such file here", client=local())


# ---------------------------------------------------------------- NgramCounts
def test_counts_merge_bytes_and_pickle():
    a = _core.mixedgram_count_piece(b"abcabcab", 2)
    b = _core.mixedgram_count_piece(b"abx", 2)
    assert a.items() == [(b"ab", 3), (b"bc", 2), (b"ca", 2)] and a.positions == 7
    m = _core.NgramCounts.merge([a, b])
    assert m.items() == [(b"ab", 4), (b"bc", 2), (b"bx", 1), (b"ca", 2)] and m.positions == 9
    assert _core.NgramCounts.from_bytes(m.to_bytes()).to_bytes() == m.to_bytes()
    assert pickle.loads(pickle.dumps(m)).to_bytes() == m.to_bytes()
    assert m.to_bytes()[:7] == b"TFCT\x01\x02\x02"  # the shared transport framing, kind 2, n = 2
    three = _core.mixedgram_count_piece(b"abcabcab", 3, a)
    assert three.items() == [(b"abc", 2), (b"bca", 2), (b"cab", 2)]
    with pytest.raises(TokenforgeError):
        _core.NgramCounts.merge([a, three])
    with pytest.raises(TokenforgeError):
        _core.mixedgram_count_piece(b"abc", 4, a)  # level 4 needs 3-grams
    with pytest.raises(TokenforgeError):
        _core.mixedgram_count_piece(b"a\x00b", 2)


def test_hostile_counts_bytes_are_format_errors():
    good = _core.NgramCounts.merge(
        [_core.mixedgram_count_piece(b"the cat sat", 2), _core.mixedgram_count_piece(b"on the mat", 2)]
    ).to_bytes()

    def offset(data: bytes) -> int:
        with pytest.raises(FormatError) as e:
            _core.NgramCounts.from_bytes(data)
        return e.value.offset

    for cut in range(len(good)):
        offset(good[:cut])
    assert offset(b"XXXX" + good[4:]) == 0
    assert offset(good[:4] + b"\x09" + good[5:]) == 4  # version
    assert offset(good[:5] + b"\x01" + good[6:]) == 5  # kind 1 is piece counts
    for i in range(6, len(good)):  # any other flip: the checksum
        bad = bytearray(good)
        bad[i] ^= 0x04
        assert offset(bytes(bad)) >= 6
    body = good[:-8]
    assert offset(seal(body[:6] + b"\x09" + body[7:])) == 6  # n
    assert offset(seal(body[:7] + b"\x00\x7f")) == 8  # more entries than the bytes hold
    assert offset(seal(body[:7] + b"\x05\x01\xe2\xc2\x01\x04")) == 7  # positions are not the sum of the counts
    assert offset(seal(body[:7] + b"\x02\x02\xe2\xc2\x01\x01\x00\x01")) == 13  # keys not ascending
    assert offset(seal(body[:7] + b"\x01\x01\xe1\x00\x01")) == 9  # not a 2-gram of non-zero bytes
    assert offset(seal(body[:7] + b"\x00\x01\xe2\xc2\x01\x00")) == 12  # a zero count
    assert offset(seal(body + b"\x00")) == len(body)  # stray bytes


def test_selector_refuses_counts_of_other_pieces():
    sel = _core.NgramSelector(10, [_core.mixedgram_edge(b"abcabc")])
    with pytest.raises(TokenforgeError, match="not of the same pieces"):
        sel.add(_core.mixedgram_count_piece(b"abcabcabc", 2))
    sel = _core.NgramSelector(10, [_core.mixedgram_edge(b"abcabc")])
    with pytest.raises(TokenforgeError, match="level 2"):
        sel.add(_core.mixedgram_count_piece(b"abcabc", 3, _core.mixedgram_count_piece(b"abcabc", 2)))
    with pytest.raises(TokenforgeError, match="not complete"):
        sel.finish()
    with pytest.raises(TokenforgeError, match="edge 0"):
        _core.NgramSelector(10, [(20, b"abc", b"")])


@SETTINGS
@given(data=st.binary(max_size=200), framed=st.booleans())
def test_any_bytes_read_or_format_error(data, framed):
    if framed:  # past the header and the checksum: the body's own checks
        data = seal(b"TFCT\x01\x02\x03" + data)
    try:
        c = _core.NgramCounts.from_bytes(data)
    except FormatError as e:
        assert 0 <= e.offset <= len(data)
    else:
        assert c.to_bytes() == data


# ---------------------------------------------------------------- a real cluster
def test_local_cluster_two_processes(files, tmp_path):
    import distributed

    want = saved(Mixedgram.train(files), tmp_path / "want.mxgram")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        got = Mixedgram.train(files, client=client, partition_bytes=3000, num_threads=1)
        assert saved(got, tmp_path / "got.mxgram") == want
        by_address = Mixedgram.train(files, client=cluster.scheduler_address, partition_bytes=5000)
        assert saved(by_address, tmp_path / "addr.mxgram") == want
        assert by_address.training == got.training == Mixedgram.train(files).training
