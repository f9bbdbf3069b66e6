"""Bits-per-byte harness timing: the default model, one tokenizer, a few MB of the bench corpus.

Usage::

    python bench/bpb.py                          # BPE at 8,192, 3 MB of train.jsonl, 0.5 MB held out, seeds 0,1,2
    python bench/bpb.py --spec lz78:frequency_gated --train-mb 2 --seeds 1
    python bench/bpb.py --lr 1e-3,3e-3,6e-3 --seeds 1 --train-mb 1     # a learning-rate sweep

For each seed it prints the wall time of training and of evaluation, the
BPB, and the machine's load average; at the end mean ± std and the
acceptance check (train + evaluate one tokenizer at 8,192 in <= 5 minutes on
2 cores). The tokenizer is trained on ``train_10mb.txt`` (cached with
bench/pretokenize.py's). Timings on a shared machine are noisy: the load
average and a 2-thread scaling calibration are printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BENCH_DIR, MB, CorpusMissing, corpus_path  # noqa: E402
from pretokenize import _tokenizer, calibrate  # noqa: E402

RESULTS = BENCH_DIR / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="bpe")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--train-mb", type=float, default=3.0)
    ap.add_argument("--eval-mb", type=float, default=0.5)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--embedding", default="flat")
    ap.add_argument("--lr", default=None, help="one learning rate, or a comma-separated sweep")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--epochs", type=float, default=None)
    args = ap.parse_args()

    import tokenforge
    from tokenforge.data.corpus import iter_documents
    from tokenforge.eval.bpb import BPBConfig, run_bpb, select_documents, summarize

    try:
        train = select_documents(iter_documents(corpus_path("train.jsonl")), int(args.train_mb * MB))
        held = select_documents(iter_documents(corpus_path("heldout.jsonl")), int(args.eval_mb * MB))
    except CorpusMissing as e:
        print(e, file=sys.stderr)
        return 1
    tok = tokenforge.load(_tokenizer(args.spec, args.vocab))
    print(
        f"{args.spec} at {args.vocab}: {type(tok).__name__} with {tok.vocab_size} ids; "
        f"training text {args.train_mb:g} MB ({len(train)} documents), held out {args.eval_mb:g} MB"
    )
    cal = calibrate(2)["scaling"]
    print(
        f"machine: 2 threads do {cal:.2f}x the work of one right now (2.0 = two free cores); "
        f"load average {os.getloadavg()}"
    )
    lrs = [None] if args.lr is None else [float(x) for x in args.lr.split(",")]
    report = {
        "spec": args.spec,
        "vocab": args.vocab,
        "train_mb": args.train_mb,
        "eval_mb": args.eval_mb,
        "machine_scaling": cal,
        "runs": [],
        "argv": sys.argv[1:],
    }
    for lr in lrs:
        cfg = BPBConfig(threads=args.threads, embedding=args.embedding)
        if lr is not None:
            cfg.lr = lr
        for key in ("batch_size", "seq_len", "epochs"):
            if getattr(args, key) is not None:
                setattr(cfg, key, getattr(args, key))
        with tempfile.TemporaryDirectory(prefix="tf-bpb-") as tmp:
            t0 = time.perf_counter()
            res = run_bpb(tok, train, held, Path(tmp), cfg=cfg, seeds=range(args.seeds), num_threads=args.threads)
            wall = time.perf_counter() - t0
        for r in res["runs"]:
            total = r["train_seconds"] + r["eval_seconds"]
            print(
                f"lr {cfg.lr:g} seed {r['seed']}: BPB {r['bpb']:.4f}; {r['steps']} steps on {r['train_tokens']:,} tokens: "
                f"train {r['train_seconds']:.0f} s + eval {r['eval_seconds']:.0f} s = {total:.0f} s "
                f"({'PASS' if total <= 300 else 'FAIL'} <= 300 s); load {r['loadavg']}"
            )
        s = summarize([r["bpb"] for r in res["runs"]])
        print(
            f"lr {cfg.lr:g}: BPB {s['mean']:.4f} ± {s['std']:.4f} over {s['n']} seeds; whole run {wall:.0f} s "
            f"(pretokenizing included); blocks {res['runs'][0]['params_blocks']:,} parameters"
        )
        report["runs"].append(
            {"config": cfg.to_dict(), "lr": cfg.lr, "bpb": s, "wall_seconds": wall, "per_seed": res["runs"]}
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"bpb_{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=1))
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
