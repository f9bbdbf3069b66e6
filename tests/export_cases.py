"""What the export tests (nanochat, transformers) share: a training/held-out split
of the built-in corpus and conversations that exercise every part of the chat
rendering (a system message, several turns, tool parts, an empty python part).

Not handled: anything large; the tests train 1,500-id tokenizers on 200 documents.
"""

from __future__ import annotations

import itertools

from tokenforge.data.default_corpus import iter_default_corpus

_DOCS = list(itertools.islice(iter_default_corpus(), 260))
TRAIN, HELD_OUT = _DOCS[:200], _DOCS[200:]

#: message lists (wrap as {"messages": ...} for render_conversation)
CONVERSATIONS = [
    [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 12*12?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check. "},
                {"type": "python", "text": "print(12*12)"},
                {"type": "python_output", "text": "144\n"},
                {"type": "text", "text": "It is 144."},
            ],
        },
        {"role": "user", "content": "And 13*13, in words?"},
        {"role": "assistant", "content": "One hundred sixty-nine.\n\n  ünïcödé 中文 😀"},
    ],
    [
        {"role": "user", "content": "  leading spaces and trailing  \n"},
        {"role": "assistant", "content": [{"type": "python", "text": "x = 1\nprint(x)\n"}]},
        {"role": "user", "content": "ok"},
        {
            "role": "assistant",
            "content": [
                {"type": "python_output", "text": "1"},
                {"type": "text", "text": " done"},
                {"type": "python", "text": ""},
            ],
        },
    ],
]
