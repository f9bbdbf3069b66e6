"""compare on a laptop: finished bits-per-byte results survive a killed run and
are reused (only the rest is computed), the whole-run progress line with its
estimate, the report's summary paragraph, and plots whose value axes start at 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tokenforge.eval import bpb as bpb_module
from tokenforge.eval.compare import CompareOptions, run_compare
from tokenforge.eval.report import (
    bpb_table,
    plot_bpb,
    plot_bytes_per_token,
    plot_premiums,
    plot_token_lengths,
    summary,
)
from tokenforge.progress import RunEstimate, duration

WORDS = "the quick brown fox jumps over the lazy dog while five boxing wizards jump quickly".split()
DOCS = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40 + i % 30)) + f"\n{i} ünï 🙂\n" for i in range(120)]
TINY = dict(n_layer=1, n_head=2, n_embd=16, seq_len=32, batch_size=4, threads=1)


def _opts(tmp_path: Path, **kw) -> dict:
    corpus = tmp_path / "corpus.jsonl"
    if not corpus.exists():
        corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS), encoding="utf-8")
    return dict(
        corpus=[str(corpus)],
        families="bpe",
        vocab_sizes=[300],
        eval_mb=0.02,
        bpb=True,
        seeds=[0, 1, 2],
        bpb_train_mb=0.02,
        bpb_eval_mb=0.005,
        out=str(tmp_path / "report"),
        command="tokenforge compare (test)",
        progress=False,
        **kw,
    )


CHILD = """
import json, sys, time
from pathlib import Path
from tokenforge.eval.bpb import BPBConfig
from tokenforge.eval.compare import CompareOptions, run_compare

opts, tiny, marker = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])

def log(msg):
    print(msg, file=sys.stderr, flush=True)
    if "bits-per-byte runs 1/" in msg:  # the first seed's result is sealed on disk: wait to be killed
        marker.write_text("1")
        time.sleep(600)

