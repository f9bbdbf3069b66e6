"""gpt_from_scratch's pickles: safe import, round trips, refusal of anything but plain data.

Malicious pickles are built here (pickle.dumps only writes; nothing is ever
loaded with pickle.load/loads) and must be refused before anything runs.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import struct

import pytest
from hypothesis import HealthCheck, given, settings

from bpe_strategies import bpe_data, fail_writes_halfway
from tokenforge.errors import FormatError, TokenforgeError, UnsafePickleError
from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.patterns import GPT2_PATTERN, GPT4_PATTERN
from tokenforge.formats.seed003 import (
    MERGES_FILE,
    SPECIALS_FILE,
    VOCAB_FILE,
    _RefusingUnpickler,
    load_plain_pickle,
    read_seed003,
    sniff_seed003,
    write_seed003,
)

SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def seed_files(directory, vocab, merges, specials=("<|endoftext|>",)):
    """Write the three files the way gpt_from_scratch does (default pickle protocol)."""
    directory.mkdir(exist_ok=True)
    (directory / VOCAB_FILE).write_bytes(pickle.dumps(vocab))
    (directory / MERGES_FILE).write_bytes(pickle.dumps(merges))
    if specials is not None:
        (directory / SPECIALS_FILE).write_text("\n".join(specials), encoding="utf-8")
    return directory


def seed_vocab(merges, specials=("<|endoftext|>",)):
    """gpt_from_scratch's layout: bytes, then specials, then merges."""
    vocab = {i: bytes([i]) for i in range(256)}
    for t in specials:
        vocab[len(vocab)] = t.encode("utf-8")
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return vocab


MERGES = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"i", b"n"), (b" ", b"in")]


@pytest.fixture
def seed_dir(tmp_path):
    return seed_files(tmp_path / "seed", seed_vocab(MERGES), MERGES)


# ---------------------------------------------------------------- reading the seed's files
def test_read_seed_layout(seed_dir):
    data = read_seed003(seed_dir)
    assert data.byte_ids == list(range(256))
    assert data.special_tokens == {"<|endoftext|>": 256}
    assert data.merges == [(32, 116, 257), (104, 101, 258), (257, 258, 259), (105, 110, 260), (32, 260, 261)]
    assert data.pattern == GPT2_PATTERN and data.pattern_name == "gpt2"
    assert data.token_bytes_list()[259] == b" the"
    # the same from either pickle's path, or with explicit paths
    assert read_seed003(seed_dir / VOCAB_FILE) == data
    assert read_seed003(seed_dir / MERGES_FILE) == data
    assert read_seed003(seed_dir / VOCAB_FILE, seed_dir / MERGES_FILE, seed_dir / SPECIALS_FILE) == data


def test_read_seed_without_specials_file(tmp_path):
    d = seed_files(tmp_path / "s", seed_vocab(MERGES, ()), MERGES, specials=None)
    assert read_seed003(d).special_tokens == {}
    d = seed_files(tmp_path / "t", seed_vocab(MERGES), MERGES, specials=None)
    with pytest.raises(FormatError, match="missing special_tokens.txt") as e:
        read_seed003(d)
    assert e.value.path == str(d / VOCAB_FILE)


def test_sniff_seed003(seed_dir, tmp_path):
    assert sniff_seed003(seed_dir, b"")
    assert sniff_seed003(seed_dir / VOCAB_FILE, (seed_dir / VOCAB_FILE).read_bytes()[:4096])
    assert sniff_seed003(seed_dir / MERGES_FILE, (seed_dir / MERGES_FILE).read_bytes()[:4096])
    assert not sniff_seed003(tmp_path, b"")
    assert not sniff_seed003(seed_dir / SPECIALS_FILE, b"<|endoftext|>")


