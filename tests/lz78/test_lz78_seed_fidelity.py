"""LZ78 files a seed user can take back, and compact_output_vocab where users reach it (issue 11, items 2 and 4)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tokenforge import LZ78Tokenizer
from tokenforge.cli import lz78 as cli
from tokenforge.errors import FormatError
from tokenforge.eval.families import parse_specs, train_tokenizer
from tokenforge.formats.lz78_tsv import SeedStyleError, parents_first, read_lz78_tsv

SEED = "1\t0\th\th\n2\t0\te\te\n3\t1\te\the\n4\t3\tl\thel\n5\t4\tl\thell\n6\t5\to\thello\n"


def _one_line_docs() -> list[str]:
    """About 200 KB of real prose (the pydoc topics every CPython ships), one line per document:
    no tab, LF or CR anywhere, so every dictionary is writable in the seed's style."""
    from tokenforge.data.default_corpus import _topics

    docs = [" ".join(t.split()) for t in _topics()][:40]
    if not docs:  # pragma: no cover - a Python without pydoc_data
        words = "the quick brown fox jumps over the lazy dog while five boxing wizards jump quickly".split()
        docs = [" ".join(words[(i * 7 + k) % len(words)] for k in range(300)) + f" {i} ünï." for i in range(400)]
    return docs


FLAT_DOCS = _one_line_docs()
SAMPLE = " ".join(FLAT_DOCS[:3])[:20000] + " ünï 🙂"


def seed_loader(path: Path, five_columns: bool = False):
    """A loader that works the way the seed's code must: rows in file order, each row's parent
    already defined (a trie built row by row), `#` and blank lines skipped, no escapes.
    Returns {code: pattern} and the codes of the rows in file order."""
    patterns: dict[int, str] = {0: ""}
    order = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        assert len(f) == (5 if five_columns else 4), line
        code, parent = int(f[0]), int(f[2] if five_columns else f[1])
        assert parent in patterns, f"row {code} comes before its parent {parent}"
        label = f[1] if five_columns else f[2]
        assert f[4 if five_columns else 3] == patterns[parent] + label
        patterns[code] = f[4 if five_columns else 3]
        order.append(code)
    return patterns, order


@pytest.fixture(scope="module")
def trained():
    return {
        s: LZ78Tokenizer.train_from_iterator(FLAT_DOCS, 600, strategy=s, progress=False)
        for s in ("frequency_gated", "smart_prune", "flat_prune", "compressed")
    }


def test_seed_style_is_exactly_the_seeds_columns(tmp_path):
    (tmp_path / "in.tsv").write_text(SEED)
    tok = LZ78Tokenizer.from_tsv(tmp_path / "in.tsv")
    tok.save_tsv(tmp_path / "out.tsv", style="seed")
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8") == SEED  # no header, no extra column
    comp = tmp_path / "c.tsv"
    tok.save_tsv(comp, "compressed", style="seed")
    lines = comp.read_text().splitlines()
    assert all(len(line.split("\t")) == 5 and not line.startswith("#") for line in lines)
    assert LZ78Tokenizer.from_tsv(comp, "compressed").encode("hello he") == tok.encode("hello he")


@pytest.mark.parametrize("strategy", ["frequency_gated", "smart_prune", "flat_prune", "compressed"])
def test_every_style_lists_parents_first_and_keeps_the_ids(trained, tmp_path, strategy):
    tok = trained[strategy]
    want = tok.encode(SAMPLE)
    # our own style: every parent before its children; codes as before
    tok.save_tsv(tmp_path / "own.tsv")
    rows = [ln.split("\t") for ln in (tmp_path / "own.tsv").read_text().splitlines() if not ln.startswith("#")][1:]
    seen = {0}
    pcol = 2 if strategy == "compressed" else 1
    for r in rows:
        assert int(r[pcol]) in seen, f"row {r[0]} before its parent {r[pcol]}"
        seen.add(int(r[0]))
    assert LZ78Tokenizer.from_tsv(tmp_path / "own.tsv", None).encode(SAMPLE) == want
    # the seed's style, in the format that can hold the dictionary
    fmt = "compressed" if strategy in ("smart_prune", "compressed") else "lz78"
    tok.save_tsv(tmp_path / "seed.tsv", fmt, style="seed")
    if strategy != "flat_prune":
        patterns, order = seed_loader(tmp_path / "seed.tsv", five_columns=fmt == "compressed")
        assert sorted(order) == list(range(1, len(order) + 1))  # codes 1..n: a sorted remap keeps them
    back = LZ78Tokenizer.from_tsv(tmp_path / "seed.tsv", fmt)  # strict: every check passes
    assert back.encode(SAMPLE) == want
    assert back.vocab_size == tok.vocab_size
    assert back.structure == tok.structure or fmt == "compressed"


