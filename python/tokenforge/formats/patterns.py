"""The pre-tokenization patterns by name: the one home of name -> regex.

:func:`resolve_pattern` is what every ``pattern=`` argument and ``--pattern``
option goes through: our names (``gpt4``, ``cl100k``, ``gpt2``, ``o200k``,
``none``), tiktoken's and Hugging Face's names of the same GPT patterns as
aliases (:data:`PATTERN_ALIASES`: ``cl100k_base``, ``gpt-4``, ``o200k_base``,
``gpt-4o``, ``r50k_base``, ``openai-community/gpt2``, ...), or a regex. A bare
word that is none of these (only letters, digits, ``_``, ``-``, ``.``, ``/``),
such as ``gpt5``, is a :class:`~tokenforge.errors.PatternError` listing the
known names, never a literal regex. The formats use the constants to recognise
a pattern, to supply the one a format implies, or to refuse a file whose name
and pattern disagree. The Rust core holds
the same texts (``_core.GPT4_PATTERN`` ...); a test checks they are equal.

Whatever the pattern, splitting loses no text: the text between two matches
is a piece of its own (Hugging Face's ``Split(pattern, "isolated")``) and
empty matches are skipped, so the pieces of a text concatenate back to it.

Not handled: a regex that is itself a bare word (``abc``) is refused as an
unknown name; write it so it is not one (``(?:abc)``). A custom pattern's cost. Whether it compiles is asked of the
engine (:func:`pattern_compile_problem` imports ``_core`` lazily, the only
place the formats touch it), but a pattern that compiles and backtracks
heavily is as slow as the regex engine makes it.
"""

from __future__ import annotations

import re

__all__ = [
    "GPT4_PATTERN",
    "CL100K_PATTERN",
    "GPT2_PATTERN",
    "O200K_PATTERN",
    "WHOLE_TEXT_PATTERN",
    "NAMED_PATTERNS",
    "PATTERN_NAMES",
    "pattern_name_for",
    "pattern_name_problem",
    "pattern_compile_problem",
    "PATTERN_ALIASES",
    "resolve_pattern",
]

#: nanochat's variant of the GPT-4 split pattern (numbers in groups of 1-2, possessive quantifiers).
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)

#: GPT-4's own (cl100k) split pattern: numbers in groups of 1-3 (rustbpe's and the growing seed's default).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)

#: GPT-2's split pattern (also what Hugging Face's ByteLevel pre-tokenizer uses with use_regex=true).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

#: GPT-4o's (o200k) split pattern, exactly tiktoken's o200k_base ``pat_str``: case-aware words with
#: contractions attached, numbers in groups of 1-3, ``/`` kept after punctuation.
O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: A pattern whose single match is the whole text: "no pre-tokenization" for tools that need a pattern.
WHOLE_TEXT_PATTERN = r"(?s).+"

#: Every pattern a file may name; a file naming one must carry exactly this text (where it carries one).
NAMED_PATTERNS: dict[str, str] = {
    "gpt4": GPT4_PATTERN,
    "cl100k": CL100K_PATTERN,
    "gpt2": GPT2_PATTERN,
    "o200k": O200K_PATTERN,
}

#: The values of BPEData.pattern_name: the named patterns, "custom" (any other regex) and "none" (no pattern).
PATTERN_NAMES = (*NAMED_PATTERNS, "custom", "none")


#: Other names of our named patterns: tiktoken's encodings and the models it maps to them, and
#: Hugging Face's hub names of the same tokenizers. "gpt-4" is tiktoken's cl100k_base (digits in
#: groups of 1-3), not our "gpt4" (nanochat's variant, groups of 1-2).
PATTERN_ALIASES: dict[str, str] = {
    "cl100k_base": "cl100k",
    "gpt-4": "cl100k",
    "gpt-3.5-turbo": "cl100k",
    "text-embedding-3-small": "cl100k",
    "Xenova/gpt-4": "cl100k",
    "o200k_base": "o200k",
    "o200k_harmony": "o200k",
    "gpt-4o": "o200k",
    "gpt-4o-mini": "o200k",
    "Xenova/gpt-4o": "o200k",
    "r50k_base": "gpt2",
    "p50k_base": "gpt2",
    "p50k_edit": "gpt2",
    "gpt-2": "gpt2",
    "openai-community/gpt2": "gpt2",
}

