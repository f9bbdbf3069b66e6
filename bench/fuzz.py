"""Long mutation-fuzzing runs over every file format tokenforge reads.

    python bench/fuzz.py --minutes 10 --seed 1 --workers 2 --out /tmp/fuzz

The parent writes one small valid example of every format (see
tests/fuzz_formats.py), then hands trial numbers to worker processes. Trial
``k`` is fully determined by ``(seed, k)``: the worker draws the format and the
mutation from ``random.Random(f"{seed}:{k}")``, writes the mutated file over
its copy of the example, loads it and reports the outcome. A worker that dies
(an abort such as SIGABRT, or any other signal) or does not answer within
``--timeout`` seconds (a hang; it is killed) is counted and replaced. The
mutated files of every abort, hang, error outside the hierarchy and silently
different tokenizer of our own formats are saved under ``--out/<kind>/<k>/``
with a ``trial.json`` saying how to reproduce them.

Printed totals: mutations, typed errors, loads equal to the original, loads
different (our own formats / foreign formats, which are validated only
structurally), errors outside the hierarchy, aborts, hangs; per format too.

Not handled: mutating two files of one example at once; measuring time or
memory per load (a slow load shows only as a hang past ``--timeout``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SAVE_LIMIT = 50  # mutated files kept per kind of finding


# ---------------------------------------------------------------- worker
def worker_main(examples: Path, seed: int, workdir: Path) -> None:
    """Read trial numbers on stdin; answer one JSON line per trial on stdout."""
    from fuzz_formats import mutate, read_cases, try_load

    cases = {c.name: c for c in read_cases(examples)}
    names = sorted(cases)
    dirs = {}
    for name, c in cases.items():
        dirs[name] = c.write(workdir / name)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        k = int(line)
        name = names[k % len(names)]
        case = cases[name]
        target, data, muts = mutate(case, random.Random(f"{seed}:{k}"))
        d = dirs[name]
        (d / target).write_bytes(data)
        try:
            outcome, detail = try_load(case, d)
        finally:
            (d / target).write_bytes(case.files[target])
        out.write(
            json.dumps(
                {
                    "k": k,
                    "case": name,
                    "own": case.own,
                    "outcome": outcome,
                    "detail": detail,
                    "mutations": muts,
                    "target": target,
                }
            )
            + "\n"
        )
        out.flush()


# ---------------------------------------------------------------- parent
class Worker:
    def __init__(self, args, examples: Path, n: int):
        self.workdir = Path(tempfile.mkdtemp(prefix=f"fuzz-w{n}-", dir=args.out))
        env = dict(os.environ, RUST_BACKTRACE="0")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(examples), "--seed", str(args.seed), "--out", str(self.workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        self.buf = ""
        ready = self.read(timeout=300)
        if not ready or not ready.get("ready"):
            raise SystemExit("a fuzz worker failed to start")
        self.k = None

    def send(self, k: int) -> None:
        self.k = k
        self.proc.stdin.write(f"{k}\n")
        self.proc.stdin.flush()

    def read(self, timeout: float):
        """One JSON answer, None if the worker died, "hang" after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while "\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "hang"
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16).decode()
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split("\n", 1)
        return json.loads(line)

    def kill(self) -> int:
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return code


