"""Tokenizers pickle through their own file format, so they travel to worker processes.

Every family and variant: ``pickle.loads(pickle.dumps(tok))`` (and
``copy.deepcopy``) gives a tokenizer with the same saved bytes, vocabulary,
specials and settings that encodes and decodes every text as the original
does; the payload is exactly the bytes ``save`` writes, checked by the family's
reader; a spawned ``multiprocessing`` pool encodes with the same ids.
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenforge
from repo_paths import FIXTURES
from tokenforge.base import Tokenizer
from tokenforge.errors import ChecksumError, FormatError
from tokenforge.growing import GrowingBPETokenizer
from tokenforge.lz78 import LZ78Tokenizer
from tokenforge.mixedgram import Mixedgram

CORPUS = [
    f"Document {i}: the quick brown fox jumps over the lazy dog; "
    f"café naïve — 日本語 {i * 7} <|endoftext|> spaces  and\ttabs\n" + "ab" * (i % 5)
    for i in range(120)
]
SAMPLE = [
    "",
    "hello world",
    "the quick brown fox <|endoftext|> jumps",
    "Ünïcödé 🙂 日本語\n\n\t x",
    "\ud800 lone surrogate",
]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _bpe_variants(tmp_path_factory) -> dict[str, Tokenizer]:
    out = {}
    out["bpe"] = _quiet(tokenforge.BPETokenizer.train_from_iterator, CORPUS, 400, progress=False)
    out["bpe-specials_first-gpt2"] = _quiet(
        tokenforge.BPETokenizer.train_from_iterator,
        CORPUS,
        380,
        layout="specials_first",
        pattern="gpt2",
        tie_break="lexicographic",
        special_tokens=["<|endoftext|>", "<|pad|>"],
        progress=False,
    )
    out["bpe-no-pattern"] = _quiet(
        tokenforge.BPETokenizer.train_from_iterator, CORPUS, 330, pattern=None, special_tokens=[], progress=False
    )
    toggled = _quiet(tokenforge.BPETokenizer.train_from_iterator, CORPUS, 350, progress=False)
    toggled.split_specials = True
    out["bpe-split_specials-set"] = toggled
    corpus = tmp_path_factory.mktemp("seed003") / "corpus.txt"
    corpus.write_text("".join(CORPUS), encoding="utf-8")
    seed = _quiet(tokenforge.BPETokenizer().train, input_path=str(corpus), vocab_size=360)
    assert seed.split_specials
    out["bpe-seed-mode"] = seed
    ranks = {bytes([b]): r for r, b in enumerate(reversed(range(256)))}  # byte ids not the identity
    out["bpe-from-ranks"] = tokenforge.BPETokenizer.from_tiktoken(
        ranks, pattern="gpt4", special_tokens={"<|endoftext|>": 256}
    )
    return out


def _lz78_variants() -> dict[str, Tokenizer]:
    out = {}
    train = LZ78Tokenizer.train_from_iterator
    out["lz78-standard-tree"] = _quiet(train, CORPUS, 700, strategy="standard", progress=False)
    smart = _quiet(train, CORPUS, 600, strategy="smart_prune", progress=False, special_tokens="nanochat")
    out["lz78-smart_prune"] = smart
    out["lz78-compressed"] = _quiet(train, CORPUS, 600, strategy="compressed", progress=False)
    out["lz78-to_compressed"] = _quiet(smart.to_compressed)
    out["lz78-flat"] = _quiet(train, CORPUS, 600, strategy="flat_prune", progress=False)
    unchunked = _quiet(train, CORPUS, 650, strategy="standard", chunking=False, progress=False)
    out["lz78-unchunked"] = unchunked
    compact = _quiet(train, CORPUS, 700, strategy="standard", progress=False)
    _quiet(compact.compact_output_vocab, CORPUS[:20])
    assert any(not node[3] for node in compact.data.nodes), "expected prefix-only entries"
    out["lz78-prefix-only"] = compact
    toggled = _quiet(train, CORPUS, 700, strategy="standard", progress=False)
    _quiet(toggled.set_chunking, False)  # not what the file records: travels as transport state
    out["lz78-chunking-toggled"] = toggled
    out["lz78-seed-tsv"] = LZ78Tokenizer.from_tsv(
        FIXTURES / "lz78_seed_example.tsv", chunking=False, special_tokens="nanochat"
    )
    out["lz78-seed-compressed-tsv"] = LZ78Tokenizer.from_tsv(
        FIXTURES / "lz78_seed_example_compressed.tsv", "compressed"
    )
    return out


def _mixedgram_variants() -> dict[str, Tokenizer]:
    text = "".join(CORPUS).encode("utf-8").decode("latin-1")
    out = {"mixedgram": Mixedgram.train(text=text)}
    m = Mixedgram.train(text=text, special_tokens="nanochat", errors="replace")
    m.parse = "optimal"
    out["mixedgram-specials-optimal-replace"] = m
    out["mixedgram-from-ngrams"] = Mixedgram([b"ab", b"the", b"", b"fox"], training={"note": "by hand"})
    return out


def _growing_variants(tmp_path_factory) -> dict[str, Tokenizer]:
    out = {"growing-empty": GrowingBPETokenizer()}
    g = GrowingBPETokenizer(vocab_size=5000)
    g.learn_merges(iter(CORPUS), 60, source="corpus")
    g.learn_merges(iter(["more text, more merges"] * 5), 5, source="more")
    out["growing-learned"] = g
    saved = GrowingBPETokenizer(normalization=None, pattern="gpt4")
    saved.learn_merges(iter(CORPUS), 30)
    saved.save(tmp_path_factory.mktemp("growing") / "tokenizer.json")  # remembers its path
    out["growing-saved-no-nfc"] = saved
    out["growing-seed-file"] = GrowingBPETokenizer.load(FIXTURES / "growing_seed_tokenizer.json")
    return out


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, Tokenizer]:
    out = {}
    out.update(_bpe_variants(tmp_path_factory))
    out.update(_lz78_variants())
    out.update(_mixedgram_variants())
    out.update(_growing_variants(tmp_path_factory))
    return out


NAMES = [
    "bpe",
    "bpe-specials_first-gpt2",
    "bpe-no-pattern",
    "bpe-split_specials-set",
    "bpe-seed-mode",
    "bpe-from-ranks",
    "lz78-standard-tree",
    "lz78-smart_prune",
    "lz78-compressed",
    "lz78-to_compressed",
    "lz78-flat",
    "lz78-unchunked",
    "lz78-prefix-only",
    "lz78-chunking-toggled",
    "lz78-seed-tsv",
    "lz78-seed-compressed-tsv",
    "mixedgram",
    "mixedgram-specials-optimal-replace",
    "mixedgram-from-ngrams",
    "growing-empty",
    "growing-learned",
    "growing-saved-no-nfc",
    "growing-seed-file",
]


def test_every_variant_is_listed(variants):
    assert sorted(variants) == sorted(NAMES)


def _settings(tok) -> dict:
    """What a family's tokenizer is, beyond its saved bytes."""
    s = {"class": type(tok), "vocab_size": tok.vocab_size, "specials": tok.special_tokens}
    if isinstance(tok, tokenforge.BPETokenizer):
        s.update(
            data=tok.data, split_specials=tok.split_specials, default=tok.default_allowed_special, pattern=tok.pattern
        )
    elif isinstance(tok, LZ78Tokenizer):
        s.update(
            chunking=tok.chunking,
            structure=tok.structure,
            strategy=tok.strategy,
            n=tok.num_codes,
            nodes=tok.data.nodes,
            settings=_lz78_settings(tok),
        )
    elif isinstance(tok, Mixedgram):
        s.update(parse=tok.parse, errors=tok.errors, ngrams=tok.ngrams, counts=tok.counts, training=tok.training)
    elif isinstance(tok, GrowingBPETokenizer):
        s.update(
            path=tok.path,
            merges=tok.merge_list,
            max=tok.vocab_size,
            sources=tok.sources_contributed,
            total=tok.total_tokens_processed,
            pattern=tok.pattern,
            normalization=tok.normalization,
        )
    return s


