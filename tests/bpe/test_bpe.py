"""Byte-level BPE: parity with rustbpe, tiktoken, Hugging Face and the slow
reference; round trips; nanochat's and seed 003's APIs; bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge import BPETokenizer
from tokenforge.bpe import PATTERNS
from tokenforge.data.default_corpus import iter_default_corpus
from tokenforge.errors import FormatError, SpecialTokenError, TokenforgeError, VersionError, VocabSizeError
from tokenforge.reference import bpe as ref

GPT4 = PATTERNS["gpt4"]
GPT2 = PATTERNS["gpt2"]


@pytest.fixture(scope="module")
def docs():
    return list(iter_default_corpus(max_bytes=1_500_000))


@pytest.fixture(scope="module")
def heldout():
    # text the tokenizer was not trained on: later in the corpus
    all_docs = list(iter_default_corpus(max_bytes=2_200_000))
    return "".join(all_docs)[-600_000:]


@pytest.fixture(scope="module")
def tok(docs):
    return BPETokenizer.train_from_iterator(docs, 2048, progress=False)


def test_import_pulls_no_heavy_dependency():
    code = "import sys, tokenforge; bad = [m for m in ('torch', 'dask', 'matplotlib') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- parity ---------------------------------------------------------------
@pytest.mark.parametrize("pattern", [GPT4, GPT2, PATTERNS["cl100k"], PATTERNS["o200k"]])
def test_merges_identical_to_rustbpe(docs, pattern):
    rustbpe = pytest.importorskip("rustbpe")
    r = rustbpe.Tokenizer()
    r.train_from_iterator(iter(docs), 1500, pattern=pattern)
    theirs = {bytes(k): v for k, v in r.get_mergeable_ranks()}
    ours = BPETokenizer.train_from_iterator(docs, 1500, pattern=pattern, special_tokens=None, progress=False)
    assert ours.mergeable_ranks() == theirs


def test_lexicographic_matches_slow_reference(docs):
    text = "".join(docs)[:120_000]
    counts = ref.count_words([text], GPT2)
    want = ref.train_reference(counts, 200, tie_break="lexicographic")
    got = BPETokenizer.train_from_iterator(
        [text], 256 + 200, pattern="gpt2", tie_break="lexicographic", special_tokens=None, progress=False
    )
    assert got.merges == [tuple(m) for m in want]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab c\n.xé'0", min_size=0, max_size=40), min_size=1, max_size=5),
    n=st.integers(0, 40),
    tie=st.sampled_from(["pair_ids", "lexicographic"]),
    pattern=st.sampled_from(["gpt4", "gpt2", "o200k", None]),
)
def test_training_matches_reference_property(texts, n, tie, pattern):
    regex = PATTERNS[pattern] if pattern else None
    counts = ref.count_words(texts, regex)
    want = ref.train_reference(counts, n, tie_break=tie)
    got = BPETokenizer.train_from_iterator(
        texts, 256 + n, pattern=pattern, tie_break=tie, special_tokens=None, progress=False
    )
    assert got.merges == [tuple(m) for m in want]


def test_ids_identical_to_tiktoken(tok, heldout):
    enc = tok.to_tiktoken()
    assert tok.encode_ordinary(heldout) == enc.encode_ordinary(heldout)
    special = "a<|bos|>b<|user_start|>c<|bos|>"
    assert tok.encode(special, allowed_special="all") == enc.encode(special, allowed_special="all")


def test_ids_identical_in_huggingface(tok, heldout, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    tok.save_hf(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert hf.encode(heldout[:200_000], add_special_tokens=False).ids == tok.encode_ordinary(heldout[:200_000])


def test_threads_do_not_change_output(docs, tmp_path):
    a = BPETokenizer.train_from_iterator(docs, 1200, num_threads=1, progress=False)
    b = BPETokenizer.train_from_iterator(docs, 1200, num_threads=2, progress=False)
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_whole_document_mode_matches_reference():
    docs = ["the cat sat on the mat. " * 20, "the dog sat on the log. " * 15, "mat" * 30]
    counts = ref.count_words(docs, None)
    want = ref.train_reference(counts, 60)
    got = BPETokenizer.train_from_iterator(docs, 256 + 60, pattern=None, special_tokens=None, progress=False)
    assert got.merges == [tuple(m) for m in want]
    assert got.decode(got.encode(docs[0])) == docs[0]


def test_custom_pattern(docs):
    t = BPETokenizer.train_from_iterator(docs[:20], 400, pattern=r"\w+|\s+|[^\w\s]+", progress=False)
    s = "custom pattern, words & spaces"
    assert t.decode(t.encode(s)) == s
    assert t.data.pattern_name == "custom"


# ---- encoding --------------------------------------------------------------
def test_pathological_inputs_round_trip(tok):
    a = "a" * 1_000_000
    ids = tok.encode_ordinary(a)
    assert tok.decode(ids) == a
    rng = np.random.default_rng(0)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz.,;:-_()[]{}<>!?=+*/"))
    s = "".join(rng.choice(alphabet, 1_000_000))
    ids = tok.encode_ordinary(s)
    assert tok.decode(ids) == s
    enc = tok.to_tiktoken()
    assert ids[:5000] == enc.encode_ordinary(s[:20_000])[:5000] or tok.encode_ordinary(
        s[:20_000]
    ) == enc.encode_ordinary(s[:20_000])


def test_encode_batch_equals_single(tok, docs):
    texts = docs[:50] + ["", "x", "<|bos|>"]
    single = [tok.encode_ordinary(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=2) == single
    arrays = tok.encode_batch(texts, num_threads=1, as_numpy=True)
    assert [a.tolist() for a in arrays] == single
    # one flat uint32 buffer with int64 offsets; a view per text on demand
    assert isinstance(arrays, tokenforge.IdBatch) and len(arrays) == len(texts)
    assert arrays.ids.dtype == np.uint32 and arrays.offsets.dtype == np.int64
    assert arrays.ids.tolist() == [i for s in single for i in s]
    assert arrays.lengths().tolist() == [len(s) for s in single]
    assert arrays.tolist() == single and arrays[-1].tolist() == single[-1]
    assert [a.tolist() for a in arrays[1:3]] == single[1:3]
    assert arrays[0].base is not None  # a view, not a copy
    assert tok.encode(texts) == single
    assert tok.encode_to_numpy(texts[0]).tolist() == single[0]


def test_large_batches_come_back_whole_and_in_order(tok, docs):
    # Past 64 KiB a multi-thread batch is encoded in chunks while the calling
    # thread builds the lists of finished ones: every text, once, in order.
    texts = [d * (1 + i % 4) for i, d in enumerate(docs * 3)] + ["", "🙂" * 3000]
    assert sum(map(len, texts)) > 20 * 65536
    single = [tok.encode_ordinary(t) for t in texts]
    for n in (2, 3, 8):
        assert tok.encode_batch(texts, num_threads=n) == single
    assert tok.encode_batch(texts, num_threads=1) == single
    allowed = tok.encode(["<|bos|>" + t for t in texts[:200]] * 5, num_threads=2, allowed_special="all")
    assert allowed == [[tok.get_bos_token_id()] + s for s in single[:200]] * 5


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    s=st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
    | st.sampled_from(["<|bos|>", "x<|assistant_end|>y", "中文テスト😀👨‍👩‍👧‍👦🇫🇷", "\x00\x01\r\n\t\u2028", "a" * 500])
)
def test_round_trip_any_str(tok, s):
    ids = tok.encode(s)
    assert tok.decode(ids) == s
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert not set(ids) & set(tok.special_tokens.values())


def test_special_token_policy(tok):
    s = "hello <|bos|> world"
    plain = tok.encode(s)
    assert tok.special_tokens["<|bos|>"] not in plain
    allowed = tok.encode(s, allowed_special={"<|bos|>"})
    assert tok.special_tokens["<|bos|>"] in allowed
    assert tok.decode(allowed) == s
    with pytest.raises(SpecialTokenError) as e:
        tok.encode(s, disallowed_special="all")
    msg = str(e.value)
    assert "<|bos|>" in msg and "allowed_special" in msg and "disallowed_special=()" in msg
    with pytest.raises(SpecialTokenError, match="not a special token"):
        tok.encode(s, allowed_special={"<|nope|>"})
    with pytest.raises(SpecialTokenError, match="unknown special token"):
        tok.encode_special("<|nope|>")


def test_nanochat_api(tok, tmp_path):
    bos = tok.get_bos_token_id()
    assert bos == tok.encode_special("<|bos|>") == 2048 - 9
    assert tok.get_vocab_size() == 2048
    assert tok.get_special_tokens() == set(tokenforge.SPECIAL_TOKENS)
    ids = tok.encode("Hello, world!", prepend="<|bos|>", append=tok.encode_special("<|assistant_end|>"))
    assert ids[0] == bos and tok.decode(ids[1:-1]) == "Hello, world!"
    batch = tok.encode(["a b", "c"], prepend="<|bos|>")
    assert all(x[0] == bos for x in batch)
    assert tok.id_to_token(ord("A")) == "A"
    tb = tok.get_token_bytes()
    assert tb.shape == (2048,) and tb[bos] == 0
    for i in range(0, 2048 - 9, 7):
        assert tb[i] == len(tok.id_to_bytes(i))
    tok.save(tmp_path / "tk")
    again = BPETokenizer.from_directory(tmp_path / "tk")
    assert again.encode("Hello, world!") == tok.encode("Hello, world!")
    conv = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    ids, mask = tok.render_conversation(conv)
    assert ids[0] == bos and mask[-1] == 1 and len(ids) == len(mask)
    viz = tok.visualize_tokenization(ids, mask, color=False)
    assert "<|assistant_end|>" in viz and viz.count("[") == 3  # y, o, <|assistant_end|> are trained on


def test_token_bytes_counts_raw_bytes(tok):
    tb = tok.token_bytes()
    invalid = 0
    for i in range(tok.vocab_size):
        b = tok._model.id_bytes(i)
        assert tb[i] == (0 if i in tok.special_tokens.values() else len(b))
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            invalid += 1
    assert invalid > 0  # byte tokens 128..255 at least; counted by raw length, not as 3


# ---- files -----------------------------------------------------------------
def _paths(tok, tmp_path):
    tok.save(tmp_path / "dir")
    tok.save(tmp_path / "ours.json")
    tok.save_hf(tmp_path / "hf" / "tokenizer.json")
    return {
        "dir": tokenforge.load(tmp_path / "dir"),
        "json": tokenforge.load(tmp_path / "ours.json"),
        "hf": tokenforge.load(tmp_path / "hf" / "tokenizer.json"),
        "ranks": BPETokenizer.from_tiktoken(tok.mergeable_ranks(), tok.pattern, special_tokens=tok.special_tokens),
        "tiktoken-encoding": BPETokenizer.from_tiktoken(tok.to_tiktoken()),
    }


def test_every_save_load_path_round_trips(tok, tmp_path, heldout):
    text = heldout[:100_000] + "<|bos|>ünï 中文 😀"
    want = tok.encode(text)
    for name, t in _paths(tok, tmp_path).items():
        assert t.encode(text) == want, name
        assert t.decode(want) == text, name
        assert t.special_tokens == tok.special_tokens, name
    tok.save_tiktoken(tmp_path / "r.tiktoken")
    t = BPETokenizer.from_tiktoken(tmp_path / "r.tiktoken", tok.pattern, special_tokens=tok.special_tokens)
    assert t.encode(text) == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=st.text(max_size=200))
def test_round_trip_through_files(tok, tmp_path_factory, s):
    d = tmp_path_factory.mktemp("rt")
    tok.save(d / "t.json")
    t = tokenforge.load(d / "t.json")
    assert t.decode(t.encode(s)) == s and t.encode(s) == tok.encode(s)


def test_vocab_view_written_beside(tok, tmp_path):
    tok.save(tmp_path / "t.json")
    views = list(tmp_path.glob("*.vocab.txt"))
    assert views and "Hello"[:1] in views[0].read_text(encoding="utf-8")


def test_seed003_api_and_files(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("low lower lowest<|endoftext|>new newer newest<|endoftext|>" * 50, encoding="utf-8")
    t = BPETokenizer()
    t.train(input_path=str(corpus), vocab_size=300, save_dir=str(tmp_path / "out"), special_tokens=["<|endoftext|>"])
    assert t.special_tokens == {"<|endoftext|>": 256}
    assert t.merges[0][2] == 257
    assert t.data.pattern_name == "gpt2" and t.data.training["tie_break"] == "lexicographic"
    assert (tmp_path / "out" / "tokenforge.json").exists()
    # the seed's rule reproduced by the slow reference, with documents split at the special token
    counts = ref.count_words(["low lower lowest", "new newer newest"] * 50, GPT2)
    want = ref.train_reference(counts, 300 - 257, tie_break="lexicographic", first_merge_id=257)
    assert t.merges == [tuple(m) for m in want]
    t.export_seed003(tmp_path / "seed")
    back = BPETokenizer.from_file(tmp_path / "seed" / "bpe_vocab.pkl", tmp_path / "seed" / "bpe_merges.pkl")
    assert back.encode("lowest newer") == t.encode("lowest newer")
    assert isinstance(tokenforge.load(tmp_path / "seed"), BPETokenizer)


def test_streaming_formats_give_the_same_merges(docs, tmp_path):
    sub = docs[:40]
    jl = tmp_path / "c.jsonl.gz"
    with gzip.open(jl, "wt", encoding="utf-8") as f:
        for d in sub:
            f.write(json.dumps({"text": d}) + "\n")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.table({"text": sub}), tmp_path / "c.parquet")
    a = BPETokenizer.train_from_iterator(sub, 700, progress=False)
    b = BPETokenizer.train(jl, 700, progress=False)
    c = BPETokenizer.train([str(tmp_path / "c.parquet")], 700, progress=False)
    assert a.merges == b.merges == c.merges


# ---- bad input --------------------------------------------------------------
def test_bad_arguments(docs):
    with pytest.raises(VocabSizeError, match="at least 265"):
        BPETokenizer.train_from_iterator(docs[:2], 260)
    with pytest.raises(TypeError):
        BPETokenizer.train_from_iterator(docs[:2], "1000")
    with pytest.raises(TypeError):
        BPETokenizer.train(12, 1000)
    with pytest.raises(TokenforgeError, match="tie_break"):
        BPETokenizer.train_from_iterator(docs[:2], 1000, tie_break="random")
    with pytest.raises(tokenforge.PatternError):
        BPETokenizer.train_from_iterator(docs[:2], 1000, pattern="(unclosed")
    with pytest.raises(SpecialTokenError):
        BPETokenizer.train_from_iterator(docs[:2], 1000, special_tokens=["<a>", "<a>"])
    with pytest.raises(TypeError):
        BPETokenizer.train_from_iterator(["ok", 3], 1000)


def test_bad_ids_and_text(tok):
    with pytest.raises(TypeError):
        tok.encode(b"bytes")
    with pytest.raises(TokenforgeError, match="not in the vocabulary"):
        tok.decode([1, 2, 99999])
    with pytest.raises((TokenforgeError, ValueError)):
        tok.decode([-1])
    with pytest.raises(TypeError):
        tok.decode(["a"])
    with pytest.raises(TokenforgeError, match="out of range"):
        tok.id_to_token(10**6)


def test_corrupt_files_are_refused(tok, tmp_path):
    p = tmp_path / "t.json"
    tok.save(p)
    good = p.read_text(encoding="utf-8")
    (tmp_path / "trunc.json").write_text(good[: len(good) // 2], encoding="utf-8")
    with pytest.raises(FormatError) as e:
        tokenforge.load(tmp_path / "trunc.json")
    assert "trunc.json" in str(e.value)
    doc = json.loads(good)
    doc["version"] = 99
    (tmp_path / "v99.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(VersionError, match="99"):
        tokenforge.load(tmp_path / "v99.json")
    doc = json.loads(good)
    doc["merges"][5] = [70000, 3]
    (tmp_path / "bad.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FormatError):
        tokenforge.load(tmp_path / "bad.json")
    (tmp_path / "junk.bin").write_bytes(os.urandom(64))
    with pytest.raises(FormatError, match="not a tokenizer file"):
        tokenforge.load(tmp_path / "junk.bin")


def test_failed_save_keeps_previous_file(tok, tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    tok.save(p)
    before = p.read_bytes()
    small = BPETokenizer.train_from_iterator(["tiny corpus"], 270, progress=False)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        small.save(p)
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert not [x for x in tmp_path.iterdir() if x.name.endswith(".tmp")]


def test_interrupted_training_writes_nothing(tmp_path):
    def docs():
        for i in range(1000):
            if i == 500:
                raise KeyboardInterrupt
            yield f"document number {i} with some words"

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        BPETokenizer.train_from_iterator(docs(), 1000, save_dir=out, progress=False)
    assert not (out / "tokenforge.json").exists()


# ---- CLI -------------------------------------------------------------------
def test_cli_train_encode_decode_inspect(tmp_path, capsys, docs):
    from tokenforge.cli.main import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(docs[:30]), encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "600", "-o", str(tmp_path / "tk"), "-q"]) == 0
    capsys.readouterr()
    assert main(["encode", str(tmp_path / "tk"), "Hello there", "--json"]) == 0
    ids = json.loads(capsys.readouterr().out)
    assert main(["decode", str(tmp_path / "tk"), *map(str, ids)]) == 0
    assert capsys.readouterr().out.rstrip("\n") == "Hello there"
    assert main(["inspect", str(tmp_path / "tk"), "--text", str(corpus), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["vocab_size"] == 600 and stats["bytes_per_token"] > 1.5
    assert (
        main(["train", str(tmp_path / "missing.txt"), "--vocab-size", "600", "-o", str(tmp_path / "x")]) == 3
    )  # no such input: the OS-class exit status
