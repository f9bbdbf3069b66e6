"""tokenforge.torch: vocabulary expansion keeps old outputs bit-exact; masked sampling."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the 'torch' extra); these tests need it")
from torch import nn  # noqa: E402

from growing_helpers import SOURCE_A, SOURCE_B  # noqa: E402
from tokenforge import GrowingBPETokenizer  # noqa: E402
from tokenforge.errors import TokenforgeError, VocabSizeError  # noqa: E402
from tokenforge.torch import expand_vocabulary, mask_logits, sample_next_token, vocab_capacity  # noqa: E402


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int = 16, tied: bool = False, bias: bool = False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(64, dim)
        self.mix = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=bias)
        if tied:
            self.lm_head.weight = self.wte.weight
        self.vocab_capacity = vocab

    def forward(self, ids):
        h = self.wte(ids) + self.pos(torch.arange(ids.shape[-1]))
        return self.lm_head(torch.tanh(self.mix(h)))


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_expansion_keeps_old_outputs_bit_exact(tied, bias):
    torch.manual_seed(0)
    model = TinyLM(32_000, tied=tied, bias=bias)
    ids = torch.randint(0, 32_000, (3, 50))
    emb_before = model.wte(ids).clone()
    out_before = model(ids).clone()
    params_before = {k: v.clone() for k, v in model.state_dict().items()}

    cap = expand_vocabulary(model, 32_001, init="normal", generator=torch.Generator().manual_seed(1))
    assert cap == 64_000 and cap % 32_000 == 0
    assert model.wte.num_embeddings == 64_000 and model.lm_head.out_features == 64_000
    assert model.wte.weight.shape == (64_000, 16) and model.lm_head.weight.shape == (64_000, 16)
    assert model.vocab_capacity == 64_000 and vocab_capacity(model) == 64_000
    assert (model.lm_head.weight is model.wte.weight) == tied
    assert torch.equal(model.wte(ids), emb_before)
    out_after = model(ids)
    assert out_after.shape[-1] == 64_000
    assert torch.equal(out_after[..., :32_000], out_before)
    for k, v in params_before.items():
        now = model.state_dict()[k]
        assert torch.equal(now[: v.shape[0]], v), k
    if bias:
        assert torch.count_nonzero(model.lm_head.bias[32_000:]) == 0
    # the new rows are drawn, not zero (and the same with the same seed)
    assert model.wte.weight[32_000:].abs().sum() > 0
    again = TinyLM(32_000, tied=tied, bias=bias)
    again.load_state_dict(params_before)
    expand_vocabulary(again, 32_001, init="normal", generator=torch.Generator().manual_seed(1))
    assert torch.equal(again.wte.weight, model.wte.weight)


def test_sizes_are_chunks_capped_and_never_shrink():
    emb = nn.Embedding(32_000, 8)
    head = nn.Linear(8, 32_000)
    assert expand_vocabulary((emb, head), 1000) == 32_000  # large enough already: untouched
    assert expand_vocabulary((emb, head), 32_000) == 32_000
    assert expand_vocabulary((emb, head), 96_001, init="normal") == 128_000
    assert expand_vocabulary((emb, head), 130_000, max_size=150_000, init="normal") == 150_000  # capped, not 160,000
    assert emb.num_embeddings == head.out_features == 150_000
    with pytest.raises(VocabSizeError, match="maximum"):
        expand_vocabulary((emb, head), 150_001, max_size=150_000, init="normal")
    assert emb.num_embeddings == 150_000
    small = nn.Embedding(10, 4)
    assert expand_vocabulary(small, 11, chunk=8, init="normal") == 16
    assert expand_vocabulary({"embedding": small}, 17, chunk=8, max_size=20, init="normal") == 20
    with pytest.raises(TokenforgeError):
        expand_vocabulary(small, 0)
    with pytest.raises(TokenforgeError, match="same ids"):
        expand_vocabulary((nn.Embedding(10, 4), nn.Linear(4, 9)), 20, init="normal")
    with pytest.raises(TypeError):
        expand_vocabulary("model", 20)


def test_optimizer_follows_the_new_parameters():
    torch.manual_seed(0)
    model = TinyLM(100, tied=False, bias=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 100, (2, 10))
    model(ids).sum().backward()
    opt.step()
    state_before = opt.state[model.wte.weight]["exp_avg"].clone()
    expand_vocabulary(model, 150, chunk=100, optimizer=opt, init="normal")
    params = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(model.wte.weight) in params and id(model.lm_head.weight) in params and id(model.lm_head.bias) in params
    st = opt.state[model.wte.weight]["exp_avg"]
    assert st.shape == (200, 16) and torch.equal(st[:100], state_before) and torch.count_nonzero(st[100:]) == 0
    opt.zero_grad()
    model(torch.randint(0, 200, (2, 10))).sum().backward()
    opt.step()  # trains on after growth


def test_grows_with_the_tokenizer():
    tok = GrowingBPETokenizer()
    model = TinyLM(32_000)
    tok.learn_merges(iter(SOURCE_A), 50, source="A")
    ids = torch.tensor([tok.encode("The fox and the dog")])
    before = model(ids).clone()
    tok.vocab_size = 40_000
    expand_vocabulary(model, 33_000, max_size=tok.vocab_size, init="normal")
    assert vocab_capacity(model) == 40_000
    tok.learn_merges(iter(SOURCE_B), 50, source="B")
    assert torch.equal(model(ids)[..., :32_000], before)
    logits = model(torch.tensor([tok.encode("def encode")]))[:, -1]
    nxt = sample_next_token(logits, tok.current_vocab_size, generator=torch.Generator().manual_seed(0))
    assert 0 <= int(nxt) < tok.current_vocab_size


def test_mask_logits():
    logits = torch.randn(2, 3, 10)
    m = mask_logits(logits, 6)
    assert torch.isinf(m[..., 6:]).all() and (m[..., 6:] < 0).all()
    assert torch.equal(m[..., :6], logits[..., :6])
    assert not torch.isinf(logits).any()  # not in place by default
    assert mask_logits(logits, 10) is logits and mask_logits(logits, 99) is logits
    same = mask_logits(logits, 4, inplace=True)
    assert same is logits and torch.isinf(logits[..., 4:]).all()
    with pytest.raises(TokenforgeError):
        mask_logits(logits, 0)
    with pytest.raises(TypeError):
        mask_logits([1.0, 2.0], 1)


@pytest.mark.parametrize("kw", [{}, {"temperature": 0.7}, {"temperature": 2.0, "top_k": 50}, {"top_k": 3}])
def test_sampling_never_yields_unused_ids(kw):
    current, capacity = 300, 32_000
    logits = torch.zeros(64, capacity)
    logits[:, current:] = 50.0  # the unused ids would win every draw without the mask
    logits[:, :current] = torch.randn(64, current, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(1234)
    draws = torch.cat([sample_next_token(logits, current, generator=g, **kw) for _ in range(100)])
    assert draws.shape == (64 * 100, 1)
    assert int(draws.max()) < current and int(draws.min()) >= 0
    assert len(torch.unique(draws)) > (1 if kw.get("top_k") == 3 else 20)  # it really samples
    g2 = torch.Generator().manual_seed(1234)
    assert torch.equal(draws[:64], sample_next_token(logits, current, generator=g2, **kw))


def test_sampling_shapes_and_argmax():
    logits = torch.full((2, 3, 500), -1.0)
    logits[..., 7] = 5.0
    logits[..., 400] = 100.0
    out = sample_next_token(logits, 266, temperature=0)
    assert out.shape == (2, 3, 1) and (out == 7).all()
    one = sample_next_token(logits[0, 0], 266, temperature=0)
    assert one.shape == (1,) and int(one) == 7
    with pytest.raises(TokenforgeError):
        sample_next_token(logits, 266, temperature=-1)
    with pytest.raises(TokenforgeError):
        sample_next_token(logits, 266, top_k=0)
