"""Doubling-merge files: does a small file that describes a 2^k-byte token cost 2^k?

A BPE merge's token is its parents' bytes; k merges that each join the last
token with itself describe a token of 2^k bytes in a file of a few KB, with
small ids and a valid checksum. Issue 32 item 8: every reader sums the tokens'
lengths from the merge table before building anything and refuses a total
past ``token_bytes_limit`` of the file (16 MiB at least, 64 bytes per file
byte, at most 1 GiB). For k = 20 ... 40 this script writes such a file in
each format that takes merges (tokenforge-bpe JSON, growing tokenizer.json,
and the same growing file through ``sync``), loads it in a fresh process
under an address-space cap (``--cap-gb``, default 6) and prints one row per
k: the outcome (``loaded`` / ``refused`` / ``killed``), the time and the peak
resident memory of the child. Not a test; no pass/fail, only numbers::

    python bench/doubling.py                 # k = 20..40
    python bench/doubling.py --ks 20,25,29,30,40 --cap-gb 6

Not handled: other families (LZ78's dictionary entries are explicit, mixedgram's
n-grams are at most 8 bytes); the time of the writers.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

FORMATS = ("tokenforge-bpe", "growing", "growing sync")

CHILD = r"""
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
import tokenforge
from tokenforge.errors import TokenforgeError
t0 = time.perf_counter()
try:
    if kind == "growing sync":
        tok = tokenforge.GrowingBPETokenizer(vocab_size=1 << 20)
        tok.sync(path, max_bytes=1 << 20, timeout=3)
    else:
        tokenforge.load(path)
    outcome = "loaded"
except TokenforgeError as e:
    outcome = "refused: " + type(e).__name__
dt = time.perf_counter() - t0
print(json.dumps({"outcome": outcome, "seconds": dt, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write(kind: str, k: int, directory: Path) -> Path:
    from tokenforge import GrowingBPETokenizer
    from tokenforge.formats.bpe_data import BPEData
    from tokenforge.formats.growing_json import BYTE_OFFSET, MERGE_OFFSET, GrowingData, growing_json_text
    from tokenforge.formats.tfjson import tfjson_text

    if kind == "tokenforge-bpe":
        merges = [(97, 97, 256)] + [(255 + j, 255 + j, 256 + j) for j in range(1, k)]
        text = tfjson_text(BPEData(list(range(256)), merges, {}, None, "none"))
    else:
        a = BYTE_OFFSET + 97
        pairs = [(a, a)] + [(MERGE_OFFSET + j - 1, MERGE_OFFSET + j - 1) for j in range(1, k)]
        # the sync's remote has the local tokenizer's (default) pattern, so that only its size can refuse it
        pattern = GrowingBPETokenizer().pattern if kind == "growing sync" else None
        text = growing_json_text(GrowingData(pairs=pairs, vocab_size=MERGE_OFFSET + k + 10, pattern=pattern))
    path = directory / f"{kind.replace(' ', '_')}_{k}.json"
    path.write_text(text, encoding="utf-8")
    return path


def run(kind: str, path: Path, cap: int, timeout: float) -> dict:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    try:
        p = subprocess.run(
            [sys.executable, "-c", CHILD, kind, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"hung (> {timeout:.0f} s)", "seconds": timeout, "peak_mb": float("nan")}
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1][:60]
        return {"outcome": f"killed ({p.returncode}: {last})", "seconds": float("nan"), "peak_mb": float("nan")}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default=",".join(str(k) for k in range(20, 41)), help="merge counts, comma-separated")
    ap.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of each child (GB)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a child counts as hung")
    args = ap.parse_args()
    cap = int(args.cap_gb * 2**30)
    print(f"{'format':<16} {'k':>3} {'file B':>7} {'longest token':>14}  {'outcome':<28} {'s':>7} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in FORMATS:
            for k in (int(x) for x in args.ks.split(",")):
                path = write(kind, k, Path(tmp))
                r = run(kind, path, cap, args.timeout)
                size = path.stat().st_size
                print(
                    f"{kind:<16} {k:>3} {size:>7} {2**k:>14,}  {r['outcome']:<28} {r['seconds']:>7.3f} "
                    f"{r['peak_mb']:>8.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
