"""Lone surrogates round-trip: ``decode(encode(s)) == s`` for every str.

A Python str may hold unpaired U+D800..U+DFFF (``json.loads('"\\ud800"')``,
``os.fsdecode`` of bad bytes). Every UTF-8 family encodes one as the byte ids
of its three "surrogatepass" bytes and decodes them back; decoding of other
invalid UTF-8 is unchanged (U+FFFD as "replace" gives). Mixedgram (latin1)
refuses it with its typed Latin1Error.
"""

from __future__ import annotations

import codecs
import json
import re
import unicodedata
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_corpus import TINY_DOCS
from tokenforge import (
    BPETokenizer,
    GrowingBPETokenizer,
    Latin1Error,
    LZ78Tokenizer,
    Mixedgram,
    bpe,
    growing,
    rust_backed,
)
from tokenforge.base import SURROGATE_ERRORS, decode_utf8
from tokenforge.errors import CorpusError

CORPUS = list(TINY_DOCS)  # the shared tiny corpus (tests/fixtures/tiny_corpus.txt)

#: any code point, lone surrogates included
ANY_CHAR = st.characters(categories=None, exclude_categories=())
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=None, exclude_categories=())
PIECES = st.one_of(
    st.text(alphabet=ANY_CHAR, max_size=10),
    SURROGATE,
    st.sampled_from(
        [
            "\ud83d\ude00",
            "\U0001f600",
            "\ud800\ud800",
            "\udfff",
            " the",
            "fox",
            "é",
            "e\u0301",
            "\r\n",
            "123",
            "<|bos|>",
            "<|endoftext|>",
            "<|user_start|>",
        ]
    ),
)
#: texts where lone surrogates are common (next to ordinary text, specials, each other)
TEXT = st.lists(PIECES, max_size=12).map("".join)


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _permuted_bytes_bpe() -> BPETokenizer:
    """A BPE vocabulary whose single bytes are not ids 0..255 in order (as an
    imported tiktoken/HF vocabulary may be): byte b has rank 255 - b."""
    ranks = BPETokenizer.train_from_iterator(CORPUS, 300, special_tokens=None, progress=False).mergeable_ranks()
    ranks = {t: (255 - r if r < 256 else r) for t, r in ranks.items()}
    return BPETokenizer.from_tiktoken(ranks, "gpt4", special_tokens={"<|bos|>": 300})


def _seed003_bpe() -> BPETokenizer:
    """Seed 003's layout (specials right after the bytes) in seed mode: encode
    turns special text into special ids by default."""
    tok = BPETokenizer.train_from_iterator(
        CORPUS,
        330,
        special_tokens=["<|endoftext|>"],
        pattern="gpt2",
        tie_break="lexicographic",
        layout="specials_first",
        progress=False,
    )
    tok.split_specials = True
    return tok


TOKENIZERS = {
    "bpe-nanochat": lambda: BPETokenizer.train_from_iterator(CORPUS, 400, progress=False),
    "bpe-specials-first-seed": _seed003_bpe,
    "bpe-permuted-bytes": _permuted_bytes_bpe,
    "lz78": lambda: _quiet(
        LZ78Tokenizer.train_from_iterator,
        CORPUS,
        600,
        strategy="frequency_gated",
        special_tokens="nanochat",
        progress=False,
    ),
    "lz78-unchunked": lambda: _quiet(
        LZ78Tokenizer.train_from_iterator, CORPUS, 500, strategy="standard", chunking=False, progress=False
    ),
    "growing": lambda: _grown(),
}


def _grown() -> GrowingBPETokenizer:
    tok = GrowingBPETokenizer()
    tok.learn_merges(iter(CORPUS), 80)
    return tok


_cache: dict[str, object] = {}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def tok(request):
    if request.param not in _cache:
        _cache[request.param] = TOKENIZERS[request.param]()
    return _cache[request.param]


def _enc(tok, text, **kw):
    """The family's ``encode`` (the contract's in every family)."""
    return tok.encode(text, **kw)


def _expect(tok, text: str) -> str:
    return unicodedata.normalize("NFC", text) if isinstance(tok, GrowingBPETokenizer) else text


def _byte_id(tok, b: int) -> int:
    if isinstance(tok, LZ78Tokenizer):
        return tok.byte_fallback_id(b)
    if isinstance(tok, GrowingBPETokenizer):
        return b + GrowingBPETokenizer.BYTE_OFFSET
    return tok.data.byte_ids[b]


# ---- round trips ------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_round_trip_any_str(tok, text):
    ids = _enc(tok, text)
    assert tok.decode(ids) == _expect(tok, text)
    assert tok.decode(tok.encode_ordinary(text)) == _expect(tok, text)


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=ANY_CHAR, max_size=40))
def test_round_trip_every_code_point(tok, text):
    assert tok.decode(_enc(tok, text)) == _expect(tok, text)


