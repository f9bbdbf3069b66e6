"""The stages of an imported tokenizer's pipeline, with Hugging Face ``tokenizers`` semantics.

A pipeline is normalizer -> pre-tokenizer -> model -> decoder, described by a
plain dict in the shape of a ``tokenizer.json`` (the description
:class:`~tokenforge.pipeline.PipelineTokenizer` saves). :func:`build` checks a
description and turns it into :class:`Pipeline`; every construct it does not
reproduce exactly is refused there with a :class:`~tokenforge.errors.FormatError`
naming the construct and where it is (``normalizer.normalizers[1]``), never
approximated. The rules follow ``tokenizers`` (the Rust crate) step by step:

* normalizers: ``Sequence``, ``NFC``/``NFD``/``NFKC``/``NFKD`` (Python's
  ``unicodedata``), ``Lowercase`` (one character at a time, as Rust's
  ``char::to_lowercase``: no final-sigma rule), ``Replace`` (a String pattern),
  ``Prepend`` (only to a non-empty text), ``Strip``, ``StripAccents``,
  ``BertNormalizer``;
* pre-tokenizers: ``Sequence``, ``Metaspace`` (``always``/``first``/``never``,
  ``split`` on or off), ``ByteLevel``, ``Split`` (a String pattern with any
  behaviour; a Regex with ``Isolated``, run by the core's regex engine),
  ``Whitespace``, ``WhitespaceSplit``, ``BertPreTokenizer``, ``Digits``,
  ``Punctuation``; empty pieces are dropped after every split, as there;
* decoders: ``Sequence``, ``ByteFallback``, ``Fuse``, ``Metaspace``,
  ``ByteLevel``, ``WordPiece``, ``Replace`` (String), ``Strip``, ``BPEDecoder``;
* models: ``Unigram`` (Viterbi over the pieces' log-probabilities, consecutive
  unknown characters fused into one unknown piece, ``byte_fallback``),
  ``WordPiece`` (greedy longest match first, ``##``-style prefix,
  ``max_input_chars_per_word``), ``WordLevel``, ``BPE`` over symbols (merge
  ranks, ``byte_fallback``, ``fuse_unk``, ``ignore_merges``,
  ``continuing_subword_prefix``, ``end_of_word_suffix``).

Character classes are tokenizers' own: whitespace is Rust's White_Space; punctuation,
digits, ``\\w``, control characters, combining marks and lower-casing come from
:mod:`.hf_unicode`, generated from the installed ``tokenizers`` by
``scripts/gen_hf_unicode.py`` (its Rust tables are of several Unicode versions,
none of them Python's).

Performance: this is the exact engine in plain Python (about 0.5-2 MB/s); each
model caches the ids of the pieces it has seen (bounded), as ``tokenizers``
does, so running text costs a dict lookup per repeated word.

Not handled (refused at load): Regex patterns in ``Replace``, Regex ``Split``
with a behaviour other than ``Isolated`` or ``invert``, the ``Precompiled``
normalizer of a tokenizer.json (a SentencePiece ``.model`` file's charsmap is
read, :mod:`tokenforge.pipeline.spm`), BPE dropout, ``Metaspace`` with
``prepend_scheme`` ``first`` after a normalizer that can delete leading
characters (``tokenizers`` then decides by alignments this engine does not
track), ``UnicodeScripts``, ``CharDelimiterSplit``, ``FixedLength``, ``CTC``.
The normalization forms come from Python's ``unicodedata``: for the few dozen
characters whose NFKC (or NFD) changed between its Unicode version and the Rust
crate's, the result differs from tokenizers'.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import unicodedata
from functools import lru_cache
from typing import Any, Callable, Iterable, cast

from ..errors import FormatError
from ..reference.unigram import best_path
from . import hf_unicode

__all__ = ["Desc", "Pipeline", "build"]

#: the most pieces a model remembers the ids of (as tokenizers' cache)
CACHE_LIMIT = 100_000
#: pieces longer than this (characters) are not cached
CACHE_MAX_PIECE = 256

_MISSING = object()


class Desc:
    """A part of a description, with where it is (for errors) and typed access."""

    __slots__ = ("value", "where", "origin")

    def __init__(self, value: Any, where: str, origin: str | os.PathLike[str] | None) -> None:
        self.value, self.where, self.origin = value, where, origin

    def fail(self, message: str, key: str | None = None) -> FormatError:
        at = self.where if key is None else f"{self.where}.{key}" if self.where else key
        return FormatError(f"{at or 'top level'}: {message}", path=self.origin)

    def get(self, key: str, types: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, found {type(self.value).__name__}")
        if key not in self.value or self.value[key] is None and default is not _MISSING and default is None:
            if default is _MISSING:
                raise self.fail("missing", key)
            return default
        v = self.value[key]
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in _as_tuple(types))
        if not ok:
            names = "/".join(t.__name__ for t in _as_tuple(types))
            raise self.fail(f"expected {names}, found {type(v).__name__}", key)
        return v

    def sub(self, key: str) -> "Desc":
        return Desc(self.get(key, (dict, list)), f"{self.where}.{key}" if self.where else key, self.origin)

    def items(self, key: str) -> list["Desc"]:
        values = self.get(key, list)
        at = f"{self.where}.{key}" if self.where else key
        return [Desc(v, f"{at}[{i}]", self.origin) for i, v in enumerate(values)]

    def kind(self) -> str:
        return self.get("type", str)

    def only(self, *keys: str) -> None:
        """Refuse keys this engine does not know (a setting it would ignore)."""
        for k in self.value:
            if k != "type" and k not in keys:
                raise self.fail(f"unknown setting {k!r} of {self.value.get('type')!r}; not supported", k)


def _as_tuple(types: type | tuple[type, ...]) -> tuple:
    return types if isinstance(types, tuple) else (types,)


# ---------------------------------------------------------------- character classes (Rust's)
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _class_set(ranges: Iterable[tuple[int, int]]) -> str:
    """A regex character-class body (no brackets) for code point ranges."""
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


# The same classes as regex sets: the stages below find their characters with
# `re` (one pass in C) instead of a Python test per character.
_WS_SET = _class_set((ord(c), ord(c)) for c in sorted(_WHITE_SPACE))
_PUNCT_SET = _class_set(hf_unicode.PUNCTUATION)
_NUMERIC_SET = _class_set(hf_unicode.NUMERIC)
_CHINESE_SET = _class_set(
    [
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    ]
)
_WS_RE = re.compile(f"[{_WS_SET}]")
_CLEAN_RE = re.compile(f"[\\x00\\ufffd{_class_set(hf_unicode.CONTROL)}]")
_CHINESE_RE = re.compile(f"[{_CHINESE_SET}]")
_NONSPACING_RE = re.compile(f"[{_class_set(hf_unicode.NONSPACING_MARK)}]")
# BertPreTokenizer's pieces: each punctuation character, and the runs of neither
# punctuation nor whitespace between (whitespace removed)
_BERT_RE = re.compile(f"[{_PUNCT_SET}]|[^{_PUNCT_SET}{_WS_SET}]+")
_LOWER_TABLE = {c: lo for c, lo in hf_unicode.LOWERCASE.items()}
_NUMERIC_RE = re.compile(f"[{_NUMERIC_SET}]")  # Rust's char::is_numeric
_PUNCT_RE = re.compile(f"[{_PUNCT_SET}]")  # ASCII punctuation or a P* category (Unicode 9)
_COMBINING_RE = re.compile(f"[{_class_set(hf_unicode.COMBINING_MARK)}]")  # what StripAccents removes
_WORD_SET = _class_set(hf_unicode.WORD)  # the regex crate's \w
# Whitespace's pieces: \w+|[^\w\s]+ (whitespace removed); WhitespaceSplit's: runs of non-whitespace
_WHITESPACE_RE = re.compile(f"[{_WORD_SET}]+|[^{_WORD_SET}{_WS_SET}]+")
_NOT_WS_RE = re.compile(f"[^{_WS_SET}]+")


def _normalization(form: Any) -> Callable[[str], str]:
    """``unicodedata.normalize(form, ...)``, leaving alone the characters
    tokenizers' tables leave alone (:data:`.hf_unicode.NORMALIZATION_KEEPS`, when
    generated with this Python's Unicode version): the text is normalized in the
    stretches between them, as starters that nothing composes with."""
    keep = hf_unicode.NORMALIZATION_KEEPS[form] if hf_unicode.UNIDATA == unicodedata.unidata_version else frozenset()
    kept = re.compile(f"[{_class_set((c, c) for c in sorted(keep))}]") if keep else None

    def normalize(s: str) -> str:
        if s.isascii():
            return s
        if kept is None or not kept.search(s):
            return unicodedata.normalize(form, s)
        out, start = [], 0
        for i, c in enumerate(s):
            if ord(c) in keep:
                out.append(unicodedata.normalize(form, s[start:i]))
                out.append(c)
                start = i + 1
        out.append(unicodedata.normalize(form, s[start:]))
        return "".join(out)

    return normalize


def _lowercase(s: str) -> str:
    # per character, as NormalizedString::lowercase (no final-sigma rule), with tokenizers' table
    if s.isascii():
        return s.lower()
    return s.translate(_LOWER_TABLE)


# ---------------------------------------------------------------- splitting
# A split is a list of (start, end, is_match) covering the text, in str offsets.
def _matches_re(s: str, rx: re.Pattern) -> list[tuple[int, int, bool]]:
    """The split of ``s`` at every character ``rx`` (a one-character class) matches."""
    out: list[tuple[int, int, bool]] = []
    last = 0
    for m in rx.finditer(s):
        i = m.start()
        if last < i:
            out.append((last, i, False))
        out.append((i, i + 1, True))
        last = i + 1
    if last < len(s):
        out.append((last, len(s), False))
    return out


def _matches_str(s: str, pat: str) -> list[tuple[int, int, bool]]:
    out: list[tuple[int, int, bool]] = []
    last = 0
    i = s.find(pat)
    while i != -1:
        if last < i:
            out.append((last, i, False))
        out.append((i, i + len(pat), True))
        last = i + len(pat)
        i = s.find(pat, last)
    if last < len(s):
        out.append((last, len(s), False))
    return out


def _apply_behavior(matches: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    """NormalizedString::split's behaviours: which spans become pieces."""
    if behavior == "Isolated":
        return [(a, b) for a, b, _ in matches]
    if behavior == "Removed":
        return [(a, b) for a, b, m in matches if not m]
    acc: list[list[int]] = []
    prev = False
    if behavior == "Contiguous":
        for a, b, m in matches:
            if m == prev and acc:
                acc[-1][1] = b
            else:
                acc.append([a, b])
            prev = m
    elif behavior == "MergedWithPrevious":
        for a, b, m in matches:
            if m and not prev and acc:
                acc[-1][1] = b
            else:
                acc.append([a, b])
            prev = m
    elif behavior == "MergedWithNext":
        for a, b, m in reversed(matches):
            if m and not prev and acc:
                acc[-1][0] = a
            else:
                acc.append([a, b])
            prev = m
        acc.reverse()
    else:  # checked at build time
        raise AssertionError(behavior)
    return [(a, b) for a, b in acc]


