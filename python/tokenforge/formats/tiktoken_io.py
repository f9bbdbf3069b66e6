"""tiktoken interoperability: mergeable ranks, ``.tiktoken`` files, ``tiktoken.Encoding``.

tiktoken describes a BPE vocabulary by *ranks* only (token bytes -> rank, the
rank being the id); it never stores which two tokens a token was merged from.
Its encoder does not need to know: it repeatedly merges the adjacent pair whose
concatenated bytes has the lowest rank. :func:`data_from_ranks` recovers a merge
pair for every multi-byte token by running that same procedure on the token's
own bytes with only the lower ranks available: it must end with exactly two
parts, and those are the token's parents. The Rust engine runs it
(``_core.bpe_rank_splits``), in O(n log n) per token of n bytes; the plain
loop (:func:`lowest_rank_split`, kept as the statement of the rule and for
tests) is quadratic in the token's length.

A ``.tiktoken`` file is one line per token, ``base64(token bytes) SP rank LF``,
in rank order; special tokens and the split pattern are not stored in it (see
``docs/formats.md``): the pattern is the caller's, or that of a rank file
OpenAI publishes, recognised by its content (:func:`known_rank_file`); any
other file without ``pattern=`` is refused. Ranks must fit in 32 bits and stay below
:func:`~.bpe_data.id_limit` of the number of tokens (a rank far beyond them is
refused, naming its line, instead of sizing tables by it).

Not handled: tiktoken's ``explicit_n_vocab`` and ranks that are not ids; a
known rank file with its bytes changed (CRLF line ends, re-sorted lines) is no
longer recognised.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import FormatError
from .atomic import atomic_write
from .bpe_data import MAX_ID, BPEData, id_error, id_limit, show_int
from .patterns import (
    GPT4_PATTERN,
    NAMED_PATTERNS,
    WHOLE_TEXT_PATTERN,
    pattern_compile_problem,
    pattern_name_for,
    pattern_name_problem,
)

__all__ = [
    "mergeable_ranks",
    "data_from_ranks",
    "write_tiktoken_file",
    "read_tiktoken_file",
    "to_tiktoken",
    "sniff_tiktoken",
    "known_rank_file",
    "tiktoken_ranks_pattern",
    "FROM_FILE",
]

_LINE = re.compile(
    rb"^([A-Za-z0-9+/]+={0,2}) ([0-9]+)$"
)  # (ranks of any length: too long is refused by size, never int()-ed)

#: ``where(token)``: the ``path=``/``line=`` of a FormatError about ``token`` (None: the file)
Where = Callable[[bytes | None], dict]


def mergeable_ranks(data: BPEData) -> dict[bytes, int]:
    """Token bytes -> rank (= id) of every non-special token, in id order.

    Raises FormatError if two ids stand for the same bytes (tiktoken cannot
    express that).
    """
    data.validate()
    token_bytes = data.token_bytes_list()
    ranks: dict[bytes, int] = {}
    for i in sorted(list(data.byte_ids) + [new for _, _, new in data.merges]):
        b = token_bytes[i]
        if b is None:  # validate() refuses such data: every byte and merge id has bytes
            raise FormatError(f"id {i} has no bytes")
        if b in ranks:
            raise FormatError(f"ids {ranks[b]} and {i} both stand for the bytes {b!r}; ranks need unique bytes")
        ranks[b] = i
    return ranks


def lowest_rank_split(token: bytes, ranks: dict[bytes, int], limit: int) -> list[bytes]:
    """Rank-based BPE of ``token`` using only ranks below ``limit``; the final parts.

    Each step merges the adjacent pair whose concatenation has the lowest rank
    (leftmost on a tie), exactly as tiktoken encodes. The plain statement of
    the rule, quadratic in ``len(token)``: readers use the engine's
    ``_core.bpe_rank_splits(..., "below_own_rank")``, and tests compare the two.
    """
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best = None
        for k in range(len(parts) - 1):
            r = ranks.get(parts[k] + parts[k + 1])
            if r is not None and r < limit and (best is None or r < best[0]):
                best = (r, k)
        if best is None:
            break
        k = best[1]
        parts[k : k + 2] = [parts[k] + parts[k + 1]]
    return parts


def _shown(token: bytes) -> str:
    """``repr(token)``, shortened for a message when the token is long."""
    return repr(token) if len(token) <= 60 else f"{token[:40]!r}... ({len(token)} bytes)"


def _check_ranks(ranks: dict[bytes, int], entries: int, where: Where) -> None:
    """Types, distinct ranks, and ranks below ``id_limit(entries)``."""
    limit = id_limit(entries)
    seen: dict[int, bytes] = {}
    for token, rank in ranks.items():
        if not isinstance(token, bytes) or not token:
            raise FormatError(f"token {token!r} must be non-empty bytes", **where(token))
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            shown = show_int(rank) if isinstance(rank, int) else repr(rank)[:40]
            raise FormatError(f"token {_shown(token)} has invalid rank {shown}", **where(token))
        if rank >= limit:
            raise FormatError(id_error(f"token {_shown(token)}", rank, entries, "rank"), **where(token))
        if rank in seen:
            raise FormatError(f"rank {rank} is given to both {seen[rank]!r} and {token!r}", **where(token))
        seen[rank] = token


def _recover(
    ranks: dict[bytes, int], pattern: str | None, special_tokens: Mapping[str, int] | None, where: Where
) -> BPEData:
    """data_from_ranks with a hook ``where(token) -> dict(path=..., line=...)`` for errors."""
    special_tokens = dict(special_tokens or {})
    _check_ranks(ranks, len(ranks) + len(special_tokens), where)
    byte_ids = []
    for b in range(256):
        if bytes([b]) not in ranks:
            raise FormatError(f"byte 0x{b:02x} has no rank; a byte-level vocabulary needs all 256 bytes", **where(None))
        byte_ids.append(ranks[bytes([b])])
    from .. import _core

    by_rank = sorted(ranks.items(), key=lambda tr: tr[1])
    longer = [k for k, (token, _) in enumerate(by_rank) if len(token) > 1]
    merges = []
    for k, (count, parts) in zip(longer, _core.bpe_rank_splits(by_rank, "below_own_rank", longer)):
        token, rank = by_rank[k]
        if count != 2:
            token_of = {r: t for t, r in by_rank}
            shown = " + ".join(_shown(token_of[p]) for p in parts)
            more = f" + ... ({count} parts)" if count > len(parts) else ""
            raise FormatError(
                f"token {_shown(token)} (rank {rank}) cannot be built from two lower-ranked tokens: "
                f"merging by rank stops at {shown}{more}",
                **where(token),
            )
        merges.append((parts[0], parts[1], rank))
    data = BPEData(byte_ids, merges, special_tokens, pattern, pattern_name_for(pattern), {})
    data.validate(where(None).get("path"))
    return data


def data_from_ranks(
    ranks: dict[bytes, int], pattern: str | None = GPT4_PATTERN, special_tokens: Mapping[str, int] | None = None
) -> BPEData:
    """Build BPEData (merge pairs recovered) from tiktoken-style mergeable ranks.

    Every single byte must have a rank; every longer token must be reachable by
    rank-based merging of its own bytes restricted to lower ranks, ending with
    exactly two parts (its parents). Otherwise FormatError names the token.
    """
    return _recover(ranks, pattern, special_tokens, lambda token: {})


def tiktoken_ranks_pattern(ranks: dict, pattern: str | None | _FromFile) -> str | None:
    """The pattern for a ``{bytes: rank}`` dict: the caller's, or that of the known
    rank file these ranks would be written as (:func:`read_tiktoken_file`'s rule)."""
    if not isinstance(pattern, _FromFile):
        return pattern
    try:
        text = "".join(
            f"{base64.b64encode(t).decode('ascii')} {r}\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1])
        )
    except (TypeError, ValueError):  # not bytes -> int: not a known file (data_from_ranks then says what is wrong)
        text = ""
    return _pattern_of_file(text.encode("ascii"), pattern, "the mergeable ranks")


def tiktoken_file_text(data: BPEData) -> str:
    """The exact text :func:`write_tiktoken_file` writes."""
    return "".join(f"{base64.b64encode(t).decode('ascii')} {r}\n" for t, r in mergeable_ranks(data).items())


def write_tiktoken_file(path: str | os.PathLike[str], data: BPEData) -> None:
    """Write the mergeable ranks of ``data`` as a ``.tiktoken`` file (atomically).

    Special tokens and the pattern are not part of this format; keep them
    alongside (or use the tokenforge-bpe JSON format, which stores everything).
    """
    atomic_write(path, tiktoken_file_text(data))


def _parse_tiktoken_lines(path: Path, raw: bytes) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """(ranks, line number of each token); FormatError names the bad line."""
    if not raw:
        raise FormatError("empty file; expected lines 'base64(token) rank'", path=path, line=1)
    lines = raw.split(b"\n")
    if lines[-1] != b"":
        raise FormatError("the last line does not end with a newline (truncated file?)", path=path, line=len(lines))
    ranks: dict[bytes, int] = {}
    line_of: dict[bytes, int] = {}
    for n, line in enumerate(lines[:-1], start=1):
        line = line[:-1] if line.endswith(b"\r") else line
        m = _LINE.match(line)
        if m is None:
            shown = line[:60].decode("ascii", "backslashreplace")
            raise FormatError(f"expected 'base64(token) rank', found {shown!r}", path=path, line=n)
        try:
            token = base64.b64decode(m.group(1), validate=True)
        except (binascii.Error, ValueError) as e:
            raise FormatError(f"invalid base64 token: {e}", path=path, line=n) from None
        if token in ranks:
            raise FormatError(f"token {token!r} already appears on line {line_of[token]}", path=path, line=n)
        digits = m.group(2)
        if len(digits) > 10 or int(digits) > MAX_ID:
            shown = digits[:20].decode("ascii") + ("..." if len(digits) > 20 else "")
            raise FormatError(f"rank {shown} does not fit in 32 bits (ranks are 0..{MAX_ID})", path=path, line=n)
        ranks[token] = int(digits)
        line_of[token] = n
    return ranks, line_of


class _FromFile:
    """The pattern left out: known rank files give theirs, any other is refused."""

    def __repr__(self) -> str:
        return "<the known file's pattern>"


#: ``pattern=`` left out: the pattern of a known rank file (:data:`KNOWN_RANK_FILES`), or a FormatError
FROM_FILE = _FromFile()

#: sha256 of the rank files OpenAI publishes (the hashes tiktoken checks its downloads against)
#: -> (encoding name, our pattern name). r50k_base holds GPT-2's ranks; p50k_base adds 24
#: whitespace tokens to them, with GPT-2's pattern.
KNOWN_RANK_FILES: dict[str, tuple[str, str]] = {
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": ("cl100k_base", "cl100k"),
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": ("o200k_base", "o200k"),
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930": ("r50k_base", "gpt2"),
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069": ("p50k_base", "gpt2"),
}


def known_rank_file(raw: bytes) -> tuple[str, str] | None:
    """``(encoding name, pattern name)`` when ``raw`` is one of OpenAI's rank files
    byte for byte (our writer writes them back identically), else None. Recognised
    by content (its sha256, one linear pass), never by the file's name."""
    return KNOWN_RANK_FILES.get(hashlib.sha256(raw).hexdigest())


def _pattern_of_file(raw: bytes, pattern: str | None | _FromFile, what: str | os.PathLike[str]) -> str | None:
    """The pattern to read ``raw`` with: the caller's, or the known file's."""
    if not isinstance(pattern, _FromFile):
        return pattern
    known = known_rank_file(raw)
    if known is None:
        raise FormatError(
            "tiktoken ranks (a .tiktoken file) do not store their split pattern, and these are not a rank file tokenforge knows "
            f"({', '.join(name for name, _ in KNOWN_RANK_FILES.values())}); pass pattern=, e.g. "
            "BPETokenizer.from_tiktoken(path, pattern='cl100k') (a name or a regex)",
            path=what,
        )
    return NAMED_PATTERNS[known[1]]


def read_tiktoken_file(
    path: str | os.PathLike[str],
    pattern: str | None | _FromFile = FROM_FILE,
    special_tokens: Mapping[str, int] | None = None,
) -> BPEData:
    """Read a ``.tiktoken`` file into BPEData (merge pairs recovered).

    The file stores neither the split pattern nor special tokens. ``pattern``
    (a regex, or None for no pre-tokenization) is the caller's; left out, the
    file must be one of OpenAI's (cl100k_base, o200k_base, r50k_base, p50k_base:
    :func:`known_rank_file`), whose pattern is then used, or it is a FormatError
    saying to pass ``pattern=``: a missing fact is never a default.
    """
    path = Path(path)
    raw = path.read_bytes()
    if isinstance(pattern, _FromFile) and known_rank_file(raw) is None:
        # a damaged file says what is wrong where first (only on the way to refusing)
        ranks, line_of = _parse_tiktoken_lines(path, raw)
        _recover(
            ranks,
            None,
            special_tokens,
            lambda token: {"path": path, "line": None if token is None else line_of.get(token)},
        )
    pattern = _pattern_of_file(raw, pattern, path)
    data = _read_fast(raw, pattern, special_tokens)
    if data is not None:
        return data
    ranks, line_of = _parse_tiktoken_lines(path, raw)
    return _recover(
        ranks,
        pattern,
        special_tokens,
        lambda token: {"path": path, "line": None if token is None else line_of.get(token)},
    )


def _read_fast(raw: bytes, pattern: str | None, special_tokens: Mapping[str, int] | None) -> BPEData | None:
    """The engine's reader (``_core.bpe_model_from_tiktoken``): one pass over
    the bytes in Rust, merges recovered there, no Python object per token.
    None when it declines (a file not in the canonical shape, or one that
    breaks a rule, or specials the engine does not take as given): the line
    by line reader then says what is wrong where, exactly as before."""
    from .. import _core

    specials = dict(special_tokens or {})
    for text, i in specials.items():
        if not isinstance(text, str) or not text or type(i) is not int or not 0 <= i <= MAX_ID:
            return None
    name = pattern_name_for(pattern)
    if pattern_name_problem(pattern, name) is not None or pattern_compile_problem(pattern) is not None:
        return None  # (the Python reader does not compile the pattern: a bad one fails when the model is built)
    model = _core.bpe_model_from_tiktoken(raw, list(specials.items()), pattern)
    if model is None:
        return None
    return BPEData.from_engine(model, specials, pattern, name)


def sniff_tiktoken(path: str | os.PathLike[str], head: bytes) -> bool:
    """True if the first line of ``head`` looks like ``base64(token) rank``."""
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    m = _LINE.match(first)
    if not m:
        return False
    try:
        base64.b64decode(m.group(1), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def to_tiktoken(data: BPEData, name: str = "tokenforge") -> Any:
    """A ``tiktoken.Encoding`` that encodes exactly as ``data`` does.

    tiktoken requires a split pattern; when ``data.pattern`` is None (no
    pre-tokenization) the pattern ``(?s).+`` is used, whose one match is the
    whole text. A custom pattern is widened to keep the text between its
    matches (see :func:`_tiktoken_pattern`). tiktoken's merge loop is quadratic in the length of a piece, so
    that mode is slow on long texts. tiktoken is imported here, lazily.
    """
    import tiktoken

    enc = tiktoken.Encoding(
        name=name,
        pat_str=_tiktoken_pattern(data.pattern),
        mergeable_ranks=mergeable_ranks(data),
        special_tokens=dict(data.special_tokens),
    )
    return enc


#: Text an exported encoding must encode as we do (gaps of every kind between a
#: custom pattern's matches: punctuation, runs of spaces, digits, non-ASCII).
GAP_PROBES = (
    "hello, world!",
    "  ,,x  y12 \n\t z",
    "a1b2 c3;; 😀 naïve!?",
    "".join(chr(c) for c in range(32, 127)),
)


def _tiktoken_pattern(pattern: str | None) -> str:
    """The pattern tiktoken gets. tiktoken drops the text between matches, so a
    custom pattern (which may not cover all text) becomes ``P`` or else a run of
    characters at which ``P`` does not match: the gaps our splitter keeps as
    pieces of their own. The named patterns cover all text and go unchanged."""
    if pattern is None:
        return WHOLE_TEXT_PATTERN
    if pattern in NAMED_PATTERNS.values():
        return pattern
    return f"(?:{pattern})|(?:(?!(?:{pattern}))(?s:.))+"