#: A pattern argument made only of these is a name, never a regex.
_BARE_NAME = re.compile(r"[A-Za-z0-9_.\-/]+")


def known_pattern_names() -> list[str]:
    """Every name :func:`resolve_pattern` takes (ours, then the aliases)."""
    return [*NAMED_PATTERNS, "none", *PATTERN_ALIASES]


def resolve_pattern(pattern: str | None) -> tuple[str | None, str]:
    """``(regex or None, name)`` for a pattern name, an alias, a regex, or None.

    The name is ours ("gpt4", "cl100k", "gpt2", "o200k", "none") or "custom" for
    any other regex. A bare word that is no known name is a PatternError listing
    them; a regex that does not compile is a PatternError saying why."""
    from ..errors import PatternError

    if pattern is None:
        return None, "none"
    if not isinstance(pattern, str):
        raise TypeError(
            f"pattern must be a name ({', '.join(known_pattern_names())}), a regex string or None, "
            f"not {type(pattern).__name__}"
        )
    name = PATTERN_ALIASES.get(pattern, pattern)
    if name == "none":
        return None, "none"
    if name in NAMED_PATTERNS:
        return NAMED_PATTERNS[name], name
    for known, p in NAMED_PATTERNS.items():
        if p == pattern:
            return p, known
    if _BARE_NAME.fullmatch(pattern):
        raise PatternError(
            f"unknown pattern name {pattern!r}; known names: {', '.join(known_pattern_names())} "
            "(or pass a regular expression)"
        )
    problem = pattern_compile_problem(pattern)
    if problem is not None:
        raise PatternError(problem)
    return pattern, "custom"


def pattern_name_for(pattern: str | None) -> str:
    """The name BPEData uses for ``pattern``: "gpt4", "cl100k", "gpt2", "o200k", "none" or "custom"."""
    if pattern is None:
        return "none"
    for name, p in NAMED_PATTERNS.items():
        if pattern == p:
            return name
    return "custom"


def pattern_name_problem(pattern: str | None, name: object) -> str | None:
    """Why ``name`` does not describe ``pattern`` (None if it does).

    "none" goes with no pattern; a named pattern with exactly its text;
    "custom" with any non-empty regex (also one equal to a named pattern).
    """
    if not isinstance(name, str) or name not in PATTERN_NAMES:
        shown = repr(name) if isinstance(name, str) else type(name).__name__
        return f"unknown pattern name {shown}; expected one of {', '.join(PATTERN_NAMES)}"
    if (pattern is None) != (name == "none"):
        return 'pattern_name is "none" exactly when pattern is null'
    if name in NAMED_PATTERNS and pattern != NAMED_PATTERNS[name]:
        return (
            f"pattern_name says {name!r} but the pattern is not {name}'s pattern; "
            'use pattern_name "custom" for another regex (or restore the pattern)'
        )
    return None


def pattern_compile_problem(pattern: str | None) -> str | None:
    """Why the engine cannot split with ``pattern`` (None if it can), so a
    reader can name the file and line instead of failing later, without them."""
    if pattern is None or pattern in NAMED_PATTERNS.values():
        return None
    from .. import _core
    from ..errors import PatternError

    try:
        # the engine's own choice (a GPT-family spelling is scanned, compiling
        # nothing: 10 ms saved per load for o200k's; any other is compiled)
        _core.split(pattern, "")
    except PatternError as e:
        return str(e)
    return None
