"""``tokenforge demo``: train on the built-in corpus and show what came out.

The built-in corpus is text every Python installation ships (the standard
library's documentation topics and its source files), read in place: no
download, no data file. One document in ten is held out to measure
compression on text the tokenizer did not see.

Part 1 trains one BPE tokenizer and shows it. Part 2 is a small comparison
(:func:`tokenforge.eval.compare.run_compare`): every tokenizer family this
tokenforge has (BPE; LZ78 frequency-gated with and without chunking;
mixedgram; the growing vocabulary) at 1,024, 4,096 and 8,192 ids on held-out
compression, and, at 4,096 ids, the bits per byte of a tiny GPT (2 layers ×
64 wide, 0.5 MB of training text, :data:`DEMO_SEEDS` seeds). It writes the
report (Markdown, HTML, PNG plots) beside the tokenizer and takes a few
minutes on 2 cores; ``tokenforge compare`` runs the full-size version.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

from ..registry import DEMO_SPECS


def _split(docs: Iterable[str]) -> tuple[list[str], list[str]]:
    train: list[str] = []
    held: list[str] = []
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


def run_demo(args: argparse.Namespace) -> int:
    from ..bpe import BPETokenizer
    from ..data.default_corpus import default_corpus_info, iter_default_corpus
    from .stats import vocabulary_stats

    color = not args.no_color and sys.stdout.isatty()
    max_bytes = None if args.max_mb is None else int(args.max_mb * 1e6)
    info = default_corpus_info()
    print(
        f"built-in corpus: {info['num_documents']} documents from Python {sys.version.split()[0]}'s "
        f"standard library (docs topics + sources), {info['total_bytes'] / 1e6:.1f} MB, read in place"
    )
    docs = list(iter_default_corpus(max_bytes=max_bytes))
    train, held = _split(docs)
    train_mb = sum(len(d.encode()) for d in train) / 1e6
    print(f"training on {len(train)} documents ({train_mb:.1f} MB), holding out {len(held)}")

    t0 = time.perf_counter()
    tok = BPETokenizer.train_from_iterator(train, args.vocab_size, num_threads=args.threads, progress=True)
    dt = time.perf_counter() - t0
    print(f"\ntrained {tok!r} in {dt:.2f} s ({train_mb / dt:.1f} MB/s)")

    held_text = "".join(held)
    t0 = time.perf_counter()
    ids = tok.encode_ordinary(held_text)
    et = time.perf_counter() - t0
    nbytes = len(held_text.encode())
    print(
        f"held-out text: {nbytes / 1e6:.2f} MB -> {len(ids):,} tokens = {nbytes / len(ids):.2f} bytes per token "
        f"(encoded at {nbytes / 1e6 / et:.1f} MB/s on one thread)"
    )
    assert_roundtrip = tok.decode(ids) == held_text
    print(f"decode(encode(held-out)) == held-out: {assert_roundtrip}")

    stats = vocabulary_stats(tok, top=12)
    print(
        f"vocabulary: {stats['vocab_size']:,} ids ({stats['special_tokens']} special), "
        f"mean token length {stats['byte_length_mean']:.2f} bytes, "
        f"{stats['tokens_not_valid_utf8_alone']} tokens are not valid UTF-8 on their own"
    )
    print("longest tokens:", ", ".join(repr(t) for _, t in stats["longest_tokens"]))

    sample = 'def greet(name: str) -> str:\n    """Return a friendly greeting."""\n    return f"Hello, {name}!"\n'
    print("\na sample, one colour per token:")
    print(tok.visualize_tokenization(tok.encode(sample), color=color))
    ids, mask = tok.render_conversation(SAMPLE_CHAT)
    print(f"\na chat rendered for fine-tuning ({len(ids)} tokens; green = trained on, red = masked):")
    print(tok.visualize_tokenization(ids, mask, color=color))

    out = Path(args.out)
    tok.save(out)
    print(
        f"\nsaved to {out}/ (tokenforge.json and a readable tokenforge.vocab.txt); "
        f"try: tokenforge inspect {out} --text <file>"
    )
    if not assert_roundtrip:
        return 1
    return run_demo_comparison(args, out)


#: what the comparison part compares (families this tokenforge lacks are skipped)
DEMO_FAMILIES = DEMO_SPECS  # each built-in family's record says its own
DEMO_VOCAB_SIZES = [1024, 4096, 8192]
DEMO_BPB_VOCAB = 4096
DEMO_TRAIN_MB = 4.0


def _demo_command(args: argparse.Namespace) -> str:
    import shlex

    parts = ["tokenforge", "demo"]
    for flag, value, default in (
        ("--vocab-size", args.vocab_size, 8192),
        ("--max-mb", args.max_mb, None),
        ("--out", args.out, "reports/demo"),
        ("--threads", args.threads, None),
        ("--families", getattr(args, "families", None), None),
        ("--seeds", getattr(args, "seeds", 2), 2),
    ):
        if value != default:
            parts += [flag, str(value)]
    if getattr(args, "no_bpb", False):
        parts.append("--no-bpb")
    return shlex.join(parts)


def run_demo_comparison(args: argparse.Namespace, out: Path) -> int:
    """Part 2: the small comparison, written to ``out/report.html``."""
    from ..eval.bpb import BPBConfig
    from ..eval.compare import CompareOptions, run_compare
    from ..eval.report import bpb_table, compression_table

    bpb = not getattr(args, "no_bpb", False)
    if bpb:
        try:
            import torch  # noqa: F401
        except ImportError:
            print(
                "\n(torch is not installed: the comparison measures compression only; "
                "pip install 'tokenforge[torch]' for bits per byte)"
            )
            bpb = False
    train_mb = DEMO_TRAIN_MB if args.max_mb is None else min(DEMO_TRAIN_MB, args.max_mb)
    seeds = list(range(max(1, getattr(args, "seeds", 2))))
    print(
        f"\n== a small comparison: {DEMO_FAMILIES.replace(',', ', ')} at "
        f"{', '.join(map(str, DEMO_VOCAB_SIZES))} ids, trained on {train_mb:g} MB"
        + (f"; bits per byte of a 2 x 64 GPT at {DEMO_BPB_VOCAB} ids, {len(seeds)} seeds" if bpb else "")
    )
    opts = CompareOptions(
        corpus=[],
        families=getattr(args, "families", None) or DEMO_FAMILIES,
        vocab_sizes=DEMO_VOCAB_SIZES,
        train_mb=train_mb,
        eval_mb=1.0,
        bpb=bpb,
        seeds=seeds,
        bpb_train_mb=0.5,
        bpb_eval_mb=0.2,
        bpb_vocab_sizes=[DEMO_BPB_VOCAB],
        bpb_config=BPBConfig(n_layer=2, n_head=2, n_embd=64, seq_len=128, batch_size=8, threads=args.threads),
        threads=args.threads,
        out=str(out),
        command=_demo_command(args),
        title="tokenforge demo: a small tokenizer comparison on the built-in corpus",
        log=lambda msg: print(msg, flush=True),
    )
    results = run_compare(opts)
    head, rows = compression_table(results)
    print()
    print(_plain_table(head, rows))
    if bpb:
        head, rows = bpb_table(results)
        print()
        print(_plain_table(head[:5], [r[:5] for r in rows]))
    for s in results["skipped"]:
        print(f"(skipped {s['spec']}: {s['reason']})")
    print(f"\nreport: {out}/report.html (and report.md, PNG plots, results.json)")
    return 0


def _plain_table(head: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    cells = [list(map(str, head))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
