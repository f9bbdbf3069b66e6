"""read_ahead: the items in order, the reader's errors raised in order, and a reader
closed on its own thread when the caller stops; counting's use of it (a corrupt
compressed JSON-lines file is reported by the counter as by the reader)."""

from __future__ import annotations

import gzip
import threading

import pytest

from tokenforge.batching import read_ahead
from tokenforge.counting import count_pieces
from tokenforge.errors import CorpusError


def test_items_in_order_at_any_depth():
    for depth in (1, 3):
        assert list(read_ahead(iter(range(100)), depth)) == list(range(100))
    assert list(read_ahead(iter([]))) == []


def test_an_error_of_the_reader_comes_after_its_items():
    def items():
        yield 1
        yield 2
        raise CorpusError("bad block")

    got = []
    with pytest.raises(CorpusError, match="bad block"):
        for x in read_ahead(items()):
            got.append(x)
    assert got == [1, 2]


def test_stopping_early_closes_the_reader_and_ends_its_thread():
    closed = threading.Event()
    pulled = []

    def items():
        try:
            for i in range(1000):
                pulled.append(i)
                yield i
        finally:
            closed.set()

    before = threading.active_count()
    it = read_ahead(items(), depth=2)
    assert next(it) == 0
    it.close()
    assert closed.is_set()
    assert threading.active_count() == before
    assert len(pulled) <= 4  # the one handed on, the queue's two, one waiting


def test_counting_reports_a_corrupt_compressed_file(tmp_path):
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(gzip.compress(b'{"text": "hello world"}\n' * 50))
    assert count_pieces(good, None, progress=False).total_pieces == 50
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"text": "hello world"}\n' * 50)[:-20])
    with pytest.raises(CorpusError, match=r"cut\.jsonl\.gz: corrupt \.gz stream"):
        count_pieces(cut, None, progress=False)


def test_a_bad_document_stops_the_reader(tmp_path, monkeypatch):
    from tokenforge import counting

    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", 64)
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "ok ok"}\n' * 40 + '{"text": 5}\n' + '{"text": "more"}\n' * 40, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 41"):
        count_pieces(path, None, progress=False)
    assert not [t for t in threading.enumerate() if t.name == "tokenforge-read-ahead"]
