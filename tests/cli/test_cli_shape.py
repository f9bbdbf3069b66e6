"""One shape for the command line (issue 35, items 3 and 4): every option says
what it does, ``--help`` stays light, a command writing a file takes
``-o/--output``, a command about one tokenizer takes it as its first
positional argument, and the CLI's defaults are the Python API's."""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys

import pytest

from tokenforge.cli.main import build_parser


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """(command words, parser) of every leaf command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
    for a in subs:
        for name, sp in a.choices.items():
            yield from _commands(sp, (*prefix, name))


COMMANDS = dict(_commands(build_parser()))


def _options(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_every_option_and_argument_has_help(words):
    missing = [a.option_strings or [a.dest] for a in _options(COMMANDS[words]) if not (a.help or "").strip()]
    assert not missing, f"tokenforge {' '.join(words)}: no help text for {missing}"


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_a_command_writing_files_takes_dash_o_output(words):
    outs = [
        a
        for a in _options(COMMANDS[words])
        if a.dest in ("output", "out", "output_dir") or any(o.startswith("--out") for o in a.option_strings)
    ]
    for a in outs:
        assert "-o" in a.option_strings and "--output" in a.option_strings, (words, a.option_strings)


TOKENIZER_SUBJECT = [("encode",), ("decode",), ("inspect",), ("grow", "inspect"), ("mixedgram", "inspect")]


@pytest.mark.parametrize("words", TOKENIZER_SUBJECT, ids=" ".join)
def test_a_command_about_one_tokenizer_takes_it_first_and_positionally(words):
    first = next(a for a in _options(COMMANDS[words]) if not a.option_strings)
    assert first.dest in ("tokenizer", "tokenizer_positional", "file"), (words, first.dest)


@pytest.mark.parametrize("words", [("pretokenize",), ("lz78", "pretokenize"), ("grow", "learn"), ("grow", "sync")])
def test_a_command_reading_a_corpus_takes_the_tokenizer_as_dash_t(words):
    (tok,) = [a for a in _options(COMMANDS[words]) if a.dest == "tokenizer"]
    assert {"-t", "--tokenizer"} <= set(tok.option_strings)


def test_help_of_every_command_imports_neither_numpy_nor_a_family():
    script = f"""
import json, sys
from tokenforge.cli.main import main
for words in {sorted(COMMANDS)!r}:
    try:
        main([*words, "--help"])
    except SystemExit as e:
        assert e.code == 0, words
heavy = [m for m in ("numpy", "tokenforge.bpe", "tokenforge.lz78", "tokenforge.mixedgram", "torch")
         if m in sys.modules]
sys.__stdout__.write("\\nHEAVY=" + json.dumps(heavy))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.rsplit("HEAVY=", 1)[1]) == []


# --- one default per setting: the CLI's option defaults are the API's ------------------
def _api_defaults(fn) -> dict:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def test_cli_defaults_are_the_python_api_defaults():
    from tokenforge import GrowingBPETokenizer, LZ78Tokenizer, Mixedgram
    from tokenforge.data.shards import pretokenize
    from tokenforge.growing import DEFAULT_VOCAB_SIZE

    cases = [
        # (command words, CLI dest, API function, API parameter)
        (("lz78", "train"), "strategy", LZ78Tokenizer.train, "strategy"),
        (("lz78", "train"), "vocab_size", LZ78Tokenizer.train, "vocab_size"),
        (("lz78", "train"), "text_field", LZ78Tokenizer.train, "text_field"),
        (("grow", "learn"), "min_frequency", GrowingBPETokenizer.learn_merges, "min_frequency"),
        (("grow", "learn"), "text_field", GrowingBPETokenizer.learn_merges, "text_field"),
        (("mixedgram", "compress"), "parse", Mixedgram.__init__, "parse"),
        (("mixedgram", "compress"), "encoding", Mixedgram.train, "encoding"),
        (("train",), "min_frequency", __import__("tokenforge").BPETokenizer.train, "min_frequency"),
        (("train",), "text_field", __import__("tokenforge").BPETokenizer.train, "text_field"),
        (("train",), "errors", __import__("tokenforge").BPETokenizer.train, "errors"),
        (("pretokenize",), "shard_tokens", pretokenize, "shard_tokens"),
        (("pretokenize",), "errors", pretokenize, "errors"),
        (("pretokenize",), "text_field", pretokenize, "text_field"),
        (("lz78", "pretokenize"), "shard_tokens", pretokenize, "shard_tokens"),
        (("lz78", "pretokenize"), "batch_chars", pretokenize, "batch_chars"),
    ]
    for words, dest, fn, param in cases:
        cli = COMMANDS[words].get_default(dest)
        api = _api_defaults(fn)[param]
        assert cli == api, f"tokenforge {' '.join(words)} --{dest} defaults to {cli!r}, {fn.__qualname__} to {api!r}"
    assert _api_defaults(GrowingBPETokenizer.train)["vocab_size"] == DEFAULT_VOCAB_SIZE


