"""Training with ``pattern=None`` (whole documents are the sequences) must stay
near-linear in the corpus. Trains the same number of merges on 2, 4, 8 and 16 MB
of bench-corpus documents and prints time per MB; a quadratic trainer would
double its time per MB at every step.

    python bench/bpe_whole_docs.py [--merges 4000]
"""

from __future__ import annotations

import argparse
import time

from common import load_docs  # bench/ is the script's directory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--merges", type=int, default=4000)
    ap.add_argument("--sizes", default="2,4,8,16")
    args = ap.parse_args()
    import tokenforge

    docs = load_docs("train", mb=max(float(x) for x in args.sizes.split(",")) + 1)
    print(f"{'MB':>5} {'seconds':>8} {'s per MB':>9}")
    for mb in (float(x) for x in args.sizes.split(",")):
        sub, n = [], 0
        for d in docs:
            if n >= mb * 1e6:
                break
            sub.append(d)
            n += len(d.encode())
        t = time.perf_counter()
        tokenforge.BPETokenizer.train_from_iterator(
            sub, 256 + args.merges, pattern=None, special_tokens=None, progress=False
        )
        dt = time.perf_counter() - t
        print(f"{n / 1e6:5.1f} {dt:8.2f} {dt / (n / 1e6):9.3f}")


if __name__ == "__main__":
    main()
