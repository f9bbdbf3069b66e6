"""Small JSON helpers shared by the JSON-based readers.

``parse_json`` is the one way a reader turns JSON text into values: every
failure -- a syntax error, an integer of more than 4,300 digits (which
``json.loads`` refuses with a bare ValueError), nesting deeper than
:data:`MAX_DEPTH` (checked before parsing, so the parser never recurses
deeply), a lone surrogate escape such as ``"\\ud83d"`` (which parses but can
never be encoded as UTF-8) -- becomes one :class:`JsonProblem` with a line and
column, which the reader turns into its own typed error
(``load_json_file`` and ``parse_json`` give :class:`FormatError`).
``line_of`` finds the line of a value inside a document given its path
(``["merges", 12]``), so that semantic errors can name a line too. It walks
only along the one path, decoding siblings with the C scanner, so it costs
little and runs only when an error is being reported.

Not handled: JSON that ``json.loads`` accepts beyond the standard (NaN,
Infinity) is still accepted here; readers check the values they use.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import FormatError, VersionError

__all__ = [
    "load_json_file",
    "parse_json",
    "loads_checked",
    "lone_surrogate_escape",
    "JsonProblem",
    "MAX_DEPTH",
    "line_of",
    "JsonDoc",
    "check_header",
]

_WS = " \t\n\r"
_decoder = json.JSONDecoder()

#: Deepest nesting of arrays and objects a reader accepts; tokenizer files nest
#: a handful of levels, a corpus line's text field is at level 1.
MAX_DEPTH = 64

# A string, or an unterminated one up to the end of the text: every quote then
# starts a match, so no search fails from many starts (quadratic otherwise on
# '"\\"\\"\\"...' without a closing quote).
_STRING_RE = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)'
_STRING = re.compile(_STRING_RE, re.DOTALL)
_STRING_OR_BRACKET = re.compile(_STRING_RE + r"|[\[\]{}]", re.DOTALL)
# (the lookbehinds start each run of digits or backslashes once: linear)
_BIG_INT_OR_STRING = re.compile(_STRING_RE + r"|(?<![\d-])(-?\d{%d,})" % (sys.get_int_max_str_digits() + 1), re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"(?<!\\)(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


class JsonProblem(ValueError):
    """Why a JSON text cannot be read: ``message``, and where (1-based ``line``
    and ``column``, None when unknown)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column

    def where(self) -> str:
        return f" at column {self.column}" if self.column is not None else ""


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _too_deep_at(text: str, max_depth: int) -> int | None:
    """Offset of the bracket that nests deeper than ``max_depth``, or None.

    Cheap: counting brackets is enough for almost every text; otherwise the
    strings are cut out (one regex pass in C) and the depth profile is a
    cumulative sum over what remains (numpy). Only a text that is too deep
    pays a Python loop, to find the offset."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    import numpy as np

    # (About half the time json.loads takes on a large tokenizer.json.)
    skeleton = np.frombuffer(_STRING.sub("", text).encode("ascii", "replace"), dtype=np.uint8)
    step = np.zeros(256, np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    if len(skeleton) == 0 or int(np.cumsum(step[skeleton], dtype=np.int64).max()) <= max_depth:
        return None
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c in "]}":
            depth -= 1
    return None


def _lone_surrogate_at(text: str) -> tuple[int, str] | None:
    """Offset and text of the first escape of a lone surrogate (``\\ud83d`` not
    followed by a low half, or a low half alone), or None. Only texts holding
    a surrogate escape at all pay more than one search."""
    pos = 0
    while True:
        m = _SURROGATE_ESCAPE.search(text, pos)
        if m is None:
            return None
        pos = m.end()
        if len(m.group(1)) % 2 == 0:  # an escaped backslash, then plain "u..."
            continue
        code = int(m.group(2), 16)
        if code < 0xDC00 and _LOW_ESCAPE.match(text, m.end()):
            pos = m.end() + 6  # a proper pair
            continue
        return m.start(2) - 2, "\\" + m.group(0)[len(m.group(1)) :]


def lone_surrogate_escape(text: str) -> tuple[str, int | None]:
    """The first lone surrogate escape in a JSON text and its 1-based column
    (for an error message; ``("\\ud800".., None)`` if only decoding found it)."""
    lone = _lone_surrogate_at(text)
    if lone is None:
        return "a surrogate", None
    return lone[1], _line_col(text, lone[0])[1]


def loads_checked(
    text: str,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    max_depth: int | None = MAX_DEPTH,
    surrogates: bool = True,
) -> Any:
    """``json.loads(text)``, with every failure a :class:`JsonProblem` (see the
    module doc). ``max_depth=None`` leaves the depth to the parser (a
    RecursionError becomes a JsonProblem); ``surrogates=False`` admits lone
    surrogate escapes (the caller checks the strings it uses)."""
    deep = None if max_depth is None else _too_deep_at(text, max_depth)
    if deep is not None:
        raise JsonProblem(f"arrays and objects nested more than {max_depth} deep", *_line_col(text, deep))
    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as e:
        raise JsonProblem(e.msg, e.lineno, e.colno) from None
    except RecursionError:  # (only with a max_depth near the interpreter's limit)
        raise JsonProblem("arrays and objects nested too deeply") from None
    except ValueError as e:  # an integer over sys.get_int_max_str_digits() digits
        for m in _BIG_INT_OR_STRING.finditer(text):
            if m.group(1) is not None:
                n = len(m.group(1).lstrip("-"))
                raise JsonProblem(
                    f"an integer of {n} digits (at most {sys.get_int_max_str_digits()} are read)",
                    *_line_col(text, m.start(1)),
                ) from None
        raise JsonProblem(str(e)[:200]) from None
    if surrogates and ("\\ud" in text or "\\uD" in text):
        lone = _lone_surrogate_at(text)
        if lone is not None:
            raise JsonProblem(
                f"the string escape {lone[1]} is half a surrogate pair, not a character", *_line_col(text, lone[0])
            )
    return value


def parse_json(
    text: str,
    path: str | os.PathLike[str],
    what: str,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    first_line: int = 1,
) -> Any:
    """:func:`loads_checked`, its problems a :class:`FormatError` naming ``path``
    and the line (counted from ``first_line``, for JSON inside a larger file)."""
    try:
        return loads_checked(text, object_pairs_hook=object_pairs_hook)
    except JsonProblem as p:
        line = None if p.line is None else p.line + first_line - 1
        raise FormatError(
            f"invalid JSON{p.where()}: {p.message}; expected {what} (truncated or corrupt?)", path=path, line=line
        ) from None


class JsonDoc:
    """A parsed JSON document that remembers its text, for error locations."""

    def __init__(self, path: str | os.PathLike[str], text: str, value: Any) -> None:
        self.path = path
        self.text = text
        self.value = value

    def error(self, where: Sequence, message: str, cls: type[FormatError] = FormatError) -> FormatError:
        """A FormatError about the value at ``where``, naming its line and JSON path."""
        line = None
        for n in range(len(where), -1, -1):  # a missing key: name its parent's line
            line = line_of(self.text, where[:n])
            if line is not None:
                break
        return cls(f"{_render_path(where)}: {message}", path=self.path, line=line)


def load_json_file(path: str | os.PathLike[str], what: str) -> JsonDoc:
    """Read ``path`` as UTF-8 JSON; errors become FormatError naming line/offset."""
    path = Path(path)
    return json_doc_from_bytes(path.read_bytes(), path, what)


def json_doc_from_bytes(raw: bytes, path: str | os.PathLike[str], what: str) -> JsonDoc:
    """:func:`load_json_file` of bytes already in memory; ``path`` names them in errors."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        message = f"not UTF-8 text ({e.reason}); expected a {what} JSON file"
        raise FormatError(message, path=path, offset=e.start) from None
    value = parse_json(text, path, f"a {what} JSON file")
    if not isinstance(value, dict):
        raise FormatError(f"top level is a JSON {type(value).__name__}, expected an object ({what})", path=path, line=1)
    return JsonDoc(path, text, value)


