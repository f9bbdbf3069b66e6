"""Split patterns lose no text: text between matches is a piece of its own, in
training and in encoding, in every family; a file naming an unknown pattern, or
a name that does not describe its pattern, is refused at load."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge import BPETokenizer, GrowingBPETokenizer, LZ78Tokenizer, _core
from tokenforge.errors import FormatError, PatternError
from tokenforge.formats import checksum, patterns
from tokenforge.formats.bpe_data import BPEData
from tokenforge.reference import bpe as ref

CORPUS = [
    "hello, world! hello world... Hello, World?",
    "naïve café 東京 😀😀 x=1; y=22; z=333\n\tdone\r\n",
    "aaaa bbbb abab  ,,,, -- __ ''s 't",
]


def test_core_patterns_are_the_formats_patterns():
    assert _core.GPT4_PATTERN == patterns.GPT4_PATTERN
    assert _core.CL100K_PATTERN == patterns.CL100K_PATTERN
    assert _core.GPT2_PATTERN == patterns.GPT2_PATTERN
    assert _core.O200K_PATTERN == patterns.O200K_PATTERN
    assert {n: p for n, p in tokenforge.bpe.PATTERNS.items() if p is not None} == patterns.NAMED_PATTERNS


# ---- the examples -------------------------------------------------------
def test_word_pattern_keeps_punctuation_and_spaces():
    tok = BPETokenizer.train_from_iterator(CORPUS * 5, 300, pattern=r"\w+", progress=False)
    assert tok.decode(tok.encode("hello, world!")) == "hello, world!"
    assert _core.split(r"\w+", "hello, world!", True) == ["hello", ", ", "world", "!"]


def test_gaps_are_counted_in_training():
    # with \w+ only ", " sits between the words: it must be learned as a token
    tok = BPETokenizer.train_from_iterator(
        ["hello, world"] * 50, 270, pattern=r"\w+", special_tokens=None, progress=False
    )
    assert len(tok.encode(", ")) == 1
    assert len(tok.encode("hello, world")) == 3


def test_pattern_matching_nothing_keeps_the_whole_text():
    # (a bare word is a pattern name, never a regex: issue 32 item 2)
    tok = BPETokenizer.train_from_iterator(CORPUS, 280, pattern="(?:qqq)", progress=False)
    for text in CORPUS + ["", "q", "qq", "qqqq"]:
        assert tok.decode(tok.encode(text)) == text


def test_empty_matches_are_skipped():
    assert _core.split("a*", "baac", True) == ["b", "aa", "c"]
    assert _core.split(r"\b", "ab cd", True) == ["ab cd"]
    assert ref.split("baac", "a*") == ["b", "aa", "c"]
    tok = BPETokenizer.train_from_iterator(CORPUS, 280, pattern="x*", progress=False)
    assert tok.decode(tok.encode("xxabxx")) == "xxabxx"


def test_reference_split_agrees_with_the_engine():
    for p in (r"\w+", r"\s+(?!\S)|\d", r"[a-z]{2,3}", r"\p{L}+"):
        for text in CORPUS:
            assert _core.split(p, text, True) == ref.split(text, p)


def test_training_with_named_patterns_is_unchanged_by_the_gap_rule():
    # the built-in patterns cover all text: forcing the regex path gives the same pieces
    for p in patterns.NAMED_PATTERNS.values():
        for text in CORPUS:
            assert _core.split(p, text, True) == _core.split(p, text, False) == ref.split(text, p)


def test_uncompilable_pattern_is_a_pattern_error():
    for bad in ("(unclosed", "a\\", "x**", "(?z)a", "a{3,1}", "[z-a]", ""):
        with pytest.raises(PatternError):
            BPETokenizer.train_from_iterator(CORPUS, 280, pattern=bad, progress=False)


# ---- the property: any pattern from a small grammar, any text -------------------
_LITERALS = ["a", "b", "x", " ", ",", r"\.", "é", "😀", r"\n", "'", "1"]
_CLASSES = [
    r"\w",
    r"\d",
    r"\s",
    r"\S",
    r"\W",
    r"\p{L}",
    r"\p{N}",
    r"\P{L}",
    "[a-z]",
    "[^a-z]",
    ".",
    "[,.!?]",
    r"[\s\d]",
]


@st.composite
def _quantified(draw):
    atom = draw(st.sampled_from(_LITERALS + _CLASSES))
    if draw(st.booleans()) and draw(st.booleans()):
        atom = "(?:" + draw(st.sampled_from(_LITERALS + _CLASSES)) + draw(st.sampled_from(_LITERALS + _CLASSES)) + ")"
    q = draw(st.sampled_from(["", "", "+", "*", "?", "+?", "*?", "++", "{m,n}", "{m}"]))
    if q == "{m,n}":
        q = "{%d,%d}" % (draw(st.integers(0, 3)), draw(st.integers(0, 3)))  # m > n does not compile
    elif q == "{m}":
        q = "{%d}" % draw(st.integers(0, 3))
    return atom + q


@st.composite
def split_patterns(draw):
    """Alternations of short sequences, with lookarounds now and then; many
    cover only part of the text, some match the empty string, a few do not compile."""
    alternatives = []
    for _ in range(draw(st.integers(1, 3))):
        seq = "".join(draw(st.lists(_quantified(), min_size=1, max_size=3)))
        look = draw(st.sampled_from(["", "", "", r"(?!\S)", r"(?=\s)", r"(?!\d)"]))
        behind = draw(
            st.sampled_from(["", "", "", "(?<=a)", r"(?<!\s)", "(?<=a+)"])
        )  # a+: variable length (fancy-regex >= 0.16 accepts it)
        alternatives.append(behind + seq + look)
    return "|".join(alternatives)


_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("ab x,.!?'1 \t\n\r\x00\x1f\x85\u2028é😀東")),
        st.characters(codec="utf-8"),  # any code point but lone surrogates (not UTF-8; refused by encode)
    ),
    max_size=40,
)


@functools.lru_cache(maxsize=None)
def _trained(pattern: str):
    try:
        # (?:...): the same regex, never read as a name (a bare word such as "a" is a PatternError)
        return BPETokenizer.train_from_iterator(CORPUS, 300, pattern=f"(?:{pattern})", progress=False)
    except PatternError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=split_patterns(), text=_TEXT)
def test_any_pattern_round_trips_any_text(pattern, text):
    tok = _trained(pattern)
    if tok is None:  # refused when built; nothing else may go wrong
        with pytest.raises(PatternError):
            _core.split(pattern, "", True)
        return
    assert tok.decode(tok.encode(text)) == text
    pieces = _core.split(pattern, text, True)
    assert "".join(pieces) == text and all(pieces)
    ids = tok.encode_batch([text, text + text])
    assert [tok.decode(x) for x in ids] == [text, text + text]


# ---- the other families -------------------------------------------------------
def test_growing_custom_pattern_round_trips():
    tok = GrowingBPETokenizer(pattern=r"\w+", normalization=None)
    assert tok.learn_merges(iter(CORPUS * 3), 40, min_frequency=1) > 0
    for text in CORPUS + ["hello, world!", ",,,,"]:
        assert tok.decode(tok.encode_ordinary(text)) == text
    # the gaps were learned from: ",,,," is no longer four byte tokens
    assert len(tok.encode_ordinary(",,,,")) < 4


@pytest.mark.parametrize("name", list(patterns.NAMED_PATTERNS))
def test_lz78_named_patterns_load_and_round_trip(tmp_path, name):
    tok = LZ78Tokenizer.train_from_iterator(CORPUS * 5, 300, strategy="standard", progress=False)
    path = tmp_path / "d.tsv"
    tok.save(path)
    text = path.read_text(encoding="utf-8").replace("# pattern=gpt4\n", f"# pattern={name}\n")
    path.write_text(text, encoding="utf-8")
    checksum.reseal(path)  # a deliberate edit
    got = tokenforge.load(path)
    s = "hello world, 12345 naïve 😀\r\n"
    assert got.decode(got.encode(s)) == s


def test_lz78_unknown_pattern_name_is_a_format_error(tmp_path):
    tok = LZ78Tokenizer.train_from_iterator(CORPUS * 5, 300, strategy="standard", progress=False)
    path = tmp_path / "d.tsv"
    tok.save(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    k = lines.index("# pattern=gpt4")
    lines[k] = "# pattern=gpt5"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(FormatError, match="unknown split pattern 'gpt5'") as e:
        tokenforge.load(path)
    assert e.value.path == str(path) and e.value.line == k + 1
    with pytest.raises(FormatError):
        LZ78Tokenizer.from_tsv(path)


def test_lz78_unknown_pattern_name_in_memory_is_a_pattern_error(tmp_path):
    tok = LZ78Tokenizer.train_from_iterator(CORPUS * 5, 300, strategy="standard", progress=False)
    data = tok.data
    data.settings["pattern"] = "gpt5"
    with pytest.raises(PatternError):
        LZ78Tokenizer(data)


# ---- our BPE JSON -------------------------------------------------------------
def _saved(tmp_path, pattern="gpt2"):
    tok = BPETokenizer.train_from_iterator(CORPUS * 3, 280, pattern=pattern, progress=False)
    path = tmp_path / "t.json"
    tok.save(path)
    return path, json.loads(path.read_text(encoding="utf-8"))


def _rewrite(path, doc):
    """A deliberate edit: the checksum is recorded anew, so the loader's own
    checks are what is tested."""
    doc.pop("checksum", None)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    if doc.get("version", 1) >= 2:
        checksum.reseal(path)


@pytest.mark.parametrize("pattern", ["gpt4", "cl100k", "gpt2", None, r"\w+|\s+"])
def test_bpe_json_pattern_names_load(tmp_path, pattern):
    path, doc = _saved(tmp_path, pattern)
    got = tokenforge.load(path)
    assert got.pattern == doc["pattern"] and got.data.pattern_name == doc["pattern_name"]
    assert doc["pattern_name"] == patterns.pattern_name_for(doc["pattern"])


def test_bpe_json_unknown_pattern_name(tmp_path):
    path, doc = _saved(tmp_path)
    doc["pattern_name"] = "gpt5"
    _rewrite(path, doc)
    with pytest.raises(FormatError, match="unknown pattern name 'gpt5'") as e:
        tokenforge.load(path)
    assert e.value.path == str(path) and e.value.line is not None


@pytest.mark.parametrize(
    "name,pattern",
    [
        ("gpt4", patterns.GPT2_PATTERN),
        ("gpt2", r"\w+"),
        ("cl100k", patterns.GPT4_PATTERN),
        ("none", r"\w+"),
        ("custom", None),
    ],
)
def test_bpe_json_pattern_name_mismatch(tmp_path, name, pattern):
    path, doc = _saved(tmp_path)
    doc["pattern_name"], doc["pattern"] = name, pattern
    _rewrite(path, doc)
    with pytest.raises(FormatError, match="pattern_name") as e:
        tokenforge.load(path)
    assert e.value.path == str(path) and e.value.line is not None


def test_bpe_json_custom_name_with_any_pattern_loads(tmp_path):
    path, doc = _saved(tmp_path)
    doc["pattern_name"] = "custom"  # a named pattern's text under "custom" is still that regex
    _rewrite(path, doc)
    assert tokenforge.load(path).pattern == patterns.GPT2_PATTERN


def test_bpe_data_validate_checks_the_name():
    data = BPEData(list(range(256)), [], {}, r"\w+", "gpt4")
    with pytest.raises(FormatError, match="pattern_name says 'gpt4'"):
        data.validate()
    with pytest.raises(FormatError):
        BPETokenizer(data)


def test_gaps_match_hugging_face_split_isolated(tmp_path):
    """Our gap rule is HF tokenizers' Split(pattern, "Isolated"): the exported
    tokenizer.json encodes text that the pattern covers only partly to the same ids."""
    tokenizers = pytest.importorskip("tokenizers")
    for pattern in (r"\w+", r"\p{L}+|\d", r"[a-z]{2,3}(?=\s)"):
        tok = BPETokenizer.train_from_iterator(CORPUS * 5, 320, pattern=pattern, special_tokens=None, progress=False)
        path = tmp_path / "tokenizer.json"
        tok.save_hf(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        for text in CORPUS + ["hello, world!", "  ,,x  y12 ", "😀 naïve!"]:
            assert hf.encode(text, add_special_tokens=False).ids == tok.encode(text), (pattern, text)


# ---- a pattern in a file that the engine cannot compile: FormatError naming the file
def test_bpe_json_uncompilable_pattern(tmp_path):
    path, doc = _saved(tmp_path, r"\w+")
    doc["pattern"] = "(unclosed"
    _rewrite(path, doc)
    with pytest.raises(FormatError, match="does not compile") as e:
        tokenforge.load(path)
    assert e.value.path == str(path) and e.value.line is not None


def test_hf_json_uncompilable_pattern(tmp_path):
    tok = BPETokenizer.train_from_iterator(CORPUS * 3, 280, pattern=r"\w+", special_tokens=None, progress=False)
    path = tmp_path / "tokenizer.json"
    tok.save_hf(path)
    assert tokenforge.load(path).decode(tokenforge.load(path).encode("a, b!")) == "a, b!"
    path.write_text(path.read_text(encoding="utf-8").replace(json.dumps(r"\w+"), json.dumps(r"\w+(")), encoding="utf-8")
    with pytest.raises(FormatError, match="Split pattern cannot be used") as e:
        tokenforge.load(path)
    assert e.value.path == str(path)


def test_growing_json_uncompilable_pattern(tmp_path):
    tok = GrowingBPETokenizer(pattern=r"\w+", normalization=None)
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    assert GrowingBPETokenizer.load(path).pattern == r"\w+"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["pattern"] = "[z-a]"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FormatError, match="does not compile") as e:
        GrowingBPETokenizer.load(path)
    assert e.value.path == str(path)


def test_to_tiktoken_keeps_the_gaps_of_a_custom_pattern():
    """tiktoken drops the text between matches; the exported encoding gets the
    pattern widened to keep it, so its ids equal ours on partly covered text."""
    pytest.importorskip("tiktoken")
    for pattern in (r"\w+", r"\p{L}+|\d", r"[a-z]{2,3}(?=\s)"):
        tok = BPETokenizer.train_from_iterator(CORPUS * 5, 320, pattern=pattern, special_tokens=None, progress=False)
        enc = tok.to_tiktoken()
        for text in CORPUS + ["hello, world!", "  ,,x  y12 ", "😀 naïve!", "\n\n\t;;"]:
            assert enc.encode_ordinary(text) == tok.encode(text), (pattern, text)
            assert enc.decode(enc.encode_ordinary(text)) == text


def test_to_tiktoken_refuses_a_pattern_it_cannot_widen():
    """A pattern that matches the empty string would lose characters in tiktoken."""
    pytest.importorskip("tiktoken")
    tok = BPETokenizer.train_from_iterator(CORPUS * 5, 300, pattern=r"[a-z]*", special_tokens=None, progress=False)
    assert tok.decode(tok.encode("hello, world!")) == "hello, world!"
    with pytest.raises(PatternError, match="save_hf"):
        tok.to_tiktoken()


# ---- pattern names: one lookup (issue 32 item 2) --------------------------------------
@pytest.mark.parametrize(
    "alias, ours",
    [
        ("cl100k_base", "cl100k"),
        ("gpt-4", "cl100k"),
        ("o200k_base", "o200k"),
        ("gpt-4o", "o200k"),
        ("r50k_base", "gpt2"),
        ("p50k_base", "gpt2"),
        ("openai-community/gpt2", "gpt2"),
        ("Xenova/gpt-4o", "o200k"),
    ],
)
def test_tiktoken_and_hf_names_are_aliases(alias, ours):
    assert patterns.resolve_pattern(alias) == (patterns.NAMED_PATTERNS[ours], ours)
    for cls in (BPETokenizer, GrowingBPETokenizer):
        a = cls.train_from_iterator(CORPUS, 280, pattern=alias, progress=False)
        assert a.pattern == patterns.NAMED_PATTERNS[ours]


def test_aliases_split_as_tiktoken_does():
    """Each alias's pattern splits as tiktoken's own pat_str of that encoding (on the regex path)."""
    from bpe.test_gpt_patterns import tiktoken_pat_strs

    pats = tiktoken_pat_strs()
    texts = CORPUS + ["  leading\n\n\ttabs  and trailing   ", "O'Neil's 12345 NASA's CamelCase /path"]
    for name in ("cl100k_base", "o200k_base", "r50k_base", "gpt2"):
        regex, _ = patterns.resolve_pattern(name)
        for t in texts:
            assert _core.split(regex, t, True) == ref.split(t, pats[name]), (name, t)


@pytest.mark.parametrize("name", ["gpt5", "gpt-5", "cl100k-base", "o200k", "abc", "llama.3", "my/pattern"])
def test_an_unknown_bare_name_is_a_pattern_error_listing_the_names(name):
    if name == "o200k":
        assert patterns.resolve_pattern(name)[1] == "o200k"
        return
    with pytest.raises(PatternError, match=rf"unknown pattern name '{name}'; known names: gpt4, cl100k, .*o200k_base"):
        patterns.resolve_pattern(name)
    for cls in (BPETokenizer, GrowingBPETokenizer):
        with pytest.raises(PatternError, match="unknown pattern name"):
            cls.train_from_iterator(CORPUS, 280, pattern=name, progress=False)


def test_cli_pattern_name(tmp_path, capsys):
    from tokenforge.cli.main import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS * 20), encoding="utf-8")
    out = tmp_path / "t"
    assert main(["train", str(corpus), "--vocab-size", "300", "-o", str(out), "--pattern", "gpt5", "-q"]) != 0
    assert "unknown pattern name 'gpt5'" in capsys.readouterr().err
    assert not out.exists()
    assert main(["train", str(corpus), "--vocab-size", "300", "-o", str(out), "--pattern", "o200k_base", "-q"]) == 0
    assert tokenforge.load(out).pattern == patterns.O200K_PATTERN
