"""The README's command blocks run, so an example that drifts fails CI.

Every fenced block of README.md is found and, in README order, in one
temporary working directory that holds tiny fixtures under the names the
README uses (``corpus.jsonl.zst``, ``data/*.jsonl``, ``heldout.txt``, ...):

* ```python blocks are executed as written, each on its own as a script
  would run it (a fresh namespace, ``__name__ == "__main__"``: a block must
  define every name it uses). A top-level expression whose comment is a Python literal,
  optionally followed by ``:`` and prose (``tok.decode(ids)  # 'Hello, world!'``),
  must evaluate to that literal.
* ```bash blocks are split into commands (``\\`` continuations joined,
  comments dropped, globs expanded in the fixture directory); each
  ``tokenforge ...`` command runs through the CLI entry point
  (``tokenforge.cli.main.main(argv)``, in-process; ``python -m tokenforge``
  alike; ``python scripts/x.py ...`` runs that repository script as
  ``__main__``) and must return 0 (or exit with 0); a
  pipeline ``a | b`` feeds a's output to b's stdin, and ``tokenforge encode T
  "text" | tokenforge decode T`` must give the text back.
* :data:`SUBSTITUTIONS` shrinks sizes (vocabularies, merges, seeds, models)
  so the whole test takes seconds; each entry says why.
* :data:`EXCLUDED` lists, with the reason, the commands that are not run
  (``make ...``). Anything else -- a bash line that is not ``tokenforge ...``,
  a block in another language -- fails the test until it is run or excluded
  here, so new blocks are picked up by themselves.

Not handled: shell syntax beyond pipes, globs, quotes and comments
(redirections, ``&&``, variables fail as "not a command this test runs").
"""

from __future__ import annotations

import ast
import contextlib
import glob
import gzip
import importlib.util
import io
import json
import re
import shlex
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from repo_paths import FIXTURES, README

#: (regex applied to each command or Python line, replacement, why). Applied in order.
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    (r"(--vocab[-_]size[ =])\d+", r"\g<1>600", "tiny vocabularies: the fixtures are a few hundred KB"),
    (r"(--vocab-sizes[ =])[\d,_]+", r"\g<1>300", "one tiny vocabulary size per compared family"),
    (r"\bvocab_size=\d+", "vocab_size=600", "tiny vocabularies (Python API)"),
    (r"(\.train\([^,()]+, )\d+", r"\g<1>600", "tiny vocabularies (positional vocab_size)"),
    (r"(--num-merges[ =])\d+", r"\g<1>50", "a few merges for the growing vocabulary"),
    (r"(--seeds[ =])\d+", r"\g<1>1", "one seed per bits-per-byte measurement"),
    (
        r"--bpb(?![-\w])",
        "--bpb --bpb-train-mb 0.02 --bpb-eval-mb 0.01 --layers 1 --width 16 --heads 2 --seq-len 32 --epochs 0.2",
        "bits per byte of a tiny model on tiny text (the harness is tested in test_eval*)",
    ),
    (
        r"^(tokenforge demo)\b",
        r"\g<1> --max-mb 0.1 --vocab-size 600 --no-bpb --families bpe --no-color",
        "the demo on 0.1 MB of the built-in corpus, BPE only, no language models (a few minutes otherwise)",
    ),
]

#: (regex matching a command, why it is not run).
EXCLUDED: list[tuple[str, str]] = [
    (
        r"^make\b",
        "make targets create .venv, build the extension and run the whole suite; CI runs `make test` "
        "itself, and `make demo` is `tokenforge demo`, which this test runs",
    ),
    (
        r"\bhttps?://|\bURL\b",
        "needs the network, which tests never use (sync is tested against a loopback server in test_growing_sync.py)",
    ),
    (
        r"^pip install\b",
        "installs into the running environment; tests/core/test_wheel.py installs the built wheel into a fresh venv",
    ),
    (r"--every\b", "runs until interrupted"),
    (r"^tokenforge serve\b", "serves until interrupted; tests/serve/ runs its app on a loopback port"),
    (
        r"--scheduler\b",
        "needs a running Dask scheduler at that address; the same commands against a 2-process LocalCluster "
        "are in tests/cli/test_cli_distributed.py",
    ),
    (r"(^|\s)(python3?\s+)?bench/", "benchmarks need the 100+ MB bench corpus (bench/build_corpus.py) and minutes"),
]

