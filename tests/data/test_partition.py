"""Corpus partitions (tokenforge.data.partition): the documents of the planned
partitions, read one by one, are the single-machine reader's, for every
target size, with the same errors and progress; planning reads small windows."""

from __future__ import annotations

import gzip
import io
import json
import pickle
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import tokenforge.data.partition as partition
from tokenforge.data.corpus import corpus_paths, iter_documents
from tokenforge.data.partition import Partition, partition_documents, plan_partitions
from tokenforge.errors import CorpusError

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Meter:
    """A progress stand-in that sums its updates."""

    def __init__(self):
        self.n = 0

    def update(self, k):
        self.n += k


def outcome(docs_iter):
    """(documents read, the error's text/offset/line or None)."""
    docs = []
    try:
        for d in docs_iter:
            docs.append(d)
    except CorpusError as e:
        return docs, (type(e), str(e), e.offset, e.line)
    return docs, None


def check(corpus, target, **opts):
    """The guarantee for ``corpus`` at ``target`` bytes; returns the plan."""
    meter = Meter()
    want = outcome(iter_documents(corpus_paths(corpus), progress=meter, **opts))
    parts = plan_partitions(corpus, target_bytes=target, **opts)
    if currently_in_test_context():  # hypothesis statistics (--hypothesis-show-statistics)
        event("cut" if len(parts) > len(corpus_paths(corpus)) else "whole")
        event("error" if want[1] else "read through")
    assert [p.index for p in parts] == list(range(len(parts)))
    meters = [Meter() for _ in parts]

    def chained():
        for p, m in zip(parts, meters):
            yield from partition_documents(p, progress=m, **opts)

    got = outcome(chained())
    assert got == want
    if want[1] is None:  # read through: the same progress, each partition its nbytes
        assert [m.n for m in meters] == [p.nbytes for p in parts]
        assert sum(m.n for m in meters) == meter.n
    return parts


# ---- random .txt files ----------------------------------------------------------
TEXT_PIECES = ("a", "b", "a", "b", "\n", "\n", "\r\n", "\n\n", " ", "é", "日", "🙂", "<|e|>", "z" * 37)
PIECES = [t.encode() for t in TEXT_PIECES] + [b"\xff", b"\xe2\x82", b"\x80"]  # the last three: not UTF-8
SEPARATORS = ["aa", "aba", "a", "<|e|>", "🙂", "\n\n", "\n", "abab", "b\n"]


def _pieces(choices):
    """Short lists and long ones (a long file is cut more often)."""
    return st.one_of(st.lists(choices, max_size=20), st.lists(choices, min_size=40, max_size=300))


texts = _pieces(st.sampled_from(PIECES)).map(b"".join)


@st.composite
def separated(draw):
    """A separator and a text that holds it often (runs of it too, for the self-overlapping ones)."""
    sep = draw(st.sampled_from(SEPARATORS))
    pieces = draw(_pieces(st.sampled_from([*PIECES, *[sep.encode()] * 5])))
    return sep, b"".join(pieces)


targets = st.one_of(st.integers(1, 60), st.sampled_from([1, 2, 3, 10**9]))


@SETTINGS
@given(data=texts, target=targets, block_bytes=st.integers(4, 48), errors=st.sampled_from(["strict", "replace"]))
def test_txt_blocks_any_target(tmp_path, data, target, block_bytes, errors):
    path = tmp_path / "a.txt"
    path.write_bytes(data)
    check(str(path), target, block_bytes=block_bytes, errors=errors)


@SETTINGS
@given(
    sep_data=separated(),
    target=targets,
    block_bytes=st.integers(4, 48),
    errors=st.sampled_from(["strict", "replace", "ignore"]),
    search=st.sampled_from([1, 20, partition.SEARCH_BYTES, partition.SEARCH_BYTES]),
)
def test_txt_separators_any_target(tmp_path, sep_data, target, block_bytes, errors, search):
    sep, data = sep_data
    path = tmp_path / "a.txt"
    path.write_bytes(data)
    with mock.patch.object(partition, "SEARCH_BYTES", search):  # short searches miss cuts: fewer partitions
        check(str(path), target, split_on=sep, block_bytes=block_bytes, errors=errors)


