"""The command line's contract: one line on stderr and a documented exit status for every user
error, a quiet end when the output pipe closes, both spellings of every multi-word option, and a
short ``inspect``."""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys

import pytest

from repo_paths import SCRIPTS
from tokenforge import BPETokenizer, LZ78Tokenizer
from tokenforge.cli import main as cli
from tokenforge.cli.main import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OS,
    EXIT_USAGE,
    build_parser,
    main,
    run_command,
)

CORPUS = "the quick brown fox jumps over the lazy dog. hello world, hello tokens!\n" * 40


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory, tiny_bpe):
    d = tmp_path_factory.mktemp("tok")
    tiny_bpe.save(d / "tok")
    return d / "tok"


def _cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tokenforge", *map(str, args)], capture_output=True, text=True, timeout=120, **kw
    )


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- exit statuses -------------------------------------------------------------------------
def test_exit_codes_are_documented_in_help():
    r = _cli("--help")
    assert r.returncode == 0
    for code in EXIT_CODES:
        assert f"  {code} " in r.stdout
    assert "--vocab-size = --vocab_size" in r.stdout


def test_nonexistent_input(tmp_path, tok_dir):
    r = _cli("encode", tok_dir, "--file", tmp_path / "missing.txt")
    assert r.returncode == EXIT_OS
    assert "No such file" in _one_line(r.stderr) and "missing.txt" in r.stderr
    r = _cli("train", tmp_path / "nope.txt", "--vocab-size", 300, "-o", tmp_path / "out")
    assert r.returncode == EXIT_OS and "corpus path does not exist" in _one_line(r.stderr)
    r = _cli("inspect", tmp_path / "missing-tokenizer")
    assert r.returncode in (EXIT_ERROR, EXIT_OS) and _one_line(r.stderr).startswith("tokenforge inspect: error:")


def test_bad_text_is_one_line_naming_the_file(tmp_path, tok_dir):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe")
    r = _cli("encode", tok_dir, "--file", bad)
    assert r.returncode == EXIT_ERROR and "bad.txt: not UTF-8 text at byte 5" in _one_line(r.stderr)
    with open(bad, "rb") as f:
        r = _cli("encode", tok_dir, stdin=f)
    assert r.returncode == EXIT_ERROR and "<stdin>: not UTF-8" in _one_line(r.stderr)
    r = _cli("decode", tok_dir, "1", "two")
    assert r.returncode == EXIT_ERROR and "('two') is not an integer id" in _one_line(r.stderr)


def test_usage_errors_exit_2():
    r = _cli("train", "c.txt", "--vocab-size", "9", "-o", "x", "--no-such-option")
    assert r.returncode == EXIT_USAGE and "--no-such-option" in _one_line(r.stderr)


