"""Mixedgram's text rule: text is latin1 bytes (one home for the family and its distributed trainer).

- :func:`to_latin1`: a ``str`` of characters U+0000..U+00FF (or bytes, taken
  as they are) as latin1 bytes; a character above U+00FF raises
  :class:`~tokenforge.errors.Latin1Error` naming it and its offset, unless
  ``errors="replace"`` (``?``).
- :func:`latin1_of_file`: a file's bytes as training text: as they are for
  latin1, else decoded with the given encoding and turned into latin1.

Not handled: NUL bytes (the core removes them before training and encoding),
streaming decoders (a file is decoded whole).
"""

from __future__ import annotations

import codecs

from .errors import FormatError, Latin1Error

__all__ = ["to_latin1", "latin1_of_file", "is_latin1"]

_LATIN1_NAMES = ("iso8859-1",)


def is_latin1(encoding: str) -> bool:
    """Does ``encoding`` name latin1 (a file's bytes are then the text as they are)?"""
    return codecs.lookup(encoding).name in _LATIN1_NAMES


def to_latin1(text: str | bytes | bytearray | memoryview, errors: str = "strict", *, where: str | None = None) -> bytes:
    """The latin1 bytes of ``text`` (a str, or bytes-like taken as latin1).

    ``errors="strict"`` raises :class:`Latin1Error` at the first character
    above U+00FF; ``"replace"`` writes ``?`` for each.
    """
    if isinstance(text, str):
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
        try:
            return text.encode("latin-1", errors=errors)
        except UnicodeEncodeError as e:
            ch = e.object[e.start]
            msg = (
                f"{where + ': ' if where else ''}character {ch!r} (U+{ord(ch):04X}) at offset {e.start} is not latin1; "
                "mixedgram accepts only characters U+0000..U+00FF (pass errors='replace' to write '?' instead)"
            )
            raise Latin1Error(ch, e.start, msg) from None
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"text must be str or bytes, not {type(text).__name__}")


def latin1_of_file(raw: bytes, path: object, encoding: str, errors: str) -> bytes:
    """A file's bytes as training text: as they are (latin1), or decoded with
    ``encoding`` and turned into latin1 (FormatError / Latin1Error naming the file)."""
    if is_latin1(encoding):
        return raw
    try:
        decoded = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise FormatError(f"not valid {encoding} ({e.reason})", path=path, offset=e.start) from None
    return to_latin1(decoded, errors, where=str(path))
