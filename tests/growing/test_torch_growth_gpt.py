"""expand_vocabulary on tokenforge's own GPT: every embedding mode that can grow, old rows exact (issue 11, item 6)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the 'torch' extra); these tests need it")

from growing_helpers import SOURCE_A, SOURCE_B  # noqa: E402
from tokenforge import GrowingBPETokenizer, LZ78Tokenizer  # noqa: E402
from tokenforge.embedding_meta import EmbeddingModeError  # noqa: E402
from tokenforge.torch import GPT, GPTConfig, expand_vocabulary, vocab_capacity  # noqa: E402
from tokenforge.torch.embeddings import build_embedding  # noqa: E402

OLD, NEW = 300, 340


def _meta(vocab: int) -> dict:
    """A tree decomposition whose first ids do not depend on vocab (as a growing tokenizer's)."""
    ids = np.arange(vocab)
    parent = np.where(ids < 20, 0, ids // 3)
    char = ids % 37
    return {"parent": parent, "char": char, "num_parents": vocab, "num_chars": 37 + vocab // 100}


def _gpt(mode: str) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=OLD, n_layer=1, n_head=2, n_embd=16, seq_len=16, embedding=mode)
    emb = None if mode == "flat" else build_embedding(_meta(OLD), mode, 16)
    return GPT(cfg, embedding=emb)


@pytest.mark.parametrize("mode", ["flat", "structured", "hierarchical", "tuple"])
def test_gpt_grows_in_every_mode_and_old_ids_are_unchanged(mode):
    model = _gpt(mode).eval()
    ids = torch.randint(0, OLD, (2, 12), generator=torch.Generator().manual_seed(1))
    before, embedded = model(ids).detach().clone(), model.embed(ids).detach().clone()
    old_params = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kw = {"init": "normal"} if mode == "flat" else {"metadata": _meta(NEW), "init": "normal"}
    cap = expand_vocabulary(model, NEW, chunk=1, optimizer=opt, **kw)
    assert cap == NEW == model.config.vocab_size == vocab_capacity(model) == model.head.out_features
    assert torch.equal(model.embed(ids).detach(), embedded)  # bit for bit: the old rows were copied, not re-drawn
    # (the wider output matmul may round differently in the last bit; the head's rows themselves are exact)
    assert torch.allclose(model(ids).detach()[..., :OLD], before, rtol=0, atol=1e-6)
    for n, p in model.named_parameters():
        assert torch.equal(p.detach()[: old_params[n].shape[0]], old_params[n]), n
    if mode != "flat":
        assert (
            model.embed.parent.shape == (NEW,)
            and model.embed.char[OLD:].tolist() == (np.arange(OLD, NEW) % 37).tolist()
        )
    # new ids work, and the optimizer trains the grown parameters
    x = torch.randint(0, NEW, (2, 12))
    model.train()
    model.loss(x, x).backward()
    opt.step()


def test_chunked_capacity_beyond_the_tokenizer_gets_rows_of_its_own():
    model = _gpt("structured")
    cap = expand_vocabulary(model, NEW, chunk=128, metadata=_meta(NEW), init="normal")
    assert cap == 384 and model.embed.vocab_size == 384
    emb = model.embed
    assert emb.parent[NEW:].eq(0).all() and emb.char[NEW:].eq(emb.num_chars - 1).all()
    assert model(torch.tensor([[OLD, NEW, 383]])).shape == (1, 3, 384)


def test_growing_bpe_tokenizer_grows_a_structured_gpt():
    tok = GrowingBPETokenizer()
    tok.learn_merges(iter(SOURCE_A), 40, source="A")
    n0 = tok.current_vocab_size
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=n0, n_layer=1, n_head=2, n_embd=16, seq_len=32, embedding="structured"), tokenizer=tok
    ).eval()
    ids = torch.tensor([tok.encode("The fox and the dog")])
    before, embedded = model(ids).detach().clone(), model.embed(ids).detach().clone()
    tok.learn_merges(iter(SOURCE_B), 40, source="B")
    expand_vocabulary(model, tok.current_vocab_size, chunk=1, tokenizer=tok)
    assert model.config.vocab_size == tok.current_vocab_size
    assert torch.equal(model.embed(ids).detach(), embedded)
    assert torch.allclose(model(ids).detach()[..., :n0], before, rtol=0, atol=1e-6)
    assert model(torch.tensor([tok.encode("def encode(self, text):")])).shape[-1] == tok.current_vocab_size


def test_modes_that_cannot_grow_say_why():
    model = _gpt("tuple")
    with pytest.raises(EmbeddingModeError, match="pass tokenizer="):
        expand_vocabulary(model, NEW, chunk=1, init="normal")
    moved = _meta(NEW)
    moved["parent"] = moved["parent"].copy()
    moved["parent"][25] += 1
    with pytest.raises(EmbeddingModeError, match="old id 25 another parent"):
        expand_vocabulary(model, NEW, chunk=1, metadata=moved, init="normal")
    assert model.config.vocab_size == OLD and model.embed.vocab_size == OLD  # nothing half-grown
    # an LZ78 dictionary of another size moves its byte-fallback ids: refused, with the reason
    from tokenforge.data.default_corpus import _topics

    docs = _topics()[:10] or [" ".join(SOURCE_A + SOURCE_B) * 50]
    small = LZ78Tokenizer.train_from_iterator(docs, 400, strategy="frequency_gated", progress=False)
    big = LZ78Tokenizer.train_from_iterator(docs, 440, strategy="frequency_gated", progress=False)
    lz = GPT(
        GPTConfig(vocab_size=small.vocab_size, n_layer=1, n_head=2, n_embd=16, seq_len=16, embedding="structured"),
        tokenizer=small,
    )
    with pytest.raises(EmbeddingModeError, match="byte-fallback"):
        expand_vocabulary(lz, big.vocab_size, chunk=1, tokenizer=big)
