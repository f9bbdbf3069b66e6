"""Counting a corpus in bounded memory (issue 34): the JSON-lines fast path, spilled
runs, the memory budget of training, and what it drops."""

from __future__ import annotations

import json
import random
import re
import textwrap
import warnings

import pytest

from memory_limit import LIMIT_AFTER_WARM_UP, check_bounded, check_dropped, identifier_corpus
from tokenforge import BPETokenizer, _core, counting
from tokenforge.counting import count_pieces, parse_memory
from tokenforge.data.corpus import iter_documents
from tokenforge.errors import CorpusError, TokenforgeError

PAT = _core.GPT4_PATTERN
WORDS = ["the", "cat", "sat", "été", "日本語", "x1", "Ωμέγα", "12345", "don't", "!!", "\t", "\n\n"]


def random_texts(rng: random.Random, n: int, idents: float = 0.1) -> list[str]:
    out = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < idents:
                words.append(f"id{rng.getrandbits(40):x}")
            else:
                words.append(rng.choice(WORDS) * rng.randint(1, 2))
        out.append(" ".join(words))
    return out


def write_jsonl(path, texts, extra_lines=()):
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=i % 2 == 0) for i, t in enumerate(texts)]
    for at, line in extra_lines:
        lines.insert(at, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def python_counts(path, pattern=PAT) -> bytes:
    """The counts through the Python reader (json.loads per line), the reference."""
    wc = _core.WordCounter(pattern)
    wc.add_texts(list(iter_documents(path)))
    return wc.to_bytes()


# ---------------------------------------------------------------------------
# the JSON-lines fast path reads exactly what the Python reader reads
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("block", [64, 1000, 1 << 20])
def test_jsonl_counting_equals_the_python_reader(tmp_path, monkeypatch, block):
    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", block)
    rng = random.Random(block)
    texts = random_texts(rng, 300) + ['quote " back \\ slash', "tab\tnl\nuni \u2028 😀"]
    extra = [(5, ""), (9, '{"text": null}'), (40, '{"text": "nan elsewhere", "x": NaN}'), (41, "   ")]
    path = write_jsonl(tmp_path / "c.jsonl", texts, extra)
    for threads in (1, 2):
        got = count_pieces(path, PAT, num_threads=threads, progress=False, max_memory="1GB")
        assert got.to_bytes() == python_counts(path)


def test_counts_held_across_blocks_are_flushed_before_any_read(tmp_path):
    # add_jsonl_block(hold=True) leaves each counting thread's most counted pieces
    # out of the table until flush(); every other method flushes first, and what
    # cannot (to_bytes, pickling) refuses rather than miss them
    texts = random_texts(random.Random(5), 200)
    body = write_jsonl(tmp_path / "c.jsonl", texts).read_bytes()
    want = python_counts(tmp_path / "c.jsonl")
    reads = {
        "count": lambda wc: wc.count(b" the"),
        "unique": lambda wc: wc.unique,
        "merged": lambda wc: _core.WordCounter.merged([wc]).to_bytes(),
        "items": lambda wc: wc.items(),
        "flush": lambda wc: wc.flush(),
    }
    for name, read in reads.items():
        wc = _core.WordCounter(PAT)
        assert wc.add_jsonl_block(b"", body, len(body), "text", True, 2, hold=True) == len(texts)
        if name == "count":
            with pytest.raises(TokenforgeError, match="flush"):
                wc.to_bytes()
        read(wc)
        if name != "items":  # (items consumes the counter)
            assert wc.to_bytes() == want, name
    wc = _core.WordCounter(PAT)
    wc.add_jsonl_block(b"", body, len(body), "text", True, 2, hold=True)
    assert dict(wc.items()) == dict(_core.WordCounter.from_bytes(want).items())


def test_jsonl_counting_reports_the_line_of_a_bad_document(tmp_path, monkeypatch):
    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", 200)
    texts = random_texts(random.Random(1), 60)
    path = write_jsonl(tmp_path / "c.jsonl", texts, [(37, '{"text": 5}')])
    with pytest.raises(CorpusError, match=r"c\.jsonl, line 38: field 'text' is int"):
        count_pieces(path, PAT, progress=False)


# ---------------------------------------------------------------------------
# spilled counting equals in-memory counting
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_spilled_counts_equal_in_memory_counts(tmp_path, seed):
    rng = random.Random(seed)
    texts = random_texts(rng, 400, idents=rng.choice([0.0, 0.1, 0.5]))
    whole = _core.WordCounter(PAT)
    whole.add_texts(texts)
    limit = rng.choice([0, 64, 1000, 20000])
    wc = _core.WordCounter(PAT)
    wc.spill_to(tmp_path, limit)
    for i in range(0, len(texts), 3):
        wc.add_texts(texts[i : i + 3])
    if limit <= 64:
        assert wc.runs > 64  # more runs than one merge opens: merged in rounds
    assert wc.runs > 1
    with pytest.raises(TokenforgeError, match="settle"):
        wc.to_bytes()
    assert wc.settle(1 << 62, 0.5, 1.0) == (0, 0, 0)
    assert wc.to_bytes() == whole.to_bytes()
    assert list(tmp_path.iterdir()) == []  # the runs are gone


def test_an_interrupted_count_leaves_nothing(tmp_path, monkeypatch):
    # a counter dropped mid-way (an exception, Ctrl-C) removes its runs
    wc = _core.WordCounter(PAT)
    wc.spill_to(tmp_path, 0)
    wc.add_texts(random_texts(random.Random(2), 50))
    spill = wc.spill_dir
    assert spill is not None and spill.parent == tmp_path and any(spill.iterdir())
    assert all(not p.name.endswith(".partial") for p in spill.iterdir())
    del wc
    assert not spill.exists()
    # training that fails half-way through the corpus: no runs, no tokenizer
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)
    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", 300)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = write_jsonl(corpus / "c.jsonl", random_texts(random.Random(3), 200), [(150, '{"text": [1]}')])
    spills = tmp_path / "spills"
    spills.mkdir()
    with pytest.raises(CorpusError, match="line 151"):
        BPETokenizer.train(path, 300, save_dir=tmp_path / "tok", max_memory="64MB", tmp_dir=spills, progress=False)
    assert list(spills.iterdir()) == []
    assert not (tmp_path / "tok").exists()


