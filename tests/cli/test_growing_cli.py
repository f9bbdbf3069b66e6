"""``tokenforge grow learn | sync | inspect`` (in-process, and once as ``python -m``)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from growing_helpers import FIXTURE, SOURCE_A, SOURCE_B
from tokenforge import GrowingBPETokenizer
from tokenforge.cli import grow


@pytest.fixture
def corpora(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("\n".join(SOURCE_A * 5), encoding="utf-8")
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join(json.dumps({"text": t}) for t in SOURCE_B * 5), encoding="utf-8")
    return a, b


def run(args, capsys) -> tuple[int, str, str]:
    code = grow.main([str(x) for x in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_learn_learn_inspect(tmp_path, corpora, capsys):
    a, b = corpora
    tok = tmp_path / "tokenizer.json"
    code, out, _ = run(["learn", "-t", tok, "--source", "docs", "--num-merges", 40, "-q", a], capsys)
    assert code == 0 and "created" in out and "learned 40 merges" in out and "266 -> 306" in out
    first = GrowingBPETokenizer.load(tok).merge_list
    code, out, _ = run(["learn", "-t", tok, "--source", "code", "--num-merges", 30, "-q", b], capsys)
    assert code == 0 and "updated" in out and "306 -> 336" in out
    t = GrowingBPETokenizer.load(tok)
    assert t.merge_list[:40] == first and t.sources_contributed == {"docs": 40, "code": 30}

    code, out, _ = run(["inspect", "-t", tok, "--newest", 3], capsys)
    assert code == 0
    assert "ids in use         336" in out and "10,000,000" in out
    assert "docs  40 merges" in out and "code  30 merges" in out
    newest = t.merge_list[-1]
    assert f"{newest[2]:>9}" in out and "->" in out

    code, out, _ = run(["inspect", "-t", tok, "--json", "--newest", 2], capsys)
    doc = json.loads(out)
    assert doc["current_vocab"] == 336 and doc["sources_contributed"] == {"docs": 40, "code": 30}
    assert [m["id"] for m in doc["newest_merges"]] == [335, 334]
    from tokenforge.formats.tfjson import render_bytes

    assert doc["newest_merges"][0]["text"] == render_bytes(t.id_to_bytes(335))


def test_learn_stops_when_full(tmp_path, corpora, capsys):
    a, _ = corpora
    tok = tmp_path / "tokenizer.json"
    code, out, _ = run(["learn", "-t", tok, "--source", "a", "--num-merges", 50, "--vocab-size", 280, "-q", a], capsys)
    assert code == 0 and "learned 14 merges" in out and "vocabulary full" in out
    code, out, _ = run(["learn", "-t", tok, "--source", "a", "--num-merges", 50, "-q", a], capsys)
    assert code == 0 and "full" in out and "nothing learned" in out


def test_sync_from_a_path(tmp_path, capsys):
    tok = tmp_path / "tokenizer.json"
    code, out, _ = run(["sync", "-t", tok, FIXTURE], capsys)
    assert code == 0 and "25 new merges" in out
    assert GrowingBPETokenizer.load(tok).current_vocab_size == 291
    before = tok.read_bytes()
    code, out, _ = run(["sync", "-t", tok, FIXTURE], capsys)
    assert code == 0 and "nothing to do" in out and tok.read_bytes() == before
    code, out, err = run(["sync", "-t", tok, FIXTURE, "--sha256", "1" * 64], capsys)
    assert code == 1 and "sha256 mismatch" in err and tok.read_bytes() == before


def test_errors_are_reported(tmp_path, capsys):
    code, _, err = run(["inspect", "-t", tmp_path / "missing.json"], capsys)
    assert code == 1 and "no tokenizer at" in err
    code, _, err = run(
        ["learn", "-t", tmp_path / "t.json", "--source", "x", "--num-merges", 5, tmp_path / "nope.txt"], capsys
    )
    assert code == 3 and "does not exist" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"merges": {"10_11": 300}}')
    code, _, err = run(["inspect", "-t", bad], capsys)
    assert code == 1 and "merges.10_11" in err
    with pytest.raises(SystemExit):
        grow.main(["learn", "--num-merges", "5", "x.txt"])  # --source is required


def test_add_parser_plugs_into_a_parent_command(tmp_path, capsys):
    parent = argparse.ArgumentParser(prog="tokenforge")
    sub = parent.add_subparsers(dest="command")
    grow.add_parser(sub)
    args = parent.parse_args(["grow", "sync", "-t", str(tmp_path / "t.json"), str(FIXTURE)])
    assert args.func(args) == 0
    assert "25 new merges" in capsys.readouterr().out


def test_module_runs_standalone(tmp_path, corpora):
    a, _ = corpora
    learn = [sys.executable, "-m", "tokenforge.cli.grow", "learn", "--source", "a", "--num-merges", "10", "-q", str(a)]
    # without --tokenizer nothing is created where the user did not ask (issue 32 item 4)
    r = subprocess.run(learn, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and "pass --tokenizer PATH" in r.stderr
    assert not (tmp_path / "tokenizer.json").exists()
    r = subprocess.run(learn + ["--tokenizer", "tokenizer.json"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "tokenizer.json").exists()
    r = subprocess.run(
        [sys.executable, "-m", "tokenforge.cli.grow", "inspect"], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 0 and "a  10 merges" in r.stdout
