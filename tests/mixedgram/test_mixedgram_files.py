"""The .mxgram file: the seed's layout by hand, byte-exact output, round trips
through files, and FormatError with the byte offset for every kind of damage."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge import Mixedgram
from tokenforge.errors import FormatError
from tokenforge.mixedgram import HEADER_BYTES, inspect_file
from tokenforge.reference import mixedgram as ref

SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
LATIN1_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=255), max_size=500)
REPETITIVE = st.lists(st.sampled_from(["the ", "cat ", "sat", "\0", "\xe9t\xe9 ", "\n", "x"]), max_size=200).map(
    "".join
)


# ------------------------------------------------------------- the seed layout
def entry(ngram: bytes, id: int) -> bytes:
    """One header entry written from the seed's description, independently of tokenforge."""
    return b"\x00" * (8 - len(ngram)) + ngram + bytes([id >> 8, id & 0xFF])


def triple(x: int, y: int) -> bytes:
    return bytes([x >> 4, ((x & 0x0F) << 4) | (y >> 8), y & 0xFF])


HAND_NGRAMS = [b"the ", b"cat", b"\xe9t\xe9", b"sat on t", b"he"]
HAND_TEXT = "the cat sat on the mat \xe9t\xe9"
# greedy: "the " "cat" " " "sat on t" "he" " " "m" "a" "t" " " "\xe9t\xe9"
HAND_IDS = [256, 257, 0x20, 259, 260, 0x20, ord("m"), ord("a"), ord("t"), 0x20, 258]


def hand_written_file() -> bytes:
    header = b"".join(entry(g, 256 + i) for i, g in enumerate(HAND_NGRAMS)) + bytes(10) * (3840 - len(HAND_NGRAMS))
    assert len(header) == 38_400
    ids = HAND_IDS + [0]  # odd count: a padding 0 completes the last triple
    stream = b"".join(triple(x, y) for x, y in zip(ids[0::2], ids[1::2]))
    return header + stream


def test_a_hand_written_file_decodes(tmp_path):
    p = tmp_path / "hand.mxgram"
    p.write_bytes(hand_written_file())
    assert Mixedgram.decompress(p) == HAND_TEXT
    assert Mixedgram.decompress_bytes(p.read_bytes()) == HAND_TEXT.encode("latin-1")
    assert Mixedgram.load(p).ngrams[:5] == HAND_NGRAMS


def test_our_file_is_byte_for_byte_the_seed_layout(tmp_path):
    tok = Mixedgram(HAND_NGRAMS)
    assert tok.encode(HAND_TEXT) == HAND_IDS
    stats = tok.compress(text=HAND_TEXT, dst=tmp_path / "ours.mxgram", train=False)
    assert (tmp_path / "ours.mxgram").read_bytes() == hand_written_file()
    assert stats.output_bytes == 38_400 + 18 and stats.tokens == 11 and not stats.trained


