"""The memory budget (issue 34) where the first version did not hold it: parity
training's per-language counts (one budget over all languages) and counting on
a cluster (each partition's counter merged into the client's spilling counter).
The contract is BPE's: exact and byte-identical when nothing drops (with the
counting really spilled), the drop recorded exactly, a typed error for a budget
too small, bounded memory under an address-space limit."""

from __future__ import annotations

import random
import re
import textwrap
import warnings

import pytest

from memory_limit import LIMIT_AFTER_WARM_UP, check_bounded, identifier_corpus
from tokenforge import BPETokenizer, _core, counting
from tokenforge.cluster import LocalRunner
from tokenforge.counting import count_pieces
from tokenforge.data.corpus import Texts
from tokenforge.errors import TokenforgeError

PAT = _core.GPT4_PATTERN
WORDS = {
    "en": ["the", "cat", "sat", "on", "mat", "x1", "don't", "!!", "\n"],
    "de": ["die", "Katze", "saß", "auf", "größer", "12", "\t"],
    "ru": ["кошка", "сидела", "на", "коврике", "крыса", "7"],
}

# the small corpora run out of pairs before the vocabulary is full: expected here
pytestmark = pytest.mark.filterwarnings("ignore:BPE training learned")


def texts(lang: str, n: int, seed: int, idents: float = 0.2) -> list[str]:
    rng = random.Random(f"{lang}{seed}")
    out = []
    for _ in range(n):
        words = [
            f"{lang}{rng.getrandbits(30):x}" if rng.random() < idents else rng.choice(WORDS[lang])
            for _ in range(rng.randint(1, 30))
        ]
        out.append(" ".join(words))
    return out


TRAIN = {lang: texts(lang, 150 + 60 * i, 1) for i, lang in enumerate(WORDS)}
DEV = {lang: texts(lang, 5, 2, idents=0.0) for lang in WORDS}


def parity_file(tmp_path, name, **kw) -> bytes:
    tok = BPETokenizer.train_from_iterator(TRAIN, 400, parity=DEV, special_tokens=None, progress=False, **kw)
    tok.save(tmp_path / f"{name}.json")
    return (tmp_path / f"{name}.json").read_bytes()


@pytest.fixture
def runs_seen(monkeypatch):
    """The runs each counter had spilled when it was settled (counting really spilled)."""
    seen: list[int] = []
    settle = counting._settle

    def spy(counter, *args):
        seen.append(counter.runs)
        return settle(counter, *args)

    monkeypatch.setattr(counting, "_settle", spy)
    return seen


# ---------------------------------------------------------------------------
# parity training: one budget over all the languages
# ---------------------------------------------------------------------------
def test_parity_under_a_budget_that_drops_nothing_is_byte_identical(tmp_path, monkeypatch, runs_seen):
    unbounded = parity_file(tmp_path, "a", max_memory="1TB")
    runs_seen.clear()
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-7)  # a run every batch
    monkeypatch.setattr(counting, "COUNT_BATCH_CHARS", 400)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "BPE training learned")
        spilled = parity_file(tmp_path, "b", max_memory="64MB", tmp_dir=tmp_path)
    # every language's training counts spilled runs (the dev texts' too few pieces for a run)
    assert len(runs_seen) == 6 and min(runs_seen[3:]) > 1
    assert spilled == unbounded
    assert b"budget_dropped" not in spilled
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tokenforge-spill")] == []  # the runs are gone
    # the bounded mode prunes the settled counts, not the last table in memory
    runs_seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pruned = parity_file(tmp_path, "c", max_memory="64MB", tmp_dir=tmp_path, prune_below=2)
        monkeypatch.setattr(counting, "SPILL_SHARE", 0.35)
        assert pruned == parity_file(tmp_path, "d", max_memory="1TB", prune_below=2) != unbounded
    assert min(runs_seen[3:6]) > 1


