"""The stable-ABI (abi3) build against the per-version build: lists of ids as fast?

Builds the extension twice from this checkout -- ``--features abi3`` (the
default build: one wheel for every CPython >= 3.10) and ``--features python``
(the per-version build, for this interpreter only) -- each into a target
directory of its own under ``bench/data/abi3/`` (git-ignored; the first run
compiles the dependencies, later runs only the crate), lays each beside a copy
of the Python package, and times the same calls in a child process per build,
alternating the two for ``--rounds`` rounds (best of each):

* ``encode_ordinary`` returning a list, on cl100k (the rank file ``bpe-openai``
  ships) over English prose and code from the built-in corpus, one text at a time;
* ``encode_batch`` returning lists, 1 and 2 threads (4 KB texts);
* ``encode_batch(as_numpy=True)``: no Python objects per id (the control).

It prints MB/s per build and the ratio abi3 / per-version (1.00 = equal).
On a shared, busy machine wall times swing by tens of percent between runs;
``--callgrind`` counts instructions instead (valgrind, one text of ``--mb``
encoded twice after a warm-up, minus the same run without the encoding), which
no other load changes, and prints instructions per byte for each call.
Since the abi3 build checks at import that the running CPython lays out its
lists as 3.10-3.14 do and then builds them the same way as the per-version
build (``src/py/mod.rs``, ``check_list_layout``), the ratios should sit at 1
within noise.

Usage: ``python bench/abi3.py [--rounds 5] [--mb 8] [--callgrind]``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / "data" / "abi3"
VARIANTS = {
    "abi3": ("abi3", "_core.abi3.so"),
    "per-version": ("python", "_core" + sysconfig.get_config_var("EXT_SUFFIX")),
}


def build(name: str) -> Path:
    """cargo build of one variant; returns the directory to put on PYTHONPATH."""
    feature, so_name = VARIANTS[name]
    target = WORK / f"target-{name}"
    env = dict(os.environ, PYO3_PYTHON=sys.executable, CARGO_TARGET_DIR=str(target))
    t0 = time.perf_counter()
    subprocess.run(["cargo", "build", "--release", "--lib", "--features", feature], cwd=ROOT, env=env, check=True)
    print(f"built {name} in {time.perf_counter() - t0:.0f} s", flush=True)
    site = WORK / f"site-{name}"
    pkg = site / "tokenforge"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(ROOT / "python" / "tokenforge", pkg, ignore=shutil.ignore_patterns("_core*.so", "__pycache__"))
    shutil.copy2(target / "release" / "libtokenforge.so", pkg / so_name)
    return site


def rank_file() -> Path:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bpe-openai is not installed (pip install bpe-openai): it ships the cl100k rank file")
    src = Path(list(spec.submodule_search_locations)[0]) / "data" / "cl100k_base.tiktoken.gz"
    dst = WORK / "cl100k_base.tiktoken"
    if not dst.exists():
        dst.write_bytes(gzip.decompress(src.read_bytes()))
    return dst


#: what both kinds of child do first: load the text and the tokenizer, warm
#: every piece and every int, and name the calls measured
SETUP = r"""
import json, sys, time
import tokenforge
from tokenforge.data.default_corpus import iter_default_corpus
site, ranks, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
if not tokenforge._core.__file__.startswith(site):
    sys.exit(f"imported the wrong build: {tokenforge._core.__file__}")
text = ""
for doc in iter_default_corpus():
    text += doc
    if len(text) > mb * 1e6:
        break
docs = [text[i : i + 4096] for i in range(0, len(text), 4096)]
tok = tokenforge.BPETokenizer.from_tiktoken(ranks, pattern="cl100k")
nbytes = len(text.encode())
tok.encode_batch(docs, num_threads=2)  # warm: every piece and every int met once
tok.encode_batch(docs, num_threads=1, as_numpy=True)
runs = {
    "encode_ordinary (list)": lambda: [tok.encode_ordinary(d) for d in docs],
    "encode_batch lists, 1 thread": lambda: tok.encode_batch(docs, num_threads=1),
    "encode_batch lists, 2 threads": lambda: tok.encode_batch(docs, num_threads=2),
    "encode_batch numpy, 1 thread": lambda: tok.encode_batch(docs, num_threads=1, as_numpy=True),
}
"""

CHILD = (
    SETUP
    + r"""
