"""expand_vocabulary(init="parts"): new rows from the rows of their parts (issue 16, item 4).

Hand-computed rows on a five-row model, recursion down to trained rows with
the growing vocabulary's own merges, the fallback, old rows kept exactly, the
optimizer state, and init="normal" drawing today's numbers.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the 'torch' extra); these tests need it")
from torch import nn  # noqa: E402

from growing_helpers import SOURCE_A, SOURCE_B  # noqa: E402
from tokenforge import BPETokenizer, GrowingBPETokenizer  # noqa: E402
from tokenforge.errors import TokenforgeError  # noqa: E402
from tokenforge.torch import GPT, GPTConfig, expand_vocabulary  # noqa: E402

# five trained rows; norms 5, 1, 2, 3, 5 -> median 3
EMB = [[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [0.0, -3.0], [5.0, 0.0]]
# head rows; norms 2, 1, 1, 4, 2 -> median 2
HEAD = [[2.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, 4.0], [0.0, -2.0]]
BIAS = [0.5, -1.0, 2.0, 1.5, -3.0]
# 5 = (1, 2); 6 = (5, 3) -> leaves 1, 2, 3; 7 has none; 8 = (7, 0) -> the mean row and row 0; 9 = (0, 0)
PARTS = {5: (1, 2), 6: (5, 3), 8: (7, 0), 9: (0, 0)}


def _scaled(v, norm):
    n = math.hypot(*v)
    return [x * norm / n for x in v]


def _expected_rows(table, median):
    mean_all = [sum(r[0] for r in table) / 5, sum(r[1] for r in table) / 5]
    raw = {
        5: [(table[1][0] + table[2][0]) / 2, (table[1][1] + table[2][1]) / 2],
        6: [(table[1][0] + table[2][0] + table[3][0]) / 3, (table[1][1] + table[2][1] + table[3][1]) / 3],
        7: mean_all,
        8: [(mean_all[0] + table[0][0]) / 2, (mean_all[1] + table[0][1]) / 2],
        9: table[0],
    }
    return torch.tensor([_scaled(raw[i], median) for i in range(5, 10)])


def _pair(bias=True, tied=False):
    emb = nn.Embedding(5, 2)
    head = nn.Linear(2, 5, bias=bias)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(EMB))
        head.weight.copy_(torch.tensor(HEAD))
        if bias:
            head.bias.copy_(torch.tensor(BIAS))
    if tied:
        head.weight = emb.weight
    return emb, head


def test_rows_are_the_hand_computed_means_at_the_median_norm():
    emb, head = _pair()
    cap = expand_vocabulary((emb, head), 10, chunk=4, parts=PARTS, generator=torch.Generator().manual_seed(7))
    assert cap == 12 and emb.num_embeddings == head.out_features == 12
    assert torch.equal(emb.weight[:5], torch.tensor(EMB))  # old rows exact
    assert torch.equal(head.weight[:5], torch.tensor(HEAD)) and torch.equal(head.bias[:5], torch.tensor(BIAS))
    assert torch.allclose(emb.weight[5:10], _expected_rows(EMB, 3.0), atol=1e-6)
    assert torch.allclose(head.weight[5:10], _expected_rows(HEAD, 2.0), atol=1e-6)
    assert torch.allclose(emb.weight[5:10].norm(dim=1), torch.full((5,), 3.0), atol=1e-6)
    mb = sum(BIAS) / 5
    want_bias = [(BIAS[1] + BIAS[2]) / 2, (BIAS[1] + BIAS[2] + BIAS[3]) / 3, mb, (mb + BIAS[0]) / 2, BIAS[0]]
    assert torch.allclose(head.bias[5:10], torch.tensor(want_bias), atol=1e-6)
    # capacity beyond the tokenizer's ids: drawn exactly as init="normal" draws it
    emb2, head2 = _pair()
    expand_vocabulary((emb2, head2), 10, chunk=4, init="normal", generator=torch.Generator().manual_seed(7))
    assert torch.equal(emb.weight[10:], emb2.weight[10:]) and torch.equal(head.weight[10:], head2.weight[10:])
    assert torch.count_nonzero(head.bias[10:]) == 0


def test_tied_head_keeps_sharing_the_parts_rows():
    emb, head = _pair(bias=False, tied=True)
    expand_vocabulary((emb, head), 10, chunk=1, parts=PARTS)
    assert head.weight is emb.weight and emb.weight.shape == (10, 2)
    assert torch.equal(emb.weight[:5], torch.tensor(EMB))
    assert torch.allclose(emb.weight[5:], _expected_rows(EMB, 3.0), atol=1e-6)


def _leaves(i, parts, old):
    """The slow reference: the old ids a new id decomposes into, in order."""
    if i < old:
        return [i]
    if i not in parts:
        return [None]  # the mean row
    a, b = parts[i]
    return _leaves(a, parts, old) + _leaves(b, parts, old)


def _reference_rows(w_old, parts, old, new):
    med = torch.quantile(w_old.double().norm(dim=1), 0.5)  # the median (mean of the two middle values if even)
    mean = w_old.double().mean(0)
    rows = []
    for i in range(old, new):
        vs = [mean if x is None else w_old[x].double() for x in _leaves(i, parts, old)]
        m = torch.stack(vs).mean(0)
        rows.append(m * med / m.norm())
    return torch.stack(rows).float()


def test_growing_vocabulary_recurses_down_to_trained_rows():
    tok = GrowingBPETokenizer()
    tok.learn_merges(iter(SOURCE_A), 30, source="A")
    n0 = tok.current_vocab_size
    torch.manual_seed(0)
    emb, head = nn.Embedding(n0, 8), nn.Linear(8, n0, bias=False)
    w0, h0 = emb.weight.detach().clone(), head.weight.detach().clone()
    tok.learn_merges(iter(SOURCE_B), 40, source="B")
    n1 = tok.current_vocab_size
    parts = dict(tok.merge_parts())
    assert all(a >= 10 and b >= 10 for a, b in parts.values())  # the offset-10 layout: bytes are 10..265
    deep = [i for i in range(n0, n1) if any(x >= n0 for x in parts[i])]
    assert deep, "the second source should build new tokens from new tokens"
    expand_vocabulary((emb, head), n1, chunk=1, tokenizer=tok)
    assert torch.equal(emb.weight[:n0], w0) and torch.equal(head.weight[:n0], h0)
    assert torch.allclose(emb.weight[n0:], _reference_rows(w0, parts, n0, n1), atol=1e-5)
    assert torch.allclose(head.weight[n0:], _reference_rows(h0, parts, n0, n1), atol=1e-5)


def test_bpe_tokenizer_parts_are_its_merges():
    text = " ".join(SOURCE_A + SOURCE_B) * 3
    # specials first, so a larger vocabulary only appends merge ids (nanochat's layout moves its specials)
    small = BPETokenizer.train_from_iterator([text], 300, layout="specials_first")
    big = BPETokenizer.train_from_iterator([text], 330, layout="specials_first")
    assert big.merges[: len(small.merges)] == small.merges and len(big.merges) > len(small.merges)
    assert big.merge_parts() == {c: (a, b) for a, b, c in big.merges}
    torch.manual_seed(1)
    emb = nn.Embedding(small.vocab_size, 4)
    w0 = emb.weight.detach().clone()
    expand_vocabulary(emb, big.vocab_size, chunk=1, tokenizer=big)
    assert torch.equal(emb.weight[: small.vocab_size], w0)
    want = _reference_rows(w0, big.merge_parts(), small.vocab_size, big.vocab_size)
    assert torch.allclose(emb.weight[small.vocab_size :], want, atol=1e-5)


class _Capacity(nn.Module):
    """A model with rows for 12 ids trained on 5, that records it in ``current_vocab_size``."""

    def __init__(self):
        super().__init__()
        self.wte, self.lm_head = _pair()
        self.vocab_capacity = 5
        self.current_vocab_size = 5


def test_rows_inside_the_capacity_are_reinitialised_and_their_optimizer_state_zeroed():
    model = _Capacity()
    expand_vocabulary(model, 6, chunk=4, parts={}, init="normal", generator=torch.Generator().manual_seed(3))
    assert model.vocab_capacity == 8 and model.current_vocab_size == 6  # grown with init="normal": rows 5..7 drawn
    model.current_vocab_size = 5  # say the model was trained on 5 ids only
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.lm_head(model.wte(torch.tensor([0, 1, 2, 6]))).sum().backward()
    opt.step()
    w, hw = model.wte.weight, model.lm_head.weight
    before_w, before_state = w.detach().clone(), opt.state[hw]["exp_avg"].clone()
    assert torch.count_nonzero(before_state[5:8]) > 0
    cap = expand_vocabulary(model, 8, chunk=4, parts=PARTS, optimizer=opt)  # no new rows: ids 5..7 re-initialised
    assert cap == 8 and model.wte.weight is w and model.lm_head.weight is hw  # same parameters, in place
    assert model.current_vocab_size == 8
    assert torch.equal(w[:5], before_w[:5])
    mean_all = before_w[:5].double().mean(0)
    med = before_w[:5].double().norm(dim=1).median()
    want7 = (mean_all * med / mean_all.norm()).float()
    assert torch.allclose(w[7], want7, atol=1e-6)
    st = opt.state[hw]["exp_avg"]
    assert torch.equal(st[:5], before_state[:5]) and torch.count_nonzero(st[5:8]) == 0


def test_optimizer_state_grows_with_the_parts_rows():
    emb, head = _pair()
    opt = torch.optim.AdamW([emb.weight, head.weight, head.bias], lr=0.1)
    head(emb(torch.tensor([0, 3, 4]))).sum().backward()
    opt.step()
    before = {k: opt.state[head.weight][k].clone() for k in ("exp_avg", "exp_avg_sq")}
    expand_vocabulary((emb, head), 10, chunk=1, parts=PARTS, optimizer=opt)
    params = [p for g in opt.param_groups for p in g["params"]]
    assert any(p is emb.weight for p in params) and any(p is head.bias for p in params)
    for k, v in before.items():
        now = opt.state[head.weight][k]
        assert now.shape == (10, 2) and torch.equal(now[:5], v) and torch.count_nonzero(now[5:]) == 0
    head(emb(torch.tensor([5, 9]))).sum().backward()
    opt.step()


def test_normal_init_draws_todays_numbers():
    emb, head = _pair()
    expand_vocabulary(
        (emb, head), 7, chunk=4, init="normal", init_std=0.05, generator=torch.Generator().manual_seed(11)
    )
    g = torch.Generator().manual_seed(11)
    want_e = torch.randn((3, 2), generator=g) * 0.05  # today's rule: embedding rows first, then the head's
    want_h = torch.randn((3, 2), generator=g) * 0.05
    assert torch.equal(emb.weight[5:], want_e) and torch.equal(head.weight[5:], want_h)
    assert torch.equal(emb.weight[:5], torch.tensor(EMB)) and torch.count_nonzero(head.bias[5:]) == 0


def test_tokenforge_gpt_flat_and_structured_heads_take_the_parts_rule(tmp_path):
    tok = GrowingBPETokenizer()
    tok.learn_merges(iter(SOURCE_A), 25, source="A")
    n0 = tok.current_vocab_size
    for mode in ("flat", "structured"):
        torch.manual_seed(0)
        cfg = GPTConfig(vocab_size=n0, n_layer=1, n_head=2, n_embd=8, seq_len=16, embedding=mode)
        model = GPT(cfg, tokenizer=tok)
        h0 = model.head.weight.detach().clone()
        e0 = model.embed.weight.detach().clone() if mode == "flat" else None
        tok.save(tmp_path / "t.json")
        grown = GrowingBPETokenizer.load(tmp_path / "t.json")
        grown.learn_merges(iter(SOURCE_B), 20, source="B")
        n1 = grown.current_vocab_size
        expand_vocabulary(model, n1, chunk=1, tokenizer=grown)
        parts = dict(grown.merge_parts())
        assert model.config.vocab_size == n1 and torch.equal(model.head.weight[:n0], h0)
        assert torch.allclose(model.head.weight[n0:], _reference_rows(h0, parts, n0, n1), atol=1e-5)
        if mode == "flat":
            assert torch.equal(model.embed.weight[:n0], e0)
            assert torch.allclose(model.embed.weight[n0:], _reference_rows(e0, parts, n0, n1), atol=1e-5)
        assert model(torch.tensor([grown.encode("def encode")])).shape[-1] == n1


def test_refusals_say_what_to_do():
    emb, head = _pair()
    with pytest.raises(TokenforgeError, match='tokenizer= .*or parts=.*init="normal"'):
        expand_vocabulary((emb, head), 8, chunk=1)
    with pytest.raises(TokenforgeError, match="parts of id 6 are \\(6, 1\\)"):
        expand_vocabulary((emb, head), 8, chunk=1, parts={6: (6, 1)})
    with pytest.raises(TokenforgeError, match="old_vocab_size"):
        expand_vocabulary((emb, head), 8, chunk=1, parts={}, old_vocab_size=6)
    with pytest.raises(TokenforgeError, match="init must be"):
        expand_vocabulary((emb, head), 8, chunk=1, init="zeros")
    with pytest.raises(TypeError, match="mapping"):
        expand_vocabulary((emb, head), 8, chunk=1, parts=[(1, 2)])
    assert emb.num_embeddings == 5 and torch.equal(emb.weight, torch.tensor(EMB))  # nothing half-grown
    assert expand_vocabulary((emb, head), 5) == 5  # nothing new: no parts needed


def test_head_init_chooses_the_heads_rule_apart():
    emb, head = _pair()
    expand_vocabulary(
        (emb, head), 10, chunk=1, parts=PARTS, head_init="normal", generator=torch.Generator().manual_seed(5)
    )
    emb2, head2 = _pair()
    expand_vocabulary((emb2, head2), 10, chunk=1, init="normal", generator=torch.Generator().manual_seed(5))
    assert torch.allclose(emb.weight[5:], _expected_rows(EMB, 3.0), atol=1e-6)
    assert torch.equal(head.weight, head2.weight) and torch.equal(head.bias, head2.bias)  # today's head rows
    emb3, head3 = _pair()
    expand_vocabulary((emb3, head3), 10, chunk=1, parts=PARTS, init="normal", head_init="parts")
    assert torch.allclose(head3.weight[5:], _expected_rows(HEAD, 2.0), atol=1e-6)
    assert not torch.allclose(emb3.weight[5:], _expected_rows(EMB, 3.0), atol=1e-3)
    with pytest.raises(TokenforgeError, match="head_init must be"):
        expand_vocabulary(_pair(), 10, chunk=1, parts=PARTS, head_init="mean")
