"""The growing vocabulary's ``tokenizer.json`` (seed 002's layout), read strictly.

The seed's file is one JSON object::

    {
      "vocab_size": 10000000,              declared maximum number of ids
      "next_merge_id": 126711,             = 266 + number of merges
      "total_tokens_processed": 0,
      "sources_contributed": {"fineweb-edu": 100000, ...},
      "merges": {"116_104": 266, ...},     "left_right": new id
      "merge_to_tokens": {"266": [116, 104], ...}     (optional; the seed's docs only)
    }

Ids: PAD 0, BOS 1, EOS 2, UNK 3, 4-9 reserved, byte b at b + 10, merges from
266. :func:`write_growing_json` writes every key above (``merge_to_tokens``
too) plus tokenforge's own ``format``/``version`` and how text was split and
normalised (``pattern``, ``normalization``), so the file says how it was made;
the seed's reader ignores keys it does not know.

:func:`parse_growing_json` accepts the seed's files (with or without
``merge_to_tokens``, without tokenforge's keys) and ours. It refuses, with a
:class:`FormatError` naming the file, the line and the offending key:
merge ids that are not contiguous from 266 (gaps, ids below 266, duplicate
ids, duplicate keys), merges whose parts are unknown ids, special/reserved
ids or ids not created before them, a ``next_merge_id`` or
``merge_to_tokens`` that disagrees with ``merges``, and a ``vocab_size``
below the ids in use. A ``version`` newer than this reader raises
:class:`VersionError`. Our files carry a checksum of their content from
version 2 on (``"checksum"``, see :mod:`tokenforge.formats.checksum`); content
that does not match it raises :class:`ChecksumError`. Seed files and our
version 1 files have none and are read as before.

Not handled: a checksum catches accidental changes, not deliberate forgery;
the seed's files are validated structurally only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, TypeGuard

from ..errors import FormatError, VersionError
from . import checksum
from ._jsonutil import JsonDoc, parse_json
from .atomic import atomic_write
from .bpe_data import check_token_bytes
from .patterns import (  # CL100K: the seed's split pattern (numbers of 1-3 digits)
    CL100K_PATTERN,
    pattern_compile_problem,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BYTE_OFFSET",
    "MERGE_OFFSET",
    "DEFAULT_VOCAB_SIZE",
    "GrowingData",
    "parse_growing_json",
    "read_growing_json",
    "growing_json_from_bytes",
    "growing_json_text",
    "write_growing_json",
    "sniff_growing_json",
]

FORMAT_NAME = "tokenforge-growing"
FORMAT_VERSION = 2  # 2: a checksum of the content (formats/checksum.py)
BYTE_OFFSET = 10
MERGE_OFFSET = 266
DEFAULT_VOCAB_SIZE = 10_000_000
#: the engine stores ids as u32
MAX_ID = 2**32 - 1
NORMALIZATIONS = ("NFC", None)


_KNOWN_KEYS = {
    "format",
    "version",
    "vocab_size",
    "next_merge_id",
    "total_tokens_processed",
    "sources_contributed",
    "pattern",
    "normalization",
    "merges",
    "merge_to_tokens",
    checksum.KEY,
}
_MERGE_KEY = re.compile(r"(0|[1-9][0-9]{0,17})_(0|[1-9][0-9]{0,17})\Z")  # (ids of at most 18 digits)
_ID_KEY = re.compile(r"(0|[1-9][0-9]{0,17})\Z")


@dataclass
class GrowingData:
    """An offset-10 BPE vocabulary in memory.

    pairs[k] = (left, right) is the merge with id ``266 + k``; ``vocab_size`` is
    the declared maximum number of ids (the seed's 10,000,000).
    """

    pairs: list[tuple[int, int]] = field(default_factory=list)
    vocab_size: int = DEFAULT_VOCAB_SIZE
    sources_contributed: dict[str, int] = field(default_factory=dict)
    total_tokens_processed: int = 0
    pattern: str | None = CL100K_PATTERN
    normalization: str | None = "NFC"

    @property
    def next_merge_id(self) -> int:
        return MERGE_OFFSET + len(self.pairs)


class _Obj(dict):
    """A JSON object that remembers keys it saw more than once."""

    __slots__ = ("dups",)

    def __init__(self, pairs: Iterable[tuple[str, object]]) -> None:
        super().__init__()
        self.dups = []
        for k, v in pairs:
            if k in self:
                self.dups.append(k)
            self[k] = v


def _dups(obj: dict) -> list:
    """The keys an object of a parsed document (an :class:`_Obj`) saw more than once."""
    return getattr(obj, "dups", [])


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _id_str(i: int) -> str:
    if i < 4:
        return f"{i} (a special token)"
    if i < BYTE_OFFSET:
        return f"{i} (a reserved id)"
    return str(i)


def parse_growing_json(text: str, origin: str | os.PathLike[str]) -> GrowingData:
    """Parse and validate a document; ``origin`` (a path or URL) names it in errors."""
    if text.startswith("\ufeff"):
        text = text[1:]
    value = parse_json(text, origin, "a growing-vocabulary tokenizer.json", object_pairs_hook=_Obj)
    if not isinstance(value, dict):
        raise FormatError(
            f"top level is a JSON {type(value).__name__}, expected an object (a growing-vocabulary tokenizer.json)",
            path=origin,
            line=1,
        )
    doc = JsonDoc(origin, text, value)
    v = value
    if _dups(v):
        raise doc.error([_dups(v)[0]], "key appears more than once")

    ours = "format" in v
    if ours:
        if v["format"] != FORMAT_NAME:
            raise doc.error(["format"], f'expected "format": "{FORMAT_NAME}", found {json.dumps(v["format"])}')
        version = v.get("version")
        if not _is_int(version) or version < 1:
            raise doc.error(["version"], f"expected an integer format version >= 1, found {json.dumps(version)}")
        if version > FORMAT_VERSION:
            raise doc.error(
                ["version"],
                f"format version {version} is newer than this tokenforge reads ({FORMAT_VERSION}); upgrade tokenforge",
                cls=VersionError,
            )
        for key in v:
            if key not in _KNOWN_KEYS:
                raise doc.error([key], f"unknown key {key!r} in a {FORMAT_NAME} version {version} file")
    elif "version" in v or checksum.KEY in v:
        key = "version" if "version" in v else checksum.KEY
        raise doc.error([key], f'"{key}" without "format": not a growing-vocabulary tokenizer.json (altered?)')
    if "model" in v and isinstance(v["model"], dict):
        raise doc.error(["model"], "this is a Hugging Face tokenizer.json, not a growing-vocabulary one")
    if "merges" not in v and "merge_to_tokens" not in v and "next_merge_id" not in v:
        raise doc.error(["merges"], "required key is missing (neither merges nor next_merge_id nor merge_to_tokens)")

    # ---- merges ---------------------------------------------------------------
    pairs: list[tuple[int, int]]
    if "merges" in v:
        pairs = _read_merges(doc, v["merges"])
    elif "merge_to_tokens" in v:
        pairs = _read_merge_to_tokens(doc, v["merge_to_tokens"], None)
    else:  # only next_merge_id: no merges yet (checked against it below)
        pairs = []
    if "merges" in v and "merge_to_tokens" in v:
        _read_merge_to_tokens(doc, v["merge_to_tokens"], pairs)

    n_ids = MERGE_OFFSET + len(pairs)
    if "next_merge_id" in v:
        nm = v["next_merge_id"]
        if not _is_int(nm):
            raise doc.error(["next_merge_id"], f"expected an integer, found {json.dumps(nm)}")
        if nm != n_ids:
            raise doc.error(
                ["next_merge_id"],
                f"is {nm} but the file holds {len(pairs)} merges (ids 266..{n_ids - 1}), so it must be {n_ids}",
            )

    vocab_size = v.get("vocab_size", DEFAULT_VOCAB_SIZE)
    if not _is_int(vocab_size) or vocab_size > MAX_ID + 1:
        raise doc.error(["vocab_size"], f"expected an integer 266..{MAX_ID + 1}, found {json.dumps(vocab_size)}")
    if vocab_size < n_ids:
        raise doc.error(["vocab_size"], f"declared maximum {vocab_size} is below the {n_ids} ids already in use")

    total = v.get("total_tokens_processed", 0)
    if not _is_int(total) or total < 0:
        raise doc.error(["total_tokens_processed"], f"expected a non-negative integer, found {json.dumps(total)}")

    sources = v.get("sources_contributed", {})
    if not isinstance(sources, dict):
        raise doc.error(
            ["sources_contributed"], f"expected an object {{source: merges}}, found {json.dumps(sources)[:60]}"
        )
    if getattr(sources, "dups", None):
        raise doc.error(["sources_contributed", _dups(sources)[0]], "source appears more than once")
    for name, count in sources.items():
        if not _is_int(count) or count < 0:
            raise doc.error(
                ["sources_contributed", name], f"expected a non-negative merge count, found {json.dumps(count)}"
            )

    pattern = v.get("pattern", CL100K_PATTERN)
    if pattern is not None and (not isinstance(pattern, str) or not pattern):
        raise doc.error(["pattern"], f"expected a regex string or null, found {json.dumps(pattern)[:60]}")
    problem = pattern_compile_problem(pattern)
    if problem is not None:
        raise doc.error(["pattern"], problem)
    norm = v.get("normalization", "NFC")
    if norm not in NORMALIZATIONS:
        raise doc.error(["normalization"], f'expected "NFC" or null, found {json.dumps(norm)[:60]}')

    if ours:
        checksum.check_json(doc, FORMAT_NAME, v["version"])  # after the checks that say what is wrong where
    # the tokens' total bytes, from the merge table alone, before any model is built (bpe_data)
    merges = ((a, b, MERGE_OFFSET + k) for k, (a, b) in enumerate(pairs))
    check_token_bytes(range(BYTE_OFFSET, BYTE_OFFSET + 256), merges, len(text.encode("utf-8", "surrogatepass")), origin)
    return GrowingData(
        pairs=pairs,
        vocab_size=vocab_size,
        sources_contributed={str(k): int(c) for k, c in sources.items()},
        total_tokens_processed=total,
        pattern=pattern,
        normalization=norm,
    )


def _read_merges(doc: JsonDoc, merges: object) -> list[tuple[int, int]]:
    if not isinstance(merges, dict):
        raise doc.error(["merges"], f'expected an object {{"left_right": id}}, found a JSON {type(merges).__name__}')
    if _dups(merges):
        raise doc.error(["merges", _dups(merges)[0]], "merge key appears more than once")
    entries = []
    for key, mid in merges.items():
        m = _MERGE_KEY.match(key)
        if m is None:
            raise doc.error(
                ["merges", key], 'merge key must be "left_right" with two decimal token ids, e.g. "116_104"'
            )
        if not _is_int(mid):
            raise doc.error(["merges", key], f"merge id must be an integer, found {json.dumps(mid)}")
        entries.append((key, int(m.group(1)), int(m.group(2)), mid))
    return _check_merges(doc, "merges", entries)


def _check_merges(doc: JsonDoc, section: str, entries: Iterable[tuple[str, int, int, int]]) -> list[tuple[int, int]]:
    """``entries``: (json key, left, right, id). Ids contiguous from 266, parts defined before use."""
    by_id: dict[int, tuple[str, int, int]] = {}
    for key, a, b, mid in entries:
        if mid < MERGE_OFFSET:
            raise doc.error(
                [section, key], f"merge id {mid} is below 266; ids 0-265 are specials, reserved ids and bytes"
            )
        if mid > MAX_ID:
            raise doc.error([section, key], f"merge id {mid} is above the largest id {MAX_ID}")
        if mid in by_id:
            raise doc.error([section, key], f"merge id {mid} is also given to {by_id[mid][0]!r}")
        by_id[mid] = (key, a, b)
    n = len(by_id)
    pairs: list[tuple[int, int]] = []
    for k in range(n):
        mid = MERGE_OFFSET + k
        entry = by_id.get(mid)
        if entry is None:
            after = min(i for i in by_id if i > mid)
            raise doc.error(
                [section, by_id[after][0]],
                f"merge ids must be contiguous from 266, but {mid} is missing before {after} (a gap)",
            )
        key, a, b = entry
        for part in (a, b):
            if part < BYTE_OFFSET:
                raise doc.error([section, key], f"part {_id_str(part)} is not a byte or a merge")
            if part >= mid:
                what = "a later merge" if part < MERGE_OFFSET + n else "an unknown id"
                raise doc.error(
                    [section, key], f"part {part} is {what}; a merge's parts must exist before it (id {mid})"
                )
        pairs.append((a, b))
    return pairs


def _read_merge_to_tokens(doc: JsonDoc, m2t: object, check: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """Read ``merge_to_tokens``; with ``check``, require it to agree with the merges."""
    if not isinstance(m2t, dict):
        raise doc.error(
            ["merge_to_tokens"], f'expected an object {{"id": [left, right]}}, found a JSON {type(m2t).__name__}'
        )
    if _dups(m2t):
        raise doc.error(["merge_to_tokens", _dups(m2t)[0]], "id appears more than once")
    entries = []
    for key, parts in m2t.items():
        if _ID_KEY.match(key) is None:
            raise doc.error(["merge_to_tokens", key], "key must be a decimal merge id")
        if not (isinstance(parts, list) and len(parts) == 2 and all(_is_int(x) and x >= 0 for x in parts)):
            raise doc.error(
                ["merge_to_tokens", key], f"expected [left, right] token ids, found {json.dumps(parts)[:60]}"
            )
        entries.append((key, parts[0], parts[1], int(key)))
    if check is None:  # no "merges": they come from here, with the same checks
        pairs = _check_merges(doc, "merge_to_tokens", entries)
        seen: dict[tuple[int, int], int] = {}
        for k, p in enumerate(pairs):
            if p in seen:
                raise doc.error(
                    ["merge_to_tokens", str(MERGE_OFFSET + k)], f"pair {p[0]}_{p[1]} is already merge {seen[p]}"
                )
            seen[p] = MERGE_OFFSET + k
        return pairs
    by_id = {mid: (key, a, b) for key, a, b, mid in entries}
    for k, (a, b) in enumerate(check):
        mid = MERGE_OFFSET + k
        got = by_id.pop(mid, None)
        if got is None:
            raise doc.error(["merge_to_tokens"], f"merge {mid} ({a}_{b}) is missing here")
        if (got[1], got[2]) != (a, b):
            raise doc.error(["merge_to_tokens", got[0]], f"says [{got[1]}, {got[2]}] but merges says {a}_{b} -> {mid}")
    if by_id:
        mid = min(by_id)
        raise doc.error(["merge_to_tokens", by_id[mid][0]], f"id {mid} is not in merges")
    return check


def read_growing_json(path: str | os.PathLike[str]) -> GrowingData:
    """Read a tokenizer.json file (see the module docstring)."""
    path = Path(path)
    return growing_json_from_bytes(path.read_bytes(), path)


def growing_json_from_bytes(raw: bytes, origin: str | os.PathLike[str]) -> GrowingData:
    """:func:`read_growing_json` of a file's bytes in memory; ``origin`` names them in errors."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(
            f"not UTF-8 text ({e.reason}); expected a tokenizer.json", path=origin, offset=e.start
        ) from None
    return parse_growing_json(text, origin)