# ---------------------------------------------------------------------------
# training under a budget
# ---------------------------------------------------------------------------
def corpus(tmp_path, n=600, seed=5):
    return write_jsonl(tmp_path / "c.jsonl", random_texts(random.Random(seed), n, idents=0.2))


def trained_bytes(tmp_path, name, path, **kw) -> bytes:
    tok = BPETokenizer.train(path, 400, special_tokens=[], progress=False, **kw)
    tok.save(tmp_path / name)
    return b"".join(p.read_bytes() for p in sorted((tmp_path / name).rglob("*")) if p.is_file())


def test_a_budget_that_drops_nothing_is_byte_identical(tmp_path, monkeypatch):
    path = corpus(tmp_path)
    unbounded = trained_bytes(tmp_path, "a", path, max_memory="1TB")
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)  # a run every block
    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spilled = trained_bytes(tmp_path, "b", path, max_memory="64MB", tmp_dir=tmp_path)
    assert spilled == unbounded
    assert b"budget_dropped" not in spilled


def test_a_budget_that_drops_records_exactly_what(tmp_path, monkeypatch):
    path = corpus(tmp_path)
    whole = count_pieces(path, PAT, progress=False, max_memory="1TB")
    items = whole.items()
    cost = sum(_core.train_cost(len(k)) for k, _ in items)
    budget = 64 << 20
    monkeypatch.setattr(counting, "KEEP_SHARE", cost * 0.6 / budget)  # room for ~60% of the pieces' cost
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)
    with pytest.warns(UserWarning, match=r"dropped the \d+ pieces counted fewer than \d+ times"):
        tok = BPETokenizer.train(path, 400, special_tokens=[], progress=False, max_memory=budget, tmp_dir=tmp_path)
    tr = tok.data.training
    below = check_dropped(items, tr, "unique_pieces")
    # the merges are those of training on exactly the kept counts
    kept = _core.WordCounter(PAT)
    for k, c in items:
        if c >= below:
            kept.add_word(k, c)
    from tokenforge.bpe import _train

    ref = _train(
        kept,
        400,
        specials=[],
        pattern="gpt4",
        tie_break="pair_ids",
        min_frequency=1,
        num_threads=None,
        layout="nanochat",
        progress=False,
    )
    assert tok.mergeable_ranks() == BPETokenizer(ref).mergeable_ranks()


