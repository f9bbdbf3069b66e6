"""Reading any Hugging Face ``tokenizer.json`` as a pipeline description.

:func:`read_hf_pipeline` parses the file (strictly: :mod:`._jsonutil`) and
returns the parts of it that define encoding and decoding -- ``normalizer``,
``pre_tokenizer``, ``model``, ``decoder``, ``added_tokens``,
``post_processor``, ``truncation``, ``padding`` -- as plain data; checking
what is supported is :func:`tokenforge.pipeline.steps.build`'s.

Which reader takes a tokenizer.json: a byte-level BPE file that
:mod:`.hf_json` reads exactly (``BPETokenizer``, its ids unchanged) stays
there; :func:`sniff_hf_pipeline` says yes to every other tokenizer.json (a
Unigram, WordPiece or WordLevel model, a normalizer, Metaspace, byte
fallback, ...). It decides from the parsed file, so a file is parsed twice
when it is loaded; the last parse is kept for the reader (one entry).

Numbers: ``tokenizers`` reads a tokenizer.json with serde_json's default float
parser, which is not correctly rounded (a 17-digit score can come out one unit
in the last place off), and a Unigram model's segmentation can turn on that
last bit when two paths tie. :func:`serde_json_float` is that parser's rule
(significand as u64 -> f64, then one multiplication or division by a power of
ten), and a Unigram model's scores are read with it, so they are the very
values ``tokenizers`` computes with.

Not handled: tokenizer.json files of another top-level shape (a bare model
file, ``vocab.json`` + ``merges.txt``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..errors import FormatError
from ._jsonutil import JsonDoc, json_doc_from_bytes
from .hf_json import _check_pipeline, _read_pattern, sniff_hf_json

__all__ = ["read_hf_pipeline", "sniff_hf_pipeline", "PIPELINE_KEYS"]

#: the top-level keys that define how a tokenizer.json encodes and decodes
PIPELINE_KEYS = (
    "normalizer",
    "pre_tokenizer",
    "model",
    "decoder",
    "added_tokens",
    "post_processor",
    "truncation",
    "padding",
)

_last: tuple[tuple, JsonDoc] | None = None


def _doc(path: str | os.PathLike[str]) -> JsonDoc:
    global _last
    p = Path(path)
    st = os.stat(p)
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if _last is not None and _last[0] == key:
        return _last[1]
    doc = json_doc_from_bytes(p.read_bytes(), p, "Hugging Face tokenizer.json")
    _last = (key, doc)
    return doc


def byte_level_reads(doc: JsonDoc) -> bool:
    """True when :mod:`.hf_json`'s byte-level BPE reader takes this file (its pipeline checks pass)."""
    try:
        _check_pipeline(doc)
        _read_pattern(doc)
    except FormatError:
        return False
    except (AttributeError, TypeError):  # a malformed file: the byte-level reader reports it
        return True
    return True


def _file_of(path: str | os.PathLike[str]) -> Path:
    """A tokenizer.json, or the one in a directory (a transformers tokenizer directory)."""
    p = Path(path)
    return p / "tokenizer.json" if p.is_dir() else p


def sniff_hf_pipeline(path: str | os.PathLike[str], head: bytes) -> bool:
    """A tokenizer.json (or a directory holding one) that the byte-level BPE reader does not take."""
    if Path(path).is_dir():
        path = _file_of(path)
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            head = f.read(4096)
    if not sniff_hf_json(path, head) or not Path(path).is_file():
        return False
    try:
        doc = _doc(path)
    except FormatError:
        return False  # not JSON: the byte-level reader says what is wrong
    return isinstance(doc.value, dict) and not byte_level_reads(doc)


#: serde_json's table of powers of ten (f64 literals 1e0 .. 1e308)
_POW10 = [float(f"1e{k}") for k in range(309)]
_FLOAT = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?\Z")


def serde_json_float(text: str) -> float:
    """A JSON number as serde_json reads it without ``float_roundtrip``
    (``f64_from_parts``); a number of more than 19 significant digits is read
    correctly rounded instead (serde_json then drops digits; no writer of
    tokenizer.json produces one)."""
    m = _FLOAT.match(text)
    if m is None:
        return float(text)
    sign, whole, frac, exp = m.groups()
    digits = whole + (frac or "")
    if len(digits) > 20 or len(exp or "") > 6:  # (never int() a long run of digits)
        return float(text)
    significand = int(digits)
    if significand >= 1 << 64:
        return float(text)
    exponent = -len(frac or "") + int(exp or 0)
    f = float(significand)
    while True:
        k = abs(exponent)
        if k < len(_POW10):
            f = f * _POW10[k] if exponent >= 0 else f / _POW10[k]
            break
        if f == 0.0 or exponent >= 0:
            break
        f /= 1e308
        exponent += 308
    return -f if sign else f


def read_hf_pipeline(path: str | os.PathLike[str]) -> dict:
    """The pipeline description of a tokenizer.json (plain data, not yet checked)."""
    global _last
    path = _file_of(path)
    doc = _doc(path)
    _last = None
    v = doc.value
    if not isinstance(v, dict):
        raise FormatError("expected a JSON object", path=path)
    if not isinstance(v.get("model"), dict):
        raise FormatError("model: expected an object", path=path)
    if v["model"].get("type") == "Unigram" or isinstance(v["model"].get("vocab"), list):
        # the scores as tokenizers reads them (see the module doc); the text was checked by the first parse
        v = json.loads(doc.text, parse_float=serde_json_float)
    return {k: v[k] for k in PIPELINE_KEYS if k in v}
