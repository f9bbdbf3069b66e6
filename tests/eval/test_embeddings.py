"""Embedding modes: metadata -> parent/char tables, shapes, gradients, refusals, devices."""

from __future__ import annotations

import numpy as np
import pytest

import tokenforge
from eval_stubs import SEED_TSV, DictTokenizer, FlatOnly, parse_tsv
from tokenforge.bpe_structure import bpe_embedding_metadata
from tokenforge.embedding_meta import EmbeddingModeError, duplicate_pairs, get_embedding_metadata, validate_metadata

torch = pytest.importorskip("torch")

from tokenforge.torch import (  # noqa: E402
    GPT,
    FlatEmbedding,
    GPTConfig,
    HierarchicalEmbedding,
    StructuredEmbedding,
    TupleEmbedding,
    build_embedding,
)

TEXT = "the quick brown fox jumps over the lazy dog; hello world, hello there. " * 20 + "日本語 ünï 🙂 " * 5


@pytest.fixture(scope="module")
def bpe():
    return tokenforge.BPETokenizer.train_from_iterator([TEXT], 400, progress=False)


# ---- metadata ---------------------------------------------------------------
def test_bpe_structured_metadata_is_the_two_parts_of_each_merge(bpe):
    meta = bpe.embedding_metadata("structured")
    assert meta["num_parents"] == bpe.vocab_size + 1 and meta["num_chars"] == bpe.vocab_size
    merged = set()
    for left, right, new in bpe.merges:
        assert meta["parent"][new] == left + 1
        assert meta["char"][new] == right
        merged.add(new)
    for i in range(bpe.vocab_size):
        if i not in merged:  # bytes and specials: no parent, their own char row
            assert meta["parent"][i] == 0 and meta["char"][i] == i
    assert duplicate_pairs(validate_metadata(meta, bpe.vocab_size)) == 0


def test_bpe_has_no_hierarchical_mode(bpe):
    with pytest.raises(EmbeddingModeError, match="structured"):
        bpe.embedding_metadata("hierarchical")
    with pytest.raises(EmbeddingModeError):
        build_embedding(bpe, "hierarchical", 16)


def test_bpe_metadata_function_works_on_merge_triples():
    # the growing vocabulary's shape: merge triples, 22 ids in use of a far larger declared size
    meta = bpe_embedding_metadata([(5, 6, 20), (20, 7, 21)], 22)
    assert len(meta["parent"]) == 22
    assert meta["parent"][21] == 21 and meta["char"][21] == 7
    assert meta["parent"][20] == 6 and meta["char"][20] == 6
    assert meta["num_parents"] == 23


def test_growing_vocabulary_answers_the_hook_for_its_ids_in_use():
    from tokenforge import GrowingBPETokenizer

    tok = GrowingBPETokenizer.train_from_iterator(["hello hello world world"] * 20, 300)
    meta = get_embedding_metadata(tok, "structured")
    assert len(meta["parent"]) == tok.current_vocab_size == tok.model_vocab_size
    left, right, new = tok.merge_list[0]
    assert meta["parent"][new] == left + 1 and meta["char"][new] == right


def _tsv_expected():
    rows = parse_tsv(SEED_TSV)
    code_of = {r[3]: r[0] for r in rows}
    lz = {r[0]: r[1] for r in rows}
    trie = {}
    for code, _, _, pattern in rows:
        trie[code] = next((code_of[pattern[:k]] for k in range(len(pattern) - 1, 0, -1) if pattern[:k] in code_of), 0)
    return rows, lz, trie


@pytest.mark.parametrize(
    "mode,cls",
    [("structured", StructuredEmbedding), ("hierarchical", HierarchicalEmbedding), ("tuple", TupleEmbedding)],
)
def test_parent_tables_match_the_tsv(mode, cls):
    tok = DictTokenizer()
    emb = build_embedding(tok, mode, 8)
    assert isinstance(emb, cls)
    rows, lz, trie = _tsv_expected()
    want = trie if mode == "hierarchical" else lz
    chars = sorted({r[2] for r in rows})
    for code, _, ch, _ in rows:
        assert int(emb.parent[code]) == want[code], (mode, code)
        assert int(emb.char[code]) == chars.index(ch)
    n = len(rows)
    # byte fallback: no parent, the byte's own char row; specials: their own rows
    for b in (0, 65, 255):
        assert int(emb.parent[n + 1 + b]) == 0
        assert int(emb.char[n + 1 + b]) == len(chars) + b
    specials = sorted(tok.special_tokens.values())
    assert len({int(emb.char[i]) for i in specials}) == 3
    assert emb.parent.dtype == torch.int64 and emb.parent.shape == (tok.vocab_size,)