# ---------------------------------------------------------------- round trips
@SETTINGS
@given(data=bpe_data(patterns=(GPT2_PATTERN,)))
def test_seed003_round_trip(tmp_path, data):
    directory = tmp_path / "out"
    write_seed003(directory, data)
    got = read_seed003(directory)
    assert got == BPEData(data.byte_ids, data.merges, data.special_tokens, GPT2_PATTERN, "gpt2", {})
    assert sniff_seed003(directory, b"")


def test_written_files_are_plain_data_in_the_seed_layout(tmp_path, seed_dir):
    data = read_seed003(seed_dir)
    write_seed003(tmp_path / "out", data)
    for name in (VOCAB_FILE, MERGES_FILE):
        assert (tmp_path / "out" / name).read_bytes()[:2] == b"\x80\x04"
    assert load_plain_pickle(tmp_path / "out" / VOCAB_FILE) == seed_vocab(MERGES)
    assert load_plain_pickle(tmp_path / "out" / MERGES_FILE) == MERGES
    assert (tmp_path / "out" / SPECIALS_FILE).read_text() == "<|endoftext|>\n"


def test_write_refuses_what_the_seed_cannot_hold(tmp_path, seed_dir):
    data = read_seed003(seed_dir)
    other = BPEData(data.byte_ids, data.merges, data.special_tokens, GPT4_PATTERN, "gpt4")
    with pytest.raises(TokenforgeError, match="always uses GPT-2's"):
        write_seed003(tmp_path / "a", other)
    assert not (tmp_path / "a").exists()
    write_seed003(tmp_path / "a", other, allow_other_pattern=True)
    assert read_seed003(tmp_path / "a").pattern == GPT2_PATTERN
    for bad in ({"two\nlines": 300}, {" padded ": 300}, {"in": 300}):
        with pytest.raises(TokenforgeError):
            write_seed003(tmp_path / "b", BPEData(data.byte_ids, data.merges, bad, GPT2_PATTERN, "gpt2"))
    assert not (tmp_path / "b").exists()


