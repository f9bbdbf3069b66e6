"""Hugging Face ``tokenizer.json`` export and import, for byte-level BPE.

Export (:func:`write_hf_json`) produces a file that ``tokenizers`` loads and
that encodes to the same ids as tiktoken (:func:`..tiktoken_io.to_tiktoken`)
built from the same vocabulary:

* pre-tokenizer: ``Split(pattern, "isolated")`` then
  ``ByteLevel(add_prefix_space=false, use_regex=false)`` (no Split when the
  pattern is None); decoder: ``ByteLevel``; no normalizer, no post-processor;
* model: ``BPE`` with GPT-2's byte-to-unicode strings as vocabulary keys and
  ``ignore_merges: true`` (a piece that is itself a token is that token, as in
  tiktoken);
* special tokens: in ``added_tokens`` with ``special: true`` *and* in the model
  vocabulary under their own text (``tokenizers`` ignores the id written in
  ``added_tokens`` when the text is not in the model vocabulary).

Which merges are exported: tiktoken merges the adjacent pair whose
*concatenated bytes* has the lowest rank; Hugging Face merges the adjacent pair
whose *(left, right) pair* comes first in ``merges``. They agree when, for every
token, the merge list holds exactly the split tiktoken's loop builds that token
from (its "effective split", see :func:`effective_split`), at the token's
rank. A token X reachable by two splits (``"abc"`` = ``"ab"+"c"`` =
``"a"+"bc"``) is always built by tiktoken from the same one of them, whatever
surrounds it, so listing the other splits is never needed; and a token whose
bytes never reduce to two parts is only ever produced as a whole piece, so it
gets no merge at all (``ignore_merges`` finds it). For vocabularies trained
by BPE the effective split is the recorded merge; for others (hand-made
BPEData) exporting the recorded merges instead would give different ids, which
the tests demonstrate.

Both directions are linear (n log n) in the bytes of the tokens: effective
splits come from the engine (``_core.bpe_rank_splits``), which runs
tiktoken's loop in O(n log n) per token of n bytes; :func:`effective_split`
is the same rule as a plain, quadratic loop, kept for tests.

Import (:func:`read_hf_json`) accepts byte-level BPE files, ours and the ones
Hugging Face writes for GPT-2-style vocabularies, and refuses anything else
(another model type, a normalizer, a prefix space, ...) with a FormatError
that says why. Ids must fit in 32 bits and stay below
:func:`~.bpe_data.id_limit` of the number of entries.

Not handled: normalizers, ``add_prefix_space``, WordPiece/Unigram models,
byte-fallback (SentencePiece-style) vocabularies.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Sequence, cast

from ..errors import FormatError
from ._jsonutil import JsonDoc, JsonProblem, json_doc_from_bytes, loads_checked
from .atomic import atomic_write
from .bpe_data import BPEData, id_error, id_limit, show_int
from .patterns import GPT2_PATTERN, pattern_compile_problem, pattern_name_for
from .tiktoken_io import mergeable_ranks

__all__ = [
    "bytes_to_unicode",
    "hf_json_dict",
    "write_hf_json",
    "read_hf_json",
    "sniff_hf_json",
]


# ------------------------------------------------------------------ byte alphabet
@lru_cache(maxsize=None)
def bytes_to_unicode() -> tuple[str, ...]:
    """GPT-2's byte -> character table: printable latin1 bytes stand for
    themselves, the other 68 bytes get U+0100, U+0101, ... in byte order."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(0x100 + extra))
            extra += 1
    return tuple(table)


@lru_cache(maxsize=None)
def _unicode_to_byte() -> dict[str, int]:
    return {ch: b for b, ch in enumerate(bytes_to_unicode())}


def _to_key(b: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[x] for x in b)


def _from_key(key: str) -> bytes | None:
    """The bytes a byte-level vocabulary key stands for (None if it is not one)."""
    back = _unicode_to_byte()
    try:
        return bytes(back[ch] for ch in key)
    except KeyError:
        return None