def save(args, kind: str, k: int, cases, info: dict, saved: collections.Counter) -> None:
    from fuzz_formats import mutate

    if saved[kind] >= SAVE_LIMIT:
        return
    saved[kind] += 1
    names = sorted(cases)
    case = cases[names[k % len(names)]]
    target, data, muts = mutate(case, random.Random(f"{args.seed}:{k}"))
    d = Path(args.out) / kind / str(k)
    case.write(d, {target: data})
    (d / "trial.json").write_text(
        json.dumps(
            {
                "seed": args.seed,
                "trial": k,
                "case": case.name,
                "target": target,
                "mutations": muts,
                **info,
                "reproduce": f"python bench/fuzz.py --seed {args.seed} --replay {k}",
            },
            indent=1,
        )
        + "\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a load counts as a hang")
    ap.add_argument("--out", default=None, help="directory for examples and saved findings (default: a temp dir)")
    ap.add_argument("--max-trials", type=int, default=None)
    ap.add_argument("--replay", type=int, default=None, help="run one trial in this process and print its outcome")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_main(Path(args.worker), args.seed, Path(args.out))
        return
    from fuzz_formats import read_cases, write_examples

    args.out = Path(args.out or tempfile.mkdtemp(prefix="tokenforge-fuzz-"))
    args.out.mkdir(parents=True, exist_ok=True)
    examples = args.out / "examples"
    if not examples.exists():
        write_examples(examples)
    cases = {c.name: c for c in read_cases(examples)}
    names = sorted(cases)
    if args.replay is not None:
        from fuzz_formats import mutate, try_load

        k = args.replay
        case = cases[names[k % len(names)]]
        target, data, muts = mutate(case, random.Random(f"{args.seed}:{k}"))
        d = case.write(Path(tempfile.mkdtemp()), {target: data})
        print(case.name, target, muts, d)
        print(*try_load(case, d))
        return

    totals = collections.Counter()
    per_case: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    saved = collections.Counter()
    outside_kinds = collections.Counter()
    workers = [Worker(args, examples, i) for i in range(args.workers)]
    end = time.monotonic() + args.minutes * 60
    next_k = 0
    start = time.monotonic()
    last_report = start

    def record(name: str, kind: str) -> None:
        totals[kind] += 1
        per_case[name][kind] += 1

    for w in workers:
        w.send(next_k)
        next_k += 1
    try:
        while workers:
            for i, w in enumerate(list(workers)):
                ans = w.read(timeout=args.timeout)
                k = w.k
                name = names[k % len(names)]
                totals["mutations"] += 1
                if ans == "hang" or ans is None:
                    code = w.kill()
                    kind = "hangs" if ans == "hang" else "aborts"
                    record(name, kind)
                    save(args, kind, k, cases, {"exit": code}, saved)
                    slot = workers.index(w)
                    w = Worker(args, examples, next_k)
                    workers[slot] = w
                else:
                    kind = {
                        "error": "typed_errors",
                        "equal": "loads_equal",
                        "outside": "outside_hierarchy",
                        "different": "different_own" if ans["own"] else "different_foreign",
                    }[ans["outcome"]]
                    record(name, kind)
                    if kind in ("outside_hierarchy", "different_own"):
                        save(args, kind, k, cases, {"detail": ans["detail"]}, saved)
                    if kind == "outside_hierarchy":
                        outside_kinds[f"{name}: {ans['detail'][:160]}"] += 1
                done = time.monotonic() >= end or (args.max_trials is not None and next_k >= args.max_trials)
                if done:
                    w.kill()
                    workers.remove(w)
                else:
                    w.send(next_k)
                    next_k += 1
            now = time.monotonic()
            if now - last_report > 60:
                last_report = now
                print(f"[{(now - start) / 60:.1f} min] {dict(totals)}", file=sys.stderr, flush=True)
    finally:
        for w in workers:
            w.kill()

    elapsed = time.monotonic() - start
    keys = [
        "mutations",
        "typed_errors",
        "loads_equal",
        "different_own",
        "different_foreign",
        "outside_hierarchy",
        "aborts",
        "hangs",
    ]
    print(f"seed {args.seed}, {elapsed / 60:.1f} minutes, {args.workers} workers, output in {args.out}")
    print("totals: " + ", ".join(f"{k} {totals[k]}" for k in keys))
    print(f"{'format':26}" + "".join(f"{k[:12]:>13}" for k in keys[1:]))
    for name in names:
        c = per_case[name]
        print(f"{name:26}" + "".join(f"{c[k]:>13}" for k in keys[1:]))
    if outside_kinds:
        print("errors outside the hierarchy (most frequent):")
        for what, n in outside_kinds.most_common(15):
            print(f"  {n:6}  {what}")


if __name__ == "__main__":
    main()
