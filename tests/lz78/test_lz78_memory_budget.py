"""LZ78 training's chunk counts in a memory budget (issue 34, as BPE's counting in
tests/bpe/test_memory_budget.py): spilled runs give exactly the unbounded file, a budget
that drops records exactly what, a budget too small is an error naming one that would do,
and an address-space limit in a child process holds."""

from __future__ import annotations

import json
import random
import re
import textwrap
import warnings

import pytest

import tokenforge
from memory_limit import LIMIT_AFTER_WARM_UP, check_bounded, check_dropped, identifier_corpus
from tokenforge import LZ78Tokenizer, _core, counting, lz78
from tokenforge.errors import TokenforgeError

WORDS = ["the", "cat", "sat", "été", "日本語", "x1", "Ωμέγα", "12345", "don't", "!!", "\t", "\n\n"]


def texts(n: int = 500, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [
            f"id{rng.getrandbits(40):x}" if rng.random() < 0.2 else rng.choice(WORDS) * rng.randint(1, 2)
            for _ in range(rng.randint(0, 40))
        ]
        out.append(" ".join(words))
    return out


def saved(tmp_path, name: str, tok) -> bytes:
    path = tmp_path / f"{name}.tsv"
    tok.save(path)
    return path.read_bytes()


def chunk_counts(docs: list[str]) -> list[tuple[bytes, int]]:
    """The chunks as LZ78's trainer counts them (GPT-4 pattern pieces), the reference."""
    wc = _core.WordCounter(_core.GPT4_PATTERN)
    wc.add_texts(docs)
    return wc.items()


@pytest.mark.parametrize("strategy", ["smart_prune", "flat_prune"])
def test_a_budget_that_drops_nothing_is_byte_identical(tmp_path, monkeypatch, strategy):
    docs = texts()
    unbounded = saved(tmp_path, "a", LZ78Tokenizer.train_from_iterator(docs, 600, strategy=strategy, max_memory="1TB"))
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)  # a run every batch
    monkeypatch.setattr(lz78, "_BATCH_CHARS", 2000)
    spills = tmp_path / "spills"
    spills.mkdir()
    in_table = []  # distinct chunks in the table when counting ends: spilled, far fewer than all
    settle = lz78.settle_budget
    monkeypatch.setattr(lz78, "settle_budget", lambda t, *a: (in_table.append(t.unique), settle(t, *a))[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = LZ78Tokenizer.train_from_iterator(docs, 600, strategy=strategy, max_memory="64MB", tmp_dir=spills)
    assert in_table[0] < len(chunk_counts(docs)) // 4
    assert saved(tmp_path, "b", tok) == unbounded
    assert b"budget_dropped" not in unbounded
    assert list(spills.iterdir()) == []  # the runs' directory is gone


def test_a_budget_that_drops_records_exactly_what(tmp_path, monkeypatch):
    docs = texts()
    items = chunk_counts(docs)
    cost = sum(_core.train_cost(len(k)) for k, _ in items)
    budget = 64 << 20
    monkeypatch.setattr(counting, "KEEP_SHARE", cost * 0.6 / budget)  # room for ~60% of the chunks' cost
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)
    monkeypatch.setattr(lz78, "_BATCH_CHARS", 2000)
    with pytest.warns(UserWarning, match=r"dropped the \d+ pieces counted fewer than \d+ times"):
        tok = LZ78Tokenizer.train_from_iterator(docs, 600, max_memory=budget, tmp_dir=tmp_path)
    tr = tok.data.settings["training"]
    check_dropped(items, tr, "unique_chunks")
    # the file records it, and reads back the same
    saved(tmp_path, "t", tok)
    assert tokenforge.load(tmp_path / "t.tsv").data.settings["training"] == tr
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tokenforge-spill")] == []


def test_a_budget_too_small_says_what_would_do(monkeypatch):
    docs = texts()
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)
    with pytest.raises(TokenforgeError, match="LZ78Tokenizer.train: max_memory=.* too small") as e:
        LZ78Tokenizer.train_from_iterator(docs, 600, max_memory="64MB")
    need = int(re.search(r"a budget of at least (\d+) bytes", str(e.value)).group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LZ78Tokenizer.train_from_iterator(docs, 600, max_memory=need)


def test_strategies_without_chunk_counts_take_the_budget_unchanged(tmp_path, monkeypatch):
    docs = texts(200)
    unbounded = saved(tmp_path, "a", LZ78Tokenizer.train_from_iterator(docs, 400, strategy="frequency_gated"))
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)  # would refuse any chunk counts: there are none
    tok = LZ78Tokenizer.train_from_iterator(docs, 400, strategy="frequency_gated", max_memory="32MB")
    assert saved(tmp_path, "b", tok) == unbounded


def test_the_cli_takes_the_budget(tmp_path, monkeypatch, capsys):
    from tokenforge.cli.lz78 import main_train

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": t}) for t in texts(100)) + "\n", encoding="utf-8")
    args = [str(corpus), "--vocab_size", "400", "--output", str(tmp_path / "d.tsv"), "-q"]
    assert main_train([*args, "--max-memory", "64MB", "--tmp_dir", str(tmp_path)]) == 0
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)
    assert main_train([*args, "--max_memory", "64MB"]) != 0
    assert "max_memory=64000000 bytes: the memory budget is too small" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# bounded memory, for real: an address-space limit in a child process
# ---------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import resource, sys, warnings
    from tokenforge import LZ78Tokenizer
    path, budget, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    # warm up: threads, their allocator arenas and the pattern, before the limit
    LZ78Tokenizer.train_from_iterator(["warm up " * 50] * 20, 400, progress=False, num_threads=2)
    """
)
CHILD += LIMIT_AFTER_WARM_UP + textwrap.dedent(
    """
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tok = LZ78Tokenizer.train(path, 400, strategy="flat_prune", progress=False, num_threads=2,
                                  max_memory=None if budget == "none" else budget, tmp_dir=tmp)
    tr = tok.data.settings["training"]
    print(tr.get("budget_dropped_unique", 0), sum("memory budget" in str(x.message) for x in w))
    """
)


def test_bounded_memory_under_an_address_space_limit(tmp_path):
    path = identifier_corpus(tmp_path / "big.jsonl", WORDS[:6])
    check_bounded(CHILD, path, tmp_path)
