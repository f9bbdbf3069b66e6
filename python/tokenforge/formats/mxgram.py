"""Mixedgram files: the seed's ``.mxgram`` and tokenforge's vocabulary JSON.

``.mxgram`` (the seed's layout, no magic number, no version): a 38,400-byte
header of 3,840 entries of 10 bytes, then the 12-bit packed stream. The Rust
core reads and writes it; this module only recognises it (:func:`sniff_mxgram`).

The vocabulary JSON (``"format": "tokenforge-mixedgram"``, version 2) holds
what a ``.mxgram`` header cannot: special tokens and the training counts::

    {
      "format": "tokenforge-mixedgram",
      "version": 2,
      "ngrams": [                  (id 256 + index; null = unused slot; <= 3840)
        "e ",
        ...
      ],
      "counts": [123, ...],        (same length as ngrams, or null)
      "special_tokens": {"<|bos|>": 4087, ...},
      "training": {...},
      "checksum": "sha256:..."     (version 2 on; see formats/checksum.py)
    }

N-grams are JSON strings of latin1 characters (U+0001..U+00FF), 2 to 8 of
them. The reader is strict: unknown keys, wrong types, bad n-grams, repeated
n-grams and special ids that collide raise :class:`FormatError` naming the
file and line; a newer version raises :class:`VersionError`; content that does
not match the checksum raises :class:`ChecksumError` (version 1 files have none
and are read as before). Both formats are specified byte for byte in
``docs/formats.md``.

Not handled: ``.mxgram`` is the seed's layout byte for byte (no magic number,
no version, no room for a checksum), so it is validated structurally only; a
checksum catches accidental changes, not deliberate forgery.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Sequence, TypeGuard

from . import checksum
from ._jsonutil import JsonDoc, check_header, json_doc_from_bytes, load_json_file
from .atomic import atomic_write

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HEADER_BYTES",
    "NGRAM_SLOTS",
    "ENTRY_BYTES",
    "vocab_json_text",
    "write_vocab_json",
    "read_vocab_json",
    "vocab_json_from_bytes",
    "sniff_vocab_json",
    "sniff_mxgram",
]

FORMAT_NAME = "tokenforge-mixedgram"
FORMAT_VERSION = 2  # 2: a checksum of the content (formats/checksum.py)
NGRAM_SLOTS = 3840
ENTRY_BYTES = 10
HEADER_BYTES = NGRAM_SLOTS * ENTRY_BYTES
FIRST_NGRAM_ID = 256
VOCAB_SIZE = 4096

_KEYS = ("format", "version", "ngrams", "counts", "special_tokens", "training")
_SNIFF = re.compile(rb'^\s*\{\s*"format"\s*:\s*"tokenforge-mixedgram"')


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, allow_nan=False, sort_keys=True, separators=(", ", ": "))


def vocab_json_text(
    ngrams: list[bytes], counts: Sequence[int] | None, special_tokens: dict[str, int], training: dict
) -> str:
    """The exact text :func:`write_vocab_json` writes. ``ngrams[i]`` is id 256 + i
    (b"" = unused); trailing unused slots are not written."""
    last = max((i for i, g in enumerate(ngrams) if g), default=-1)
    shown = list(ngrams[: last + 1])
    grams = ",\n".join(f"    {_dumps(g.decode('latin-1')) if g else 'null'}" for g in shown)
    if counts is None:
        counts_text = "null"
    else:
        counts_text = _dumps([int(c) if g else None for g, c in zip(shown, counts)])
    specials = ",\n".join(f"    {_dumps(t)}: {i}" for t, i in sorted(special_tokens.items(), key=lambda kv: kv[1]))
    return checksum.seal_json_text(
        "{\n"
        f'  "format": "{FORMAT_NAME}",\n'
        f'  "version": {FORMAT_VERSION},\n'
        + (f'  "ngrams": [\n{grams}\n  ],\n' if grams else '  "ngrams": [],\n')
        + f'  "counts": {counts_text},\n'
        + (f'  "special_tokens": {{\n{specials}\n  }},\n' if specials else '  "special_tokens": {},\n')
        + f'  "training": {_dumps(training)}\n'
        "}\n"
    )


def write_vocab_json(
    path: str | os.PathLike[str],
    ngrams: list[bytes],
    counts: Sequence[int] | None,
    special_tokens: dict[str, int],
    training: dict,
) -> None:
    """Write the vocabulary JSON to ``path`` atomically."""
    atomic_write(path, vocab_json_text(ngrams, counts, special_tokens, training))


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def read_vocab_json(path: str | os.PathLike[str]) -> dict:
    """``{"ngrams": [bytes]*3840, "counts": [int]|None, "special_tokens": {...}, "training": {...}}``."""
    return _read_doc(load_json_file(path, FORMAT_NAME))


def vocab_json_from_bytes(raw: bytes, origin: str | os.PathLike[str]) -> dict:
    """:func:`read_vocab_json` of a file's bytes in memory (e.g. :func:`vocab_json_text`
    encoded); ``origin`` names them in errors."""
    return _read_doc(json_doc_from_bytes(raw, origin, FORMAT_NAME))


def _read_doc(doc: JsonDoc) -> dict:
    check_header(doc, FORMAT_NAME, _KEYS, FORMAT_VERSION, checksum.KEY)
    v = doc.value
    grams_in = v["ngrams"]
    if not isinstance(grams_in, list):
        raise doc.error(["ngrams"], f"expected a list of strings, found {type(grams_in).__name__}")
    if len(grams_in) > NGRAM_SLOTS:
        raise doc.error(["ngrams"], f"{len(grams_in)} n-grams; a mixedgram vocabulary has {NGRAM_SLOTS} slots")
    ngrams: list[bytes] = []
    seen: dict[bytes, int] = {}
    for i, g in enumerate(grams_in):
        where = ["ngrams", i]
        if g is None:
            ngrams.append(b"")
            continue
        if not isinstance(g, str):
            raise doc.error(where, f"expected a string or null, found {json.dumps(g)}")
        if not 2 <= len(g) <= 8:
            raise doc.error(where, f"n-gram {g!r} has {len(g)} characters, expected 2..8")
        bad = next((c for c in g if not 1 <= ord(c) <= 0xFF), None)
        if bad is not None:
            raise doc.error(where, f"n-gram {g!r} has the character U+{ord(bad):04X}; n-grams are latin1 without NUL")
        b = g.encode("latin-1")
        if b in seen:
            raise doc.error(where, f"n-gram {g!r} repeats id {FIRST_NGRAM_ID + seen[b]}")
        seen[b] = i
        ngrams.append(b)
    ngrams += [b""] * (NGRAM_SLOTS - len(ngrams))
    counts = v["counts"]
    if counts is not None:
        if not isinstance(counts, list) or len(counts) != len(grams_in):
            raise doc.error(["counts"], f"expected null or a list of {len(grams_in)} counts (one per n-gram)")
        for i, c in enumerate(counts):
            if grams_in[i] is None:
                if c is not None:
                    raise doc.error(["counts", i], "the slot is unused, so its count must be null")
            elif not _is_int(c) or c < 1:
                raise doc.error(["counts", i], f"expected a positive integer count, found {json.dumps(c)}")
        counts = [0 if c is None else c for c in counts] + [0] * (NGRAM_SLOTS - len(counts))
    specials_in = v["special_tokens"]
    if not isinstance(specials_in, dict):
        raise doc.error(["special_tokens"], f"expected an object, found {type(specials_in).__name__}")
    specials: dict[str, int] = {}
    used: dict[int, str] = {}
    for text, i in specials_in.items():
        where = ["special_tokens", text]
        if not text or not text.isascii() or "\0" in text:
            raise doc.error(where, "special token text must be non-empty ASCII without NUL")
        if not _is_int(i) or not FIRST_NGRAM_ID <= i < VOCAB_SIZE:
            raise doc.error(where, f"expected an id {FIRST_NGRAM_ID}..{VOCAB_SIZE - 1}, found {json.dumps(i)}")
        if ngrams[i - FIRST_NGRAM_ID]:
            raise doc.error(where, f"id {i} is already the n-gram {ngrams[i - FIRST_NGRAM_ID].decode('latin-1')!r}")
        if i in used:
            raise doc.error(where, f"id {i} is also the special token {used[i]!r}")
        used[i] = text
        specials[text] = i
    training = v["training"]
    if not isinstance(training, dict):
        raise doc.error(["training"], f"expected an object, found {type(training).__name__}")
    checksum.check_json(doc, FORMAT_NAME, v["version"])  # after the checks that say what is wrong where
    return {"ngrams": ngrams, "counts": counts, "special_tokens": specials, "training": training}


def sniff_vocab_json(path: str | os.PathLike[str], head: bytes) -> bool:
    """True if ``head`` starts a tokenforge-mixedgram JSON document."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    return bool(_SNIFF.match(head))


def _entries_look_right(head: bytes) -> bool:
    """Every complete entry in ``head`` is all-zero or carries its own id, and one is not all-zero."""
    any_used = False
    for i in range(min(len(head) // ENTRY_BYTES, NGRAM_SLOTS)):
        e = head[i * ENTRY_BYTES : (i + 1) * ENTRY_BYTES]
        if e == bytes(ENTRY_BYTES):
            continue
        if int.from_bytes(e[8:], "big") != FIRST_NGRAM_ID + i or not any(e[:8]):
            return False
        any_used = True
    return any_used


def sniff_mxgram(path: str | os.PathLike[str], head: bytes) -> bool:
    """A file named ``*.mxgram``, or one whose first 4 KiB are valid header entries
    (409 id fields in a row that must be 256, 257, ...: no text file looks like that)."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.suffix.lower() == ".mxgram":
        return True
    return len(head) >= 4000 and path.stat().st_size >= HEADER_BYTES and _entries_look_right(head)
