"""Imported tokenizers give the reference library's ids and decode (issue 31).

Models the tests train themselves (tests/pipeline/imported_models.py): every
tokenizer.json model type with the pipelines real files use, and every
SentencePiece model type, with and without byte fallback, NFKC, user-defined
and control symbols. Compared on the tiny corpus's documents, on edge strings,
and on random Unicode (hypothesis): ``tokenizers``' ``encode(text,
add_special_tokens=False)`` with special tokens split as text
(``encode_special_tokens = True``, tokenforge's default) and its
``decode(ids, skip_special_tokens=False)``; sentencepiece's ``encode`` and
``decode``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imported_models import HF_CONFIGS, SPM_CONFIGS, SPM_CONVERTED, hf_pair, spm_pair

from tiny_corpus import TINY_DOCS
from tokenforge.pipeline import PipelineTokenizer

EDGES = [
    "",
    " ",
    "   ",
    "\t\n",
    "a",
    "  two  spaces  ",
    "Hello, World!",
    "don't do not ' s",
    "x" * 40,
    "▁lead ▁▁",
    "<s> <unk> [UNK] @@ <br> <ctl>",
    "ﬁ ① ² Ⅻ ﹏ ＡＢＣ",
    "e\u0301 \u212b \u1e9b\u0323",
    "İstanbul ΣΊΣΥΦΟΣ ß ẞ",
    "日本語のテキスト 한국어 中文",
    "🙂👩\u200d💻🇩🇪",
    "\x00\x01\x7f\x85\u200b\ufeff\ufffd",
    "1234567890 ١٢٣ ৩",
]

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# any text without lone surrogates (the references take only UTF-8), every plane
_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
# mostly letters, spaces and marks, so that words and unknown runs form
_WORDY = st.text(
    st.sampled_from(list("abcde fghij\u0301\u2581.,!?'") + ["日", "本", "é", "Σ", "🙂", " ", "\t"]), max_size=40
)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("imported")


def _hf_check(t, tok: PipelineTokenizer, text: str) -> None:
    t.encode_special_tokens = True
    ref = t.encode(text, add_special_tokens=False).ids
    assert tok.encode(text) == ref, text
    assert tok.decode(ref) == t.decode(ref, skip_special_tokens=False), text


def _spm_check(sp, tok: PipelineTokenizer, text: str) -> None:
    ref = sp.encode(text)
    assert tok.encode(text) == ref, text
    assert tok.decode(ref) == sp.decode(ref), text


@pytest.mark.parametrize("kind", HF_CONFIGS)
def test_tokenizer_json_matches_tokenizers_on_real_text_and_edges(kind, models_dir):
    t, tok, _ = hf_pair(kind, models_dir)
    assert isinstance(tok, PipelineTokenizer)
    for text in TINY_DOCS + EDGES:
        _hf_check(t, tok, text)
    assert tok.encode_batch(TINY_DOCS) == [t.encode(d, add_special_tokens=False).ids for d in TINY_DOCS]


@pytest.mark.parametrize("kind", HF_CONFIGS)
@_SETTINGS
@given(text=st.one_of(_TEXT, _WORDY))
def test_tokenizer_json_matches_tokenizers_on_any_text(kind, models_dir, text):
    t, tok, _ = hf_pair(kind, models_dir)
    _hf_check(t, tok, text)


@pytest.mark.parametrize("kind", list(SPM_CONFIGS))
def test_sentencepiece_model_matches_sentencepiece_on_real_text_and_edges(kind, models_dir):
    sp, tok, _ = spm_pair(kind, models_dir)
    assert isinstance(tok, PipelineTokenizer) and tok.source == "sentencepiece"
    for text in TINY_DOCS + EDGES:
        _spm_check(sp, tok, text)
    assert tok.vocab_size == sp.get_piece_size()


@pytest.mark.parametrize("kind", list(SPM_CONFIGS))
@_SETTINGS
@given(text=st.one_of(_TEXT, _WORDY))
def test_sentencepiece_model_matches_sentencepiece_on_any_text(kind, models_dir, text):
    sp, tok, _ = spm_pair(kind, models_dir)
    _spm_check(sp, tok, text)


@pytest.mark.parametrize("kind", ["wordpiece-bert", "bpe-llama", "unigram-first"])
def test_allowed_special_tokens_split_the_text_as_tokenizers_does(kind, models_dir):
    t, tok, _ = hf_pair(kind, models_dir)
    t.encode_special_tokens = False
    names = sorted(tok.special_tokens)
    texts = [f"{names[-1]}start", f"a {names[0]} b{names[-1]}{names[0]}c ", f"x{names[-1]}"]
    for text in texts:
        assert tok.encode(text, allowed_special="all") == t.encode(text, add_special_tokens=False).ids, text
    t.encode_special_tokens = True


# Grapheme clusters of every shape UAX #29 knows, and characters nmt_nfkc rewrites:
# combining marks (one cluster with their base, looked up whole below 6 bytes),
# ZWJ emoji sequences, skin tones, flags, Hangul jamo, CR LF, prepended marks,
# variation selectors, fullwidth forms, ligatures, controls and spaces
_CLUSTERY = st.text(
    st.sampled_from(
        list("ae oAE\r\n\t\u3000\u00a0\u200b\u200d\ufe0f\u0301\u0308\u0323\u0600\u0e33\u1100\u1161\u11a8\uac00")
        + list("\ufb01\u2460\u00b2\u216b\uff02\uff21\uff76\uff9e\u212b\u1e9b\U0001f3fd\U0001f469\U0001f4bb")
        + list("\U0001f1e9\U0001f1ea\x00\x01\x7f\x85\ufeff\ufffd\u0130\u00df")
    ),
    max_size=30,
)


@pytest.mark.parametrize("kind", SPM_CONVERTED)
@_SETTINGS
@given(text=st.one_of(_CLUSTERY, _TEXT))
def test_precompiled_normalizer_is_tokenizers_per_grapheme_cluster(kind, models_dir, text):
    """The Precompiled normalizer's output is tokenizers' own (normalize_str of the
    whole normalizer) and so are the ids, on texts made of grapheme clusters."""
    t, tok, _ = hf_pair(kind, models_dir)
    assert tok.normalized(text) == t.normalizer.normalize_str(text), text
    _hf_check(t, tok, text)


def test_precompiled_applies_the_charsmap_per_cluster_not_as_sentencepiece_does(models_dir):
    """A converted tokenizer.json and its SentencePiece model differ where a cluster
    holds more than its first character's rule: tokenizers replaces the whole
    cluster (below 6 bytes) by the shortest rule that starts it, sentencepiece
    takes the longest rule at each place. Each reader gives its own library's."""
    t, tok, _ = hf_pair("unigram-precompiled-t5", models_dir)
    sp, stok, _ = spm_pair("unigram", models_dir)  # the same nmt_nfkc charsmap
    cases = {
        "\u2460\u0301": ("1", "\u25811\u0301"),  # circled 1 + acute: the accent goes
        "\ufb01\u0301": ("fi", "\u2581fi\u0301"),
        "\u1e9b\u0323": ("\u1e61", "\u2581\u1e61\u0323"),  # long s dot above + dot below
        "e\u0301\u0301": ("\u00e9", "\u2581\u00e9\u0301"),
    }
    for text, (hf, spm) in cases.items():
        assert t.normalizer.normalize_str(text) == tok.normalized(text) == hf, text
        assert stok.normalized(text) == spm, text
        _hf_check(t, tok, text)
        _spm_check(sp, stok, text)


def test_precompiled_copies_a_lone_surrogate_and_normalizes_around_it(models_dir):
    """tokenizers cannot take a lone surrogate; UAX #29 makes one a cluster of its
    own, so the stretches either side are normalized as tokenizers would alone."""
    t, tok, _ = hf_pair("unigram-precompiled-cf", models_dir)
    a, b = "a\ufb01", "\u2460\u0301 \uff21"
    assert tok.normalized(a + "\ud800" + b) == t.normalizer.normalize_str(a) + "\ud800" + t.normalizer.normalize_str(b)
    s = a + "\udfff" + b
    assert tok.encode_batch([s]) == [tok.encode(s)] and tok.encode(s)