def test_smart_prune_wrote_parents_after_children_before():
    # the situation the writer fixes: output entries have the low codes, their prefix-only parents high ones
    tok = LZ78Tokenizer.train_from_iterator(FLAT_DOCS, 600, strategy="smart_prune", progress=False)
    late = sum(1 for k, n in enumerate(tok.data.nodes) if n[0] > k + 1)
    assert late > 0
    order = parents_first(tok.data.nodes)
    pos = {k: i for i, k in enumerate(order)}
    assert sorted(order) == list(range(len(tok.data.nodes)))
    assert all(n[0] == 0 or pos[n[0] - 1] < pos[k] for k, n in enumerate(tok.data.nodes))


def test_seed_style_refuses_what_it_cannot_hold(tmp_path, trained):
    with pytest.warns(UserWarning, match="gave only"):  # a tiny corpus
        tok = LZ78Tokenizer.train_from_iterator(
            ["a\tb\nc\r\n" * 50 + "abc abd " * 40], 300, strategy="frequency_gated", progress=False
        )
    with pytest.raises(SeedStyleError, match=r"code \d+ \(pattern '.*\\[tnr].*'\).*tab, line feed or carriage return"):
        tok.save_tsv(tmp_path / "x.tsv", style="seed")
    assert not (tmp_path / "x.tsv").exists()
    with pytest.warns(UserWarning, match="left out"):
        dropped = tok.save_tsv(tmp_path / "x.tsv", style="seed", unwritable="drop")
    assert dropped > 0
    back = LZ78Tokenizer.from_tsv(tmp_path / "x.tsv")  # a valid seed file: strict reading passes
    assert back.num_codes == tok.num_codes - dropped
    assert back.decode(back.encode("a\tb\nc\r\nabd")) == "a\tb\nc\r\nabd"  # byte fallback covers them
    with pytest.raises(SeedStyleError, match="prefix-only entries.*compressed"):
        trained["smart_prune"].save_tsv(tmp_path / "y.tsv", "lz78", style="seed")


def test_crlf_files_are_read(tmp_path, trained):
    ids = LZ78Tokenizer.from_tsv(_w(tmp_path, "lf.tsv", SEED)).encode("hello")
    assert LZ78Tokenizer.from_tsv(_w(tmp_path, "crlf.tsv", SEED.replace("\n", "\r\n"))).encode("hello") == ids
    for strategy, fmt in (("frequency_gated", "lz78"), ("compressed", "compressed")):
        tok = trained[strategy]
        for style in ("tokenforge", "seed"):
            p = tmp_path / f"{strategy}-{style}.tsv"
            tok.save_tsv(p, fmt, style=style)
            crlf = _w(tmp_path, f"{strategy}-{style}-crlf.tsv", p.read_text(encoding="utf-8").replace("\n", "\r\n"))
            a, b = read_lz78_tsv(p, fmt), read_lz78_tsv(crlf, fmt)
            assert a.nodes == b.nodes
    # in an LF seed file a CR is data (the seed has no escapes): it is not taken for a line break
    d = read_lz78_tsv(_w(tmp_path, "cr.tsv", "1\t0\ta\ta\n2\t0\t\r\t\r\n"), "lz78")
    assert [n[2] for n in d.nodes] == ["a", "\r"]


def test_headerless_flat_file_reads_as_flat(tmp_path, trained):
    tok = trained["flat_prune"]
    tok.save_tsv(tmp_path / "f.tsv", style="seed")
    back = LZ78Tokenizer.from_tsv(tmp_path / "f.tsv")
    assert back.structure == "flat" and back.encode(SAMPLE) == tok.encode(SAMPLE)
    with pytest.raises(FormatError, match="line 2: pattern 'ab' is not its parent"):
        read_lz78_tsv(_w(tmp_path, "t.tsv", "1\t0\ta\ta\n2\t0\tb\tab\n3\t1\tc\tac\n"))


