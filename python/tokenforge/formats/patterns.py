"""The pre-tokenization patterns the BPE file formats need to name.

Only the formats use these constants (to recognise a pattern, or to supply the
one a format implies); the tokenizer itself takes whatever pattern it is given.
"""

from __future__ import annotations

__all__ = ["GPT4_PATTERN", "GPT2_PATTERN", "WHOLE_TEXT_PATTERN", "pattern_name_for"]

#: nanochat's variant of the GPT-4 split pattern (numbers in groups of 1-2, possessive quantifiers).
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)

#: GPT-2's split pattern (also what Hugging Face's ByteLevel pre-tokenizer uses with use_regex=true).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

#: A pattern whose single match is the whole text: "no pre-tokenization" for tools that need a pattern.
WHOLE_TEXT_PATTERN = r"(?s).+"


def pattern_name_for(pattern: str | None) -> str:
    """The name BPEData uses for ``pattern``: "gpt4", "gpt2", "none" or "custom"."""
    if pattern is None:
        return "none"
    if pattern == GPT4_PATTERN:
        return "gpt4"
    if pattern == GPT2_PATTERN:
        return "gpt2"
    return "custom"
