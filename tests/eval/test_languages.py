"""Per-language metrics (issue 16, item 2): hand-computed Gini, premiums, fertility, and the readers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenforge import GrowingBPETokenizer
from tokenforge.errors import CorpusError, TokenforgeError
from tokenforge.eval.languages import (
    LangDoc,
    gini,
    language_metrics,
    parse_heldout_arg,
    per_language_metrics,
    premiums,
    read_language_documents,
)


def test_gini_hand_computed():
    assert gini([1.0, 1.0, 1.0]) == 0.0
    assert gini([1, 3]) == pytest.approx(0.25)  # |1-3|*2 ordered pairs / (2 * 2^2 * mean 2)
    assert gini([4, 1, 3, 2]) == pytest.approx(0.25)  # pair differences 1+2+3+1+2+1 = 10; 20 / (2 * 16 * 2.5)
    assert gini([0, 0, 3]) == pytest.approx(2 / 3)  # one holds all: (n - 1) / n
    assert gini([]) == 0.0 and gini([5]) == 0.0 and gini([0, 0]) == 0.0
    with pytest.raises(TokenforgeError):
        gini([1, -1])
    with pytest.raises(TokenforgeError):
        gini([1, float("nan")])


def test_premiums_parallel_and_by_bytes_per_token():
    per_lang = {
        "en": {"doc_tokens": [10, 20], "bytes_per_token": 4.0},
        "de": {"doc_tokens": [15, 40, 7], "bytes_per_token": 3.0},
        "fr": {"doc_tokens": [9], "bytes_per_token": 2.5},
    }
    ids = {"en": ["a", "b"], "de": ["a", "b", "c"], "fr": [None]}
    p = premiums(per_lang, "en", ids)
    assert p["en"] == {"premium": 1.0, "method": "parallel", "units": 2}
    assert p["de"]["premium"] == pytest.approx((15 + 40) / (10 + 20)) and p["de"]["method"] == "parallel"
    assert p["de"]["units"] == 2  # "c" has no English side
    assert p["fr"] == {"premium": pytest.approx(4.0 / 2.5), "method": "bytes/token", "units": 0}
    # without parallel ids every language is compared by bytes/token
    q = premiums(per_lang, "en")
    assert q["de"]["premium"] == pytest.approx(4.0 / 3.0) and q["en"]["premium"] == 1.0
    with pytest.raises(TokenforgeError, match="reference language 'es'.*--reference-lang"):
        premiums(per_lang, "es")


class _Fixed:
    """A stand-in tokenizer: each text's tokens are given (as byte strings)."""

    def __init__(self, table: dict[str, list[bytes]]):
        self.vocab = sorted({t for toks in table.values() for t in toks})
        self.table = {k: [self.vocab.index(t) for t in v] for k, v in table.items()}

    def token_bytes(self):
        return np.array([len(t) for t in self.vocab])

    def normalize(self, text):
        return text

    def encode_batch_flat(self, texts, num_threads=None):
        ids = [self.table[t] for t in texts]
        off = np.cumsum([0] + [len(x) for x in ids])
        return np.array([i for x in ids for i in x], np.uint32), off


def test_fertility_and_continued_words_hand_computed():
    tok = _Fixed(
        {
            # words "ab" (1 token), "cde" (" cd" + "e": 2), "e" (1); the lone space touches no word
            "ab cde e": [b"ab", b" cd", b"e", b" ", b"e"],
            # a token across the space ("xe c") counts for both words: "xe" 1, "cy" 2
            "xe cy": [b"xe c", b"y"],
        }
    )
    m = language_metrics(tok, ["ab cde e", "xe cy"])
    assert m["documents"] == 2 and m["tokens"] == 7 and m["bytes"] == 13 and m["chars"] == 13
    assert m["words"] == 5
    assert m["fertility"] == pytest.approx((1 + 2 + 1 + 1 + 2) / 5)
    assert m["continued_word_rate"] == pytest.approx(2 / 5)
    assert m["bytes_per_token"] == pytest.approx(13 / 7) and m["doc_tokens"] == [5, 2]
    unspaced = language_metrics(tok, ["ab cde e"], space_separated=False)
    assert unspaced["fertility"] is None and unspaced["continued_word_rate"] is None and unspaced["words"] is None
    assert m["lossless"] is True
    lossy = _Fixed({"ab cde e": [b"ab", b"e"]})  # its tokens do not spell the text
    bad = language_metrics(lossy, ["ab cde e"])
    assert bad["fertility"] is None and bad["lossless"] is False and bad["tokens"] == 2


