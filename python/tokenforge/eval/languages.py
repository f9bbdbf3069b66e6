"""Per-language token cost: bytes and characters per token, fertility, premiums, Gini.

The same text costs more tokens in some languages than in others; a research
user asks for each language (Petrov et al. 2023; Rust et al. 2021):

``bytes_per_token``    UTF-8 bytes / tokens
``chars_per_token``    characters / tokens
``fertility``          tokens per word: for every word (a maximal run of bytes
                       that are not ASCII whitespace, in the text as the
                       tokenizer sees it after its normalisation), the tokens of
                       the encoded text that overlap it, summed, over the words
``continued_word_rate`` share of words that overlap more than one token
``premium``            the language's token cost against a reference language
                       (:func:`premiums`): on parallel documents the ratio of
                       their token counts, otherwise the ratio of bytes/token
                       (reference / language; above 1 = more tokens for the
                       same bytes)

and, per tokenizer, one fairness figure: the Gini coefficient of the
per-language premiums (:func:`gini`; 0 = every language costs the same).

A word counts the tokens of the whole text's encoding that touch it, so a token
that spans a space (an LZ78 entry "e t") counts for both words; the GPT-style
split patterns give each word its own tokens, leading space included.
Fertility and the continued-word rate are left out (None) for languages whose
words are not separated by spaces (:data:`UNSPACED`: Japanese, Chinese, Thai,
...; or ``space_separated=False``), and for a tokenizer whose tokens' bytes do
not spell the text (UTF-8, or latin1 for mixedgram): it cannot represent it
(``lossless`` False; such a language stays out of the Gini).

Documents carry their language as :class:`LangDoc` (``lang``, and an optional
``parallel_id`` naming the unit of parallel text -- the same man page in every
language); :func:`read_language_documents` reads them from JSON lines (fields
``text``, ``lang``, ``parallel_id``) or gives every document of a plain file one
language (``LANG=PATH``).

Not handled: a language's own word segmentation (unspaced scripts get no
fertility rather than a wrong one); Unicode whitespace other than ASCII as a
word separator (a no-break space joins two words); weighting languages in the
Gini (each language counts once, the reference included at premium 1; languages
the tokenizer cannot spell are left out of it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from ..batching import batched
from ..data.languages import LangDoc, parse_heldout_arg, read_language_documents
from ..errors import TokenforgeError

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = [
    "LangDoc",
    "UNSPACED",
    "gini",
    "premiums",
    "language_metrics",
    "per_language_metrics",
    "read_language_documents",
    "parse_heldout_arg",
]

#: languages (ISO 639-1/-3 codes, the part before any ``-``/``_`` region) written without spaces between words
UNSPACED = frozenset({"ja", "jpn", "zh", "zho", "cmn", "yue", "th", "tha", "lo", "lao", "km", "khm", "my", "mya", "bo"})

_WORD = re.compile(rb"[^ \t\n\r\f\v]+")


def _base(lang: str) -> str:
    return re.split(r"[-_]", lang, maxsplit=1)[0].lower()


def is_space_separated(lang: str) -> bool:
    """False for the languages of :data:`UNSPACED` (by the code before any region)."""
    return _base(lang) not in UNSPACED


# ---------------------------------------------------------------------------
# the figures
# ---------------------------------------------------------------------------
def gini(values: Iterable[float]) -> float:
    """The Gini coefficient of non-negative ``values``: mean absolute difference of
    all ordered pairs over twice the mean (0 = all equal; (n-1)/n = one holds all).

    Computed from the sorted values, ``G = 2 Σ i·x_(i) / (n Σ x) − (n + 1) / n``
    (i from 1), in O(n log n). An empty list, one value, or all zeros give 0.
    """
    x = np.sort(np.asarray(list(values), dtype=np.float64))
    if x.ndim != 1 or not np.all(np.isfinite(x)) or (len(x) and x[0] < 0):
        raise TokenforgeError(f"gini needs finite non-negative numbers, not {values!r}")
    n, total = len(x), float(x.sum())
    if n < 2 or total == 0.0:
        return 0.0
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(2.0 * (i * x).sum() / (n * total) - (n + 1) / n)


def _spelled(text: str, token_bytes: int) -> bytes | None:
    """The bytes the tokens spell: the text's UTF-8, or its latin1 for a latin1
    tokenizer (mixedgram's ids hold latin1 bytes); None if neither adds up."""
    data = text.encode("utf-8")
    if len(data) == token_bytes:
        return data
    if len(text) == token_bytes:
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            return None
    return None


def _word_token_counts(lens: np.ndarray, data: bytes) -> np.ndarray:
    """Tokens (of byte lengths ``lens``, spelling ``data``) overlapping each word of ``data``."""
    ends = np.cumsum(lens)  # token k covers bytes [ends[k] - lens[k], ends[k])
    spans = [(m.start(), m.end()) for m in _WORD.finditer(data)]
    if not spans:
        return np.zeros(0, np.int64)
    s = np.asarray(spans, dtype=np.int64)
    first = np.searchsorted(ends, s[:, 0], side="right")
    last = np.searchsorted(ends, s[:, 1] - 1, side="right")
    return (last - first + 1).astype(np.int64)


def language_metrics(
    tok: Tokenizer,
    texts: Sequence[str],
    *,
    space_separated: bool = True,
    num_threads: int | None = None,
    batch_chars: int = 8 << 20,
) -> dict:
    """Token cost of ``tok`` on the texts of one language (see the module docstring).

    Returns ``{"documents", "bytes", "chars", "tokens", "words", "bytes_per_token",
    "chars_per_token", "fertility", "continued_word_rate", "lossless", "doc_tokens"}``
    (``lossless``: the tokens' bytes spell every text)
    (``doc_tokens``: the tokens of each text, for parallel premiums; ``words``,
    ``fertility`` and ``continued_word_rate`` None when not measured).
    """
    token_len = np.asarray(tok.token_bytes(), dtype=np.int64)
    doc_tokens: list[int] = []
    n_bytes = n_chars = 0
    words = word_tokens = continued = 0
    measured = space_separated
    lossless = True
    for batch in batched(texts, batch_chars):
        ids, off = tok.encode_batch_flat(batch, num_threads=num_threads)
        ids = np.asarray(ids, dtype=np.int64)
        for k, text in enumerate(batch):
            n_bytes += len(text.encode("utf-8"))
            n_chars += len(text)
            doc = ids[off[k] : off[k + 1]]
            doc_tokens.append(len(doc))
            lens = token_len[doc]
            data = _spelled(tok.normalize(text), int(lens.sum()))
            if data is None:
                lossless = measured = False
            elif measured:
                per_word = _word_token_counts(lens, data)
                words += len(per_word)
                word_tokens += int(per_word.sum())
                continued += int((per_word > 1).sum())
    tokens = sum(doc_tokens)
    has_words = measured and words > 0
    return {
        "documents": len(doc_tokens),
        "bytes": n_bytes,
        "chars": n_chars,
        "tokens": tokens,
        "words": words if measured else None,
        "bytes_per_token": n_bytes / tokens if tokens else 0.0,
        "chars_per_token": n_chars / tokens if tokens else 0.0,
        "fertility": word_tokens / words if has_words else None,
        "continued_word_rate": continued / words if has_words else None,
        "lossless": lossless,
        "doc_tokens": doc_tokens,
    }


def premiums(
    per_lang: Mapping[str, dict],
    reference: str,
    parallel_ids: Mapping[str, Sequence[str | None]] | None = None,
) -> dict[str, dict]:
    """Each language's premium against ``reference``: ``{lang: {"premium", "method", "units"}}``.

    ``per_lang[lang]`` is :func:`language_metrics`' dict. With ``parallel_ids``
    (``{lang: [the parallel id of each document, in order]}``), a language
    sharing units with the reference gets the ratio of its token count to the
    reference's over the shared units (``method="parallel"``, ``units`` = how
    many); otherwise the ratio of bytes/token, reference over language
    (``method="bytes/token"``). A language with no tokens gets None.
    """
    if reference not in per_lang:
        raise TokenforgeError(
            f"the reference language {reference!r} has no held-out documents (languages: "
            f"{', '.join(sorted(per_lang)) or 'none'}); pass --reference-lang with one of them"
        )
    ref = per_lang[reference]

    def units(lang: str) -> dict[str, int]:
        if not parallel_ids or lang not in parallel_ids:
            return {}
        out: dict[str, int] = {}
        for pid, n in zip(parallel_ids[lang], per_lang[lang]["doc_tokens"]):
            if pid is not None:
                out[pid] = out.get(pid, 0) + n
        return out

    ref_units = units(reference)
    result: dict[str, dict] = {}
    for lang, m in per_lang.items():
        mine = units(lang)
        shared = sorted(set(mine) & set(ref_units))
        den = sum(ref_units[u] for u in shared)
        if shared and den > 0:
            result[lang] = {
                "premium": sum(mine[u] for u in shared) / den,
                "method": "parallel",
                "units": len(shared),
            }
        elif m["bytes_per_token"] > 0 and ref["bytes_per_token"] > 0:
            result[lang] = {
                "premium": ref["bytes_per_token"] / m["bytes_per_token"],
                "method": "bytes/token",
                "units": 0,
            }
        else:
            result[lang] = {"premium": None, "method": None, "units": 0}
    return result


def per_language_metrics(
    tok: Tokenizer,
    docs: Sequence[LangDoc],
    *,
    reference: str = "en",
    max_bytes_per_lang: int | None = None,
    num_threads: int | None = None,
) -> dict:
    """Every figure of the module for ``tok`` on the documents that carry a language.

    ``max_bytes_per_lang``: the first documents of each language up to this many
    bytes (the last one cut at a character boundary; parallel units cut short
    on one side still count, as the same page at another length).
    Returns ``{"reference", "languages": {lang: metrics + premium fields}, "gini"}``;
    ``gini`` is over the languages with a premium that the tokenizer encodes
    losslessly (None if fewer than two): a language it turns into unknown
    tokens is reported (``lossless`` False) but not counted. A language the
    tokenizer refuses gets ``{"error": ...}`` and no premium (the reference
    language failing raises).
    """
    from .bpb import select_documents

    by_lang: dict[str, list[LangDoc]] = {}
    for d in docs:
        if d.lang is not None:
            by_lang.setdefault(d.lang, []).append(d)
    per_lang: dict[str, dict] = {}
    pids: dict[str, list[str | None]] = {}
    failed: dict[str, dict] = {}
    for lang in sorted(by_lang):
        ds = by_lang[lang]
        texts = select_documents([d.text for d in ds], max_bytes_per_lang)
        pids[lang] = [d.parallel_id for d in ds[: len(texts)]]
        try:
            per_lang[lang] = language_metrics(
                tok, texts, space_separated=is_space_separated(lang), num_threads=num_threads
            )
        except (TokenforgeError, ValueError) as e:  # e.g. text a latin1-only tokenizer cannot encode
            failed[lang] = {"error": f"{type(e).__name__}: {e}", "premium": None, "method": None, "units": 0}
    prem = premiums(per_lang, reference, pids)
    langs = {}
    for lang in sorted(by_lang):
        if lang in failed:
            langs[lang] = failed[lang]
            continue
        m = {k: v for k, v in per_lang[lang].items() if k != "doc_tokens"}
        m.update(prem[lang])
        langs[lang] = m
    values = [m["premium"] for m in langs.values() if m["premium"] is not None and m.get("lossless")]
    return {"reference": reference, "languages": langs, "gini": gini(values) if len(values) >= 2 else None}
