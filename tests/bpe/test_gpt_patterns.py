"""Every GPT-family pattern, in every spelling in use, splits exactly as the
regex engine does and (with the real rank files) gives tiktoken's exact ids.

The spellings come from where they are used: tiktoken's own ``pat_str``s read
from the installed tiktoken (``tiktoken_ext/openai_public.py``), our named
patterns, and the Hugging Face ``tokenizer.json`` spellings of Llama-3 (and
tiktoken's older cl100k) and of Qwen2 (single digits). The core recognises them
from their text and runs its hand-written scanners; ``_core.split(p, text,
True)`` forces the regex engine (fancy-regex, tiktoken's engine) for the
comparison. The rank files are the ones ``bpe-openai``'s wheel ships (a dev
dependency): no download.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiny_corpus import TINY_DOCS
from tokenforge import BPETokenizer, _core
from tokenforge.bpe import PATTERNS
from tokenforge.data.default_corpus import iter_default_corpus

#: Llama-3's tokenizer.json pre-tokenizer regex (also tiktoken's cl100k pat_str before the possessive rewrite)
LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen2's (Qwen2.5, Qwen3) tokenizer.json pre-tokenizer regex: numbers split into single digits
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")


@functools.cache
def tiktoken_pat_strs() -> dict[str, str]:
    """tiktoken's pat_str of each OpenAI encoding, without loading any rank file."""
    from tiktoken_ext import openai_public

    real = openai_public.load_tiktoken_bpe
    real_gym = openai_public.data_gym_to_mergeable_bpe_ranks
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    openai_public.data_gym_to_mergeable_bpe_ranks = lambda *a, **k: {}
    try:
        return {
            name: openai_public.ENCODING_CONSTRUCTORS[name]()["pat_str"]
            for name in ("gpt2", "r50k_base", "cl100k_base", "o200k_base")
        }
    finally:
        openai_public.load_tiktoken_bpe = real
        openai_public.data_gym_to_mergeable_bpe_ranks = real_gym


def all_spellings() -> dict[str, str]:
    out = {f"tiktoken {n}": p for n, p in tiktoken_pat_strs().items()}
    out.update({f"ours {n}": p for n, p in PATTERNS.items() if p is not None})
    out.update({"llama3": LLAMA3, "qwen2": QWEN2})
    return out


def test_tiktoken_spellings_are_the_ones_the_core_knows():
    pats = tiktoken_pat_strs()
    assert pats["o200k_base"] == _core.O200K_PATTERN == PATTERNS["o200k"]
    # tiktoken's cl100k spelling differs from ours (possessive, `\s++$`): both are scanned
    assert pats["cl100k_base"] != _core.CL100K_PATTERN


@functools.cache
def real_texts() -> list[str]:
    texts = list(TINY_DOCS)
    texts += list(iter_default_corpus(max_bytes=600_000))
    texts += [
        "Grüße aus München! Привет, мир. 你好，世界。 こんにちは 안녕하세요 مرحبا שלום नमस्ते",
        "e\u0301 a\u0308\u0301 HTTPServer iPhone McDonald'S DON'T we'Ll ǅemal ʰA \u00a0x\u2003y\u3000z",
        "a/b//c\r\n\r\n/x  \n\t\n  ",
        "१२३४५ ٣٤٥٦٧ ①②③ ½¾ 𝟘𝟙𝟚𝟛",
    ]
    return texts


@pytest.mark.parametrize("name", sorted(all_spellings()))
def test_scanner_equals_regex_on_real_text(name):
    p = all_spellings()[name]
    for text in real_texts():
        assert _core.split(p, text, False) == _core.split(p, text, True), (name, text[:200])


UNICODE_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(
            list(
                "aZsStTlLvVeErRdDmM\u017f\u212aǅʰ中Ж\u0301\u0903\u20dd0٣५½①'\u2019/\r\n\r\n \t\u00a0\u2003\u3000\u0085"
            )
        ),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=UNICODE_TEXT)
def test_scanner_equals_regex_on_random_text(text):
    for name, p in all_spellings().items():
        assert _core.split(p, text, False) == _core.split(p, text, True), name


# ---- tiktoken's exact ids with the real rank files ---------------------------------
@functools.cache
def ranks(name: str) -> dict[bytes, int]:
    # located without importing bpe_openai (its import loads rank files of its own)
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None and spec.submodule_search_locations, "bpe-openai (a dev dependency) is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    data = path.read_bytes()
    out = {}
    for line in gzip.decompress(data).splitlines():
        if line:
            tok, rank = line.split()
            out[base64.b64decode(tok)] = int(rank)
    return out


@functools.cache
def tokenizers(name: str):
    import tiktoken

    pat = tiktoken_pat_strs()[name]
    enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks(name), special_tokens={})
    ours = {"pat_str": BPETokenizer.from_tiktoken(ranks(name), pattern=pat)}
    named = {"cl100k_base": "cl100k", "o200k_base": "o200k"}[name]
    ours["name"] = BPETokenizer.from_tiktoken(ranks(name), pattern=named)
    return enc, ours


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_ids_equal_tiktoken(name):
    enc, ours = tokenizers(name)
    texts = real_texts()[:200] + real_texts()[-4:]
    want = enc.encode_ordinary_batch(texts)
    for how, tok in ours.items():
        assert tok.encode_batch(texts) == want, how
        for t in texts[-4:]:
            assert tok.encode_ordinary(t) == enc.encode_ordinary(t), (how, t)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=UNICODE_TEXT)
def test_ids_equal_tiktoken_on_random_text(text):
    for name in ("cl100k_base", "o200k_base"):
        enc, ours = tokenizers(name)
        want = enc.encode_ordinary(text)
        for how, tok in ours.items():
            assert tok.encode_ordinary(text) == want, (name, how)