def test_cli_train_writes_the_seed_style(tmp_path, capsys):
    corpus = _w(tmp_path, "c.jsonl", "".join(json.dumps({"text": d.replace(". ", ".\n")}) + "\n" for d in FLAT_DOCS))
    out = tmp_path / "d.tsv"
    base = ["--strategy", "frequency_gated", "--vocab_size", "500", "--input", str(corpus), "--output", str(out), "-q"]
    assert cli.main_train(base + ["--tsv_style", "seed"]) == 2  # the text has line breaks
    err = capsys.readouterr().err
    assert "line feed" in err and "d.tokenforge.tsv" in err and not out.exists()
    assert LZ78Tokenizer.from_tsv(tmp_path / "d.tokenforge.tsv").vocab_size == 500  # the training is kept
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main_train(base + ["--tsv_style", "seed", "--drop_unwritable"]) == 0
    assert not out.read_text().startswith("#") and all(len(ln.split("\t")) == 4 for ln in out.read_text().splitlines())
    LZ78Tokenizer.from_tsv(out)
    with pytest.warns(UserWarning, match="left out"):
        assert (
            cli.main_train(
                base[:-3]
                + [
                    "--output",
                    str(tmp_path / "s.tsv"),
                    "--strategy",
                    "smart_prune",
                    "--tsv_style",
                    "seed",
                    "--tsv_format",
                    "compressed",
                    "--drop_unwritable",
                    "-q",
                ]
            )
            == 0
        )
    assert LZ78Tokenizer.from_tsv(tmp_path / "s.tsv", "compressed").structure == "compressed"


# ---- item 4: compact_output_vocab where users reach it --------------------------------------
def test_cli_compact_output_vocab(tmp_path, capsys):
    corpus = _w(tmp_path, "c.jsonl", "".join(json.dumps({"text": d}) + "\n" for d in FLAT_DOCS))
    out = tmp_path / "d.tsv"
    args = ["--strategy", "frequency_gated", "--vocab_size", "600", "--input", str(corpus), "--output", str(out), "-q"]
    assert cli.main_train(args + ["--compact_output_vocab"]) == 0
    compacted = LZ78Tokenizer.from_tsv(out, None)
    assert "never emitted" in capsys.readouterr().out
    full = LZ78Tokenizer.train_from_iterator(FLAT_DOCS, 600, strategy="frequency_gated", progress=False)
    unused = full.count_never_emitted(FLAT_DOCS)
    assert unused > 0 and compacted.vocab_size == full.vocab_size - unused
    assert compacted.decode(compacted.encode(SAMPLE)) == SAMPLE
    # setup compacts against --input
    full.save_tsv(tmp_path / "full.tsv")
    assert (
        cli.main_setup(
            [
                "--tsv_path",
                str(tmp_path / "full.tsv"),
                "--output_dir",
                str(tmp_path / "tok"),
                "--compact_output_vocab",
                "--input",
                str(corpus),
            ]
        )
        == 0
    )
    assert LZ78Tokenizer.from_directory(tmp_path / "tok").vocab_size == full.vocab_size - unused


def test_compare_spec_compact_and_the_report(tmp_path):
    spec = parse_specs("lz78:frequency_gated:compact")[0]
    assert spec.words == ("frequency_gated", "compact") and spec.text == "lz78:frequency_gated:compact"
    assert parse_specs("lz78:smart_prune:nochunk:compact")[0].words == ("smart_prune", "nochunk", "compact")
    tok = train_tokenizer(spec, FLAT_DOCS, 600)
    assert tok.vocab_size < 600 and tok.count_never_emitted(FLAT_DOCS) == 0
    from tokenforge.eval.compare import CompareOptions, run_compare

    corpus = _w(tmp_path, "c.jsonl", "".join(json.dumps({"text": d}) + "\n" for d in FLAT_DOCS))
    res = run_compare(
        CompareOptions(
            corpus=[str(corpus)],
            families="lz78:frequency_gated,lz78:frequency_gated:compact",
            vocab_sizes=[600],
            eval_mb=0.05,
            out=str(tmp_path / "r"),
            progress=False,
            command="c",
        )
    )
    plain, comp = res["rows"]
    assert plain["lz78"]["never_emitted"] > 0 and plain["lz78"]["prefix_only"] == 0
    assert comp["lz78"]["never_emitted"] == 0 and comp["lz78"]["prefix_only"] == plain["lz78"]["never_emitted"]
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "## LZ78 output vocabulary" in md and "prefix-only" in md
    n = plain["lz78"]["never_emitted"]
    assert f"{n:,} ({100 * n / plain['lz78']['output_ids']:.1f}%)" in md


def _w(tmp_path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p
