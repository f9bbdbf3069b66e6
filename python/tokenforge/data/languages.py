"""Documents that carry a language: the one reader for held-out sets
(``tokenforge compare --heldout``) and per-language training text (parity-aware
BPE), below both :mod:`tokenforge.eval` and the families.

A document is a :class:`LangDoc`: its text, its language (None: unknown) and
the unit of parallel text it belongs to (None: none; the same man page in
every language). :func:`read_language_documents` reads JSON lines (fields
``text``, ``lang``, ``parallel_id``) or gives every document of any other
corpus file one language (``LANG=PATH``, :func:`parse_heldout_arg`).

Not handled: a language field under another name than ``lang``; compressed
JSON lines as language-tagged files (they are read as plain corpus files, one
language for all).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Iterable

from ..errors import CorpusError, TokenforgeError

__all__ = ["LangDoc", "LANG_CODE", "TrainLanguages", "is_language_code", "parse_heldout_arg", "read_language_documents"]

#: a language code: ISO 639-1/-3 letters, optionally a region or script after ``-``/``_``
LANG_CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*$")


def is_language_code(text: str) -> bool:
    """True for "en", "pt-BR", "zh_Hans", ...; False for anything else (any type)."""
    return isinstance(text, str) and bool(LANG_CODE.match(text))


@dataclasses.dataclass(frozen=True)
class LangDoc:
    """A document and its language (None: unknown) and parallel unit (None: none)."""

    text: str
    lang: str | None = None
    parallel_id: str | None = None


# ---------------------------------------------------------------------------
def parse_heldout_arg(text: str) -> tuple[str | None, str]:
    """``"de=path"`` -> ("de", "path"); ``"path"`` -> (None, "path"). A prefix that is
    not a language code (``"a=b/c.txt"`` with ``a=b/c.txt`` a file) stays part of the path."""
    lang, sep, path = text.partition("=")
    if sep and LANG_CODE.match(lang) and path and not Path(text).exists():
        return lang, path
    return None, text


def _jsonl_records(path: Path, text_field: str) -> Iterable[LangDoc]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise CorpusError(f"{path}:{lineno}: not a JSON line ({e})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get(text_field), str):
                raise CorpusError(f"{path}:{lineno}: expected an object with a string field {text_field!r}")
            lang, pid = rec.get("lang"), rec.get("parallel_id")
            if lang is not None and not (isinstance(lang, str) and LANG_CODE.match(lang)):
                raise CorpusError(
                    f'{path}:{lineno}: \'lang\' must be a language code such as "en" or "pt-BR", not {lang!r}'
                )
            if pid is not None and (isinstance(pid, bool) or not isinstance(pid, (str, int))):
                raise CorpusError(f"{path}:{lineno}: 'parallel_id' must be a string or an integer, not {pid!r}")
            yield LangDoc(rec[text_field], lang, None if pid is None else str(pid))


def read_language_documents(
    path: str | os.PathLike[str], lang: str | None = None, *, text_field: str = "text"
) -> list[LangDoc]:
    """The documents of one held-out file with their languages.

    A ``.jsonl`` file gives each line's ``lang`` and ``parallel_id`` fields
    (absent: None); ``lang`` overrides the field for every line. Any other
    corpus file (:func:`tokenforge.data.corpus.iter_documents`) gives its
    documents the language ``lang`` (None: unknown) and no parallel unit.
    """
    from ..data.corpus import iter_documents

    p = Path(path)
    if lang is not None and not LANG_CODE.match(lang):
        raise TokenforgeError(f"{lang!r} is not a language code (e.g. en, de, pt-BR)")
    if p.suffix == ".jsonl" and p.is_file():
        docs = list(_jsonl_records(p, text_field))
        return docs if lang is None else [dataclasses.replace(d, lang=lang) for d in docs]
    return [LangDoc(t, lang) for t in iter_documents([p], text_field=text_field)]


@dataclasses.dataclass(frozen=True)
class TrainLanguages:
    """Training documents with their languages (``docs``, in corpus order), the
    reference language of the comparison (``reference``) and, when given
    (``tokenforge compare --parity-dev``), parallel development documents
    (``dev``): what ``tokenforge compare`` hands a family whose record takes
    languages (``bpe:parity``)."""

    docs: tuple[LangDoc, ...]
    reference: str
    dev: tuple[LangDoc, ...] = ()