_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")

# A piece during pre-tokenization: (text, starts the original text)
Piece = tuple[str, bool]


def _found_pieces(pieces: list[Piece], rx: re.Pattern) -> list[Piece]:
    """Each piece replaced by the matches of ``rx`` in it (never empty ones), the
    rest removed: one ``findall`` in C per piece; the first match starts the text
    only where ``rx`` matches at 0 (findall finds that match first)."""
    out: list[Piece] = []
    for text, first in pieces:
        parts = rx.findall(text)
        if parts:
            out.append((parts[0], first and rx.match(text) is not None))
            out.extend([(p, False) for p in parts[1:]])
    return out


def _split_pieces(pieces: list[Piece], cut: Callable[[str], list[tuple[int, int]]]) -> list[Piece]:
    out: list[Piece] = []
    for text, first in pieces:
        for a, b in cut(text):
            if b > a:
                out.append((text[a:b], first and a == 0))
    return out


# ---------------------------------------------------------------- normalizers
def _normalizer(d: Desc) -> tuple[list[Callable[[str], str]], bool]:
    """(the functions in order, whether one can delete leading characters)."""
    kind = d.kind()
    if kind == "Sequence":
        d.only("normalizers")
        fns: list[Callable[[str], str]] = []
        deletes = False
        for item in d.items("normalizers"):
            f, dl = _normalizer(item)
            fns += f
            deletes = deletes or dl
        return fns, deletes
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        d.only()
        return [_normalization(kind)], False
    if kind == "Lowercase":
        d.only()
        return [_lowercase], False
    if kind == "Strip":
        d.only("strip_left", "strip_right")
        left, right = d.get("strip_left", bool, True), d.get("strip_right", bool, True)

        def strip(s: str) -> str:
            a, b = 0, len(s)
            if left:
                while a < b and s[a] in _WHITE_SPACE:
                    a += 1
            if right:
                while b > a and s[b - 1] in _WHITE_SPACE:
                    b -= 1
            return s[a:b]

        return [strip], left
    if kind == "StripAccents":
        d.only()
        return [lambda s: _COMBINING_RE.sub("", s)], True
    if kind == "Prepend":
        d.only("prepend")
        pre = d.get("prepend", str)
        return [lambda s: pre + s if s else s], False
    if kind == "Replace":
        d.only("pattern", "content")
        pat = _string_pattern(d.sub("pattern"), "Replace")
        content = d.get("content", str)
        if not pat:
            return [lambda s: s], False
        return [lambda s: s.replace(pat, content)], content == ""
    if kind == "BertNormalizer":
        d.only("clean_text", "handle_chinese_chars", "strip_accents", "lowercase")
        clean = d.get("clean_text", bool, True)
        chinese = d.get("handle_chinese_chars", bool, True)
        lower = d.get("lowercase", bool, True)
        accents = d.get("strip_accents", bool, None)
        strip_accents = lower if accents is None else accents

        nfd = _normalization("NFD")

        def bert(s: str) -> str:
            # per character as tokenizers does it, each step one regex pass: clean_text
            # drops NUL, U+FFFD and controls (tab, CR, LF are not) and makes whitespace
            # a space; Chinese characters get a space either side; accents are the
            # nonspacing marks after NFD
            if clean:
                s = _WS_RE.sub(" ", _CLEAN_RE.sub("", s))
            if chinese and not s.isascii():
                s = _CHINESE_RE.sub(lambda m: f" {m.group()} ", s)
            if strip_accents and not s.isascii():
                s = _NONSPACING_RE.sub("", nfd(s))
            if lower:
                s = _lowercase(s)
            return s

        return [bert], clean or strip_accents
    if kind == "Precompiled":
        raise d.fail(
            "the Precompiled normalizer of a tokenizer.json is not supported (tokenizers applies its charsmap per "
            "grapheme cluster, which this engine does not reproduce); load the SentencePiece .model file instead",
            "type",
        )
    raise d.fail(f"normalizer {kind!r} is not supported", "type")