def growing_json_text(data: GrowingData) -> str:
    """The document :func:`write_growing_json` writes: one merge per line, keys in a fixed order."""

    def d(x: object) -> str:
        return json.dumps(x, ensure_ascii=True, allow_nan=False)

    n = data.next_merge_id
    out = ["{\n"]
    head = [
        ("format", FORMAT_NAME),
        ("version", FORMAT_VERSION),
        ("vocab_size", int(data.vocab_size)),
        ("next_merge_id", n),
        ("total_tokens_processed", int(data.total_tokens_processed)),
        ("pattern", data.pattern),
        ("normalization", data.normalization),
    ]
    for k, val in head:
        out.append(f"  {d(k)}: {d(val)},\n")
    if data.sources_contributed:
        items = ",\n".join(f"    {d(k)}: {int(c)}" for k, c in data.sources_contributed.items())
        out.append(f'  "sources_contributed": {{\n{items}\n  }},\n')
    else:
        out.append('  "sources_contributed": {},\n')
    if data.pairs:
        out.append('  "merges": {\n')
        out.append(",\n".join(f'    "{a}_{b}": {MERGE_OFFSET + k}' for k, (a, b) in enumerate(data.pairs)))
        out.append('\n  },\n  "merge_to_tokens": {\n')
        out.append(",\n".join(f'    "{MERGE_OFFSET + k}": [{a}, {b}]' for k, (a, b) in enumerate(data.pairs)))
        out.append("\n  }\n}\n")
    else:
        out.append('  "merges": {},\n  "merge_to_tokens": {}\n}\n')
    return checksum.seal_json_text("".join(out))