def test_the_growing_vocabulary_counts_under_the_budget_too(tmp_path, monkeypatch):
    from tokenforge import GrowingBPETokenizer

    path = corpus(tmp_path)
    whole = GrowingBPETokenizer(1000)
    whole.learn_merges(path, 300, max_memory="1TB")
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-6)  # a run every block
    monkeypatch.setattr(counting, "COUNT_BLOCK_BYTES", 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spilled = GrowingBPETokenizer.train(path, 1000, num_merges=300, max_memory="64MB", tmp_dir=tmp_path)
    assert spilled.merge_list == whole.merge_list and len(whole.merge_list) > 100
    assert list(tmp_path.iterdir()) == [path]  # the runs' directory is gone
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-4)
    with pytest.warns(UserWarning, match=r"dropped the \d+ pieces counted fewer than \d+ times"):
        GrowingBPETokenizer(1000).learn_merges(path, 300, max_memory="64MB", tmp_dir=tmp_path)


def test_a_budget_too_small_says_what_would_do(tmp_path, monkeypatch):
    path = corpus(tmp_path)
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)
    with pytest.raises(TokenforgeError, match="too small") as e:
        BPETokenizer.train(path, 400, progress=False, max_memory="64MB")
    need = int(re.search(r"a budget of at least (\d+) bytes", str(e.value)).group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        BPETokenizer.train(path, 400, progress=False, max_memory=need)


def test_budget_sizes():
    assert parse_memory("4GB") == 4_000_000_000
    assert parse_memory("512MiB") == 512 << 20
    assert parse_memory("1.5 GiB") == 3 << 29
    assert parse_memory(100 << 20) == 100 << 20
    for bad in ("lots", "4 parsecs", "-1GB"):
        with pytest.raises(ValueError, match="max_memory"):
            parse_memory(bad)
    with pytest.raises(ValueError, match="at least"):
        parse_memory("1kB")
    with pytest.raises(TypeError):
        parse_memory(4.0)


# ---------------------------------------------------------------------------
# bounded memory, for real: an address-space limit in a child process
# ---------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import resource, sys, warnings
    from tokenforge import BPETokenizer
    path, budget, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    # warm up: threads, their allocator arenas and the pattern, before the limit
    BPETokenizer.train_from_iterator(["warm up " * 50], 300, progress=False, num_threads=2)
    """
)
CHILD += LIMIT_AFTER_WARM_UP + textwrap.dedent(
    """
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tok = BPETokenizer.train(path, 400, progress=False, num_threads=2,
                                 max_memory=None if budget == "none" else budget, tmp_dir=tmp)
    print(tok.data.training.get("budget_dropped_unique", 0), sum("memory budget" in str(x.message) for x in w))
    """
)


def test_bounded_memory_under_an_address_space_limit(tmp_path):
    path = identifier_corpus(tmp_path / "big.jsonl", WORDS[:6])
    check_bounded(CHILD, path, tmp_path)