def _string_pattern(d: Desc, who: str) -> str:
    if isinstance(d.value, dict) and "String" in d.value:
        return d.get("String", str)
    if isinstance(d.value, dict) and "Regex" in d.value:
        raise d.fail(f"a Regex pattern in {who} is not supported (only String patterns are reproduced exactly)")
    raise d.fail('expected {"String": ...} or {"Regex": ...}')


# ---------------------------------------------------------------- pre-tokenizers
_PREPEND_SCHEMES = ("always", "first", "never")


def _metaspace_settings(d: Desc) -> tuple[str, str, bool]:
    d.only("replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep")
    rep = d.get("replacement", str, "\u2581")
    if len(rep) != 1:
        raise d.fail(f"replacement must be one character, found {rep!r}", "replacement")
    if "prepend_scheme" in d.value:
        scheme = d.get("prepend_scheme", str)
        if scheme not in _PREPEND_SCHEMES:
            raise d.fail(f"unknown prepend_scheme {scheme!r} (known: {', '.join(_PREPEND_SCHEMES)})", "prepend_scheme")
    else:  # files written before prepend_scheme existed
        scheme = "always" if d.get("add_prefix_space", bool, True) else "never"
    return rep, scheme, d.get("split", bool, True)


def _pre_tokenizer(d: Desc, deletes_leading: bool) -> list[Callable[[list[Piece]], list[Piece]]]:
    kind = d.kind()
    if kind == "Sequence":
        d.only("pretokenizers")
        out: list[Callable[[list[Piece]], list[Piece]]] = []
        for item in d.items("pretokenizers"):
            out += _pre_tokenizer(item, deletes_leading)
        return out
    if kind == "Metaspace":
        rep, scheme, split = _metaspace_settings(d)
        if scheme == "first" and deletes_leading:
            raise d.fail(
                "Metaspace with prepend_scheme 'first' after a normalizer that can delete leading characters is "
                "not supported",
                "prepend_scheme",
            )

        r = re.escape(rep)
        split_re = re.compile(f"{r}[^{r}]*|[^{r}]+")

        def metaspace(pieces: list[Piece]) -> list[Piece]:
            out: list[Piece] = []
            for text, first in pieces:
                text = text.replace(" ", rep)
                if (scheme == "always" or (scheme == "first" and first)) and not text.startswith(rep):
                    text = rep + text
                if not split:
                    if text:
                        out.append((text, first))
                    continue
                out += _found_pieces([(text, first)], split_re)  # each replacement merged with what follows it
            return out

        return [metaspace]
    if kind == "ByteLevel":
        d.only("add_prefix_space", "trim_offsets", "use_regex")
        prefix = d.get("add_prefix_space", bool, True)
        use_regex = d.get("use_regex", bool, True)
        table = _byte_table()

        def byte_level(pieces: list[Piece]) -> list[Piece]:
            from .. import _core

            out: list[Piece] = []
            for text, first in pieces:
                if prefix and not text.startswith(" "):
                    text = " " + text
                parts = _core.split(_core.GPT2_PATTERN, text, True) if use_regex else [text]
                pos = 0
                for p in parts:
                    if p:
                        mapped = "".join([table[b] for b in p.encode("utf-8", "surrogatepass")])
                        out.append((mapped, first and pos == 0))
                    pos += len(p)
            return out

        return [byte_level]
    if kind == "Split":
        d.only("pattern", "behavior", "invert")
        behavior = d.get("behavior", str)
        if behavior not in _BEHAVIORS:
            raise d.fail(f"unknown behavior {behavior!r} (known: {', '.join(_BEHAVIORS)})", "behavior")
        invert = d.get("invert", bool, False)
        pat = d.sub("pattern")
        if isinstance(pat.value, dict) and "Regex" in pat.value:
            regex = pat.get("Regex", str)
            if behavior != "Isolated" or invert:
                raise pat.fail("a Regex Split is supported with behavior 'Isolated' and invert false only")
            from ..formats.patterns import pattern_compile_problem

            problem = pattern_compile_problem(regex)
            if problem is not None:
                raise pat.fail(f"the Split pattern cannot be used: {problem}", "Regex")

            def regex_split(pieces: list[Piece]) -> list[Piece]:
                from .. import _core

                out: list[Piece] = []
                for text, first in pieces:
                    pos = 0
                    for p in _core.split(regex, text, True):
                        if p:
                            out.append((p, first and pos == 0))
                        pos += len(p)
                return out

            return [regex_split]
        literal = _string_pattern(pat, "Split")

        def cut_literal(text: str) -> list[tuple[int, int]]:
            if not literal:
                return [(0, len(text))]
            m = _matches_str(text, literal)
            if invert:
                m = [(a, b, not f) for a, b, f in m]
            return _apply_behavior(m, behavior)

        return [lambda pieces: _split_pieces(pieces, cut_literal)]
    if kind == "Whitespace":
        d.only()

        return [lambda pieces: _found_pieces(pieces, _WHITESPACE_RE)]
    if kind == "WhitespaceSplit":
        d.only()
        return [lambda pieces: _found_pieces(pieces, _NOT_WS_RE)]
    if kind == "BertPreTokenizer":
        d.only()
        return [lambda pieces: _found_pieces(pieces, _BERT_RE)]
    if kind == "Digits":
        d.only("individual_digits")
        how = "Isolated" if d.get("individual_digits", bool, False) else "Contiguous"
        return [lambda pieces: _split_pieces(pieces, lambda t: _apply_behavior(_matches_re(t, _NUMERIC_RE), how))]
    if kind == "Punctuation":
        d.only("behavior")
        behavior = d.get("behavior", str, "Isolated")
        if behavior not in _BEHAVIORS:
            raise d.fail(f"unknown behavior {behavior!r} (known: {', '.join(_BEHAVIORS)})", "behavior")
        return [lambda pieces: _split_pieces(pieces, lambda t: _apply_behavior(_matches_re(t, _PUNCT_RE), behavior))]
    raise d.fail(f"pre-tokenizer {kind!r} is not supported", "type")


