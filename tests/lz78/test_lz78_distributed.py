"""LZ78 training on a cluster (issue 13): the saved file is byte-identical to
single-machine training, for every strategy, in process (the runner seam's
LocalRunner) and on a real two-process LocalCluster."""

from __future__ import annotations

import json

import pytest

from tokenforge import LZ78Tokenizer, _core
from tokenforge.cluster import LocalRunner
from tokenforge.data.corpus import train_documents
from tokenforge.errors import TokenforgeError
from tokenforge.lz78 import STRATEGIES

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
    one = LZ78Tokenizer.train(corpus, strategy, VOCAB, split_on="\n\n", progress=False, **kw)
    dist = LZ78Tokenizer.train(corpus, strategy, VOCAB, split_on="\n\n", progress=False, client=client, **kw)
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
        LZ78Tokenizer.train_from_iterator(["some text"], "smart_prune", VOCAB, client=LocalRunner())


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


# ---- a real cluster: two worker processes -------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c,
        distributed.Client(c) as client,
    ):
        yield c, client


def test_smart_prune_on_a_local_cluster(tmp_path, corpus, cluster):
    _, client = cluster
    one, dist, _ = _both(tmp_path, corpus, "smart_prune", client)
    assert one == dist


def test_flat_prune_on_a_local_cluster_by_address(tmp_path, corpus, cluster):
    c, _ = cluster
    one, dist, _ = _both(tmp_path, corpus, "flat_prune", c.scheduler_address)
    assert one == dist