best = {}
for _ in range(3):
    for k, f in runs.items():
        t0 = time.perf_counter(); out = f(); dt = time.perf_counter() - t0
        del out
        best[k] = min(best.get(k, 1e9), dt)
print(json.dumps({k: nbytes / 1e6 / v for k, v in best.items()}))
"""
)


def measure(site: Path, ranks: Path, mb: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(site), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(site), str(ranks), str(mb)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=WORK,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


CG_CHILD = (
    SETUP
    + r"""
mode, n = sys.argv[4], int(sys.argv[5])
print(nbytes, tokenforge._core.lists_built_inline())
for _ in range(n):
    out = runs[mode]()
    del out
"""
)
CG_MODES = ("encode_ordinary (list)", "encode_batch lists, 1 thread", "encode_batch numpy, 1 thread")


def callgrind(site: Path, ranks: Path, mb: float, mode: str, n: int) -> tuple[int, int, bool]:
    """(instructions, text bytes, lists built inline) of one child under callgrind."""
    out_file = WORK / "callgrind.out"
    env = dict(os.environ, PYTHONPATH=str(site), OPENBLAS_NUM_THREADS="1")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", sys.executable, "-c", CG_CHILD]
        + [str(site), str(ranks), str(mb), mode, str(n)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=WORK,
    )
    nbytes, inline = run.stdout.split()
    totals = [line for line in out_file.read_text().splitlines() if line.startswith(("summary:", "totals:"))]
    return int(totals[-1].split()[1]), int(nbytes), inline == "True"


def main_callgrind(sites: dict[str, Path], ranks: Path, mb: float) -> None:
    print(f"\ncl100k, {mb:g} MB of the built-in corpus as 4 KB texts, encoded twice: instructions per byte")
    print(f"{'call':34s} {'per-version':>12s} {'abi3':>10s} {'abi3 / per-version':>20s}")
    for mode in CG_MODES:
        per_byte = {}
        for name, site in sites.items():
            base, nbytes, inline = callgrind(site, ranks, mb, mode, 0)
            work, _, _ = callgrind(site, ranks, mb, mode, 2)
            per_byte[name] = (work - base) / (2 * nbytes)
            if not inline:
                print(f"  ({name}: lists NOT built inline in this interpreter)")
        a, p = per_byte["abi3"], per_byte["per-version"]
        print(f"{mode:34s} {p:12.2f} {a:10.2f} {a / p:19.3f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=float, default=8.0)
    ap.add_argument("--callgrind", action="store_true", help="count instructions (valgrind) instead of timing")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    sites = {name: build(name) for name in VARIANTS}
    ranks = rank_file()
    if args.callgrind:
        main_callgrind(sites, ranks, min(args.mb, 1.0))
        return
    best: dict[str, dict[str, float]] = {name: {} for name in sites}
    for r in range(args.rounds):
        for name, site in sites.items():
            for k, v in measure(site, ranks, args.mb).items():
                best[name][k] = max(best[name].get(k, 0.0), v)
        print(f"round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"\ncl100k, {args.mb:g} MB of the built-in corpus as 4 KB texts, best of {args.rounds} rounds x 3, MB/s")
    print(f"{'call':34s} {'per-version':>12s} {'abi3':>10s} {'abi3 / per-version':>20s}")
    for k in best["abi3"]:
        a, p = best["abi3"][k], best["per-version"][k]
        print(f"{k:34s} {p:12.1f} {a:10.1f} {a / p:19.2f}x")


if __name__ == "__main__":
    main()
