"""``tokenforge demo``: train on the built-in corpus and show what came out.

The built-in corpus is text every Python installation ships (the standard
library's documentation topics and its source files), read in place: no
download, no data file. One document in ten is held out to measure
compression on text the tokenizer did not see.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def _split(docs):
    train, held = [], []
    for i, d in enumerate(docs):
        (held if i % 10 == 9 else train).append(d)
    return train, held


SAMPLE_CHAT = {
    "messages": [
        {"role": "user", "content": "What is 12 * 34?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me compute that."},
                {"type": "python", "text": "12 * 34"},
                {"type": "python_output", "text": "408"},
                {"type": "text", "text": "It is 408."},
            ],
        },
    ]
}


def run_demo(args) -> int:
    from .. import BPETokenizer
    from ..data.default_corpus import default_corpus_info, iter_default_corpus
    from .main import vocabulary_stats

    color = not args.no_color and sys.stdout.isatty()
    max_bytes = None if args.max_mb is None else int(args.max_mb * 1e6)
    info = default_corpus_info()
    print(f"built-in corpus: {info['num_documents']} documents from Python {sys.version.split()[0]}'s "
          f"standard library (docs topics + sources), {info['total_bytes'] / 1e6:.1f} MB, read in place")
    docs = list(iter_default_corpus(max_bytes=max_bytes))
    train, held = _split(docs)
    train_mb = sum(len(d.encode()) for d in train) / 1e6
    print(f"training on {len(train)} documents ({train_mb:.1f} MB), holding out {len(held)}")

    t0 = time.perf_counter()
    tok = BPETokenizer.train(train, args.vocab_size, num_threads=args.threads, progress=True)
    dt = time.perf_counter() - t0
    print(f"\ntrained {tok!r} in {dt:.2f} s ({train_mb / dt:.1f} MB/s)")

    held_text = "".join(held)
    t0 = time.perf_counter()
    ids = tok.encode_ordinary(held_text)
    et = time.perf_counter() - t0
    nbytes = len(held_text.encode())
    print(f"held-out text: {nbytes / 1e6:.2f} MB -> {len(ids):,} tokens = {nbytes / len(ids):.2f} bytes per token "
          f"(encoded at {nbytes / 1e6 / et:.1f} MB/s on one thread)")
    assert_roundtrip = tok.decode(ids) == held_text
    print(f"decode(encode(held-out)) == held-out: {assert_roundtrip}")

    stats = vocabulary_stats(tok, top=12)
    print(f"vocabulary: {stats['vocab_size']:,} ids ({stats['special_tokens']} special), "
          f"mean token length {stats['byte_length_mean']:.2f} bytes, "
          f"{stats['tokens_not_valid_utf8_alone']} tokens are not valid UTF-8 on their own")
    print("longest tokens:", ", ".join(repr(t) for _, t in stats["longest_tokens"]))

    sample = 'def greet(name: str) -> str:\n    """Return a friendly greeting."""\n    return f"Hello, {name}!"\n'
    print("\na sample, one colour per token:")
    print(tok.visualize_tokenization(tok.encode(sample), color=color))
    ids, mask = tok.render_conversation(SAMPLE_CHAT)
    print(f"\na chat rendered for fine-tuning ({len(ids)} tokens; green = trained on, red = masked):")
    print(tok.visualize_tokenization(ids, mask, color=color))

    out = Path(args.out)
    tok.save(out)
    print(f"\nsaved to {out}/ (tokenforge.json and a readable tokenforge.vocab.txt); "
          f"try: tokenforge inspect {out} --text <file>")
    return 0 if assert_roundtrip else 1
