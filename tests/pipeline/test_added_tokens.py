"""Added tokens of a tokenizer.json, special or not, with every matching flag:
the ids and decode of ``tokenizers`` (issue 31).

Each test adds tokens to a tokenizer the tests train (imported_models.py) with
``tokenizers``' own ``add_tokens`` / ``add_special_tokens``, saves it, and loads
the file: non-special tokens are cut out of every text (``lstrip``, ``rstrip``,
``single_word``, ``normalized`` as tokenizers applies them), special ones only
where allowed. Compared on edge strings and on hypothesis text built from the
tokens' contents, spaces and word characters, where the flags decide.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imported_models import hf_pair

import tokenforge
from tiny_corpus import TINY_DOCS

# (content, special, lstrip, rstrip, single_word, normalized)
ADDED = [
    ("hello", False, False, False, False, True),
    ("Wor", False, True, False, False, False),
    ("ld!", False, False, True, False, False),
    ("cat", False, False, False, True, True),
    ("CAT", False, True, True, True, False),
    (" x ", False, False, False, False, False),
    ("<mask>", True, True, False, False, False),
    ("[sep]", True, False, True, False, True),
    ("\u00e9t\u00e9", False, False, False, False, True),
]
BASES = [
    "unigram-always",
    "unigram-first",
    "wordpiece-bert",
    "bpe-llama",
    "bpe-bytelevel-prefix",
    "unigram-precompiled-t5",
]
EDGES = [
    "hello world",
    "hellohello",
    "say Hello World! cat catalog concat cat. CAT  CAT  xCAT",
    "  Wor  ld!   ld!x <mask>  <mask> [sep]  [SEP] x x  x ",
    "e\u0301te\u0301 \u00e9t\u00e9 \u00c9T\u00c9",
    "<mask>",
    " ",
    "",
]
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_TEXT = st.lists(
    st.sampled_from([c[0] for c in ADDED] + [" ", "  ", "a", "b1", "_", "-", "\u00e9", "\t", "\n", "Cat", "\u2581"]),
    max_size=14,
).map("".join)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("added")


_cache: dict = {}


def _pair(kind: str, models_dir):
    if kind not in _cache:
        from tokenizers import AddedToken, Tokenizer

        t, _, path = hf_pair(kind, models_dir)
        t = Tokenizer.from_str(t.to_str())
        for content, special, lstrip, rstrip, single, norm in ADDED:
            tok = AddedToken(
                content, single_word=single, lstrip=lstrip, rstrip=rstrip, normalized=norm, special=special
            )
            (t.add_special_tokens if special else t.add_tokens)([tok])
        p = models_dir / f"{kind}-added.json"
        t.save(str(p))
        _cache[kind] = (Tokenizer.from_file(str(p)), tokenforge.load(p))
    return _cache[kind]


def _check(t, tok, text: str) -> None:
    t.encode_special_tokens = True
    ref = t.encode(text, add_special_tokens=False).ids
    assert tok.encode(text) == ref, text
    assert tok.decode(ref) == t.decode(ref, skip_special_tokens=False), text
    assert tok.encode_batch([text, text]) == [ref, ref], text
    t.encode_special_tokens = False
    ref = t.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, allowed_special="all") == ref, text


@pytest.mark.parametrize("kind", BASES)
def test_added_tokens_match_tokenizers_on_edges_and_real_text(kind, models_dir):
    t, tok = _pair(kind, models_dir)
    assert set(tok.special_tokens) >= {"<mask>", "[sep]"} and "hello" not in tok.special_tokens
    for text in EDGES + TINY_DOCS[:4]:
        _check(t, tok, text)
    # a non-special added token is text: it spells its content
    i = t.token_to_id("hello")
    assert tok.decode([i]) == t.decode([i]) and b"hello" in tok.id_to_bytes(i)


@pytest.mark.parametrize("kind", BASES)
@_SETTINGS
@given(text=_TEXT)
def test_added_tokens_match_tokenizers_on_any_text(kind, models_dir, text):
    t, tok = _pair(kind, models_dir)
    _check(t, tok, text)