def test_seed_tsv_lz78_parent_is_the_prefix():
    rows, lz, trie = _tsv_expected()
    assert lz == trie  # for a prefix-closed LZ78 dictionary the two parents agree


@pytest.mark.parametrize("mode", ["structured", "hierarchical", "tuple"])
def test_flat_dictionary_is_refused_by_tree_modes(mode):
    tok = DictTokenizer(flat=True)
    with pytest.raises(EmbeddingModeError, match="flat"):
        build_embedding(tok, mode, 8)
    with pytest.raises(EmbeddingModeError, match="flat"):
        get_embedding_metadata(tok, mode)
    assert isinstance(build_embedding(tok, "flat", 8), FlatEmbedding)  # flat still works


@pytest.mark.parametrize("mode", ["structured", "hierarchical", "tuple"])
def test_tokenizer_without_structure_is_refused(mode):
    with pytest.raises(EmbeddingModeError, match="flat"):
        build_embedding(FlatOnly(), mode, 8)


def test_bad_metadata_is_refused_with_a_reason():
    base = {"parent": np.array([0, 0, 1]), "char": np.array([0, 1, 2]), "num_chars": 3}
    validate_metadata(base, 3)
    with pytest.raises(EmbeddingModeError, match="outside the character table"):
        validate_metadata({**base, "num_chars": 2}, 3)
    with pytest.raises(EmbeddingModeError, match="parent 5"):
        validate_metadata({**base, "parent": np.array([0, 0, 5])}, 3)
    with pytest.raises(EmbeddingModeError, match="covers 3 ids"):
        validate_metadata(base, 4)
    with pytest.raises(EmbeddingModeError, match="'char'"):
        validate_metadata({"parent": np.zeros(3, int), "num_chars": 1}, 3)
    with pytest.raises(EmbeddingModeError, match="unknown embedding mode"):
        build_embedding(DictTokenizer(), "sideways", 8)


# ---- shapes and gradients -----------------------------------------------------
@pytest.mark.parametrize("mode", ["flat", "structured", "hierarchical", "tuple"])
def test_shapes(mode):
    tok = DictTokenizer()
    emb = build_embedding(tok, mode, 12)
    for shape in [(5,), (2, 7), (2, 3, 4)]:
        ids = torch.randint(0, tok.vocab_size, shape)
        assert emb(ids).shape == (*shape, 12)
        assert emb(ids).dtype == torch.float32


@pytest.mark.parametrize("mode", ["flat", "structured", "hierarchical", "tuple"])
def test_gradients_reach_every_table(mode):
    tok = DictTokenizer()
    emb = build_embedding(tok, mode, 6)
    ids = torch.arange(tok.vocab_size)
    (emb(ids) * torch.randn(tok.vocab_size, 6)).sum().backward()
    params = dict(emb.named_parameters())
    assert params, "no parameters"
    for name, p in params.items():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name
    if mode in ("structured", "hierarchical"):
        # every parent row that some id uses, and every char row, gets a gradient
        used_parents = torch.unique(emb.parent)
        assert (emb.parent_embed.weight.grad[used_parents].abs().sum(1) > 0).all()
        assert (emb.char_embed.weight.grad[torch.unique(emb.char)].abs().sum(1) > 0).all()


def test_structured_is_the_sum_and_tuple_the_projection():
    tok = DictTokenizer()
    s = build_embedding(tok, "structured", 4)
    code = 6  # "hello", LZ78 parent 5
    want = s.parent_embed.weight[5] + s.char_embed.weight[int(s.char[code])]
    assert torch.allclose(s(torch.tensor([code]))[0], want)
    t = build_embedding(tok, "tuple", 4, parent_dim=3, char_dim=2)
    assert t.proj.weight.shape == (4, 5)
    x = torch.cat([t.parent_embed.weight[5], t.char_embed.weight[int(t.char[code])]])
    assert torch.allclose(t(torch.tensor([code]))[0], t.proj.weight @ x, atol=1e-6)