def _lz78_settings(tok) -> dict:
    """The settings an LZ78 tokenizer is saved with, less what the file's header
    derives from the entries (a loaded tokenizer also reports those); an int
    setting the header does not type (``vocab_size_requested``) comes back as
    its text, as after save and load."""
    return {
        k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in tok._settings_for_save().items()
        if k not in ("format", "structure", "N", "entries")
    }


def _texts_for(tok, texts):
    if isinstance(tok, Mixedgram) and tok.errors == "strict":
        return [t.encode("latin-1", "replace").decode("latin-1") for t in texts]
    return texts


def _behaviour(tok, texts) -> list:
    out = []
    texts = _texts_for(tok, texts)
    for t in texts:
        ids = tok.encode(t)
        out.append((ids, tok.decode(ids), tok.encode(t, allowed_special="all")))
    out.append(tok.encode_batch(texts))
    return out


def _same(a, b) -> None:
    assert type(b) is type(a)
    assert b.to_bytes() == a.to_bytes()
    assert _settings(b) == _settings(a)
    assert np.array_equal(b.token_bytes(), a.token_bytes())
    assert _behaviour(b, SAMPLE + CORPUS[:3]) == _behaviour(a, SAMPLE + CORPUS[:3])


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip(variants, name):
    tok = variants[name]
    for protocol in (2, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(tok, protocol=protocol))
        assert back is not tok
        _same(tok, back)


