"""The Rust engine of imported tokenizers against its slow reference and the libraries (issue 31).

The Unigram and WordPiece models of a tokenizer.json, and a SentencePiece
model's normalizer with its unigram, bpe, word and char models, run in Rust
(``tokenforge._core``); the Python loops (``tokenforge.reference.unigram``,
``pipeline.steps``, ``pipeline.spm``) stay as the reference. Checked here: the
two agree on trained models over random text; random hand-made vocabularies
(many ties, unknown runs, byte fallback, tiny ``max_input_chars_per_word``)
give ``tokenizers``' ids; batches on two threads equal one text at a time; text
with lone surrogates (which the Rust engine cannot take) goes through the
Python engine.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imported_models import SPM_CONFIGS, hf_pair, spm_pair

from tiny_corpus import TINY_DOCS
from tokenforge.pipeline import PipelineTokenizer

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)
_WORDY = st.text(st.sampled_from(list("abcde fghij\u0301\u2581.,!?'") + ["日", "é", "Σ", "🙂", "\t"]), max_size=60)

HF_NATIVE = ["unigram-always", "unigram-nfkc-bytes", "wordpiece-bert", "wordpiece-whitespace"]
SPM_NATIVE = list(SPM_CONFIGS)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("native")


@pytest.mark.parametrize("kind", [*HF_NATIVE, *(f"spm:{k}" for k in SPM_NATIVE)])
@_SETTINGS
@given(text=st.one_of(_TEXT, _WORDY))
def test_the_rust_engine_matches_its_python_reference(kind, models_dir, text):
    if kind.startswith("spm:"):  # normalizer and model
        pipe = spm_pair(kind[4:], models_dir)[1]._pipe
        assert pipe.native.normalize(text) == pipe.normalize_reference(text)
        assert pipe.native.encode(text) == pipe.encode_reference(text)
    else:  # the model, on the words of the Python stages
        pipe = hf_pair(kind, models_dir)[1]._pipe
        words = pipe.words(text)
        assert pipe.model.native.encode_words(words) == [i for w in words for i in pipe.model.tokenize(w)]


@pytest.mark.parametrize("kind", ["unigram-nfkc-bytes", "wordpiece-bert", "spm:unigram-bytes", "spm:char", "spm:bpe"])
def test_batches_on_threads_equal_one_text_at_a_time(kind, models_dir):
    sp = kind.startswith("spm:")
    _, tok, _ = spm_pair(kind[4:], models_dir) if sp else hf_pair(kind, models_dir)
    texts = [*TINY_DOCS, "", "x \ud800 y \udfff", " ", *TINY_DOCS[:3]]
    want = [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=2) == want
    batch = tok.encode_batch(texts, num_threads=1, as_numpy=True)
    assert [list(x) for x in batch] == want
    # the text with lone surrogates went through the Python engine
    odd, pipe = texts[len(TINY_DOCS) + 1], tok._pipe
    python = pipe.encode_reference(odd) if sp else [i for w in pipe.words(odd) for i in pipe.model.tokenize(w)]
    assert want[len(TINY_DOCS) + 1] == python and python


# ---- random vocabularies against tokenizers --------------------------------------
_PIECE = st.text(st.sampled_from(list("abé▁")), min_size=1, max_size=3)
_SCORE = st.sampled_from([-1.0, -2.0, -3.0, -1.5, -0.5, -4.25])


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.dictionaries(_PIECE, _SCORE, min_size=1, max_size=14),
    unk_score=_SCORE,
    byte_fallback=st.booleans(),
    text=st.text(st.sampled_from(list("abé▁xy🙂")), max_size=30),
)
def test_random_unigram_vocabularies_give_tokenizers_ids(pieces, unk_score, byte_fallback, text):
    from tokenizers import Tokenizer, models

    vocab = [("<unk>", unk_score), *pieces.items()]
    if byte_fallback:
        vocab += [(f"<0x{b:02X}>", -9.0) for b in range(256) if b not in (0xF0, 0x9F)]  # some bytes missing
    ref = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=byte_fallback))
    tok = PipelineTokenizer(json.loads(ref.to_str()), "huggingface")
    assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.lists(st.text(st.sampled_from(list("abé")), min_size=1, max_size=3), min_size=1, max_size=12),
    cont=st.lists(st.text(st.sampled_from(list("abé")), min_size=1, max_size=3), max_size=12),
    max_chars=st.integers(0, 8),
    text=st.text(st.sampled_from(list("abé x🙂")), max_size=30),
)
def test_random_wordpiece_vocabularies_give_tokenizers_ids(pieces, cont, max_chars, text):
    from tokenizers import Tokenizer, models, pre_tokenizers

    names = list(dict.fromkeys(["[UNK]", *pieces, *("##" + c for c in cont)]))
    ref = Tokenizer(
        models.WordPiece({p: i for i, p in enumerate(names)}, unk_token="[UNK]", max_input_chars_per_word=max_chars)
    )
    ref.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PipelineTokenizer(json.loads(ref.to_str()), "huggingface")
    assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids
