"""Hostile numbers and very long tokens in BPE files (issue 10, items 1 and 2).

One id near 2^32 in a file must be a FormatError naming the file, the line and
the id, never a table of ~100 GB (a process abort). A token of hundreds of
kilobytes (a run of ``=`` that training makes into one token) must not make
building, loading, importing or exporting quadratic: these tests use tokens
long enough that a quadratic step would take minutes; none of them is timed.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from bpe_strategies import bpe_data
from tokenforge import BPETokenizer, _core
from tokenforge.errors import FormatError, TokenforgeError
from tokenforge.formats.bpe_data import BPEData, id_limit
from tokenforge.formats.hf_json import effective_split, read_hf_json, write_hf_json
from tokenforge.formats.tfjson import read_tfjson, write_tfjson
from tokenforge.formats.tiktoken_io import (
    data_from_ranks,
    lowest_rank_split,
    mergeable_ranks,
    read_tiktoken_file,
)

SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
HUGE = (2**32 - 1, 2**32 - 2, 20_000_000, 2**32, 2**40)


def small() -> BPEData:
    return BPEData(list(range(256)), [(97, 98, 256), (256, 99, 257)], {"<|end|>": 258}, None, "none", {})


def doubling(k: int, byte: int = ord("=")) -> BPEData:
    """``=``, ``==``, ``====``, ... up to 2^k bytes: one merge per doubling."""
    merges = [(byte, byte, 256)] + [(255 + i, 255 + i, 256 + i) for i in range(1, k)]
    return BPEData(list(range(256)), merges, {}, None, "none", {})


# ------------------------------------------------------------------ item 1: ids bounded by the file
def test_limit_is_entries_plus_a_small_slack():
    assert id_limit(257) == 257 + 1024
    assert id_limit(100_000) == 112_500
    # the engine applies the same bound
    ok = _core.BpeModel(list(range(256)), [], [("<|x|>", id_limit(257) - 1)], None, "bytes")
    assert ok.vocab_size == id_limit(257)
    with pytest.raises(TokenforgeError, match=f"has id {id_limit(257)}, too large for a vocabulary of 257 entries"):
        _core.BpeModel(list(range(256)), [], [("<|x|>", id_limit(257))], None, "bytes")


@pytest.mark.parametrize("big", [2**32 - 1, 20_000_000])
def test_engine_refuses_ids_far_beyond_the_entries(big):
    byte_ids = list(range(256))
    byte_ids[5] = big
    for args in (
        (byte_ids, [], []),
        (list(range(256)), [(97, 98, big)], []),
        (list(range(256)), [], [("<|x|>", big)]),
    ):
        for rule in ("bytes", "pairs"):
            with pytest.raises(TokenforgeError, match=f"id {big}, too large"):
                _core.BpeModel(*args, None, rule)
    with pytest.raises(TokenforgeError, match=f"id {big}, too large"):
        _core.Lz78Model(["a"], [("<|x|>", big)], None)


def tiktoken_lines(extra: list[tuple[bytes, int]]) -> bytes:
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(t).decode()} {r}" for t, r in extra]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("big", HUGE)
def test_tiktoken_rank_far_beyond_the_entries_names_file_line_and_rank(tmp_path, big):
    path = tmp_path / "v.tiktoken"
    path.write_bytes(tiktoken_lines([(b"ab", 256), (b"abc", big)]))
    for read in (read_tiktoken_file, tokenforge.load):
        with pytest.raises(FormatError) as e:
            read(path)
        assert e.value.path == str(path) and e.value.line == 258
        assert str(big) in str(e.value)


def test_tiktoken_rank_with_too_many_digits_is_a_format_error(tmp_path):
    path = tmp_path / "v.tiktoken"
    path.write_bytes(tiktoken_lines([(b"ab", int("9" * 30))]))
    with pytest.raises(FormatError, match="does not fit in 32 bits") as e:
        read_tiktoken_file(path)
    assert e.value.line == 257


@pytest.mark.parametrize("big", HUGE)
def test_ranks_given_as_a_dict_are_bounded_too(big):
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = big
    with pytest.raises(FormatError, match=f"rank {big}"):
        data_from_ranks(ranks)
    with pytest.raises(FormatError, match="too large|32 bits"):
        data_from_ranks({bytes([b]): b for b in range(256)}, special_tokens={"<|x|>": big})


def tfjson_file(tmp_path, edit) -> tuple:
    path = tmp_path / "tok.json"
    write_tfjson(path, small())
    doc = json.loads(path.read_text())
    edit(doc)
    text = json.dumps(doc, indent=1)
    path.write_text(text)
    return path, text


@pytest.mark.parametrize("big", HUGE)
@pytest.mark.parametrize(
    "where, edit, what",
    [
        ("byte_ids", lambda d, big: d["byte_ids"].__setitem__(200, big), "byte 200"),
        ("special_tokens", lambda d, big: d["special_tokens"].__setitem__("<|end|>", big), "special token"),
        ("merge_ids", lambda d, big: (d.pop("first_merge_id"), d.__setitem__("merge_ids", [256, big])), "merge 1"),
        ("first_merge_id", lambda d, big: d.__setitem__("first_merge_id", big), "merge 1"),
    ],
)
def test_tfjson_id_far_beyond_the_entries_names_file_line_and_id(tmp_path, big, where, edit, what):
    path, text = tfjson_file(tmp_path, lambda d: edit(d, big))
    for read in (read_tfjson, tokenforge.load):
        with pytest.raises(FormatError) as e:
            read(path)
        assert e.value.path == str(path) and e.value.line is not None
        assert str(big) in text.splitlines()[e.value.line - 1]
        assert str(big) in str(e.value)
        assert what in str(e.value) or big > 2**32 - 1
        assert "too large for a vocabulary of 259 entries" in str(e.value) or "4294967295" in str(e.value)


@pytest.mark.parametrize("big", HUGE)
def test_hf_vocab_id_far_beyond_the_entries_names_file_line_and_id(tmp_path, big):
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, small())
    doc = json.loads(path.read_text())
    doc["model"]["vocab"]["abc"] = big
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    for read in (read_hf_json, tokenforge.load):
        with pytest.raises(FormatError) as e:
            read(path)
        assert e.value.path == str(path) and e.value.line is not None
        assert '"abc"' in path.read_text().splitlines()[e.value.line - 1]
        assert str(big) in str(e.value)


@pytest.mark.parametrize("big", HUGE)
def test_hf_added_token_id_far_beyond_the_entries(tmp_path, big):
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, small())
    doc = json.loads(path.read_text())
    doc["added_tokens"][0]["id"] = big
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    with pytest.raises(FormatError) as e:
        read_hf_json(path)
    assert e.value.line is not None and str(big) in str(e.value)


@pytest.mark.parametrize("big", HUGE)
def test_bpedata_from_any_reader_is_bounded_before_the_engine(big):
    """Readers of other formats (seed 003 pickles) hand BPEData to the tokenizer: validate() bounds it."""
    data = small()
    data.special_tokens = {"<|end|>": big}
    with pytest.raises(FormatError, match=str(big)):
        BPETokenizer(data)


def test_real_vocabularies_with_gaps_still_load():
    """cl100k_base-like: dense ranks, specials after a gap of a few ids."""
    data = BPEData(list(range(256)), [(97, 98, 256)], {"<|endoftext|>": 258, "<|endofprompt|>": 276}, None, "none", {})
    assert BPETokenizer(data).vocab_size == 277


# ------------------------------------------------------------------ item 2: linear in the tokens' bytes
def test_a_doubling_chain_builds_loads_and_converts(tmp_path):
    """17 doubling merges: one token of 128 KiB (quadratic steps took minutes here)."""
    data = doubling(17)
    tok = BPETokenizer(data)
    run = "=" * (3 << 16)
    assert tok.encode(run) == [256 + 16, 256 + 15]
    tok.save(tmp_path / "t.json")
    assert BPETokenizer.load(tmp_path / "t.json").merges == tok.merges
    tok.save_tiktoken(tmp_path / "t.tiktoken")
    back = BPETokenizer.from_tiktoken(tmp_path / "t.tiktoken", pattern=None)
    assert back.merges == tok.merges
    tok.save_hf(tmp_path / "tokenizer.json")
    hf = json.loads((tmp_path / "tokenizer.json").read_text())
    assert len(hf["model"]["merges"]) == 17
    assert BPETokenizer.from_hf(tmp_path / "tokenizer.json").merges == tok.merges


def test_hf_import_of_a_long_token_without_a_merge(tmp_path):
    """A token no merge builds gets its first split into earlier tokens, found in linear time."""
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, doubling(16))
    doc = json.loads(path.read_text())
    doc["model"]["merges"] = doc["model"]["merges"][:-1]  # the longest token loses its merge
    path.write_text(json.dumps(doc, ensure_ascii=False))
    got = read_hf_json(path)
    assert got.merges[-1] == (256 + 14, 256 + 14, 256 + 15)


def test_training_with_one_long_run_in_the_corpus(tmp_path):
    corpus = ["the quick brown fox jumps over the lazy dog " * 20, "=" * 200_000]
    tok = BPETokenizer.train_from_iterator(
        corpus, 310, special_tokens=None, progress=False
    )  # every pair merged: no warning
    longest = max(len(tok._model.id_bytes(i)) for i in range(tok.vocab_size))
    assert longest == 200_000  # the whole run is one token
    tok.save(tmp_path / "t.json")
    again = BPETokenizer.load(tmp_path / "t.json")
    assert again.encode("=" * 200_000) == tok.encode("=" * 200_000)
    assert again.decode(again.encode("x " + "=" * 1000)) == "x " + "=" * 1000


def test_training_on_one_long_word_without_a_pattern():
    word = "ab" * 100_000 + "c" * 100_000
    tok = BPETokenizer.train_from_iterator([word], 300, special_tokens=None, pattern=None, progress=False)
    ids = tok.encode(word)
    assert tok.decode(ids) == word and len(ids) < 100


# ------------------------------------------------------------------ the engine's splits are the rule's
@SETTINGS
@given(data=bpe_data(max_merges=40))
def test_engine_splits_match_the_plain_rule(data):
    ranks = mergeable_ranks(data)
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    token_of = {r: t for t, r in by_rank}
    longer = [k for k, (t, _) in enumerate(by_rank) if len(t) > 1]
    below = _core.bpe_rank_splits(by_rank, "below_own_rank", longer)
    other = _core.bpe_rank_splits(by_rank, "all_but_own", longer)
    for k, (n1, p1), (n2, p2) in zip(longer, below, other):
        token, rank = by_rank[k]
        plain = lowest_rank_split(token, ranks, rank)
        assert n1 == len(plain) and [token_of[i] for i in p1] == plain[:8]
        eff = effective_split(token, ranks)
        assert (n2 == 2) == (eff is not None)
        if eff is not None:
            assert (token_of[p2[0]], token_of[p2[1]]) == eff


@SETTINGS
@given(words=st.sets(st.text(alphabet="ab", min_size=2, max_size=10), max_size=30), data=st.data())
def test_first_lower_cut_matches_the_plain_rule(words, data):
    tokens = [(bytes([b]), b) for b in range(256)]
    ids = data.draw(st.permutations(range(256, 256 + len(words))))
    tokens += [(w.encode(), i) for w, i in zip(sorted(words), ids)]
    vocab = dict(tokens)
    got = _core.bpe_rank_splits(tokens, "first_lower_cut")
    for (t, i), (n, parts) in zip(tokens, got):
        plain = next(
            (
                (vocab[t[:c]], vocab[t[c:]])
                for c in range(1, len(t))
                if vocab.get(t[:c], i) < i and vocab.get(t[c:], i) < i
            ),
            None,
        )
        assert (tuple(parts) if n == 2 else None) == plain
