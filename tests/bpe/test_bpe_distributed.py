"""BPE and growing-vocabulary training on a Dask cluster: the same files as on one machine."""

from __future__ import annotations

import random

import pytest

from tokenforge import BPETokenizer, GrowingBPETokenizer
from tokenforge.cluster import LocalRunner

distributed = pytest.importorskip("distributed")


def _corpus(tmp_path):
    rng = random.Random(5)
    syllables = ["th", "e", "ca", "t", "sa", "on", "ma", "é", "té", "üb", "er", "42", "7", "🙂", "'t", "do", "n"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    words += ["\n", "  ", "\n\n", "x" * 30]
    files = []
    for k in range(5):
        p = tmp_path / f"part{k}.txt"
        p.write_text(" ".join(rng.choice(words) for _ in range(3000 + 500 * k)), encoding="utf-8")
        files.append(p)
    js = tmp_path / "docs.jsonl"
    js.write_text("".join('{"text": "%s"}\n' % " ".join(rng.choice(words[:9]) for _ in range(40)) for _ in range(60)))
    return [*files, js]


def _bpe_bytes(tmp_path, name, **kw) -> bytes:
    out = tmp_path / f"{name}.json"
    BPETokenizer.train(kw.pop("corpus"), 400, **kw).save(out)
    return out.read_bytes()


def test_bpe_in_process_runner_equals_single_machine(tmp_path):
    files = _corpus(tmp_path)
    want = _bpe_bytes(tmp_path, "one", corpus=files, progress=False)
    assert _bpe_bytes(tmp_path, "runner", corpus=files, client=LocalRunner(progress=False)) == want


def test_seed_mode_in_process_runner_equals_single_machine(tmp_path):
    p = tmp_path / "seed.txt"
    p.write_text("hello world<|endoftext|>hello there<|endoftext|>" * 50, encoding="utf-8")
    a, b = tmp_path / "a", tmp_path / "b"
    BPETokenizer().train(input_path=str(p), vocab_size=266, save_dir=a)
    BPETokenizer().train(input_path=str(p), vocab_size=266, save_dir=b, client=LocalRunner(progress=False))
    assert (a / "tokenforge.json").read_bytes() == (b / "tokenforge.json").read_bytes()


def test_bpe_on_a_local_cluster_is_byte_identical(tmp_path, dask_client):
    files = _corpus(tmp_path)
    want = _bpe_bytes(tmp_path, "one", corpus=files, progress=False)
    assert _bpe_bytes(tmp_path, "dask", corpus=files, client=dask_client, progress=False) == want
    # texts held by the client travel in batches and count the same
    texts = [f.read_text(encoding="utf-8") for f in files[:3]]
    a = BPETokenizer.train_from_iterator(texts, 350, progress=False)
    b = BPETokenizer.train_from_iterator(texts, 350, progress=False, client=dask_client)
    assert a.data == b.data


def test_growing_on_a_local_cluster_is_byte_identical(tmp_path, dask_client):
    files = _corpus(tmp_path)
    one = GrowingBPETokenizer.train(files, 700)
    dask = GrowingBPETokenizer.train(files, 700, client=dask_client)
    one.save(tmp_path / "one.json")
    dask.save(tmp_path / "dask.json")
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "dask.json").read_bytes()
    # learn_merges from a second source: files read by the workers, or texts shipped to them
    extra = tmp_path / "extra.txt"
    extra.write_text("tokenization tokenizer tokens token " * 200, encoding="utf-8")
    n1 = one.learn_merges([extra], 20, source="extra")
    n2 = dask.learn_merges([extra], 20, source="extra", client=dask_client)
    n3 = GrowingBPETokenizer.train(files, 700).learn_merges(
        iter([extra.read_text(encoding="utf-8")]), 20, source="extra", client=dask_client
    )
    assert n1 == n2 == n3 > 0
    one.save(tmp_path / "one.json")
    dask.save(tmp_path / "dask.json")
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "dask.json").read_bytes()


def test_bounded_mode_is_recorded(tmp_path):
    files = _corpus(tmp_path)
    tok = BPETokenizer.train(files, 400, client=LocalRunner(progress=False), prune_below=3)
    t = tok.data.training
    assert t["pruned_below"] == 3 and t["pruned_unique"] > 0 and t["pruned_pieces"] >= t["pruned_unique"]
    assert "pruned_below" not in BPETokenizer.train(files, 400, progress=False).data.training


def test_bad_client_is_a_clear_error(tmp_path):
    files = _corpus(tmp_path)
    with pytest.raises(TypeError, match="client must be"):
        BPETokenizer.train(files, 300, client=42)


def test_fsspec_urls_read_the_same_here_and_on_workers(tmp_path):
    files = _corpus(tmp_path)
    want = _bpe_bytes(tmp_path, "paths", corpus=files, progress=False)
    urls = [f.as_uri() for f in files]  # file:///...: fsspec's local filesystem
    assert _bpe_bytes(tmp_path, "urls", corpus=urls, progress=False) == want
    assert _bpe_bytes(tmp_path, "urls_runner", corpus=urls, client=LocalRunner(progress=False)) == want
    mixed = [urls[0], str(files[1]), *urls[2:]]
    assert _bpe_bytes(tmp_path, "mixed", corpus=mixed, progress=False) == want


def _parity_args(tmp_path) -> dict:
    """Three languages' training files and dev files, as BPETokenizer.train takes them."""
    files = _corpus(tmp_path)
    corpus = {"en": files[:2], "de": files[2:4], "fr": [files[4]]}
    dev = {}
    for lang, fs in corpus.items():
        dev[lang] = str(tmp_path / f"dev.{lang}.txt")
        (tmp_path / f"dev.{lang}.txt").write_text(fs[0].read_text(encoding="utf-8")[:400], encoding="utf-8")
    return dict(corpus=corpus, parity=dev, parity_global_merges=0.25, progress=False)


def test_parity_training_counts_on_a_runner_the_same(tmp_path):
    # parity-aware BPE counts each language's training text where the client says; same file
    kw = _parity_args(tmp_path)
    want = _bpe_bytes(tmp_path, "one", **kw)
    assert _bpe_bytes(tmp_path, "runner", client=LocalRunner(progress=False), **dict(kw)) == want


def test_parity_training_connects_to_a_scheduler_address_once(tmp_path, dask_client, monkeypatch):
    # a scheduler address is connected once for all the languages' counting, not once per language
    kw = _parity_args(tmp_path)
    want = _bpe_bytes(tmp_path, "one", **kw)
    opened = []

    class CountingClient(distributed.Client):
        def __init__(self, *args, **kwargs):
            opened.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "Client", CountingClient)
    address = dask_client.scheduler.address
    assert _bpe_bytes(tmp_path, "address", client=address, **dict(kw)) == want
    assert opened == [(address,)]
