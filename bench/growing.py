"""Benchmark: learning 10,000 merges on a 50 MB source (the growing vocabulary, issue 5).

    python bench/growing.py [--corpus FILE] [--merges 10000] [--reference-budget 600]

Tools, each run once in its own fresh process, all given the same list of
documents already in memory (timing starts there and ends with the merges):

- tokenforge, from scratch: ``GrowingBPETokenizer().learn_merges(iter(docs), 10000)``
  (NFC, cl100k split, counting and merging in Rust);
- tokenforge, continued: the same 10,000 merges learned on top of a vocabulary
  that already has 10,000 merges from another source (the held-out file, or
  the second half of the corpus): the everyday case of the growing vocabulary;
- rustbpe: ``Tokenizer().train_from_iterator(docs, 256 + 10000, pattern=cl100k)``;
- Hugging Face tokenizers: a byte-level BPE trainer (the cl100k regex, then
  ByteLevel) with ``vocab_size = 256 + 10000``;
- the pure-Python reference of the seed's algorithm
  (``tokenforge.reference.growing.learn_seed_algorithm``: incremental pair
  counts, the best pair by a scan over all pairs). Its counting runs over the
  whole corpus; its merging runs for ``--reference-budget`` seconds and the
  time for all merges is **extrapolated** linearly from the merges done (said
  so in the table). Early merges touch more words than late ones, while the
  scan over all pairs grows as pairs are added, so the estimate is rough in
  either direction; it is labelled as an estimate.

Targets (issue 5): tokenforge within 1.5x of rustbpe's time for the same
number of merges from scratch, and at least 20x faster than the pure-Python
reference. The corpus is ``bench/data/corpus/train_50mb.txt`` (built by
``bench/build_corpus.py``; also looked for in ``/work/main/bench/data``) or,
if absent, Python's standard library sources up to 50 MB. Results are also
written to ``bench/results/growing.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "growing.json"
MB = 1_000_000
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)


# ---------------------------------------------------------------------------- corpus
def _corpus_candidates() -> list[Path]:
    env = os.environ.get("TOKENFORGE_BENCH_CORPUS")
    dirs = [Path(env)] if env else []
    dirs += [BENCH_DIR / "data" / "corpus", Path("/work/main/bench/data/corpus")]
    return dirs


def find_corpus(name: str = "train_50mb.txt") -> Path | None:
    for d in _corpus_candidates():
        if (d / name).is_file():
            return d / name
    return None


def stdlib_text(limit: int = 50 * MB) -> str:
    """Python's own standard library sources, in sorted path order, up to ``limit`` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts, total = [], 0
    for p in sorted(root.rglob("*.py")):
        try:
            t = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(t)
        total += len(t.encode())
        if total >= limit:
            break
    return "\n\n".join(parts)


def load_docs(path: str | None, limit: int = 50 * MB) -> list[str]:
    """Documents = blank-line separated blocks of the corpus (the same list for every tool)."""
    if path:
        with open(path, "rb") as f:
            text = f.read(limit).decode("utf-8", errors="ignore")
    else:
        text = stdlib_text(limit)
    return [d for d in text.split("\n\n") if d]


# ---------------------------------------------------------------------------- workers
def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def work_ours(corpus, merges, prior, raw=False):
    from tokenforge import GrowingBPETokenizer

    docs = load_docs(corpus)
    # raw: rustbpe's exact task (no NFC, every pair may merge) for a merge-by-merge comparison
    tok = GrowingBPETokenizer(normalization=None) if raw else GrowingBPETokenizer()
    if prior:
        tok.learn_merges(iter(load_docs(prior)), merges, source="earlier")
    before = tok.current_vocab_size
    t0 = time.perf_counter()
    n = tok.learn_merges(iter(docs), merges, source="bench", min_frequency=1 if raw else 2)
    dt = time.perf_counter() - t0
    new = [(a, b, z) for a, b, z in tok.merge_list if z >= before]
    return {
        "seconds": dt,
        "merges": n,
        "merge_list": new if not prior else None,
        "mb": sum(len(d.encode()) for d in docs) / MB,
    }


def work_rustbpe(corpus, merges, prior):
    import rustbpe

    docs = load_docs(corpus)
    tok = rustbpe.Tokenizer()
    t0 = time.perf_counter()
    tok.train_from_iterator(iter(docs), 256 + merges, pattern=CL100K)
    dt = time.perf_counter() - t0
    ranks = tok.get_mergeable_ranks()
    return {"seconds": dt, "merges": len(ranks) - 256, "ranks": [[list(b), r] for b, r in ranks if r >= 256]}