#: Block languages run as Python / as shell commands; any other language must be excluded by EXCLUDED_BLOCKS.
PYTHON_LANGS = {"python", "py", "python3"}
SHELL_LANGS = {"bash", "sh", "shell", "console"}
#: (language, regex on the block's first line, why): whole blocks that are not run. None today.
EXCLUDED_BLOCKS: list[tuple[str, str, str]] = []


# ------------------------------------------------------------------ fixtures
def _sample_documents(n_bytes: int) -> list[str]:
    """Real text without downloads: the built-in corpus (Python's own docs and sources)."""
    from tokenforge.data.default_corpus import iter_default_corpus

    return [d for d in iter_default_corpus(max_bytes=n_bytes) if d.strip()]


def make_fixtures(root: Path) -> None:
    """The files the README's examples name as the user's own, all tiny."""
    import zstandard

    from tokenforge import BPETokenizer

    docs = _sample_documents(300_000)
    train, held = docs[: len(docs) * 4 // 5], docs[len(docs) * 4 // 5 :]

    def jsonl(path: Path, items: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in items), encoding="utf-8")

    jsonl(root / "data" / "a.jsonl", train[::2])
    jsonl(root / "data" / "b.jsonl", train[1::2])
    jsonl(root / "corpus.jsonl", train)
    jsonl(root / "data.jsonl", train)
    jsonl(root / "held.jsonl", held)
    raw = "".join(json.dumps({"text": d}) + "\n" for d in train).encode("utf-8")
    (root / "corpus.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    with gzip.open(root / "corpus.jsonl.gz", "wb") as f:
        f.write(raw)
    (root / "heldout.txt").write_text("".join(held), encoding="utf-8")
    (root / "en.txt").write_text("The quick brown fox jumps over the lazy dog.\n", encoding="utf-8")
    (root / "de.txt").write_text("Der schnelle braune Fuchs springt über den faulen Hund.\n", encoding="utf-8")
    (root / "dev.en.txt").write_text("The lazy dog sleeps.\n", encoding="utf-8")
    (root / "dev.de.txt").write_text("Der faule Hund schläft.\n", encoding="utf-8")
    (root / "multi.jsonl").write_bytes((FIXTURES / "multilingual" / "heldout.jsonl").read_bytes())
    (root / "train.txt").write_text("<|endoftext|>".join(train), encoding="utf-8")
    (root / "in.txt").write_bytes("".join(train[:40]).encode("latin-1", errors="replace"))
    small = BPETokenizer.train_from_iterator(train[:50], 400, special_tokens=None, progress=False)
    # OpenAI's cl100k rank file, as bpe-openai (a dev dependency) ships it: load() recognises it by content
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None and spec.submodule_search_locations, "bpe-openai (a dev dependency) is not installed"
    cl100k = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"
    (root / "cl100k_base.tiktoken").write_bytes(gzip.decompress(cl100k.read_bytes()))
    small.export_seed003(root)  # bpe_vocab.pkl, bpe_merges.pkl, ... in the working directory
    _imported_fixtures(root, train[:200])


def _imported_fixtures(root: Path, docs: list[str]) -> None:
    """tokenizer.model (sentencepiece) and bert/tokenizer.json (a tokenizers WordPiece), trained here."""
    import io

    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(docs), model_writer=out, vocab_size=500, minloglevel=2, hard_vocab_limit=False
    )
    (root / "tokenizer.model").write_bytes(out.getvalue())
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer()
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(docs, trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]", "[SEP]"]))
    (root / "bert").mkdir(exist_ok=True)
    wp.save(str(root / "bert" / "tokenizer.json"))