def test_byte_level_vocabulary_per_language_end_to_end():
    tok = GrowingBPETokenizer()  # no merges: one token per byte
    docs = [
        LangDoc("ab cd", "en", "p1"),
        LangDoc("éé ü", "de", "p1"),  # 7 bytes
        LangDoc("日本語", "ja", "p1"),  # 9 bytes, no spaces
        LangDoc("not in any language"),
    ]
    r = per_language_metrics(tok, docs, reference="en")
    en, de, ja = (r["languages"][k] for k in ("en", "de", "ja"))
    assert en["fertility"] == 2.0 and en["continued_word_rate"] == 1.0 and en["premium"] == 1.0
    assert de["tokens"] == 7 and de["premium"] == pytest.approx(7 / 5) and de["method"] == "parallel"
    assert de["fertility"] == pytest.approx(6 / 2) and de["chars_per_token"] == pytest.approx(4 / 7)
    assert ja["fertility"] is None and ja["premium"] == pytest.approx(9 / 5)
    assert r["gini"] == pytest.approx(gini([1.0, 7 / 5, 9 / 5]))
    assert "doc_tokens" not in en


def test_reading_documents_with_languages(tmp_path):
    p = tmp_path / "held.jsonl"
    rows = [
        {"text": "hello world", "lang": "en", "parallel_id": "ls.1"},
        {"text": "hallo welt", "lang": "de", "parallel_id": 7},
        {"text": "no language"},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    docs = read_language_documents(p)
    assert docs == [LangDoc("hello world", "en", "ls.1"), LangDoc("hallo welt", "de", "7"), LangDoc("no language")]
    assert {d.lang for d in read_language_documents(p, "fr")} == {"fr"}
    t = tmp_path / "de.txt"
    t.write_text("ein Text\n")
    assert read_language_documents(t, "de") == [LangDoc("ein Text\n", "de")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"text": "x", "lang": "en"}) + "\n" + json.dumps({"text": "y", "lang": "not a code"}) + "\n"
    )
    with pytest.raises(CorpusError, match="bad.jsonl:2: 'lang'"):
        read_language_documents(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "x"}\n{"text": \n')
    with pytest.raises(CorpusError, match="broken.jsonl:2"):
        read_language_documents(broken)
    with pytest.raises(TokenforgeError, match="language code"):
        read_language_documents(t, "de de")


def test_heldout_argument(tmp_path, monkeypatch):
    assert parse_heldout_arg("de=man/de.jsonl") == ("de", "man/de.jsonl")
    assert parse_heldout_arg("pt-BR=x.txt") == ("pt-BR", "x.txt")
    assert parse_heldout_arg("held.jsonl") == (None, "held.jsonl")
    assert parse_heldout_arg("a b=c") == (None, "a b=c")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "en=odd.txt").write_text("x")
    assert parse_heldout_arg("en=odd.txt") == (None, "en=odd.txt")  # an existing file's name wins


