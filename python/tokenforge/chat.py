"""Chat rendering shared by every tokenizer family: nanochat's conversation format.

:class:`ChatMixin` is mixed into :class:`tokenforge.base.Tokenizer`, so every
tokenizer that carries nanochat's special tokens (:data:`SPECIAL_TOKENS`) can
turn a conversation into ids plus a training mask, render a prompt for
completion, and show a tokenization on a terminal.

A conversation is ``{"messages": [...]}`` (a bare list of messages is accepted
too). Each message is ``{"role": ..., "content": ...}``. An optional leading
``"system"`` message is folded into the first user message; after it roles must
alternate ``user``, ``assistant``, ``user``, ... User content is a str.
Assistant content is a str or a list of parts ``{"type": "text" | "python" |
"python_output", "text": str}``.

Mask values (1 = the model is trained to produce this token):

============================================  ====
``<|bos|>``, user turns with their markers       0
``<|assistant_start|>``                          0
assistant text, ``text`` parts                   1
``<|python_start|>`` code ``<|python_end|>``     1
``<|output_start|>`` output ``<|output_end|>``   0
``<|assistant_end|>``                            1
============================================  ====

Not handled: roles other than system/user/assistant, several system messages,
and tool output outside an assistant message.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import SpecialTokenError, TokenforgeError

__all__ = [
    "SPECIAL_TOKENS",
    "CHAT_TEMPLATE",
    "ChatMixin",
    "ChatPart",
    "conversation_parts",
    "check_special_texts",
    "special_token_list",
]

#: nanochat's special tokens, in id order (they follow the merges).
SPECIAL_TOKENS = [
    "<|bos|>",
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|output_start|>",
    "<|output_end|>",
]

#: The same rendering as a Jinja chat template (what transformers'
#: ``apply_chat_template`` runs; :meth:`tokenforge.BPETokenizer.save_pretrained`
#: writes it): the system message folded into the first user message with
#: "\\n\\n", roles checked to alternate, tool parts as nanochat renders them, and
#: ``{% generation %}`` around exactly the spans whose mask is 1, so
#: ``return_assistant_tokens_mask=True`` gives :meth:`ChatMixin.render_conversation`'s
#: mask; ``add_generation_prompt=True`` ends with ``<|assistant_start|>``, as
#: :meth:`ChatMixin.render_for_completion` does. A template renders text that is
#: tokenized whole, so two *adjacent* ``text`` parts are encoded together (the
#: renderer encodes each alone); every part next to a special token is the same.
CHAT_TEMPLATE = (
    "{%- if not messages -%}{{ raise_exception('conversation has no messages') }}{%- endif -%}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages | length < 2 or messages[1]['role'] != 'user' -%}"
    "{{ raise_exception('message 1: a system message must be followed by a user message') }}{%- endif -%}"
    "{%- if messages[0]['content'] is not string or messages[1]['content'] is not string -%}"
    "{{ raise_exception('messages 0 and 1: system and user content must be str') }}{%- endif -%}"
    "{%- set msgs = [{'role': 'user', 'content': messages[0]['content'] + '\\n\\n' + messages[1]['content']}]"
    " + messages[2:] -%}"
    "{%- else -%}{%- set msgs = messages -%}{%- endif -%}"
    "{{- bos_token -}}"
    "{%- for m in msgs -%}"
    "{%- set want = 'user' if loop.index0 % 2 == 0 else 'assistant' -%}"
    "{%- if m['role'] != want -%}{{ raise_exception('expected role ' + want + ' (roles must alternate "
    "user/assistant), got ' + m['role']) }}{%- endif -%}"
    "{%- if want == 'user' -%}"
    "{%- if m['content'] is not string -%}{{ raise_exception('user content must be a str') }}{%- endif -%}"
    "{{- '<|user_start|>' + m['content'] + '<|user_end|>' -}}"
    "{%- else -%}"
    "{{- '<|assistant_start|>' -}}"
    "{%- if m['content'] is string -%}"
    "{%- generation -%}{{- m['content'] -}}{%- endgeneration -%}"
    "{%- else -%}{%- for part in m['content'] -%}"
    "{%- if part['type'] == 'text' -%}{%- generation -%}{{- part['text'] -}}{%- endgeneration -%}"
    "{%- elif part['type'] == 'python' -%}"
    "{%- generation -%}{{- '<|python_start|>' + part['text'] + '<|python_end|>' -}}{%- endgeneration -%}"
    "{%- elif part['type'] == 'python_output' -%}{{- '<|output_start|>' + part['text'] + '<|output_end|>' -}}"
    "{%- else -%}{{ raise_exception('unknown content part type ' + part['type'] | string) }}"
    "{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- generation -%}{{- '<|assistant_end|>' -}}{%- endgeneration -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant_start|>' -}}{%- endif -%}"
)

# ANSI escapes used by visualize_tokenization.
_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_FG_TRAINED = "\x1b[32m"  # green: mask 1
_FG_CONTEXT = "\x1b[31m"  # red: mask 0
_BACKGROUNDS = ("\x1b[48;5;236m", "\x1b[48;5;239m")  # two greys, alternating per token
_PLAIN_SEPARATOR = "|"


class ChatMixin:
    """Conversation rendering for any tokenizer with nanochat's special tokens.

    Relies only on the host class's ``encode`` (called with ``allowed_special=()``:
    message text never becomes special ids), ``special_tokens``,
    ``get_bos_token_id``, ``id_to_bytes``/``id_to_token``.
    """

    if TYPE_CHECKING:  # the host class's members this mixin calls (Tokenizer has them)

        def encode(self, text: Any, *args: Any, **kwargs: Any) -> Any: ...
        @property
        def special_tokens(self) -> dict[str, int]: ...
        def id_to_token(self, id: int) -> str: ...
        def get_bos_token_id(self) -> int: ...

    # ---- rendering -----------------------------------------------------------
    def render_conversation(self, conversation: Any, max_tokens: int = 2048) -> tuple[list[int], list[int]]:
        """Tokenize a conversation for supervised fine-tuning.

        Returns ``(ids, mask)`` of equal length, both cut to ``max_tokens``; see
        the module docstring for the layout and mask values
        (:func:`conversation_parts` is the layout).
        """
        ids: list[int] = []
        mask: list[int] = []
        for part in conversation_parts(conversation):
            if part.kind == "bos":
                token_ids = [self._chat_bos_id()]
            elif part.kind == "special":
                token_ids = [self._chat_special(part.text)]
            else:
                token_ids = self.encode(part.text, allowed_special=())
            ids.extend(token_ids)
            mask.extend([part.mask] * len(token_ids))
        return ids[:max_tokens], mask[:max_tokens]

    def render_for_completion(self, conversation: Any, max_tokens: int = 2048) -> list[int]:
        """Ids of a prompt that asks the model for the next assistant turn.

        The conversation must end with an assistant message; that message is
        dropped (the caller's conversation is not modified), the rest is
        rendered, and ``<|assistant_start|>`` is appended.
        """
        conversation = copy.deepcopy(conversation)
        messages = conversation["messages"] if isinstance(conversation, dict) else conversation
        if not isinstance(messages, list) or not messages:
            raise TokenforgeError("render_for_completion needs a non-empty list of messages")
        last = messages[-1]
        role = last.get("role") if isinstance(last, dict) else None
        if role != "assistant":
            raise TokenforgeError(
                f"render_for_completion: the last message (index {len(messages) - 1}) must be from the "
                f"assistant, got role {role!r}"
            )
        messages.pop()
        ids, _ = self.render_conversation(conversation, max_tokens=max_tokens)
        ids.append(self._chat_special("<|assistant_start|>"))
        return ids

    # ---- visualisation -------------------------------------------------------
    def visualize_tokenization(
        self, ids: Iterable[int], mask: Iterable[int] | None = None, *, color: bool = True
    ) -> str:
        """A string showing each token of ``ids`` (and its mask) for a terminal.

        With ``color``: tokens sit on alternating grey backgrounds so their
        boundaries show; with a mask, mask-1 tokens are green and mask-0 red;
        special tokens are bold. Without ``color``: plain text, tokens separated
        by ``|``, and with a mask every mask-1 token is wrapped in ``[...]``.
        Control characters appear escaped (``\\n``), and bytes that are not
        valid UTF-8 on their own as ``\\xNN``.
        """
        ids = [int(i) for i in ids]
        if mask is not None:
            mask = [int(m) for m in mask]
            if len(mask) != len(ids):
                raise TokenforgeError(f"mask has {len(mask)} entries but there are {len(ids)} ids")
        special_ids = set(self.special_tokens.values())
        pieces = []
        for k, token_id in enumerate(ids):
            text = self._visible_token(token_id)
            trained = None if mask is None else mask[k] == 1
            if not color:
                pieces.append(f"[{text}]" if trained else text)
                continue
            style = _BACKGROUNDS[k % 2]
            if trained is not None:
                style += _FG_TRAINED if trained else _FG_CONTEXT
            if token_id in special_ids:
                style += _BOLD
            pieces.append(f"{style}{text}{_RESET}")
        return ("" if color else _PLAIN_SEPARATOR).join(pieces)

    def _visible_token(self, token_id: int) -> str:
        """One token as printable text: control characters and stray bytes escaped."""
        id_to_bytes = getattr(self, "id_to_bytes", None)
        if id_to_bytes is not None:
            text = id_to_bytes(token_id).decode("utf-8", errors="backslashreplace")
        else:
            text = self.id_to_token(token_id)
        return "".join(_escape_char(c) for c in text)

    # ---- special-token lookup ------------------------------------------------
    def _chat_special(self, name: str) -> int:
        """The id of a chat special token, with an error that says what is missing."""
        table = self.special_tokens
        if name not in table:
            raise SpecialTokenError(
                f"this tokenizer has no {name} special token, which chat rendering needs; "
                f"give it nanochat's special tokens (tokenforge.chat.SPECIAL_TOKENS) when training or loading"
            )
        return table[name]

    def _chat_bos_id(self) -> int:
        try:
            return self.get_bos_token_id()
        except SpecialTokenError:
            raise SpecialTokenError(
                "this tokenizer has no <|bos|> special token, which chat rendering needs; "
                "give it nanochat's special tokens (tokenforge.chat.SPECIAL_TOKENS) when training or loading"
            ) from None


class ChatPart(NamedTuple):
    """One piece of a rendered conversation: ``kind`` "bos" (the tokenizer's BOS),
    "special" (``text`` names a chat special token) or "text" (``text`` is message
    text, encoded with special-token text kept as text); ``mask`` is its tokens'
    mask value."""

    kind: str
    text: str
    mask: int


def conversation_parts(conversation: Any) -> list[ChatPart]:
    """The layout of a conversation, before any tokenizer: the one rule
    :meth:`ChatMixin.render_conversation` encodes, and the playground's chat mode
    shows for tokenizers that lack some of the special tokens. Validates the
    conversation (errors name the caller's message index)."""
    messages, index_of = _normalize_messages(conversation)
    out = [ChatPart("bos", "<|bos|>", 0)]
    for pos, message in enumerate(messages):
        content = message.get("content")
        where = f"message {index_of[pos]}"
        if message["role"] == "user":
            if not isinstance(content, str):
                raise TokenforgeError(f"{where}: user content must be a str, not {type(content).__name__}")
            out += [ChatPart("special", "<|user_start|>", 0), ChatPart("text", content, 0)]
            out.append(ChatPart("special", "<|user_end|>", 0))
            continue
        out.append(ChatPart("special", "<|assistant_start|>", 0))
        if isinstance(content, str):
            out.append(ChatPart("text", content, 1))
        elif isinstance(content, list):
            for j, part in enumerate(content):
                out += _assistant_part(part, f"{where}, part {j}")
        else:
            raise TokenforgeError(
                f"{where}: assistant content must be a str or a list of parts, not {type(content).__name__}"
            )
        out.append(ChatPart("special", "<|assistant_end|>", 1))
    return out


def _assistant_part(part: Any, where: str) -> list[ChatPart]:
    """One part of a structured assistant message."""
    if not isinstance(part, dict):
        raise TokenforgeError(f"{where}: a content part must be a dict, not {type(part).__name__}")
    kind = part.get("type")
    text = part.get("text")
    if kind not in ("text", "python", "python_output"):
        raise TokenforgeError(
            f"{where}: unknown content part type {kind!r}; expected 'text', 'python' or 'python_output'"
        )
    if not isinstance(text, str):
        raise TokenforgeError(f"{where}: part 'text' must be a str, not {type(text).__name__}")
    if kind == "text":
        return [ChatPart("text", text, 1)]
    if kind == "python":
        return [
            ChatPart("special", "<|python_start|>", 1),
            ChatPart("text", text, 1),
            ChatPart("special", "<|python_end|>", 1),
        ]
    return [
        ChatPart("special", "<|output_start|>", 0),
        ChatPart("text", text, 0),
        ChatPart("special", "<|output_end|>", 0),
    ]


def special_token_list(special_tokens: object, *, or_dict: bool = False) -> list[str]:
    """The one reading of a family's ``special_tokens=`` argument as a list of
    texts: None is none, ``"nanochat"`` nanochat's :data:`SPECIAL_TOKENS`, a
    collection its texts in order (each checked by :func:`check_special_texts`,
    none listed twice); any other single str is a ``TypeError``. ``or_dict``:
    the family also takes a dict of text -> id (which the caller reads itself),
    as the message then says."""
    if special_tokens is None:
        return []
    if special_tokens == "nanochat":
        return list(SPECIAL_TOKENS)
    if isinstance(special_tokens, (str, bytes)) or not isinstance(special_tokens, Iterable):
        kinds = "a list of strings, a dict" if or_dict else "a list of strings"
        what = "a single string" if isinstance(special_tokens, str) else type(special_tokens).__name__
        raise TypeError(f"special_tokens must be {kinds}, 'nanochat' or None, not {what}")
    out = list(special_tokens)
    check_special_texts(out)
    seen: set[str] = set()
    for s in out:
        if s in seen:
            raise SpecialTokenError(f"special token {s!r} is listed twice")
        seen.add(s)
    return out


def check_special_texts(texts: list) -> None:
    """Every special token of a list a caller gives is a non-empty str of
    encodable text (no lone surrogate: a token is stored and matched as UTF-8);
    else a SpecialTokenError naming its index."""
    for i, s in enumerate(texts):
        if not isinstance(s, str) or not s:
            raise SpecialTokenError(f"special_tokens[{i}] must be a non-empty string, not {s!r}")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SpecialTokenError(
                f"special_tokens[{i}] {s!r} holds a lone surrogate ({s[e.start]!r} at character {e.start}), "
                "which is not text that can be stored or matched as UTF-8"
            ) from None


def _escape_char(c: str) -> str:
    """Printable characters pass; control characters become escapes (``\\n``, ``\\x00``)."""
    if c.isprintable():
        return c
    return c.encode("unicode_escape").decode("ascii")


def _normalize_messages(conversation: Any) -> tuple[list[dict], list[int]]:
    """Validate a conversation; fold a leading system message into the first user turn.

    Returns the messages to render (a copy where anything was changed) and, for
    each, its index in the caller's list, so errors name the caller's index.
    """
    if isinstance(conversation, dict):
        if "messages" not in conversation:
            raise TokenforgeError("a conversation is a dict with a 'messages' list (or the list itself)")
        messages = conversation["messages"]
    else:
        messages = conversation
    if not isinstance(messages, list):
        raise TokenforgeError(f"conversation messages must be a list, not {type(messages).__name__}")
    if not messages:
        raise TokenforgeError("conversation has no messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise TokenforgeError(f"message {i} must be a dict with 'role' and 'content'")
    index_of = list(range(len(messages)))
    if messages[0]["role"] == "system":
        if len(messages) < 2 or messages[1]["role"] != "user":
            raise TokenforgeError("message 1: a system message must be followed by a user message")
        system, first = messages[0].get("content"), messages[1].get("content")
        if not isinstance(system, str) or not isinstance(first, str):
            raise TokenforgeError("messages 0 and 1: system and user content must be str")
        merged = dict(messages[1], content=system + "\n\n" + first)
        messages = [merged] + messages[2:]
        index_of = index_of[1:]
    for pos, m in enumerate(messages):
        expected = "user" if pos % 2 == 0 else "assistant"
        if m["role"] != expected:
            raise TokenforgeError(
                f"message {index_of[pos]}: expected role {expected!r} (roles must alternate user/assistant), "
                f"got {m['role']!r}"
            )
    return messages, index_of