# ------------------------------------------------------------------ reading the README
@dataclass
class Block:
    lang: str
    line: int  # README line of the first line inside the fence (1-based)
    text: str


def readme_blocks(text: str) -> list[Block]:
    blocks, lang, start, body = [], None, 0, []
    for n, line in enumerate(text.split("\n"), start=1):
        fence = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if lang is None and fence:
            lang, start, body = fence.group(2).lower(), n + 1, []
        elif lang is not None and re.match(r"^\s*(```+|~~~+)\s*$", line):
            blocks.append(Block(lang, start, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"README.md: the block opened at line {start - 1} is never closed"
    return blocks


def substitute(line: str) -> str:
    for pattern, replacement, _ in SUBSTITUTIONS:
        line = re.sub(pattern, replacement, line)
    return line


def _words(command: str) -> list[str]:
    """The shell words of ``command`` (quotes removed, comment dropped, ``|`` etc. as words)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>()")
    lexer.commenters = "#"
    lexer.whitespace_split = True
    return list(lexer)


def excluded(command: str) -> str | None:
    """Why ``command`` is not run (EXCLUDED matched against it without its comment), or None."""
    text = " ".join(_words(command))
    for pattern, why in EXCLUDED:
        if re.search(pattern, text):
            return why
    return None


def shell_commands(block: Block) -> list[tuple[int, str]]:
    """(README line, command) for each command of a shell block."""
    out, pending, first = [], "", 0
    for k, line in enumerate(block.text.split("\n")):
        if not pending:
            first = block.line + k
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command.startswith("$ "):
            command = command[2:]
        if command and not command.startswith("#"):
            out.append((first, command))
    return out


def _literal_prefix(comment: str):
    """The literal a comment starts with (alone, or followed by ':'), else None."""
    text = comment.lstrip("#").strip()
    for end in range(len(text), 0, -1):
        rest = text[end:].lstrip()
        if rest and not rest.startswith(":"):
            continue
        try:
            node = ast.parse(text[:end], mode="eval").body
            value = ast.literal_eval(node)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)):
            return (value,)
    return None


def python_with_checks(code: str) -> tuple[str, int]:
    """The code with each `expr  # literal` line turned into an assertion (same line numbers)."""
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
    lines = code.split("\n")
    checks = 0
    for node in ast.parse(code).body:
        if isinstance(node, ast.Expr) and node.lineno == node.end_lineno and node.lineno in comments:
            found = _literal_prefix(comments[node.lineno])
            if found is None:
                continue
            line = lines[node.lineno - 1]
            expr = line[node.col_offset : node.end_col_offset]
            claim = f"README says {expr} gives {found[0]!r}, got "
            lines[node.lineno - 1] = f"__got = ({expr}); assert __got == {found[0]!r}, {claim!r} + repr(__got)"
            checks += 1
    return "\n".join(lines), checks


# ------------------------------------------------------------------ running
def _captured(call, stdin: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``call()`` run with ``stdin`` as its standard input."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = call()
            except SystemExit as e:  # argparse, or a command that exits with a message
                code = e.code if isinstance(e.code, int) or e.code is None else 1
                if not isinstance(e.code, (int, type(None))):
                    err.write(str(e.code))
    finally:
        sys.stdin = old_stdin
    return int(code or 0), out.getvalue(), err.getvalue()


def run_cli(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``tokenforge ARGV`` through the CLI entry point, in-process."""
    from tokenforge.cli.main import main

    return _captured(lambda: main(argv), stdin)


def run_script(path: Path, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``python PATH ARGV``: a repository script run in-process as ``__main__``."""
    import runpy

    def call():
        old_argv = sys.argv
        sys.argv = [str(path), *argv]
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            sys.argv = old_argv
        return 0

    return _captured(call, stdin)


def _entry_point(argv: list[str]):
    """How to run a command: (runner, its arguments), or None if this test does not run it."""
    if argv[:1] == ["tokenforge"]:
        return run_cli, argv[1:]
    if argv[:1] in (["python"], ["python3"]):
        if argv[1:3] == ["-m", "tokenforge"]:
            return run_cli, argv[3:]
        if len(argv) > 1 and argv[1].endswith(".py") and (README.parent / argv[1]).is_file():
            script = README.parent / argv[1]
            return (lambda args, stdin: run_script(script, args, stdin)), argv[2:]
    return None


def _expand(word: str) -> list[str]:
    if any(c in word for c in "*?["):
        matches = sorted(glob.glob(word))
        if matches:
            return matches
    return [word]


def run_shell_command(where: str, command: str) -> list[str]:
    """Run one command line (maybe a pipeline); returns what was run, for the log."""
    words = _words(command)
    stages, current = [], []
    for w in words:
        if w == "|":
            stages.append(current)
            current = []
        elif w and set(w) <= set("|&;<>()"):
            pytest.fail(
                f"{where}: {command!r} uses shell syntax {w!r} this test does not run; "
                "use a pipe or plain commands, or add the command to EXCLUDED with a reason"
            )
        else:
            current.extend(_expand(w))
    stages.append(current)
    data, ran = "", []
    for argv in stages:
        entry = _entry_point(argv)
        if entry is None:
            pytest.fail(
                f"{where}: {command!r} is not a `tokenforge ...` (or `python scripts/....py`) command; "
                "run it here or add it to EXCLUDED in tests/test_readme.py with the reason"
            )
        runner, args = entry
        code, data, err = runner(args, data)
        assert code == 0, (
            f"{where}: `{shlex.join(argv)}` exited with {code}\nstdout:\n{data[-2000:]}\nstderr:\n{err[-3000:]}"
        )
        ran.append(shlex.join(argv))
    first, last = stages[0], stages[-1]
    if (
        len(stages) > 1
        and first[:2] == ["tokenforge", "encode"]
        and last[:2] == ["tokenforge", "decode"]
        and len(first) == 4
    ):
        assert data == first[3], f"{where}: encode | decode gave {data!r}, not {first[3]!r}"
    return ran


def run_python_block(block: Block, namespace: dict) -> int:
    lines = [substitute(line) for line in block.text.split("\n")]
    code, checks = python_with_checks("\n".join(lines))
    padded = "\n" * (block.line - 1) + code  # tracebacks point at README lines
    exec(compile(padded, str(README), "exec"), namespace)
    return checks


def run_readme(text: str, root: Path) -> dict:
    """Run every block of ``text`` (a README) in ``root``; a record of what ran and what was excluded."""
    record = {"python_blocks": 0, "literal_checks": 0, "commands": [], "excluded": []}
    for block in readme_blocks(text):
        where = f"README.md:{block.line}"
        if any(block.lang == lang and re.search(rx, block.text.split("\n")[0]) for lang, rx, _ in EXCLUDED_BLOCKS):
            record["excluded"].append((where, block.lang))
            continue
        if block.lang in PYTHON_LANGS:
            record["literal_checks"] += run_python_block(block, {"__name__": "__main__"})
            record["python_blocks"] += 1
        elif block.lang in SHELL_LANGS:
            for line, command in shell_commands(block):
                if excluded(command):
                    record["excluded"].append((f"README.md:{line}", command))
                    continue
                record["commands"] += run_shell_command(f"README.md:{line}", substitute(command))
        else:
            pytest.fail(
                f"{where}: a ```{block.lang or '(no language)'} block is neither run nor excluded; "
                "run it or add it to EXCLUDED_BLOCKS in tests/test_readme.py with the reason"
            )
    return record


def test_readme_commands_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_fixtures(tmp_path)
    record = run_readme(README.read_text(encoding="utf-8"), tmp_path)
    # the README has Python and shell examples, and they were run, not skipped
    assert record["python_blocks"] >= 1 and record["literal_checks"] >= 2
    assert len(record["commands"]) >= 8
    assert all(excluded(cmd) for _, cmd in record["excluded"])
    # what the examples claim to write exists
    assert (tmp_path / "out" / "tok" / "tokenforge.json").is_file()
    assert (tmp_path / "out" / "seed" / "bpe_vocab.pkl").is_file()


# ------------------------------------------------------------------ the runner itself
def test_blocks_neither_run_nor_excluded_fail(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text, message in (
        ("```bash\ncat README.md\n```\n", "is not a `tokenforge ...`"),
        ("```bash\ntokenforge --help > x.txt\n```\n", "shell syntax"),
        ("```text\nsome output\n```\n", "neither run nor excluded"),
        ("```\nplain\n```\n", "neither run nor excluded"),
    ):
        with pytest.raises(pytest.fail.Exception, match=message):
            run_readme(text, tmp_path)
    assert run_readme("```bash\nmake test   # all\n```\n", tmp_path)["excluded"] == [
        ("README.md:2", "make test   # all")
    ]
    for line in (
        "tokenforge grow sync https://example.org/t.json",
        "tokenforge grow sync URL --every 10m",
        "python bench/bpe.py --quick",
    ):
        assert excluded(line), line
    assert not excluded("tokenforge grow inspect") and not excluded(
        "tokenforge train benchmark.txt --vocab-size 300 -o x"
    )
    assert not excluded("tokenforge grow learn --source web c.jsonl   # grow sync URL, grow inspect")


def test_drifting_examples_fail(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="README says"):
        run_readme("```python\nlen('abc')   # 4\n```\n", tmp_path)
    with pytest.raises(AssertionError, match="exited with 3"):
        run_readme("```bash\ntokenforge decode no/such/tok 1 2 3\n```\n", tmp_path)
    with pytest.raises(AssertionError, match="exited with 2"):  # argparse refuses an option the CLI lacks
        run_readme("```bash\ntokenforge inspect x --no-such-option\n```\n", tmp_path)
    record = run_readme(
        "```python\nx = 2\nx + 1   # 3: prose after a colon is fine\nx   # a comment, not a literal\n```\n",
        tmp_path,
    )
    assert record["literal_checks"] == 1


def test_parser_handles_continuations_comments_and_globs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    block = Block(
        "bash", 10, "tokenforge compare a.jsonl \\\n    --seeds 3   # note\n# only a comment\n$ tokenforge demo"
    )
    assert shell_commands(block) == [
        (10, "tokenforge compare a.jsonl      --seeds 3   # note"),
        (13, "tokenforge demo"),
    ]
    assert substitute("tokenforge compare x --seeds 3 --bpb --vocab-sizes 8192,4096").split()[3:6] == [
        "--seeds",
        "1",
        "--bpb",
    ]
    assert "--bpb-train-mb 0.02" in substitute("--bpb")
    assert substitute("--bpb-train-mb 2") == "--bpb-train-mb 2"
    assert substitute("--vocab_size 32768") == "--vocab_size 600"
    assert substitute("tok.train(texts, 8192, x=1)") == "tok.train(texts, 600, x=1)"
    assert _literal_prefix("# [97, 256, 98]: why") == ([97, 256, 98],)
    assert _literal_prefix("# 3 seeds") is None and _literal_prefix("# list[int]") is None


def test_python_entry_points(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record = run_readme(
        "```bash\npython -m tokenforge encode --help\npython3 scripts/lz78_tok_train.py --help\n```\n", tmp_path
    )
    assert record["commands"] == ["python -m tokenforge encode --help", "python3 scripts/lz78_tok_train.py --help"]
