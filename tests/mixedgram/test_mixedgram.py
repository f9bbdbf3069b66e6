"""Mixedgram as a tokenizer: the vocabulary rule, greedy and optimal parsing
(parity with the slow reference), latin1 and NUL handling, the contract,
special tokens, saving and loading."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge import Latin1Error, Mixedgram, _core
from tokenforge.errors import FormatError, SpecialTokenError, TokenforgeError, VersionError
from tokenforge.reference import mixedgram as ref

SETTINGS = settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
LATIN1 = st.characters(min_codepoint=0, max_codepoint=255)
# Few distinct bytes make long repeats, so the n-gram pruning and long tokens are exercised.
SMALL = st.text(alphabet=st.sampled_from("ab c\n\xe9"), max_size=400)
SMALL_BYTES = st.binary(max_size=300).map(lambda b: bytes(x % 4 + 1 for x in b))

TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one or other of "
    "their daughters. Caf\xe9, na\xefve, \xa3100, \xbd, \xff.\n"
) * 20


def _rich_text() -> str:
    """A deterministic text with far more than 3,840 distinct n-grams."""
    import random

    rng = random.Random(4)
    syllables = ["ka", "lo", "mi", "tre", "vus", "\xe9n", "or", "sta", "qu", "ip", "\xdf", "el", "an", "gr", "oo"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    return " ".join(rng.choice(words) for _ in range(6000))


RICH = _rich_text()


@pytest.fixture(scope="module")
def tok():
    return Mixedgram.train(text=TEXT)


# ---------------------------------------------------------------- vocabulary
@pytest.mark.parametrize("text", [TEXT, RICH], ids=["fewer-than-3840", "more-than-3840"])
def test_vocabulary_follows_the_spec_rule(text):
    tok = Mixedgram.train(text=text)
    want = ref.vocabulary(text.encode("latin-1"))
    assert tok.ngrams[: len(want)] == [g for g, _ in want]
    assert tok.counts[: len(want)] == [c for _, c in want]
    assert tok.ngram_count == len(want)


def test_ties_go_to_longer_then_byte_order():
    # "abab": abab (score 4, n 4) before ab (score 4, n 2); aba before bab (score 3, bytes)
    tok = Mixedgram.train(text="abab")
    assert tok.ngrams[:5] == [b"abab", b"ab", b"aba", b"bab", b"ba"]
    assert tok.counts[:5] == [1, 2, 1, 1, 1]
    assert tok.ngrams[5:] == [b""] * 3835


@SETTINGS
@given(SMALL_BYTES, st.integers(1, 60))
def test_top_k_matches_the_reference_for_any_k(text, k):
    top, _ = _core.mixedgram_train(text, k, 2)
    assert top == ref.vocabulary(text, k)


def test_training_does_not_depend_on_threads():
    text = (TEXT * 5).encode("latin-1")
    a, _ = _core.mixedgram_train(text, 3840, 1)
    b, _ = _core.mixedgram_train(text, 3840, 2)
    assert a == b


def test_fewer_ngrams_than_slots_leave_slots_unused():
    tok = Mixedgram.train(text="abcab")
    assert tok.ngram_count == len(ref.vocabulary(b"abcab"))
    assert tok.token_bytes()[256 + tok.ngram_count :].tolist() == [0] * (3840 - tok.ngram_count)


def test_empty_and_tiny_texts():
    for t in ("", "a", "\0\0"):
        tok = Mixedgram.train(text=t)
        assert tok.ngram_count == 0
        assert tok.decode(tok.encode(t)) == t.replace("\0", "")


# ------------------------------------------------------------------- parsing
def test_two_repeated_eight_grams_are_sixteen_bytes_in_three(tmp_path):
    tok = Mixedgram.train(text="abcdefghijklmnop" * 50)
    ids = tok.encode("abcdefghijklmnop")
    assert len(ids) == 2
    assert [tok.id_to_bytes(i) for i in ids] == [b"abcdefgh", b"ijklmnop"]
    assert len(tok.pack(ids)) == 3
    stats = tok.compress(text="abcdefghijklmnop", dst=tmp_path / "x.mxgram", train=False)
    assert stats.tokens == 2
    assert (tmp_path / "x.mxgram").stat().st_size == 38_400 + 3
    assert Mixedgram.decompress(tmp_path / "x.mxgram") == "abcdefghijklmnop"


@SETTINGS
@given(SMALL, SMALL)
def test_greedy_matches_the_reference_and_optimal_is_minimal(train_text, text):
    tok = Mixedgram.train(text=train_text)
    data = text.encode("latin-1")
    greedy = tok.encode(text)
    assert greedy == ref.greedy(tok.ngrams, data)
    optimal = tok.encode(text, parse="optimal")
    assert len(optimal) == ref.min_tokens(tok.ngrams, data)
    assert len(optimal) <= len(greedy)
    assert tok.decode(optimal) == text
    assert tok.decode(greedy) == text


def test_optimal_can_beat_greedy():
    tok = Mixedgram([b"abc", b"ab", b"cde"])
    assert tok.encode("abcde") == [256, ord("d"), ord("e")]
    assert tok.encode("abcde", parse="optimal") == [257, 258]
    assert Mixedgram([b"abc", b"ab", b"cde"], parse="optimal").encode("abcde") == [257, 258]


def test_parse_is_checked(tok):
    with pytest.raises(TokenforgeError, match="unknown parse"):
        tok.encode("abc", parse="best")
    with pytest.raises(TokenforgeError, match="unknown parse"):
        Mixedgram(parse="fast")


@SETTINGS
@given(st.text(alphabet=LATIN1, max_size=300))
def test_decode_encode_round_trip_for_any_latin1_text(tok, text):
    want = text.replace("\0", "")
    for parse in ("greedy", "optimal"):
        ids = tok.encode(text, parse=parse)
        assert all(0 < i < 4096 for i in ids)
        assert tok.decode(ids) == want
        assert tok.decode_bytes(ids) == want.encode("latin-1")


def test_bytes_are_latin1_text(tok):
    assert tok.encode(b"Caf\xe9") == tok.encode("Caf\xe9")
    assert tok.encode_ordinary(b"Caf\xe9") == tok.encode("Caf\xe9")


# ------------------------------------------------------------ latin1 and NUL
@pytest.mark.parametrize(
    "text, char, offset",
    [("abc\u20ac", "\u20ac", 3), ("\u0100", "\u0100", 0), ("ok \xff then \U0001f600 x", "\U0001f600", 10)],
)
def test_non_latin1_text_names_the_character_and_offset(tok, text, char, offset, tmp_path):
    for call in (
        lambda: tok.encode(text),
        lambda: tok.encode([text]),
        lambda: Mixedgram.train(text=text),
        lambda: Mixedgram.compress(text=text, dst=tmp_path / "x.mxgram"),
    ):
        with pytest.raises(Latin1Error) as e:
            call()
        assert e.value.char == char
        assert e.value.offset == offset
        assert f"U+{ord(char):04X}" in str(e.value) and f"offset {offset}" in str(e.value)
    assert not (tmp_path / "x.mxgram").exists()


def test_latin1_error_is_a_value_error(tok):
    with pytest.raises(ValueError):
        tok.encode("\u2603")


def test_errors_replace_writes_a_question_mark(tok):
    assert tok.decode(Mixedgram(errors="replace").encode("a\u20acb")) == "a?b"
    t = Mixedgram.train(text="x\u2603y", errors="replace")
    assert t.decode(t.encode("x\u2603y")) == "x?y"


def test_a_utf8_file_is_read_with_encoding(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("caf\xe9 caf\xe9 \u20ac", encoding="utf-8")
    with pytest.raises(Latin1Error) as e:
        Mixedgram.train(path=p, encoding="utf-8")
    assert e.value.offset == 10 and str(p) in str(e.value)
    t = Mixedgram.train(path=p, encoding="utf-8", errors="replace")
    assert b"caf\xe9" in t.ngrams
    # without encoding= the file's bytes are latin1 (the UTF-8 of e-acute is two characters)
    raw = Mixedgram.train(path=p)
    assert b"caf\xc3" in raw.ngrams


def test_nul_is_removed_before_training_and_encoding(tmp_path):
    tok = Mixedgram.train(text="a\0b" * 10)
    assert b"ab" in tok.ngrams and tok.training["nul_removed"] == 10
    assert all(b"\0" not in g for g in tok.ngrams)
    assert tok.decode(tok.encode("a\0b\0")) == "ab"
    stats = Mixedgram.compress(text="x\0y\0z", dst=tmp_path / "n.mxgram")
    assert stats.nul_removed == 2 and stats.input_bytes == 5
    assert Mixedgram.decompress(tmp_path / "n.mxgram") == "xyz"


# ----------------------------------------------------------------- contract
def test_contract(tok):
    assert tok.vocab_size == 4096 == tok.get_vocab_size()
    assert tok.special_tokens == {}
    tb = tok.token_bytes()
    assert tb.shape == (4096,) and tb.dtype == np.int32
    assert tb[:256].tolist() == [1] * 256
    for i, g in enumerate(tok.ngrams):
        assert tb[256 + i] == len(g)
        if g:
            assert tok.id_to_bytes(256 + i) == g
            assert tok.id_to_token(256 + i) == g.decode("latin-1")
    assert tok.id_to_bytes(0xE9) == b"\xe9" and tok.id_to_token(0xE9) == "\xe9"
    assert isinstance(tokenforge.Mixedgram(), tokenforge.Tokenizer)


def test_unused_ids_are_errors():
    tok = Mixedgram([b"ab"])
    with pytest.raises(TokenforgeError, match="not used"):
        tok.decode([300])
    with pytest.raises(TokenforgeError, match="not used"):
        tok.id_to_bytes(300)
    with pytest.raises(TokenforgeError, match="out of range"):
        tok.decode([4096])
    with pytest.raises(TokenforgeError):
        tok.id_to_bytes(4096)


def test_batch_equals_one_by_one(tok):
    texts = ["", "a", TEXT[:500], "Caf\xe9 na\xefve", "\0x\0"]
    for parse in ("greedy", "optimal"):
        one = [tok.encode(t, parse=parse) for t in texts]
        assert tok.encode(texts, parse=parse) == one
        assert tok.encode_batch(texts, parse=parse, num_threads=2) == one
        arrays = tok.encode_batch(texts, as_numpy=True, parse=parse)
        assert [a.tolist() for a in arrays] == one and arrays.ids.dtype == np.uint32
        assert arrays.tolist() == one and arrays.offsets.tolist()[-1] == sum(map(len, one))
    assert tok.encode_to_numpy(TEXT).tolist() == tok.encode(TEXT)


def test_numpy_ids_decode(tok):
    ids = tok.encode_to_numpy(TEXT)
    assert tok.decode(ids) == TEXT
    assert tok.decode(ids.astype(np.int64)) == TEXT


def test_prepend_append_need_special_tokens(tok):
    with pytest.raises(SpecialTokenError):
        tok.encode("x", prepend="<|bos|>")
    assert tok.encode("ab", prepend=0x41, append=0x42) == [0x41] + tok.encode("ab") + [0x42]


# ------------------------------------------------------------ special tokens
def test_special_tokens_take_the_last_ids():
    tok = Mixedgram.train(text=RICH, special_tokens="nanochat")
    specials = tok.special_tokens
    assert sorted(specials.values()) == list(range(4096 - 9, 4096))
    assert specials["<|bos|>"] == 4087 and specials["<|output_end|>"] == 4095
    assert tok.vocab_size == 4096
    assert len(ref.vocabulary(RICH.encode("latin-1"), 4000)) == 4000  # more n-grams than fit
    assert tok.ngram_count == 3840 - 9
    assert tok.ngrams[:3831] == [g for g, _ in ref.vocabulary(RICH.encode("latin-1"), 3831)]
    assert tok.token_bytes()[4087:].tolist() == [0] * 9
    bos = tok.get_bos_token_id()
    ids = tok.encode("hello <|bos|>", prepend="<|bos|>")
    assert ids[0] == bos and bos not in ids[1:]  # special text in user text is ordinary text
    assert tok.decode(ids) == "<|bos|>hello <|bos|>"
    assert tok.encode("a<|bos|>b", allowed_special="all") == tok.encode("a") + [bos] + tok.encode("b")
    with pytest.raises(SpecialTokenError):
        tok.encode("a<|bos|>b", disallowed_special="all")


def test_chat_rendering_works_with_special_tokens():
    tok = Mixedgram.train(text=TEXT, special_tokens="nanochat")
    conv = {"messages": [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Caf\xe9!"}]}
    ids, mask = tok.render_conversation(conv)
    assert len(ids) == len(mask)
    assert ids[0] == tok.get_bos_token_id()
    assert tok.decode(ids).endswith("Caf\xe9!<|assistant_end|>")


def test_bad_special_tokens_are_refused():
    with pytest.raises(SpecialTokenError, match="ASCII"):
        Mixedgram(special_tokens=["<|\u00e9|>"])
    with pytest.raises(SpecialTokenError, match="twice"):
        Mixedgram(special_tokens=["<a>", "<a>"])
    with pytest.raises(SpecialTokenError, match="id"):
        Mixedgram(special_tokens={"<a>": 100})
    with pytest.raises(TokenforgeError):
        Mixedgram([b"ab"], special_tokens={"<a>": 256})


def test_training_an_instance_keeps_its_special_tokens():
    tok = Mixedgram(special_tokens=["<|endoftext|>"])
    same = tok.train(text=RICH)
    assert same is tok
    assert tok.special_tokens == {"<|endoftext|>": 4095} and tok.ngram_count == 3839


# ------------------------------------------------------------ save and load
@pytest.mark.parametrize("name", ["vocab.json", "vocab_dir", "vocab.mxgram"])
def test_save_and_load_round_trip(tmp_path, name, tok):
    path = tmp_path / name
    tok.save(path)
    for loaded in (tokenforge.load(path), Mixedgram.load(path)):
        assert isinstance(loaded, Mixedgram)
        assert loaded.ngrams == tok.ngrams
        assert loaded.encode(TEXT) == tok.encode(TEXT)
        if name != "vocab.mxgram":
            assert loaded.counts == tok.counts
    if name == "vocab.mxgram":
        assert path.stat().st_size == 38_400
        assert Mixedgram.decompress(path) == ""


def test_special_tokens_survive_json_but_not_mxgram(tmp_path):
    tok = Mixedgram.train(text=TEXT, special_tokens="nanochat")
    tok.save(tmp_path / "v.json")
    back = tokenforge.load(tmp_path / "v.json")
    assert back.special_tokens == tok.special_tokens and back.ngrams == tok.ngrams
    with pytest.raises(TokenforgeError, match="special tokens"):
        tok.save(tmp_path / "v.mxgram")
    assert not (tmp_path / "v.mxgram").exists()


def test_vocabulary_json_is_readable_and_strict(tmp_path, tok):
    p = tmp_path / "v.json"
    tok.save(p)
    text = p.read_text()
    assert text.startswith('{\n  "format": "tokenforge-mixedgram",\n  "version": 2,\n')
    assert '\n    "Caf\\u00e9' in text or "\\u00e9" in text
    bad = text.replace('"version": 2', '"version": 3')
    (tmp_path / "new.json").write_text(bad)
    with pytest.raises(VersionError):
        tokenforge.load(tmp_path / "new.json")
    first = tok.ngrams[0].decode("latin-1")
    bad = text.replace(f"    {json.dumps(first)},", '    "x",', 1)
    (tmp_path / "short.json").write_text(bad)
    with pytest.raises(FormatError) as e:
        tokenforge.load(tmp_path / "short.json")
    assert e.value.line == 5 and "2..8" in str(e.value)
    (tmp_path / "extra.json").write_text(text.replace('"counts"', '"extra": 1, "counts"'))
    with pytest.raises(FormatError, match="unknown key"):
        tokenforge.load(tmp_path / "extra.json")


def test_loading_from_a_mxgram_reads_only_the_header(tmp_path, tok):
    p = tmp_path / "big.mxgram"
    tok.compress(text=TEXT, dst=p, train=False)
    with open(p, "ab") as f:
        f.write(b"\x01")  # a broken stream does not matter for the vocabulary
    assert Mixedgram.load(p).ngrams == tok.ngrams