# ------------------------------------------------------------------ export
def effective_split(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
    """The two tokens tiktoken's merge loop can build ``token`` from, or None.

    Run tiktoken's loop (lowest-rank concatenation first, leftmost on a tie)
    on the token's own bytes with every token but itself available; if it
    stops at exactly two parts, those are the effective split. Inside any
    longer piece the bytes of ``token`` evolve the same way until the token
    forms (merges outside its span cannot change the pairs inside it, and a
    merge across its edge would mean it never forms), so the token is always
    formed from this split and never from another; with no such split it is
    only ever produced as a whole piece.

    This is the plain statement of the rule, quadratic in ``len(token)``;
    exports use the engine's linear-time ``_core.bpe_rank_splits(..., "all_but_own")``.
    """
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best = None
        for k in range(len(parts) - 1):
            r = ranks.get(parts[k] + parts[k + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, k)
        if best is None:
            return None
        k = best[1]
        parts[k : k + 2] = [parts[k] + parts[k + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _merge_list(data: BPEData, ranks: dict[bytes, int]) -> list[str]:
    """One merge per token, its effective split, in rank (= id) order.

    Hugging Face picks the pair that comes first in this list, tiktoken the
    pair whose concatenation has the lowest rank; with exactly the effective
    split of each token at that token's place the two choose the same pair at
    every step (see :func:`effective_split`). The recorded merge of ``data``
    is the effective split for every vocabulary trained by BPE or recovered by
    ``data_from_ranks``; where it is not, the effective split is what tiktoken
    (and so tokenforge's encoder) actually does, so that is what is exported.
    """
    from .. import _core

    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    longer = [k for k, (token, _) in enumerate(by_rank) if len(token) > 1]
    token_of = {r: t for t, r in by_rank}
    merges = []
    for count, parts in _core.bpe_rank_splits(by_rank, "all_but_own", longer):
        if count == 2:
            merges.append(f"{_to_key(token_of[parts[0]])} {_to_key(token_of[parts[1]])}")
    return merges


def _check_special(text: str, ordinary_keys: dict[str, int], path: str | os.PathLike[str] | None) -> None:
    """Refuse a special token whose text would be confused with ordinary tokens."""
    if text in ordinary_keys:
        raise FormatError(
            f"special token {text!r} has the same text as the byte-level key of ordinary token "
            f"{ordinary_keys[text]}; tokenizer.json cannot tell them apart",
            path=path,
        )
    raw = _from_key(text)
    if raw is not None and raw != text.encode("utf-8", "surrogatepass"):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return
        raise FormatError(
            f"special token {text!r} is spelled in the byte-level alphabet, so tokenizers would emit it "
            f"for the ordinary text {raw.decode('utf-8')!r}; rename the special token",
            path=path,
        )


def _pre_tokenizer(pattern: str | None) -> dict:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if pattern is None:
        return byte_level
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    return {"type": "Sequence", "pretokenizers": [split, byte_level]}


def hf_json_dict(data: BPEData, path: str | os.PathLike[str] | None = None) -> dict:
    """The ``tokenizer.json`` document (as a dict) for ``data``."""
    ranks = mergeable_ranks(data)  # refuses two ids with the same bytes
    vocab = {_to_key(b): i for b, i in ranks.items()}
    specials = sorted(data.special_tokens.items(), key=lambda kv: kv[1])
    for text, i in specials:
        _check_special(text, vocab, path)
    merges = _merge_list(data, ranks)
    vocab.update(specials)
    vocab = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    added = [
        {
            "id": i,
            "content": text,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for text, i in specials
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer(data.pattern),
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def write_hf_json(path: str | os.PathLike[str], data: BPEData) -> None:
    """Write ``data`` as a Hugging Face ``tokenizer.json`` (atomically).

    Needs unique bytes per id (as tiktoken does). The pattern travels in the
    Split pre-tokenizer; ``pattern_name`` and ``training`` are not stored
    (the reader derives the name from the pattern).
    """
    doc = hf_json_dict(data, path)
    atomic_write(path, json.dumps(doc, ensure_ascii=False, indent=2) + "\n")


# ------------------------------------------------------------------ import
_SNIFF_MODEL = re.compile(rb'"model"\s*:|"added_tokens"\s*:|"pre_tokenizer"\s*:')


def sniff_hf_json(path: str | os.PathLike[str], head: bytes) -> bool:
    """True if ``head`` starts a JSON object with tokenizer.json's keys.

    (A large vocabulary pushes "model" past the first 4 KiB, but
    ``added_tokens``/``pre_tokenizer`` come first in files tokenizers writes.)
    """
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return stripped.startswith(b"{") and b'"tokenforge-bpe"' not in head[:200] and bool(_SNIFF_MODEL.search(head))


def _require(doc: JsonDoc, where: Sequence[str | int], ok: bool, message: str) -> None:
    if not ok:
        raise doc.error(where, message)


def _read_pattern(doc: JsonDoc) -> str | None:
    """The split pattern the pre-tokenizer stands for; FormatError if it is not byte-level BPE's."""
    pre = doc.value.get("pre_tokenizer")
    places: list[list[str | int]]
    steps: list = [pre]
    places = [["pre_tokenizer"]]
    if isinstance(pre, dict) and pre.get("type") == "Sequence":
        listed = pre.get("pretokenizers")
        if not isinstance(listed, list) or not listed:
            raise doc.error(["pre_tokenizer"], "a Sequence needs a list of pretokenizers")
        steps = listed
        places = [["pre_tokenizer", "pretokenizers", k] for k in range(len(steps))]
    pattern = None
    for k, (step, at) in enumerate(zip(steps, places)):
        kind = step.get("type") if isinstance(step, dict) else None
        last = k == len(steps) - 1
        if kind == "Split" and not last and k == 0:
            _require(
                doc,
                at,
                step.get("behavior") == "Isolated" and not step.get("invert", False),
                'only Split with behavior "Isolated" and invert false is supported (tiktoken-style splitting)',
            )
            pat = step.get("pattern")
            _require(
                doc,
                at,
                isinstance(pat, dict) and isinstance(pat.get("Regex"), str),
                'expected the Split pattern {"Regex": "..."}; a literal String pattern is not supported',
            )
            pattern = pat["Regex"]
            problem = pattern_compile_problem(pattern)
            _require(doc, at, problem is None, f"the Split pattern cannot be used: {problem}")
        elif kind == "ByteLevel" and last:
            _require(
                doc,
                at,
                not step.get("add_prefix_space", False),
                "ByteLevel with add_prefix_space=true is not supported (tokenforge never adds a prefix space)",
            )
            if step.get("use_regex", True):
                _require(doc, at, pattern is None, "a Split followed by ByteLevel(use_regex=true) is not supported")
                pattern = GPT2_PATTERN
        else:
            raise doc.error(
                at,
                f"pre-tokenizer step {json.dumps(kind)} is not supported; byte-level BPE expects "
                "[Split(Regex, Isolated)] followed by ByteLevel (not a byte-level BPE tokenizer?)",
            )
    return pattern


def _check_pipeline(doc: JsonDoc) -> dict:
    v = doc.value
    model = v.get("model")
    _require(doc, ["model"], isinstance(model, dict), "expected a model object")
    kind = model.get("type", "BPE" if "merges" in model else None)
    _require(
        doc,
        ["model", "type"],
        kind == "BPE",
        f"model type {json.dumps(kind)} is not BPE; only byte-level BPE tokenizer.json files can be imported",
    )
    _require(
        doc,
        ["normalizer"],
        v.get("normalizer") is None,
        "a normalizer is not supported (byte-level BPE encodes the text as it is)",
    )
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        _require(doc, ["model", key], not model.get(key), f"{key} is not supported in byte-level BPE")
    _require(
        doc,
        ["model", "byte_fallback"],
        not model.get("byte_fallback"),
        "byte_fallback models are not byte-level BPE (SentencePiece-style); not supported",
    )
    _require(doc, ["model", "dropout"], model.get("dropout") in (None, 0, 0.0), "BPE dropout is not supported")
    _require(doc, ["model", "vocab"], isinstance(model.get("vocab"), dict), "expected an object key -> id")
    _require(doc, ["model", "merges"], isinstance(model.get("merges"), list), "expected a list of merges")
    return model


def _read_specials(doc: JsonDoc, vocab: dict) -> dict[str, int]:
    added = doc.value.get("added_tokens") or []
    _require(doc, ["added_tokens"], isinstance(added, list), "expected a list")
    entries = len(vocab) + len(added)
    limit = id_limit(entries)
    specials: dict[str, int] = {}
    for k, tok in enumerate(added):
        ok = isinstance(tok, dict) and isinstance(tok.get("content"), str) and isinstance(tok.get("id"), int)
        _require(doc, ["added_tokens", k], ok, "expected an object with an integer id and a string content")
        text, i = tok["content"], tok["id"]
        if i < 0 or isinstance(i, bool):
            raise doc.error(["added_tokens", k, "id"], f"expected a non-negative id, found {show_int(i)}")
        if i >= limit:
            raise doc.error(["added_tokens", k, "id"], id_error(f"added token {text[:40]!r}", i, entries))
        if tok.get("special", False):
            specials[text] = i
        else:
            _require(
                doc,
                ["added_tokens", k],
                vocab.get(text) == i,
                f"non-special added token {text!r} is not in the model vocabulary; not supported",
            )
    return specials


def _split_merge(doc: JsonDoc, k: int, merge: object) -> tuple[str, str]:
    if isinstance(merge, str):
        parts: list | None = merge.split(" ")
    elif isinstance(merge, list):
        parts = merge
    else:
        parts = None
    if parts is None or len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
        raise doc.error(["model", "merges", k], f'expected "left right" or [left, right], found {json.dumps(merge)}')
    return parts[0], parts[1]


def _read_merges(doc: JsonDoc, model: dict, vocab: dict, specials: dict) -> dict[int, tuple[int, int]]:
    """new id -> (left id, right id) from the first merge producing each token.

    Later merges of the same token (files converted from tiktoken sometimes
    list every split) are checked and dropped: tokenforge ranks by id.
    """
    merges: dict[int, tuple[int, int]] = {}
    last = -1
    for k, merge in enumerate(model["merges"]):
        left, right = _split_merge(doc, k, merge)
        where: list[str | int] = ["model", "merges", k]
        for part in (left, right):
            _require(doc, where, part in vocab and part not in specials, f"{part!r} is not an ordinary token")
        new = vocab.get(left + right)
        if new is None:
            raise doc.error(where, f"{left + right!r} (the merged token) is not in the vocabulary")
        if new in merges:
            continue
        _require(
            doc,
            where,
            new > last,
            f"merge creates id {new} after id {last}; tokenforge ranks tokens by id, so the first "
            "merge of each token must come in increasing id order",
        )
        last = new
        merges[new] = (vocab[left], vocab[right])
    return merges


def _splits_of_unmerged(doc: JsonDoc, keys: list[str], vocab: dict, specials: dict) -> dict[int, tuple[int, int]]:
    """The first split of each of ``keys`` into two tokens of lower id (for a
    token whose merge, if any, cannot be recorded in id order; its rank alone
    decides how it encodes). Linear in the tokens' bytes (the engine's
    "first_lower_cut"); FormatError for a key with no such split."""
    if not keys:
        return {}
    from .. import _core

    # every ordinary key was checked to be a byte-level token where the vocabulary was read
    tokens = [(cast(bytes, _from_key(key)), i) for key, i in vocab.items() if key not in specials]
    index = {key: k for k, key in enumerate(key for key in vocab if key not in specials)}
    found = _core.bpe_rank_splits(tokens, "first_lower_cut", [index[key] for key in keys])
    out = {}
    for key, (count, parts) in zip(keys, found):
        i = vocab[key]
        if count != 2:
            raise doc.error(
                ["model", "vocab", key],
                f"token {key[:60]!r} (id {i}) has no merge and cannot be split into two tokens of lower id",
            )
        out[i] = (parts[0], parts[1])
    return out


def _read_fast(raw: bytes, path: str | os.PathLike[str]) -> BPEData | None:
    """The engine's reader (``_core.bpe_read_hf_json``): vocabulary, merges and
    added tokens read and checked in Rust by the rules below, no Python object
    per entry; the pipeline settings are parsed and checked here by the same
    functions. None when anything is unusual: :func:`read_hf_json` then reads
    the file as before and reports what is wrong where."""
    from .. import _core

    parts = _core.bpe_read_hf_json(raw)
    if parts is None:
        return None
    try:
        value = {key: loads_checked(text) for key, text in parts.top()}
        model = {key: loads_checked(text) for key, text in parts.model()}
        model["vocab"], model["merges"] = {}, []  # (read by the engine; stand-ins for the type checks)
        value["model"] = model
        doc = JsonDoc(path, "", value)
        _check_pipeline(doc)
        pattern = _read_pattern(doc)
        added = value.get("added_tokens") or []
        specials = parts.specials()
        same = (
            isinstance(added, list)
            and [
                (t.get("content"), t.get("id")) if isinstance(t, dict) and t.get("special") is True else None
                for t in added
            ]
            == specials
        )
        if not same or not all(type(i) is int for _, i in specials):
            return None
    except (FormatError, JsonProblem, ValueError, RecursionError, TypeError):
        return None
    engine = parts.build(pattern)
    if engine is None:
        return None
    return BPEData.from_engine(engine, dict(specials), pattern, pattern_name_for(pattern))


def read_hf_json(path: str | os.PathLike[str]) -> BPEData:
    """Read a byte-level BPE ``tokenizer.json`` (ours, or Hugging Face's GPT-2 style)."""
    path = Path(path)
    raw = path.read_bytes()
    data = _read_fast(raw, path)
    if data is not None:
        return data
    doc = json_doc_from_bytes(raw, path, "Hugging Face tokenizer.json")
    model = _check_pipeline(doc)
    pattern = _read_pattern(doc)
    vocab = model["vocab"]
    specials = _read_specials(doc, vocab)
    owner: dict[int, str] = {}
    entries = len(vocab) + sum(1 for text in specials if text not in vocab)
    limit = id_limit(entries)
    for key, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            shown = show_int(i) if isinstance(i, int) else json.dumps(i)[:40]
            raise doc.error(["model", "vocab", key], f"expected a non-negative integer id, found {shown}")
        if i >= limit:
            raise doc.error(["model", "vocab", key], id_error(f"token {key[:40]!r}", i, entries))
        _require(doc, ["model", "vocab", key], i not in owner, f"id {i} is also the id of {owner.get(i)!r}")
        owner[i] = key
        if key in specials:
            _require(
                doc,
                ["model", "vocab", key],
                specials[key] == i,
                f"special token {key!r} has id {specials[key]} in added_tokens but {i} here",
            )
        else:
            _require(
                doc,
                ["model", "vocab", key],
                _from_key(key) is not None,
                f"{key!r} is not a byte-level token (a character outside GPT-2's byte alphabet)",
            )
    table = bytes_to_unicode()
    missing = [b for b in range(256) if table[b] not in vocab]
    if missing:
        b = missing[0]
        raise doc.error(["model", "vocab"], f"byte 0x{b:02x} ({table[b]!r}) is missing; not a byte-level vocabulary")
    byte_ids = [vocab[table[b]] for b in range(256)]
    merged = _read_merges(doc, model, vocab, specials)
    reached = set(byte_ids) | set(merged) | set(specials.values())
    # no merge, or a merge from a later token (an effective split may use one):
    # record a split into earlier tokens; the encoding depends on ranks only
    unmerged = [key for key, i in vocab.items() if i not in reached or (i in merged and max(merged[i]) >= i)]
    merged.update(_splits_of_unmerged(doc, unmerged, vocab, specials))
    merges = [(a, b, new) for new, (a, b) in sorted(merged.items())]
    data = BPEData(byte_ids, merges, specials, pattern, pattern_name_for(pattern), {})
    data.validate(doc.path)
    return data