def test_failed_write_leaves_previous_files_intact(tmp_path, seed_dir, monkeypatch):
    data = read_seed003(seed_dir)
    before = {p.name: p.read_bytes() for p in seed_dir.iterdir()}
    fail_writes_halfway(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        write_seed003(seed_dir, BPEData(data.byte_ids, data.merges[:2], {}, GPT2_PATTERN, "gpt2"))
    assert {p.name: p.read_bytes() for p in seed_dir.iterdir()} == before


# ---------------------------------------------------------------- inconsistent files
@pytest.mark.parametrize(
    "vocab_change, merges, file, message",
    [
        (lambda v: v.update({258: b"xx"}), MERGES, MERGES_FILE, "should make id 258"),
        (lambda v: v.pop(261), MERGES, VOCAB_FILE, "4 vocabulary entries"),
        (lambda v: v.update({7: b"A"}), MERGES, VOCAB_FILE, "byte 0x07"),
        (lambda v: v.update({256: b"<|other|>"}), MERGES, SPECIALS_FILE, "special token '<|endoftext|>' is not"),
        (lambda v: v.update({257: b"qzz"}), [(b"q", b"zz")] + MERGES[1:], MERGES_FILE, "uses b'zz'"),
        (lambda v: v.update({262: b"he"}), MERGES + [(b"h", b"e")], MERGES_FILE, "makes b'he' again"),
        (lambda v: v.update({1: "text"}), MERGES, VOCAB_FILE, "id 1 maps to str"),
        (lambda v: v.update({"k": b"x"}), MERGES, VOCAB_FILE, "key 'k' is not"),
        (lambda v: None, MERGES + [(b"a", b"b", b"c")], MERGES_FILE, "merge 5: expected a pair"),
        (lambda v: None, {"not": "a list"}, MERGES_FILE, "expected List[Tuple[bytes, bytes]], found dict"),
    ],
)
def test_inconsistent_files_are_refused(tmp_path, vocab_change, merges, file, message):
    vocab = seed_vocab(MERGES)
    vocab_change(vocab)
    d = seed_files(tmp_path / "s", vocab, merges)
    with pytest.raises(FormatError) as e:
        read_seed003(d)
    assert message in str(e.value) and e.value.path == str(d / file)


def test_vocab_that_is_not_a_dict(tmp_path):
    d = seed_files(tmp_path / "s", [b"a", b"b"], MERGES)
    with pytest.raises(FormatError, match="expected Dict.int, bytes., found list"):
        read_seed003(d)


def test_special_listed_twice_names_the_line(tmp_path):
    d = seed_files(tmp_path / "s", seed_vocab(MERGES), MERGES, specials=("<|endoftext|>", "", "<|endoftext|>"))
    with pytest.raises(FormatError, match="listed twice") as e:
        read_seed003(d)
    assert e.value.line == 3 and e.value.path == str(d / SPECIALS_FILE)
    (d / SPECIALS_FILE).write_bytes(b"<|a|>\n\xff\n")
    with pytest.raises(FormatError, match="not UTF-8") as e:
        read_seed003(d)
    assert e.value.offset == 6


def test_missing_pickle(tmp_path, seed_dir):
    (seed_dir / MERGES_FILE).unlink()
    with pytest.raises(FormatError, match="missing file bpe_merges.pkl"):
        read_seed003(seed_dir)


# ---------------------------------------------------------------- corrupt pickles
def test_truncated_pickle_names_the_offset(seed_dir):
    path = seed_dir / VOCAB_FILE
    raw = path.read_bytes()
    for cut in (0, 1, 2, 50, len(raw) // 2, len(raw) - 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(FormatError) as e:
            read_seed003(seed_dir)
        assert e.value.path == str(path) and e.value.offset is not None and e.value.offset <= cut
        assert not isinstance(e.value, UnsafePickleError)


def test_trailing_bytes_and_non_pickles(tmp_path):
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps({1: b"a"}) + b"junk")
    with pytest.raises(FormatError, match="4 unexpected bytes after") as e:
        load_plain_pickle(path)
    assert e.value.offset == len(pickle.dumps({1: b"a"}))
    path.write_text("this is not a pickle at all")
    with pytest.raises(FormatError, match="corrupt or truncated") as e:
        load_plain_pickle(path)
    assert e.value.offset == 4  # "this" parses as four opcodes; the space is not one


def test_plain_data_of_every_admitted_type_loads(tmp_path):
    value = {1: b"a", "s": [1, 2.5, None, True], "t": (b"x", "y"), "big": 2**100, "neg": -5, "shared": ["same"] * 3}
    with_sets = dict(value, set={1, 2}, fs=frozenset({3}))  # native opcodes from protocol 4
    with_bytearray = dict(with_sets, ba=bytearray(b"z"))  # native from protocol 5
    for protocol, v in ((3, value), (4, with_sets), (5, with_bytearray)):
        path = tmp_path / f"p{protocol}.pkl"
        path.write_bytes(pickle.dumps(v, protocol=protocol))
        assert load_plain_pickle(path) == v


# ---------------------------------------------------------------- malicious pickles
class _Evil:
    """Pickling this (never unpickling) produces a pickle that would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _reduce_pickles(marker):
    """Pickles that, if loaded by pickle.load, would create ``marker``."""
    cmd = f"touch {marker}".encode()
    yield "protocol 0 GLOBAL+REDUCE", b"cos\nsystem\n(S'" + cmd + b"'\ntR."
    for protocol in (2, 4, 5):
        yield f"protocol {protocol} inside a dict", pickle.dumps({1: b"a", 2: _Evil(marker)}, protocol=protocol)
    yield "merges list", pickle.dumps([(b"a", b"b"), _Evil(marker)], protocol=4)
    # STACK_GLOBAL of builtins.eval, with the names memoized first
    yield (
        "eval via memo",
        (
            b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94\x8c"
            + bytes([len(b"__import__('os').system('" + cmd + b"')")])
            + b"__import__('os').system('"
            + cmd
            + b"')\x94\x85R."
        ),
    )
    yield "INST", b"(S'" + cmd + b"'\nios\nsystem\n."
    yield "OBJ", b"(cos\nsystem\nS'" + cmd + b"'\no."
    yield "BUILD on a dict", b"\x80\x04}\x94}\x94b."
    yield "EXT1", b"\x80\x02\x82\x01."
    yield "PERSID", b"Pabc\n."
    yield "BINPERSID", b"\x80\x04\x8c\x03abc\x94Q."
    yield "NEWOBJ", b"\x80\x04\x8c\x02os\x8c\x06system\x93)\x81."


@pytest.mark.parametrize("which", range(13))
def test_malicious_pickles_are_refused_and_never_run(tmp_path, which, monkeypatch):
    marker = tmp_path / "PWNED"
    name, payload = list(_reduce_pickles(marker))[which]
    # the only loaders that could run it are forbidden in this test
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("pickle.load called"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("pickle.loads called"))
    for file in (VOCAB_FILE, MERGES_FILE):
        d = seed_files(tmp_path / f"s{file}", seed_vocab(MERGES), MERGES)
        (d / file).write_bytes(payload)
        with pytest.raises(UnsafePickleError) as e:
            read_seed003(d)
        assert e.value.path == str(d / file), name
        assert e.value.offset is not None and 0 <= e.value.offset < len(payload)
        assert "refused" in str(e.value) and "plain data" in str(e.value)
    assert not marker.exists(), f"{name}: the payload ran"


def test_refusal_names_the_global(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({1: _Evil(tmp_path / "x")}, protocol=4))
    with pytest.raises(UnsafePickleError, match=r"STACK_GLOBAL tries to import (os|posix|nt)\.system") as e:
        load_plain_pickle(path)
    ops = [(op.name, pos) for op, _, pos in pickletools.genops(path.read_bytes())]
    assert e.value.offset == dict(ops)["STACK_GLOBAL"]
    path.write_bytes(b"cos\nsystem\n(S'echo hi'\ntR.")
    with pytest.raises(UnsafePickleError, match=r"GLOBAL tries to import os\.system") as e:
        load_plain_pickle(path)
    assert e.value.offset == 0
    path.write_bytes(b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94.")
    with pytest.raises(UnsafePickleError, match=r"builtins\.eval"):
        load_plain_pickle(path)


def test_second_line_of_defence_refuses_globals(tmp_path):
    """Even without the opcode scan, the unpickler itself imports nothing."""
    import io

    marker = tmp_path / "PWNED"
    raw = pickle.dumps(_Evil(marker), protocol=4)
    with pytest.raises(UnsafePickleError, match=r"tries to import (os|posix|nt)\.system"):
        _RefusingUnpickler(io.BytesIO(raw), "x.pkl").load()
    with pytest.raises(UnsafePickleError, match="persistent id"):
        _RefusingUnpickler(io.BytesIO(b"\x80\x04\x8c\x03abc\x94Q."), "x.pkl").load()
    assert not marker.exists()


def test_protocol_2_bytes_are_refused_as_unsafe(tmp_path):
    """Before protocol 3, bytes are pickled as a call to _codecs.encode: a global, refused."""
    path = tmp_path / "p2.pkl"
    path.write_bytes(pickle.dumps({0: b"a"}, protocol=2))
    with pytest.raises(UnsafePickleError, match=r"_codecs\.encode"):
        load_plain_pickle(path)


def test_huge_length_prefix_is_a_format_error(tmp_path):
    path = tmp_path / "huge.pkl"
    path.write_bytes(b"\x80\x04\x8e" + struct.pack("<Q", 2**60) + b"abc.")
    with pytest.raises(FormatError, match="corrupt or truncated"):
        load_plain_pickle(path)