def test_txt_is_cut_and_long_lines_and_multibyte_edges(tmp_path):
    # lines longer than a block, and multibyte characters at every block edge
    line = "ab€🙂" * 30 + "\n" + "x\n" * 20 + "日本" * 50 + "\r\n"
    path = tmp_path / "a.txt"
    path.write_text(line * 20, encoding="utf-8")
    for block_bytes in (4, 5, 6, 7, 33, 100):
        for target in (1, 50, 333, 1000):
            parts = check(str(path), target, block_bytes=block_bytes)
            assert len(parts) > 1
            assert all(p.start < (p.end or path.stat().st_size) for p in parts)


def test_separator_that_overlaps_itself(tmp_path):
    # "aa" in "aaa": the reader finds it at 0, never at 1; a cut after 1+2 would be wrong
    path = tmp_path / "a.txt"
    path.write_bytes(b"xaaay" * 7 + b"aaaaaaa" * 5 + b"xaay" * 9)
    for target in range(1, 60):
        check(str(path), target, split_on="aa", block_bytes=8)
        check(str(path), target, split_on="aaa", block_bytes=8)


def test_strict_error_names_the_true_offset(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"good line\n" * 50 + b"bad \xff here\n" + b"more\n" * 50)
    for split_on in (None, "\n"):
        parts = check(str(path), 64, block_bytes=32, split_on=split_on)
        assert len(parts) > 5
        with pytest.raises(CorpusError) as e:
            for p in parts:
                list(partition_documents(p, block_bytes=32, split_on=split_on))
        assert e.value.offset == 504


# ---- random .jsonl files ----------------------------------------------------------
def _line(kind: str, text: str) -> bytes:
    return {
        "doc": json.dumps({"text": text}).encode(),
        "utf8": json.dumps({"text": text}, ensure_ascii=False).encode(),
        "crlf": json.dumps({"text": text}).encode() + b"\r",
        "blank": b"",
        "spaces": b"  \t",
        "null": b'{"text": null}',
        "bom": "\ufeff".encode() + json.dumps({"text": text}).encode(),  # fine on line 1 only
        "surrogate": b'{"text": "x\\ud83d"}',
        "badjson": b'{"text": ',
        "array": b"[1]",
        "nofield": b'{"body": "x"}',
        "badutf8": b'{"text": "\xff"}',
    }[kind]


GOOD = ["doc", "utf8", "crlf", "blank", "spaces", "null"]
BAD = ["bom", "surrogate", "badjson", "array", "nofield", "badutf8"]
_texts = st.text(st.characters(codec="utf-8"), max_size=30)
lines = st.one_of(  # files without a bad line, and files with some
    _pieces(st.tuples(st.sampled_from(GOOD), _texts)), _pieces(st.tuples(st.sampled_from(GOOD * 8 + BAD), _texts))
)


@SETTINGS
@given(
    rows=lines,
    target=targets,
    last_newline=st.booleans(),
    block_bytes=st.integers(4, 64),
    errors=st.sampled_from(["strict", "replace", "ignore"]),
)
def test_jsonl_any_target(tmp_path, rows, target, last_newline, block_bytes, errors):
    data = b"\n".join(_line(kind, text) for kind, text in rows) + (b"\n" if last_newline and rows else b"")
    path = tmp_path / "a.jsonl"
    path.write_bytes(data)
    check(str(path), target, block_bytes=block_bytes, errors=errors)


def test_jsonl_error_in_a_later_partition_names_its_true_line(tmp_path):
    rows = [json.dumps({"text": f"document {i}"}) for i in range(300)]
    rows[250] = '{"text": oops}'
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    parts = check(str(path), 500)
    bad = next(p for p in parts if p.start <= path.read_bytes().index(b"oops") < (p.end or 10**9))
    assert bad.index >= 2
    with pytest.raises(CorpusError, match="line 251") as e:
        list(partition_documents(bad))
    assert e.value.line == 251


def test_bom_only_on_the_first_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes("\ufeff".encode() + b'{"text": "one"}\n' + b'{"text": "two"}\n' * 30)
    parts = check(str(path), 20)
    assert len(parts) > 3


