"""Reading a SentencePiece ``.model`` file (the protobuf ``ModelProto``) as a pipeline description.

A minimal protobuf reader of our own (no protobuf package): varints of at most
ten bytes, lengths checked against what is left of their message before
anything is sliced, groups refused, unknown fields skipped as protobuf does,
the last value of a repeated scalar kept. It reads:

* ``pieces`` (field 1): ``piece`` (1, UTF-8), ``score`` (2, float32), ``type`` (3);
* ``trainer_spec`` (2): ``model_type`` (3: unigram, bpe, word, char),
  ``treat_whitespace_as_suffix`` (24), ``byte_fallback`` (35), ``unk_surface`` (44);
* ``normalizer_spec`` (3): ``name`` (1), ``precompiled_charsmap`` (2),
  ``add_dummy_prefix`` (3), ``remove_extra_whitespaces`` (4), ``escape_whitespaces`` (5);
* ``denormalizer_spec`` (5): refused when it carries a charsmap.

The result is the plain description :class:`tokenforge.pipeline.PipelineTokenizer`
builds (and saves in ``tokenforge-pipeline`` JSON): the charsmap in base64;
what the pieces and settings mean is checked there
(:mod:`tokenforge.pipeline.spm`). Every problem is a
:class:`~tokenforge.errors.FormatError` with the byte offset.

Not handled: ``self_test_data`` (read past, not run); training-only settings.
"""

from __future__ import annotations

import base64
import os
import struct
from pathlib import Path
from typing import Any, Iterator

from ..errors import FormatError

__all__ = ["read_sentencepiece_model", "parse_model_proto", "sniff_sentencepiece_model"]

_MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}  # the enum names


class _Reader:
    def __init__(self, data: bytes, path: str | os.PathLike[str] | None, base: int = 0) -> None:
        self.data, self.path, self.base = data, path, base

    def fail(self, at: int, message: str) -> FormatError:
        return FormatError(message, path=self.path, offset=self.base + at)

    def varint(self, pos: int) -> tuple[int, int]:
        value = shift = 0
        start = pos
        while True:
            if pos >= len(self.data):
                raise self.fail(start, "truncated varint")
            b = self.data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 70:
                raise self.fail(start, "a varint longer than 10 bytes")
        if value >= 1 << 64:
            raise self.fail(start, "a varint beyond 64 bits")
        return value, pos

    def fields(self) -> Iterator[tuple[int, int, Any, int]]:
        """(field number, wire type, value, offset) of every field; LEN values are (start, end)."""
        pos, n = 0, len(self.data)
        while pos < n:
            at = pos
            key, pos = self.varint(pos)
            field, wire = key >> 3, key & 7
            if field == 0:
                raise self.fail(at, "field number 0")
            value: int | bytes | tuple[int, int]
            if wire == 0:
                value, pos = self.varint(pos)
            elif wire == 1:
                if pos + 8 > n:
                    raise self.fail(at, "truncated 64-bit field")
                value, pos = self.data[pos : pos + 8], pos + 8
            elif wire == 5:
                if pos + 4 > n:
                    raise self.fail(at, "truncated 32-bit field")
                value, pos = self.data[pos : pos + 4], pos + 4
            elif wire == 2:
                length, pos = self.varint(pos)
                if length > n - pos:
                    raise self.fail(at, f"field {field} claims {length} bytes, {n - pos} are left")
                value, pos = (pos, pos + length), pos + length
            else:
                raise self.fail(at, f"field {field} has wire type {wire} (groups are not supported)")
            yield field, wire, value, at

    def sub(self, span: tuple[int, int]) -> "_Reader":
        return _Reader(self.data[span[0] : span[1]], self.path, self.base + span[0])

    def text(self, span: tuple[int, int], what: str) -> str:
        try:
            return self.data[span[0] : span[1]].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(span[0], f"{what} is not UTF-8") from None


def _expect(r: _Reader, wire: int, want: int, at: int, what: str) -> None:
    if wire != want:
        raise r.fail(at, f"{what} has wire type {wire}, expected {want}")