def _render_path(where: Sequence) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<document>"


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _offset_of(text: str, where: Sequence) -> int | None:
    """Character offset of the value at ``where`` in the JSON ``text`` (None if absent)."""
    pos = _skip_ws(text, 0)
    if text.startswith("\ufeff"):
        pos = _skip_ws(text, 1)
    for part in where:
        if pos >= len(text):
            return None
        opener = text[pos]
        if isinstance(part, int) and opener == "[":
            found = _find_in_array(text, pos, part)
        elif isinstance(part, str) and opener == "{":
            found = _find_in_object(text, pos, part)
        else:
            return None
        if found is None:
            return None
        pos = found
    return pos


def _find_in_array(text: str, pos: int, index: int) -> int | None:
    pos = _skip_ws(text, pos + 1)
    for k in range(index + 1):
        if pos >= len(text) or text[pos] == "]":
            return None
        if k == index:
            return pos
        _, pos = _decoder.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != ",":
            return None
        pos = _skip_ws(text, pos + 1)
    return None


def _find_in_object(text: str, pos: int, key: str) -> int | None:
    pos = _skip_ws(text, pos + 1)
    found = None
    while pos < len(text) and text[pos] == '"':
        k, pos = _decoder.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != ":":
            return None
        pos = _skip_ws(text, pos + 1)
        if k == key:
            found = pos  # the last duplicate wins, as in json.loads
        _, pos = _decoder.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
    return found


def line_of(text: str, where: Sequence) -> int | None:
    """1-based line of the value at ``where`` (a list of keys/indices), or None."""
    try:
        offset = _offset_of(text, where)
    except (json.JSONDecodeError, IndexError):
        return None
    if offset is None:
        return None
    return text.count("\n", 0, offset) + 1


def check_header(doc: JsonDoc, name: str, keys: Sequence[str], newest: int, extra: str = "checksum") -> int:
    """The header rule of our JSON formats: an object with exactly ``keys`` (and
    ``extra``), ``"format"`` equal to ``name``, ``"version"`` a positive integer
    not newer than ``newest`` (VersionError otherwise). Returns the version."""
    v = doc.value
    if not isinstance(v, dict):
        raise doc.error([], "expected a JSON object")
    for key in v:
        if key not in keys and key != extra:
            raise doc.error([key], f"unknown key {key!r}; a {name} file has {', '.join(keys)}")
    for key in keys:
        if key not in v:
            raise doc.error([], f"missing key {key!r}")
    if v["format"] != name:
        raise doc.error(["format"], f"format is {v['format']!r}, expected {name!r}")
    version = v["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise doc.error(["version"], f"version must be a positive integer, found {json.dumps(version)}")
    if version > newest:
        raise doc.error(
            ["version"],
            f"version {version} is newer than this tokenforge reads (up to {newest}); upgrade tokenforge",
            cls=VersionError,
        )
    return version
