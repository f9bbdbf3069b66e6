"""The corpus rule, across every entry point that takes a corpus (issue 32 item 1).

A ``str``/``PathLike`` or a list/tuple of them names files; texts come as an
iterator of str or through ``train_from_iterator``. A list of str that names no
existing files is a ``CorpusError`` saying what to pass, never the corpus: a
``pretokenize(glob.glob("*.txt"), ...)`` that matched nothing must not encode
the file names.
"""

from __future__ import annotations

import glob

import numpy as np
import pytest

import tokenforge
from tokenforge.cluster import LocalRunner
from tokenforge.counting import count_pieces
from tokenforge.data.corpus import Texts, corpus_source, iter_documents
from tokenforge.data.shards import ShardError, pretokenize
from tokenforge.errors import CorpusError
from tokenforge.eval.compare import CompareOptions, run_compare
from tokenforge.formats.patterns import GPT4_PATTERN

DOCS = [f"document {i}: the quick brown fox jumps over the lazy dog {i % 7}\n" * 3 for i in range(40)]
#: what a glob of file names looks like when passed by mistake
NAMES = ["notes_a.txt", "notes_b.txt"]
HINT = "is not an existing file or directory; a str or a list of str names files"


@pytest.fixture()
def files(tmp_path):
    paths = []
    for k in range(2):
        p = tmp_path / f"part{k}.txt"
        p.write_text("".join(DOCS[k::2]), encoding="utf-8")
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def bpe():
    return tokenforge.BPETokenizer.train_from_iterator(DOCS, 300, progress=False)


def test_corpus_source_is_the_rule(files):
    assert corpus_source(files, who="x") == files
    assert corpus_source([str(f) for f in files], who="x") == files
    assert corpus_source(str(files[0]), who="x") == [files[0]]
    texts = corpus_source(iter(DOCS), who="x")
    assert isinstance(texts, Texts)
    assert list(iter_documents(texts)) == DOCS
    for bad in (NAMES, tuple(NAMES), NAMES[0], [str(files[0]), "a text"]):
        with pytest.raises(CorpusError, match=HINT):
            corpus_source(bad, who="x")
    with pytest.raises(TypeError, match="bytes"):
        corpus_source(b"text", who="x")
    with pytest.raises(TypeError, match="not int"):
        corpus_source(42, who="x")


@pytest.mark.parametrize("family", ["BPETokenizer", "GrowingBPETokenizer", "LZ78Tokenizer"])
def test_train(family, files):
    cls = getattr(tokenforge, family)
    kw = {"vocab_size": 300, "progress": False}
    with pytest.raises(CorpusError, match=HINT):
        cls.train(NAMES, **kw)
    a = cls.train(files, **kw)
    b = cls.train([str(f) for f in files], **kw)
    assert a.encode(DOCS[3]) == b.encode(DOCS[3])


def test_learn_merges(files):
    base = tokenforge.GrowingBPETokenizer.train(files, 280, progress=False)
    before = base.current_vocab_size
    with pytest.raises(CorpusError, match=HINT):
        base.learn_merges(NAMES, 10)
    assert base.current_vocab_size == before  # the refused call learned nothing
    by_glob, by_path, by_text = (tokenforge.GrowingBPETokenizer(400) for _ in range(3))
    n1 = by_glob.learn_merges(sorted(glob.glob(str(files[0].parent / "*.txt"))), 10, min_frequency=1)
    n2 = by_path.learn_merges(files, 10, min_frequency=1)
    n3 = by_text.learn_merges(iter(DOCS), 10, min_frequency=1)
    assert n1 == n2 == 10 and n3 > 0
    assert by_glob.merges == by_path.merges


def test_pretokenize_files_as_str_are_read(files, bpe, tmp_path):
    with pytest.raises(CorpusError, match=HINT):
        pretokenize(NAMES, bpe, tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad" / "index.json").exists()
    by_str = pretokenize([str(f) for f in files], bpe, tmp_path / "s", progress=False)
    by_path = pretokenize(files, bpe, tmp_path / "p", progress=False)
    n = sum(len(f.read_text(encoding="utf-8")) for f in files)
    assert by_str.num_tokens == by_path.num_tokens > n // 10  # the contents, not two file names
    assert np.array_equal(by_str.tokens(0), by_path.tokens(0))
    texts = pretokenize(iter(DOCS), bpe, tmp_path / "t", progress=False)
    assert texts.num_documents == len(DOCS)


def test_count_pieces(files):
    with pytest.raises(CorpusError, match=HINT):
        count_pieces(NAMES, GPT4_PATTERN, progress=False)
    a = count_pieces(files, GPT4_PATTERN, progress=False)
    b = count_pieces([str(f) for f in files], GPT4_PATTERN, progress=False)
    assert a.total_bytes == b.total_bytes == sum(f.stat().st_size for f in files)


def test_cluster_path(files, bpe, tmp_path):
    local = LocalRunner(progress=False)
    with pytest.raises(CorpusError, match=HINT):
        pretokenize(NAMES, bpe, tmp_path / "c", client=local)
    with pytest.raises(ShardError, match="reads files"):
        pretokenize(iter(DOCS), bpe, tmp_path / "c", client=local)
    with pytest.raises(CorpusError, match=HINT):
        count_pieces(NAMES, GPT4_PATTERN, client=local, progress=False)
    with pytest.raises(CorpusError, match=HINT):
        tokenforge.BPETokenizer.train(NAMES, 300, client=local, progress=False)
    g = tokenforge.GrowingBPETokenizer.train(files, 280, progress=False)
    with pytest.raises(CorpusError, match=HINT):
        g.learn_merges(NAMES, 10, client=local)
    s = pretokenize([str(f) for f in files], bpe, tmp_path / "d", client=local, progress=False)
    assert s.num_tokens == pretokenize(files, bpe, tmp_path / "e", progress=False).num_tokens


def test_compare(tmp_path):
    with pytest.raises(CorpusError, match=HINT):
        run_compare(CompareOptions(corpus=NAMES, out=str(tmp_path / "r"), progress=False))
