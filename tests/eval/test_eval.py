"""Bits per byte (hand-computed cases, exact token bytes), compression metrics, family specs."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import tokenforge
from eval_stubs import DictTokenizer
from tokenforge.eval.bpb import BPBError, bits_per_byte, select_documents, summarize
from tokenforge.eval.families import SpecError, parse_specs
from tokenforge.eval.metrics import compression_metrics, renyi_efficiency


# ---- bits per byte: the scoring step --------------------------------------------
def test_bpb_hand_computed_uniform_model():
    # ids: 0 = BOS (special, 0 bytes), 1..3 ordinary tokens of 1, 2 and 3 bytes; vocabulary of 8
    V = 8
    token_bytes = np.array([0, 1, 2, 3, 0, 0, 0, 0])
    stream = np.array([0, 1, 2, 0, 3])  # BOS a b BOS c
    calls = []

    def uniform(inputs, targets):
        calls.append(targets.copy())
        return np.full(targets.shape, math.log(V))

    r = bits_per_byte(uniform, [stream], token_bytes, {0}, seq_len=16)
    # targets 1, 2, 0(BOS, unscored), 3 -> 3 scored tokens, 1 + 2 + 3 = 6 bytes, 3 ln 8 nats
    assert r["scored_tokens"] == 3 and r["bytes"] == 6
    assert r["nats"] == pytest.approx(3 * math.log(8))
    assert r["bpb"] == pytest.approx(3 * math.log(8) / (math.log(2) * 6))  # = 1.5 bits per byte
    assert r["bpb"] == pytest.approx(1.5)
    assert calls[0].tolist() == [[1, 2, -1, 3]]


def test_bpb_hand_computed_per_target_losses_and_windows():
    # loss depends on the target only: nll(t) = 0.1 * t nats; every target is scored once whatever the window size
    token_bytes = np.array([0, 1, 1, 2, 2, 4])
    stream = np.array([0, 5, 4, 3, 0, 2, 1, 5, 5])
    scored = [5, 4, 3, 2, 1, 5, 5]
    want_nats = sum(0.1 * t for t in scored)
    want_bytes = sum(token_bytes[t] for t in scored)
    for seq_len in (1, 2, 3, 8, 100):
        seen = []

        def nll(inputs, targets):
            assert inputs.shape == targets.shape and inputs.shape[1] <= seq_len
            seen.extend(t for t in targets.ravel().tolist() if t != -1)
            return np.where(targets >= 0, 0.1 * targets, 123.0)

        r = bits_per_byte(nll, [stream], token_bytes, [0], seq_len=seq_len, batch_size=2)
        assert sorted(seen) == sorted(scored)
        assert r["nats"] == pytest.approx(want_nats)
        assert r["bytes"] == want_bytes == 4 + 2 + 2 + 1 + 1 + 4 + 4
        assert r["bpb"] == pytest.approx(want_nats / (math.log(2) * 18))


def test_bpb_byte_check():
    tb = np.array([0, 1, 2])
    with pytest.raises(BPBError, match="UTF-8 bytes"):
        bits_per_byte(lambda i, t: np.zeros(t.shape), [np.array([0, 1, 2])], tb, [0], seq_len=4, expected_bytes=4)
    r = bits_per_byte(lambda i, t: np.zeros(t.shape), [np.array([0, 1, 2])], tb, [0], seq_len=4, expected_bytes=3)
    assert r["bpb"] == 0.0
    with pytest.raises(BPBError, match="nothing to score"):
        bits_per_byte(lambda i, t: np.zeros(t.shape), [np.array([0, 0])], tb, [0], seq_len=4)


def test_bpb_accepts_torch_losses():
    torch = pytest.importorskip("torch")
    r = bits_per_byte(
        lambda i, t: torch.full(t.shape, math.log(2.0)), [np.array([0, 1, 1])], np.array([0, 1]), [0], seq_len=4
    )
    assert r["bpb"] == pytest.approx(1.0)


# ---- exact token bytes ----------------------------------------------------------
MULTIBYTE = ("日本語のテキストです。" * 30 + "ünïcödé " * 30 + "🙂🙃😀 " * 30 + "Ελληνικά κείμενα " * 20) * 3


def test_bpe_tokens_that_are_not_valid_utf8_count_their_raw_bytes():
    tok = tokenforge.BPETokenizer.train_from_iterator([MULTIBYTE], 600, progress=False)
    tb = tok.token_bytes()
    partial = []
    for i in range(tok.vocab_size):
        if tb[i] == 0:
            continue
        raw = tok.id_to_bytes(i)
        assert tb[i] == len(raw)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            partial.append(i)
    merged_partial = [i for i in partial if i >= 256]
    assert merged_partial, "the test corpus should produce merged tokens that are not valid UTF-8 alone"
    # and a text whose encoding uses them (characters near the trained ones, sharing their
    # first bytes but never seen whole) adds up to its UTF-8 length
    text = "".join(chr(c) for c in [*range(0x65D0, 0x6600), *range(0x3040, 0x30A0), *range(0x1F600, 0x1F640)])
    ids = tok.encode_ordinary(text)
    assert set(ids) & set(merged_partial)
    nbytes = len(text.encode("utf-8"))
    assert int(tb[ids].sum()) == nbytes
    stream = np.array([tok.get_bos_token_id(), *ids])
    r = bits_per_byte(
        lambda i, t: np.ones(t.shape), [stream], tb, tok.special_tokens.values(), seq_len=64, expected_bytes=nbytes
    )
    assert r["scored_tokens"] == len(ids)
    assert r["bpb"] == pytest.approx(len(ids) / (math.log(2) * nbytes))
    # counting a token that is not valid UTF-8 as 3 bytes (nanochat's first version) breaks the check
    wrong = tb.copy()
    wrong[merged_partial] = 3
    assert int(wrong[ids].sum()) != nbytes
    with pytest.raises(BPBError):
        bits_per_byte(
            lambda i, t: np.ones(t.shape),
            [stream],
            wrong,
            tok.special_tokens.values(),
            seq_len=64,
            expected_bytes=nbytes,
        )


def test_byte_fallback_ids_count_one_byte_each():
    tok = DictTokenizer()
    n = len(tok.patterns)
    tb = tok.token_bytes()
    assert (tb[n + 1 : n + 257] == 1).all()
    assert tb[0] == 0 and all(tb[i] == 0 for i in tok.special_tokens.values())
    text = "hello é 🙂 ex"  # é and 🙂 are not in the dictionary: 2 + 4 fallback ids
    ids = tok.encode_ordinary(text)
    fallback = [i for i in ids if n < i <= n + 256]
    assert len(fallback) == 6
    assert int(tb[ids].sum()) == len(text.encode("utf-8"))
    stream = np.array([tok.get_bos_token_id(), *ids])
    r = bits_per_byte(
        lambda i, t: np.zeros(t.shape),
        [stream],
        tb,
        tok.special_tokens.values(),
        seq_len=5,
        expected_bytes=len(text.encode("utf-8")),
    )
    assert r["bytes"] == len(text.encode("utf-8"))


def test_select_documents_meets_the_budget_exactly():
    docs = ["abc", "日本", "xyz"]
    assert select_documents(docs, None) == docs
    assert select_documents(docs, 3) == ["abc"]
    assert select_documents(docs, 7) == ["abc", "日"]  # cut at a character boundary
    assert select_documents(docs, 100) == docs
    assert select_documents(iter(docs), 0) == []


def test_summarize():
    s = summarize([1.0, 2.0, 3.0])
    assert s["mean"] == 2.0 and s["std"] == pytest.approx(1.0) and s["n"] == 3
    assert summarize([1.5])["std"] == 0.0


# ---- compression metrics ------------------------------------------------------------
def test_metrics_hand_checked_on_the_stub():
    tok = DictTokenizer()
    text = "hello hello ex"  # greedy longest match: "hello", " ", "hello", " ", "ex"
    m = compression_metrics(tok, [text])
    assert tok.encode_ordinary(text) == [6, 7, 6, 7, 11]
    assert m["tokens"] == 5 and m["bytes"] == 14 and m["chars"] == 14
    assert m["bytes_per_token"] == pytest.approx(14 / 5)
    assert m["chars_per_token"] == pytest.approx(14 / 5)
    usable = len(tok.patterns) + 256
    assert m["usable_ids"] == usable and m["ids_used"] == 3
    assert m["vocab_utilisation"] == pytest.approx(3 / usable)
    assert m["token_length_histogram"] == {5: 2, 1: 2, 2: 1}
    p = np.array([2, 2, 1]) / 5
    assert m["renyi_efficiency"] == pytest.approx(math.log((p**2.5).sum()) / (1 - 2.5) / math.log(usable))
    assert m["lossless"]


def test_metrics_chars_differ_from_bytes_for_multibyte_text():
    tok = tokenforge.BPETokenizer.train_from_iterator([MULTIBYTE], 600, progress=False)
    m = compression_metrics(tok, MULTIBYTE)
    assert m["bytes"] == len(MULTIBYTE.encode()) and m["chars"] == len(MULTIBYTE)
    assert m["bytes_per_token"] > m["chars_per_token"]
    assert sum(m["token_length_histogram"].values()) == m["tokens"]
    assert 0 < m["renyi_efficiency"] < 1


def test_renyi_efficiency_extremes():
    assert renyi_efficiency(np.ones(100)) == pytest.approx(1.0)
    assert renyi_efficiency(np.array([5, 0, 0, 0])) == pytest.approx(0.0)
    assert renyi_efficiency(np.array([1, 1, 0, 0]), vocab=4) == pytest.approx(0.5)
    assert renyi_efficiency(np.array([3, 1]), alpha=1.0) > 0
    assert renyi_efficiency(np.zeros(3)) == 0.0


# ---- specs -------------------------------------------------------------------------
def test_parse_specs():
    specs = parse_specs(
        "bpe, lz78:frequency_gated, lz78:frequency_gated:nochunk, mixedgram:parse=optimal, growing:rounds=4"
    )
    assert [s.text for s in specs] == [
        "bpe",
        "lz78:frequency_gated",
        "lz78:frequency_gated:nochunk",
        "mixedgram:parse=optimal",
        "growing:rounds=4",
    ]
    assert dict(specs[4].kwargs) == {"rounds": 4}
    assert parse_specs("lz78")[0].text == "lz78:smart_prune"  # the family's one default strategy
    assert len(parse_specs("lz78:all")) == 14
    assert parse_specs("bpe,bpe")[0].label(8192) == "bpe @8192"
    assert parse_specs("mixedgram")[0].fixed_vocab
    for bad in ("wordpiece", "lz78:fast", "lz78:standard:compressed", "bpe:gpt2", "bpe:1x=2"):
        with pytest.raises(SpecError):
            parse_specs(bad)


def test_importing_the_eval_modules_pulls_in_no_heavy_dependency():
    code = (
        "import sys, tokenforge, tokenforge.eval.metrics, tokenforge.eval.bpb, tokenforge.eval.compare, "
        "tokenforge.eval.report, tokenforge.data.shards, tokenforge.torch, tokenforge.cli.compare, tokenforge.cli.main\n"
        "tokenforge.cli.main.build_parser()\n"
        "bad = [m for m in ('torch', 'matplotlib', 'dask') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_spec_refuses_an_unknown_option_naming_the_known_ones():
    from tokenforge.eval.families import SpecError, parse_specs

    with pytest.raises(SpecError, match=r"bpe has no option 'patern'.*pattern, special_tokens"):
        parse_specs("bpe:patern=gpt2")
    with pytest.raises(SpecError, match="growing has no option 'round'"):
        parse_specs("growing:round=2")
    assert parse_specs("lz78:multi_round:decay=0.5")[0].kwargs == (("decay", 0.5),)  # strategy parameters are known