def test_lone_surrogate_is_its_three_surrogatepass_bytes(tok):
    for ch in ("\ud800", "\udbff", "\udc00", "\udfff"):
        want = [_byte_id(tok, b) for b in ch.encode("utf-8", "surrogatepass")]
        assert tok.encode_ordinary(ch) == want
        assert tok.decode(want) == ch
    # the text around a surrogate is encoded as it is alone
    assert tok.encode_ordinary("fox\ud800 the") == tok.encode_ordinary("fox") + [
        _byte_id(tok, b) for b in b"\xed\xa0\x80"
    ] + tok.encode_ordinary(" the")


def test_permuted_byte_table_is_used():
    tok = _permuted_bytes_bpe()
    assert tok.encode_ordinary("\ud800") == [255 - 0xED, 255 - 0xA0, 255 - 0x80]
    assert tok.decode(tok.encode_ordinary("a\ud800b")) == "a\ud800b"


def test_surrogate_pair_written_as_two_code_points_stays_two(tok):
    pair = "\ud83d" + "\ude00"
    assert len(pair) == 2 and pair != "\U0001f600"
    ids = _enc(tok, "hi " + pair + "!")
    back = tok.decode(ids)
    assert back == "hi " + pair + "!" and len(back) == 6
    assert _enc(tok, "\U0001f600") != _enc(tok, pair)
    assert tok.decode(_enc(tok, "\U0001f600")) == "\U0001f600"


def test_from_json_and_fsdecode(tok):
    for text in (json.loads('"a\\ud800b \\udc00"'), "file_" + bytes([0xFF, 0x61]).decode("utf-8", "surrogateescape")):
        assert tok.decode(_enc(tok, text)) == text


# ---- batch and numpy paths equal single encode -------------------------------------------
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(TEXT, max_size=6))
def test_batch_and_numpy_paths_equal_single_encode(tok, texts):
    single = [tok.encode_ordinary(t) for t in texts]
    assert tok.encode_batch(texts) == single
    assert tok.encode_batch(texts, num_threads=2) == single
    arrays = tok.encode_batch(texts, as_numpy=True)
    assert [a.tolist() for a in arrays] == single
    assert len({a.dtype for a in arrays}) <= 1
    for t, want in zip(texts, single):
        a = tok.encode_to_numpy(t)
        assert a.dtype == np.uint32 and a.tolist() == want
    assert tok.encode(texts, allowed_special=()) == single
    for threads in (1, 2):  # every family: the flat batch, lone surrogates included
        flat, offsets = tok.encode_batch_flat(texts, num_threads=threads)
        assert flat.dtype == np.uint32 and offsets.dtype == np.int64
        assert flat.tolist() == [i for x in single for i in x]
        assert offsets.tolist() == np.cumsum([0] + [len(x) for x in single]).tolist()


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(TEXT, max_size=5))
def test_allowed_special_paths(tok, texts):
    one = [_enc(tok, t, allowed_special="all") for t in texts]
    assert _enc(tok, texts, allowed_special="all") == one
    for t, ids in zip(texts, one):
        kw = {"skip_special_tokens": False} if isinstance(tok, GrowingBPETokenizer) else {}
        assert tok.decode(ids, **kw) == _expect(tok, t)  # special text comes back as its text
    names = set(tok.special_tokens)
    for t in texts:
        if not any(n in t for n in names):
            assert _enc(tok, t, disallowed_special="all") == _enc(tok, t, allowed_special=())


def test_prepend_append_and_special_ids(tok):
    if isinstance(tok, GrowingBPETokenizer):  # the seed's encode, BOS ... EOS
        ids = tok.encode_for_model("a\ud800", add_special_tokens=True)
        assert ids[0] == tok.BOS_ID and ids[-1] == tok.EOS_ID
        assert tok.decode(ids) == "a\ud800"
        return  # (its decode drops the special ids, the seed's rule)
    name = sorted(tok.special_tokens)[0]
    ids = tok.encode("x\udc00" + name, allowed_special="all", prepend=name, append=name)
    sid = tok.special_tokens[name]
    assert ids[0] == sid and ids[-2:] == [sid, sid]
    assert tok.decode(ids) == name + "x\udc00" + name + name


