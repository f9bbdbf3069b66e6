"""save_pretrained: transformers' AutoTokenizer takes a tokenforge tokenizer as its own.

Checked with transformers itself: the same ids on held-out text, padding, and
``apply_chat_template`` giving exactly ``render_conversation``'s ids and mask
(``return_assistant_tokens_mask``) and ``render_for_completion``'s prompt.
"""

from __future__ import annotations

import json

import pytest
import transformers  # in the dev extra: a missing peer is an error, not a skip

import tokenforge
from export_cases import CONVERSATIONS, HELD_OUT, TRAIN
from tokenforge import BPETokenizer
from tokenforge.errors import SpecialTokenError


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.train_from_iterator(TRAIN, 1500)


@pytest.fixture(scope="module")
def hf_dir(tok, tmp_path_factory):
    d = tmp_path_factory.mktemp("transformers")
    tok.save_pretrained(d, model_max_length=2048)
    return d


@pytest.fixture(scope="module")
def auto(hf_dir):
    return transformers.AutoTokenizer.from_pretrained(str(hf_dir))


def test_autotokenizer_gives_our_ids_and_decodes_back(tok, auto):
    for text in HELD_OUT:
        assert auto(text, add_special_tokens=False)["input_ids"] == tok.encode(text)
        assert auto.decode(tok.encode(text)) == text
    assert auto.bos_token == "<|bos|>" and auto.eos_token == "<|assistant_end|>" and auto.pad_token == "<|bos|>"
    assert auto.pad_token_id == tok.special_tokens["<|bos|>"]
    assert auto.model_max_length == 2048


def test_padding_and_attention_masks_work(tok, auto):
    texts = [HELD_OUT[0][:200], "short"]
    out = auto(texts, padding=True, add_special_tokens=False)
    n0, n1 = len(tok.encode(texts[0])), len(tok.encode(texts[1]))
    assert [len(x) for x in out["input_ids"]] == [max(n0, n1)] * 2
    assert out["attention_mask"][1] == [1] * n1 + [0] * (max(n0, n1) - n1)
    assert out["input_ids"][1][n1:] == [auto.pad_token_id] * (max(n0, n1) - n1)
    cut = auto(texts, truncation=True, max_length=5, add_special_tokens=False)
    assert [len(x) for x in cut["input_ids"]] == [5, min(5, n1)]


@pytest.mark.parametrize("k", range(len(CONVERSATIONS)))
def test_chat_template_gives_render_conversation_ids_and_mask(tok, auto, k):
    messages = CONVERSATIONS[k]
    ids, mask = tok.render_conversation({"messages": messages})
    out = auto.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    assert out["input_ids"] == ids
    assert out["assistant_masks"] == mask


@pytest.mark.parametrize("k", range(len(CONVERSATIONS)))
def test_generation_prompt_gives_render_for_completion(tok, auto, k):
    messages = CONVERSATIONS[k]
    want = tok.render_for_completion({"messages": messages})
    got = auto.apply_chat_template(messages[:-1], tokenize=True, add_generation_prompt=True, return_dict=True)
    assert got["input_ids"] == want


def test_chat_template_refuses_what_render_conversation_refuses(auto, tok):
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(tokenforge.TokenforgeError):
        tok.render_conversation({"messages": bad})
    with pytest.raises(Exception, match="alternate"):
        auto.apply_chat_template(bad, tokenize=False)


def test_load_reads_the_directory_back(tok, hf_dir):
    back = tokenforge.load(hf_dir)
    assert isinstance(back, BPETokenizer)
    assert back.special_tokens == tok.special_tokens
    assert [back.encode(t) for t in HELD_OUT] == [tok.encode(t) for t in HELD_OUT]
    assert tokenforge.registry.identify(hf_dir).name == "transformers-dir"
    config = json.loads((hf_dir / "tokenizer_config.json").read_text())
    assert config["chat_template"] == tokenforge.chat.CHAT_TEMPLATE


def test_roles_of_other_layouts_and_overrides(tmp_path):
    from tokenforge.formats.hf_pretrained import special_roles

    gpt2 = BPETokenizer.train_from_iterator(TRAIN[:40], 300, special_tokens=["<|endoftext|>"])
    d = tmp_path / "gpt2"
    gpt2.save_pretrained(d)
    auto = transformers.AutoTokenizer.from_pretrained(str(d))
    assert auto.bos_token == auto.eos_token == auto.pad_token == "<|endoftext|>"
    assert "chat_template" not in json.loads((d / "tokenizer_config.json").read_text())
    assert special_roles({"<|endoftext|>": 5, "<|pad|>": 6})["pad_token"] == "<|pad|>"
    assert special_roles({}) == {"bos_token": None, "eos_token": None, "pad_token": None, "unk_token": None}
    plain = BPETokenizer.train_from_iterator(TRAIN[:40], 300, special_tokens=None)
    plain.save_pretrained(tmp_path / "plain")
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path / "plain")).pad_token is None
    with pytest.raises(SpecialTokenError, match="not a special token"):
        gpt2.save_pretrained(tmp_path / "bad", pad_token="<pad>")
    gpt2.save_pretrained(tmp_path / "none", eos_token=None)
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path / "none")).eos_token is None


def test_cli_train_format_transformers(tmp_path):
    from tokenforge.cli.main import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TRAIN[:80]), encoding="utf-8")
    out = tmp_path / "hf"
    assert main(["train", str(corpus), "--vocab-size", "600", "-o", str(out), "--format", "transformers", "-q"]) == 0
    auto = transformers.AutoTokenizer.from_pretrained(str(out))
    tok = tokenforge.load(out)
    assert auto(HELD_OUT[0], add_special_tokens=False)["input_ids"] == tok.encode(HELD_OUT[0])


def test_the_growing_vocabulary_gets_the_same_export(tmp_path):
    from tokenforge import GrowingBPETokenizer

    grow = GrowingBPETokenizer()
    grow.learn_merges(iter(TRAIN), num_merges=600)
    d = tmp_path / "grow"
    grow.save_pretrained(d)
    auto = transformers.AutoTokenizer.from_pretrained(str(d))
    assert (auto.bos_token, auto.eos_token, auto.pad_token, auto.unk_token) == (
        "<|bos|>",
        "<|eos|>",
        "<|pad|>",
        "<|unk|>",
    )
    assert len(auto) == grow.current_vocab_size  # the reserved ids 4-9 are counted
    texts = HELD_OUT + ["Cafe\u0301 A\u030a naïve 中文"]  # NFC applies on both sides
    for text in texts:
        assert auto(text, add_special_tokens=False)["input_ids"] == grow.encode(text) == grow.encode_ordinary(text)
        assert auto(text)["input_ids"] == grow.encode_for_model(text)  # the seed's default: BOS ... EOS
        model_ids = grow.encode_for_model(text)
        assert auto.decode(model_ids, skip_special_tokens=True) == grow.decode(model_ids, skip_special_tokens=True)
    out = auto(["a", "abc def"], padding=True)
    assert out["input_ids"][0][-1] == grow.special_tokens["<|pad|>"] and out["attention_mask"][0][-1] == 0
    back = tokenforge.load(d)
    assert isinstance(back, GrowingBPETokenizer)
    assert back.to_dict() == grow.to_dict()