def work_hf(corpus, merges, prior):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    docs = load_docs(corpus)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + merges,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    t0 = time.perf_counter()
    tok.train_from_iterator(docs, trainer=trainer)
    dt = time.perf_counter() - t0
    n = len(json.loads(tok.to_str())["model"]["merges"])
    return {"seconds": dt, "merges": n}


def work_reference(corpus, merges, prior, budget):
    from tokenforge.reference.growing import count_words, learn_seed_algorithm

    docs = load_docs(corpus)
    t0 = time.perf_counter()
    words = count_words(docs)
    t_count = time.perf_counter() - t0
    t1 = time.perf_counter()
    # learn_seed_algorithm stops at the deadline; its set-up (first encoding, pair index)
    # is timed within the budget, so measure it separately with a zero-merge run first
    learn_seed_algorithm(words, 0)
    t_init = time.perf_counter() - t1
    t2 = time.perf_counter()
    done = learn_seed_algorithm(words, merges, deadline=t2 + t_init + budget)
    t_merge_total = time.perf_counter() - t2  # includes one more set-up
    t_merge = max(t_merge_total - t_init, 1e-9)
    k = len(done)
    est = t_count + t_init + (t_merge / k) * merges if k else float("inf")
    return {
        "seconds": est if k < merges else t_count + t_init + t_merge,
        "estimated": k < merges,
        "merges": k,
        "count_seconds": t_count,
        "init_seconds": t_init,
        "merge_seconds": t_merge,
        "merge_list": [list(m) for m in done],
    }


WORKERS = {"ours": work_ours, "rustbpe": work_rustbpe, "hf": work_hf, "reference": work_reference}


def worker_main(argv) -> None:
    args = json.loads(argv[0])
    fn = WORKERS[args.pop("tool")]
    out = fn(**args)
    out["peak_mb"] = _peak_mb()
    sys.stdout.write("\n@@RESULT@@" + json.dumps(out) + "\n")


def run_worker(tool: str, timeout: float, **kw) -> dict:
    payload = json.dumps({"tool": tool, **kw})
    t0 = time.perf_counter()
    try:
        r = subprocess.run(
            [sys.executable, __file__, "--worker", payload], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"> {timeout:.0f} s (killed)"}
    if r.returncode != 0 or "@@RESULT@@" not in r.stdout:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    res = json.loads(r.stdout.split("@@RESULT@@")[-1])
    res["process_seconds"] = time.perf_counter() - t0
    return res


