"""A family from outside the package, through the seam alone (issue 12, item 8).

The toy family (:mod:`toy_family`: a character tokenizer with its own JSON
format) is registered with :func:`tokenforge.registry.registered` by the
fixture below and nowhere else; no module of the package knows it. It trains
under the corpus rule, saves, loads back through :func:`tokenforge.load`
(whose sniffers now include its own), runs through ``compare`` (its spec and
options come from its record), pickles through its file, and gets its CLI
subcommand, shard index entry and fingerprint from the record. After each
test the registry is exactly the built-in families again.
"""

from __future__ import annotations

import json
import pickle

import pytest

import tokenforge
from tokenforge import registry
from tokenforge.errors import ChecksumError, CorpusError, FormatError, TokenforgeError, VersionError
from toy_family import TOY, CharTokenizer

BUILT_IN = list(registry.BUILT_IN)
DOCS = [f"Document {i}: the quick brown fox jumps over the lazy dog; café, naïve, 日本 {i}\n" for i in range(60)]
PROBES = ["", "hello world", "ünïcödé 🙂 日本語 \t\n", "\ud800 lone surrogate", "<|bos|> stays text"]


@pytest.fixture
def toy():
    with registry.registered(TOY) as fam:
        yield fam
    assert list(registry.FAMILIES) == BUILT_IN


def _corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS), encoding="utf-8")
    return path


def test_registers_through_the_seam_and_is_gone_afterwards(toy):
    assert registry.family("toy") is toy and toy.cls is CharTokenizer
    assert registry.family_of(CharTokenizer(["a"])) is toy
    assert registry.formats()[-1].name == "tokenforge-toy-chars"  # after every built-in sniffer
    # load order: the toy ranks 0, lower than any built-in family, and still comes after them all
    assert toy.sniff_rank < min(registry.FAMILIES[n].sniff_rank for n in BUILT_IN)
    assert registry.sniff_order() == [*registry.LOAD_ORDER, "toy"]
    with pytest.raises(TokenforgeError, match="already registered"):
        registry.register(TOY)
    with pytest.raises(TokenforgeError, match="built-in"):
        registry.unregister("bpe")


def test_registry_refuses_names_a_spec_cannot_hold():
    import dataclasses

    for bad in ("Toy", "to:y", "to,y", "", "1toy"):
        with pytest.raises(TokenforgeError, match="cannot be written in a spec"):
            registry.register(dataclasses.replace(TOY, name=bad))
    with pytest.raises(TokenforgeError, match="no registered family"):
        registry.unregister("toy")
    # a family's CLI is a module the command line imports by name, not a callable the registry runs
    with pytest.raises(TypeError, match="cli must be the name of a module with add_parser"):
        registry.register(dataclasses.replace(TOY, cli=lambda subparsers: None))
    assert list(registry.FAMILIES) == BUILT_IN


def test_registered_undoes_itself_when_the_block_fails():
    with pytest.raises(RuntimeError):
        with registry.registered(TOY):
            raise RuntimeError("boom")
    assert "toy" not in registry.FAMILIES
    with pytest.raises(TokenforgeError, match="unknown tokenizer family 'toy'"):
        registry.family("toy")


def test_trains_under_the_corpus_rule_saves_and_loads(toy, tmp_path):
    corpus = _corpus(tmp_path)
    from_files = CharTokenizer.train(str(corpus), 300)
    assert from_files._chars == CharTokenizer.train([corpus], 300)._chars  # a str path or a list of PathLike
    from_texts = CharTokenizer.train_from_iterator(DOCS, 300)
    assert from_files._chars == from_texts._chars
    assert len(from_texts._chars) == 300 - 256 - 1 and from_texts._chars[0] == " "
    with pytest.raises(CorpusError, match="train_from_iterator"):
        CharTokenizer.train("the quick brown fox", 300)  # a str that is no file is not a text
    with pytest.raises(TypeError, match="iterable of str"):
        CharTokenizer.train_from_iterator("the quick brown fox", 300)

    path = tmp_path / "toy"  # no suffix: the sniffer, not the name, picks the reader
    from_texts.save(path)
    back = tokenforge.load(path)
    assert type(back) is CharTokenizer and back._chars == from_texts._chars
    for text in PROBES:
        assert back.encode(text) == from_texts.encode(text)
        assert back.decode(back.encode(text)) == text
    assert back.encode("<|bos|>x", allowed_special="all")[0] == back.special_tokens["<|bos|>"]