def test_chat_rendering_with_lone_surrogates():
    for key in ("bpe-nanochat", "lz78"):
        tok = _cache.get(key) or TOKENIZERS[key]()
        convo = {
            "messages": [
                {"role": "user", "content": "what is \ud800?"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "a \udfff"}, {"type": "python", "text": "x = '\udc00'"}],
                },
            ]
        }
        ids, mask = tok.render_conversation(convo)
        assert len(ids) == len(mask)
        user = tok.encode("what is \ud800?", allowed_special=())
        assert ids[2 : 2 + len(user)] == user
        text = tok.decode(ids)
        assert "what is \ud800?" in text and "a \udfff" in text and "x = '\udc00'" in text
        prompt = tok.render_for_completion(convo)
        assert prompt[: 2 + len(user)] == ids[: 2 + len(user)]


def test_lz78_compaction_counts_on_surrogate_text():
    tok = _quiet(LZ78Tokenizer.train_from_iterator, CORPUS, 500, strategy="standard", progress=False)
    assert tok.count_never_emitted(["the fox\ud800", "dog"]) == tok.count_never_emitted(["the fox", "dog"])


def test_ordinary_text_never_takes_the_fallback(tok, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the surrogate fallback ran for ordinary text")

    monkeypatch.setattr(rust_backed, "encode_around_surrogates", boom)
    monkeypatch.setattr(growing, "encode_around_surrogates", boom)
    monkeypatch.setattr(bpe, "encode_around_surrogates", boom)
    text = "The quick brown fox é 🙂 <|bos|>"
    tok.encode_ordinary(text)
    tok.encode_to_numpy(text)
    tok.encode_batch([text, "dog"])
    tok.encode_batch([text, "dog"], as_numpy=True)
    _enc(tok, [text], allowed_special="all")
    _enc(tok, text, allowed_special="all")
    with pytest.raises(AssertionError, match="fallback ran"):  # the patch is where the families look
        tok.encode_ordinary("a\ud800")
    with pytest.raises(AssertionError, match="fallback ran"):
        _enc(tok, ["a\ud800"], allowed_special="all")


# ---- decoding: the error handler ----------------------------------------------------------
_TRIPLE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")
#: bytes that make UTF-8 edge cases likely
_BYTES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                0x00,
                0x41,
                0x7F,
                0x80,
                0x8F,
                0x9F,
                0xA0,
                0xBF,
                0xC0,
                0xC1,
                0xC2,
                0xDF,
                0xE0,
                0xE1,
                0xEC,
                0xED,
                0xEE,
                0xEF,
                0xF0,
                0xF4,
                0xF5,
                0xFF,
            ]
        ),
        st.integers(0, 255),
    ),
    max_size=40,
).map(bytes)


def _reference(data: bytes) -> str:
    """What decode_utf8 is defined to give: each ED A0..BF 80..BF (a lone
    surrogate's surrogatepass bytes) is that surrogate; the bytes between are
    decoded with "replace", each stretch on its own."""
    out, pos = [], 0
    for m in _TRIPLE.finditer(data):
        out.append(data[pos : m.start()].decode("utf-8", "replace"))
        out.append(m.group().decode("utf-8", "surrogatepass"))
        pos = m.end()
    out.append(data[pos:].decode("utf-8", "replace"))
    return "".join(out)


@settings(max_examples=500, deadline=None)
@given(data=_BYTES)
def test_other_invalid_bytes_decode_exactly_as_replace(data):
    got = decode_utf8(data)
    assert got == _reference(data)
    assert got == data.decode("utf-8", SURROGATE_ERRORS) == bytearray(data).decode("utf-8", SURROGATE_ERRORS)
    if not _TRIPLE.search(data):
        assert got == data.decode("utf-8", "replace")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=ANY_CHAR, max_size=30))
def test_decode_inverts_surrogatepass(text):
    data = text.encode("utf-8", "surrogatepass")
    assert decode_utf8(data) == text == data.decode("utf-8", SURROGATE_ERRORS)


def test_handler_examples():
    assert codecs.lookup_error(SURROGATE_ERRORS) is not None
    with pytest.raises(UnicodeEncodeError):  # a decoding handler only
        "\ud800".encode("utf-8", SURROGATE_ERRORS)
    assert b"a\xed\xa0\x80\xffb".decode("utf-8", SURROGATE_ERRORS) == "a\ud800\ufffdb"
    assert decode_utf8(b"\xed\xa0\x80") == "\ud800"  # "replace" gave three U+FFFD here
    assert decode_utf8(b"\xed\xbf\xbf") == "\udfff"
    assert decode_utf8(b"\xed\xa0\xbd\xed\xb8\x80") == "\ud83d\ude00"  # two code points, not U+1F600
    assert decode_utf8(b"\xed\x9f\xbf") == "\ud7ff"  # valid UTF-8
    assert decode_utf8(b"\xed\xa0") == "\ufffd\ufffd" == b"\xed\xa0".decode("utf-8", "replace")  # cut short
    assert decode_utf8(b"\xed\xa0\x7f") == b"\xed\xa0\x7f".decode("utf-8", "replace")
    assert decode_utf8(b"\xe1\xed\xa0\x80\xff") == "\ufffd\ud800\ufffd"
    assert decode_utf8(b"\xf0\x9f\x98") == "\ufffd"


