"""The command line on a Dask cluster: --scheduler ADDR on train, lz78 train, grow learn,
mixedgram compress and pretokenize gives the files the single-machine commands give."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tokenforge.cli.main import main
from tokenforge.data.shards import ShardSet


@pytest.fixture
def corpus(tmp_path):
    rng = random.Random(3)
    syllables = ["th", "e", "ca", "t", "sa", "on", "ma", "é", "té", "er", "42", "do", "n", "ing", " "]
    files = []
    for k in range(3):
        p = tmp_path / f"c{k}.txt"
        lines = ["".join(rng.choice(syllables) for _ in range(rng.randint(5, 60))) for _ in range(400)]
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(str(p))
    return files


def test_train_and_pretokenize_with_scheduler(tmp_path, corpus, dask_client, capsys):
    addr = dask_client.scheduler.address
    assert main(["train", *corpus, "--vocab-size", "400", "-o", str(tmp_path / "one.json"), "-q"]) == 0
    assert (
        main(["train", *corpus, "--vocab-size", "400", "-o", str(tmp_path / "dask.json"), "-q", "--scheduler", addr])
        == 0
    )
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "dask.json").read_bytes()

    tok = str(tmp_path / "one.json")
    assert main(["pretokenize", *corpus, "--tokenizer", tok, "-o", str(tmp_path / "s1"), "-q"]) == 0
    assert (
        main(
            ["pretokenize", *corpus, "--tokenizer", tok, "-o", str(tmp_path / "s2"), "-q", "--scheduler", addr]
            + ["--partition-mb", "0.01"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "tokens from" in out
    a, b = ShardSet(tmp_path / "s1"), ShardSet(tmp_path / "s2")
    assert b.num_shards > a.num_shards  # one task per partition, each with its own shard files
    docs_a, docs_b = list(a.iter_documents()), list(b.iter_documents())
    assert len(docs_a) == len(docs_b) and all(np.array_equal(x, y) for x, y in zip(docs_a, docs_b))


def test_lz78_grow_and_mixedgram_with_scheduler(tmp_path, corpus, dask_client):
    addr = dask_client.scheduler.address
    for name, extra in (("one", []), ("dask", ["--scheduler", addr])):
        args = ["lz78", "train", "--strategy", "flat_prune", "--vocab_size", "600", "--input", *corpus]
        assert main([*args, "--output", str(tmp_path / f"{name}.tsv"), "-q", *extra]) == 0
        grow = ["grow", "learn", "--tokenizer", str(tmp_path / f"{name}_grow.json"), "--source", "c"]
        assert main([*grow, "--num-merges", "50", "-q", *corpus, *extra]) == 0
        assert main(["mixedgram", "compress", corpus[0], str(tmp_path / f"{name}.mxgram"), "-q", *extra]) == 0
    for suffix in (".tsv", "_grow.json", ".mxgram"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"dask{suffix}").read_bytes(), suffix


def test_scheduler_errors_are_one_line(tmp_path, corpus, capsys):
    args = ["lz78", "train", "--input", *corpus, "--max_chars", "10", "--scheduler", "tcp://127.0.0.1:1"]
    assert main(args) == 1
    assert "--max_chars cannot be used with --scheduler" in capsys.readouterr().err
