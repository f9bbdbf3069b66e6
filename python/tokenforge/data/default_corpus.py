"""The built-in default corpus: text every Python installation already has.

Demos, tests and benchmarks need a corpus of real text without a download.
Every CPython ships two: the documentation topics behind ``help()``
(``pydoc_data.topics``, English prose with code examples, about 0.5 MB) and the
standard library's own Python source (about 12 MB). Both are read in place.

The order is deterministic: topics in sorted key order, then source files in
sorted path order. The content is the same on every run of one installation,
but differs between Python versions (and slightly between platforms, e.g. the
generated ``_sysconfigdata_*`` module), so compare numbers only within one
interpreter.

Excluded: ``site-packages``/``dist-packages`` (third-party code), test suites
(``test``, ``tests``, ``idle_test`` directories, which hold deliberately odd
files such as lib2to3's test data), ``__pycache__``, and ``pydoc_data`` itself
(its source is the topics again, as one string literal).
"""

from __future__ import annotations

import sysconfig
import tokenize
from pathlib import Path
from typing import Iterator

__all__ = ["stdlib_dir", "default_corpus_files", "iter_default_corpus", "default_corpus_info"]

_EXCLUDED_DIRS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "pydoc_data"}
)


def stdlib_dir() -> Path:
    """The standard library directory of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def default_corpus_files() -> list[Path]:
    """The standard library ``.py`` files of the default corpus, sorted by path."""
    root = stdlib_dir()
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if _EXCLUDED_DIRS.isdisjoint(rel.parts[:-1]) and path.is_file():
            files.append(path)
    # Sort on the relative path as a str so the order does not depend on where
    # Python is installed.
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _topics() -> list[str]:
    """The pydoc topics in sorted key order (none if this Python lacks pydoc_data)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        return []
    return [topics[key] for key in sorted(topics)]


def _read_source(path: Path) -> str | None:
    """A source file's text, honouring a PEP 263 coding line; None if it cannot be decoded."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        with open(path, "rb") as f:
            encoding, _ = tokenize.detect_encoding(f.readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def _truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes``."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def _documents(include_topics: bool) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` of every non-empty document, kind "topic" or "file", in corpus order."""
    if include_topics:
        for text in _topics():
            if text:
                yield "topic", text
    for path in default_corpus_files():
        source = _read_source(path)
        if source:  # empty files (many __init__.py) and undecodable ones give nothing
            yield "file", source


def iter_default_corpus(max_bytes: int | None = None, include_topics: bool = True) -> Iterator[str]:
    """The default corpus: one document per pydoc topic, then one per source file.

    Empty files and files that cannot be decoded are skipped. With
    ``max_bytes``, stops once that many UTF-8 bytes have been yielded; the last
    document is cut (at a character boundary) so the total never exceeds it.
    """
    if max_bytes is not None and max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    return _limited(_documents(include_topics), max_bytes)


def _limited(documents: Iterator[tuple[str, str]], max_bytes: int | None) -> Iterator[str]:
    budget = max_bytes
    for _, doc in documents:
        if budget is not None:
            size = len(doc.encode("utf-8"))
            if size >= budget:
                doc = _truncate_utf8(doc, budget)
                if doc:
                    yield doc
                return
            budget -= size
        yield doc


def default_corpus_info(include_topics: bool = True) -> dict:
    """What the default corpus holds on this interpreter: document counts and UTF-8 bytes.

    Reads the whole corpus (about 12 MB), so it takes a fraction of a second.
    """
    counts = {"topic": 0, "file": 0}
    sizes = {"topic": 0, "file": 0}
    for kind, text in _documents(include_topics):
        counts[kind] += 1
        sizes[kind] += len(text.encode("utf-8"))
    return {
        "stdlib": str(stdlib_dir()),
        "num_topics": counts["topic"],
        "topic_bytes": sizes["topic"],
        "num_files": counts["file"],
        "file_bytes": sizes["file"],
        "num_documents": counts["topic"] + counts["file"],
        "total_bytes": sizes["topic"] + sizes["file"],
    }
