"""Imported and standard tokenizers in ``compare`` (issue 31, items 2 and 3).

``compare --families spm:unigram,spm:bpe,hf:wordpiece,hf:unigram`` trains them
with their own libraries beside tokenforge's families (``pipeline:spm_unigram``
still reads); the report records how each was trained; ``compare --load``
takes a SentencePiece ``.model`` and a tokenizer.json of any model type; the
bits-per-byte harness runs on an imported tokenizer.
"""

from __future__ import annotations

import json

import pytest

from tokenforge.eval.bpb import BPBConfig
from tokenforge.eval.compare import CompareOptions, run_compare
from tokenforge.eval.families import parse_specs

pytest.importorskip("torch")

WORDS = "the quick brown fox jumps over the lazy dog while five boxing wizards jump quickly".split()
DOCS = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40 + i % 30)) + f"\n{i} ünï 🙂\n" for i in range(120)]


def test_spec_names_of_the_standard_algorithms():
    specs = parse_specs("spm:unigram,spm:bpe,hf:wordpiece,hf:unigram,pipeline:spm_unigram")
    assert [(s.family, s.words) for s in specs] == [
        ("pipeline", ("spm_unigram",)),
        ("pipeline", ("spm_bpe",)),
        ("pipeline", ("hf_wordpiece",)),
        ("pipeline", ("hf_unigram",)),
    ]  # the old spelling is the same spec
    assert [s.text for s in specs] == ["spm:unigram", "spm:bpe", "hf:wordpiece", "hf:unigram"]
    from tokenforge.eval.families import SpecError

    with pytest.raises(SpecError, match="spm:unigram, spm:bpe, hf:wordpiece, hf:unigram"):
        parse_specs("spm:magic")


def test_compare_puts_the_standard_algorithms_beside_tokenforges(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS), encoding="utf-8")
    out = tmp_path / "report"
    results = run_compare(
        CompareOptions(
            corpus=[str(corpus)],
            families="bpe,spm:unigram,spm:bpe,hf:wordpiece,hf:unigram",
            vocab_sizes=[300],
            eval_mb=0.05,
            bpb=True,
            seeds=[0],
            bpb_train_mb=0.02,
            bpb_eval_mb=0.005,
            bpb_vocab_sizes=[300],
            embeddings=["flat"],
            bpb_config=BPBConfig(n_layer=1, n_head=2, n_embd=16, seq_len=32, batch_size=4, threads=1),
            out=str(out),
            command="tokenforge compare (test)",
            progress=False,
        )
    )
    rows = {r["label"]: r for r in results["rows"]}
    assert set(rows) == {"bpe @300", "spm:unigram @300", "spm:bpe @300", "hf:wordpiece @300", "hf:unigram @300"}
    for label, row in rows.items():
        assert "error" not in row, (label, row.get("error"))
        assert row["metrics"]["bytes_per_token"] > 1
        assert row["bpb"]["flat"]["bpb"]["n"] == 1, label
    assert rows["spm:unigram @300"]["pipeline"]["library"].startswith("sentencepiece ")
    assert "hard_vocab_limit=false" in rows["spm:bpe @300"]["pipeline"]["settings"]
    assert rows["hf:wordpiece @300"]["pipeline"]["library"].startswith("tokenizers ")
    # WordPiece drops whitespace and lower-cases: no document comes back exactly
    assert rows["hf:wordpiece @300"]["pipeline"]["exact_documents_share"] == 0
    assert 0.5 < rows["hf:wordpiece @300"]["pipeline"]["spelled_bytes_share"] < 1
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Standard algorithms: how they were trained" in md and "BertPreTokenizer" in md
    # --load of the files they were saved as (and of the library's own files)
    for r in rows.values():
        assert r["serve_path"]
    loaded = run_compare(
        CompareOptions(
            corpus=[str(corpus)],
            families="",
            load=[("spm", rows["spm:unigram @300"]["serve_path"]), ("wp", rows["hf:wordpiece @300"]["serve_path"])],
            eval_mb=0.05,
            out=str(tmp_path / "loaded"),
            command="tokenforge compare --load (test)",
            progress=False,
        )
    )
    assert len(loaded["rows"]) == 2 and all("error" not in r for r in loaded["rows"])
    by_metrics = sorted(r["metrics"]["bytes_per_token"] for r in loaded["rows"])
    assert by_metrics == sorted(
        rows[k]["metrics"]["bytes_per_token"] for k in ("spm:unigram @300", "hf:wordpiece @300")
    )
