"""Streaming corpus readers and the progress helper."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenforge.data.corpus import Texts, corpus_bytes, corpus_files, iter_documents
from tokenforge.errors import CorpusError
from tokenforge.progress import Progress, progress_bar

zstandard = pytest.importorskip("zstandard")

TEXT = "first line\nsecond — line ü\n\nthird 日本語 line 🙂\n" * 40
SEP = "<|endoftext|>"


def write(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path``, compressed according to its suffix."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if path.name.endswith(".gz"):
        raw = gzip.compress(raw)
    elif path.name.endswith(".zst"):
        raw = zstandard.ZstdCompressor().compress(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return path


# ---- .txt blocks ------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.zst", ".TXT"])
def test_txt_blocks_end_at_line_boundaries(tmp_path, suffix):
    path = write(tmp_path / f"a{suffix}", TEXT)
    blocks = list(iter_documents(path, block_bytes=100))
    assert "".join(blocks) == TEXT
    assert len(blocks) > 10
    assert all(len(blk.encode()) <= 100 for blk in blocks)
    assert all(blk.endswith("\n") for blk in blocks)


def test_txt_single_block_when_small(tmp_path):
    path = write(tmp_path / "a.txt", "no newline at end")
    assert list(iter_documents(path)) == ["no newline at end"]
    assert list(iter_documents(write(tmp_path / "e.txt", ""))) == []


def test_txt_long_line_is_cut_at_character_boundaries(tmp_path):
    line = "ab€🙂" * 100  # 1-, 3- and 4-byte characters, no newline
    path = write(tmp_path / "long.txt", line)
    for block_bytes in (4, 5, 6, 7, 33):
        blocks = list(iter_documents(path, block_bytes=block_bytes))
        assert "".join(blocks) == line
        assert all(0 < len(blk.encode()) <= block_bytes for blk in blocks)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200), block_bytes=st.integers(4, 40))
def test_txt_blocks_round_trip(tmp_path_factory, text, block_bytes):
    path = write(tmp_path_factory.mktemp("t") / "x.txt", text)
    blocks = list(iter_documents(path, block_bytes=block_bytes))
    assert "".join(blocks) == text  # no newline translation: "\r\n" stays as it is
    assert all(len(blk.encode()) <= block_bytes for blk in blocks)


def test_txt_reading_is_bounded_in_memory(tmp_path):
    path = tmp_path / "big.txt"
    line = ("x" * 99 + "\n").encode()
    with open(path, "wb") as f:
        for _ in range(40):
            f.write(line * 1000)  # 4 MB in all
    tracemalloc.start()
    try:
        total = 0
        for block in iter_documents(path, block_bytes=64 * 1024):
            total += len(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 4_000_000
    assert peak < 1_000_000  # a few blocks, never the file


# ---- .txt split on a separator ---------------------------------------------------
@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.zst"])
def test_split_on_yields_documents_without_separator(tmp_path, suffix):
    data = f"story one\n{SEP}\nstory two ü\n{SEP}{SEP}last"
    path = write(tmp_path / f"s{suffix}", data)
    for block_bytes in (4, 5, 13, 1 << 20):
        docs = list(iter_documents(path, split_on=SEP, block_bytes=block_bytes))
        assert docs == ["story one\n", "\nstory two ü\n", "last"]


@settings(max_examples=100, deadline=None)
@given(docs=st.lists(st.text(alphabet="ab\n é|>", max_size=30), max_size=8), block_bytes=st.integers(4, 32))
def test_split_on_round_trip(tmp_path_factory, docs, block_bytes):
    path = write(tmp_path_factory.mktemp("s") / "x.txt", SEP.join(docs))
    got = list(iter_documents(path, split_on=SEP, block_bytes=block_bytes))
    assert got == [d for d in docs if d]


def test_split_on_does_not_apply_to_text_sources():
    assert list(iter_documents(iter([f"a{SEP}b"]), split_on=SEP)) == [f"a{SEP}b"]


# ---- UTF-8 errors ---------------------------------------------------------------
def test_invalid_utf8_names_file_and_offset(tmp_path):
    path = write(tmp_path / "bad.txt", b"hello\nwor\xffld\n")
    for block_bytes in (4, 1 << 20):
        with pytest.raises(CorpusError, match=r"bad\.txt, byte offset 9: invalid UTF-8") as info:
            list(iter_documents(path, block_bytes=block_bytes))
        assert info.value.offset == 9 and info.value.path == str(path)
    assert "".join(iter_documents(path, errors="replace")) == "hello\nwor\ufffdld\n"


def test_invalid_utf8_in_split_documents_and_compressed_files(tmp_path):
    path = write(tmp_path / "bad.txt.gz", b"ok" + SEP.encode() + b"x\xc3(")
    with pytest.raises(CorpusError, match=r"byte offset 16: .*decompressed data"):
        list(iter_documents(path, split_on=SEP, block_bytes=5))
    assert list(iter_documents(path, split_on=SEP, errors="replace")) == ["ok", "x\ufffd("]


def test_unknown_error_handler_is_refused_up_front(tmp_path):
    with pytest.raises(LookupError):
        iter_documents(write(tmp_path / "a.txt", "x"), errors="bogus")


# ---- .jsonl -----------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_jsonl(tmp_path, suffix):
    rows = [{"text": "one"}, {"text": "two\nlines ü", "id": 2}, {"text": None}, {"text": "three"}]
    data = "\ufeff" + "\n".join(json.dumps(r) for r in rows) + "\n\n   \n"
    path = write(tmp_path / f"d{suffix}", data)
    assert list(iter_documents(path, block_bytes=7)) == ["one", "two\nlines ü", "three"]


def test_jsonl_text_field(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"body": "x", "text": "y"}\n')
    assert list(iter_documents(path, text_field="body")) == ["x"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"line 3: not valid JSON"),
        ("[1, 2]", r"line 3: expected a JSON object, got list"),
        ('{"body": "x"}', r"line 3: no 'text' field \(fields: 'body'\)"),
        ('{"text": 5}', r"line 3: field 'text' is int, expected a string"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "d.jsonl", '{"text": "a"}\n\n' + line + "\n")
    with pytest.raises(CorpusError, match=r"d\.jsonl, " + message) as info:
        list(iter_documents(path))
    assert info.value.line == 3


def test_jsonl_invalid_utf8_names_line_and_offset(tmp_path):
    path = write(tmp_path / "d.jsonl", b'{"text": "a"}\n{"text": "\xff"}\n')
    with pytest.raises(CorpusError, match=r"d\.jsonl, line 2, byte offset 24: invalid UTF-8"):
        list(iter_documents(path))


# ---- .parquet --------------------------------------------------------------------
@pytest.fixture
def parquet_path(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"id": list(range(5)), "text": ["a", "b ü", None, "d", "e"]})
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, row_group_size=2)
    assert pq.ParquetFile(path).num_row_groups == 3
    return path


def test_parquet_by_row_groups(parquet_path):
    assert list(iter_documents(parquet_path)) == ["a", "b ü", "d", "e"]


def test_parquet_compressed(parquet_path, tmp_path):
    gz = write(tmp_path / "p.parquet.gz", parquet_path.read_bytes())
    assert list(iter_documents(gz)) == ["a", "b ü", "d", "e"]


def test_parquet_errors(parquet_path, tmp_path):
    with pytest.raises(CorpusError, match=r"no column 'body' \(columns: id, text\)"):
        list(iter_documents(parquet_path, text_field="body"))
    with pytest.raises(CorpusError, match="column 'id' has type int64"):
        list(iter_documents(parquet_path, text_field="id"))
    junk = write(tmp_path / "junk.parquet", b"not parquet at all")
    with pytest.raises(CorpusError, match=r"junk\.parquet: cannot read as parquet"):
        list(iter_documents(junk))


def test_missing_optional_packages_say_which_extra(tmp_path, monkeypatch):
    zst = write(tmp_path / "a.txt.zst", "x")
    pqf = write(tmp_path / "a.parquet", b"whatever")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(CorpusError, match=r"a\.txt\.zst: .*zstandard.*tokenforge\[io\]"):
        list(iter_documents(zst))
    with pytest.raises(CorpusError, match=r"a\.parquet: .*pyarrow.*tokenforge\[io\]"):
        list(iter_documents(pqf))


def test_corrupt_compressed_files_name_the_file(tmp_path):
    bad_gz = write(tmp_path / "bad.txt.gz", b"")
    bad_gz.write_bytes(b"\x1f\x8b\x08\x00garbage-garbage")
    with pytest.raises(CorpusError, match=r"bad\.txt\.gz: corrupt \.gz stream"):
        list(iter_documents(bad_gz))
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress(TEXT.encode())[:-20])
    with pytest.raises(CorpusError, match=r"cut\.txt\.gz: corrupt \.gz stream"):
        list(iter_documents(truncated))
    bad_zst = tmp_path / "bad.jsonl.zst"
    bad_zst.write_bytes(b"definitely not zstd")
    with pytest.raises(CorpusError, match=r"bad\.jsonl\.zst: corrupt \.zst stream"):
        list(iter_documents(bad_zst))


# ---- sources ----------------------------------------------------------------------
def test_directory_is_read_recursively_in_sorted_order(tmp_path):
    write(tmp_path / "b.txt", "B\n")
    write(tmp_path / "a" / "z.jsonl", '{"text": "AZ"}\n')
    write(tmp_path / "a" / "y.txt.gz", "AY\n")
    write(tmp_path / "c" / "notes.md", "skipped: unknown suffix")
    write(tmp_path / ".hidden" / "h.txt", "skipped: hidden")
    write(tmp_path / "c" / ".h.txt", "skipped: hidden")
    assert list(iter_documents(tmp_path)) == ["AY\n", "AZ", "B\n"]
    assert list(iter_documents(str(tmp_path))) == ["AY\n", "AZ", "B\n"]
    assert [p.name for p in corpus_files(tmp_path)] == ["y.txt.gz", "z.jsonl", "b.txt"]


def test_empty_directory_is_an_error(tmp_path):
    (tmp_path / "only.md").write_text("x")
    with pytest.raises(CorpusError, match="holds no corpus files"):
        iter_documents(tmp_path)


def test_list_of_paths(tmp_path):
    a = write(tmp_path / "a.txt", "A")
    b = write(tmp_path / "b.jsonl", '{"text": "B"}\n')
    assert list(iter_documents([b, a])) == ["B", "A"]


def test_iterators_of_str_pass_through():
    assert list(iter_documents(iter(["x", "y"]))) == ["x", "y"]
    assert list(iter_documents(t for t in ("p", "q"))) == ["p", "q"]
    assert list(iter_documents(Texts(["x", "y"]))) == ["x", "y"]
    assert list(iter_documents([])) == []


def test_a_list_of_str_names_files_never_texts(tmp_path):
    a = write(tmp_path / "a.txt", "A")
    assert list(iter_documents([str(a)])) == ["A"]
    assert corpus_files([str(a), a]) == [a, a]
    for bad in (["x", "y"], ("x",), [str(a), "some text"], "some text"):
        with pytest.raises(CorpusError, match="is not an existing file or directory; a str or a list of str names"):
            iter_documents(bad)
        with pytest.raises(CorpusError, match="iterator of str"):
            corpus_bytes(bad)


def test_non_str_items_name_their_index(tmp_path):
    with pytest.raises(TypeError, match=r"item 2 is bytes, expected str"):
        list(iter_documents(iter(["a", "b", b"c"])))
    with pytest.raises(CorpusError, match=r"'b.txt' \(item 1\) is not an existing file"):
        iter_documents([tmp_path / "a.txt", "b.txt"])
    with pytest.raises(TypeError, match=r"corpus item 1 is bytes"):
        iter_documents((tmp_path / "b.txt", b"c"))
    with pytest.raises(TypeError, match="source must be"):
        iter_documents(42)
    with pytest.raises(TypeError, match="source is bytes"):
        iter_documents(b"text")


def test_missing_and_unsupported_files_fail_at_call_time(tmp_path):
    with pytest.raises(CorpusError, match=r"nope\.txt' is not an existing file"):
        iter_documents(str(tmp_path / "nope.txt"))
    with pytest.raises(CorpusError, match=r"data\.csv: unsupported corpus file suffix"):
        iter_documents(write(tmp_path / "data.csv", "a,b"))
    with pytest.raises(ValueError, match="block_bytes"):
        iter_documents(iter(["x"]), block_bytes=2)
    with pytest.raises(ValueError, match="split_on"):
        iter_documents(iter(["x"]), split_on="")


def test_corpus_bytes(tmp_path):
    a = write(tmp_path / "a.txt", "hello")
    b = write(tmp_path / "b.txt.gz", "hello" * 100)
    assert corpus_bytes(a) == 5
    assert corpus_bytes([a, b]) == 5 + b.stat().st_size
    assert corpus_bytes(tmp_path) == 5 + b.stat().st_size
    assert corpus_bytes(Texts(["ab", "é"])) == 4
    assert corpus_bytes(iter(["ab"])) is None


# ---- progress ---------------------------------------------------------------------
def test_progress_lines_mode():
    out = io.StringIO()
    with progress_bar(total=2_000_000, desc="reading", unit="B", mode="lines", file=out, interval=0) as p:
        p.update(1_000_000)
        p.update(1_000_000)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # one per update, and the final line
    assert lines[0].startswith("reading: 1.0 MB / 2.0 MB (50.0%), ")
    assert lines[-1].startswith("reading: 2.0 MB / 2.0 MB (100.0%), ")


def test_progress_lines_are_quiet_for_short_jobs():
    out = io.StringIO()
    with progress_bar(total=10, unit="docs", mode="lines", file=out, interval=3600) as p:
        p.update(10)
    assert out.getvalue() == "" and p.n == 10


def test_progress_auto_on_a_non_terminal_is_lines_and_disabled_is_silent():
    out = io.StringIO()
    assert Progress(file=out).mode == "lines"
    p = Progress(total=5, enabled=False, file=out, interval=0)
    p.update(5)
    p.close()
    assert p.mode == "off" and out.getvalue() == ""


def test_progress_forced_tqdm():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    with progress_bar(total=100, desc="bar", unit="docs", mode="tqdm", file=out) as p:
        p.update(100)
    assert p.mode == "tqdm" and "bar" in out.getvalue() and "100/100" in out.getvalue()


def test_iter_documents_reports_bytes_read(tmp_path, parquet_path):
    files = [
        write(tmp_path / "a.txt", TEXT),
        write(tmp_path / "b.txt.gz", TEXT),
        write(tmp_path / "c.jsonl.zst", '{"text": "x"}\n' * 100),
        parquet_path,
    ]
    p = Progress(total=corpus_bytes(files), enabled=False)
    docs = list(iter_documents(files, block_bytes=64, progress=p))
    assert docs and p.n == corpus_bytes(files)
    q = Progress(enabled=False)
    list(iter_documents(Texts(["ab", "é"]), progress=q))
    assert q.n == 4


def test_progress_true_makes_its_own_bar(tmp_path, capsys):
    path = write(tmp_path / "a.txt", TEXT)
    assert "".join(iter_documents(path, progress=True)) == TEXT
    assert capsys.readouterr().err == ""  # not a terminal and short: line mode stays quiet


def test_optional_packages_are_imported_lazily():
    import tokenforge.data.corpus as corpus_module

    src = str(Path(corpus_module.__file__).parents[2])
    code = (
        "import sys, tokenforge.data.corpus, tokenforge.data.default_corpus, tokenforge.chat\n"
        "heavy = [m for m in ('pyarrow', 'zstandard', 'tqdm', 'regex') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# ---- the one corpus rule of every family (tokenforge.data.corpus.corpus_paths) ------------------
def test_every_family_reads_files_with_train_and_texts_with_train_from_iterator(tmp_path):
    import tokenforge as tf
    from tokenforge.errors import CorpusError

    text = "the quick brown fox jumps over the lazy dog\n" * 30
    f = tmp_path / "c.txt"
    f.write_text(text, encoding="utf-8")
    trainers = {
        "bpe": (
            lambda c: tf.BPETokenizer.train(c, 300, progress=False),
            lambda t: tf.BPETokenizer.train_from_iterator(t, 300, progress=False),
        ),
        "lz78": (
            lambda c: tf.LZ78Tokenizer.train(c, 300, strategy="standard", progress=False),
            lambda t: tf.LZ78Tokenizer.train_from_iterator(t, 300, strategy="standard", progress=False),
        ),
        "mixedgram": (lambda c: tf.Mixedgram.train(c), lambda t: tf.Mixedgram.train_from_iterator(t)),
        "growing": (
            lambda c: tf.GrowingBPETokenizer.train(c, 400),
            lambda t: tf.GrowingBPETokenizer.train_from_iterator(t, 400),
        ),
    }
    probe = "the lazy fox"
    for name, (from_files, from_texts) in trainers.items():
        for corpus in (str(f), f, [str(f)], [f]):
            assert from_files(corpus).encode(probe) == from_texts([text]).encode(probe), (name, corpus)
        for bad in ("the quick brown fox", ["the quick brown fox"], "x" * 5000):
            with pytest.raises(CorpusError, match="not an existing file.*train_from_iterator"):
                from_files(bad)
        with pytest.raises(TypeError, match="iterable of str"):
            from_texts("a single text")


def test_jsonl_blocks_of_several_files_read_every_line(tmp_path):
    """Blocks of several files in a row (the block encoder's input): each file whole,
    whatever ends the previous file's last block (a byte range applies to one file only)."""
    from tokenforge.data.corpus import jsonl_block_documents, jsonl_blocks

    files = []
    for k in range(3):
        p = tmp_path / f"f{k}.jsonl"
        p.write_text("".join(json.dumps({"text": f"file {k} line {i} " * (i % 7 + 1)}) + "\n" for i in range(200)))
        files.append(p)
    want = list(iter_documents(files))
    for block_bytes in (1, 64, 1000, 1 << 20):
        got, line = [], {}
        for block in jsonl_blocks(files, block_bytes):
            first = line.get(block.path, 1)
            docs = list(jsonl_block_documents(block, first))
            line[block.path] = first + block.count_lines()
            got += docs
        assert got == want, block_bytes