@pytest.mark.parametrize("name", NAMES)
def test_deepcopy(variants, name):
    tok = variants[name]
    back = copy.deepcopy(tok)
    _same(tok, back)
    assert back._model is not tok._model


@pytest.mark.parametrize("name", NAMES)
def test_payload_is_the_saved_file(variants, name, tmp_path):
    """The pickle holds the bytes ``save`` writes (checksum included), a dict of
    plain settings and the class; no Rust object, no object graph."""
    tok = variants[name]
    rebuild, (cls, payload, state) = tok.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    assert cls is type(tok) and rebuild.__module__ == "tokenforge.pickling"
    target = tmp_path / "saved"
    target.mkdir()
    copy.copy(tok).save(target)  # a copy: a growing tokenizer remembers where it was saved
    (saved,) = [p for p in target.iterdir() if not p.name.endswith(".vocab.txt")]
    assert payload == saved.read_bytes()
    assert b"checksum" in payload
    assert all(v is None or isinstance(v, (bool, str)) for v in state.values())
    assert b"_core" not in pickle.dumps(tok)


def test_bpe_seed_mode_keeps_splitting_specials(variants):
    tok = variants["bpe-seed-mode"]
    back = pickle.loads(pickle.dumps(tok))
    eot = tok.special_tokens["<|endoftext|>"]
    assert back.encode("a<|endoftext|>b") == tok.encode("a<|endoftext|>b")
    assert eot in back.encode("a<|endoftext|>b")


def test_lz78_chunking_toggle_travels(variants):
    tok = variants["lz78-chunking-toggled"]
    assert tok.data.settings.get("chunking") is True and tok.chunking is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilding does not warn as set_chunking does
        back = pickle.loads(pickle.dumps(tok))
    assert back.chunking is False
    text = " ".join(CORPUS[:5])
    assert back.encode(text) == tok.encode(text)


def test_copy_stays_shallow(variants):
    tok = variants["mixedgram"]
    assert copy.copy(tok)._model is tok._model