@lru_cache(maxsize=None)
def _byte_table() -> tuple[str, ...]:
    from ..formats.hf_json import bytes_to_unicode

    return bytes_to_unicode()


@lru_cache(maxsize=None)
def _byte_of_char() -> dict[str, int]:
    return {c: b for b, c in enumerate(_byte_table())}


# ---------------------------------------------------------------- decoders
# A decoder step maps the list of token strings to a new list (decode_chain);
# ``piece`` maps one token to the bytes it stands for (token_bytes, id_to_bytes).
class _Decoder:
    def __init__(self, chain: Callable[[list[str]], list[str]], piece: Callable[[Any], Any]):
        self.chain, self.piece = chain, piece


def _byte_fallback_value(token: str) -> int | None:
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        h = token[3:5]
        if all(c in "0123456789abcdefABCDEF" for c in h):
            return int(h, 16)
    return None


def _text_step(fn: Callable[[str], str]) -> Callable[[Any], Any]:
    """A per-piece step on text, applied to a piece that is already bytes through UTF-8."""

    def step(v: str | bytes) -> str | bytes:
        if isinstance(v, bytes):
            return fn(v.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        return fn(v)

    return step


def _decoder(d: Desc) -> list[_Decoder]:
    kind = d.kind()
    if kind == "Sequence":
        d.only("decoders")
        out: list[_Decoder] = []
        for item in d.items("decoders"):
            out += _decoder(item)
        return out
    if kind == "ByteFallback":
        d.only()

        def byte_fallback(tokens: list[str]) -> list[str]:
            out: list[str] = []
            pending = bytearray()

            def flush() -> None:
                if pending:
                    try:
                        out.append(pending.decode("utf-8"))
                    except UnicodeDecodeError:
                        out.extend(["\ufffd"] * len(pending))
                    pending.clear()

            for t in tokens:
                b = _byte_fallback_value(t)
                if b is not None:
                    pending.append(b)
                else:
                    flush()
                    out.append(t)
            flush()
            return out

        def bf_piece(v: str | bytes) -> str | bytes:
            if isinstance(v, str):
                b = _byte_fallback_value(v)
                if b is not None:
                    return bytes([b])
            return v

        return [_Decoder(byte_fallback, bf_piece)]
    if kind == "Fuse":
        d.only()
        return [_Decoder(lambda tokens: ["".join(tokens)], lambda v: v)]
    if kind == "Metaspace":
        rep, scheme, _ = _metaspace_settings(d)

        def metaspace(tokens: list[str]) -> list[str]:
            out = []
            for i, t in enumerate(tokens):
                if i == 0 and scheme != "never":
                    out.append(t.replace(rep, ""))
                else:
                    out.append(t.replace(rep, " "))
            return out

        return [_Decoder(metaspace, _text_step(lambda t: t.replace(rep, " ")))]
    if kind == "ByteLevel":
        d.only("add_prefix_space", "trim_offsets", "use_regex")
        table = _byte_of_char()

        def to_bytes(t: str) -> bytes:
            try:
                return bytes([table[c] for c in t])
            except KeyError:
                return t.encode("utf-8", "surrogatepass")

        def byte_level(tokens: list[str]) -> list[str]:
            return [b"".join(to_bytes(t) for t in tokens).decode("utf-8", "replace")]

        return [_Decoder(byte_level, lambda v: to_bytes(v) if isinstance(v, str) else v)]
    if kind == "WordPiece":
        d.only("prefix", "cleanup")
        prefix = d.get("prefix", str, "##")
        cleanup = d.get("cleanup", bool, True)

        def wordpiece(tokens: list[str]) -> list[str]:
            out = []
            for i, t in enumerate(tokens):
                if i != 0:
                    t = t[len(prefix) :] if t.startswith(prefix) else " " + t
                if cleanup:
                    t = _cleanup(t)
                out.append(t)
            return out

        # in running text a word's first piece stands for itself after the space the
        # decoder puts between words; a continuation for itself without the prefix
        return [_Decoder(wordpiece, _text_step(lambda t: t[len(prefix) :] if t.startswith(prefix) else " " + t))]
    if kind == "Replace":
        d.only("pattern", "content")
        pat = _string_pattern(d.sub("pattern"), "Replace")
        content = d.get("content", str)
        fn = (lambda t: t) if not pat else (lambda t: t.replace(pat, content))
        return [_Decoder(lambda tokens: [fn(t) for t in tokens], _text_step(fn))]
    if kind == "Strip":
        d.only("content", "start", "stop")
        content = d.get("content", str)
        if len(content) != 1:
            raise d.fail(f"content must be one character, found {content!r}", "content")
        start, stop = d.get("start", int), d.get("stop", int)
        if start < 0 or stop < 0:
            raise d.fail("start and stop must be >= 0")

        def strip(tokens: list[str]) -> list[str]:
            out = []
            for t in tokens:
                a = 0
                while a < min(start, len(t)) and t[a] == content:
                    a += 1
                b = len(t)
                for _ in range(min(stop, len(t))):
                    if b > 0 and t[b - 1] == content:
                        b -= 1
                    else:
                        break
                out.append(t[a:b] if a <= b else "")
            return out

        return [_Decoder(strip, lambda v: v)]
    if kind == "BPEDecoder":
        d.only("suffix")
        suffix = d.get("suffix", str, "</w>")

        def bpe_dec(tokens: list[str]) -> list[str]:
            n = len(tokens)
            return [t.replace(suffix, "" if i == n - 1 else " ") for i, t in enumerate(tokens)]

        return [_Decoder(bpe_dec, _text_step(lambda t: t.replace(suffix, " ")))]
    raise d.fail(f"decoder {kind!r} is not supported", "type")


def _cleanup(t: str) -> str:
    for a, b in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" do not", " don't"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        t = t.replace(a, b)
    return t


# ---------------------------------------------------------------- models
class Model:
    """A model: ``tokenize(piece) -> ids``; ``pieces[id]`` is its vocabulary (every id has a piece)."""

    pieces: list[str]
    by_piece: dict[str, int]
    _cache: dict[str, list[int]]

    def tokenize(self, piece: str) -> list[int]:
        raise NotImplementedError

    #: the Rust engine of the model (``encode_words``/``encode_words_batch``), if it has one
    native: Any = None

    def encode_words(self, words: list[str]) -> list[int]:
        """The ids of one text's pre-tokenized words, in order."""
        if self.native is not None:
            try:
                return self.native.encode_words(words)
            except UnicodeEncodeError:  # lone surrogates: the Python engine
                pass
        out: list[int] = []
        for w in words:
            out.extend(self.tokenize(w))
        return out

    def encode_words_batch(self, batch: list[list[str]], num_threads: int | None) -> list[list[int]]:
        """:meth:`encode_words` of many texts (on ``num_threads`` threads when native)."""
        if self.native is not None:
            try:
                return self.native.encode_words_batch(
                    [w for ws in batch for w in ws], [len(ws) for ws in batch], num_threads
                )
            except UnicodeEncodeError:
                pass
        return [self.encode_words(ws) for ws in batch]

    def _cached(self, piece: str, fn: Callable[[str], list[int]]) -> list[int]:
        cache = self._cache
        ids = cache.get(piece)
        if ids is None:
            ids = fn(piece)
            if len(piece) <= CACHE_MAX_PIECE and len(cache) < CACHE_LIMIT:
                cache[piece] = ids
        return ids

    def detail(self, i: int) -> dict:
        return {}


def _vocab_map(d: Desc, key: str = "vocab") -> tuple[dict[str, int], list[str]]:
    vocab = d.get(key, dict)
    n = len(vocab)
    pieces: list[str | None] = [None] * n
    for k, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            raise d.fail(f"id of {k[:40]!r} must be an integer in 0..{n - 1} (ids are dense), found {i!r}", key)
        if pieces[i] is not None:
            raise d.fail(f"id {i} is given to both {pieces[i]!r} and {k!r}", key)
        pieces[i] = k
    # n ids, each in 0..n-1 and none given twice: every slot is filled
    return dict(vocab), cast(list[str], pieces)


def _byte_ids(by_piece: dict[str, int]) -> list[int] | None:
    ids = [by_piece.get(f"<0x{b:02X}>") for b in range(256)]
    return None if any(i is None for i in ids) else cast(list[int], ids)


class Unigram(Model):
    """tokenizers' Unigram: the best-scoring segmentation (float64 sums), unknown
    characters fused into one unknown piece, byte fallback for an unknown piece."""

    def __init__(self, d: Desc):
        d.only("unk_id", "vocab", "byte_fallback")
        entries = d.items("vocab")
        if not entries:
            raise d.fail("an empty vocabulary", "vocab")
        self.pieces, self.scores = [], []
        self.by_piece = {}
        for e in entries:
            ok = isinstance(e.value, list) and len(e.value) == 2 and isinstance(e.value[0], str)
            score = e.value[1] if ok else None
            if not ok or not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
                raise e.fail("expected [piece, score] with a finite score")
            if e.value[0] == "":
                raise e.fail("an empty piece")
            self.by_piece[e.value[0]] = len(self.pieces)
            self.pieces.append(e.value[0])
            self.scores.append(float(score))
        unk = d.get("unk_id", int, None)
        if unk is not None and not 0 <= unk < len(self.pieces):
            raise d.fail(f"unk_id {unk} is outside the vocabulary of {len(self.pieces)}", "unk_id")
        self.unk_id = unk
        self.byte_ids = _byte_ids(self.by_piece) if d.get("byte_fallback", bool, False) else None
        self.byte_fallback = d.get("byte_fallback", bool, False)
        self.unk_score = min(self.scores) - 10.0
        # the pieces in a character trie (nested dicts; "" marks a piece's end with
        # (id, score)), as tokenizers' byte trie: the Viterbi walks it from each
        # position and stops at the first character no piece continues with, so
        # memory and work are linear in the pieces' and the text's length
        self.trie: dict = {}
        for p, i in self.by_piece.items():
            node = self.trie
            for c in p:
                node = node.setdefault(c, {})
            node[""] = i
        self._cache: dict[str, list[int]] = {}
        from .. import _core

        self.native = _core.WordModel.unigram(self.pieces, self.scores, self.unk_id, self.byte_fallback)

    def tokenize(self, piece: str) -> list[int]:
        """One word's ids in Python (the slow reference of the Rust engine)."""
        if not piece:
            return []
        return self._cached(piece, self._encode)

    def _encode(self, s: str) -> list[int]:
        scores, unk_score = self.scores, self.unk_score
        path = best_path(s, self.trie, lambda pid, _, here: scores[pid] + here, self.unk_id, lambda h: unk_score + h)
        # unknown runs fused into one string, then ids by string, as tokenizers maps them
        strings: list[str] = []
        k = 0
        while k < len(path):
            a, e, i = path[k]
            k += 1
            if i == self.unk_id:
                while k < len(path) and path[k][2] == self.unk_id:
                    e = path[k][1]
                    k += 1
            strings.append(s[a:e])
        ids: list[int] = []
        for t in strings:
            got = self.by_piece.get(t)
            if got is not None:
                ids.append(got)
                continue
            if self.byte_fallback:
                found = [self.by_piece.get(f"<0x{b:02X}>") for b in t.encode("utf-8", "surrogatepass")]
                bs = [b for b in found if b is not None]
                if len(bs) == len(found):
                    ids.extend(bs)
                    continue
            ids.append(self.unk_id)
        return ids

    def detail(self, i: int) -> dict:
        return {"score": self.scores[i]}


class WordPiece(Model):
    """tokenizers' WordPiece: greedy longest match first, continuation pieces
    with the prefix; a word with no full match, or longer than
    ``max_input_chars_per_word`` characters, is the unknown token."""

    def __init__(self, d: Desc):
        d.only("unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab")
        self.by_piece, self.pieces = _vocab_map(d)
        self.unk = d.get("unk_token", str)
        self.prefix = d.get("continuing_subword_prefix", str, "##")
        self.max_chars = d.get("max_input_chars_per_word", int, 100)
        if self.max_chars < 0:
            raise d.fail(f"max_input_chars_per_word must not be negative, found {self.max_chars}")
        # two character tries (nested dicts, "" marks a piece's end with its id): the
        # pieces, and the continuation pieces without their prefix. The longest
        # match is one walk from each start, linear in the word (tokenizers shortens
        # the candidate from the end, quadratic in a word's length)
        self.first: dict = {}
        self.rest: dict = {}
        for p, i in self.by_piece.items():
            for trie, key in (
                (self.first, p),
                (self.rest, p[len(self.prefix) :] if p.startswith(self.prefix) else None),
            ):
                if key:
                    node = trie
                    for c in key:
                        node = node.setdefault(c, {})
                    node[""] = i
        self._cache: dict[str, list[int]] = {}
        from .. import _core

        self.native = _core.WordModel.wordpiece(
            list(self.by_piece.items()), self.unk, self.prefix, min(self.max_chars, 1 << 62)
        )

    def detail(self, i: int) -> dict:
        p = self.pieces[i]
        return {"continuation": p is not None and p.startswith(self.prefix)}

    def _unk(self) -> list[int]:
        i = self.by_piece.get(self.unk)
        if i is None:
            raise FormatError(f"the WordPiece unk_token {self.unk!r} is not in the vocabulary")
        return [i]

    def tokenize(self, piece: str) -> list[int]:
        return self._cached(piece, self._encode)

    def _encode(self, s: str) -> list[int]:
        if len(s) > self.max_chars:
            return self._unk()
        out: list[int] = []
        start, n = 0, len(s)
        while start < n:
            node = self.first if start == 0 else self.rest
            found, end, k = None, start, start
            while k < n:
                nxt = node.get(s[k])
                if nxt is None:
                    break
                node = nxt
                k += 1
                if "" in node:
                    found, end = node[""], k
            if found is None:
                return self._unk()
            out.append(found)
            start = end
        return out


class WordLevel(Model):
    def __init__(self, d: Desc):
        d.only("vocab", "unk_token")
        self.by_piece, self.pieces = _vocab_map(d)
        self.unk = d.get("unk_token", str)

    def tokenize(self, piece: str) -> list[int]:
        i = self.by_piece.get(piece)
        if i is None:
            i = self.by_piece.get(self.unk)
            if i is None:
                raise FormatError(f"the WordLevel unk_token {self.unk!r} is not in the vocabulary")
        return [i]


class BPE(Model):
    """tokenizers' BPE over symbols: characters (with the continuing prefix and
    end-of-word suffix), unknown ones as byte-fallback bytes or the unknown
    token, then the adjacent pair of lowest merge rank is merged, leftmost first."""

    def __init__(self, d: Desc):
        d.only(
            "dropout",
            "unk_token",
            "continuing_subword_prefix",
            "end_of_word_suffix",
            "fuse_unk",
            "byte_fallback",
            "ignore_merges",
            "vocab",
            "merges",
        )
        if d.get("dropout", (int, float), None) not in (None, 0, 0.0):
            raise d.fail("BPE dropout is not supported (it makes encoding random)", "dropout")
        self.by_piece, self.pieces = _vocab_map(d)
        self.unk = d.get("unk_token", str, None)
        self.prefix = d.get("continuing_subword_prefix", str, None)
        self.suffix = d.get("end_of_word_suffix", str, None)
        self.fuse_unk = d.get("fuse_unk", bool, False)
        self.byte_fallback = d.get("byte_fallback", bool, False)
        self.ignore_merges = d.get("ignore_merges", bool, False)
        plen = len(self.prefix) if self.prefix else 0
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, m in enumerate(d.items("merges")):
            if isinstance(m.value, str):
                parts = m.value.split(" ")
            else:
                parts = m.value
            if not (isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, str) for p in parts)):
                raise m.fail(f'expected "left right" or [left, right], found {str(m.value)[:60]!r}')
            a, b = parts
            ids = [self.by_piece.get(a), self.by_piece.get(b)]
            new = self.by_piece.get(a + b[plen:])  # as tokenizers: the prefix's length is cut from the right part
            if ids[0] is None or ids[1] is None or new is None:
                raise m.fail(f"merge {a!r} + {b!r}: a part or the merged token is not in the vocabulary")
            self.merges[(ids[0], ids[1])] = (rank, new)
        self._cache: dict[str, list[int]] = {}
        self._made_by: dict[int, tuple[int, int, int]] | None = None

    def detail(self, i: int) -> dict:
        """The merge that made the id (its rank, 0 first, and its two parts), or none for a base symbol."""
        made = self._made_by
        if made is None:
            made = self._made_by = {new: (rank, a, b) for (a, b), (rank, new) in self.merges.items()}
        if i not in made:
            return {"rank": None}
        rank, a, b = made[i]
        return {"rank": rank, "left": self.pieces[a], "right": self.pieces[b]}

    def tokenize(self, piece: str) -> list[int]:
        if not piece:
            return []
        if self.ignore_merges:
            i = self.by_piece.get(piece)
            if i is not None:
                return [i]
        return self._cached(piece, self._encode)

    def _encode(self, w: str) -> list[int]:
        syms: list[int] = []
        unk: int | None = None
        vocab = self.by_piece
        n = len(w)
        for k, c in enumerate(w):
            s = c
            if k > 0 and self.prefix:
                s = self.prefix + s
            if k == n - 1 and self.suffix:
                s = s + self.suffix
            i = vocab.get(s)
            if i is not None:
                if unk is not None:
                    syms.append(unk)
                    unk = None
                syms.append(i)
                continue
            if self.byte_fallback:
                found = [vocab.get(f"<0x{b:02X}>") for b in s.encode("utf-8", "surrogatepass")]
                bs = [b for b in found if b is not None]
                if len(bs) == len(found):
                    syms.extend(bs)
                    continue
            if self.unk is not None:
                u = vocab.get(self.unk)
                if u is None:
                    raise FormatError(f"the BPE unk_token {self.unk!r} is not in the vocabulary")
                if unk is not None and not self.fuse_unk:
                    syms.append(unk)
                unk = u
        if unk is not None:
            syms.append(unk)
        return _merge_by_rank(syms, self.merges)


