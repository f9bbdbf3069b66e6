"""One rule for invalid ids in every family (issue 32 item 10): an id that is not
in the vocabulary -- negative, past it, or past 64 bits -- is a TokenforgeError
naming it and its position, never a TypeError, never a silent "<unk>"."""

from __future__ import annotations

import pytest

import tokenforge
from tokenforge.errors import TokenforgeError

DOCS = ["hello world, the quick brown fox jumps over the lazy dog"] * 20


@pytest.fixture(scope="module", params=["bpe", "growing", "lz78"])
def tok(request):
    if request.param == "bpe":
        return tokenforge.BPETokenizer.train_from_iterator(DOCS, 280, progress=False)
    if request.param == "growing":
        return tokenforge.GrowingBPETokenizer.train_from_iterator(DOCS, 280, progress=False)
    return tokenforge.LZ78Tokenizer.train_from_iterator(DOCS, vocab_size=300, progress=False)


@pytest.mark.parametrize("bad", [-1, 2**64, 2**70, 2**32, "past"])
def test_an_invalid_id_is_a_tokenforge_error_naming_it(tok, bad):
    ok = tok.encode("hello world")
    n = getattr(tok, "current_vocab_size", tok.vocab_size)
    bad = n if bad == "past" else bad
    with pytest.raises(TokenforgeError, match=rf"token id {bad}\b.*position 2"):
        tok.decode(ok[:2] + [bad] + ok[2:])
    assert tok.decode(ok) == "hello world"