# ---- files, formats and plans ---------------------------------------------------
def test_small_files_stay_whole_and_compressed_files_are_never_cut(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("one\ntwo\n" * 5)
    (tmp_path / "d" / "b.jsonl").write_text('{"text": "x"}\n' * 50)
    (tmp_path / "d" / "c.jsonl.gz").write_bytes(gzip.compress(b'{"text": "y"}\n' * 500))
    (tmp_path / "d" / "e.txt.gz").write_bytes(gzip.compress(b"line\n" * 500))
    parts = check(str(tmp_path / "d"), 100)
    by_file = {}
    for p in parts:
        by_file.setdefault(Path(p.path).name, []).append(p)
    assert len(by_file["a.txt"]) == 1 and len(by_file["b.jsonl"]) > 1
    assert len(by_file["c.jsonl.gz"]) == 1 and len(by_file["e.txt.gz"]) == 1
    assert all(p.start == 0 and p.end is None for p in by_file["c.jsonl.gz"] + by_file["a.txt"])
    whole = plan_partitions(str(tmp_path / "d"), target_bytes=10**9)
    assert [(p.start, p.end) for p in whole] == [(0, None)] * 4


def test_partitions_are_plain_data(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n' * 100)
    parts = plan_partitions(str(path), target_bytes=300)
    assert len(parts) > 3
    for p in parts:
        assert pickle.loads(pickle.dumps(p)) == p
        d = json.loads(json.dumps(p.describe()))
        assert d == {"index": p.index, "path": str(path), "start": p.start, "end": p.end, "row_groups": None}
    assert parts[0].start == 0 and parts[-1].end is None
    assert all(a.end == b.start for a, b in zip(parts, parts[1:]))


def test_bad_options(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x\n")
    for bad in (0, -1, 1.5, None):
        with pytest.raises(ValueError, match="target_bytes"):
            plan_partitions(str(path), target_bytes=bad)
    with pytest.raises(ValueError, match="block_bytes"):
        plan_partitions(str(path), block_bytes=2)
    with pytest.raises(ValueError, match="split_on"):
        partition_documents(Partition(0, str(path)), split_on="")
    with pytest.raises(CorpusError, match="suffix"):
        plan_partitions("file:///nowhere/a.csv")


def test_parquet_row_groups(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = [None if i % 11 == 3 else f"row {i} " + "é" * (i % 7) for i in range(60)]
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": texts, "n": list(range(60))}), path, row_group_size=7)
    assert pq.ParquetFile(path).num_row_groups == 9
    for target in (1, 200, 600, 10**9):
        parts = check(str(path), target)
        if target == 1:
            assert [p.row_groups for p in parts] == [(g, g + 1) for g in range(9)]
        if target == 10**9:
            assert [p.row_groups for p in parts] == [None]
        assert all(json.loads(json.dumps(p.describe()))["path"] == str(path) for p in parts)
    check(str(path), 1, text_field="missing")  # the reader's error, at the same place
    assert len(check(str(path), 1)) == 9
    # a compressed parquet file stays whole
    gz = tmp_path / "b.parquet.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert [p.row_groups for p in check(str(gz), 1)] == [None]


def test_file_urls_read_through_fsspec(tmp_path):
    pytest.importorskip("fsspec")
    jl = tmp_path / "a.jsonl"
    jl.write_text("".join(json.dumps({"text": f"doc {i} ü"}) + "\n" for i in range(100)), encoding="utf-8")
    tx = tmp_path / "b.txt"
    tx.write_text("line ü 🙂\n" * 200, encoding="utf-8")
    want = list(iter_documents([jl, tx], block_bytes=64))
    urls = [f"file://{jl}", f"file://{tx}"]
    for corpus in (urls, [urls[0], str(tx)]):
        parts = plan_partitions(corpus, target_bytes=300, block_bytes=64)
        assert len(parts) > 10
        assert parts[0].path == urls[0]
        meters = [Meter() for _ in parts]
        got = [d for p, m in zip(parts, meters) for d in partition_documents(p, block_bytes=64, progress=m)]
        assert got == want
        assert [m.n for m in meters] == [p.nbytes for p in parts]
    # a bad line in a later partition of a URL: its true line number
    jl.write_text("".join(json.dumps({"text": "x"}) + "\n" for i in range(100)) + "{bad\n", encoding="utf-8")
    parts = plan_partitions(urls[0], target_bytes=300)
    with pytest.raises(CorpusError, match="line 101"):
        list(partition_documents(parts[-1]))
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    pqp = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": [f"t{i}" for i in range(30)]}), pqp, row_group_size=4)
    parts = plan_partitions(f"file://{pqp}", target_bytes=1)
    assert len(parts) == 8
    assert [d for p in parts for d in partition_documents(p)] == [f"t{i}" for i in range(30)]


# ---- planning a large file reads small windows --------------------------------------
class _CountingFile(io.FileIO):
    read_bytes = 0

    def read(self, n=-1):
        data = super().read(n)
        _CountingFile.read_bytes += len(data)
        return data


def test_planning_a_200mb_file_reads_small_windows(tmp_path, monkeypatch):
    size = 200 << 20
    for name in ("big.txt", "big.jsonl"):
        path = tmp_path / name
        with open(path, "wb") as f:  # sparse: a newline and a separator every 64 KiB, zeros between
            f.truncate(size)
            for at in range(65000, size, 1 << 16):
                f.seek(at)
                f.write(b"<|e|>\n")
    monkeypatch.setattr(partition, "open", lambda p, mode, buffering: _CountingFile(p, "rb"), raising=False)
    for name, split_on in (("big.txt", None), ("big.txt", "<|e|>"), ("big.jsonl", None)):
        _CountingFile.read_bytes = 0
        parts = plan_partitions(str(tmp_path / name), target_bytes=16 << 20, split_on=split_on)
        assert 10 <= len(parts) <= 13
        assert all((p.end or size) - p.start >= 16 << 20 for p in parts[:-1])
        # the block chain: 200 blocks, each found with at most 64 KiB read backwards
        assert 0 < _CountingFile.read_bytes <= size // 12, (name, split_on, _CountingFile.read_bytes)
        if split_on or name.endswith(".jsonl"):  # one short forward search per cut
            assert _CountingFile.read_bytes <= 13 * (1 << 17)


def test_planning_a_generated_remote_file_reads_small_windows():
    fsspec = pytest.importorskip("fsspec")

    class Generated(fsspec.AbstractFileSystem):
        """A 200 MB file that exists only as a formula: lines of 1 000 bytes."""

        protocol = "tfgen"
        size_ = 200 << 20
        pattern = b"lorem ipsum <|e|> " * 55 + b"0123456789\n"  # 1001 bytes
        read_bytes = 0

        def info(self, path, **kwargs):
            return {"name": path, "size": self.size_, "type": "file"}

        def cat_file(self, path, start=None, end=None, **kwargs):
            start, end = start or 0, min(self.size_, self.size_ if end is None else end)
            Generated.read_bytes += end - start
            k, at = divmod(start, len(self.pattern))
            reps = (end - start) // len(self.pattern) + 2
            return (self.pattern * reps)[at : at + end - start]

    fsspec.register_implementation("tfgen", Generated, clobber=True)
    for name, split_on in (("big.txt", None), ("big.txt", "<|e|>"), ("big.jsonl", None)):
        Generated.read_bytes = 0
        parts = plan_partitions(f"tfgen://{name}", target_bytes=8 << 20, split_on=split_on)
        assert 21 <= len(parts) <= 25  # each about 8 MiB, a txt block (1 MiB) more at most
        assert Generated.read_bytes <= 200 * (16 << 10) + 26 * (16 << 10) * 2
        before = b"<|e|>" if split_on else b"\n"  # a cut follows a separator, or a newline
        for p in parts[1:]:
            at = p.start % len(Generated.pattern)
            assert (Generated.pattern * 2)[at - len(before) + len(Generated.pattern) :][: len(before)] == before


def test_local_files_never_import_fsspec(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n' * 100)
    code = (
        "import sys\n"
        "from tokenforge.data.partition import plan_partitions, partition_documents\n"
        f"parts = plan_partitions({str(path)!r}, target_bytes=100)\n"
        "assert len(parts) > 5 and [d for p in parts for d in partition_documents(p)] == ['x'] * 100\n"
        "assert 'fsspec' not in sys.modules, 'fsspec was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