def test_file_errors_are_typed_and_name_the_file(toy, tmp_path):
    tok = CharTokenizer.train_from_iterator(DOCS, 280)
    path = tmp_path / "toy.json"
    tok.save(path)
    value = json.loads(path.read_text())
    value["chars"][0] = "#"
    path.write_text(json.dumps(value))
    with pytest.raises(ChecksumError, match=str(path)):
        tokenforge.load(path)
    value["version"] = 2
    path.write_text(json.dumps(value))
    with pytest.raises(VersionError):
        tokenforge.load(path)
    path.write_text('{"format": "tokenforge-toy-chars",\n "version": 1,,}')
    with pytest.raises(FormatError) as e:
        tokenforge.load(path)
    assert e.value.path == str(path) and e.value.line == 2


def test_pickles_through_its_file(toy):
    tok = CharTokenizer.train_from_iterator(DOCS, 290)
    data = pickle.dumps(tok)
    assert tok.to_bytes() in data  # the payload is the file's bytes, not the object graph
    back = pickle.loads(data)
    assert back.encode(PROBES[2]) == tok.encode(PROBES[2]) and back.vocab_size == tok.vocab_size


def test_runs_through_compare(toy, tmp_path):
    from tokenforge.eval.compare import CompareOptions, run_compare
    from tokenforge.eval.families import SpecError, parse_specs

    assert [s.text for s in parse_specs("toy,toy:min_count=3")] == ["toy", "toy:min_count=3"]
    with pytest.raises(SpecError, match="toy has no option 'min_cout'; its options are min_count, special_tokens"):
        parse_specs("toy:min_cout=3")
    with pytest.raises(SpecError, match="takes only key=value options"):
        parse_specs("toy:fast")

    out = tmp_path / "report"
    opts = CompareOptions(
        corpus=[str(_corpus(tmp_path))],
        families="toy,toy:min_count=1000:special_tokens=none",
        vocab_sizes=[270, 300],
        eval_mb=0.05,
        out=str(out),
        progress=False,
        command="test",
    )
    results = run_compare(opts)
    rows = {r["label"]: r for r in results["rows"]}
    assert set(rows) == {
        "toy @270",
        "toy @300",
        "toy:min_count=1000:special_tokens=None @270",
        "toy:min_count=1000:special_tokens=None @300",
    }
    for row in rows.values():
        assert "error" not in row and row["family"] == "toy" and row["cls"] == "CharTokenizer"
        assert row["metrics"]["lossless"] and row["metrics"]["bytes_per_token"] >= 1
    assert rows["toy @270"]["metrics"]["vocab_size"] == 270
    # min_count=1000: no character is that frequent, so every character goes through its bytes
    assert rows["toy:min_count=1000:special_tokens=None @300"]["metrics"]["vocab_size"] == 256
    assert rows["toy:min_count=1000:special_tokens=None @300"]["metrics"]["bytes_per_token"] == 1.0
    # 300 ids give é, ï, 日 and 本 an id each (one token instead of 2 or 3 bytes); 270 ids do not
    assert rows["toy @300"]["metrics"]["tokens"] < rows["toy @270"]["metrics"]["tokens"]
    assert rows["toy @300"]["metrics"]["bytes_per_token"] > 1.0
    assert (out / "report.md").is_file() and "toy @300" in (out / "report.md").read_text()
    # the record's report rule: its measurement in each of its rows, its table in the report
    # (characters with an id + those without = the training text's distinct characters, in every row)
    seen = {r["toy"]["chars"] + r["toy"]["missing"] for r in rows.values()}
    assert len(seen) == 1 and seen.pop() > 43
    assert rows["toy:min_count=1000:special_tokens=None @300"]["toy"]["chars"] == 0
    assert rows["toy @300"]["toy"]["chars"] == 43 and rows["toy @270"]["toy"]["chars"] == 13
    md = (out / "report.md").read_text()
    missing = rows["toy @300"]["toy"]["missing"]
    assert "## Toy character tables" in md and f"| toy @300 | 43 | {missing} |" in md
    assert "<h2>Toy character tables</h2>" in (out / "report.html").read_text()
    # the trained tokenizers were cached in the toy's own format and are reused (loaded by the sniffer)
    again = run_compare(opts)
    assert all(r["reused"] for r in again["rows"])
    # and the command line: its spec parser is the same one
    from tokenforge.cli.main import main

    cli_out = tmp_path / "cli"
    assert (
        main(
            [
                "compare",
                opts.corpus[0],
                "--families",
                "toy:min_count=2",
                "--vocab-sizes",
                "280",
                "--eval-mb",
                "0.05",
                "-o",
                str(cli_out),
                "-q",
            ]
        )
        == 0
    )
    row = json.loads((cli_out / "results.json").read_text())["rows"][0]
    assert row["label"] == "toy:min_count=2 @280" and row["cls"] == "CharTokenizer" and "error" not in row


