"""Issue 10, items 8 and 9: tokenforge's own files carry a checksum of their content
(formats/checksum.py), older files without one still load, and nothing loads that the
writer could not write back; BPE training that stops short says so."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tokenforge
from repo_paths import FIXTURES
from tokenforge import BPETokenizer, ChecksumError, FormatError, TokenforgeError, TokenforgeWarning
from tokenforge.data.shards import INDEX_FILE, ShardSet, pretokenize
from tokenforge.formats import checksum
from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.growing_json import GrowingData, read_growing_json, write_growing_json
from tokenforge.formats.lz78_tsv import LZ78Data, read_lz78_tsv, write_lz78_tsv
from tokenforge.formats.mxgram import read_vocab_json, write_vocab_json
from tokenforge.formats.tfjson import read_tfjson, write_tfjson
from tokenforge.growing import GrowingBPETokenizer

V1 = FIXTURES / "v1"
TEXTS = [
    "hello world, the quick brown fox jumps over the lazy dog. " * 3,
    "tokenforge writes files; héllo wörld 123 456",
]


# ---- one small file of each of our formats ---------------------------------------------------
def _bpe(tmp_path) -> Path:
    p = tmp_path / "bpe.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TokenforgeWarning)
        BPETokenizer.train_from_iterator(
            TEXTS, vocab_size=256 + 20 + 2, special_tokens=["<|bos|>", "<|eos|>"], progress=False
        ).save(p)
    return p


def _growing(tmp_path) -> Path:
    p = tmp_path / "growing.json"
    g = GrowingBPETokenizer(vocab_size=1000)
    g.learn_merges(iter(TEXTS), 12, source="fixture")
    g.save(p)
    return p


def _lz78(tmp_path, fmt="lz78") -> Path:
    p = tmp_path / f"{fmt}.tsv"
    t = tokenforge.LZ78Tokenizer.train_from_iterator(TEXTS, strategy="smart_prune", vocab_size=260 + 30, progress=False)
    t.save_tsv(p, fmt)
    return p


def _mixedgram(tmp_path) -> Path:
    p = tmp_path / "mixedgram.json"
    tokenforge.Mixedgram.train(
        text="hello world, the quick brown fox. tokenforge writes files", special_tokens=["<|bos|>"]
    ).save(p)
    return p


def _shards(tmp_path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TokenforgeWarning)
        tok = BPETokenizer.train_from_iterator(TEXTS, vocab_size=300, progress=False)
    pretokenize(iter(TEXTS * 3), tok, tmp_path / "shards", shard_tokens=40, progress=False)
    return tmp_path / "shards" / INDEX_FILE


def _read_shard_index(p: Path):
    return ShardSet(p).index


MAKERS = {
    "bpe": (_bpe, read_tfjson),
    "growing": (_growing, read_growing_json),
    "lz78": (_lz78, read_lz78_tsv),
    "compressed": (lambda t: _lz78(t, "compressed"), read_lz78_tsv),
    "mixedgram": (_mixedgram, read_vocab_json),
    "shards": (_shards, _read_shard_index),
}


@pytest.mark.parametrize("kind", MAKERS)
def test_files_carry_a_checksum_that_is_checked(tmp_path, kind):
    make, read = MAKERS[kind]
    p = make(tmp_path)
    text = p.read_text()
    assert "sha256:" in text
    read(p)  # verifies
    i = text.index("sha256:") + len("sha256:")
    p.write_text(text[:i] + ("1" if text[i] == "0" else "0") + text[i + 1 :])  # the checksum itself altered
    with pytest.raises(ChecksumError) as e:
        read(p)
    assert str(p) in str(e.value) and "altered" in str(e.value)


def _digit_mutants(text: str):
    """Every text with one decimal digit changed (d -> d+1 mod 10)."""
    for i, c in enumerate(text):
        if c.isdigit() and c.isascii():
            yield i, text[:i] + str((int(c) + 1) % 10) + text[i + 1 :]


@pytest.mark.parametrize("kind", MAKERS)
def test_no_changed_digit_loads_as_something_else(tmp_path, kind):
    """What the issue saw (a digit changed in a merge loaded as another tokenizer):
    every one-digit change is refused, or reads back the same content."""
    make, read = MAKERS[kind]
    p = make(tmp_path)
    text = p.read_text()
    want = read(p)
    refused = 0
    mutants = list(_digit_mutants(text))
    assert len(mutants) > 50
    for i, mutant in mutants:
        p.write_text(mutant)
        try:
            got = read(p)
        except TokenforgeError:
            refused += 1
            continue
        assert got == want, f"a digit changed at offset {i} loaded as different content"
    assert refused == len(mutants)  # every digit of our files means something, checksum included


def test_changed_digit_in_a_merge_is_a_checksum_error(tmp_path):
    p = _bpe(tmp_path)
    text = p.read_text()
    merges = json.loads(text)["merges"]
    a, b = merges[5]
    # a valid file with one merge changed: refused by the checksum, not by structure
    assert f"    [{a}, {b}]" in text and b < 255
    p.write_text(text.replace(f"    [{a}, {b}]", f"    [{a}, {b + 1}]", 1))
    with pytest.raises(ChecksumError) as e:
        tokenforge.load(p)
    msg = str(e.value)
    assert str(p) in msg and "altered" in msg and "reseal" in msg and e.value.line is not None
    assert isinstance(e.value, FormatError)


def test_changed_byte_in_a_growing_file_is_a_checksum_error(tmp_path):
    p = _growing(tmp_path)
    raw = p.read_bytes()
    i = raw.index(b'"total_tokens_processed": ') + len(b'"total_tokens_processed": ')
    p.write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :])  # 2 -> 3: still a valid count
    with pytest.raises(ChecksumError, match="altered"):
        GrowingBPETokenizer.load(p)


def test_changed_tsv_line_is_a_checksum_error(tmp_path):
    p = _lz78(tmp_path)
    text = p.read_text()
    assert "\n# chunking=1\n" in text
    p.write_text(text.replace("\n# chunking=1\n", "\n# chunking=0\n"))  # another tokenizer, same structure
    with pytest.raises(ChecksumError) as e:
        tokenforge.load(p)
    assert e.value.line == 2 and "altered" in str(e.value)
    # a data line: the output flag of a prefix-only entry, turned on (N= in the header changed too)
    lines = text.split("\n")
    k = next(i for i, x in enumerate(lines) if x.endswith("\t0") and not x.startswith("#"))
    n = sum(1 for x in lines if x.endswith("\t1"))
    lines[k] = lines[k][:-1] + "1"
    lines = [f"# N={n + 1}" if x == f"# N={n}" else x for x in lines]
    p.write_text("\n".join(lines))
    with pytest.raises(ChecksumError):
        read_lz78_tsv(p)


def test_compressed_swapped_output_codes_are_refused(tmp_path):
    p = _lz78(tmp_path, "compressed")
    lines = p.read_text().split("\n")
    rows = [i for i, x in enumerate(lines) if x and x[0].isdigit() and x.split("\t")[3] not in ("", "-1")]
    a, b = rows[0], rows[1]
    fa, fb = lines[a].split("\t"), lines[b].split("\t")
    fa[3], fb[3] = fb[3], fa[3]
    lines[a], lines[b] = "\t".join(fa), "\t".join(fb)
    p.write_text("\n".join(lines))
    with pytest.raises(ChecksumError):
        read_lz78_tsv(p)


def test_reformatted_json_still_verifies(tmp_path):
    """The checksum is over the content, not the layout: whitespace, key order, escapes may change."""
    for make, read in (MAKERS["bpe"], MAKERS["growing"], MAKERS["mixedgram"]):
        p = make(tmp_path)
        want = read(p)
        doc = json.loads(p.read_text())
        p.write_text(json.dumps(dict(reversed(list(doc.items()))), ensure_ascii=False))
        assert read(p) == want


def test_crlf_converted_tsv_still_verifies(tmp_path):
    p = _lz78(tmp_path)
    want = read_lz78_tsv(p)
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    assert read_lz78_tsv(p) == want


def test_missing_or_malformed_checksum(tmp_path):
    p = _bpe(tmp_path)
    doc = json.loads(p.read_text())
    p.write_text(json.dumps({k: v for k, v in doc.items() if k != "checksum"}))
    with pytest.raises(FormatError, match="checksum: required key is missing"):
        read_tfjson(p)
    p.write_text(json.dumps({**doc, "checksum": "md5:1234"}))
    with pytest.raises(FormatError, match="64 lower-case hex"):
        read_tfjson(p)
    t = _lz78(tmp_path)
    lines = t.read_text().split("\n")
    t.write_text("\n".join(x for x in lines if not x.startswith("# checksum=")))
    with pytest.raises(FormatError, match="no '# checksum=' line"):
        read_lz78_tsv(t)
    t.write_text("\n".join(lines[:2] + lines[1:]))
    with pytest.raises(FormatError, match="a second '# checksum=' line") as e:
        read_lz78_tsv(t)
    assert e.value.line == 3


def test_altered_header_line_does_not_turn_our_tsv_into_a_seed_file(tmp_path):
    p = _lz78(tmp_path, "compressed")
    text = p.read_text()
    p.write_text(text.replace("# tokenforge lz78 v2", "# tokenforgf lz78 v2", 1))
    with pytest.raises(FormatError, match="first line .* is missing or damaged") as e:
        read_lz78_tsv(p, "compressed")
    assert e.value.line == 2


# ---- older files ------------------------------------------------------------------------------
V1_FILES = {
    "bpe_v1.json": read_tfjson,
    "growing_v1.json": read_growing_json,
    "lz78_v1.tsv": read_lz78_tsv,
    "lz78_compressed_v1.tsv": read_lz78_tsv,
    "mixedgram_v1.json": read_vocab_json,
}


@pytest.mark.parametrize("name", V1_FILES)
def test_version_1_files_without_checksum_still_load(tmp_path, name):
    src = V1 / name
    assert "checksum" not in src.read_text()
    tok = tokenforge.load(src)
    # saving writes the current version, with a checksum, and the same content
    out = tmp_path / name
    tok.save(out) if not name.startswith("lz78") else tok.save_tsv(out)
    assert "sha256:" in out.read_text()
    old, new = V1_FILES[name](src), V1_FILES[name](out)
    if isinstance(old, LZ78Data):
        assert old.nodes == new.nodes and old.structure == new.structure
    else:
        assert old == new


@pytest.mark.parametrize("name", V1_FILES)
def test_a_checksum_in_a_version_1_file_means_its_version_was_changed(tmp_path, name):
    read = V1_FILES[name]
    text = (V1 / name).read_text()
    p = tmp_path / name
    if name.endswith(".tsv"):
        lines = text.split("\n")
        p.write_text("\n".join([lines[0], "# checksum=sha256:" + "0" * 64, *lines[1:]]))
    else:
        p.write_text(checksum.seal_json_text(text))
    with pytest.raises(FormatError, match="version number was changed|version line was changed"):
        read(p)


def test_version_1_shard_index_still_reads_and_resumes_as_version_2(tmp_path):
    p = _shards(tmp_path)
    index = json.loads(p.read_text())
    del index["checksum"]
    index["version"] = 1
    index["complete"] = False  # an interrupted run of an older tokenforge
    p.write_text(json.dumps(index, indent=1))
    with pytest.warns(TokenforgeWarning, match="unfinished pretokenize run"):
        s = ShardSet(p.parent, allow_incomplete=True)
    assert not s.complete and s.num_shards > 1 and "checksum" not in s.index
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TokenforgeWarning)
        tok = BPETokenizer.train_from_iterator(TEXTS, vocab_size=300, progress=False)
    pretokenize(iter(TEXTS * 3), tok, p.parent, shard_tokens=40, progress=False)  # resumes; the index is rewritten
    assert ShardSet(p.parent).complete
    again = json.loads(p.read_text())
    assert again["version"] == 2 and again["checksum"].startswith("sha256:")
    index["version"] = 2
    index["bos_id"] = 0
    p.write_text(checksum.seal_json_text(json.dumps(index, indent=1)).replace('bos_id": 0', 'bos_id": 1'))
    with pytest.raises(ChecksumError):
        ShardSet(p.parent)


# ---- a deliberate edit ------------------------------------------------------------------------
def test_reseal_accepts_a_deliberate_edit(tmp_path):
    p = _bpe(tmp_path)
    p.write_text(p.read_text().replace('"<|bos|>"', '"<|start|>"'))
    with pytest.raises(ChecksumError, match=r"`tokenforge reseal [^`]+`"):
        tokenforge.load(p)
    before = p.read_text()
    new = checksum.reseal(p)
    after = p.read_text()
    assert new in after and before.replace(json.loads(before)["checksum"], new) == after  # nothing else changed
    assert "<|start|>" in tokenforge.load(p).special_tokens

    t = _lz78(tmp_path)
    t.write_text(t.read_text().replace("# chunking=1", "# chunking=0"))
    r = subprocess.run(
        [sys.executable, "-m", "tokenforge.formats.checksum", "reseal", str(t)], capture_output=True, text=True
    )
    assert r.returncode == 0 and "sha256:" in r.stdout
    assert tokenforge.load(t).chunking is False


def test_reseal_command_runs_through_the_cli_runner(tmp_path, capsys):
    """``tokenforge reseal`` (and its old spelling, which runs it) reports errors as every
    command does: one line, exit 3 for a missing file, 1 for a file that is not ours."""
    from tokenforge.cli.main import EXIT_ERROR, EXIT_OS, main

    p = _bpe(tmp_path)
    p.write_text(p.read_text().replace('"<|bos|>"', '"<|start|>"'))
    (tmp_path / "x.json").write_text('{"model": {}}')
    assert main(["reseal", str(p)]) == 0
    assert capsys.readouterr().out.startswith(f"{p}: sha256:")
    assert "<|start|>" in tokenforge.load(p).special_tokens
    for name, code in (("missing.json", EXIT_OS), ("x.json", EXIT_ERROR)):
        assert main(["reseal", str(tmp_path / name)]) == code
        err = capsys.readouterr().err.strip()
        assert err.startswith("tokenforge reseal: error: ") and name in err and "\n" not in err, err
    r = subprocess.run(
        [sys.executable, "-m", "tokenforge.formats.checksum", "reseal", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == EXIT_OS and "tokenforge reseal: error: " in r.stderr


def test_reseal_refuses_what_has_no_checksum(tmp_path):
    p = tmp_path / "bpe_v1.json"
    p.write_text((V1 / "bpe_v1.json").read_text())
    with pytest.raises(FormatError, match="no checksum"):
        checksum.reseal(p)
    (tmp_path / "x.json").write_text('{"model": {}}')
    with pytest.raises(FormatError, match="not one of tokenforge's own formats"):
        checksum.reseal(tmp_path / "x.json")


def test_writers_never_carry_a_checksum_over(tmp_path):
    """A checksum that is right for altered content cannot come about by saving: the
    in-memory data holds no checksum and the writer computes its own."""
    p = _lz78(tmp_path)
    data = read_lz78_tsv(p)
    assert "checksum" not in data.settings
    data.settings["checksum"] = "sha256:" + "0" * 64  # even if someone puts one there
    write_lz78_tsv(tmp_path / "w.tsv", data)
    assert read_lz78_tsv(tmp_path / "w.tsv").nodes == data.nodes
    with pytest.raises(ValueError):
        checksum.seal_json_text('{"format": "x", "checksum": "sha256:00"}')


# ---- sync -------------------------------------------------------------------------------------
def test_sync_checks_the_remote_checksum(tmp_path):
    local = GrowingBPETokenizer(vocab_size=1000)
    local.save(tmp_path / "local.json")
    remote = GrowingBPETokenizer(vocab_size=1000)
    remote.learn_merges(iter(TEXTS), 10, source="r")
    remote.save(tmp_path / "remote.json")
    text = (tmp_path / "remote.json").read_text()
    (tmp_path / "altered.json").write_text(text.replace('"r": 10', '"r": 11'))
    with pytest.raises(tokenforge.SyncError, match="altered"):
        local.sync(tmp_path / "altered.json")
    # a version 1 remote (written before checksums) is taken
    doc = json.loads(text)
    del doc["checksum"]
    doc["version"] = 1
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    assert local.sync(tmp_path / "v1.json").merges_added == 10
    assert json.loads((tmp_path / "local.json").read_text())["checksum"].startswith("sha256:")


# ---- item 9: nothing loads that cannot be saved back ------------------------------------------
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_refused_at_load(tmp_path, value):
    for src in (V1 / "bpe_v1.json", V1 / "mixedgram_v1.json"):
        text = src.read_text()
        p = tmp_path / src.name
        p.write_text(text.replace('"training": {', f'"training": {{"odd": [1, {{"x": {value}}}], ', 1))
        with pytest.raises(FormatError, match="NaN and infinities") as e:
            tokenforge.load(p)
        assert "training.odd[1].x" in str(e.value) and e.value.line is not None
    # and in a current file (the checksum cannot even be computed)
    p = _bpe(tmp_path)
    doc = json.loads(p.read_text())
    p.write_text(json.dumps(doc).replace('"training": {', f'"training": {{"odd": {value}, ', 1))
    with pytest.raises(FormatError, match="NaN and infinities"):
        read_tfjson(p)


def test_lz78_header_value_with_a_carriage_return_is_refused(tmp_path):
    text = (V1 / "lz78_v1.tsv").read_text()
    p = tmp_path / "cr.tsv"
    p.write_text(text.replace("# strategy=smart_prune\n", "# strategy=smart\rprune\n"))
    with pytest.raises(FormatError, match="carriage return") as e:
        read_lz78_tsv(p)
    assert e.value.line == 4


ODD_TRAINING = {
    "text": 'caf\u00e9 \u65e5\u672c \U0001f642 \x00 \\ " \n',
    "big": 2**80,
    "neg": -(2**70),
    "floats": [0.1, 1e-300, 1.7976931348623157e308, -0.0, 5e-324],
    "nested": {"a": [[], {}, None, True, False]},
    "checksum": "sha256:" + "1" * 64,  # a key of that name inside the settings is just a setting
}


def _round_trip(tmp_path, name, write, read, data, resave=None):
    """load -> save -> load gives equal content, and the second save is byte-identical."""
    a, b, c = tmp_path / f"a_{name}", tmp_path / f"b_{name}", tmp_path / f"c_{name}"
    write(a, data)
    first = read(a)
    write(b, first)
    second = read(b)
    assert second == first
    write(c, second)
    assert c.read_bytes() == b.read_bytes()
    return first


def test_round_trip_bpe_json_with_odd_values(tmp_path):
    data = BPEData(
        byte_ids=list(range(256)),
        merges=[(104, 105, 256), (256, 33, 400)],
        special_tokens={'<|\u00e9\U0001f642\t"x"|>': 1000, "<|b|>": 300},
        pattern=r"\p{L}+|[^\p{L}]+|'\"\\u0041",
        pattern_name="custom",
        training=ODD_TRAINING,
    )
    got = _round_trip(tmp_path, "bpe.json", write_tfjson, read_tfjson, data)
    assert got.training["text"] == ODD_TRAINING["text"] and got.training["big"] == 2**80


def test_round_trip_growing_json_with_odd_values(tmp_path):
    data = GrowingData(
        pairs=[(10 + 104, 10 + 105), (266, 10 + 33)],
        vocab_size=2**32,
        sources_contributed={"": 0, '\u00e9\U0001f642\n"': 2**62, "checksum": 1},
        total_tokens_processed=2**64 + 1,
        pattern=None,
        normalization=None,
    )
    _round_trip(tmp_path, "g.json", write_growing_json, read_growing_json, data)


def test_round_trip_mixedgram_json_with_odd_values(tmp_path):
    ngrams = [b"\x01\xff", b"ab", b""] + [b""] * 3837
    counts = [2**63, 1, 0] + [0] * 3837

    def write(p, d):
        write_vocab_json(p, d["ngrams"], d["counts"], d["special_tokens"], d["training"])

    data = {"ngrams": ngrams, "counts": counts, "special_tokens": {"<|\x7f|>": 4095}, "training": ODD_TRAINING}
    _round_trip(tmp_path, "m.json", write, read_vocab_json, data)


@pytest.mark.parametrize("structure", ["tree", "compressed"])
def test_round_trip_lz78_tsv_with_odd_values(tmp_path, structure):
    settings = {
        "strategy": "x=y = z",
        "note": "\u00e9 \U0001f642 \x0b\x0c\x1c inside \\t",
        "chunking": False,
        "pattern": "gpt4",
        "params": {"nan": math.nan, "inf": -math.inf, "s": "\U0001f642\r\n\t", "big": 2**70},
        "specials": ["<|\u00e9|>"],
        "training": ODD_TRAINING,
    }
    if structure == "tree":
        nodes = [(0, "\t", "\t", True), (1, "\\", "\t\\", True), (0, "\r", "\r", False), (3, "#", "\r#", True)]
    else:
        nodes = [(0, "\t\\", 1, "\t\\"), (1, "\r\n", 2, "\t\\\r\n"), (0, "#x", -1, "#x"), (3, "y", 3, "#xy")]
    data = LZ78Data(structure, nodes, settings)
    a, b, c = tmp_path / "a.tsv", tmp_path / "b.tsv", tmp_path / "c.tsv"
    write_lz78_tsv(a, data)
    first = read_lz78_tsv(a)
    write_lz78_tsv(b, first)
    second = read_lz78_tsv(b)
    assert second.nodes == first.nodes and second.structure == first.structure
    assert json.dumps(second.settings, sort_keys=True) == json.dumps(first.settings, sort_keys=True)  # NaN != NaN
    assert first.settings["params"]["s"] == "\U0001f642\r\n\t" and math.isnan(first.settings["params"]["nan"])
    assert first.settings["note"] == settings["note"].strip()
    write_lz78_tsv(c, second)
    assert c.read_bytes() == b.read_bytes()


def test_a_lone_surrogate_is_refused_at_save_and_nothing_is_written(tmp_path):
    """The readers refuse lone surrogate escapes (no UTF-8 file can hold one), so
    every writer refuses them before writing: never a file that cannot be loaded."""
    odd = {"s": "x\ud83d"}
    bpe = BPEData(list(range(256)), [(104, 105, 256)], {}, None, "none", odd)
    growing = GrowingData(
        pairs=[(114, 115)],
        vocab_size=1000,
        sources_contributed={"x\udc80": 1},
        total_tokens_processed=1,
        pattern=None,
        normalization=None,
    )
    lz = LZ78Data("tree", [(0, "a", "a", True)], {"strategy": "standard", "params": odd})
    cases = [
        ("b.json", lambda p: write_tfjson(p, bpe)),
        ("g.json", lambda p: write_growing_json(p, growing)),
        ("l.tsv", lambda p: write_lz78_tsv(p, lz)),
    ]
    for name, write in cases:
        with pytest.raises(FormatError, match="lone surrogate"):
            write(tmp_path / name)
        assert list(tmp_path.iterdir()) == [], name


# ---- item 9: fewer merges than asked ----------------------------------------------------------
def test_fewer_merges_than_asked_warns_and_is_recorded(tmp_path):
    with pytest.warns(
        TokenforgeWarning, match=r"learned 5 merges, not the 35 asked for: no pair of adjacent tokens is left"
    ) as w:
        tok = BPETokenizer.train_from_iterator(["hello hello"], vocab_size=300, progress=False)
    assert "270 ids, not vocab_size=300" in str(w[0].message)
    assert w[0].filename == __file__  # points at the caller
    tok.save(tmp_path / "t.json")
    training = json.loads((tmp_path / "t.json").read_text())["training"]
    assert training["merges_requested"] == 35 and training["num_merges"] == 5
    assert training["vocab_size_requested"] == 300 and "every piece" in training["stopped_early"]

    with pytest.warns(TokenforgeWarning, match="min_frequency=3"):
        tok = BPETokenizer.train_from_iterator(
            ["hello hello world"] * 2, vocab_size=400, min_frequency=3, progress=False
        )
    assert "min_frequency=3" in tok.data.training["stopped_early"]


def test_enough_merges_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TokenforgeWarning)
        tok = BPETokenizer.train_from_iterator(TEXTS, vocab_size=260, special_tokens=None, progress=False)
    assert tok.data.training["merges_requested"] == tok.data.training["num_merges"] == 4
    assert "stopped_early" not in tok.data.training


def test_a_checksum_without_format_is_not_read_as_a_seed_file(tmp_path):
    """Our growing file with its "format" key altered is not taken for a seed file."""
    p = _growing(tmp_path)
    doc = json.loads(p.read_text())
    del doc["format"], doc["version"]
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match='"checksum" without "format"'):
        GrowingBPETokenizer.load(p)


@pytest.mark.parametrize("fmt", ["lz78", "compressed"])
def test_lz78_file_with_a_damaged_first_line_is_not_read_as_a_seed_file(tmp_path, fmt):
    """Without our first line a file would read as a seed file (no escapes, no
    checksum): a different dictionary. Our header lines below it give it away."""
    data = LZ78Data("tree", [(0, "a", "a", True), (1, "\t", "a\t", True)], {"strategy": "standard"})
    if fmt == "compressed":
        data = LZ78Data("compressed", [(0, "a", 1, "a"), (1, "\t", 2, "a\t")], {"strategy": "standard"})
    p = tmp_path / "d.tsv"
    write_lz78_tsv(p, data)
    lines = p.read_text().split("\n")
    rows = [x for x in lines if x[:1].isdigit()]
    moved = [rows[-1], lines[1]]  # the header line lost, a data row first, our checksum line after it
    for damaged in (["#hecksum" + lines[1][len("# checksum") :]] + lines[2:], lines[1:], lines[2:], moved):
        p.write_text("\n".join(damaged))
        with pytest.raises(FormatError, match="first line .* is missing or damaged"):
            read_lz78_tsv(p)


def test_a_version_1_lz78_file_cut_short_or_miscounted_is_refused(tmp_path):
    """Version 1 files have no checksum: a cut-short one must still not load as a
    smaller dictionary (found by bench/fuzz.py: a header line alone loaded as an
    empty dictionary), and the header's entries count must match the rows."""
    lines = (FIXTURES / "v1" / "lz78_v1.tsv").read_text(encoding="utf-8").split("\n")
    p = tmp_path / "cut.tsv"
    p.write_text(lines[0] + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match="no dictionary entries"):
        read_lz78_tsv(p)
    # (a cut row shows as a missing parent or a wrong N; the header's entries count is checked too)
    p.write_text("\n".join("# entries=59" if x == "# entries=58" else x for x in lines), encoding="utf-8")
    with pytest.raises(FormatError, match="entries=.* rows"):
        read_lz78_tsv(p)