def _read_only_code(out: str) -> str:
    # A read-only file system, as the kernel reports it (root ignores permission bits, so we make
    # the refusal ourselves at the lowest level the writer uses: os.open of the temporary file).
    return (
        "import errno, os, sys\n"
        "real = os.open\n"
        f"def refuse(p, *a, **k):\n"
        f"    if os.fspath(p).startswith({out!r}):\n"
        "        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(p))\n"
        "    return real(p, *a, **k)\n"
        "os.open = refuse\n"
        "from tokenforge.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )


def test_read_only_output_directory(tmp_path, tiny_corpus_path):
    corpus = tiny_corpus_path  # read only
    out = tmp_path / "ro"
    out.mkdir()
    args = ["train", str(corpus), "--vocab-size", "300", "-q", "-o", str(out / "tok.json")]
    r = subprocess.run(
        [sys.executable, "-c", _read_only_code(str(out)), *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == EXIT_OS
    line = _one_line(r.stderr)
    assert "read-only file system" in line and str(out / "tok.json") in line
    assert list(out.iterdir()) == []
    if os.geteuid() != 0:  # the real thing, where permission bits apply
        os.chmod(out, 0o555)
        try:
            r = _cli(*args)
        finally:
            os.chmod(out, 0o755)
        assert r.returncode == EXIT_OS and "Permission denied" in _one_line(r.stderr)
        assert list(out.iterdir()) == []


def test_disk_full_is_one_line(tmp_path, tok_dir, monkeypatch, capsys):
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, b):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
    out = tmp_path / "ids.npy"
    assert main(["encode", str(tok_dir), "hello world", "--npy", str(out)]) == EXIT_OS
    err = capsys.readouterr().err
    assert _one_line(err) == f"tokenforge encode: error: no space left on device (disk full): {out}"
    assert list(tmp_path.iterdir()) == []  # no temporary file left


def test_closed_pipe_ends_quietly(tmp_path, tok_dir):
    big = tmp_path / "big.txt"
    big.write_text("hello world\n" * 200_000)
    p = subprocess.Popen(
        [sys.executable, "-m", "tokenforge", "encode", str(tok_dir), "--file", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert p.stdout.read(5)  # like `| head -c 5`: read a little, then close the read end
        p.stdout.close()
        err = p.stderr.read()
        code = p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stderr.close()
    assert err == b"" and code == EXIT_BROKEN_PIPE


def test_interrupt_and_bugs():
    def interrupted(args):
        raise KeyboardInterrupt

    assert run_command(interrupted, None, "tokenforge x") == EXIT_INTERRUPTED

    def bug(args):
        raise KeyError("a bug keeps its traceback")

    with pytest.raises(KeyError):
        run_command(bug, None, "tokenforge x")


def test_a_missing_corpus_is_exit_3_whichever_command_reads_it(tmp_path, capsys):
    """Every command goes through run_command, and a named input that does not exist is the
    OS-class error there, whichever command notices it (lz78 pretokenize said 1 before)."""
    from tokenforge.cli import lz78 as lz78_cli

    lz = tmp_path / "lz"
    LZ78Tokenizer.train_from_iterator([CORPUS * 5], strategy="frequency_gated", vocab_size=340).save(lz)
    missing = str(tmp_path / "missing.txt")
    runs = {
        "tokenforge train": lambda: main(["train", missing, "--vocab-size", "300", "-q", "-o", str(tmp_path / "t")]),
        "tokenforge lz78 train": lambda: main(
            ["lz78", "train", "--input", missing, "--vocab_size", "300", "-q", "--output", str(tmp_path / "x.tsv")]
        ),
        "tokenforge lz78 pretokenize": lambda: main(
            [
                "lz78",
                "pretokenize",
                "--input",
                missing,
                "--tokenizer",
                str(lz),
                "--output_dir",
                str(tmp_path / "s"),
                "-q",
            ]
        ),
        "lz78_pretokenize.py": lambda: lz78_cli.main_pretokenize(
            ["--input", missing, "--tokenizer", str(lz), "--output_dir", str(tmp_path / "s"), "-q"]
        ),
        "tokenforge grow learn": lambda: main(
            [
                "grow",
                "learn",
                missing,
                "--tokenizer",
                str(tmp_path / "g.json"),
                "--source",
                "s",
                "--num-merges",
                "5",
                "-q",
            ]
        ),
        "tokenforge compare": lambda: main(["compare", missing, "-o", str(tmp_path / "r"), "-q"]),
        "tokenforge mixedgram compress": lambda: main(
            ["mixedgram", "compress", missing, str(tmp_path / "m.mxgram"), "-q"]
        ),
    }
    for prog, run in runs.items():
        assert run() == EXIT_OS, prog
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"{prog}: error: ") and "missing.txt" in line, line
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").glob("shard_*"))


@pytest.mark.parametrize(
    "option,value",
    [
        ("--vocab-sizes", "abc"),
        ("--vocab-sizes", "0"),
        ("--seeds", "x"),
        ("--seeds", "0"),
        ("--seeds", "1,x"),
        ("--bpb-vocab-sizes", "8k"),
    ],
)
def test_malformed_numbers_in_compare_lists_are_usage_errors(tmp_path, capsys, option, value):
    """Like ``--layers abc``: exit status 2 and one line naming the option, from the parser
    (not a SystemExit of the command's own, nor Python's int() message)."""
    with pytest.raises(SystemExit) as e:
        main(["compare", "-o", str(tmp_path / "r"), option, value])
    assert e.value.code == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tokenforge compare: error: argument {option}: ") and repr(value) in line, line
    assert "invalid literal" not in line


# ---- option spellings --------------------------------------------------------------------------
def _walk(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _walk(sub, path + (name,))


def test_every_multiword_option_takes_both_spellings():
    checked = 0
    for path, parser in _walk(build_parser()):
        assert isinstance(parser, cli.ArgumentParser), path
        for opt in list(parser._option_string_actions):
            if not opt.startswith("--") or ("-" not in opt[2:] and "_" not in opt[2:]):
                continue
            for other in (opt[:2] + opt[2:].replace("-", "_"), opt[:2] + opt[2:].replace("_", "-")):
                assert parser._respell([other, "--", other]) == [opt, "--", other], (path, other)
                assert parser._respell([other + "=1"]) == [opt + "=1"], (path, other)
                checked += 1
    assert checked > 50


def test_both_spellings_end_to_end(tmp_path, capsys, tiny_corpus_path):
    corpus = tiny_corpus_path  # read only
    for flag in ("--vocab-size", "--vocab_size"):
        out = tmp_path / f"bpe{flag}"
        assert (
            main(["train", str(corpus), flag, "300", "--min_frequency", "1", "--text-field=text", "-q", "-o", str(out)])
            == 0
        )
        assert BPETokenizer.load(out).vocab_size == 300
    for flag in ("--vocab-size", "--vocab_size"):
        out = tmp_path / f"lz{flag}.tsv"
        assert (
            main(
                ["lz78", "train", "--input", str(corpus), flag, "300", "--num-threads", "1", "-q", "--output", str(out)]
            )
            == 0
        )
        assert LZ78Tokenizer.from_tsv(out).vocab_size == 300
    capsys.readouterr()


def test_seed_script_takes_both_spellings(tmp_path, tiny_corpus_path):
    corpus = tiny_corpus_path  # read only
    script = str(SCRIPTS / "lz78_tok_train.py")
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--vocab_size" in r.stdout  # the seed's spelling is the one shown
    out = tmp_path / "d.tsv"
    r = subprocess.run(
        [sys.executable, script, "--input", str(corpus), "--vocab-size", "300", "--output", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert LZ78Tokenizer.from_tsv(out).vocab_size == 300


@pytest.mark.parametrize(
    "param",
    ["decay=abc", "evict_interval=1.5", "evict_interval=99999999999999999999999", "decay=-5", "bogus=1", "novalue"],
)
def test_bad_param_is_one_line(tmp_path, param):
    corpus = tmp_path / "c.txt"
    corpus.write_text(CORPUS)
    r = _cli(
        "lz78", "train", "--input", corpus, "--vocab_size", 300, "--param", param, "-q", "--output", tmp_path / "x.tsv"
    )
    line = _one_line(r.stderr)
    assert r.returncode == (EXIT_USAGE if param == "novalue" else EXIT_ERROR), r.stderr
    assert param.split("=")[0] in line
    assert not (tmp_path / "x.tsv").exists()


# ---- inspect -----------------------------------------------------------------------------------
def test_inspect_lz78_is_short_and_says_each_thing_once(tmp_path, capsys):
    tok = LZ78Tokenizer.train_from_iterator([CORPUS * 5], strategy="frequency_gated", vocab_size=340)
    d = tmp_path / "lz"
    tok.save(d)
    assert main(["inspect", str(d)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) <= 10, out
    longest = tok.id_to_token(max(range(tok.vocab_size), key=lambda i: (len(tok.id_to_bytes(i)), -i)))
    assert out.count(repr(longest)) == 1  # the longest entries are listed once, not twice
    assert "histogram" not in out.lower() or out.lower().count("histogram") == 1
    assert out.count("strategy") == 1 and "frequency_gated" in out and "prefix only entries" in out
    assert main(["inspect", str(d), "--json"]) == 0  # the family's tables are still in --json
    assert '"depth_histogram"' in capsys.readouterr().out


def test_a_warning_is_one_line_on_stderr():
    """A warning raised during a command is one line, not Python's form with a
    source line (run in a child: pytest records warnings instead of printing)."""
    code = (
        "import warnings, sys\n"
        "from tokenforge.cli.main import run_command\n"
        "from tokenforge.errors import TokenforgeWarning\n"
        "def cmd(args):\n"
        "    warnings.warn('learned 5 merges,\\n  not the 35 asked for', TokenforgeWarning)\n"
        "    return 0\n"
        "sys.exit(run_command(cmd, None, 'tokenforge train'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "tokenforge train: warning: learned 5 merges, not the 35 asked for\n"