# ---------------------------------------------------------------------------- report
def _agree(ours: list, rust: list) -> tuple[int, int | None]:
    """How many of our merges equal rustbpe's (ids mapped to rustbpe's layout), and the first difference."""
    from tokenforge.formats.growing_json import BYTE_OFFSET, MERGE_OFFSET

    def to_rust(i):
        return i - BYTE_OFFSET if i < MERGE_OFFSET else i - MERGE_OFFSET + 256

    token = {b: bytes([b]) for b in range(256)}
    for a, b, z in ours:
        token[to_rust(z)] = token[to_rust(a)] + token[to_rust(b)]
    ours_bytes = [token[to_rust(z)] for _, _, z in ours]
    rust_bytes = [bytes(b) for b, r in sorted(rust, key=lambda x: x[1])]
    same = sum(1 for x, y in zip(ours_bytes, rust_bytes) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(ours_bytes, rust_bytes)) if x != y), None)
    return same, first


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(
        description="learning 10,000 merges on 50 MB: tokenforge vs rustbpe vs HF vs pure Python"
    )
    ap.add_argument(
        "--corpus", default=None, help="a UTF-8 text file (default: train_50mb.txt, else the stdlib sources)"
    )
    ap.add_argument("--prior", default=None, help="source of the earlier 10,000 merges for the continued run")
    ap.add_argument("--merges", type=int, default=10_000)
    ap.add_argument(
        "--reference-budget", type=float, default=600.0, help="seconds of merging for the pure-Python reference"
    )
    ap.add_argument(
        "--skip", default="", help="comma-separated tools to skip (ours,continued,raw,rustbpe,hf,reference)"
    )
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args()

    corpus = args.corpus or (str(find_corpus()) if find_corpus() else None)
    prior = args.prior or (str(find_corpus("heldout.txt")) if find_corpus("heldout.txt") else None)
    if corpus is None:
        print("train_50mb.txt not found: using Python's standard library sources (50 MB)")
    skip = set(filter(None, args.skip.split(",")))
    docs = load_docs(corpus)
    mb = sum(len(d.encode()) for d in docs) / MB
    print(f"corpus: {corpus or 'stdlib sources'} ({mb:.1f} MB, {len(docs):,} documents); {args.merges:,} merges")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    del docs

    rows = {}
    plan = [
        ("ours", "tokenforge (from scratch)", dict(tool="ours", prior=None)),
        (
            "continued",
            f"tokenforge (continued, on {args.merges:,} earlier merges)",
            dict(tool="ours", prior=prior or ""),
        ),
        ("raw", "tokenforge (no NFC, min_frequency 1: rustbpe's task)", dict(tool="ours", prior=None, raw=True)),
        ("rustbpe", "rustbpe", dict(tool="rustbpe", prior=None)),
        ("hf", "HF tokenizers", dict(tool="hf", prior=None)),
        (
            "reference",
            "pure-Python reference (seed's algorithm)",
            dict(tool="reference", prior=None, budget=args.reference_budget),
        ),
    ]
    for key, label, kw in plan:
        if key in skip:
            continue
        if key == "continued" and not prior:
            kw["prior"] = None
            continue
        print(f"running {label} ...", flush=True)
        tool = kw.pop("tool")
        rows[key] = dict(label=label, **run_worker(tool, args.timeout, corpus=corpus, merges=args.merges, **kw))
        r = rows[key]
        if "error" in r:
            print(f"  failed: {r['error']}")
        else:
            est = " (estimated)" if r.get("estimated") else ""
            print(f"  {r['seconds']:.2f} s{est}, {r['merges']:,} merges, peak {r['peak_mb']:.0f} MB")

    base = rows.get("ours", {}).get("seconds")
    print()
    print(f"{'tool':<52} {'time (s)':>12} {'merges':>8} {'MB/s':>8} {'peak MB':>8} {'t / ours':>9}")
    print("-" * 102)
    for key, r in rows.items():
        if "error" in r:
            print(f"{r['label']:<52} {r['error']:>12}")
            continue
        t = r["seconds"]
        est = "~" if r.get("estimated") else ""
        ratio = f"{t / base:.2f}x" if base else "-"
        print(
            f"{r['label']:<52} {est + format(t, '.2f'):>12} {r['merges']:>8,} {mb / t:>8.2f} {r['peak_mb']:>8.0f} {ratio:>9}"
        )
    ref = rows.get("reference", {})
    if ref.get("estimated"):
        print(
            f"\n~ reference: counted the whole corpus in {ref['count_seconds']:.1f} s, set up in {ref['init_seconds']:.1f} s, "
            f"then did {ref['merges']:,} merges in {ref['merge_seconds']:.1f} s; the time for {args.merges:,} merges is "
            "extrapolated linearly from those (an estimate)."
        )
    print("\nTargets:")
    ok = True
    if base and "rustbpe" in rows and "seconds" in rows["rustbpe"]:
        x = base / rows["rustbpe"]["seconds"]
        ok &= x <= 1.5
        print(f"  tokenforge / rustbpe time = {x:.2f} (target <= 1.5): {'met' if x <= 1.5 else 'NOT met'}")
    if base and "seconds" in ref:
        x = ref["seconds"] / base
        ok &= x >= 20
        print(
            f"  reference / tokenforge time = {x:,.0f}x (target >= 20x){' (reference estimated)' if ref.get('estimated') else ''}: {'met' if x >= 20 else 'NOT met'}"
        )
    for key in ("ours", "raw"):
        if rows.get(key, {}).get("merge_list") and "ranks" in rows.get("rustbpe", {}):
            same, first = _agree(rows[key]["merge_list"], rows["rustbpe"]["ranks"])
            where = "" if first is None else f"; first difference at merge {first}"
            print(
                f"  {rows[key]['label']}: merges identical to rustbpe's (same bytes, same order): {same:,} of {rows[key]['merges']:,}{where}"
            )
    print("    (rustbpe does not NFC-normalise: where the corpus has non-NFC text the default run may differ)")
    if "merge_list" in ref and rows.get("ours", {}).get("merge_list"):
        k = len(ref["merge_list"])
        same = [tuple(m) for m in ref["merge_list"]] == [tuple(m) for m in rows["ours"]["merge_list"][:k]]
        print(f"  the reference's {k:,} merges equal tokenforge's first {k:,}: {same}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    slim = {k: {kk: vv for kk, vv in v.items() if kk not in ("merge_list", "ranks")} for k, v in rows.items()}
    RESULTS.write_text(
        json.dumps(
            {
                "corpus": corpus or "stdlib",
                "mb": mb,
                "merges": args.merges,
                "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "cores": os.cpu_count(),
                "rows": slim,
            },
            indent=2,
        )
    )
    print(f"\nwrote {RESULTS}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