def test_bpe_structured_embedding_and_gpt_train_step(bpe):
    cfg = GPTConfig(vocab_size=bpe.vocab_size, n_layer=1, n_head=2, n_embd=16, seq_len=16, embedding="structured")
    model = GPT(cfg, tokenizer=bpe)
    assert isinstance(model.embed, StructuredEmbedding)
    ids = torch.tensor([bpe.encode_ordinary(TEXT)[:17]])
    x, y = ids[:, :-1], ids[:, 1:].clone()
    y[0, 3] = -1
    nll = model.token_nll(x, y)
    assert nll.shape == (1, 16) and nll[0, 3] == 0
    loss = model.loss(x, y)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert model.num_parameters("all") == sum(model.num_parameters(k) for k in ("blocks", "embedding", "head"))


def test_gpt_default_size():
    model = GPT(GPTConfig(vocab_size=8192))
    assert 0.7e6 < model.num_parameters("blocks") < 1.1e6
    assert model.num_parameters("embedding") == model.num_parameters("head") == 8192 * 128
    with pytest.raises(ValueError, match="longer"):
        model(torch.zeros(1, 257, dtype=torch.long))


def test_state_dict_round_trip_carries_the_tables():
    tok = DictTokenizer()
    a = build_embedding(tok, "hierarchical", 4)
    b = build_embedding(tok, "hierarchical", 4)
    b.load_state_dict(a.state_dict())
    ids = torch.arange(tok.vocab_size)
    assert torch.equal(a(ids), b(ids))
    assert "parent" in a.state_dict() and "char" in a.state_dict()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("mode", ["flat", "structured", "hierarchical", "tuple"])
def test_cuda(mode):
    tok = DictTokenizer()
    emb = build_embedding(tok, mode, 8).to("cuda")
    out = emb(torch.arange(tok.vocab_size, device="cuda"))
    assert out.device.type == "cuda" and out.shape == (tok.vocab_size, 8)
    out.sum().backward()


def test_modules_follow_the_device_they_are_moved_to():
    # on a CPU-only machine this checks that the index tables are buffers, which .to() moves
    emb = build_embedding(DictTokenizer(), "tuple", 8)
    names = {n for n, _ in emb.named_buffers()}
    assert names == {"parent", "char"}
    emb = emb.to(torch.float64)
    assert emb.parent.dtype == torch.int64 and emb.parent_embed.weight.dtype == torch.float64


def _unescape(field: str) -> str:
    import re

    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(m.group(1), m.group(0)), field)


@pytest.mark.skipif(getattr(tokenforge, "LZ78Tokenizer", None) is None, reason="the LZ78 family is not merged")
@pytest.mark.filterwarnings("ignore:the corpus gave only")
def test_real_lz78_parent_tables_match_its_tsv_and_flat_prune_is_refused(tmp_path):
    from tokenforge.eval.families import parse_specs, train_tokenizer

    docs = [TEXT] * 3
    (spec,) = parse_specs("lz78:frequency_gated")
    tok = train_tokenizer(spec, docs, 600)
    tsv = tmp_path / "d.tsv"
    tok.save_tsv(tsv)
    rows = []
    for line in tsv.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(("#", "code\t")):  # comments and the column header
            continue
        cols = line.split("\t")
        out = len(cols) < 5 or cols[4] == "1"
        rows.append((int(cols[0]), int(cols[1]), _unescape(cols[2]), _unescape(cols[3]), out))
    n = tok.num_codes
    structured = build_embedding(tok, "structured", 8)
    hierarchical = build_embedding(tok, "hierarchical", 8)
    outputs = {pat: code for code, _, _, pat, out in rows if out and code <= n}
    checked = 0
    for code, parent, ch, pattern, out in rows:
        if code > n:
            continue
        assert int(structured.parent[code]) == parent, code
        want = next((outputs[pattern[:k]] for k in range(len(pattern) - 1, 0, -1) if pattern[:k] in outputs), 0)
        assert int(hierarchical.parent[code]) == want, code
        checked += 1
    assert checked == n
    for mode in ("structured", "hierarchical", "tuple"):
        emb = build_embedding(tok, mode, 8)
        emb(torch.tensor(tok.encode_ordinary(TEXT)[:50])).sum().backward()
    (flat,) = parse_specs("lz78:flat_prune")
    ftok = train_tokenizer(flat, docs, 600)
    for mode in ("structured", "hierarchical", "tuple"):
        with pytest.raises(EmbeddingModeError, match="(?i)flat"):
            build_embedding(ftok, mode, 8)
