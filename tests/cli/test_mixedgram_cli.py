"""``tokenforge mixedgram compress | decompress | inspect`` (run in-process)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from tokenforge import Mixedgram
from tokenforge.cli import mixedgram as cli

TEXT = ("The quick brown fox jumps over the lazy dog. Caf\xe9 cr\xe8me br\xfbl\xe9e.\n" * 200).encode("latin-1")


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


def test_compress_decompress_inspect(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    assert run("compress", src, tmp_path / "out.mxgram") == 0
    err = capsys.readouterr().err
    assert "out.mxgram" in err and "tokens" in err and "x)" in err
    assert run("decompress", tmp_path / "out.mxgram", tmp_path / "back.txt", "-q") == 0
    assert (tmp_path / "back.txt").read_bytes() == TEXT
    capsys.readouterr()
    assert run("inspect", tmp_path / "out.mxgram", "--top", "3") == 0
    out = capsys.readouterr().out
    for needle in ("by n:", "overlaps:", "compression:", "top 3 entries", "stream:"):
        assert needle in out
    assert run("inspect", tmp_path / "out.mxgram", "--json") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["stream"]["text_bytes"] == len(TEXT)


def test_decompress_to_stdout(tmp_path, capsysbinary):
    Mixedgram.compress(TEXT, tmp_path / "o.mxgram")
    assert run("decompress", tmp_path / "o.mxgram", "-") == 0
    assert capsysbinary.readouterr().out == TEXT


def test_compress_with_a_saved_vocabulary_and_optimal_parse(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    Mixedgram.train(text=TEXT).save(tmp_path / "vocab.json")
    assert run("compress", src, tmp_path / "v.mxgram", "--vocab", tmp_path / "vocab.json", "--parse", "optimal") == 0
    assert "from" in capsys.readouterr().err
    assert Mixedgram.decompress_bytes(tmp_path / "v.mxgram") == TEXT


def test_errors_exit_1_with_a_message(tmp_path, capsys):
    bad = tmp_path / "bad.mxgram"
    bad.write_bytes(b"\x00" * 100)
    assert run("decompress", bad, tmp_path / "x.txt") == 1
    err = capsys.readouterr().err
    assert "error:" in err and "byte offset 100" in err
    assert not (tmp_path / "x.txt").exists()
    src = tmp_path / "u.txt"
    src.write_text("ok \u2603", encoding="utf-8")
    assert run("compress", src, tmp_path / "u.mxgram", "--encoding", "utf-8") == 1
    assert "U+2603" in capsys.readouterr().err
    assert run("compress", src, tmp_path / "u.mxgram", "--encoding", "utf-8", "--errors", "replace", "-q") == 0
    assert Mixedgram.decompress(tmp_path / "u.mxgram") == "ok ?"
    assert run("inspect", tmp_path / "missing.mxgram") in (1, 3)  # a TokenforgeError or the OS says it is missing


def test_add_parser_registers_under_mixedgram():
    top = argparse.ArgumentParser(prog="tokenforge")
    sub = top.add_subparsers(dest="command")
    cli.add_parser(sub)
    args = top.parse_args(["mixedgram", "compress", "a", "b", "--parse", "optimal"])
    assert args.func is cli._compress and args.input == "a" and args.parse == "optimal"
    with pytest.raises(SystemExit):
        top.parse_args(["mixedgram"])


def test_module_runs_standalone(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT[:500])
    r = subprocess.run(
        [sys.executable, "-m", "tokenforge.cli.mixedgram", "compress", str(src), str(tmp_path / "m.mxgram"), "-q"],
        capture_output=True,
    )
    assert r.returncode == 0, r.stderr
    assert Mixedgram.decompress_bytes(tmp_path / "m.mxgram") == TEXT[:500]
