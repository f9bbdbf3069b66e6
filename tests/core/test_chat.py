"""Chat rendering (nanochat's conversation format) on a tiny pure-Python tokenizer."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenforge.base import Tokenizer
from tokenforge.chat import SPECIAL_TOKENS
from tokenforge.errors import SpecialTokenError, TokenforgeError


class ByteTokenizer(Tokenizer):
    """Ids 0..255 are bytes, then the given special tokens; nothing is merged."""

    family = "test-bytes"

    def __init__(self, specials=tuple(SPECIAL_TOKENS)):
        self._specials = {name: 256 + i for i, name in enumerate(specials)}

    @property
    def vocab_size(self):
        return 256 + len(self._specials)

    @property
    def special_tokens(self):
        return dict(self._specials)

    def encode_ordinary(self, text):
        return list(text.encode("utf-8"))

    def id_to_bytes(self, id):
        id = self.check_id(id)
        if id < 256:
            return bytes([id])
        return next(name for name, i in self._specials.items() if i == id).encode("utf-8")

    def decode_bytes(self, ids):
        return b"".join(self.id_to_bytes(i) for i in ids)

    def token_bytes(self):
        return np.array([1] * 256 + [0] * len(self._specials), dtype=np.int32)

    def save(self, path):
        raise NotImplementedError


TOK = ByteTokenizer()
S = {name: 256 + i for i, name in enumerate(SPECIAL_TOKENS)}


def b(text):
    return list(text.encode("utf-8"))


def test_special_tokens_list():
    assert SPECIAL_TOKENS == [
        "<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
        "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>",
    ]  # fmt: skip


def test_simple_conversation_ids_and_mask():
    conv = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo!"}]}
    ids, mask = TOK.render_conversation(conv)
    assert ids == [S["<|bos|>"], S["<|user_start|>"], *b("Hi"), S["<|user_end|>"],
                   S["<|assistant_start|>"], *b("Yo!"), S["<|assistant_end|>"]]  # fmt: skip
    assert mask == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_tool_use_example_from_the_seed():
    conv = {
        "messages": [
            {"role": "user", "content": "Calculate 123 * 456"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me calculate that."},
                    {"type": "python", "text": "123 * 456"},
                    {"type": "python_output", "text": "56088"},
                    {"type": "text", "text": "The answer is 56088."},
                ],
            },
        ]
    }
    ids, mask = TOK.render_conversation(conv)
    expected = [
        ([S["<|bos|>"]], 0),
        ([S["<|user_start|>"]], 0), (b("Calculate 123 * 456"), 0), ([S["<|user_end|>"]], 0),
        ([S["<|assistant_start|>"]], 0),
        (b("Let me calculate that."), 1),
        ([S["<|python_start|>"]], 1), (b("123 * 456"), 1), ([S["<|python_end|>"]], 1),
        ([S["<|output_start|>"]], 0), (b("56088"), 0), ([S["<|output_end|>"]], 0),
        (b("The answer is 56088."), 1),
        ([S["<|assistant_end|>"]], 1),
    ]  # fmt: skip
    assert ids == [i for seg, _ in expected for i in seg]
    assert mask == [m for seg, m in expected for _ in seg]
    assert TOK.decode(ids) == (
        "<|bos|><|user_start|>Calculate 123 * 456<|user_end|>"
        "<|assistant_start|>Let me calculate that.<|python_start|>123 * 456<|python_end|>"
        "<|output_start|>56088<|output_end|>The answer is 56088.<|assistant_end|>"
    )


def test_system_message_is_merged_into_first_user_message():
    conv = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Yo"},
        ]
    }
    before = copy.deepcopy(conv)
    merged = {"messages": [{"role": "user", "content": "Be brief.\n\nHi"}, {"role": "assistant", "content": "Yo"}]}
    assert TOK.render_conversation(conv) == TOK.render_conversation(merged)
    assert conv == before  # the caller's conversation is untouched


def test_bare_list_of_messages_is_accepted():
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert TOK.render_conversation(msgs) == TOK.render_conversation({"messages": msgs})


def test_roles_must_alternate_and_error_names_the_index():
    conv = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    with pytest.raises(TokenforgeError, match=r"message 1: expected role 'assistant'"):
        TOK.render_conversation(conv)
    # with a leading system message the index is still the caller's
    conv = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                         {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}]}  # fmt: skip
    with pytest.raises(TokenforgeError, match=r"message 3: expected role 'user'"):
        TOK.render_conversation(conv)
    with pytest.raises(TokenforgeError, match="message 0"):
        TOK.render_conversation({"messages": [{"role": "assistant", "content": "x"}]})


def test_system_message_needs_a_user_message_after_it():
    with pytest.raises(TokenforgeError, match="followed by a user message"):
        TOK.render_conversation({"messages": [{"role": "system", "content": "s"}]})


def test_bad_shapes_are_errors():
    with pytest.raises(TokenforgeError, match="no messages"):
        TOK.render_conversation({"messages": []})
    with pytest.raises(TokenforgeError, match="'messages'"):
        TOK.render_conversation({"turns": []})
    with pytest.raises(TokenforgeError, match="user content must be a str"):
        TOK.render_conversation({"messages": [{"role": "user", "content": ["x"]}]})
    with pytest.raises(TokenforgeError, match="assistant content"):
        TOK.render_conversation({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": 3}]})


def test_unknown_part_type_is_named():
    conv = {"messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": [{"type": "image", "text": "x"}]}]}  # fmt: skip
    with pytest.raises(TokenforgeError, match=r"message 1, part 0: unknown content part type 'image'"):
        TOK.render_conversation(conv)


def test_truncation_cuts_ids_and_mask_together():
    conv = {"messages": [{"role": "user", "content": "x" * 50}, {"role": "assistant", "content": "y" * 50}]}
    full_ids, full_mask = TOK.render_conversation(conv)
    ids, mask = TOK.render_conversation(conv, max_tokens=20)
    assert ids == full_ids[:20] and mask == full_mask[:20]
    assert len(full_ids) == len(full_mask) == 1 + 52 + 52


def test_missing_special_tokens_are_named():
    with pytest.raises(SpecialTokenError, match=re.escape("<|bos|>")):
        ByteTokenizer(specials=()).render_conversation([{"role": "user", "content": "a"}])
    bos_only = ByteTokenizer(specials=("<|bos|>",))
    with pytest.raises(SpecialTokenError, match=re.escape("no <|user_start|> special token")):
        bos_only.render_conversation([{"role": "user", "content": "a"}])
    no_python = ByteTokenizer(specials=SPECIAL_TOKENS[:5])
    conv = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert no_python.render_conversation(conv)[0]  # python tokens are only needed when used
    conv[1]["content"] = [{"type": "python", "text": "1+1"}]
    with pytest.raises(SpecialTokenError, match=re.escape("<|python_start|>")):
        no_python.render_conversation(conv)


def test_render_for_completion():
    conv = {"messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
        {"role": "user", "content": "More?"}, {"role": "assistant", "content": "Sure"},
    ]}  # fmt: skip
    before = copy.deepcopy(conv)
    ids = TOK.render_for_completion(conv)
    prompt_ids, _ = TOK.render_conversation({"messages": conv["messages"][:3]})
    assert ids == prompt_ids + [S["<|assistant_start|>"]]
    assert conv == before


def test_render_for_completion_needs_a_final_assistant_message():
    with pytest.raises(TokenforgeError, match="must be from the assistant"):
        TOK.render_for_completion({"messages": [{"role": "user", "content": "Hi"}]})


# ---- visualisation ------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_visualize_plain_separates_tokens_and_marks_mask():
    ids = [S["<|assistant_start|>"], *b("ok"), S["<|assistant_end|>"]]
    assert TOK.visualize_tokenization(ids, color=False) == "<|assistant_start|>|o|k|<|assistant_end|>"
    shown = TOK.visualize_tokenization(ids, [0, 1, 1, 1], color=False)
    assert shown == "<|assistant_start|>|[o]|[k]|[<|assistant_end|>]"


def test_visualize_escapes_control_and_partial_bytes():
    ids = [*b("a\n"), 0xE2]
    assert TOK.visualize_tokenization(ids, color=False) == "a|\\n|\\xe2"


def test_visualize_colour():
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    ids, mask = TOK.render_conversation(conv)
    shown = TOK.visualize_tokenization(ids, mask)
    assert ANSI.sub("", shown) == TOK.decode(ids)
    cells = re.findall(r"((?:\x1b\[[0-9;]*m)+)([^\x1b]*)\x1b\[0m", shown)
    assert [text for _, text in cells] == [TOK.id_to_token(i) for i in ids]
    backgrounds = [re.search(r"48;5;\d+", style).group() for style, _ in cells]
    assert all(backgrounds[k] != backgrounds[k + 1] for k in range(len(ids) - 1))
    for (style, _), token_id, m in zip(cells, ids, mask):
        assert ("\x1b[32m" in style) == (m == 1)
        assert ("\x1b[31m" in style) == (m == 0)
        assert ("\x1b[1m" in style) == (token_id >= 256)


def test_visualize_without_mask_has_no_mask_colours():
    shown = TOK.visualize_tokenization(b("abc"))
    assert "\x1b[32m" not in shown and "\x1b[31m" not in shown
    assert ANSI.sub("", shown) == "abc"


def test_visualize_mask_length_must_match():
    with pytest.raises(TokenforgeError, match="mask has 1 entries"):
        TOK.visualize_tokenization([1, 2], [1])


# ---- properties -----------------------------------------------------------------
part = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "python", "python_output"]), "text": st.text(max_size=8)}
)
content = st.one_of(st.text(max_size=10), st.lists(part, max_size=3))


@st.composite
def conversations(draw):
    n = draw(st.integers(1, 5))
    msgs = []
    for i in range(n):
        if i % 2 == 0:
            msgs.append({"role": "user", "content": draw(st.text(max_size=10))})
        else:
            msgs.append({"role": "assistant", "content": draw(content)})
    return {"messages": msgs}


def _expected_text_and_trained(conv) -> tuple[str, str]:
    """The rendered conversation as text, and the text of its mask-1 tokens, built independently."""
    text, trained = "<|bos|>", ""
    for m in conv["messages"]:
        if m["role"] == "user":
            text += f"<|user_start|>{m['content']}<|user_end|>"
            continue
        text += "<|assistant_start|>"
        parts = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
        for p in parts:
            if p["type"] == "text":
                seg = p["text"]
                trained += seg
            elif p["type"] == "python":
                seg = f"<|python_start|>{p['text']}<|python_end|>"
                trained += seg
            else:
                seg = f"<|output_start|>{p['text']}<|output_end|>"
            text += seg
        text += "<|assistant_end|>"
        trained += "<|assistant_end|>"
    return text, trained


@settings(max_examples=200, deadline=None)
@given(conv=conversations())
def test_rendering_matches_an_independent_description(conv):
    ids, mask = TOK.render_conversation(conv, max_tokens=10**6)
    text, trained = _expected_text_and_trained(conv)
    assert len(ids) == len(mask)
    assert set(mask) <= {0, 1}
    assert TOK.decode(ids) == text
    assert TOK.decode([i for i, m in zip(ids, mask) if m]) == trained
