"""tiktoken interoperability: mergeable ranks, ``.tiktoken`` files, ``tiktoken.Encoding``.

tiktoken describes a BPE vocabulary by *ranks* only (token bytes -> rank, the
rank being the id); it never stores which two tokens a token was merged from.
Its encoder does not need to know: it repeatedly merges the adjacent pair whose
concatenated bytes has the lowest rank. :func:`data_from_ranks` recovers a merge
pair for every multi-byte token by running that same procedure on the token's
own bytes with only the lower ranks available: it must end with exactly two
parts, and those are the token's parents.

A ``.tiktoken`` file is one line per token, ``base64(token bytes) SP rank LF``,
in rank order; special tokens and the split pattern are not stored in it (see
``docs/formats.md``).
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from ..errors import FormatError
from .atomic import atomic_write
from .bpe_data import BPEData
from .patterns import GPT4_PATTERN, WHOLE_TEXT_PATTERN, pattern_name_for

__all__ = [
    "mergeable_ranks",
    "data_from_ranks",
    "write_tiktoken_file",
    "read_tiktoken_file",
    "to_tiktoken",
    "sniff_tiktoken",
]

_LINE = re.compile(rb"^([A-Za-z0-9+/]+={0,2}) ([0-9]{1,19})$")  # (a longer rank is no 32-bit id)


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
        if b in ranks:
            raise FormatError(f"ids {ranks[b]} and {i} both stand for the bytes {b!r}; ranks need unique bytes")
        ranks[b] = i
    return ranks


def _lowest_rank_split(token: bytes, ranks: dict[bytes, int], limit: int) -> list[bytes]:
    """Rank-based BPE of ``token`` using only ranks below ``limit``; the final parts.

    Each step merges the adjacent pair whose concatenation has the lowest rank
    (leftmost on a tie), exactly as tiktoken encodes.
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


def _check_ranks(ranks: dict[bytes, int], where) -> None:
    seen: dict[int, bytes] = {}
    for token, rank in ranks.items():
        if not isinstance(token, bytes) or not token:
            raise FormatError(f"token {token!r} must be non-empty bytes", **where(token))
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise FormatError(f"token {token!r} has invalid rank {rank!r}", **where(token))
        if rank in seen:
            raise FormatError(f"rank {rank} is given to both {seen[rank]!r} and {token!r}", **where(token))
        seen[rank] = token


def _recover(ranks: dict[bytes, int], pattern, special_tokens, where) -> BPEData:
    """data_from_ranks with a hook ``where(token) -> dict(path=..., line=...)`` for errors."""
    _check_ranks(ranks, where)
    byte_ids = []
    for b in range(256):
        if bytes([b]) not in ranks:
            raise FormatError(f"byte 0x{b:02x} has no rank; a byte-level vocabulary needs all 256 bytes", **where(None))
        byte_ids.append(ranks[bytes([b])])
    merges = []
    for token, rank in sorted(((t, r) for t, r in ranks.items() if len(t) > 1), key=lambda tr: tr[1]):
        parts = _lowest_rank_split(token, ranks, rank)
        if len(parts) != 2:
            shown = " + ".join(repr(p) for p in parts)
            raise FormatError(
                f"token {token!r} (rank {rank}) cannot be built from two lower-ranked tokens: "
                f"merging by rank stops at {shown}",
                **where(token),
            )
        merges.append((ranks[parts[0]], ranks[parts[1]], rank))
    data = BPEData(byte_ids, merges, dict(special_tokens or {}), pattern, pattern_name_for(pattern), {})
    data.validate(where(None).get("path"))
    return data


def data_from_ranks(ranks: dict[bytes, int], pattern: str | None = GPT4_PATTERN, special_tokens=None) -> BPEData:
    """Build BPEData (merge pairs recovered) from tiktoken-style mergeable ranks.

    Every single byte must have a rank; every longer token must be reachable by
    rank-based merging of its own bytes restricted to lower ranks, ending with
    exactly two parts (its parents). Otherwise FormatError names the token.
    """
    return _recover(ranks, pattern, special_tokens, lambda token: {})


def tiktoken_file_text(data: BPEData) -> str:
    """The exact text :func:`write_tiktoken_file` writes."""
    return "".join(f"{base64.b64encode(t).decode('ascii')} {r}\n" for t, r in mergeable_ranks(data).items())


def write_tiktoken_file(path, data: BPEData) -> None:
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
        raise FormatError(
            "the last line does not end with a newline (truncated file?)", path=path, line=len(lines)
        )
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
        ranks[token] = int(m.group(2))
        line_of[token] = n
    return ranks, line_of


def read_tiktoken_file(path, pattern: str | None = GPT4_PATTERN, special_tokens=None) -> BPEData:
    """Read a ``.tiktoken`` file into BPEData (merge pairs recovered).

    The file stores neither the split pattern nor special tokens: pass them.
    The default pattern is tokenforge's default (nanochat's GPT-4 variant); real
    tiktoken encodings (cl100k_base, o200k_base, ...) each have their own.
    """
    path = Path(path)
    ranks, line_of = _parse_tiktoken_lines(path, path.read_bytes())
    return _recover(ranks, pattern, special_tokens, lambda token: {"path": path, "line": line_of.get(token)})


def sniff_tiktoken(path, head: bytes) -> bool:
    """True if the first line of ``head`` looks like ``base64(token) rank``."""
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if not _LINE.match(first):
        return False
    try:
        base64.b64decode(_LINE.match(first).group(1), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def to_tiktoken(data: BPEData, name: str = "tokenforge"):
    """A ``tiktoken.Encoding`` that encodes exactly as ``data`` does.

    tiktoken requires a split pattern; when ``data.pattern`` is None (no
    pre-tokenization) the pattern ``(?s).+`` is used, whose one match is the
    whole text. tiktoken's merge loop is quadratic in the length of a piece, so
    that mode is slow on long texts. tiktoken is imported here, lazily.
    """
    import tiktoken

    return tiktoken.Encoding(
        name=name,
        pat_str=data.pattern if data.pattern is not None else WHOLE_TEXT_PATTERN,
        mergeable_ranks=mergeable_ranks(data),
        special_tokens=dict(data.special_tokens),
    )
