"""LZ78Tokenizer: the seed's example, every strategy's round trip, ids, files, metadata."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from repo_paths import FIXTURES
from tokenforge import LZ78Tokenizer, load
from tokenforge.errors import SpecialTokenError, TokenforgeError, VocabSizeError
from tokenforge.lz78 import STRATEGIES, lz78_inspect

SEED_TSV = FIXTURES / "lz78_seed_example.tsv"
SEED_COMPRESSED = FIXTURES / "lz78_seed_example_compressed.tsv"

SAMPLE = (
    "Hello, world! Don't panic: it's 2024 and we've 1234567 reasons.\n\n"
    "    def f(x):\n        return x**2  # squares\n"
    "Ünïcödé text — with dashes, 日本語のテキスト, emoji 🙂🙂 and tabs\tand\r\nCRLF lines.\n"
)


def corpus_texts() -> list[str]:
    """About 0.5 MB of real prose: the pydoc topics every CPython ships."""
    from tokenforge.data.default_corpus import _topics

    topics = _topics()
    if not topics:  # pragma: no cover - a Python without pydoc_data
        return [SAMPLE * 50]
    return topics


@pytest.fixture(scope="module")
def texts():
    return corpus_texts()


@pytest.fixture(scope="module")
def trained(texts):
    """One small tokenizer per strategy (vocab 1,024), chunked."""
    return {s: LZ78Tokenizer.train_from_iterator(texts, 1024, strategy=s, progress=False) for s in STRATEGIES}


# ---- the seed's example ---------------------------------------------------------
def test_seed_example_dictionary():
    tok = LZ78Tokenizer.from_tsv(tsv_path=SEED_TSV, tsv_format="lz78")
    assert tok.num_codes == 6
    assert tok.encode("hello") == [6]
    assert tok.encode("hex") == [3, 127]  # "he", then byte 'x' at N + 1 + 120
    assert tok.decode([6]) == "hello"
    assert tok.decode([3, 127]) == "hex"
    assert tok.vocab_size == 6 + 260
    assert tok.special_tokens == {"<|bos|>": 263, "<|eos|>": 264, "<|pad|>": 265}
    assert tok.get_bos_token_id() == 263
    assert tok.encode("hello", prepend="<|bos|>", append="<|eos|>") == [263, 6, 264]


def test_seed_example_compressed_gives_same_ids():
    tree = LZ78Tokenizer.from_tsv(tsv_path=SEED_TSV, tsv_format="lz78")
    comp = LZ78Tokenizer.from_tsv(tsv_path=SEED_COMPRESSED, tsv_format="compressed")
    for text in ["hello", "hex", "hell", "oh hello there", SAMPLE]:
        assert comp.encode(text) == tree.encode(text)
    assert comp.decode(comp.encode("hex")) == "hex"
    # and our own compressed writer gives the same ids too
    assert tree.to_compressed().encode(SAMPLE) == tree.encode(SAMPLE)


def test_seed_example_loads_through_tokenforge_load():
    assert isinstance(load(SEED_TSV), LZ78Tokenizer)
    assert load(SEED_COMPRESSED).structure == "compressed"


def test_wrong_tsv_format_is_explained(tmp_path):
    with pytest.raises(tokenforge.FormatError, match="compressed"):
        tok = LZ78Tokenizer.from_tsv(SEED_TSV, "lz78")
        tok.save_tsv(tmp_path / "c.tsv", "compressed")
        LZ78Tokenizer.from_tsv(tmp_path / "c.tsv", "lz78")


# ---- every strategy ---------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_round_trips(trained, texts, strategy):
    tok = trained[strategy]
    assert tok.vocab_size <= 1024
    assert tok.num_codes > 200
    for t in texts[:200] + [SAMPLE, "", "\x00\xff", "🙂" * 5]:
        ids = tok.encode(t)
        assert tok.decode(ids) == t
        assert all(0 < i < tok.num_codes + 257 for i in ids)
    batch = tok.encode_batch(texts[:50], num_threads=2)
    assert batch == [tok.encode(t) for t in texts[:50]]
    big = [t * 40 for t in texts[:100]]  # past 64 KiB: chunks, lists built while encoding
    assert sum(map(len, big)) > 4 * 65536
    assert tok.encode_batch(big, num_threads=2) == [tok.encode(t) for t in big]
    arrs = tok.encode_batch(texts[:5], as_numpy=True)
    assert [a.tolist() for a in arrs] == batch[:5]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_saves_and_loads(trained, tmp_path, strategy):
    tok = trained[strategy]
    tok.save(tmp_path / strategy)
    back = load(tmp_path / strategy)
    assert isinstance(back, LZ78Tokenizer)
    assert back.structure == tok.structure
    assert back.strategy == strategy
    assert back.chunking is True
    assert back.encode(SAMPLE) == tok.encode(SAMPLE)
    assert back.vocab_size == tok.vocab_size
    # a single .tsv file works as well, and the seed's setup name
    tok.save(tmp_path / f"{strategy}.tsv")
    fmt = "compressed" if tok.structure == "compressed" else "lz78"
    assert LZ78Tokenizer.from_tsv(tmp_path / f"{strategy}.tsv", tsv_format=fmt).encode(SAMPLE) == tok.encode(SAMPLE)


def test_structures(trained):
    assert trained["flat_prune"].structure == "flat"
    assert trained["compressed"].structure == "compressed"
    for s in ("standard", "frequency_gated", "multi_round", "cost_adjusted", "smart_prune"):
        assert trained[s].structure == "tree"
    # prefix-only entries exist only where the budget counts outputs only
    sp = trained["smart_prune"].data
    assert len(sp.nodes) >= sp.num_outputs
    for s in ("standard", "frequency_gated", "multi_round", "cost_adjusted"):
        d = trained[s].data
        assert len(d.nodes) == d.num_outputs
        # tree dictionaries are prefix-closed: pattern = parent's pattern + char
        for p, c, pat, _ in d.nodes:
            assert pat == (d.nodes[p - 1][2] if p else "") + c


def test_training_is_deterministic_across_thread_counts(texts):
    for s in ("frequency_gated", "smart_prune", "flat_prune", "cost_adjusted"):
        a = LZ78Tokenizer.train_from_iterator(texts[:300], 600, strategy=s, num_threads=1, progress=False)
        b = LZ78Tokenizer.train_from_iterator(texts[:300], 600, strategy=s, num_threads=2, progress=False)
        assert a.data.nodes == b.data.nodes, s


def test_vocab_size_is_total_ids(texts):
    tok = LZ78Tokenizer.train_from_iterator(
        texts, 700, strategy="frequency_gated", special_tokens="nanochat", progress=False
    )
    assert tok.vocab_size <= 700
    n = tok.num_codes
    sp = tok.special_tokens
    assert sp["<|bos|>"] == n + 257 and sp["<|eos|>"] == n + 258 and sp["<|pad|>"] == n + 259
    assert sp["<|user_start|>"] == n + 260
    assert max(sp.values()) == tok.vocab_size - 1
    with pytest.raises(VocabSizeError):
        LZ78Tokenizer.train_from_iterator(texts, 260, strategy="standard", progress=False)


def test_unknown_strategy_and_parameter(texts):
    with pytest.raises(TokenforgeError, match="unknown LZ78 strategy"):
        LZ78Tokenizer.train_from_iterator(texts, 1000, strategy="bogus")
    with pytest.raises(TokenforgeError, match="does not take"):
        LZ78Tokenizer.train_from_iterator(texts, 1000, strategy="standard", rounds=3)
    with pytest.raises(TokenforgeError):
        LZ78Tokenizer.train_from_iterator(texts, 1000, strategy="frequency_gated", evict_fraction=0.0)


def test_standard_stops_reading_when_full(texts):
    def gen():
        for _ in range(40):
            yield from texts
        raise AssertionError("standard LZ78 read the whole corpus although its dictionary was full")

    tok = LZ78Tokenizer.train_from_iterator(gen(), 600, strategy="standard", progress=False)
    assert tok.num_codes == 340
    assert tok.data.settings["training"]["corpus_bytes"] < 4 << 20


# ---- chat and specials ----------------------------------------------------------------
def test_chat_rendering_with_nanochat_specials(texts):
    tok = LZ78Tokenizer.train_from_iterator(
        texts[:200], 800, strategy="frequency_gated", special_tokens="nanochat", progress=False
    )
    conv = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    ids, mask = tok.render_conversation(conv)
    assert ids[0] == tok.get_bos_token_id()
    assert len(ids) == len(mask)
    assert tok.encode("<|bos|>x", allowed_special="all")[0] == tok.get_bos_token_id()
    assert tok.decode(tok.encode("<|bos|>x")) == "<|bos|>x"  # ordinary text by default
    with pytest.raises(SpecialTokenError):
        tok.encode("a <|eos|>", disallowed_special="all")


def test_special_tokens_survive_save(tmp_path, texts):
    tok = LZ78Tokenizer.train_from_iterator(
        texts[:100], 800, strategy="standard", special_tokens=["<|x|>"], progress=False
    )
    tok.save(tmp_path / "t")
    back = load(tmp_path / "t")
    assert back.special_tokens == tok.special_tokens


# ---- chunking --------------------------------------------------------------------------
def test_set_chunking_changes_encoding_and_warns(trained):
    tok = LZ78Tokenizer(trained["frequency_gated"].data)
    chunked = tok.encode(SAMPLE)
    with pytest.warns(UserWarning, match="trained with chunking=True"):
        tok.set_chunking(False)
    assert tok.chunking is False
    whole = tok.encode(SAMPLE)
    assert tok.decode(whole) == SAMPLE
    tok.set_chunking(True)
    assert tok.encode(SAMPLE) == chunked


def test_unchunked_training(texts):
    tok = LZ78Tokenizer.train_from_iterator(texts[:200], 800, strategy="smart_prune", chunking=False, progress=False)
    assert tok.chunking is False
    assert any(" " in p.strip() for p in tok.data.output_patterns())  # phrases cross word boundaries
    assert tok.decode(tok.encode(SAMPLE)) == SAMPLE


# ---- compact_output_vocab -------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["frequency_gated", "flat_prune", "compressed"])
def test_compact_output_vocab(trained, texts, strategy):
    tok = LZ78Tokenizer(trained[strategy].data)
    before_n = tok.num_codes
    text = "\n".join(texts[:20])
    before = tok.decode(tok.encode(text))
    marked = tok.compact_output_vocab(text)
    assert marked > 0
    assert tok.num_codes == before_n - marked
    ids = tok.encode(text)
    assert tok.decode(ids) == before
    assert len(set(i for i in ids if i <= tok.num_codes)) == tok.num_codes  # every output is used now
    assert tok.compact_output_vocab(text) == 0
    if strategy == "frequency_gated":
        assert len(tok.data.nodes) == before_n  # prefix-only nodes stay for structure
        assert tok.data.num_outputs == tok.num_codes


def test_tokenize_smart_and_flat(trained):
    for s in ("smart_prune", "flat_prune"):
        tok = trained[s]
        assert tok.tokenize_smart(SAMPLE) == tok.encode(SAMPLE)
        assert tok.tokenize_flat(SAMPLE) == tok.encode(SAMPLE)


# ---- embedding metadata -----------------------------------------------------------------
def test_embedding_metadata_seed_example():
    tok = LZ78Tokenizer.from_tsv(SEED_TSV)
    m = tok.embedding_metadata("structured")
    # codes: h e he hel hell hello; LZ78 parents 0 0 1 3 4 5
    assert m["parent"][1:7].tolist() == [0, 0, 1, 3, 4, 5]
    assert m["char"][1:7].tolist() == [ord(c) for c in "heello"]
    assert m["parent"][tok.byte_fallback_id(200)] == 0
    assert m["char"][tok.byte_fallback_id(200)] == 200
    assert len(m["parent"]) == tok.vocab_size
    assert m["char"].max() < m["num_chars"]
    assert m["parent"].max() < m["num_parents"]
    h = tok.embedding_metadata("hierarchical")
    assert h["parent"][1:7].tolist() == [0, 0, 1, 3, 4, 5]
    assert len(set(m["char"][[0, 263, 264, 265]].tolist())) == 4  # own rows


def test_hierarchical_differs_for_output_only(trained):
    tok = trained["smart_prune"]
    s = tok.embedding_metadata("structured")
    h = tok.embedding_metadata("hierarchical")
    assert s["num_parents"] == len(tok.data.nodes) + 1
    assert h["num_parents"] == tok.num_codes + 1
    outs = tok.data.output_patterns()
    for i in range(1, tok.num_codes + 1):
        p = h["parent"][i]
        if p:
            assert outs[i - 1].startswith(outs[p - 1]) and len(outs[p - 1]) < len(outs[i - 1])


def test_flat_dictionary_refuses_tree_embeddings(trained):
    for mode in ("structured", "hierarchical", "tuple"):
        with pytest.raises(TokenforgeError, match="flat"):
            trained["flat_prune"].embedding_metadata(mode)
    with pytest.raises(TokenforgeError, match="unknown embedding mode"):
        trained["standard"].embedding_metadata("bogus")


# ---- inspect ------------------------------------------------------------------------------
def test_inspect(trained):
    for s, tok in trained.items():
        info = lz78_inspect(tok)
        for key in (
            "entries",
            "output_entries",
            "prefix_only_entries",
            "trie_nodes",
            "patricia_nodes",
            "node_compression_ratio",
            "depth_histogram",
            "longest_entries",
        ):
            assert key in info, (s, key)
        assert info["output_entries"] == tok.num_codes
        assert sum(info["depth_histogram"].values()) == tok.num_codes
        assert info["node_compression_ratio"] >= 1.0
        assert tok.inspect_extra() == info
    assert lz78_inspect(trained["frequency_gated"])["node_compression_ratio"] == 1.0  # prefix-closed


# ---- hypothesis round trips ------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_any_str_round_trips(text):
    tok = LZ78Tokenizer.from_tsv(SEED_TSV)
    assert tok.decode(tok.encode(text)) == text
    tok2 = LZ78Tokenizer.from_tsv(SEED_TSV, chunking=False)
    assert tok2.decode(tok2.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=64))
def test_decode_bytes_of_any_bytes(data):
    tok = LZ78Tokenizer.from_tsv(SEED_TSV)
    ids = [tok.byte_fallback_id(b) for b in data]
    assert tok.decode_bytes(ids) == data


def test_decode_rejects_out_of_range():
    tok = LZ78Tokenizer.from_tsv(SEED_TSV)
    with pytest.raises(TokenforgeError):
        tok.decode([tok.vocab_size])
    assert tok.decode([0, 6, 0]) == "hello"  # 0 is padding


def test_import_does_not_pull_heavy_modules():
    import subprocess
    import sys

    code = "import sys, tokenforge; tokenforge.LZ78Tokenizer; print(any(m in sys.modules for m in ('torch','dask','matplotlib')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_outputs_are_renumbered_first():
    from tokenforge.formats.lz78_tsv import LZ78Data

    # prefix-only "h" first: the output "he" must still be id 1
    tok = LZ78Tokenizer(LZ78Data("tree", [(0, "h", "h", False), (1, "e", "he", True)], {}))
    assert tok.data.nodes == [(2, "e", "he", True), (0, "h", "h", False)]
    assert tok.encode("he") == [1]
    assert tok.embedding_metadata("structured")["parent"][1] == 2


def test_frequency_gated_ends_full(texts):
    # the last eviction's victims are put back when the corpus ends before refilling
    for v in (700, 1024, 2000):
        tok = LZ78Tokenizer.train_from_iterator(texts, v, strategy="frequency_gated", progress=False)
        assert tok.vocab_size == v


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300), strategy=st.sampled_from(STRATEGIES))
def test_trained_dictionaries_round_trip_any_str(trained, text, strategy):
    tok = trained[strategy]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.to_compressed().encode(text) == ids  # Patricia form gives the same ids


def test_small_corpus_warns_about_a_smaller_vocabulary():
    with pytest.warns(UserWarning, match="only"):
        tok = LZ78Tokenizer.train_from_iterator(["abcabc abc"], 1000, strategy="standard", progress=False)
    assert tok.vocab_size < 1000
    assert tok.decode(tok.encode("abc xyz")) == "abc xyz"