def test_bpe_and_compare_cli_defaults_are_the_api_s():
    from tokenforge import bpe
    from tokenforge.eval.bpb import BPBConfig

    for dest in ("pattern", "tie_break", "layout"):
        assert COMMANDS[("train",)].get_default(dest) == bpe._NANOCHAT_DEFAULTS[dest], dest
    cfg = BPBConfig()
    pairs = {"layers": cfg.n_layer, "width": cfg.n_embd, "heads": cfg.n_head, "seq_len": cfg.seq_len}
    pairs |= {"batch_size": cfg.batch_size, "epochs": cfg.epochs, "lr": cfg.lr, "device": cfg.device}
    for dest, want in pairs.items():
        assert COMMANDS[("compare",)].get_default(dest) == want, dest


# --- the same command, both spellings --------------------------------------------------
DOCS = [f"Document {i}: the quick brown fox jumps over the lazy dog {i * 7}.\n" * (1 + i % 5) for i in range(120)]


@pytest.fixture()
def corpus(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS))
    return p


def _run(argv):
    from tokenforge.cli.main import main

    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_lz78_train_takes_the_corpus_positionally_or_with_the_seed_s_input(tmp_path, corpus, capsys):
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    assert (
        _run(["lz78", "train", str(corpus), "--vocab-size", "400", "--strategy", "standard", "-o", str(a), "-q"]) == 0
    )
    seed = ["lz78", "train", "--input", str(corpus), "--vocab_size", "400", "--strategy", "standard"]
    assert _run([*seed, "--output", str(b), "-q"]) == 0
    assert a.read_bytes() == b.read_bytes()
    capsys.readouterr()
    assert _run(["lz78", "train", str(corpus), "--input", str(corpus), "-o", str(tmp_path / "c.tsv"), "-q"]) == 2
    assert "name the corpus once" in capsys.readouterr().err
    assert not (tmp_path / "c.tsv").exists()


def test_lz78_pretokenize_takes_dash_t_and_dash_o(tmp_path, corpus):
    from tokenforge import LZ78Tokenizer
    from tokenforge.data.shards import ShardSet

    tok = LZ78Tokenizer.train_from_iterator(DOCS, 400, strategy="standard", progress=False)
    tok.save(tmp_path / "tok")
    out = tmp_path / "shards"
    assert _run(["lz78", "pretokenize", str(corpus), "-t", str(tmp_path / "tok"), "-o", str(out), "-q"]) == 0
    assert ShardSet(out).num_documents == len(DOCS)


def test_lz78_train_api_takes_the_size_second_and_the_strategy_by_keyword():
    from tokenforge import LZ78Tokenizer
    from tokenforge.lz78 import DEFAULT_STRATEGY

    tok = LZ78Tokenizer.train_from_iterator(DOCS, 400, progress=False)
    assert tok.vocab_size <= 400 and tok.data.settings["strategy"] == DEFAULT_STRATEGY
    with pytest.raises(TypeError, match=r"strategy='standard'"):
        LZ78Tokenizer.train_from_iterator(DOCS, "standard")  # the old order: strategy second