run_compare(CompareOptions(**opts, bpb_config=BPBConfig(**tiny), log=log))
"""


def _result_files(out: Path) -> list[Path]:
    return sorted(out.glob("work/*/results/*.json"))


def test_a_killed_bpb_run_keeps_its_finished_result_and_the_rerun_computes_only_the_rest(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    opts = _opts(tmp_path)
    marker = tmp_path / "first-result-written"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(opts), json.dumps(TINY), str(marker)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")},
    )
    try:
        deadline = time.monotonic() + 600  # a bound on waiting, not a timing assertion
        while not marker.exists():
            if child.poll() is not None:
                pytest.fail(f"the child ended before its first result: {child.stderr.read()}")
            assert time.monotonic() < deadline, "the child wrote no result"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(60)
        child.stderr.close()
    out = Path(opts["out"])
    (kept,) = _result_files(out)  # one seed finished before the kill, sealed
    assert kept.name.startswith("seed0-")
    first = json.loads(kept.read_text())
    assert first["format"] == "tokenforge-bpb-result" and first["key"]["seed"] == 0
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "running"  # the report of a killed run does not claim to be complete

    trained = []
    real = bpb_module.train_and_evaluate

    def counting(tok, train, held, cfg, seed, **kw):
        trained.append(seed)
        return real(tok, train, held, cfg, seed, **kw)

    monkeypatch.setattr(bpb_module, "train_and_evaluate", counting)
    lines: list[str] = []
    again = run_compare(CompareOptions(**opts, bpb_config=bpb_module.BPBConfig(**TINY), log=lines.append))
    assert trained == [1, 2]  # only the rest
    runs = again["rows"][0]["bpb"]["flat"]["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert runs[0] == first["result"]  # the kept result, as it was written
    assert any(line.startswith("  reused the cached result of seed 0") for line in lines)
    progress = [line for line in lines if line.startswith("compare: ")]
    assert progress[-1].startswith("compare: 4 of 4 steps done (tokenizers 1/1, bits-per-byte runs 3/3)")
    assert len(_result_files(out)) == 3
    assert json.loads((out / "results.json").read_text())["status"] == "complete"

    # a third run computes nothing
    trained.clear()
    run_compare(CompareOptions(**opts, bpb_config=bpb_module.BPBConfig(**TINY), log=lines.append))
    assert trained == []
    # another setting is another key: not reused
    run_compare(
        CompareOptions(
            **{**opts, "seeds": [0]}, bpb_config=bpb_module.BPBConfig(**{**TINY, "lr": 1e-3}), log=lines.append
        )
    )
    assert trained == [0]


def test_a_kept_result_is_trusted_only_whole_and_for_its_own_key(tmp_path):
    key = {"tokenizer": "sha256:ab", "config": {"lr": 0.003}, "seed": 0, "train_text": "1", "eval_text": "2"}
    path = bpb_module.result_path(tmp_path, key)
    bpb_module.write_result(path, key, {"bpb": 1.25, "seed": 0})
    assert bpb_module.read_result(path, key) == {"bpb": 1.25, "seed": 0}
    assert bpb_module.read_result(path, {**key, "seed": 1}) is None  # another key
    text = path.read_text()
    path.write_text(text.replace("1.25", "1.15"))  # changed after it was written
    assert bpb_module.read_result(path, key) is None
    path.write_text(text[: len(text) // 2])  # cut short
    assert bpb_module.read_result(path, key) is None
    assert bpb_module.read_result(tmp_path / "none.json", key) is None
    assert bpb_module.result_path(tmp_path, key) != bpb_module.result_path(tmp_path, {**key, "config": {"lr": 0.001}})


def test_run_estimate_lines():
    now = [100.0]
    est = RunEstimate({"tokenizers": 2, "runs": 4}, names={"runs": "run"}, clock=lambda: now[0])
    now[0] += 10
    assert est.step("tokenizers", 10.0) == (
        "1 of 6 steps done (tokenizers 1/2, runs 0/4), 10s so far, time left known after the first run"
    )
    now[0] += 5
    assert est.step("tokenizers", None) == (  # reused: done, but not in the mean
        "2 of 6 steps done (tokenizers 2/2, runs 0/4), 15s so far, time left known after the first run"
    )
    now[0] += 60
    assert est.step("runs", 60.0) == "3 of 6 steps done (tokenizers 2/2, runs 1/4), 1m15s so far, about 3m00s left"
    now[0] += 100
    assert est.step("runs", 100.0) == "4 of 6 steps done (tokenizers 2/2, runs 2/4), 2m55s so far, about 2m40s left"
    est.drop("runs", 1)
    assert est.line().endswith("about 1m20s left") and "runs 2/3" in est.line()
    now[0] += 80
    assert est.step("runs", 80.0) == "5 of 5 steps done (tokenizers 2/2, runs 3/3), 4m15s so far"
    assert [duration(x) for x in (0.4, 59, 61, 3599, 3600, 7322)] == ["0s", "59s", "1m01s", "59m59s", "1h00m", "2h02m"]


def _row(label, size, bpt, bpb=None, gini=None):
    r = {
        "label": label,
        "spec": label.split(" ")[0],
        "family": "bpe",
        "vocab_size": size,
        "metrics": {
            "model_vocab_size": size,
            "bytes_per_token": bpt,
            "chars_per_token": bpt,
            "vocab_utilisation": 0.9,
            "renyi_efficiency": 0.5,
            "token_length_histogram": {"1": 10, "2": 30, "3": 5},
        },
    }
    if bpb is not None:
        mean, std, n = bpb
        r["bpb"] = {"flat": {"bpb": {"mean": mean, "std": std, "n": n}}}
    if gini is not None:
        r["languages"] = {"gini": gini, "languages": {"en": {"premium": 1.0, "lossless": True}}}
    return r


def test_summary_names_the_winner_the_margin_and_the_noise():
    res = {
        "rows": [
            _row("a @8192", 8192, 4.00, (1.10, 0.01, 3), 0.20),
            _row("b @8192", 8192, 4.40, (1.00, 0.01, 3), 0.10),
            _row("c @4096", 4096, 3.50, (1.05, 0.08, 3)),
        ]
    }
    assert summary(res) == [
        "Lowest bits per byte: b @8192, 1.0000 against 1.0500 for c @4096, the next best (4.8% lower); the gap of "
        "0.0500 is within the noise across 3 seeds (the two stds together: 0.0900): not a clear win.",
        "Best compression at 8,192 ids: b @8192, 4.400 bytes per token, 10.0% more than a @8192 (4.000); one "
        "held-out text, so no noise estimate.",
        "Fairest across languages: b @8192, a Gini of premiums of 0.100 against 0.200 for a @8192.",
    ]
    res["rows"][2]["bpb"]["flat"]["bpb"]["std"] = 0.01
    assert "larger than the noise across 3 seeds (the two stds together: 0.0200)." in summary(res)[0]
    for r in res["rows"]:
        r["bpb"]["flat"]["bpb"]["n"] = 1
    assert "measured on one seed, so with no estimate of the noise" in summary(res)[0]
    assert summary({"rows": [_row("x", 300, 2.0)]}) == ["x: 2.000 bytes per token."]


def test_every_plot_starts_its_value_axis_at_zero(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    from tokenforge.eval import report

    figs = []
    monkeypatch.setattr(report, "_save_png", lambda fig, path: figs.append(fig))
    rows = [_row(f"t{i} @{300 + i}", 300 + i, 2.0 + i / 100, (1.20 + i / 100, 0.002, 2), 0.1) for i in range(6)]
    for r in rows:
        r["languages"]["languages"]["de"] = {"premium": 1.3, "lossless": True}
    res = {"rows": rows, "languages": {"reference": "en"}}
    for plot in (plot_bytes_per_token, plot_bpb, plot_token_lengths, plot_premiums):
        assert plot(res, tmp_path / "x.png")
    axes = [ax for fig in figs for ax in fig.axes if ax.get_visible()]
    assert len(axes) >= 4 + 5  # small multiples for six tokenizers' lengths
    for ax in axes:
        assert ax.get_ylim()[0] == 0, ax.get_title()
    for fig in figs[:2] + figs[3:]:
        assert "axis from 0" in fig.axes[0].get_ylabel()


CLI_CHILD = """
import os, signal, sys
from tokenforge.cli.main import main