def test_cli_shards_and_fingerprint_read_the_record(toy, tmp_path, capsys):
    from tokenforge.cli.main import main
    from tokenforge.data.fingerprint import tokenizer_fingerprint
    from tokenforge.data.shards import ShardSet, pretokenize

    tok = CharTokenizer.train_from_iterator(DOCS, 300)
    path = tmp_path / "toy.json"
    tok.save(path)
    assert main(["toy", str(path)]) == 0  # the subcommand of the record's CLI hook
    assert "43 characters" in capsys.readouterr().out
    assert main(["inspect", str(path), "--json"]) == 0  # a core command, through load() and the inspect hook
    assert json.loads(capsys.readouterr().out)["toy_chars"] == 43

    shards = pretokenize([_corpus(tmp_path)], tok, tmp_path / "shards", progress=False)
    assert ShardSet(tmp_path / "shards").index["tokenizer"]["family"] == "toy"
    assert shards.index["tokenizer"]["fingerprint"] == tokenizer_fingerprint(tok)
    other = CharTokenizer.train_from_iterator(DOCS, 299)
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(tok)


def test_playground_shows_the_record_s_detail(toy):
    from starlette.testclient import TestClient

    from tokenforge.serve import create_app

    tok = CharTokenizer.train_from_iterator(DOCS, 300)
    with TestClient(create_app({"toy": tok})) as c:
        listing = c.get("/api/tokenizers").json()["tokenizers"]
        assert listing == [{"name": "toy", "family": "toy", "vocab_size": 300, "encoding": "utf-8", "chunking": None}]
        out = c.post("/api/encode", json={"tokenizer": "toy", "text": " e\u00e9\U0001f642<|bos|>", "details": True})
    assert out.status_code == 200, out.text
    body = out.json()
    details = body["details"]
    space, e = tok._ids[" "], tok._ids["e"]
    assert details[str(space)] == {"rank": 0} and details[str(e)] == {"rank": e}
    emoji = tok.encode("\U0001f642")  # not in the table: its four UTF-8 bytes
    assert [details[str(i)] for i in emoji] == [{"byte": b} for b in "\U0001f642".encode()]
    assert body["ids"][-1] != tok.special_tokens["<|bos|>"]  # the playground encodes specials as text


def test_playground_detail_is_empty_without_the_record():
    from tokenforge.eval.pieces import TokenInfo

    tok = CharTokenizer.train_from_iterator(DOCS, 300)
    info = TokenInfo(tok)  # not registered: no detail hook, text in UTF-8
    assert info.detail(0) == {} and info.encoding == "utf-8"
    assert info.detail(tok.special_tokens["<|bos|>"]) == {"special": "<|bos|>"}


def test_cli_without_the_record_has_no_toy_command():
    from tokenforge.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "toy" not in sub.choices