def _piece(r: _Reader) -> list:
    piece, score, kind = "", 0.0, 1
    for field, wire, value, at in r.fields():
        if field == 1:
            _expect(r, wire, 2, at, "piece")
            piece = r.text(value, "a piece")
        elif field == 2:
            _expect(r, wire, 5, at, "score")
            (score,) = struct.unpack("<f", value)
            if score != score:
                raise r.fail(at, "a score is NaN")
        elif field == 3:
            _expect(r, wire, 0, at, "type")
            kind = value
    return [piece, score, kind]


def _flags(r: _Reader, wanted: dict[int, str], out: dict, strings: dict[int, str], blobs: dict[int, str]) -> None:
    for field, wire, value, at in r.fields():
        if field in wanted:
            _expect(r, wire, 0, at, wanted[field])
            out[wanted[field]] = bool(value)
        elif field in strings:
            _expect(r, wire, 2, at, strings[field])
            out[strings[field]] = r.text(value, strings[field])
        elif field in blobs:
            _expect(r, wire, 2, at, blobs[field])
            out[blobs[field]] = r.data[value[0] : value[1]]


def parse_model_proto(data: bytes, path: str | os.PathLike[str] | None = None) -> dict:
    """The pipeline description of a ModelProto's bytes."""
    r = _Reader(data, path)
    pieces = []
    model: dict = {"type": "SentencePiece", "kind": "UNIGRAM", "byte_fallback": False}
    norm: dict = {}
    denorm: dict = {}
    for field, wire, value, at in r.fields():
        if field == 1:
            _expect(r, wire, 2, at, "pieces")
            pieces.append(_piece(r.sub(value)))
        elif field == 2:
            _expect(r, wire, 2, at, "trainer_spec")
            sub = r.sub(value)
            for f, w, v, a in sub.fields():
                if f == 3:
                    _expect(sub, w, 0, a, "model_type")
                    if v not in _MODEL_TYPES:
                        raise sub.fail(a, f"unknown model_type {v}")
                    model["kind"] = _MODEL_TYPES[v]
            _flags(sub, {24: "treat_whitespace_as_suffix", 35: "byte_fallback"}, model, {44: "unk_surface"}, {})
        elif field == 3:
            _expect(r, wire, 2, at, "normalizer_spec")
            _flags(
                r.sub(value),
                {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"},
                norm,
                {1: "name"},
                {2: "precompiled_charsmap"},
            )
        elif field == 5:
            _expect(r, wire, 2, at, "denormalizer_spec")
            _flags(r.sub(value), {}, denorm, {}, {2: "precompiled_charsmap"})
            if denorm.get("precompiled_charsmap"):
                raise r.fail(at, "a denormalizer with a charsmap is not supported")
    if not pieces:
        raise FormatError("no pieces: not a SentencePiece model", path=path)
    model["pieces"] = pieces
    norm["precompiled_charsmap"] = base64.b64encode(norm.get("precompiled_charsmap", b"")).decode("ascii")
    norm["type"] = "SentencePiece"
    return {"normalizer": norm, "model": model, "decoder": {"type": "SentencePiece"}}


def read_sentencepiece_model(path: str | os.PathLike[str]) -> dict:
    return parse_model_proto(Path(path).read_bytes(), path)


def sniff_sentencepiece_model(path: str | os.PathLike[str], head: bytes) -> bool:
    """A ModelProto: it starts with a piece (field 1) whose own first field is a UTF-8 piece string."""
    if len(head) < 4 or head[0] != 0x0A:
        return False
    try:
        r = _Reader(head, path)
        length, pos = r.varint(1)
        if pos >= len(head) or head[pos] != 0x0A:
            return False
        inner, p2 = r.varint(pos + 1)
        if inner == 0 or inner >= length or p2 + inner > len(head):
            return Path(path).suffix == ".model"
        head[p2 : p2 + inner].decode("utf-8")
    except (FormatError, UnicodeDecodeError):
        return False
    return True
