"""The built-in default corpus read from the running Python's standard library."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenforge.data.default_corpus import (
    default_corpus_files,
    default_corpus_info,
    iter_default_corpus,
    stdlib_dir,
)

pydoc_topics = pytest.importorskip("pydoc_data.topics").topics


@pytest.fixture(scope="module")
def files():
    return default_corpus_files()


def test_files_are_stdlib_sources_without_tests_or_third_party(files):
    root = stdlib_dir()
    assert len(files) > 100
    rels = [p.relative_to(root) for p in files]
    assert all(p.suffix == ".py" for p in files)
    excluded = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "pydoc_data"}
    assert not any(excluded & set(r.parts[:-1]) for r in rels)
    names = {r.as_posix() for r in rels}
    assert {"os.py", "json/decoder.py"} <= names


def test_files_are_sorted_and_deterministic(files):
    rels = [p.relative_to(stdlib_dir()).as_posix() for p in files]
    assert rels == sorted(rels)
    assert default_corpus_files() == files


def test_topics_come_first_in_sorted_key_order():
    expected = [pydoc_topics[k] for k in sorted(pydoc_topics) if pydoc_topics[k]]
    docs = iter_default_corpus()
    assert [next(docs) for _ in expected] == expected


def test_without_topics_starts_with_the_first_nonempty_file(files):
    first = next(iter_default_corpus(include_topics=False))
    expected = next(t for t in (p.read_text(encoding="utf-8") for p in files) if t)
    assert first == expected


@pytest.mark.parametrize("max_bytes", [0, 1, 1000, 3_000_000])
def test_max_bytes_is_an_exact_utf8_budget(max_bytes):
    docs = list(iter_default_corpus(max_bytes=max_bytes))
    assert sum(len(d.encode("utf-8")) for d in docs) == max_bytes
    assert all(docs)


def test_max_bytes_cuts_at_a_character_boundary():
    # Find a topic with a non-ASCII character and cut through it.
    for key in sorted(pydoc_topics):
        text = pydoc_topics[key]
        pos = next((i for i, c in enumerate(text) if ord(c) > 127), None)
        if pos is not None:
            break
    else:
        pytest.skip("no non-ASCII text in this Python's topics")
    before = sum(len(pydoc_topics[k].encode()) for k in sorted(pydoc_topics) if k < key)
    budget = before + len(text[:pos].encode()) + 1  # one byte into the character
    docs = list(iter_default_corpus(max_bytes=budget))
    assert docs[-1] == text[:pos]


def test_negative_max_bytes_is_refused():
    with pytest.raises(ValueError):
        iter_default_corpus(max_bytes=-1)


def test_info_matches_the_corpus(files):
    info = default_corpus_info()
    assert info["stdlib"] == str(stdlib_dir())
    assert info["num_topics"] == sum(1 for t in pydoc_topics.values() if t)
    assert info["topic_bytes"] == sum(len(t.encode()) for t in pydoc_topics.values())
    assert 0 < info["num_files"] <= len(files)
    assert info["num_documents"] == info["num_topics"] + info["num_files"]
    assert info["total_bytes"] == info["topic_bytes"] + info["file_bytes"] > 1_000_000
    docs = list(iter_default_corpus(max_bytes=info["total_bytes"] + 10))
    assert len(docs) == info["num_documents"]
    assert sum(len(d.encode()) for d in docs) == info["total_bytes"]
    assert default_corpus_info(include_topics=False)["num_topics"] == 0


def test_reading_is_lazy(monkeypatch):
    # A small budget must not read every file.
    opened = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: opened.append(self) or real(self))
    topic_bytes = sum(len(t.encode()) for t in pydoc_topics.values())
    list(iter_default_corpus(max_bytes=topic_bytes + 100_000))
    assert 0 < len(opened) < 30