def test_growing_deepcopy_is_independent(variants):
    tok = variants["growing-learned"]
    before = tok.merge_list
    other = copy.deepcopy(tok)
    other.learn_merges(iter(["completely different words zzz qqq"] * 20), 10)
    assert tok.merge_list == before
    assert len(other.merge_list) > len(before)


def test_corrupt_payload_is_refused(variants):
    """The payload goes through the family's strict reader: an altered byte is a ChecksumError."""
    tok = variants["bpe"]
    rebuild, (cls, payload, state) = tok.__reduce_ex__(4)
    i = payload.index(b'"merges"') + 20
    bad = payload[:i] + (b"9" if payload[i : i + 1] != b"9" else b"8") + payload[i + 1 :]
    with pytest.raises(FormatError, match="<pickled BPETokenizer>"):  # errors name the origin, not a path
        rebuild(cls, bad, state)
    lz = variants["lz78-standard-tree"]
    rebuild, (cls, payload, state) = lz.__reduce_ex__(4)
    lines = payload.split(b"\n")
    k = next(i for i, line in enumerate(lines) if line[:1].isdigit())  # the first entry's row
    code, parent, char, pattern, output = lines[k].split(b"\t")
    lines[k] = b"\t".join([code, parent, char, pattern, b"0" if output == b"1" else b"1"])
    with pytest.raises(FormatError):  # N no longer matches, or the checksum does not
        rebuild(cls, b"\n".join(lines), state)
    # a change the structure checks cannot see: only the checksum catches it
    text = payload.decode()
    with pytest.raises(ChecksumError):
        rebuild(cls, text.replace("# strategy=standard", "# strategy=frequency_gated").encode(), state)
    with pytest.raises(TypeError):
        rebuild(dict, payload, state)


def test_plain_python_tokenizer_keeps_default_pickling():
    """A Tokenizer subclass without the hooks pickles as Python does by default."""
    back = pickle.loads(pickle.dumps(_ByteTokenizer()))
    assert isinstance(back, _ByteTokenizer) and back.encode("hé") == [104, 195, 169]


class _ByteTokenizer(Tokenizer):
    family = "bytes-test"

    vocab_size = 256
    special_tokens = {}

    def encode_ordinary(self, text):
        return list(text.encode("utf-8"))

    def decode_bytes(self, ids):
        return bytes(ids)

    def token_bytes(self):
        return np.ones(256, dtype=np.int32)

    def id_to_bytes(self, id):
        return bytes([id])

    def save(self, path):
        raise NotImplementedError


@pytest.mark.parametrize(
    "name",
    [
        "bpe-seed-mode",
        "lz78-chunking-toggled",
        "lz78-prefix-only",
        "lz78-compressed",
        "lz78-flat",
        "mixedgram-specials-optimal-replace",
        "growing-learned",
    ],
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=4))
def test_same_ids_on_any_text(variants, name, texts):
    tok = variants[name]
    back = pickle.loads(pickle.dumps(tok))
    assert _behaviour(back, texts) == _behaviour(tok, texts)


def test_spawned_pool_encodes_as_the_parent(variants):
    """Two spawned worker processes (a fresh interpreter each: nothing inherited)
    encode with the tokenizers sent to them, giving the parent's ids."""
    toks = [
        variants[n]
        for n in ("bpe-seed-mode", "lz78-chunking-toggled", "mixedgram-specials-optimal-replace", "growing-learned")
    ]
    texts = [_texts_for(t, SAMPLE[1:4] + CORPUS[:2]) for t in toks]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = [pool.map(tok.encode, ts) for tok, ts in zip(toks, texts)]
        tokens_back = pool.map(copy.copy, toks)  # a round trip through a worker and back
    assert got == [[tok.encode(t) for t in ts] for tok, ts in zip(toks, texts)]
    for tok, back in zip(toks, tokens_back):
        _same(tok, back)