def test_parity_budget_drops_each_languages_rarest_pieces_and_records_exactly(tmp_path, monkeypatch):
    exact = {lang: count_pieces(Texts(t), PAT, progress=False, max_memory="1TB").items() for lang, t in TRAIN.items()}
    cost = {lang: sum(_core.train_cost(len(k)) for k, _ in items) for lang, items in exact.items()}
    budget = 64 << 20
    keep = int(sum(cost.values()) * 0.6)
    monkeypatch.setattr(counting, "KEEP_SHARE", keep / budget)
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-7)
    monkeypatch.setattr(counting, "COUNT_BATCH_CHARS", 400)
    with pytest.warns(UserWarning, match=r"\(de\): its [0-9.]+% share of the memory budget of \d+ bytes holds"):
        tok = BPETokenizer.train_from_iterator(
            TRAIN, 400, parity=DEV, special_tokens=None, progress=False, max_memory=budget, tmp_dir=tmp_path
        )
    tr = tok.data.training
    total = sum(cost.values())
    # the dev texts are kept whole, their cost taken from the budget first
    held = sum(
        _core.train_cost(len(k)) for t in DEV.values() for k, _ in count_pieces(Texts(t), PAT, progress=False).items()
    )
    sums = [0, 0, 0]
    kept_counts = {}
    for lang, items in exact.items():
        rec = tr["parity"]["per_language"][lang]
        below = rec["budget_dropped_below"]
        dropped = [(k, c) for k, c in items if c < below]
        assert below > 1 and dropped
        assert rec["budget_dropped_unique"] == len(dropped)
        assert rec["budget_dropped_pieces"] == sum(c for _, c in dropped)
        # the kept pieces' cost is the most that fits the language's share of the budget
        share = (int(budget * counting.KEEP_SHARE) - held) * cost[lang] // total
        kept_cost = sum(_core.train_cost(len(k)) for k, c in items if c >= below)
        next_cost = sum(_core.train_cost(len(k)) for k, c in items if c == below - 1)
        assert kept_cost <= share < kept_cost + next_cost
        sums = [sums[0] + len(dropped), sums[1] + rec["budget_dropped_pieces"], max(sums[2], below)]
        kept_counts[lang] = [(k, c) for k, c in items if c >= below]
    assert [tr["budget_dropped_unique"], tr["budget_dropped_pieces"], tr["budget_dropped_below"]] == sums
    assert tr["unique_pieces"] == sum(len(v) for v in kept_counts.values())
    # the merges are those of parity training on exactly the kept counts
    from tokenforge.bpe import _train
    from tokenforge.bpe_parity import ParityCounts, ParitySettings

    langs = sorted(WORDS)
    train = []
    for lang in langs:
        wc = _core.WordCounter(PAT)
        for k, c in kept_counts[lang]:
            wc.add_word(k, c)
        train.append(wc)
    dev = [count_pieces(Texts(DEV[lang]), PAT, progress=False, max_memory="1TB") for lang in langs]
    counts = ParityCounts(langs, train, dev, [1] * 3, [d.total_bytes for d in dev], ParitySettings())
    kw = dict(specials=[], pattern=None, tie_break="pair_ids", min_frequency=1, num_threads=None)
    ref = _train(counts, 400, layout="nanochat", progress=False, **kw)
    assert tok.merges == BPETokenizer(ref).merges


def test_parity_budget_too_small_says_what_would_do(monkeypatch):
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)
    kw = dict(parity=DEV, special_tokens=None, progress=False)
    with pytest.raises(TokenforgeError, match=r"max_memory=\d+ bytes: the memory budget is too small: what is kept"):
        BPETokenizer.train_from_iterator(TRAIN, 400, max_memory="64MB", **kw)  # the dev texts alone pass it
    # each message names a budget for the whole (the dev texts', then a language's)
    need = 0
    for _ in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                BPETokenizer.train_from_iterator(TRAIN, 400, max_memory=max(need, 64 << 20), **kw)
            break
        except TokenforgeError as e:
            need = int(re.search(r"a budget of at least (\d+) bytes", str(e)).group(1))
            assert re.search(r"\((de|en|ru)\): max_memory|what is kept whole \(the dev texts\)", str(e)), str(e)
    else:
        pytest.fail("no budget named would do")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        BPETokenizer.train_from_iterator(TRAIN, 400, max_memory=need, **kw)


PARITY_CHILD = textwrap.dedent(
    """
    import resource, sys, warnings
    from pathlib import Path
    from tokenforge import BPETokenizer
    path, budget, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    dev = Path(tmp) / "dev.txt"
    dev.write_text("the cat sat on the mat")
    BPETokenizer.train_from_iterator(["warm up " * 50], 300, progress=False, num_threads=2)
    """
)
PARITY_CHILD += LIMIT_AFTER_WARM_UP + textwrap.dedent(
    """
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tok = BPETokenizer.train({"en": [path], "de": [path]}, 400, parity={"en": str(dev), "de": str(dev)},
                                 progress=False, num_threads=2, special_tokens=None,
                                 max_memory=None if budget == "none" else budget, tmp_dir=tmp)
    dev.unlink()
    print(tok.data.training.get("budget_dropped_unique", 0), sum("memory budget" in str(x.message) for x in w))
    """
)