class Stderr:  # Ctrl-C as a user would press it: a real SIGINT, once the first seed's line is out
    def __init__(self, real):
        self.real = real
    def write(self, s):
        self.real.write(s)
        if "bits-per-byte runs 1/" in s:
            os.kill(os.getpid(), signal.SIGINT)
        return len(s)
    def flush(self):
        self.real.flush()
    def isatty(self):
        return False

sys.stderr = Stderr(sys.stderr)
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_stops_compare_cleanly_and_keeps_the_finished_seed(tmp_path):
    pytest.importorskip("torch")
    opts = _opts(tmp_path)
    out = Path(opts["out"])
    args = [
        *opts["corpus"],
        "--families", "bpe", "--vocab-sizes", "300", "--eval-mb", "0.02", "--bpb", "--seeds", "3",
        "--bpb-train-mb", "0.02", "--bpb-eval-mb", "0.005", "--layers", "1", "--width", "16", "--heads", "2",
        "--seq-len", "32", "--batch-size", "4", "--threads", "1", "-o", str(out),
    ]  # fmt: skip
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CLI_CHILD), "compare", *args],
        capture_output=True,
        text=True,
        timeout=600,  # a bound, not a timing assertion
        env={**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")},
    )
    assert child.returncode == 130, child.stderr  # interrupted: nothing half-written
    assert "Traceback" not in child.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "interrupted"
    assert "(so far: the run was interrupted)" in (out / "report.md").read_text()
    (kept,) = _result_files(out)
    assert kept.name.startswith("seed0-")
    assert not list(out.rglob("*.tmp*"))  # no temporary file left behind


def test_bits_per_byte_over_a_normalized_text_are_not_ranked_against_the_whole_texts():
    """A tokenizer that normalizes (the imported WordPiece lower-cases, SentencePiece's NFKC drops) is
    scored over the bytes its tokens spell, fewer than the text's: its BPB is listed apart, never the winner."""
    rows = [
        _row("bpe @8192", 8192, 4.0, (2.60, 0.01, 2)),
        _row("hf:wordpiece @8192", 8192, 4.5, (2.50, 0.01, 2)),
        _row("spm:unigram @8192", 8192, 4.4, (2.80, 0.01, 2)),
    ]
    for r, scored in zip(rows, (500_000, 442_807, None)):
        b = r["bpb"]["flat"]
        b.update(runs=[{"bpb": b["bpb"]["mean"], "train_seconds": 1.0, "eval_seconds": 1.0}], train_tokens=100)
        if scored is not None:
            b["eval_bytes"] = scored
    res = {"rows": rows, "bpb_setup": {"eval_bytes": 500_000}}
    head, table = bpb_table(res)
    assert head[-1] == "bytes scored"
    # ranked: bpe, then spm (no count recorded: an older result, taken as whole); wordpiece apart, after them
    assert [(t[0], t[1], t[-1]) for t in table] == [
        ("1", "bpe @8192", "500,000 (all)"),
        ("2", "spm:unigram @8192", "all"),
        ("– (another text)", "hf:wordpiece @8192", "442,807 of 500,000 (88.6%)"),
    ]
    assert summary(res)[0].startswith("Lowest bits per byte: bpe @8192, 2.6000 against 2.8000 for spm:unigram @8192")
    # without the text's count (results from before it was recorded) every run is ranked as before
    assert [t[0] for t in bpb_table({"rows": rows})[1]] == ["1", "2", "3"]