def write_growing_json(path: str | os.PathLike[str], data: GrowingData) -> None:
    """Write ``data`` atomically (temp file + rename): a crash never leaves half a file."""
    atomic_write(path, growing_json_text(data))


_SNIFF_OURS = re.compile(rb'"format"\s*:\s*"tokenforge-growing"')
_SNIFF_SEED = re.compile(
    rb'"next_merge_id"\s*:|"merge_to_tokens"\s*:|"merges"\s*:\s*\{\s*("(0|[1-9][0-9]*)_(0|[1-9][0-9]*)"|\})'
)
_SNIFF_HF = re.compile(rb'"model"\s*:\s*\{')


def sniff_growing_json(path: str | os.PathLike[str], head: bytes) -> bool:
    """True if ``head`` starts a growing-vocabulary tokenizer.json (seed 002's or ours).

    Told apart from Hugging Face's tokenizer.json (a ``"model": {...}`` object,
    ``"merges"`` a list) and from tokenforge-bpe JSON (``"format": "tokenforge-bpe"``).
    """
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.lstrip(b" \t\r\n").startswith(b"{"):
        return False
    if _SNIFF_OURS.search(head):
        return True
    if b'"tokenforge-bpe"' in head or _SNIFF_HF.search(head):
        return False
    return bool(_SNIFF_SEED.search(head))
