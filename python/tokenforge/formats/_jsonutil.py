"""Small JSON helpers shared by the JSON-based readers.

``load_json_file`` turns syntax errors into :class:`FormatError` with the line;
``line_of`` finds the line of a value inside a document given its path
(``["merges", 12]``), so that semantic errors can name a line too. It walks
only along the one path, decoding siblings with the C scanner, so it costs
little and runs only when an error is being reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..errors import FormatError

__all__ = ["load_json_file", "line_of", "JsonDoc"]

_WS = " \t\n\r"
_decoder = json.JSONDecoder()


class JsonDoc:
    """A parsed JSON document that remembers its text, for error locations."""

    def __init__(self, path: Path, text: str, value):
        self.path = path
        self.text = text
        self.value = value

    def error(self, where: Sequence, message: str, cls=FormatError) -> FormatError:
        """A FormatError about the value at ``where``, naming its line and JSON path."""
        line = None
        for n in range(len(where), -1, -1):  # a missing key: name its parent's line
            line = line_of(self.text, where[:n])
            if line is not None:
                break
        return cls(f"{_render_path(where)}: {message}", path=self.path, line=line)


def load_json_file(path, what: str) -> JsonDoc:
    """Read ``path`` as UTF-8 JSON; errors become FormatError naming line/offset."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        message = f"not UTF-8 text ({e.reason}); expected a {what} JSON file"
        raise FormatError(message, path=path, offset=e.start) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"invalid JSON at column {e.colno}: {e.msg}; expected a {what} JSON file (truncated or corrupt?)",
            path=path,
            line=e.lineno,
        ) from None
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
            pos = _find_in_array(text, pos, part)
        elif isinstance(part, str) and opener == "{":
            pos = _find_in_object(text, pos, part)
        else:
            return None
        if pos is None:
            return None
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
