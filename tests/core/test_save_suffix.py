"""save(path) writes its own format or refuses a path whose suffix names another one (issue 32 item 4)."""

from __future__ import annotations

import pytest

import tokenforge
from tokenforge.errors import TokenforgeError

DOCS = ["hello world, the quick brown fox jumps over the lazy dog"] * 20


@pytest.fixture(scope="module")
def toks():
    return {
        "bpe": tokenforge.BPETokenizer.train_from_iterator(DOCS, 280, progress=False),
        "growing": tokenforge.GrowingBPETokenizer.train_from_iterator(DOCS, 280, progress=False),
        "lz78": tokenforge.LZ78Tokenizer.train_from_iterator(DOCS, vocab_size=300, progress=False),
    }


@pytest.mark.parametrize(
    "family, name, method",
    [
        ("bpe", "x.tiktoken", "BPETokenizer.save_tiktoken"),
        ("bpe", "x.tsv", "LZ78Tokenizer.save"),
        ("bpe", "x.model", "sentencepiece"),
        ("growing", "x.tiktoken", "save_tiktoken"),
        ("lz78", "x.json", "the family's save"),
        ("lz78", "x.tiktoken", "save_tiktoken"),
    ],
)
def test_a_foreign_suffix_is_refused_naming_the_method(toks, tmp_path, family, name, method):
    with pytest.raises(TokenforgeError, match=rf"names .*use .*{method}"):
        toks[family].save(tmp_path / name)
    assert list(tmp_path.iterdir()) == []  # nothing written, no directory of that name


def test_own_suffixes_and_directories_still_save(toks, tmp_path):
    toks["bpe"].save(tmp_path / "b.json")
    toks["bpe"].save(tmp_path / "bdir")
    toks["growing"].save(tmp_path / "g.json")
    toks["lz78"].save(tmp_path / "l.tsv")
    toks["lz78"].save(tmp_path / "ldir")
    (tmp_path / "existing.tsv").mkdir()  # an existing directory is a directory, whatever its name
    toks["bpe"].save(tmp_path / "existing.tsv")
    assert (tmp_path / "existing.tsv" / "tokenforge.json").is_file()
    for p in ("b.json", "bdir", "g.json", "l.tsv", "ldir"):
        tokenforge.load(tmp_path / p)