@settings(max_examples=100, deadline=None)
@given(data=_BYTES)
def test_family_decode_of_byte_ids_uses_the_rule(tok, data):
    ids = [_byte_id(tok, b) for b in data]
    assert tok.decode(ids) == _reference(data)
    if not _TRIPLE.search(data):
        assert tok.decode(ids) == data.decode("utf-8", "replace")


def test_id_to_token_keeps_replace(tok):
    assert tok.id_to_token(_byte_id(tok, 0xED)) == "\ufffd"


# ---- mixedgram: latin1 only ---------------------------------------------------------------
def test_mixedgram_refuses_a_lone_surrogate_with_latin1error():
    tok = Mixedgram.train(text="the cat sat on the mat; the dog sat on the log. " * 20, special_tokens=["<|bos|>"])
    text = "ab\ud800c"
    calls = {
        "encode": lambda: tok.encode(text),
        "encode list": lambda: tok.encode([text]),
        "encode_ordinary": lambda: tok.encode_ordinary(text),
        "encode_to_numpy": lambda: tok.encode_to_numpy(text),
        "encode_batch": lambda: tok.encode_batch(["ok", text]),
        "as_numpy": lambda: tok.encode_batch([text], as_numpy=True),
        "allowed_special": lambda: tok.encode(text, allowed_special="all"),
        "allowed_special list": lambda: tok.encode([text], allowed_special="all"),
    }
    for what, call in calls.items():
        with pytest.raises(Latin1Error) as e:
            call()
        assert not isinstance(e.value, UnicodeError), what
        assert e.value.offset == 2 and "U+D800" in str(e.value), what
    # errors="replace" writes '?' for it, like any other non-latin1 character
    tok.errors = "replace"
    assert tok.decode(tok.encode(text)) == "ab?c"


# ---- the command line -----------------------------------------------------------------------
def test_cli_encode_and_decode_a_lone_surrogate(tmp_path, monkeypatch, capsys):
    import io
    import sys

    from tokenforge.cli.main import main

    tok = BPETokenizer.train_from_iterator(CORPUS, 300, progress=False)
    tok.save(tmp_path / "tok.json")
    text = "fox \ud800 dog"
    assert main(["encode", str(tmp_path / "tok.json"), text, "--json"]) == 0
    ids = json.loads(capsys.readouterr().out)
    assert ids == tok.encode(text)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict, as a UTF-8 terminal or pipe is
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["decode", str(tmp_path / "tok.json"), *map(str, ids)]) == 0
    out.flush()
    assert out.buffer.getvalue() == text.encode("utf-8", "surrogatepass")


def test_pretokenize_docs_with_lone_surrogates(tmp_path):
    from tokenforge.data.shards import pretokenize

    tok = BPETokenizer.train_from_iterator(CORPUS, 300, progress=False)
    docs = ["fox \ud800 dog", "plain", "\udfff", json.loads('"x\\udc00"')]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    s = pretokenize(iter(docs), tok, tmp_path / "s0", progress=False)  # texts from Python: kept exactly
    assert [tok.decode(a) for a in s.iter_documents()] == docs
    assert s.num_bytes == sum(len(d.encode("utf-8", "surrogatepass")) for d in docs)
    # a JSON-lines corpus holding such escapes is refused at file:line unless told otherwise (issue 10)
    with pytest.raises(CorpusError, match="c.jsonl, line 1"):
        pretokenize(tmp_path / "c.jsonl", tok, tmp_path / "s1", progress=False)


def test_training_on_texts_with_lone_surrogates(tmp_path):
    """Texts from Python holding lone surrogates train (the core sees the text
    around them) and the tokenizers then round-trip them; nothing raises a
    UnicodeEncodeError from the core."""
    docs = CORPUS * 3 + ["bad \ud800 doc", "\udfff", "x\ud83d\ude00y"]
    s = "a \ud800 b \udc80"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bpe_tok = BPETokenizer.train_from_iterator(docs, 300, progress=False)
        lz = LZ78Tokenizer.train_from_iterator(docs, 300, strategy="frequency_gated", progress=False)
        g = GrowingBPETokenizer()
        g.learn_merges(iter(docs), 20)
    for tok in (bpe_tok, lz, g):
        assert tok.decode(tok.encode(s)) == s
    # the documented rule: training sees exactly the texts cut at the surrogates
    cut = [p for d in docs for p in re.split("[\ud800-\udfff]+", d) if p]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert BPETokenizer.train_from_iterator(cut, 300, progress=False).merges == bpe_tok.merges
