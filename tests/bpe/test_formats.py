"""tokenforge-bpe JSON and tiktoken files: round trips, strictness, atomic writes."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from bpe_strategies import ANY_SPECIAL_TEXT, bpe_data, canonical, fail_writes_halfway, same_vocabulary
from tokenforge import BPETokenizer
from tokenforge.errors import FormatError, VersionError
from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.patterns import GPT2_PATTERN, NAMED_PATTERNS, O200K_PATTERN
from tokenforge.formats.tfjson import (
    FORMAT_VERSION,
    read_tfjson,
    render_bytes,
    sniff_tfjson,
    tfjson_text,
    vocab_view_path,
    write_tfjson,
)
from tokenforge.formats.tiktoken_io import (
    data_from_ranks,
    known_rank_file,
    mergeable_ranks,
    read_tiktoken_file,
    sniff_tiktoken,
    to_tiktoken,
    write_tiktoken_file,
)

SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def small_data(**kw) -> BPEData:
    """bytes 0..255, ab=256, abc=257, ' abc'=258, one special at 259."""
    fields = dict(
        byte_ids=list(range(256)),
        merges=[(97, 98, 256), (256, 99, 257), (32, 257, 258)],
        special_tokens={"<|endoftext|>": 259},
        pattern=GPT2_PATTERN,
        pattern_name="gpt2",
        training={"vocab_size": 260, "tie_break": "pair_ids"},
    )
    fields.update(kw)
    return BPEData(**fields)


def line_containing(path, needle: str) -> int:
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


def rewrite_json(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=1))


# ---------------------------------------------------------------- tfjson round trips
@SETTINGS
@given(data=bpe_data(unique_bytes=False, specials=ANY_SPECIAL_TEXT))
def test_tfjson_round_trip_any_vocabulary(tmp_path, data):
    path = tmp_path / "tok.json"
    write_tfjson(path, data)
    assert read_tfjson(path) == data
    # deterministic: the same data always gives the same bytes
    assert path.read_text(encoding="utf-8") == tfjson_text(data)
    assert sniff_tfjson(path, path.read_bytes()[:4096])


@SETTINGS
@given(data=bpe_data(max_merges=8), split=st.booleans())
def test_tfjson_records_split_specials(tmp_path, data, split):
    """seed 003's special-token policy is a recorded property: "split_specials":
    true (version 2), written only when true."""
    data.split_specials = split
    path = tmp_path / "tok.json"
    write_tfjson(path, data)
    assert read_tfjson(path) == data
    doc = json.loads(path.read_text())
    assert doc["version"] == 2 and ("split_specials" in doc) == split
    lines = path.read_text().split("\n")
    assert lines[-2] == "}" and lines[-3].startswith('  "checksum": "sha256:')
    assert (lines[-4] == '  "split_specials": true,') == split


def test_tfjson_layout_is_the_documented_one(tmp_path):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    text = path.read_text()
    lines = text.split("\n")
    assert lines[:4] == ["{", '  "format": "tokenforge-bpe",', '  "version": 2,', '  "pattern_name": "gpt2",']
    assert '  "first_merge_id": 256,' in lines
    assert "    [97, 98]," in lines and "    [32, 257]" in lines
    assert '    "<|endoftext|>": 259' in lines
    assert text.endswith("}\n") and "merge_ids" not in text
    assert lines[-3].startswith('  "checksum": "sha256:') and lines[-4].startswith('  "training": ')
    assert text.isascii()


def test_tfjson_non_contiguous_merge_ids_are_stored(tmp_path):
    data = small_data(merges=[(97, 98, 300), (300, 99, 301), (32, 301, 310)], special_tokens={"<|x|>": 256})
    path = tmp_path / "tok.json"
    write_tfjson(path, data)
    doc = json.loads(path.read_text())
    assert doc["merge_ids"] == [300, 301, 310] and "first_merge_id" not in doc
    assert read_tfjson(path) == data


def test_tfjson_no_pattern_and_no_merges(tmp_path):
    data = small_data(merges=[], special_tokens={}, pattern=None, pattern_name="none", training={})
    path = tmp_path / "tok.json"
    write_tfjson(path, data)
    assert read_tfjson(path) == data


def test_vocab_view_beside_the_json(tmp_path):
    path = tmp_path / "model.json"
    data = small_data(merges=[(97, 98, 256), (256, 99, 257), (32, 257, 258), (0xE2, 0x82, 260), (260, 0xAC, 261)])
    write_tfjson(path, data)
    view = vocab_view_path(path)
    assert view == tmp_path / "model.vocab.txt"
    lines = view.read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    assert len(rows) == 256 + 5 + 1
    by_id = {int(r[0]): r for r in rows}
    assert by_id[0] == ["0", "1", '"\\x00"', "byte"]
    assert by_id[10] == ["10", "1", '"\\n"', "byte"]
    assert by_id[92] == ["92", "1", '"\\\\"', "byte"]
    assert by_id[258] == ["258", "4", '" abc"', "merge 32 257"]
    assert by_id[259] == ["259", "0", '"<|endoftext|>"', "special"]
    assert by_id[260] == ["260", "2", '"\\xe2\\x82"', "merge 226 130"]
    assert by_id[261] == ["261", "3", '"€"', "merge 260 172"]
    assert vocab_view_path(tmp_path / "noext") == tmp_path / "noext.vocab.txt"


@SETTINGS
@given(st.binary(max_size=30))
def test_render_bytes_is_one_printable_line(b):
    shown = render_bytes(b)
    assert shown.startswith('"') and shown.endswith('"')
    assert shown.isprintable() and "\n" not in shown


# ---------------------------------------------------------------- tfjson strictness
def test_tfjson_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    text = path.read_text().replace("    [256, 99],", "    [256, 99]")  # missing comma
    path.write_text(text)
    with pytest.raises(FormatError) as e:
        read_tfjson(path)
    assert e.value.path == str(path)
    assert e.value.line == line_containing(path, "[256, 99]") + 1
    assert str(path) in str(e.value) and f"line {e.value.line}" in str(e.value)


@SETTINGS
@given(cut=st.floats(0.0, 0.999))
def test_tfjson_truncated_anywhere_is_a_format_error(tmp_path, cut):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * cut)])
    with pytest.raises(FormatError) as e:
        read_tfjson(path)
    assert e.value.path == str(path) and e.value.line is not None


@SETTINGS
@given(pos=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_tfjson_corrupted_byte_gives_format_error_or_valid_data(tmp_path, pos, byte):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    raw = bytearray(path.read_bytes())
    raw[pos % len(raw)] = byte
    path.write_bytes(bytes(raw))
    try:
        data = read_tfjson(path)
    except FormatError as e:
        assert e.path == str(path)
    else:
        data.validate()


def test_tfjson_unknown_version_is_a_version_error(tmp_path):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    newer = FORMAT_VERSION + 1
    path.write_text(path.read_text().replace(f'"version": {FORMAT_VERSION},', f'"version": {newer},'))
    with pytest.raises(VersionError) as e:
        read_tfjson(path)
    assert e.value.line == 3 and f"version {newer}" in str(e.value)
    assert f"reads versions 1 to {FORMAT_VERSION}" in str(e.value)
    assert isinstance(e.value, FormatError)


@pytest.mark.parametrize(
    "change, needle, message",
    [
        (lambda d: d.update(format="something-else"), '"format"', "tokenforge-bpe"),
        (lambda d: d.update(version="1"), '"version"', "integer format version"),
        (lambda d: d.pop("merges"), None, "required key is missing"),
        (lambda d: d.update(extra=1), '"extra"', "unknown key"),
        (lambda d: d.update(byte_ids=d["byte_ids"][:255]), '"byte_ids"', "256 ids"),
        (lambda d: d["byte_ids"].__setitem__(7, 6), "  6,", "also the id of byte 6"),
        (lambda d: d["byte_ids"].__setitem__(7, -1), "-1,", "expected an id"),
        (lambda d: d["merges"].__setitem__(1, [257, 99]), "257,", "not defined before merge 1"),
        (lambda d: d["merges"].__setitem__(1, [256]), "[", "[left, right] pair"),
        (lambda d: d["merges"].__setitem__(1, [256, True]), "true", "expected an id"),
        (lambda d: d.update(first_merge_id=3), "[", "would create id 3, already the id of byte 3"),
        (lambda d: d.update(merge_ids=[256, 257, 258]), None, "exactly one of"),
        (lambda d: d["special_tokens"].update({"<|x|>": 97}), '"<|x|>"', "also the id of byte 97"),
        (lambda d: d["special_tokens"].update({"": 400}), '"": 400', "cannot be empty"),
        (lambda d: d.update(pattern_name="gpt5"), '"pattern_name"', "expected one of"),
        (lambda d: d.update(pattern=None), '"pattern_name"', '"none" exactly when'),
        (lambda d: d.update(training=[1]), '"training"', "expected an object"),
        (
            lambda d: (d.update(version=1, split_specials=True), d.pop("checksum")),
            '"split_specials"',
            "unknown key 'split_specials' in a version 1",
        ),
        (lambda d: d.update(version=2, split_specials=1), '"split_specials"', "expected true or false"),
    ],
)
def test_tfjson_semantic_errors_name_line_and_reason(tmp_path, change, needle, message):
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    rewrite_json(path, change)
    with pytest.raises(FormatError) as e:
        read_tfjson(path)
    assert not isinstance(e.value, VersionError)
    assert message in str(e.value)
    assert e.value.path == str(path) and e.value.line is not None
    if needle is not None:
        assert needle in path.read_text().split("\n")[e.value.line - 1]


def test_tfjson_not_utf8_names_the_offset(tmp_path):
    path = tmp_path / "tok.json"
    path.write_bytes(b'{"format": "tokenforge-bpe", "x": "\xff"}')
    with pytest.raises(FormatError) as e:
        read_tfjson(path)
    assert e.value.offset == 35


def test_tfjson_writer_refuses_unserialisable_training(tmp_path):
    with pytest.raises(FormatError, match="JSON-serialisable"):
        write_tfjson(tmp_path / "t.json", small_data(training={"f": float("nan")}))
    with pytest.raises(FormatError, match="JSON-serialisable"):
        write_tfjson(tmp_path / "t.json", small_data(training={"s": {1, 2}}))
    assert not (tmp_path / "t.json").exists()


def test_tfjson_writer_validates(tmp_path):
    with pytest.raises(FormatError, match="references id 999"):
        write_tfjson(tmp_path / "t.json", small_data(merges=[(97, 999, 256)]))


def test_sniff_tfjson():
    assert sniff_tfjson(None, b'{\n  "format": "tokenforge-bpe",\n')
    assert sniff_tfjson(None, b'\xef\xbb\xbf{"format":"tokenforge-bpe"')
    assert not sniff_tfjson(None, b'{"version": "1.0", "model": {}}')
    assert not sniff_tfjson(None, b"YQ== 97\n")


# ---------------------------------------------------------------- failed writes
@pytest.mark.parametrize("writer", ["tfjson", "tiktoken"])
def test_failed_write_leaves_previous_file_intact(tmp_path, monkeypatch, writer):
    path = tmp_path / ("tok.json" if writer == "tfjson" else "tok.tiktoken")
    write = write_tfjson if writer == "tfjson" else write_tiktoken_file
    write(path, small_data())
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    bigger = small_data(merges=small_data().merges + [(258, 32, 260)], special_tokens={"<|x|>": 261})
    fail_writes_halfway(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        write(path, bigger)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before  # same files, same bytes, no temporary files left over


# ---------------------------------------------------------------- tiktoken
def test_mergeable_ranks_excludes_specials():
    ranks = mergeable_ranks(small_data())
    assert len(ranks) == 259 and ranks[b" abc"] == 258 and b"<|endoftext|>" not in ranks
    assert list(ranks.values()) == sorted(ranks.values())


def test_mergeable_ranks_refuses_duplicate_bytes():
    with pytest.raises(FormatError, match="both stand for"):
        mergeable_ranks(small_data(merges=[(97, 98, 256), (97, 98, 257)]))


def test_data_from_ranks_recovers_the_split_tiktoken_uses():
    # "abc" is recorded as a + bc, but with ab ranked first tiktoken builds it from ab + c
    data = small_data(merges=[(97, 98, 256), (98, 99, 257), (97, 257, 258)], special_tokens={})
    got = data_from_ranks(mergeable_ranks(data), GPT2_PATTERN)
    assert got.merges == [(97, 98, 256), (98, 99, 257), (256, 99, 258)]
    assert got.pattern_name == "gpt2" and got.special_tokens == {}


def test_data_from_ranks_refuses_tokens_that_cannot_be_built():
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"bc": 256, b"cd": 257, b"ab": 258, b"abcd": 259})  # a|bc|d: no two-part split below 259
    with pytest.raises(FormatError, match=r"b'abcd' \(rank 259\) cannot be built.*b'a' \+ b'bc' \+ b'd'"):
        data_from_ranks(ranks)
    del ranks[b"\x07"]
    with pytest.raises(FormatError, match="byte 0x07 has no rank"):
        data_from_ranks(ranks)


@SETTINGS
@given(data=bpe_data())
def test_tiktoken_file_round_trip(tmp_path, data):
    path = tmp_path / "v.tiktoken"
    write_tiktoken_file(path, data)
    text = path.read_text()
    assert sniff_tiktoken(path, path.read_bytes()[:4096])
    assert all(re.fullmatch(r"[A-Za-z0-9+/]+=* \d+", line) for line in text.splitlines())
    try:
        expected = canonical(data)
    except FormatError:  # a hand-made vocabulary tiktoken's loop cannot build: reading must say so
        with pytest.raises(FormatError) as e:
            read_tiktoken_file(path, data.pattern, data.special_tokens)
        assert e.value.path == str(path) and e.value.line is not None
        return
    got = read_tiktoken_file(path, data.pattern, data.special_tokens)
    assert got == expected
    assert same_vocabulary(got, data)
    # canonical data survives unchanged
    write_tiktoken_file(path, got)
    assert read_tiktoken_file(path, got.pattern, got.special_tokens) == got


def test_tiktoken_file_matches_tiktoken_loader(tmp_path):
    tiktoken_load = pytest.importorskip("tiktoken.load")
    path = tmp_path / "v.tiktoken"
    write_tiktoken_file(path, small_data())
    assert tiktoken_load.load_tiktoken_bpe(str(path)) == mergeable_ranks(small_data())


@pytest.mark.parametrize(
    "content, line, message",
    [
        (b"YQ== 97\nYg== 98\n!!!! 5\n", 3, "expected 'base64(token) rank'"),
        (b"YQ== 97\nYg==\n", 2, "expected 'base64(token) rank'"),
        (b"YQ== 97\nYg== 9x\n", 2, "expected 'base64(token) rank'"),
        (b"YQ== 97\nYQ= 98\n", 2, "invalid base64"),
        (b"YQ== 97\nYQ== 98\n", 2, "already appears on line 1"),
        (b"YQ== 97\nYg== 97\n", 2, "rank 97 is given to both"),
        (b"YQ== 97\n\nYg== 98\n", 2, "expected 'base64(token) rank'"),
        (b"YQ== 97\nYg== 98", 2, "does not end with a newline"),
        (b"", 1, "empty file"),
    ],
)
def test_tiktoken_file_errors_name_the_line(tmp_path, content, line, message):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(FormatError) as e:
        read_tiktoken_file(path)
    assert message in str(e.value)
    assert e.value.path == str(path) and e.value.line == line


def test_tiktoken_file_unbuildable_token_names_its_line(tmp_path):
    path = tmp_path / "v.tiktoken"
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    for tok, rank in ((b"bc", 256), (b"cd", 257), (b"ab", 258), (b"abcd", 259)):
        lines.append(f"{base64.b64encode(tok).decode()} {rank}")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match="cannot be built") as e:
        read_tiktoken_file(path)
    assert e.value.line == 260


def test_tiktoken_truncated_file_is_refused(tmp_path):
    path = tmp_path / "v.tiktoken"
    write_tiktoken_file(path, small_data())
    raw = path.read_bytes()
    for cut in (len(raw) - 1, len(raw) - 3, len(raw) // 2, 5):
        path.write_bytes(raw[:cut])
        with pytest.raises(FormatError) as e:
            read_tiktoken_file(path)
        assert e.value.path == str(path) and e.value.line is not None


def test_sniff_tiktoken():
    assert sniff_tiktoken(None, b"IQ== 0\nIg== 1\n")
    assert sniff_tiktoken(None, b"IHRoZQ== 1820\r\n")
    assert not sniff_tiktoken(None, b'{"format": "tokenforge-bpe"}')
    assert not sniff_tiktoken(None, b"\x80\x04\x95")
    assert not sniff_tiktoken(None, b"hello world\n")


def test_to_tiktoken_encodes_with_specials():
    enc = to_tiktoken(small_data(), name="small")
    assert enc.name == "small"
    assert enc.encode_ordinary(" abc abcd") == [258, 258, 100]
    assert enc.encode("x<|endoftext|>", allowed_special="all") == [120, 259]
    assert enc.decode([258, 259]) == " abc<|endoftext|>"


def test_to_tiktoken_without_pattern_treats_text_as_one_piece():
    data = small_data(pattern=None, pattern_name="none")
    enc = to_tiktoken(data)
    # with GPT-2's pattern " abc" would be one piece; without a pattern "c abc" is merged whole
    assert enc.encode_ordinary("c abc\n abc") == [99, 258, 10, 258]
    assert enc.decode(enc.encode_ordinary("any text\n\n at all")) == "any text\n\n at all"


@SETTINGS
@given(data=bpe_data(), text=st.text(alphabet="ab c\nxé", max_size=40))
def test_to_tiktoken_agrees_with_rank_reference(data, text):
    """tiktoken built from our ranks does what the plain rank rule says (per pre-token)."""
    import regex

    enc = to_tiktoken(data)
    ranks = mergeable_ranks(data)
    pieces = [text] if data.pattern is None else regex.findall(data.pattern, text)
    expected = []
    for piece in pieces:
        b = piece.encode()
        if b in ranks:
            expected.append(ranks[b])
            continue
        parts = [b[i : i + 1] for i in range(len(b))]
        while True:
            pairs = [(parts[k] + parts[k + 1], k) for k in range(len(parts) - 1)]
            cands = [(ranks[joined], k) for joined, k in pairs if joined in ranks]
            if not cands:
                break
            _, k = min(cands)
            parts[k : k + 2] = [parts[k] + parts[k + 1]]
        expected.extend(ranks[p] for p in parts)
    assert enc.encode_ordinary(text) == expected


def test_read_tiktoken_without_pattern_refuses_an_unknown_file(tmp_path):
    """A .tiktoken file does not say its pattern: an unknown one is refused, never given a default (issue 32 item 3)."""
    path = tmp_path / "v.tiktoken"
    write_tiktoken_file(path, small_data())
    for read in (read_tiktoken_file, tokenforge.load, BPETokenizer.from_tiktoken):
        with pytest.raises(FormatError, match="do not store their split pattern.*pass pattern=") as e:
            read(path)
        assert e.value.path == str(path)
    with pytest.raises(FormatError, match="pass pattern="):
        BPETokenizer.from_tiktoken(mergeable_ranks(small_data()))
    assert read_tiktoken_file(path, pattern=None).pattern_name == "none"
    assert BPETokenizer.from_tiktoken(path, pattern="gpt2").pattern == GPT2_PATTERN
    assert BPETokenizer.from_tiktoken(path, pattern="o200k_base").pattern == O200K_PATTERN


@pytest.mark.parametrize("name, pattern_name", [("cl100k_base", "cl100k"), ("o200k_base", "o200k")])
def test_a_known_rank_file_gets_its_own_pattern(tmp_path, name, pattern_name):
    """OpenAI's rank files are recognised by content (not name): ids equal tiktoken's, through load() too."""
    import tiktoken

    from bpe.test_encode_fast import ranks
    from bpe.test_gpt_patterns import tiktoken_pat_strs

    src = Path(next(iter(importlib.util.find_spec("bpe_openai").submodule_search_locations)))
    path = tmp_path / "renamed.txt"  # the name says nothing
    path.write_bytes(gzip.decompress((src / "data" / f"{name}.tiktoken.gz").read_bytes()))
    assert known_rank_file(path.read_bytes()) == (name, pattern_name)
    enc = tiktoken.Encoding(name, pat_str=tiktoken_pat_strs()[name], mergeable_ranks=ranks(name), special_tokens={})
    text = "Hello world! It's 2024: naïve café, 12345 numbers, CamelCaseWords and\n\n  spaces 日本語 🙂"
    for tok in (tokenforge.load(path), BPETokenizer.from_tiktoken(path), BPETokenizer.from_tiktoken(ranks(name))):
        assert tok.pattern == NAMED_PATTERNS[pattern_name]
        assert tok.encode(text) == enc.encode_ordinary(text)
    # written back by our writer: the same bytes, so still recognised
    out = tmp_path / "again.tiktoken"
    tokenforge.load(path).save_tiktoken(out)
    assert out.read_bytes() == path.read_bytes()
    assert tokenforge.load(out).pattern == NAMED_PATTERNS[pattern_name]


def test_a_failed_save_replaces_neither_file(tmp_path, monkeypatch):
    """The JSON and its vocabulary view are one save: disk full while writing the
    second file leaves the first unreplaced too (issue 32 item 7)."""
    path = tmp_path / "tok.json"
    write_tfjson(path, small_data())
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(before) == 2  # tok.json and tok.vocab.txt
    bigger = small_data(merges=[(97, 98, 256), (256, 99, 257), (32, 257, 258), (120, 121, 259)], special_tokens={})
    opened = fail_writes_halfway(monkeypatch, nth=2)  # the second file opened (the view): the disk is full
    with pytest.raises(OSError, match="No space left"):
        write_tfjson(path, bigger)
    monkeypatch.undo()
    assert len(opened) == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
