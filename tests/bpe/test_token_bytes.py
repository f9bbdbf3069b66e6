"""Nothing a small file says costs gigabytes: merges that double a token (issue 32 item 8).

Ids stay small while token bytes grow 2^k, so the id bound does not limit this.
Every reader sums the tokens' lengths from the merge table in one linear pass,
before anything is built, and refuses a total past ``token_bytes_limit`` of the
file (and the engine refuses any model past ``MAX_TOKEN_BYTES``).
"""

from __future__ import annotations

import pytest

import tokenforge
from tokenforge import GrowingBPETokenizer, _core
from tokenforge.errors import FormatError, SyncError, TokenforgeError
from tokenforge.formats.bpe_data import (
    MAX_TOKEN_BYTES,
    MIN_TOKEN_BYTES_LIMIT,
    TOKEN_BYTES_PER_FILE_BYTE,
    BPEData,
    check_token_bytes,
    token_bytes_limit,
)
from tokenforge.formats.growing_json import BYTE_OFFSET, MERGE_OFFSET, GrowingData, growing_json_text
from tokenforge.formats.tfjson import tfjson_text


def doubling_bpe(k: int) -> BPEData:
    """'a', then k merges each joining the last token with itself: a token of 2^k bytes."""
    merges = [(97, 97, 256)] + [(255 + j, 255 + j, 256 + j) for j in range(1, k)]
    return BPEData(list(range(256)), merges, {}, None, "none")


def doubling_growing(k: int) -> GrowingData:
    a = BYTE_OFFSET + 97
    pairs = [(a, a)] + [(MERGE_OFFSET + j - 1, MERGE_OFFSET + j - 1) for j in range(1, k)]
    return GrowingData(pairs=pairs, vocab_size=MERGE_OFFSET + k + 10, pattern=None)


def test_limit_formula():
    assert token_bytes_limit(0) == MIN_TOKEN_BYTES_LIMIT
    assert token_bytes_limit(10**6) == TOKEN_BYTES_PER_FILE_BYTE * 10**6
    assert token_bytes_limit(10**12) == MAX_TOKEN_BYTES
    with pytest.raises(FormatError, match="refused before anything is built"):
        check_token_bytes(range(256), doubling_bpe(40).merges, None)
    check_token_bytes(range(256), doubling_bpe(20).merges, 2000)  # 2 MiB of tokens: within the floor


@pytest.mark.parametrize("k", [30, 40, 64])
def test_doubling_bpe_json_is_refused_by_load(tmp_path, k):
    path = tmp_path / "doubling.json"
    path.write_text(tfjson_text(doubling_bpe(k)), encoding="utf-8")
    assert path.stat().st_size < 4000
    with pytest.raises(FormatError, match="merges define tokens of more than") as e:
        tokenforge.load(path)
    assert e.value.path == str(path)


def test_doubling_bpe_json_within_the_limit_loads(tmp_path):
    path = tmp_path / "doubling.json"
    path.write_text(tfjson_text(doubling_bpe(20)), encoding="utf-8")
    tok = tokenforge.load(path)
    assert tok.decode([255 + 20]) == "a" * 2**20
    assert tok.encode("a" * 2**20) == [255 + 20]


@pytest.mark.parametrize("k", [30, 40])
def test_doubling_growing_json_is_refused(tmp_path, k):
    path = tmp_path / "tokenizer.json"
    path.write_text(growing_json_text(doubling_growing(k)), encoding="utf-8")
    with pytest.raises(FormatError, match="merges define tokens of more than") as e:
        GrowingBPETokenizer.load(path)
    assert e.value.path == str(path)
    with pytest.raises(FormatError, match="merges define tokens"):
        tokenforge.load(path)


def test_doubling_growing_json_in_sync_changes_nothing(tmp_path):
    remote = tmp_path / "remote.json"
    remote.write_text(growing_json_text(doubling_growing(32)), encoding="utf-8")
    tok = GrowingBPETokenizer.train_from_iterator(["some text to learn a few merges from"] * 5, 300, progress=False)
    before = tok.current_vocab_size
    with pytest.raises(SyncError, match="merges define tokens of more than.*nothing changed"):
        tok.sync(remote, max_bytes=1 << 20, timeout=3)
    assert tok.current_vocab_size == before


def test_the_engine_refuses_past_its_cap():
    data = doubling_bpe(31)  # 2^31 bytes in one token, and as much again below it
    with pytest.raises(TokenforgeError, match=f"more than the limit of {MAX_TOKEN_BYTES} bytes"):
        _core.BpeModel(data.byte_ids, data.merges, [], None)
