#!/usr/bin/env python3
"""Benchmark: growing a trained model's vocabulary, ``init="parts"`` against ``init="normal"`` (issue 16, item 4).

    python bench/growth.py [--corpus DIR] [--seeds 3] [--merges-a 500] [--merges-b 300]
                           [--base-steps 400] [--after-steps 100] [--threads 1]

1. Two sources from the benchmark corpus (``bench/build_corpus.py``'s
   ``train.jsonl`` / ``heldout.jsonl``; also looked for in
   ``/work/main/bench/data/corpus``): **A** = the documentation (every package
   but the Python standard library), **B** = the Python standard library's
   source code. A growing vocabulary (:class:`tokenforge.GrowingBPETokenizer`)
   learns ``--merges-a`` merges from A.
2. Per seed, a small :class:`tokenforge.torch.GPT` (flat embedding, 2 layers,
   width 64, 4 heads, 64-token windows) trains ``--base-steps`` steps on A with
   that vocabulary.
3. The vocabulary learns ``--merges-b`` more merges from B (``learn_merges``,
   old ids unchanged). The model is copied twice and each copy grown with
   :func:`tokenforge.torch.expand_vocabulary` to the new size, once with
   ``init="parts"`` (mean of the merge parts' rows at the median norm) and once
   with ``init="normal"`` (N(0, 0.02)); a third copy, ``parts-emb``, takes
   the parts rule for the input embedding only and N(0, 0.02) for the output
   head's new rows (is the head's parts row what costs right after growth?).
4. Held-out bits per byte on B (held-out documents of the Python stdlib,
   encoded with the grown vocabulary) right after growth, and after
   ``--after-steps`` further steps of training on B (AdamW, the same schedule
   for both copies); held-out BPB on A right after growth too (what growth
   costs the old source). The model before growth, scored with the old
   vocabulary, is the reference row.

Everything runs on the CPU with ``--threads`` torch threads (default 1: on a
shared 2-core machine two threads ran eight times slower than one) and
takes a few minutes. The table gives mean ± sample standard deviation over the
seeds; the JSON goes to ``bench/results/growth.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "python"))

from tokenforge import GrowingBPETokenizer  # noqa: E402
from tokenforge.eval.bpb import bits_per_byte, text_bytes_seen  # noqa: E402

RESULTS = BENCH_DIR / "results" / "growth.json"
CODE_SOURCE = "python3.11-stdlib"


def _corpus_dir(arg: str | None) -> Path:
    dirs = [Path(arg)] if arg else [BENCH_DIR / "data" / "corpus", Path("/work/main/bench/data/corpus")]
    for d in dirs:
        if (d / "train.jsonl").is_file() and (d / "heldout.jsonl").is_file():
            return d
    sys.exit(f"no corpus in {', '.join(map(str, dirs))}: run python bench/build_corpus.py first")


def _split(path: Path, budget_a: int, budget_b: int) -> tuple[list[str], list[str]]:
    """Documents of A and of B, each up to its budget of UTF-8 bytes (in file order)."""
    a, b, na, nb = [], [], 0, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            is_b = d["source"].split(":", 1)[0] == CODE_SOURCE
            n = len(d["text"].encode("utf-8"))
            if is_b and nb < budget_b:
                b.append(d["text"])
                nb += n
            elif not is_b and na < budget_a:
                a.append(d["text"])
                na += n
            if na >= budget_a and nb >= budget_b:
                break
    return a, b


def _streams(tok, docs: list[str]) -> list[np.ndarray]:
    """One int64 stream per document: BOS, then its ids."""
    ids, off = tok.encode_batch_flat(docs)
    bos = np.array([tok.special_tokens["<|bos|>"]], np.int64)
    return [np.concatenate([bos, ids[off[k] : off[k + 1]].astype(np.int64)]) for k in range(len(docs))]


def _stream(tok, docs: list[str]) -> np.ndarray:
    return np.concatenate(_streams(tok, docs))


def _bpb(model, tok, docs: list[str], seq_len: int) -> float:
    import torch

    streams = _streams(tok, docs)
    model.eval()
    with torch.no_grad():
        r = bits_per_byte(
            lambda x, y: model.token_nll(torch.from_numpy(x), torch.from_numpy(y)),
            streams,
            tok.token_bytes(),
            list(tok.special_tokens.values()),
            seq_len=seq_len,
            batch_size=32,
            expected_bytes=text_bytes_seen(tok, docs),
        )
    return r["bpb"]


def _train(model, stream: np.ndarray, steps: int, *, lr: float, batch: int, seq_len: int, seed: int) -> None:
    import torch

    g = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = max(1, steps // 20)
    model.train()
    for step in range(steps):
        f = min(1.0, (step + 1) / warm) * 0.5 * (1 + np.cos(np.pi * step / steps))
        for group in opt.param_groups:
            group["lr"] = lr * max(f, 0.1)
        starts = g.integers(0, len(stream) - seq_len - 1, size=batch)
        block = np.stack([stream[s : s + seq_len + 1] for s in starts])
        x, y = torch.from_numpy(block[:, :-1]), torch.from_numpy(block[:, 1:])
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="directory with train.jsonl and heldout.jsonl")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--merges-a", type=int, default=500)
    ap.add_argument("--merges-b", type=int, default=300)
    ap.add_argument("--train-mb", type=float, default=2.0, help="MB of each source to learn and train from")
    ap.add_argument("--heldout-kb", type=int, default=150, help="KB of held-out text per source")
    ap.add_argument("--base-steps", type=int, default=400)
    ap.add_argument("--after-steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: a loaded 2-core machine runs 2 threads ~8x slower)"
    )
    args = ap.parse_args(argv)

    import torch

    from tokenforge.torch import GPT, GPTConfig, expand_vocabulary

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    d = _corpus_dir(args.corpus)
    budget = int(args.train_mb * 1e6)
    train_a, train_b = _split(d / "train.jsonl", budget, budget)
    held_a, held_b = _split(d / "heldout.jsonl", args.heldout_kb * 1000, args.heldout_kb * 1000)
    old = GrowingBPETokenizer()
    old.learn_merges(iter(train_a), args.merges_a, source="A", progress=False)
    grown = copy.deepcopy(old)
    grown.learn_merges(iter(train_b), args.merges_b, source="B", progress=False)
    n0, n1 = old.current_vocab_size, grown.current_vocab_size
    parts = grown.merge_parts()
    deep = sum(1 for i in range(n0, n1) if max(parts[i]) >= n0)
    print(
        f"corpus {d}: A {sum(map(len, train_a)) / 1e6:.1f} MB docs, B {sum(map(len, train_b)) / 1e6:.1f} MB code; "
        f"held out {len(held_a)} + {len(held_b)} docs; vocabulary {n0} -> {n1} ids ({deep} new merges "
        f"build on new tokens); tokens/byte on held-out B: {len(_stream(old, held_b)) / sum(map(len, held_b)):.3f} "
        f"-> {len(_stream(grown, held_b)) / sum(map(len, held_b)):.3f}",
        flush=True,
    )
    stream_a = _stream(old, train_a)
    stream_b = _stream(grown, train_b)
    kw = dict(lr=args.lr, batch=args.batch, seq_len=args.seq_len)
    rows: dict[str, list[float]] = {}

    def add(name, v):
        rows.setdefault(name, []).append(v)

    for seed in range(args.seeds):
        torch.manual_seed(seed)
        cfg = GPTConfig(vocab_size=n0, n_layer=2, n_head=4, n_embd=64, seq_len=args.seq_len)
        base = GPT(cfg)
        _train(base, stream_a, args.base_steps, seed=seed, **kw)
        add("before growth: B (old vocabulary)", _bpb(base, old, held_b, args.seq_len))
        add("before growth: A (old vocabulary)", _bpb(base, old, held_a, args.seq_len))
        for init in ("parts", "normal", "parts-emb"):
            m = copy.deepcopy(base)
            g = torch.Generator().manual_seed(seed)
            # parts-emb: parts for the input rows only, the head's new rows N(0, 0.02)
            head_init = "normal" if init == "parts-emb" else None
            expand_vocabulary(
                m, n1, chunk=1, init=init.split("-")[0], head_init=head_init, tokenizer=grown, generator=g
            )
            add(f"{init}: B right after growth", _bpb(m, grown, held_b, args.seq_len))
            add(f"{init}: A right after growth", _bpb(m, grown, held_a, args.seq_len))
            _train(m, stream_b, args.after_steps, seed=1000 + seed, **kw)
            add(f"{init}: B after {args.after_steps} steps on B", _bpb(m, grown, held_b, args.seq_len))
            add(f"{init}: A after {args.after_steps} steps on B", _bpb(m, grown, held_a, args.seq_len))
        print(f"seed {seed} done ({time.perf_counter() - t0:.0f} s)", flush=True)

    width = max(map(len, rows)) + 2
    print(f"\nheld-out bits per byte, mean ± std over {args.seeds} seeds (lower is better)")
    print(f"{'':<{width}}{'BPB':>18}")
    order = sorted(rows, key=lambda k: (not k.startswith("before"), k.split(":")[1], k.split(":")[0]))
    for k in order:
        v = rows[k]
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        print(f"{k:<{width}}{statistics.fmean(v):>10.4f} ± {sd:.4f}")
    print(f"\n{time.perf_counter() - t0:.0f} s in all")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"args": vars(args), "vocab": [n0, n1], "bpb": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
