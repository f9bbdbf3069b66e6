"""LZ78 TSV files: exact layout, escapes, the seed's leniency, and every bad-input case."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenforge import LZ78Tokenizer, load
from tokenforge.errors import FormatError, VersionError
from tokenforge.formats.lz78_tsv import LZ78Data, read_lz78_tsv, sniff_lz78_tsv, write_lz78_tsv

SEED = "1\t0\th\th\n2\t0\te\te\n3\t1\te\the\n4\t3\tl\thel\n5\t4\tl\thell\n6\t5\to\thello\n"
HEADER = "# tokenforge lz78 v1\n# format=lz78\n# structure=tree\n"


def write(tmp_path, text: str, name="d.tsv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_written_layout_is_the_documented_one(tmp_path):
    tok = LZ78Tokenizer.from_tsv(write(tmp_path, SEED))
    tok.save(tmp_path / "out.tsv")
    lines = (tmp_path / "out.tsv").read_text().split("\n")
    assert lines[0] == "# tokenforge lz78 v2"
    assert lines[1].startswith("# checksum=sha256:") and len(lines[1]) == len("# checksum=sha256:") + 64
    assert lines[2] == "# format=lz78"
    assert lines[3] == "# structure=tree"
    assert lines[4] == "# N=6"
    assert "code\tparent_code\tchar\tpattern\toutput" in lines
    assert "6\t5\to\thello\t1" in lines
    assert lines[-1] == ""


def test_escapes_round_trip(tmp_path):
    nodes = [(0, "\t", "\t", True), (1, "\n", "\t\n", True), (0, "\\", "\\", True), (3, "\r", "\\\r", False)]
    d = LZ78Data("tree", nodes, {"chunking": False})
    write_lz78_tsv(tmp_path / "e.tsv", d)
    raw = (tmp_path / "e.tsv").read_text()
    assert "2\t1\t\\n\t\\t\\n\t1" in raw
    back = read_lz78_tsv(tmp_path / "e.tsv")
    assert back.nodes == nodes
    tok = LZ78Tokenizer(back)
    assert tok.encode("\t\n") == [2]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=20, unique=True))
def test_any_flat_dictionary_round_trips(tmp_path, words):
    nodes = [(0, w[-1], w, True) for w in words]
    d = LZ78Data("flat", nodes, {})
    write_lz78_tsv(tmp_path / "f.tsv", d)
    assert read_lz78_tsv(tmp_path / "f.tsv").nodes == nodes


def test_seed_file_is_read_raw(tmp_path):
    # a seed file has no escapes: a backslash is a backslash
    p = write(tmp_path, "1\t0\t\\\t\\\n2\t1\tn\t\\n\n")
    d = read_lz78_tsv(p)
    assert [n[2] for n in d.nodes] == ["\\", "\\n"]


def test_seed_comments_blank_lines_and_remapping(tmp_path):
    p = write(tmp_path, "# a comment\n\n10\t0\th\th\n30\t10\ti\thi\n\n20\t0\te\te\n")
    tok = LZ78Tokenizer.from_tsv(p)
    # codes 10, 20, 30 become 1, 2, 3 in sorted order; parents follow
    assert tok.data.nodes == [(0, "h", "h", True), (0, "e", "e", True), (1, "i", "hi", True)]
    assert tok.encode("hi") == [3]


def test_seed_column_name_row_is_skipped(tmp_path):
    p = write(tmp_path, "code\tparent_code\tchar\tpattern\n" + SEED)
    assert LZ78Tokenizer.from_tsv(p).encode("hello") == [6]


def test_lenient_reads_the_seed_loader_way(tmp_path):
    p = write(tmp_path, "1\t0\th\th\n2\t9\te\the\n")
    with pytest.raises(FormatError, match="parent_code 9 does not exist"):
        read_lz78_tsv(p)
    d = read_lz78_tsv(p, strict=False)
    assert d.nodes[1][0] == 0  # a missing parent becomes the root
    assert LZ78Tokenizer.from_tsv(p, strict=False).encode("he") == [2]


def test_prefix_only_rows(tmp_path):
    text = HEADER + "1\t0\th\th\t0\n2\t1\te\the\t1\n3\t0\tx\tx\t1\n"
    tok = LZ78Tokenizer.from_tsv(write(tmp_path, text))
    assert tok.num_codes == 2
    assert tok.encode("hex") == [1, 2]  # "he" is id 1, "x" is id 2; "h" alone has no id
    assert tok.encode("h") == [tok.byte_fallback_id(ord("h"))]


def test_sniff(tmp_path):
    p = write(tmp_path, SEED)
    assert sniff_lz78_tsv(p, p.read_bytes()[:4096])
    q = write(tmp_path, SEED, name="d.txt")
    assert not sniff_lz78_tsv(q, q.read_bytes())
    r = write(tmp_path, "a\tb\n", name="x.tsv")
    assert not sniff_lz78_tsv(r, r.read_bytes())
    assert sniff_lz78_tsv(tmp_path / "x", HEADER.encode())


def test_atomic_write_leaves_previous_file(tmp_path, monkeypatch):
    tok = LZ78Tokenizer.from_tsv(write(tmp_path, SEED))
    target = tmp_path / "keep.tsv"
    tok.save(target)
    before = target.read_bytes()
    import os

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        tok.save(target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".keep")] == []


# ---- every bad input names the file and the line ------------------------------------
BAD_LZ78 = [
    # (file text, line, message fragment)
    ("1\t0\th\th\n2\t0\te\n", 2, "expected 4 tab-separated columns"),
    ("1\t0\th\th\n2\t0\te\te\textra\n", 2, "expected 4 tab-separated columns"),
    ("1\t0\th\th\nx\t0\te\te\n", 2, "code 'x' is not an integer"),
    ("1\t0\th\th\n2\ty\te\te\n", 2, "parent_code 'y' is not an integer"),
    ("1\t0\th\th\n1\t0\te\te\n", 2, "duplicate code 1"),
    ("1\t0\th\th\n2\t7\te\the\n", 2, "parent_code 7 does not exist"),
    ("1\t0\th\th\n2\t1\te\thx\n", 2, "is not its parent's pattern"),
    ("1\t0\th\th\n2\t0\th\th\n", 2, "already defined on line 1"),
    ("1\t0\th\th\n2\t0\tee\tee\n", 2, "exactly one character"),
    ("1\t0\th\th\n-2\t0\te\te\n", 2, "at least 1"),
    ("1\t0\th\th\n2\t0\t\t\n", 2, "empty pattern"),
]


@pytest.mark.parametrize("text,line,fragment", BAD_LZ78)
def test_bad_seed_lz78(tmp_path, text, line, fragment):
    p = write(tmp_path, text)
    with pytest.raises(FormatError) as e:
        LZ78Tokenizer.from_tsv(p, "lz78")
    assert e.value.line == line
    assert e.value.path == str(p)
    assert fragment in str(e.value)
    assert str(p) in str(e.value) and f"line {line}" in str(e.value)


BAD_OURS = [
    (HEADER + "1\t0\th\th\t1\n2\t1\te\the\t2\n", 5, "output must be 1 or 0"),
    (HEADER + "1\t0\th\th\n2\t1\t\\x\th\\x\n", 5, "bad escape \\x"),
    (HEADER + "1\t0\th\th\n2\t1\te\the\\\n", 5, "lone backslash"),
    (HEADER + "1\t0\th\th\n2\t1\te\n", 5, "expected 4 or 5 tab-separated columns"),
    (HEADER + "1\t0\th\th\n2\t1\tx\thy\n", 5, "is not its parent's pattern"),
]


@pytest.mark.parametrize("text,line,fragment", BAD_OURS)
def test_bad_tokenforge_lz78(tmp_path, text, line, fragment):
    p = write(tmp_path, text)
    with pytest.raises(FormatError) as e:
        load(p)
    assert e.value.line == line, str(e.value)
    assert fragment in str(e.value)


def test_unknown_version(tmp_path):
    p = write(tmp_path, "# tokenforge lz78 v3\n" + SEED)
    with pytest.raises(VersionError) as e:
        LZ78Tokenizer.from_tsv(p)
    assert e.value.line == 1 and "version 3" in str(e.value) and str(p) in str(e.value)
    with pytest.raises(FormatError):
        LZ78Tokenizer.from_tsv(write(tmp_path, "# tokenforge lz78 vX\n" + SEED))


def test_header_n_mismatch(tmp_path):
    with pytest.raises(FormatError, match="N=7"):
        LZ78Tokenizer.from_tsv(write(tmp_path, "# tokenforge lz78 v1\n# N=7\n" + SEED))


def test_not_utf8_names_the_line(tmp_path):
    p = tmp_path / "b.tsv"
    p.write_bytes(b"1\t0\th\th\n2\t0\t\xff\t\xff\n")
    with pytest.raises(FormatError) as e:
        LZ78Tokenizer.from_tsv(p)
    assert e.value.line == 2 and "UTF-8" in str(e.value)


BAD_COMPRESSED = [
    ("1\th\t0\t1\th\n2\te\t1\t2\n", 2, "expected 5 tab-separated columns"),
    ("1\th\t0\t1\th\nz\te\t1\t2\the\n", 2, "node_idx 'z' is not an integer"),
    ("1\th\t0\t1\th\n2\te\t1\tq\the\n", 2, "output_code 'q' is not an integer"),
    ("1\th\t0\t1\th\n1\te\t0\t2\te\n", 2, "duplicate node_idx 1"),
    ("1\th\t0\t1\th\n2\te\t0\t1\te\n", 2, "duplicate output_code 1"),
    ("1\th\t0\t1\th\n2\te\t5\t2\the\n", 2, "parent_idx 5 does not exist"),
    ("1\th\t0\t1\th\n2\tel\t1\t2\the\n", 2, "is not its parent's pattern"),
    ("1\th\t0\t1\th\n2\t\t1\t2\th\n", 2, "empty edge_label"),
]


@pytest.mark.parametrize("text,line,fragment", BAD_COMPRESSED)
def test_bad_compressed(tmp_path, text, line, fragment):
    p = write(tmp_path, text)
    with pytest.raises(FormatError) as e:
        LZ78Tokenizer.from_tsv(p, "compressed")
    assert e.value.line == line, str(e.value)
    assert fragment in str(e.value)
    assert str(p) in str(e.value)


def test_compressed_root_row_and_empty_output(tmp_path):
    text = "0\t\t-1\t-1\t\n1\th\t0\t\th\n2\tel\t1\t7\thel\n3\ti\t1\t3\thi\n"
    tok = LZ78Tokenizer.from_tsv(write(tmp_path, text), "compressed")
    assert tok.num_codes == 2  # output codes 3 and 7 become 1 and 2 (sorted)
    assert tok.encode("hel") == [2]
    assert tok.encode("hi") == [1]


def test_compressed_escapes_and_header(tmp_path):
    tok = LZ78Tokenizer(LZ78Data("tree", [(0, "\t", "\t", True), (1, "a", "\ta", True)], {}))
    tok.save_tsv(tmp_path / "c.tsv", "compressed")
    raw = (tmp_path / "c.tsv").read_text()
    assert raw.startswith("# tokenforge lz78 v2\n# checksum=sha256:") and "\n# format=compressed\n" in raw
    assert "1\t\\t\t0\t1\t\\t\n" in raw
    back = load(tmp_path / "c.tsv")
    assert back.encode("\ta\t") == [2, 1]


def test_nothing_half_loaded(tmp_path):
    """A bad row at the end leaves an existing tokenizer untouched (from_tsv returns nothing)."""
    good = LZ78Tokenizer.from_tsv(write(tmp_path, SEED))
    bad = write(tmp_path, SEED + "7\t99\tx\thellox\n", name="bad.tsv")
    with pytest.raises(FormatError):
        good = LZ78Tokenizer.from_tsv(bad)
    assert good.encode("hello") == [6] and good.num_codes == 6


@pytest.mark.parametrize("fmt", ["lz78", "compressed"])
def test_our_file_with_its_comment_lines_stripped_is_refused(tmp_path, fmt):
    """grep -v '^#' drops our header and checksum: the rest must not load as a seed file (issue 32 item 5)."""
    tok = LZ78Tokenizer(LZ78Data("tree", [(0, "\t", "\t", True), (1, "\n", "\t\n", True), (0, "a", "a", True)], {}))
    tok.save_tsv(tmp_path / "ours.tsv", fmt)
    lines = (tmp_path / "ours.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    stripped = write(tmp_path, "".join(line for line in lines if not line.startswith("#")), "stripped.tsv")
    row = next(i for i, line in enumerate(stripped.read_text().splitlines()) if line) + 1
    for read in (read_lz78_tsv, load, LZ78Tokenizer.from_tsv):
        with pytest.raises(FormatError, match="column-name row but not its header lines") as e:
            read(stripped)
        assert e.value.line == row
    # a seed file with the seed's own column-name row still reads
    assert LZ78Tokenizer.from_tsv(write(tmp_path, "code\tparent_code\tchar\tpattern\n" + SEED)).encode("hello") == [6]


@pytest.mark.parametrize("text", ["code\tparent_code\tchar\tpattern\n", "", "# only a comment\n\n"])
def test_a_seed_file_without_rows_is_refused(tmp_path, text):
    """Cut to its column-name row, a seed file loaded empty and then could not be saved (issue 32 item 10)."""
    with pytest.raises(FormatError, match="no dictionary entries"):
        read_lz78_tsv(write(tmp_path, text))


def test_a_lone_surrogate_special_token_is_a_special_token_error():
    from tokenforge import BPETokenizer
    from tokenforge.errors import SpecialTokenError

    for train in (
        lambda: BPETokenizer.train_from_iterator(
            ["hello world"] * 5, 270, special_tokens=["<a\ud800>"], progress=False
        ),
        lambda: LZ78Tokenizer.train_from_iterator(["hello world"] * 5, vocab_size=300, special_tokens=["<\udfff>"]),
    ):
        with pytest.raises(SpecialTokenError, match=r"special_tokens\[0\] .* holds a lone surrogate"):
            train()
