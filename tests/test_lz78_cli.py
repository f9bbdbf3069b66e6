"""The seed's scripts and the `tokenforge lz78 ...` subcommands."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tokenforge import LZ78Tokenizer
from tokenforge.cli import lz78 as cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [f"Document {i}: the quick brown fox jumps over the lazy dog {i * 7}.\n" * (1 + i % 5) for i in range(300)]


@pytest.fixture()
def corpus(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS))
    return p


def test_train_setup_pretokenize(tmp_path, corpus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main_train(["--strategy", "smart_prune", "--vocab_size", "400", "--input", str(corpus), "-q"]) == 0
    tsv = tmp_path / "lz78_smart_prune_400.tsv"
    assert tsv.read_text().startswith("# tokenforge lz78 v1\n")
    assert cli.main_setup(["--tsv_path", str(tsv), "--tsv_format", "lz78"]) == 0
    tok = LZ78Tokenizer.from_directory(tmp_path / "tokenizer")
    assert "<|user_start|>" in tok.special_tokens  # nanochat's chat tokens by default
    tb = np.load(tmp_path / "tokenizer" / "token_bytes.npy")
    assert tb.shape == (tok.vocab_size,)
    assert cli.main_pretokenize(["--input", str(corpus), "--shard_tokens", "2000", "-q"]) == 0
    index = json.loads((tmp_path / "pretokenized" / "index.json").read_text())
    assert index["complete"] and index["documents_done"] == len(DOCS)
    arr = np.concatenate([np.load(tmp_path / "pretokenized" / s["file"]) for s in index["shards"]])
    assert arr.dtype == np.uint16
    bos = tok.get_bos_token_id()
    docs = np.split(arr, np.nonzero(arr == bos)[0])[1:]
    assert [tok.decode(d[1:].tolist()) for d in docs] == DOCS
    assert all(s["tokens"] >= 2000 for s in index["shards"][:-1])


def test_pretokenize_resumes(tmp_path):
    tok = LZ78Tokenizer.train(DOCS, "frequency_gated", 400, progress=False)
    out = tmp_path / "shards"

    def broken():
        yield from DOCS[:200]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cli.pretokenize(tok, broken(), out, shard_tokens=1500, batch_docs=16, progress=False)
    partial = json.loads((out / "index.json").read_text())
    assert not partial["complete"] and 0 < partial["documents_done"] <= 200
    index = cli.pretokenize(tok, iter(DOCS), out, shard_tokens=1500, batch_docs=16, progress=False)
    assert index["complete"] and index["documents_done"] == len(DOCS)
    fresh = cli.pretokenize(tok, iter(DOCS), tmp_path / "fresh", shard_tokens=1500, batch_docs=16, progress=False)
    a = np.concatenate([np.load(out / s["file"]) for s in index["shards"]])
    b = np.concatenate([np.load(tmp_path / "fresh" / s["file"]) for s in fresh["shards"]])
    assert np.array_equal(a, b)
    # a different tokenizer must not append to these shards
    other = LZ78Tokenizer.train(DOCS, "standard", 420, progress=False)
    with pytest.raises(Exception, match="different"):
        cli.pretokenize(other, iter(DOCS), out, tokenizer_sha256="x", progress=False)


def test_subcommands_register():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    cli.add_parser(sub)
    args = parser.parse_args(["lz78", "train", "--strategy", "flat_prune", "--vocab_size", "1000"])
    assert args.func is cli.cmd_train and args.strategy == "flat_prune"
    args = parser.parse_args(["lz78", "setup", "--tsv_path", "x.tsv", "--tsv_format", "compressed"])
    assert args.func is cli.cmd_setup
    args = parser.parse_args(["lz78", "pretokenize"])
    assert args.func is cli.cmd_pretokenize


def test_scripts_run_as_scripts(tmp_path, corpus):
    script = ROOT / "scripts" / "lz78_tok_train.py"
    out = tmp_path / "d.tsv"
    r = subprocess.run(
        [sys.executable, str(script), "--strategy", "compressed", "--vocab_size", "700", "--input", str(corpus), "--output", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    tok = LZ78Tokenizer.from_tsv(out, tsv_format="compressed")
    assert tok.structure == "compressed"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lz78_setup_tokenizer.py"), "--tsv_path", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "tsv_format='compressed'" in r.stderr  # the error tells the user what to pass