def test_compare_reports_languages_gini_and_premium_plot(tmp_path, monkeypatch, capsys):
    from tokenforge.cli.main import main

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    words = "the quick brown fox jumps over the lazy dog while five boxing wizards jump".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(words[(i + k) % len(words)] for k in range(30)) for i in range(200)))
    held = tmp_path / "held.jsonl"
    rows = [{"text": " ".join(words[i : i + 8]), "lang": "en", "parallel_id": f"p{i}"} for i in range(5)]
    rows += [{"text": "der schnelle braune Fuchs springt über den faulen Hund", "lang": "de", "parallel_id": "p0"}]
    held.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ru = tmp_path / "ru.txt"
    ru.write_text("быстрая коричневая лиса прыгает через ленивую собаку\n")
    out = tmp_path / "r"
    args = ["compare", str(corpus), "--vocab-sizes", "300", "--families", "bpe,mixedgram", "-o", str(out), "-q"]
    assert main([*args, "--heldout", str(held), "--heldout", f"ru={ru}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert f"--heldout {held} --heldout ru={ru}" in res["command"]
    assert res["languages"]["reference"] == "en" and set(res["languages"]["held_out"]) == {"en", "de", "ru"}
    bpe = next(r for r in res["rows"] if r["family"] == "bpe")
    lg = bpe["languages"]
    assert lg["languages"]["de"]["method"] == "parallel" and lg["languages"]["de"]["units"] == 1
    assert lg["languages"]["ru"]["method"] == "bytes/token" and lg["languages"]["ru"]["premium"] > 1
    assert lg["gini"] == pytest.approx(gini([m["premium"] for m in lg["languages"].values()]))
    mix = next(r for r in res["rows"] if r["family"] == "mixedgram")
    mru, mde = mix["languages"]["languages"]["ru"], mix["languages"]["languages"]["de"]
    assert mru["lossless"] is False and mru["fertility"] is None  # latin1 only: Russian is not spelled
    assert mde["lossless"] and mde["premium"] is not None
    assert mix["languages"]["gini"] == pytest.approx(gini([1.0, mde["premium"]]))  # Russian left out
    md = (out / "report.md").read_text()
    assert "## Languages" in md and "Gini of premiums" in md and "premiums.png" in md
    assert (out / "premiums.png").read_bytes()[:4] == b"\x89PNG"
    # the reference language must be among the held-out languages
    assert main([*args, "--heldout", str(held), "--reference-lang", "fr"]) == 1
    assert "reference language 'fr'" in capsys.readouterr().err


def test_the_committed_multilingual_fixture():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "fixtures" / "multilingual" / "heldout.jsonl"
    docs = read_language_documents(path)
    langs = {d.lang for d in docs}
    assert langs == {"en", "de", "es", "fr", "it", "ja", "nl", "pl", "ru", "uk"}
    for lang in langs:
        size = sum(len(d.text.encode()) for d in docs if d.lang == lang)
        assert 1000 < size < 8000, lang  # a few KB per language
    assert {d.parallel_id for d in docs} == {"man4/intro.4", "man6/intro.6", "man7/intro.7"}
    r = per_language_metrics(GrowingBPETokenizer(), docs, reference="en")  # byte level: premium = byte ratio
    for lang, m in r["languages"].items():
        assert m["method"] == "parallel" and m["units"] == 3 and m["lossless"]
        mine = sum(len(d.text.encode()) for d in docs if d.lang == lang)
        ref = sum(len(d.text.encode()) for d in docs if d.lang == "en")
        assert m["premium"] == pytest.approx(mine / ref)
    assert r["languages"]["ja"]["fertility"] is None and r["languages"]["ru"]["fertility"] > 1
    assert 0 < r["gini"] < 1


def test_token_length_plot_stays_readable_with_a_dozen_tokenizers(tmp_path, monkeypatch):
    """Up to four tokenizers share one plot; a dozen get one small panel each
    (four to a row, shared axes), so none hides another."""
    pytest.importorskip("matplotlib")
    from tokenforge.eval.report import plot_token_lengths, token_length_layout

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    assert [token_length_layout(n) for n in (1, 4, 5, 8, 12, 13)] == [(1, 1), (1, 1), (2, 4), (2, 4), (3, 4), (4, 4)]
    rows = [
        {"label": f"tok{k}", "metrics": {"token_length_histogram": {str(n): (n * k) % 7 + 1 for n in range(1, 9 + k)}}}
        for k in range(12)
    ]
    sizes = {}
    for n in (3, 12):
        out = tmp_path / f"lengths{n}.png"
        assert plot_token_lengths({"rows": rows[:n]}, out)
        data = out.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        sizes[n] = int.from_bytes(data[20:24], "big")  # PNG height
    assert sizes[12] > sizes[3]  # three rows of panels, not one crowded plot


def test_gini_table_says_what_fairness_cost_against_the_family_default():
    from tokenforge.eval.report import gini_table

    def row(spec, family, size, bpt, g):
        prem = {"en": {"premium": 1.0, "lossless": True}, "de": {"premium": 1 + g, "lossless": True}}
        return {
            "label": f"{spec} @{size}",
            "spec": spec,
            "family": family,
            "vocab_size": size,
            "metrics": {"bytes_per_token": bpt},
            "languages": {"gini": g, "languages": prem},
        }

    rows = [
        row("bpe", "bpe", 100, 4.0, 0.08),
        row("bpe:parity", "bpe", 100, 3.9, 0.02),
        row("bpe:parity", "bpe", 200, 4.5, 0.03),  # no plain bpe at 200
        row("lz78:standard", "lz78", 100, 3.0, 0.1),  # no lz78 default
    ]
    head, table = gini_table({"rows": rows})
    assert head[-2:] == ["Gini vs family default", "bytes/token vs family default"]
    by = {r[0]: r[-2:] for r in table}
    assert by["bpe:parity @100"] == ["-75.0%", "-2.5%"]
    assert by["bpe @100"] == by["bpe:parity @200"] == by["lz78:standard @100"] == ["–", "–"]
