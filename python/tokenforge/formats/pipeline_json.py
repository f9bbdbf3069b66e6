"""``tokenforge-pipeline`` JSON: an imported tokenizer's pipeline, in our own file.

::

    {
      "format": "tokenforge-pipeline",
      "version": 1,
      "source": "huggingface" | "sentencepiece",
      "pipeline": { ...the description... },
      "checksum": "sha256:..."
    }

The description is the plain data the readers produce
(:mod:`.hf_pipeline`: the tokenizer.json's own objects; :mod:`.sentencepiece_model`:
the ModelProto's pieces and settings, the precompiled charsmap in base64), so a
saved file loads back into the same pipeline and every construct is checked
again on load (:func:`tokenforge.pipeline.steps.build`). Sealed with the
checksum rule of :mod:`.checksum` from version 1 on; written atomically.

Not handled: a description too deep for :data:`._jsonutil.MAX_DEPTH` (no real
pipeline nests that far).
"""

from __future__ import annotations

import json
import os
import re

from . import checksum
from ._jsonutil import JsonDoc, check_header, json_doc_from_bytes, load_json_file
from .atomic import atomic_write

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "pipeline_json_text",
    "write_pipeline_json",
    "read_pipeline_json",
    "pipeline_json_from_bytes",
    "sniff_pipeline_json",
]

FORMAT_NAME = "tokenforge-pipeline"
FORMAT_VERSION = 1
SOURCES = ("huggingface", "sentencepiece")
_KEYS = ("format", "version", "source", "pipeline")
_SNIFF = re.compile(rb'^\s*\{\s*"format"\s*:\s*"tokenforge-pipeline"')


def pipeline_json_text(source: str, description: dict) -> str:
    """The exact text :func:`write_pipeline_json` writes."""
    body = json.dumps(description, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return checksum.seal_json_text(
        "{\n"
        f'  "format": "{FORMAT_NAME}",\n'
        f'  "version": {FORMAT_VERSION},\n'
        f'  "source": {json.dumps(source)},\n'
        f'  "pipeline": {body}\n'
        "}\n"
    )


def write_pipeline_json(path: str | os.PathLike[str], source: str, description: dict) -> None:
    atomic_write(path, pipeline_json_text(source, description))


def read_pipeline_json(path: str | os.PathLike[str]) -> tuple[str, dict]:
    """``(source, description)`` of a tokenforge-pipeline file."""
    return _read_doc(load_json_file(path, FORMAT_NAME))


def pipeline_json_from_bytes(raw: bytes, origin: str | os.PathLike[str]) -> tuple[str, dict]:
    return _read_doc(json_doc_from_bytes(raw, origin, FORMAT_NAME))


def _read_doc(doc: JsonDoc) -> tuple[str, dict]:
    version = check_header(doc, FORMAT_NAME, _KEYS, FORMAT_VERSION, checksum.KEY)
    v = doc.value
    if v["source"] not in SOURCES:
        raise doc.error(["source"], f"source must be one of {', '.join(SOURCES)}, found {json.dumps(v['source'])[:60]}")
    if not isinstance(v["pipeline"], dict):
        raise doc.error(["pipeline"], "expected an object")
    checksum.check_json(doc, FORMAT_NAME, version)
    return v["source"], v["pipeline"]


def sniff_pipeline_json(path: str | os.PathLike[str], head: bytes) -> bool:
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    return bool(_SNIFF.match(head))
