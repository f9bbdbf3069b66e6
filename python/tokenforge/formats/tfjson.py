"""tokenforge's own BPE file: one self-describing JSON document (format versions 1 and 2).

The exact layout is specified in ``docs/formats.md`` ("tokenforge-bpe JSON").
In short::

    {
      "format": "tokenforge-bpe",
      "version": 2,
      "pattern_name": "gpt4",
      "pattern": "...",             (null: no pre-tokenization)
      "byte_ids": [256 ints],       (the id of byte 0, 1, ..., 255)
      "first_merge_id": 256,        (or "merge_ids": [...] when not contiguous)
      "merges": [[left, right], ...],
      "special_tokens": {"<|bos|>": 65536, ...},
      "training": {...},
      "split_specials": true,       (version 2 only, optional; see below)
      "checksum": "sha256:..."      (version 2 on; see formats/checksum.py)
    }

Version 2 adds a checksum of the content (always written) and one optional
key, ``split_specials``: true for a tokenizer whose ``encode`` splits special
tokens out of the text by default (seed 003's behaviour); absent means false.

:func:`write_tfjson` also writes a human-readable vocabulary view beside the
JSON (``name.vocab.txt``); tokenforge never reads that file back.

The reader is strict: unknown keys, wrong types, ids defined twice or used
before they exist all raise :class:`FormatError` naming the file, the line and
the JSON path; a newer version raises :class:`VersionError`; content that does
not match the checksum raises :class:`ChecksumError`. Version 1 files (no
checksum) are read as before.

Not handled: the vocabulary view is never read back; a checksum catches
accidental changes, not deliberate forgery.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence, TypeGuard

from ..errors import FormatError, VersionError
from . import checksum
from ._jsonutil import JsonDoc, JsonProblem, json_doc_from_bytes, loads_checked
from .atomic import atomic_write_all
from .bpe_data import MAX_ID, BPEData, check_token_bytes, id_error, id_limit, show_int, token_bytes_limit
from .patterns import pattern_compile_problem, pattern_name_problem

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "write_tfjson",
    "read_tfjson",
    "tfjson_text",
    "tfjson_from_bytes",
    "sniff_tfjson",
    "vocab_view_path",
    "render_bytes",
]

FORMAT_NAME = "tokenforge-bpe"
#: The newest version this module reads and writes (2: a checksum of the content,
#: formats/checksum.py, and the optional split_specials key).
FORMAT_VERSION = 2

_KEYS_REQUIRED = ("format", "version", "pattern_name", "pattern", "byte_ids", "merges", "special_tokens", "training")
_KEYS_OPTIONAL = ("first_merge_id", "merge_ids", checksum.KEY)
#: keys a version needs at least: version 2 introduced split_specials
_KEY_SINCE = {"split_specials": 2}
_SNIFF = re.compile(rb'^\s*\{\s*"format"\s*:\s*"tokenforge-bpe"')


# --------------------------------------------------------------------- writing
def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, allow_nan=False, sort_keys=True, separators=(", ", ": "))


def _merge_id_fields(data: BPEData) -> str:
    """The "first_merge_id" line, or "merge_ids" when ids are not contiguous."""
    ids = [new for _, _, new in data.merges]
    first = ids[0] if ids else max(data.byte_ids) + 1
    if ids == list(range(first, first + len(ids))):
        return f'  "first_merge_id": {first},\n'
    return f'  "merge_ids": {_dumps(ids)},\n'


def tfjson_text(data: BPEData, path: str | os.PathLike[str] | None = None) -> str:
    """The exact text :func:`write_tfjson` writes for ``data``."""
    data.validate(path)
    try:
        training = _dumps(data.training)
    except (TypeError, ValueError) as e:
        raise FormatError(f"training settings are not JSON-serialisable: {e}", path=path) from None
    merges = ",\n".join(f"    [{a}, {b}]" for a, b, _ in data.merges)
    specials = ",\n".join(
        f"    {_dumps(text)}: {i}" for text, i in sorted(data.special_tokens.items(), key=lambda kv: kv[1])
    )
    version = FORMAT_VERSION
    return checksum.seal_json_text(
        "{\n"
        f'  "format": "{FORMAT_NAME}",\n'
        f'  "version": {version},\n'
        f'  "pattern_name": {_dumps(data.pattern_name)},\n'
        f'  "pattern": {_dumps(data.pattern)},\n'
        f'  "byte_ids": {_dumps(list(data.byte_ids))},\n'
        + _merge_id_fields(data)
        + (f'  "merges": [\n{merges}\n  ],\n' if merges else '  "merges": [],\n')
        + (f'  "special_tokens": {{\n{specials}\n  }},\n' if specials else '  "special_tokens": {},\n')
        + (
            f'  "training": {training},\n  "split_specials": true\n'
            if data.split_specials
            else f'  "training": {training}\n'
        )
        + "}\n"
    )


def vocab_view_path(path: str | os.PathLike[str]) -> Path:
    """``tok.json`` -> ``tok.vocab.txt`` (any other name: ``name.vocab.txt``)."""
    path = Path(path)
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(stem + ".vocab.txt")


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def render_bytes(b: bytes) -> str:
    """A one-line, printable rendering of ``b`` in double quotes.

    Valid, printable UTF-8 is shown as text; backslash, quote, \\n, \\r, \\t
    are escaped; every other byte is shown as ``\\xNN``.
    """
    out = []
    for ch in b.decode("utf-8", errors="surrogateescape"):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not valid UTF-8 here
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\x{x:02x}" for x in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def vocab_view_text(data: BPEData) -> str:
    """One line per id: id, byte length, rendered bytes, origin (byte / merge L R / special)."""
    token_bytes = data.token_bytes_list()
    origin: dict[int, str] = {i: "byte" for i in data.byte_ids}
    origin.update({new: f"merge {a} {b}" for a, b, new in data.merges})
    lines = [
        "# tokenforge-bpe vocabulary view, for people; tokenforge never reads this file.",
        "# columns (tab-separated): id, byte length, bytes (escaped), origin",
    ]
    specials = {i: text for text, i in data.special_tokens.items()}
    for i in sorted(set(origin) | set(specials)):
        if i in specials:
            text = specials[i]
            lines.append(f"{i}\t0\t{render_bytes(text.encode('utf-8', 'surrogatepass'))}\tspecial")
        else:
            b = token_bytes[i]
            if b is None:  # validate() refuses such data: every byte and merge id has bytes
                raise FormatError(f"id {i} has no bytes")
            lines.append(f"{i}\t{len(b)}\t{render_bytes(b)}\t{origin[i]}")
    return "\n".join(lines) + "\n"


def write_tfjson(path: str | os.PathLike[str], data: BPEData) -> None:
    """Write ``data`` to ``path`` and the vocabulary view beside it, as one save:
    both are written in full before either replaces its file
    (:func:`~.atomic.atomic_write_all`), so a failure (disk full) changes neither.
    """
    atomic_write_all(tfjson_items(path, data))


def tfjson_items(path: str | os.PathLike[str], data: BPEData) -> list[tuple[Path, bytes]]:
    """The (path, content) of the JSON and its vocabulary view, the JSON first (so
    that :func:`~.atomic.atomic_write_all` replaces it last), for a save that
    writes them with other files."""
    path = Path(path)
    text = tfjson_text(data, path)
    view = vocab_view_text(data)
    return [(path, text.encode("utf-8")), (vocab_view_path(path), view.encode("utf-8"))]


# --------------------------------------------------------------------- reading
def sniff_tfjson(path: str | os.PathLike[str], head: bytes) -> bool:
    """True if ``head`` (the file's first bytes) starts a tokenforge-bpe JSON document."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    return bool(_SNIFF.match(head))


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _entries(doc: JsonDoc) -> int:
    """How many ids the file defines (256 bytes, the merges, the specials)."""
    v = doc.value
    return 256 + sum(len(v[k]) for k in ("merges", "special_tokens") if isinstance(v.get(k), (list, dict)))


def _check_id(doc: JsonDoc, where: Sequence[str | int], x: object, what: str | None = None) -> int:
    """An id: an integer 0..MAX_ID below ``id_limit`` of the file's entries."""
    if not _is_int(x) or not 0 <= x <= MAX_ID:
        shown = show_int(x) if _is_int(x) else json.dumps(x)[:40]
        raise doc.error(where, f"expected an id (an integer 0..{MAX_ID}), found {shown}")
    if what is not None:
        entries = _entries(doc)
        if x >= id_limit(entries):
            raise doc.error(where, id_error(what, x, entries))
    return x


def _check_header(doc: JsonDoc) -> None:
    v = doc.value
    if v.get("format") != FORMAT_NAME:
        raise doc.error(["format"], f'expected "format": "{FORMAT_NAME}", found {json.dumps(v.get("format"))}')
    version = v.get("version")
    if not _is_int(version):
        raise doc.error(["version"], f"expected an integer format version, found {json.dumps(version)}")
    if not 1 <= version <= FORMAT_VERSION:
        raise doc.error(
            ["version"],
            f"format version {version} is not supported (this tokenforge reads versions 1 to {FORMAT_VERSION}); "
            "upgrade tokenforge to read it",
            cls=VersionError,
        )
    for key in _KEYS_REQUIRED:
        if key not in v:
            raise doc.error([key], "required key is missing")
    for key in v:
        if (
            key not in _KEYS_REQUIRED
            and key not in _KEYS_OPTIONAL
            and version < _KEY_SINCE.get(key, FORMAT_VERSION + 1)
        ):
            raise doc.error([key], f"unknown key {key!r} in a version {version} file")
    if ("first_merge_id" in v) == ("merge_ids" in v):
        raise doc.error(["merges"], 'expected exactly one of "first_merge_id" and "merge_ids"')


def _read_pattern(doc: JsonDoc) -> tuple[str | None, str]:
    pattern, name = doc.value["pattern"], doc.value["pattern_name"]
    if pattern is not None and (not isinstance(pattern, str) or not pattern):
        raise doc.error(["pattern"], f"expected a non-empty regex string or null, found {json.dumps(pattern)}")
    problem = pattern_name_problem(pattern, name)
    if problem is not None:  # an unknown name, or a name that does not describe the pattern
        raise doc.error(["pattern_name"], problem)
    problem = pattern_compile_problem(pattern)
    if problem is not None:
        raise doc.error(["pattern"], problem)
    return pattern, name


def _read_byte_ids(doc: JsonDoc, defined: dict[int, str]) -> list[int]:
    ids = doc.value["byte_ids"]
    if not isinstance(ids, list) or len(ids) != 256:
        n = len(ids) if isinstance(ids, list) else type(ids).__name__
        raise doc.error(["byte_ids"], f"expected a list of 256 ids, found {n}")
    for b, i in enumerate(ids):
        _check_id(doc, ["byte_ids", b], i, f"byte {b}")
        if i in defined:
            raise doc.error(["byte_ids", b], f"id {i} of byte {b} is also the id of {defined[i]}")
        defined[i] = f"byte {b}"
    return ids


def _read_merge_ids(doc: JsonDoc, n: int) -> list[int]:
    v = doc.value
    if "first_merge_id" in v:
        first = _check_id(doc, ["first_merge_id"], v["first_merge_id"])
        if n and first + n - 1 >= id_limit(_entries(doc)):
            message = id_error(f"merge {n - 1}", first + n - 1, _entries(doc))
            raise doc.error(["first_merge_id"], f"from {show_int(first)}, {message}")
        return list(range(first, first + n))
    ids = v["merge_ids"]
    if not isinstance(ids, list) or len(ids) != n:
        found = len(ids) if isinstance(ids, list) else type(ids).__name__
        raise doc.error(["merge_ids"], f"expected a list of {n} ids (one per merge), found {found}")
    for k, i in enumerate(ids):
        _check_id(doc, ["merge_ids", k], i, f"merge {k}")
        if k and i <= ids[k - 1]:
            raise doc.error(["merge_ids", k], f"merge ids must increase: {i} follows {ids[k - 1]}")
    return ids


def _read_merges(doc: JsonDoc, defined: dict[int, str]) -> list[tuple[int, int, int]]:
    pairs = doc.value["merges"]
    if not isinstance(pairs, list):
        raise doc.error(["merges"], f"expected a list of [left, right] pairs, found {type(pairs).__name__}")
    merges = []
    for k, (pair, new) in enumerate(zip(pairs, _read_merge_ids(doc, len(pairs)))):
        if not isinstance(pair, list) or len(pair) != 2:
            raise doc.error(["merges", k], f"expected a [left, right] pair of ids, found {json.dumps(pair)}")
        for side, x in enumerate(pair):
            _check_id(doc, ["merges", k, side], x)
            if x not in defined:
                raise doc.error(["merges", k, side], f"id {x} is not defined before merge {k}")
        if new in defined:
            raise doc.error(["merges", k], f"merge {k} would create id {new}, already the id of {defined[new]}")
        defined[new] = f"merge {k}"
        merges.append((pair[0], pair[1], new))
    return merges


def _read_specials(doc: JsonDoc, defined: dict[int, str]) -> dict[str, int]:
    specials = doc.value["special_tokens"]
    if not isinstance(specials, dict):
        raise doc.error(["special_tokens"], f"expected an object text -> id, found {type(specials).__name__}")
    for text, i in specials.items():
        _check_id(doc, ["special_tokens", text], i, f"special token {text[:40]!r}")
        if not text:
            raise doc.error(["special_tokens", text], "a special token's text cannot be empty")
        if i in defined:
            raise doc.error(["special_tokens", text], f"id {i} of special {text!r} is also the id of {defined[i]}")
        defined[i] = f"special {text!r}"
    return dict(specials)


def read_tfjson(path: str | os.PathLike[str]) -> BPEData:
    """Read a tokenforge-bpe JSON file written by :func:`write_tfjson` (version 1 or 2)."""
    path = Path(path)
    return tfjson_from_bytes(path.read_bytes(), path)


def tfjson_from_bytes(raw: bytes, origin: str | os.PathLike[str]) -> BPEData:
    """:func:`read_tfjson` of a file's bytes in memory (e.g. :func:`tfjson_text` encoded);
    ``origin`` names them in errors."""
    data = _read_fast(raw, origin)
    if data is not None:
        return data
    return _read_doc(json_doc_from_bytes(raw, origin, FORMAT_NAME), len(raw))


_BIG = object()  # stands for an integer array the engine read


def _read_fast(raw: bytes, origin: str | os.PathLike[str]) -> BPEData | None:
    """The engine's reader (``_core.bpe_model_from_tfjson``): the integer
    arrays (byte ids, merges) are read and checked in Rust and the model is
    built there; the small members are parsed and checked here by the same
    functions as below; the checksum is computed over the same canonical text
    (the arrays' part made by the engine). None when anything is unusual
    (the engine declines, or a check fails): :func:`_read_doc` then reads the
    file as before and reports what is wrong where."""
    from .. import _core

    got = _core.bpe_model_from_tfjson(raw, token_bytes_limit(len(raw)))  # past the limit: declines
    if got is None:
        return None
    model, members, canonical, specials_used, pattern_used = got
    try:
        value: dict[str, Any] = {key: _BIG if text is None else loads_checked(text) for key, text in members}
        doc = JsonDoc(origin, "", value)
        _check_header(doc)
        pattern, pattern_name = _read_pattern(doc)
        specials, training = value["special_tokens"], value["training"]
        split_specials = value.get("split_specials", False)
        ok = (
            pattern == pattern_used
            and isinstance(specials, dict)
            and list(specials.items()) == specials_used
            and all(text and _is_int(i) for text, i in specials.items())
            and isinstance(training, dict)
            and isinstance(split_specials, bool)
            and ("first_merge_id" not in value or _is_int(value["first_merge_id"]))
        )
        if not ok:
            return None
        checksum.check_json(doc, FORMAT_NAME, value["version"], checksum.canonical_of_parts(value, dict(canonical)))
    except (FormatError, JsonProblem, ValueError, RecursionError):
        return None
    return BPEData.from_engine(model, specials, pattern, pattern_name, training, split_specials)


def _read_doc(doc: JsonDoc, file_bytes: int | None = None) -> BPEData:
    _check_header(doc)
    pattern, pattern_name = _read_pattern(doc)
    defined: dict[int, str] = {}
    byte_ids = _read_byte_ids(doc, defined)
    merges = _read_merges(doc, defined)
    specials = _read_specials(doc, defined)
    training = doc.value["training"]
    if not isinstance(training, dict):
        raise doc.error(["training"], f"expected an object, found {type(training).__name__}")
    split_specials = doc.value.get("split_specials", False)
    if not isinstance(split_specials, bool):
        raise doc.error(["split_specials"], f"expected true or false, found {json.dumps(split_specials)}")
    checksum.check_json(doc, FORMAT_NAME, doc.value["version"])  # after the checks that say what is wrong where
    check_token_bytes(byte_ids, merges, file_bytes, doc.path)
    data = BPEData(list(byte_ids), merges, specials, pattern, pattern_name, training, split_specials)
    data.validate(doc.path)  # a second, independent check; cannot fail after the ones above
    return data
