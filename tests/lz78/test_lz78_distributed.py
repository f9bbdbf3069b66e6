"""LZ78 training on a cluster (issue 13): the saved file is byte-identical to
single-machine training, for every strategy, in process (the runner seam's
LocalRunner) and on a real two-process LocalCluster; the pool strategies
count dictionary usage on the workers (UsageCounts) and never bring the
chunk counts to the client."""

from __future__ import annotations

import json
import pickle

import pytest

from tokenforge import LZ78Tokenizer, _core
from tokenforge import cluster as cluster_mod
from tokenforge.cluster import LocalRunner
from tokenforge.data.corpus import train_documents
from tokenforge.errors import FormatError, TokenforgeError
from tokenforge.lz78 import STRATEGIES

POOL_STRATEGIES = ["multi_round", "cost_adjusted", "smart_prune", "compressed"]

VOCAB = 1024


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four files in corpus order, ~190 KB: .txt (documents split on blank
    lines) and .jsonl (an empty document among them), the first one small so
    that standard fills up in a later file."""
    from tokenforge.data.default_corpus import _topics

    topics = [t for t in _topics() if t.strip()][:120] or ["Hello, world! 日本語 🙂 " * 200] * 40
    d = tmp_path_factory.mktemp("lz78_corpus")
    groups = [[topics[0][:3000]], topics[1:40], topics[40:80], topics[80:]]
    paths = []
    for k, docs in enumerate(groups):
        if k % 2 == 0:
            p = d / f"part{k}.txt"
            p.write_text("\n\n".join(t.replace("\n\n", "\n") for t in docs) + "\n", encoding="utf-8")
        else:
            p = d / f"part{k}.jsonl"
            lines = [json.dumps({"text": t}) for t in docs]
            lines.insert(3, json.dumps({"text": ""}))
            p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(p))
    return paths


def _saved(tok: LZ78Tokenizer, path) -> bytes:
    tok.save(path)
    return path.read_bytes()


def _both(tmp_path, corpus, strategy, client, **kw) -> tuple[bytes, bytes, LZ78Tokenizer]:
    one = LZ78Tokenizer.train(corpus, VOCAB, strategy=strategy, split_on="\n\n", progress=False, **kw)
    dist = LZ78Tokenizer.train(corpus, VOCAB, strategy=strategy, split_on="\n\n", progress=False, client=client, **kw)
    return _saved(one, tmp_path / "one.tsv"), _saved(dist, tmp_path / "dist.tsv"), one


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_in_process_equals_one_machine(tmp_path, corpus, strategy):
    one, dist, tok = _both(tmp_path, corpus, strategy, LocalRunner(progress=False))
    assert one == dist
    stats = tok.data.settings["training"]
    docs = list(train_documents(corpus, split_on="\n\n"))
    if strategy == "standard":
        first = sum(len(d.encode()) for d in train_documents(corpus[:1], split_on="\n\n"))
        assert first < stats["corpus_bytes"]  # it filled up in a later file,
        assert stats["texts"] < len(docs)  # and stopped reading
    else:
        assert (stats["texts"], stats["corpus_bytes"]) == (len(docs), sum(len(d.encode()) for d in docs))
    if strategy not in ("standard", "frequency_gated"):
        assert stats["unique_chunks"] > 0


@pytest.mark.parametrize(
    ("strategy", "params"),
    [
        ("smart_prune", {"pool": "standard"}),
        ("multi_round", {"evict_interval": 50, "decay": 0.5, "rounds": 2}),
        ("frequency_gated", {"evict_threshold": 2}),
        ("flat_prune", {"max_chars": 6, "drop_fraction": 0.3}),
    ],
)
def test_strategy_parameters_in_process(tmp_path, corpus, strategy, params):
    one, dist, _ = _both(tmp_path, corpus, strategy, LocalRunner(progress=False), **params)
    assert one == dist


@pytest.mark.parametrize("strategy", ["frequency_gated", "smart_prune", "compressed"])
def test_unchunked_in_process(tmp_path, corpus, strategy):
    one, dist, _ = _both(tmp_path, corpus, strategy, LocalRunner(progress=False), chunking=False)
    assert one == dist


def test_iterator_refuses_a_client():
    with pytest.raises(TokenforgeError, match="train_from_iterator cannot use a cluster"):
        LZ78Tokenizer.train_from_iterator(["some text"], VOCAB, strategy="smart_prune", client=LocalRunner())


def test_finish_refuses_mismatched_inputs():
    online = _core.Lz78Online("smart_prune", 10, _core.GPT4_PATTERN)
    online.feed(["the cat sat on the mat"])
    pool = online.finish()
    with pytest.raises(TokenforgeError, match="needs the corpus's chunk counts"):
        _core.lz78_finish("smart_prune", 10, pool, None, 1, 22)
    with pytest.raises(TokenforgeError, match="takes no pool"):
        _core.lz78_finish("flat_prune", 10, pool, _core.WordCounter(_core.GPT4_PATTERN), 1, 22)
    with pytest.raises(TokenforgeError, match="a parent must be 0 or an earlier entry"):
        _core.lz78_finish("standard", 10, ([0, 5], "ab", 0, 0), None, 1, 2)
    with pytest.raises(TokenforgeError, match="builds no dictionary online"):
        _core.Lz78Online("flat_prune", 10, None)


# ---- dictionary-usage counts ------------------------------------------------------------
def test_usage_counts_round_trip_merge_and_pickle():
    a = _core.UsageCounts([0, 1, 300, 2**64 - 6])
    b = _core.UsageCounts.from_bytes(a.to_bytes())
    assert b == a and b.counts() == [0, 1, 300, 2**64 - 6] and len(b) == 4
    assert pickle.loads(pickle.dumps(a)) == a
    c = _core.UsageCounts([0, 2, 3, 5])
    c.merge(a)
    assert c.counts() == [0, 3, 303, 2**64 - 1]
    assert _core.UsageCounts.merged([a, _core.UsageCounts([0, 2, 3, 5])]) == c
    with pytest.raises(TokenforgeError, match="overflows"):
        c.merge(a)
    with pytest.raises(TokenforgeError, match="not the same pool"):
        c.merge(_core.UsageCounts([0, 1]))
    with pytest.raises(TokenforgeError, match="at least one"):
        _core.UsageCounts.merged([])


def test_usage_counts_damaged_bytes_are_format_errors():
    blob = _core.UsageCounts([0, 7, 128, 99999]).to_bytes()
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x21
        with pytest.raises(FormatError, match="byte offset"):
            _core.UsageCounts.from_bytes(bytes(bad))
    for cut in range(len(blob)):
        with pytest.raises(FormatError):
            _core.UsageCounts.from_bytes(blob[:cut])
    with pytest.raises(FormatError, match="not dictionary-usage counts"):
        _core.UsageCounts.from_bytes(_core.WordCounter(None).to_bytes())


def _pool_and_counter():
    texts = ["the cat sat on the mat, then the hat", "that is the theme of these mathematics " * 3]
    online = _core.Lz78Online("smart_prune", 8, _core.GPT4_PATTERN)
    online.feed(texts)
    parents, chars, _, _ = online.finish()
    counter = _core.WordCounter(_core.GPT4_PATTERN)
    counter.add_texts(texts)
    return parents, chars, counter


def test_usage_pool_counts_and_pickles():
    parents, chars, counter = _pool_and_counter()
    pool = _core.Lz78UsagePool(parents, chars)
    assert pool.codes == len(parents) + 1
    # a round's mask, as lz78_finish hands it over: get one from a callback
    masks: list[bytes] = []

    def usage(mask: bytes):
        masks.append(mask)
        return pool.usage(counter, mask)

    _core.lz78_finish("smart_prune", 8, (parents, chars, 0, 0), None, 2, 1, unique_chunks=counter.unique, usage=usage)
    assert len(masks) == 6  # smart_prune's default rounds
    first = pool.usage(counter, masks[0])
    assert first == pickle.loads(pickle.dumps(pool)).usage(counter, masks[0])
    assert sum(first.counts()) > 0 and first.counts()[0] == 0
    assert pool.usage(counter, masks[-1]) != first  # fewer outputs: other counts
    assert counter.unique > 0  # the counter is read, not consumed
    bad = bytearray(masks[0])
    bad[7] ^= 0x01
    with pytest.raises(FormatError):
        pool.usage(counter, bytes(bad))
    other = _core.Lz78UsagePool(parents[:3], chars[:3])
    with pytest.raises(TokenforgeError, match="mask has"):
        other.usage(counter, masks[0])


def test_finish_usage_callback_errors():
    parents, chars, counter = _pool_and_counter()
    pool = (parents, chars, 0, 0)

    class Boom(Exception):
        pass

    def boom(mask):
        raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        _core.lz78_finish("smart_prune", 8, pool, None, 2, 1, unique_chunks=1, usage=boom)
    with pytest.raises(TypeError):
        _core.lz78_finish("smart_prune", 8, pool, None, 2, 1, unique_chunks=1, usage=lambda m: [1, 2])
    with pytest.raises(TokenforgeError, match="usage counts of 2 codes"):
        _core.lz78_finish(
            "smart_prune", 8, pool, None, 2, 1, unique_chunks=1, usage=lambda m: _core.UsageCounts([0, 1])
        )
    with pytest.raises(TokenforgeError, match="give unique_chunks and no counter"):
        _core.lz78_finish("smart_prune", 8, pool, counter, 2, 1, unique_chunks=1, usage=boom)
    with pytest.raises(TokenforgeError, match="needs the chunks themselves"):
        _core.lz78_finish("flat_prune", 8, None, None, 2, 1, unique_chunks=1, usage=boom)


def _record_gathers(monkeypatch) -> list:
    """Patch both runners' gather to record every value that reaches the client."""
    seen: list = []

    def flat(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                flat(y)
        elif isinstance(x, dict):
            for y in x.values():
                flat(y)
        else:
            seen.append(x)

    for cls in (cluster_mod.LocalRunner, cluster_mod.DaskRunner):
        orig = cls.gather

        def gather(self, handles, _orig=orig):
            out = _orig(self, handles)
            flat(out)
            return out

        monkeypatch.setattr(cls, "gather", gather)
    return seen


@pytest.mark.parametrize("strategy", POOL_STRATEGIES + ["flat_prune"])
def test_pool_strategies_do_not_gather_chunk_counts(tmp_path, corpus, monkeypatch, strategy):
    seen = _record_gathers(monkeypatch)
    LZ78Tokenizer.train(
        corpus, VOCAB, strategy=strategy, split_on="\n\n", progress=False, client=LocalRunner(progress=False)
    )
    counters = [x for x in seen if isinstance(x, _core.WordCounter)]
    if strategy == "flat_prune":
        assert len(counters) == 1  # its candidates are made from the chunks: they come here
    else:
        assert counters == []
        rounds = 6 if strategy == "smart_prune" else 3  # the default rounds
        assert sum(isinstance(x, _core.UsageCounts) for x in seen) == rounds


# ---- a real cluster: two worker processes (the session's dask_client) -----------------
@pytest.mark.parametrize("strategy", POOL_STRATEGIES)
def test_pool_strategies_on_a_local_cluster(tmp_path, corpus, dask_client, monkeypatch, strategy):
    seen = _record_gathers(monkeypatch)
    one, dist, _ = _both(tmp_path, corpus, strategy, dask_client)
    assert one == dist
    assert not any(isinstance(x, _core.WordCounter) for x in seen)
    assert any(isinstance(x, _core.UsageCounts) for x in seen)


def test_flat_prune_on_a_local_cluster_by_address(tmp_path, corpus, dask_client):
    one, dist, _ = _both(tmp_path, corpus, "flat_prune", dask_client.scheduler.address)
    assert one == dist
