"""The comparison report's side-by-side paragraph and its playground links:
the paragraph's spans are each tokenizer's ids, and the command the report
shows starts a playground serving exactly those tokenizers under the names the
links use."""

import html.parser
import json
import shlex
from urllib.parse import parse_qs, urlsplit

from starlette.testclient import TestClient

from tokenforge.eval.compare import CompareOptions, run_compare
from tokenforge.eval.report import sample_paragraph
from tokenforge.registry import load
from tokenforge.serve import create_app, load_tokenizers

DOCS = [
    "Short title",
    "A paragraph long enough to be the sample: the tokenizers cut it differently, and the report shows "
    "where, side by side, with naïve café and 日本語 in it.\n\nAnother paragraph.",
] + [f"document {i}: the quick brown fox jumps over the lazy dog, again and again ({i})." for i in range(200)]


class _Cards(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.titles, self.card = [], {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "#" in a.get("href", ""):
            self.links.append(a["href"])
        if tag == "div" and a.get("class") == "card":
            self.card = len(self.titles)
            self.titles[self.card] = []
        if tag == "span" and self.card is not None and (a.get("title") or "").startswith("id "):
            self.titles[self.card].append(int(a["title"][3:]))


def test_sample_paragraph_bounds():
    assert sample_paragraph(DOCS).startswith("A paragraph long enough")
    assert sample_paragraph(["x" * 1000]) == "x" * 400
    assert sample_paragraph(["short", "longer one"]) == "longer one"


def test_report_paragraph_and_playground_links(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS * 3), encoding="utf-8")
    out = tmp_path / "report"
    results = run_compare(
        CompareOptions(
            corpus=[str(corpus)],
            heldout=None,
            families="bpe,mixedgram",
            vocab_sizes=[300],
            eval_mb=0.05,
            out=str(out),
            progress=False,
            command="c",
        )
    )
    text = results["sample_text"]
    assert text
    rows = [r for r in results["rows"] if not r.get("error")]
    assert [r["serve_name"] for r in rows] == ["bpe-300", "mixedgram"]
    toks = {r["serve_name"]: load(r["serve_path"]) for r in rows}
    for r in rows:
        assert r["sample"]["ids"] == toks[r["serve_name"]].encode_ordinary(text)

    page = (out / "report.html").read_text(encoding="utf-8")
    cards = _Cards()
    cards.feed(page)
    assert list(cards.titles.values()) == [r["sample"]["ids"] for r in rows]
    # every link opens the playground on the paragraph and names tokenizers the command serves
    command = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("tokenforge serve"))
    assert html.unescape(page).count(command) == 1
    served = load_tokenizers(shlex.split(command)[2:])
    assert list(served) == ["bpe-300", "mixedgram"]
    assert len(cards.links) == 3  # all of them, and one per tokenizer
    for link in cards.links:
        url = urlsplit(link)
        assert (url.scheme, url.netloc) == ("http", "127.0.0.1:8765")
        state = parse_qs(url.fragment)
        assert state["t"] == [text]
        assert set(state["k"]) <= set(served)
    with TestClient(create_app(served)) as c:
        for name, tok in served.items():
            ids = c.post("/api/encode", json={"tokenizer": name, "text": text}).json()["ids"]
            assert ids == toks[name].encode_ordinary(text)