def _merge_by_rank(syms: list[int], merges: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """Merge the adjacent pair of lowest rank, leftmost first, until none is
    left: tokenizers' ``Word::merge_all`` without dropout. A heap of (rank,
    position) over a linked list of symbols, so a piece of n symbols costs
    O(n log n) (a whole text is one piece when there is no pre-tokenizer); an
    entry whose two symbols have changed since it was pushed is skipped."""
    n = len(syms)
    if n < 2:
        return syms
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    heap = []
    for j in range(n - 1):
        m = merges.get((syms[j], syms[j + 1]))
        if m is not None:
            heap.append((m[0], j, syms[j], syms[j + 1]))
    heapq.heapify(heap)
    while heap:
        rank, j, left, right = heapq.heappop(heap)
        k = nxt[j]
        if not alive[j] or k >= n or syms[j] != left or syms[k] != right:
            continue
        syms[j] = merges[(left, right)][1]
        alive[k] = False
        nxt[j] = nxt[k]
        if nxt[j] < n:
            prv[nxt[j]] = j
        p = prv[j]
        if p >= 0:
            m = merges.get((syms[p], syms[j]))
            if m is not None:
                heapq.heappush(heap, (m[0], p, syms[p], syms[j]))
        if nxt[j] < n:
            m = merges.get((syms[j], syms[nxt[j]]))
            if m is not None:
                heapq.heappush(heap, (m[0], j, syms[j], syms[nxt[j]]))
    return [t for t, a in zip(syms, alive) if a]


_MODELS: dict[str, Callable[[Desc], Model]] = {
    "Unigram": Unigram,
    "WordPiece": WordPiece,
    "WordLevel": WordLevel,
    "BPE": BPE,
}


# ---------------------------------------------------------------- the pipeline
class Pipeline:
    """A built description: ``encode(text, first)`` and ``decode(tokens)``."""

    def __init__(
        self,
        normalizers: list[Callable[[str], str]],
        pre_tokenizers: list[Callable[[list[Piece]], list[Piece]]],
        model: Model,
        decoders: list[_Decoder] | None,
    ):
        self.normalizers, self.pre_tokenizers, self.model, self.decoders = (
            normalizers,
            pre_tokenizers,
            model,
            decoders,
        )

    def normalize(self, text: str) -> str:
        for f in self.normalizers:
            text = f(text)
        return text

    def encode(self, text: str, first: bool = True) -> list[int]:
        """The ids of one stretch of text between added tokens (``first``: it
        starts the original text)."""
        if not text:
            return []
        return self.model.encode_words(self.words(text, first))

    def words(self, text: str, first: bool = True) -> list[str]:
        """The normalized, pre-tokenized pieces of a text (what the model sees)."""
        pieces: list[Piece] = [(self.normalize(text), first)]
        for pt in self.pre_tokenizers:
            pieces = pt(pieces)
        return [p for p, _ in pieces]

    def encode_batch(self, texts: list[str], num_threads: int | None) -> list[list[int]]:
        """:meth:`encode` of many texts: the stages before the model in Python,
        text by text; the model on ``num_threads`` threads where it is native."""
        return self.model.encode_words_batch([self.words(t) if t else [] for t in texts], num_threads)

    def decode(self, tokens: list[str]) -> str:
        if self.decoders is None:
            return " ".join(tokens)
        for dec in self.decoders:
            tokens = dec.chain(tokens)
        return "".join(tokens)

    @property
    def kind(self) -> str:
        return type(self.model).__name__

    def decode_ids(self, ids: list[int], names: dict[int, str]) -> str:
        """tokenizers' ``decode(ids, skip_special_tokens=False)``: an added token's
        text or the model's piece per id (an id with neither is left out), through the decoders."""
        pieces = self.model.pieces
        tokens = []
        for i in ids:
            t = names.get(i)
            if t is None and i < len(pieces):
                t = pieces[i]
            if t is not None:
                tokens.append(t)
        return self.decode(tokens)

    def id_bytes(self, i: int) -> bytes | None:
        """The bytes one model id stands for in running text (token_bytes, id_to_bytes)."""
        token = self.model.pieces[i] if i < len(self.model.pieces) else None
        if token is None:
            return None
        v: Any = token
        for dec in self.decoders or ():
            v = dec.piece(v)
        return v if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")


def build(desc: Desc) -> Pipeline:
    """Check a description and build its pipeline (FormatError naming what is not supported)."""
    norm = desc.value.get("normalizer") if isinstance(desc.value, dict) else None
    normalizers: list[Callable[[str], str]] = []
    deletes = False
    if norm is not None:
        normalizers, deletes = _normalizer(desc.sub("normalizer"))
    pre = desc.value.get("pre_tokenizer")
    pre_tokenizers = [] if pre is None else _pre_tokenizer(desc.sub("pre_tokenizer"), deletes)
    md = desc.sub("model")
    kind = md.value.get("type") if isinstance(md.value, dict) else None
    if kind is None and isinstance(md.value, dict):  # old files leave the type out
        kind = "BPE" if "merges" in md.value else "Unigram" if isinstance(md.value.get("vocab"), list) else None
    if kind not in _MODELS:
        raise md.fail(f"model type {kind!r} is not supported (known: {', '.join(_MODELS)})", "type")
    model = _MODELS[kind](md)
    dec = desc.value.get("decoder")
    decoders = None if dec is None else _decoder(desc.sub("decoder"))
    return Pipeline(normalizers, pre_tokenizers, model, decoders)