def test_trained_files_match_the_reference_layout(tmp_path):
    text = "the cat sat on the mat; the cat ate the rat. " * 30 + "\xe9\xe8\xff"
    stats = Mixedgram.compress(text=text, dst=tmp_path / "t.mxgram")
    assert stats.trained
    data = text.encode("latin-1")
    grams = [g for g, _ in ref.vocabulary(data)]
    want = ref.mxgram_file(grams, ref.greedy(grams, data))
    assert (tmp_path / "t.mxgram").read_bytes() == want
    Mixedgram.compress(text=text, dst=tmp_path / "o.mxgram", parse="optimal")
    got = (tmp_path / "o.mxgram").read_bytes()
    assert got[:HEADER_BYTES] == want[:HEADER_BYTES]
    assert len(got) - HEADER_BYTES == 3 * ((ref.min_tokens(grams, data) + 1) // 2)


def test_unused_entries_are_all_zero(tmp_path):
    Mixedgram.compress(text="abcab", dst=tmp_path / "s.mxgram")
    data = (tmp_path / "s.mxgram").read_bytes()
    n = len(ref.vocabulary(b"abcab"))
    assert data[10 * n : HEADER_BYTES] == bytes(HEADER_BYTES - 10 * n)
    assert data[8:10] == b"\x01\x00"


# ------------------------------------------------------------------ round trips
@SETTINGS
@given(LATIN1_TEXT, st.sampled_from(["greedy", "optimal"]))
def test_decompress_of_compress_is_the_text_without_nul(tmp_path, text, parse):
    p = tmp_path / "x.mxgram"
    stats = Mixedgram.compress(text=text, dst=p, parse=parse)
    assert Mixedgram.decompress(p) == text.replace("\0", "")
    assert stats.output_bytes == p.stat().st_size == HEADER_BYTES + 3 * ((stats.tokens + 1) // 2)
    assert (p.stat().st_size - HEADER_BYTES) % 3 == 0


@SETTINGS
@given(REPETITIVE, st.sampled_from(["greedy", "optimal"]))
def test_round_trip_of_repetitive_text(tmp_path, text, parse):
    p = tmp_path / "r.mxgram"
    Mixedgram.compress(text, p, parse=parse)
    assert Mixedgram.decompress(p) == text.replace("\0", "")


@SETTINGS
@given(st.binary(max_size=400), st.sampled_from(["greedy", "optimal"]))
def test_round_trip_of_files_of_any_bytes(tmp_path, data, parse):
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    Mixedgram.compress(src, tmp_path / "b.mxgram", parse=parse)
    assert Mixedgram.decompress_bytes(tmp_path / "b.mxgram") == data.replace(b"\0", b"")


def test_a_str_naming_a_file_is_that_file(tmp_path, monkeypatch):
    (tmp_path / "in.txt").write_bytes(b"hello \xe9 hello")
    monkeypatch.chdir(tmp_path)
    Mixedgram.compress("in.txt", "out.mxgram")
    assert Mixedgram.decompress("out.mxgram") == "hello \xe9 hello"
    Mixedgram.compress(text="in.txt", dst="lit.mxgram")
    assert Mixedgram.decompress("lit.mxgram") == "in.txt"
    with pytest.raises(TypeError):
        Mixedgram.compress("in.txt", "x.mxgram", text="y")


def test_compress_with_progress_is_the_same_file(tmp_path, monkeypatch):
    import tokenforge.mixedgram as mg

    monkeypatch.setattr(mg, "_STEP", 1000)  # many steps on a small text
    text = ("the cat sat on the mat \xe9t\xe9 " * 300).encode("latin-1")
    tok = Mixedgram.train(text=text)
    tok.compress(text=text, dst=tmp_path / "a.mxgram", train=False)
    tok.compress(text=text, dst=tmp_path / "b.mxgram", train=False, progress=True)
    assert (tmp_path / "a.mxgram").read_bytes() == (tmp_path / "b.mxgram").read_bytes()
    assert Mixedgram.decompress(tmp_path / "b.mxgram", progress=True) == text.decode("latin-1")


def test_an_instance_uses_its_vocabulary_unless_told(tmp_path):
    tok = Mixedgram.train(text="aaaa bbbb " * 10)
    s1 = tok.compress(text="cccc dddd", dst=tmp_path / "1.mxgram")
    assert not s1.trained and s1.tokenizer is tok
    s2 = tok.compress(text="cccc dddd", dst=tmp_path / "2.mxgram", train=True)
    assert s2.trained and s2.tokens < s1.tokens
    s3 = Mixedgram().compress(text="cccc dddd", dst=tmp_path / "3.mxgram")
    assert s3.trained
    for name in ("1", "2", "3"):
        assert Mixedgram.decompress(tmp_path / f"{name}.mxgram") == "cccc dddd"


def test_a_failed_compress_leaves_no_file(tmp_path):
    p = tmp_path / "x.mxgram"
    p.write_bytes(b"previous")
    with pytest.raises(tokenforge.Latin1Error):
        Mixedgram.compress(text="ok \u2603", dst=p)
    assert p.read_bytes() == b"previous"
    assert [x.name for x in tmp_path.iterdir()] == ["x.mxgram"]


# ------------------------------------------------------------------ bad files
@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.mxgram"
    p.write_bytes(hand_written_file())
    return p


def damaged(path, change) -> FormatError:
    data = bytearray(path.read_bytes())
    change(data)
    bad = path.with_name("bad.mxgram")
    bad.write_bytes(bytes(data))
    with pytest.raises(FormatError) as e:
        Mixedgram.decompress(bad)
    assert e.value.path == str(bad)
    assert f"byte offset {e.value.offset}" in str(e.value)
    return e.value


def test_bad_id_field_in_a_header_entry(good):
    def change(d):
        d[10 * 3 + 9] ^= 0x01  # entry 3's id: 259 -> 258

    e = damaged(good, change)
    assert e.offset == 38 and "entry 3" in str(e) and "expected 259" in str(e)


def test_zero_byte_inside_an_ngram(good):
    def change(d):
        d[10 * 1 + 6] = 0  # "cat" -> "c\0t"

    e = damaged(good, change)
    assert e.offset == 16 and "zero byte" in str(e)


def test_ngram_too_short(good):
    def change(d):
        d[10 * 4 + 6] = 0  # "he" -> "e"

    e = damaged(good, change)
    assert e.offset == 40 and "2..8" in str(e)


def test_id_without_ngram_and_repeated_ngram(good):
    def empty_entry(d):
        d[10 * 100 : 10 * 100 + 10] = bytes(8) + (356).to_bytes(2, "big")

    e = damaged(good, empty_entry)
    assert e.offset == 1000

    def repeat(d):
        d[10 * 4 : 10 * 4 + 10] = entry(b"cat", 260)

    e = damaged(good, repeat)
    assert e.offset == 40 and "repeats" in str(e)


def test_id_out_of_range(good):
    stream_at = HEADER_BYTES

    def unused_id(d):
        d[stream_at + 3 : stream_at + 6] = triple(300, 259)  # id 300 is an unused slot

    e = damaged(good, unused_id)
    assert e.offset == stream_at + 3 and "300" in str(e) and "out of range" in str(e)

    def second_of_triple(d):
        d[stream_at + 6 : stream_at + 9] = triple(0x20, 4095)

    e = damaged(good, second_of_triple)
    assert e.offset == stream_at + 6 and "4095" in str(e)

    def zero_in_middle(d):
        d[stream_at : stream_at + 3] = triple(0, 257)

    e = damaged(good, zero_in_middle)
    assert e.offset == stream_at and "padding" in str(e)


@pytest.mark.parametrize("cut", [1, 2])
def test_truncated_stream(good, cut):
    size = good.stat().st_size
    e = damaged(good, lambda d: d.__delitem__(slice(size - cut, size)))
    assert e.offset == size - 3
    assert "not a multiple of 3" in str(e)


@pytest.mark.parametrize("extra", [b"\x00", b"\x12\x34"])
def test_wrong_length(good, extra):
    size = good.stat().st_size
    e = damaged(good, lambda d: d.extend(extra))
    assert e.offset == size


@pytest.mark.parametrize("keep", [0, 9, 10, 20_000, HEADER_BYTES - 1])
def test_truncated_header(good, keep):
    e = damaged(good, lambda d: d.__delitem__(slice(keep, None)))
    assert e.offset == keep and "header" in str(e)
    with pytest.raises(FormatError) as e2:
        tokenforge.load(good.with_name("bad.mxgram"))
    assert e2.value.offset == keep


def test_inspect_names_offsets_too(good):
    data = bytearray(good.read_bytes())
    data.append(1)
    good.write_bytes(bytes(data))
    with pytest.raises(FormatError) as e:
        inspect_file(good)
    assert e.value.offset == len(data) - 1


# ---------------------------------------------------------------- recognition
def test_load_recognises_mxgram_with_or_without_the_suffix(tmp_path, good):
    assert isinstance(tokenforge.load(good), Mixedgram)
    other = tmp_path / "no_suffix.bin"
    other.write_bytes(good.read_bytes())
    tok = tokenforge.load(other)
    assert isinstance(tok, Mixedgram) and tok.ngrams[:5] == HAND_NGRAMS
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 200)
    with pytest.raises(FormatError, match="not a tokenizer file"):
        tokenforge.load(junk)


def test_inspect_reports_vocabulary_overlaps_and_ratio(tmp_path):
    text = ("actually, the actual actuality " * 200).encode("latin-1")
    p = tmp_path / "i.mxgram"
    stats = Mixedgram.compress(text, p)
    info = inspect_file(p, top=5)
    assert info["kind"] == "mxgram" and info["ngrams"] == stats.tokenizer.ngram_count
    assert sum(info["by_n"].values()) == info["ngrams"]
    assert info["stream"]["tokens"] == stats.tokens
    assert info["stream"]["text_bytes"] == len(text)
    assert info["stream"]["ratio_file"] == pytest.approx(len(text) / p.stat().st_size)
    assert info["overlaps"]["inside_longer"] > 0
    assert len(info["top"]) == 5 and info["top"][0]["id"] == 256
    tok = stats.tokenizer
    tok.save(tmp_path / "v.json")
    vinfo = inspect_file(tmp_path / "v.json")
    assert vinfo["kind"] == "vocabulary" and "stream" not in vinfo and "count" in vinfo["top"][0]


def test_an_empty_text_is_a_header_only_file(tmp_path):
    stats = Mixedgram.compress(text="", dst=tmp_path / "e.mxgram")
    assert stats.output_bytes == HEADER_BYTES and stats.tokens == 0
    assert (tmp_path / "e.mxgram").read_bytes() == bytes(HEADER_BYTES)
    assert Mixedgram.decompress(tmp_path / "e.mxgram") == ""
    with pytest.raises(TypeError, match="destination"):
        Mixedgram.compress(text="x")
