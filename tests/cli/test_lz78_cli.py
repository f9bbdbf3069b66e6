"""The seed's scripts and the `tokenforge lz78 ...` subcommands."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from repo_paths import ROOT
from tokenforge import LZ78Tokenizer
from tokenforge.cli import lz78 as cli
from tokenforge.data.shards import ShardError, ShardSet

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
    assert tsv.read_text().startswith("# tokenforge lz78 v2\n")
    assert cli.main_setup(["--tsv_path", str(tsv), "--tsv_format", "lz78"]) == 0
    tok = LZ78Tokenizer.from_directory(tmp_path / "tokenizer")
    tb = np.load(tmp_path / "tokenizer" / "token_bytes.npy")
    assert tb.shape == (tok.vocab_size,)
    assert cli.main_pretokenize(["--input", str(corpus), "--shard_tokens", "2000", "-q"]) == 0
    # the one shard format: ShardSet reads it, with documents and byte counts
    shards = ShardSet(tmp_path / "pretokenized")
    assert shards.complete and shards.num_documents == len(DOCS)
    assert shards.index["format"] == "tokenforge-shards"
    assert shards.num_bytes == sum(len(d.encode()) for d in DOCS)
    assert shards.dtype == np.uint16
    assert [tok.decode(d.tolist()) for d in shards.iter_documents()] == DOCS
    assert all(s["num_tokens"] >= 2000 for s in shards.index["shards"][:-1])
    shards.check_tokenizer(tok)


def test_setup_gives_the_seeds_layout_by_default(tmp_path):
    tok = LZ78Tokenizer.train_from_iterator(DOCS, 400, strategy="frequency_gated", progress=False)
    tsv = tmp_path / "d.tsv"
    tok.save_tsv(tsv)
    assert cli.main_setup(["--tsv_path", str(tsv), "--output_dir", str(tmp_path / "plain")]) == 0
    plain = LZ78Tokenizer.from_directory(tmp_path / "plain")
    n = plain.num_codes
    # root, codes, 256 byte fallbacks, bos, eos, pad -- and nothing else
    assert plain.vocab_size == n + 260 == 400
    assert plain.special_tokens == {"<|bos|>": n + 257, "<|eos|>": n + 258, "<|pad|>": n + 259}
    assert cli.main_setup(["--tsv_path", str(tsv), "--output_dir", str(tmp_path / "chat"), "--chat_tokens"]) == 0
    chat = LZ78Tokenizer.from_directory(tmp_path / "chat")
    assert chat.vocab_size == 408 and "<|user_start|>" in chat.special_tokens
    assert chat.encode("the quick fox") == plain.encode("the quick fox")


def test_setup_writes_the_tsv_and_token_bytes_as_one_save(tmp_path, monkeypatch):
    """Disk full while writing token_bytes.npy leaves the directory's lz78.tsv as
    it was (issue 32 item 7: the files of one save are replaced together or not at all)."""
    from bpe_strategies import fail_writes_halfway

    tsv = tmp_path / "d.tsv"
    LZ78Tokenizer.train_from_iterator(DOCS, 400, strategy="standard", progress=False).save_tsv(tsv)
    out = tmp_path / "tok"
    assert cli.main_setup(["--tsv_path", str(tsv), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["lz78.tsv", "token_bytes.npy"]
    assert np.load(out / "token_bytes.npy").tolist() == LZ78Tokenizer.load(out).token_bytes().tolist()
    fail_writes_halfway(monkeypatch, nth=2)  # the second file (token_bytes.npy) fails halfway
    with pytest.raises(OSError, match="No space left"):
        cli.cmd_setup(cli_args(tsv, out, chat_tokens=True))
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def cli_args(tsv, out, **extra):
    p = argparse.ArgumentParser()
    cli._setup_args(p)
    args = p.parse_args(["--tsv_path", str(tsv), "-o", str(out)])
    for k, v in extra.items():
        setattr(args, k, v)
    return args


def test_pretokenize_resumes_and_says_what_was_kept(tmp_path, corpus, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tok = LZ78Tokenizer.train_from_iterator(DOCS, 400, strategy="frequency_gated", progress=False)
    tok.save(tmp_path / "tokenizer")
    from tokenforge.data import shard_writer as shards_mod

    real = shards_mod._Writer.flush
    calls = {"n": 0}

    def flaky(self):
        real(self)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(shards_mod._Writer, "flush", flaky)
    args = ["--input", str(corpus), "--shard_tokens", "1500", "--batch_chars", "2000", "-q"]
    assert cli.main_pretokenize(args) == 130
    err = capsys.readouterr().err
    assert "kept 2 finished shard(s)" in err and "resume" in err and "nothing" not in err
    monkeypatch.setattr(shards_mod._Writer, "flush", real)
    assert cli.main_pretokenize(args) == 0
    resumed = ShardSet(tmp_path / "pretokenized")
    assert cli.main_pretokenize(args + ["--output_dir", "fresh"]) == 0
    fresh = ShardSet(tmp_path / "fresh")
    assert resumed.complete and resumed.num_documents == len(DOCS)
    a = np.concatenate([resumed.tokens(i) for i in range(resumed.num_shards)])
    b = np.concatenate([fresh.tokens(i) for i in range(fresh.num_shards)])
    assert np.array_equal(a, b)


def _write_old_lz78_shards(out: Path, tok, docs, per_shard: int) -> None:
    """What the old `lz78 pretokenize` wrote: shard_NNNNN.npy + an index of format tokenforge-token-shards."""
    out.mkdir()
    bos = tok.get_bos_token_id()
    shards, done, toks = [], 0, 0
    for k in range(0, len(docs), per_shard):
        arr = np.concatenate([[bos] + tok.encode(d) for d in docs[k : k + per_shard]]).astype(np.uint16)
        name = f"shard_{len(shards):05d}.npy"
        np.save(out / name, arr)
        n = len(docs[k : k + per_shard])
        shards.append({"file": name, "tokens": int(arr.size), "documents": n, "first_document": done})
        done += n
        toks += int(arr.size)
    index = {
        "format": "tokenforge-token-shards",
        "version": 1,
        "dtype": "uint16",
        "vocab_size": tok.vocab_size,
        "bos_id": bos,
        "tokenizer_sha256": "ab" * 32,
        "shards": shards,
        "documents_done": done,
        "tokens_done": toks,
        "complete": True,
    }
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def test_old_lz78_shard_index_still_reads(tmp_path):
    tok = LZ78Tokenizer.train_from_iterator(DOCS, 400, strategy="frequency_gated", progress=False)
    old = tmp_path / "old"
    _write_old_lz78_shards(old, tok, DOCS, 70)
    s = ShardSet(old)
    assert s.legacy and s.complete and s.num_shards == 5
    assert s.num_documents == len(DOCS) and s.vocab_size == 400 and s.bos_id == tok.get_bos_token_id()
    assert [tok.decode(d.tolist()) for d in s.iter_documents()] == DOCS
    with pytest.raises(ShardError, match="records no byte counts"):
        s.num_bytes
    with pytest.raises(ShardError, match="records no checksums"):
        s.verify()
    with pytest.warns(UserWarning, match="no tokenizer fingerprint"):
        s.check_tokenizer(tok)
    # and a torch dataset trains on it
    torch = pytest.importorskip("torch")
    from tokenforge.torch.dataset import ShardDataset

    ds = ShardDataset(old, 16)
    x, y = ds[0]
    assert x.dtype == torch.int64 and torch.equal(x[1:], y[:-1])
    # resuming into it is refused with the way out; --overwrite replaces it
    from tokenforge.data.shards import pretokenize

    with pytest.raises(ShardError, match="overwrite"):
        pretokenize(iter(DOCS), tok, old, progress=False)
    assert pretokenize(iter(DOCS), tok, old, progress=False, overwrite=True).legacy is None


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
        [
            sys.executable,
            str(script),
            "--strategy",
            "compressed",
            "--vocab_size",
            "700",
            "--input",
            str(corpus),
            "--output",
            str(out),
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    tok = LZ78Tokenizer.from_tsv(out, tsv_format="compressed")
    assert tok.structure == "compressed"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lz78_setup_tokenizer.py"), "--tsv_path", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "tsv_format='compressed'" in r.stderr  # the error tells the user what to pass