def test_parity_bounded_under_an_address_space_limit(tmp_path):
    # the same corpus as both languages: twice the distinct pieces of BPE's own test
    path = identifier_corpus(tmp_path / "big.jsonl", WORDS["en"][:6])
    check_bounded(PARITY_CHILD, path, tmp_path, warnings=2)


# ---------------------------------------------------------------------------
# counting on a cluster: the budget holds on the client
# ---------------------------------------------------------------------------
def cluster_corpus(tmp_path):
    files = []
    for k, lang in enumerate(WORDS):
        p = tmp_path / f"part{k}.txt"
        p.write_text("\n".join(texts(lang, 200, k)), encoding="utf-8")
        files.append(p)
    return files


def test_cluster_counting_under_a_budget_equals_local_counting(tmp_path, monkeypatch, runs_seen):
    files = cluster_corpus(tmp_path)
    want = count_pieces(files, PAT, progress=False, max_memory="1TB").to_bytes()
    runs_seen.clear()
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-7)  # a run every partition
    spills = tmp_path / "spills"
    spills.mkdir()
    run = LocalRunner(progress=False)
    got = count_pieces(files, PAT, client=run, max_memory="64MB", tmp_dir=spills, target_bytes=2000)
    assert runs_seen[0] >= len(files) and got.to_bytes() == want  # a run per partition merged
    got = count_pieces(Texts([f.read_text() for f in files]), PAT, client=run, max_memory="64MB", tmp_dir=spills)
    assert got.to_bytes() == count_pieces(Texts([f.read_text() for f in files]), PAT, max_memory="1TB").to_bytes()
    assert list(spills.iterdir()) == []


def test_training_on_a_cluster_under_a_budget(tmp_path, monkeypatch, dask_client, runs_seen):
    files = cluster_corpus(tmp_path)
    kw = dict(special_tokens=[], progress=False)

    def trained(name, **more):
        tok = BPETokenizer.train(files, 400, **kw, **more)
        tok.save(tmp_path / f"{name}.json")
        return tok, (tmp_path / f"{name}.json").read_bytes()

    _, local = trained("local", max_memory="1TB")
    runs_seen.clear()
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-7)
    _, spilled = trained("dask", client=dask_client, max_memory="64MB", tmp_dir=tmp_path)
    assert runs_seen[0] > 1 and spilled == local  # merged on the client, spilling, exact
    # a budget that drops: the same drop as counting here under the same budget
    items = count_pieces(files, PAT, progress=False, max_memory="1TB").items()
    monkeypatch.setattr(counting, "KEEP_SHARE", sum(_core.train_cost(len(k)) for k, _ in items) * 0.6 / (64 << 20))
    with pytest.warns(UserWarning, match="dropped the"):
        here, _ = trained("here", max_memory="64MB", tmp_dir=tmp_path)
    with pytest.warns(UserWarning, match="dropped the"):
        there, _ = trained("there", max_memory="64MB", tmp_dir=tmp_path, client=dask_client)
    assert here.data == there.data and there.data.training["budget_dropped_unique"] > 0


CLUSTER_CHILD = textwrap.dedent(
    """
    import resource, sys, warnings
    import distributed
    from tokenforge import BPETokenizer
    path, budget, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    if __name__ == "__main__":
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
        client = distributed.Client(cluster)
        # warm up: the cluster's threads and comms, the counting threads, before the limit
        BPETokenizer.train_from_iterator(["warm up " * 50] * 4, 300, progress=False, client=client, num_threads=2)
    """
)
CLUSTER_CHILD += textwrap.indent(LIMIT_AFTER_WARM_UP, "    ") + textwrap.indent(
    textwrap.dedent(
        """
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            tok = BPETokenizer.train([path], 400, progress=False, client=client, max_memory=budget, tmp_dir=tmp)
        print(tok.data.training.get("budget_dropped_unique", 0), sum("memory budget" in str(x.message) for x in w))
        """
    ),
    "    ",
)


def test_cluster_client_bounded_under_an_address_space_limit(tmp_path):
    # an in-process cluster (its worker's memory is the child's too): the client's counter spills
    path = identifier_corpus(tmp_path / "big.jsonl", WORDS["en"][:6])
    check_bounded(CLUSTER_CHILD, path, tmp_path)
