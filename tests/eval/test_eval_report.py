"""The harness end to end (tiny models) and the comparison report: files, HTML, plots, CLI."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path

import pytest

import tokenforge
from tokenforge.cli.main import main
from tokenforge.eval.bpb import BPBConfig, run_bpb
from tokenforge.eval.compare import CompareOptions, run_compare
from tokenforge.eval.report import seed_ordering

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _matplotlib_cache_under_tmp(tmp_path_factory):
    # matplotlib keeps a font cache; keep it under the test's temporary directory
    mp = pytest.MonkeyPatch()
    mp.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("mplconfig")))
    yield
    mp.undo()


WORDS = "the quick brown fox jumps over the lazy dog while five boxing wizards jump quickly".split()
DOCS = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40 + i % 30)) + f"\n{i} ünï 🙂\n" for i in range(120)]
TINY = BPBConfig(n_layer=1, n_head=2, n_embd=16, seq_len=32, batch_size=4, threads=1)


def _corpus(tmp_path) -> Path:
    p = tmp_path / "corpus.jsonl"
    p.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS), encoding="utf-8")
    return p


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.srcs.append(dict(attrs)["src"])


def _check_report(out: Path) -> dict:
    parser = _Images()
    parser.feed((out / "report.html").read_text(encoding="utf-8"))
    parser.close()
    assert "table" in parser.tags and "pre" in parser.tags
    assert parser.srcs, "the report shows no plot"
    for src in parser.srcs:
        p = out / src
        assert p.is_file() and p.stat().st_size > 0, src
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "results.json").read_text())
    assert results["format"] == "tokenforge-compare" and results["version"] == 1
    assert set(results["plots"].values()) == set(parser.srcs)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert results["command"] in md
    for name in results["plots"].values():
        assert f"]({name})" in md
    return results


def test_run_bpb_two_seeds_and_structured_mode(tmp_path):
    tok = tokenforge.BPETokenizer.train_from_iterator(DOCS, 330, progress=False)
    train, held = DOCS[:100], DOCS[100:]
    r = run_bpb(tok, train, held, tmp_path / "w", cfg=TINY, seeds=[0, 1], progress=False)
    assert r["bpb"]["n"] == 2 and r["bpb"]["std"] > 0
    assert r["eval_bytes"] == sum(len(d.encode()) for d in held)
    assert all(run["bytes"] == r["eval_bytes"] for run in r["runs"])
    assert 0 < r["bpb"]["mean"] < 12
    again = run_bpb(tok, train, held, tmp_path / "w", cfg=TINY, seeds=[0], progress=False)  # reuses the shards
    assert again["runs"][0]["bpb"] == pytest.approx(r["runs"][0]["bpb"], rel=1e-5)  # same seed, same number
    s = run_bpb(
        tok,
        train,
        held,
        tmp_path / "w",
        cfg=BPBConfig(**{**TINY.to_dict(), "embedding": "structured"}),
        seeds=[0],
        progress=False,
    )
    assert s["runs"][0]["params_embedding"] == (tok.vocab_size + 1) * 16 + tok.vocab_size * 16
    b = run_bpb(
        tok,
        train,
        held,
        tmp_path / "w",
        cfg=BPBConfig(**{**TINY.to_dict(), "autocast": "bf16"}),
        seeds=[0],
        progress=False,
    )
    assert abs(b["runs"][0]["bpb"] - r["runs"][0]["bpb"]) < 0.2  # bfloat16 autocast: close to float32


def test_run_bpb_refuses_inexact_token_bytes_before_training(tmp_path):
    from eval_stubs import DictTokenizer
    from tokenforge.eval.bpb import BPBError

    class ThreeBytes(DictTokenizer):  # nanochat's first version: a lone partial UTF-8 byte counted as 3 bytes
        def token_bytes(self):
            tb = super().token_bytes()
            tb[self.n + 1 + 0x80 : self.n + 257] = 3
            return tb

    docs = ["hello é", "ex 🙂 lo"]
    with pytest.raises(BPBError, match="losslessly"):
        run_bpb(ThreeBytes(), docs, docs, tmp_path / "w", cfg=TINY, seeds=[0], progress=False)


def test_compare_writes_a_report_whose_html_parses_and_whose_plots_exist(tmp_path):
    out = tmp_path / "report"
    opts = CompareOptions(
        corpus=[str(_corpus(tmp_path))],
        families="bpe,lz78:frequency_gated,lz78:frequency_gated:nochunk,mixedgram,growing",
        vocab_sizes=[300, 360],
        eval_mb=0.05,
        bpb=True,
        seeds=[0, 1],
        bpb_train_mb=0.02,
        bpb_eval_mb=0.005,
        bpb_vocab_sizes=[300],
        embeddings=["flat", "structured"],
        bpb_config=TINY,
        out=str(out),
        command="tokenforge compare (test)",
        progress=False,
    )
    results = run_compare(opts)
    on_disk = _check_report(out)
    assert on_disk["status"] == "complete"
    assert {p for p in on_disk["plots"]} == {"bytes_per_token", "bpb", "token_lengths"}
    labels = [r["label"] for r in results["rows"]]
    assert "bpe @300" in labels and "bpe @360" in labels
    bpe300 = next(r for r in results["rows"] if r["label"] == "bpe @300")
    assert set(bpe300["bpb"]) == {"flat", "structured"}
    assert bpe300["bpb"]["flat"]["bpb"]["n"] == 2
    assert "bpb" not in next(r for r in results["rows"] if r["label"] == "bpe @360")
    for fam, cls in (("lz78", "LZ78Tokenizer"), ("mixedgram", "Mixedgram"), ("growing", "GrowingBPETokenizer")):
        present = getattr(tokenforge, cls, None) is not None
        assert any(s["spec"].startswith(fam) for s in results["skipped"]) != present
    # the cached tokenizers are reused by a second run (which also rewrites the report)
    opts.bpb = False
    again = run_compare(opts)
    assert all(r.get("reused") for r in again["rows"] if r["family"] == "bpe")
    assert not (out / "bpb.png").exists()  # no stale plot of the earlier run
    _check_report(out)


def test_cached_tokenizer_keeps_the_settings_its_file_does_not_record(tmp_path):
    """A cached mixedgram (trained with errors="replace": the file does not
    record it) is reused by a second run on text outside latin1, and encodes
    it as the first run did, instead of failing as a strict one would."""
    corpus = tmp_path / "c.jsonl"
    docs = [f"naïve café {i} — 東京 “quoted” text " * 20 for i in range(200)]
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    opts = CompareOptions(
        corpus=[str(corpus)],
        families="mixedgram",
        vocab_sizes=[300],
        eval_mb=0.01,
        bpb=False,
        out=str(tmp_path / "r"),
        command="tokenforge compare (test)",
        progress=False,
    )
    if getattr(tokenforge, "Mixedgram", None) is None:
        pytest.skip("no mixedgram family")
    first = run_compare(opts)
    again = run_compare(opts)
    row1, row2 = first["rows"][0], again["rows"][0]
    assert not row1.get("reused") and row2.get("reused")
    assert row2["metrics"]["bytes_per_token"] == row1["metrics"]["bytes_per_token"]


def test_cli_compare(tmp_path, capsys):
    out = tmp_path / "r"
    code = main(
        [
            "compare",
            str(_corpus(tmp_path)),
            "--vocab-sizes",
            "300",
            "--families",
            "bpe,mixedgram",
            "--eval-mb",
            "0.05",
            "-o",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    results = _check_report(out)
    assert results["command"].startswith("tokenforge compare ")
    assert "--vocab-sizes 300" in results["command"] and f"-o {out}" in results["command"]
    assert "report.html" in capsys.readouterr().out


def test_cli_compare_errors(tmp_path, capsys):
    assert main(["compare", str(_corpus(tmp_path)), "--families", "wordpiece", "-o", str(tmp_path / "x")]) == 1
    assert "unknown tokenizer family" in capsys.readouterr().err
    code = main(
        [
            "compare",
            str(_corpus(tmp_path)),
            "--families",
            "bpe",
            "--vocab-sizes",
            "300",
            "--bpb",
            "--embeddings",
            "hierarchical",
            "--bpb-train-mb",
            "0.01",
            "--bpb-eval-mb",
            "0.005",
            "--layers",
            "1",
            "--width",
            "16",
            "--heads",
            "2",
            "--seq-len",
            "16",
            "-o",
            str(tmp_path / "y"),
            "-q",
        ]
    )
    assert code == 0  # BPE has no hierarchical mode: reported in the report, not a crash
    results = json.loads((tmp_path / "y" / "results.json").read_text())
    assert "structured" in results["rows"][0]["bpb"]["hierarchical"]["error"]
    assert "n/a" in (tmp_path / "y" / "report.md").read_text()


def test_interrupted_compare_leaves_a_consistent_partial_report(tmp_path):
    def log(msg):
        if msg.startswith("training bpe @360"):
            raise KeyboardInterrupt

    opts = CompareOptions(
        corpus=[str(_corpus(tmp_path))],
        families="bpe",
        vocab_sizes=[300, 360],
        eval_mb=0.05,
        out=str(tmp_path / "r"),
        log=log,
        progress=False,
    )
    with pytest.raises(KeyboardInterrupt):
        run_compare(opts)
    results = _check_report(tmp_path / "r")
    assert results["status"] == "interrupted"
    assert [r["label"] for r in results["rows"]] == ["bpe @300"]


def test_report_without_matplotlib(tmp_path, monkeypatch):
    import sys

    from tokenforge.eval.report import write_report

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    results = run_compare(
        CompareOptions(
            corpus=[str(_corpus(tmp_path))],
            families="bpe",
            vocab_sizes=[300],
            eval_mb=0.05,
            out=str(tmp_path / "a"),
            progress=False,
            command="c",
        )
    )
    out = tmp_path / "r"
    written = write_report(results, out)
    assert {"bytes_per_token", "bpb", "token_lengths"}.isdisjoint(written)
    parser = _Images()
    parser.feed((out / "report.html").read_text())
    assert parser.srcs == [] and "matplotlib" in (out / "report.md").read_text()


def test_seed_ordering_verdict():
    def row(spec, mean, std):
        return {
            "spec": spec,
            "vocab_size": 8192,
            "label": spec,
            "bpb": {"flat": {"bpb": {"mean": mean, "std": std, "n": 3}}},
        }

    res = {
        "rows": [
            row("bpe", 0.94, 0.001),
            row("lz78:frequency_gated", 1.10, 0.002),
            row("lz78:frequency_gated:nochunk", 1.18, 0.002),
        ]
    }
    (line,) = seed_ordering(res)
    assert "holds" in line and "does not hold" not in line and "larger than" in line
    res["rows"][2] = row("lz78:frequency_gated:nochunk", 1.05, 0.002)
    (line,) = seed_ordering(res)
    assert "does not hold" in line
    assert seed_ordering({"rows": res["rows"][:2]}) == []