def test_mixedgram_output_as_dash_o_or_after_the_input(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_bytes(b"".join(d.encode("latin-1") for d in DOCS))
    a, b = tmp_path / "a.mxgram", tmp_path / "b.mxgram"
    assert _run(["mixedgram", "compress", str(text), "-o", str(a), "-q"]) == 0
    assert _run(["mixedgram", "compress", str(text), str(b), "-q"]) == 0
    assert a.read_bytes() == b.read_bytes()
    back = tmp_path / "back.txt"
    assert _run(["mixedgram", "decompress", str(a), "--output", str(back), "-q"]) == 0
    assert back.read_bytes() == text.read_bytes()
    capsys.readouterr()
    assert _run(["mixedgram", "compress", str(text), "-q"]) == 2
    assert "-o OUT" in capsys.readouterr().err
    assert _run(["mixedgram", "compress", str(text), str(b), "-o", str(a), "-q"]) == 2


def test_grow_inspect_takes_the_tokenizer_positionally(tmp_path, corpus, capsys):
    tok = tmp_path / "grown.json"
    assert _run(["grow", "learn", "-t", str(tok), "--source", "s", "--num-merges", "20", str(corpus), "-q"]) == 0
    capsys.readouterr()
    assert _run(["grow", "inspect", str(tok), "--json"]) == 0
    positional = json.loads(capsys.readouterr().out)
    assert _run(["grow", "inspect", "-t", str(tok), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == positional
    assert _run(["grow", "inspect", str(tok), "-t", str(tok)]) == 2


def test_every_family_trains_as_train_corpus_vocab_size():
    import tokenforge
    from tokenforge.errors import VocabSizeError

    for cls in (
        tokenforge.BPETokenizer,
        tokenforge.LZ78Tokenizer,
        tokenforge.Mixedgram,
        tokenforge.GrowingBPETokenizer,
        tokenforge.PipelineTokenizer,
    ):
        for name in ("train", "train_from_iterator"):
            params = list(inspect.signature(getattr(cls, name)).parameters.values())
            assert params[1].name == "vocab_size", (cls.__name__, name, [p.name for p in params])
            later = [p for p in params[2:] if p.kind is p.POSITIONAL_OR_KEYWORD]
            assert not later, (cls.__name__, name, [p.name for p in later])  # the rest by keyword
    assert tokenforge.Mixedgram.train_from_iterator(DOCS, 4096).vocab_size == 4096
    with pytest.raises(VocabSizeError, match="4,096 ids"):
        tokenforge.Mixedgram.train_from_iterator(DOCS, 1024)


def test_every_command_that_counts_a_corpus_takes_the_memory_budget():
    """--max-memory/--tmp-dir (lz78: the seed's --max_memory/--tmp_dir spelling) on every
    family's counting command, with one help text (the budget's default rule) but the
    name of what it bounds, passed through as the API's max_memory/tmp_dir."""
    counting = [("train",), ("lz78", "train"), ("grow", "learn"), ("mixedgram", "compress")]
    helps = {}
    for words in counting:
        opts = {s: a for a in _options(COMMANDS[words]) for s in a.option_strings}
        budget = opts.get("--max-memory") or opts["--max_memory"]
        tmp = opts.get("--tmp-dir") or opts["--tmp_dir"]
        assert (budget.dest, tmp.dest, budget.default, tmp.default) == ("max_memory", "tmp_dir", None, None)
        helps[words] = (budget.help.split(" (e.g.")[1].replace("tmp_dir", "tmp-dir"), tmp.help)
    assert len(set(helps.values())) == 1, helps
    assert "default: 3/4 of the available memory" in helps[("train",)][0]
    with_budget = {
        words for words, p in COMMANDS.items() if any("memory" in s for a in _options(p) for s in a.option_strings)
    }
    assert with_budget == set(counting)
