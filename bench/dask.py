"""Counting and pretokenizing on a Dask cluster against the single-machine path (issue 13, item 6).

Usage::

    python bench/build_corpus.py                 # once: the corpus (bench/data/corpus)
    python bench/dask.py                         # the whole train.jsonl (125 MB): count + pretokenize
    python bench/dask.py --jobs count,pretokenize,train   # also whole BPE training, vocab 32,768
    python bench/dask.py --mb 20                 # a quick run on the first 20 MB of lines
    python bench/dask.py --json /tmp/dask.json   # save the figures

Jobs (the same corpus for each):

count        ``tokenforge.counting.count_pieces(corpus, GPT-4 pattern)``: BPE training's
             counting step; the counter's bytes must be identical in every configuration
pretokenize  ``tokenforge.data.shards.pretokenize(corpus, tok, out)`` with a BPE tokenizer
             of 8,192 ids trained first on the corpus's first 10 MB (untimed); the
             ShardSet token streams and document tables must be identical
train        ``BPETokenizer.train(corpus, 32768)`` (counting + the merge loop on the
             client); saved files byte-identical (local 2 threads and 2 workers only)

Configurations (each job and configuration in a fresh child process, with a
fresh cluster, so every peak memory figure is that job's own):

local-1t     in-process, ``client=None``, ``num_threads=1``
local-2t     in-process, ``client=None``, ``num_threads=2``
dask-1w      ``LocalCluster(n_workers=1, threads_per_worker=1, processes=True)``
dask-2w      ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``

Each configuration runs ``--repeat`` times (default 3), in rounds over the
configurations so that a burst of load on a shared machine meets all of them;
a row shows its best wall time (all of them are in the JSON) and the other
figures of that run.

Columns: wall time of the job's call (cluster start-up, including importing
tokenforge on the workers, excluded and shown apart),
MB/s of corpus file, CPU seconds (user+system) of the client process and of
each worker during the call (less sensitive to other load than wall time),
the client process's peak RSS (for dask-*: the client
and the LocalCluster's scheduler, which runs in it), each worker's peak RSS
(``ru_maxrss`` of the worker process, which starts with the cluster), and
bytes shipped, from the workers' own counters (``Worker.transfer_outgoing_log``:
the bytes each ``get_data`` reply wrote on the wire): worker-to-worker, and
worker-to-client (gathers, through the scheduler), plus the size of the final
result (the merged counter's transport bytes; for pretokenize, the small task
summaries -- the shards go to disk, their size is shown too) and of the
tokenizer scattered to the workers. Task arguments (partitions, options) are
not counted (a few hundred bytes per task).

``--no-malloc-trim`` starts the workers without the ``MALLOC_TRIM_THRESHOLD_=65536``
that Dask's nanny sets by default (``distributed.nanny.pre-spawn-environ``):
setting it also fixes glibc's mmap threshold at 128 kB, so every large buffer
(a batch of documents, a growing table) is mapped and unmapped afresh; counting
125 MB in one process with it set costs ~0.3 s more system time and ~6x the
page faults.

Targets (issue 13): dask-2w >= 1.7 x dask-1w on count and pretokenize; dask-1w
within 15% of local-1t, dask-2w within 15% of local-2t. The machine's load
average is printed: on a shared machine, run it twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is named dask.py, so its directory (which Python puts first on
# sys.path for a script) would hide the real dask package from `import dask`
# here, in the children and in the workers they spawn: take it off, and load
# bench/common.py by its path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def _load_common():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tokenforge_bench_common", os.path.join(_HERE, "common.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_common = _load_common()
MB, CorpusMissing, corpus_path = _common.MB, _common.CorpusMissing, _common.corpus_path

CONFIGS = ["local-1t", "local-2t", "dask-1w", "dask-2w"]
JOBS = ["count", "pretokenize", "train"]
TRAIN_CONFIGS = ["local-2t", "dask-2w"]
PRETOK_VOCAB = 8192
PRETOK_TRAIN_MB = 10


# --------------------------------------------------------------------------
# the child: one job in one configuration
# --------------------------------------------------------------------------
def _worker_stats(dask_worker):
    """On each worker: its peak RSS and what it sent (``get_data`` replies)."""
    w = dask_worker
    sent = [(e["who"], int(e["total"]), int(e.get("compressed") or 0)) for e in w.transfer_outgoing_log]
    received = sum(int(e["total"]) for e in w.transfer_incoming_log)
    return {
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "outgoing_bytes_total": int(w.transfer_outgoing_bytes_total),
        "sent": sent,
        "received_sizeof": received,
    }


def _cpu() -> tuple[float, float, int]:
    """This process's user and system CPU seconds and minor page faults so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def _start(client):
    """The timed call starts: wall clock, this process's CPU, each worker's CPU."""
    workers = client.run(_cpu) if client is not None else {}
    return time.perf_counter(), _cpu(), workers


def _stop(row: dict, started, client) -> None:
    """The timed call has returned: its wall time and the CPU spent meanwhile."""
    wall = time.perf_counter() - started[0]
    cpu1, cpu0, workers0 = _cpu(), started[1], started[2]
    row["wall_s"] = wall
    row["client_cpu_s"] = [round(cpu1[0] - cpu0[0], 3), round(cpu1[1] - cpu0[1], 3)]
    row["client_faults"] = cpu1[2] - cpu0[2]
    if client is not None:
        workers1 = client.run(_cpu)
        row["worker_cpu_s"] = [
            [round(workers1[a][0] - workers0[a][0], 3), round(workers1[a][1] - workers0[a][1], 3)]
            for a in sorted(workers1)
        ]
        row["worker_faults"] = [workers1[a][2] - workers0[a][2] for a in sorted(workers1)]


def _warm_up() -> None:
    import tokenforge.counting  # noqa: F401
    import tokenforge.data.shards  # noqa: F401


def _digest_shards(path) -> str:
    """sha256 over a ShardSet's token stream and document tables, shard by shard."""
    import numpy as np

    from tokenforge.data.shards import ShardSet

    s = ShardSet(path)
    assert s.complete
    h = hashlib.sha256()
    for i in range(s.num_shards):
        h.update(np.ascontiguousarray(s.tokens(i), dtype=np.uint32).tobytes())
    h.update(b"|")
    base = 0
    for i in range(s.num_shards):
        table = np.asarray(s.documents(i)).astype(np.int64)
        table[:, 0] += base
        base += len(s.tokens(i))
        h.update(table.tobytes())
    return h.hexdigest()


def _dir_bytes(path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def child(
    job: str,
    config: str,
    corpus: str,
    tok_path: str,
    work: str,
    vocab: int,
    task_threads: int | None,
    malloc_trim: bool,
) -> dict:
    import tokenforge
    from tokenforge.bpe import resolve_pattern
    from tokenforge.counting import count_pieces
    from tokenforge.data.shards import pretokenize

    row: dict = {"job": job, "config": config}
    client = cluster = None
    local_threads = None
    if config.startswith("local-"):
        local_threads = int(config[len("local-") : -1])
    else:
        from distributed import Client, LocalCluster

        import dask

        if not malloc_trim:
            # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, which also
            # pins glibc's mmap threshold at 128 kB: every large buffer is a fresh mmap.
            env = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
            env.pop("MALLOC_TRIM_THRESHOLD_", None)
            dask.config.set({"distributed.nanny.pre-spawn-environ": env})
        t0 = time.perf_counter()
        cluster = LocalCluster(
            n_workers=int(config[len("dask-") : -1]),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        )
        client = Client(cluster)
        # Importing tokenforge on the workers is part of start-up, as the import here is
        # for the local configurations (a long-lived cluster pays it once).
        client.run(_warm_up)
        row["startup_s"] = time.perf_counter() - t0
    threads = local_threads if client is None else task_threads
    out = Path(work) / f"{job}-{config}"
    try:
        if job == "count":
            regex, _ = resolve_pattern("gpt4")
            t = _start(client)
            counter = count_pieces(corpus, regex, client=client, num_threads=threads, progress=False)
            _stop(row, t, client)
            data = counter.to_bytes()
            row["result_bytes"] = len(data)
            row["digest"] = hashlib.sha256(data).hexdigest()
            row["unique"] = counter.unique
        elif job == "pretokenize":
            tok = tokenforge.load(tok_path)
            if client is not None:
                import pickle

                row["scattered_bytes"] = len(pickle.dumps(tok)) * len(client.nthreads())
            t = _start(client)
            shards = pretokenize(corpus, tok, out, client=client, num_threads=threads, progress=False)
            _stop(row, t, client)
            row["tokens"] = shards.num_tokens
            row["disk_bytes"] = _dir_bytes(out)
            row["digest"] = _digest_shards(out)
        elif job == "train":
            t = _start(client)
            tokenforge.BPETokenizer.train(
                corpus, vocab, save_dir=out, client=client, num_threads=local_threads, progress=False
            )
            _stop(row, t, client)
            h = hashlib.sha256()
            for p in sorted(out.rglob("*")):
                if p.is_file():
                    h.update(p.relative_to(out).as_posix().encode() + b"\0" + p.read_bytes())
            row["digest"] = h.hexdigest()
        else:
            raise ValueError(job)
        if client is not None:
            stats = client.run(_worker_stats)
            addresses = set(stats)
            row["worker_peak_rss"] = [stats[a]["peak_rss"] for a in sorted(stats)]
            sent = [e for a in sorted(stats) for e in stats[a]["sent"]]
            row["w2w_bytes"] = sum(c for who, _, c in sent if who in addresses)
            row["w2c_bytes"] = sum(c for who, _, c in sent if who not in addresses)
            row["w2w_sizeof"] = sum(s for who, s, _ in sent if who in addresses)
            row["w2c_sizeof"] = sum(s for who, s, _ in sent if who not in addresses)
            row["transfers"] = len(sent)
    finally:
        if client is not None:
            client.close()
            cluster.close()
        shutil.rmtree(out, ignore_errors=True)
    row["client_peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return row


# --------------------------------------------------------------------------
# the parent: prepare, run every child, compare, print
# --------------------------------------------------------------------------
def _prefix(src: Path, mb: float, work: Path) -> Path:
    """The first ``mb`` MB of ``src``'s lines, in ``work``."""
    out = work / f"{src.stem}_{mb:g}mb{src.suffix}"
    got = 0
    with open(src, "rb") as f, open(out, "wb") as g:
        for line in f:
            if got >= mb * MB:
                break
            g.write(line)
            got += len(line)
    return out


def _train_pretok_tokenizer(corpus: Path, work: Path) -> Path:
    import tokenforge
    from tokenforge.data.corpus import iter_documents

    def head():
        got = 0
        for doc in iter_documents(corpus):
            if got >= PRETOK_TRAIN_MB * MB:
                return
            got += len(doc.encode("utf-8", "surrogatepass"))
            yield doc

    tok = tokenforge.BPETokenizer.train_from_iterator(head(), PRETOK_VOCAB, progress=False)
    path = work / "pretok_bpe"
    tok.save(path)
    return path


def _run_child(args, job, config, corpus, tok, work) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        f"{job},{config}",
        "--corpus",
        str(corpus),
        "--tok",
        str(tok),
        "--work",
        str(work),
        "--vocab",
        str(args.vocab),
    ]
    if args.task_threads is not None:
        cmd += ["--task-threads", str(args.task_threads)]
    if args.no_malloc_trim:
        cmd += ["--no-malloc-trim"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if p.returncode != 0:
        return {"job": job, "config": config, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _cpu_text(r: dict) -> str:
    def one(pair):
        return f"{pair[0]:.2f}+{pair[1]:.2f}"

    text = one(r["client_cpu_s"]) if "client_cpu_s" in r else "-"
    if "worker_cpu_s" in r:
        text += "; " + " / ".join(one(p) for p in r["worker_cpu_s"])
    return text


def _mb(n) -> str:
    return "-" if n is None else f"{n / MB:.1f}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    return f"{n / MB:.2f} MB" if n >= 100_000 else f"{n / 1000:.1f} kB"


def print_table(rows: list[dict], corpus_mb: float) -> None:
    head = [
        "job",
        "config",
        "wall s",
        "MB/s",
        "CPU s usr+sys: client; workers",
        "start s",
        "client RSS",
        "worker RSS",
        "w->w",
        "w->client",
        "result",
        "same",
    ]
    table = [head]
    for r in rows:
        if "error" in r:
            table.append([r["job"], r["config"], "error: " + r["error"][:80]] + [""] * (len(head) - 3))
            continue
        result = r.get("result_bytes")
        if r["job"] == "pretokenize":
            result = None
        table.append(
            [
                r["job"],
                r["config"],
                f"{r['wall_s']:.2f}",
                f"{corpus_mb / r['wall_s']:.1f}",
                _cpu_text(r),
                f"{r['startup_s']:.1f}" if "startup_s" in r else "-",
                _mb(r["client_peak_rss"]) + " MB",
                " / ".join(_mb(x) for x in r.get("worker_peak_rss", [])) + (" MB" if "worker_peak_rss" in r else "-"),
                _bytes(r.get("w2w_bytes")),
                _bytes(r.get("w2c_bytes")),
                _bytes(result)
                if r["job"] != "pretokenize"
                else f"disk {_bytes(r['disk_bytes'])}; tok {_bytes(r.get('scattered_bytes'))}",
                r.get("same", ""),
            ]
        )
    widths = [max(len(str(row[k])) for row in table) for k in range(len(head))]
    for k, row in enumerate(table):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


def ratios(rows: list[dict]) -> list[dict]:
    """The issue's targets, per job: speed-up of 2 workers over 1, and each
    distributed configuration's speed against local at equal cores."""
    wall = {(r["job"], r["config"]): r["wall_s"] for r in rows if "wall_s" in r}
    out = []
    for job in JOBS:
        checks = [
            ("dask-2w vs dask-1w (speed-up)", "dask-1w", "dask-2w", ">= 1.70", lambda x: x >= 1.7),
            ("dask-1w vs local-1t (speed)", "local-1t", "dask-1w", ">= 0.87 (within 15%)", lambda x: x >= 1 / 1.15),
            ("dask-2w vs local-2t (speed)", "local-2t", "dask-2w", ">= 0.87 (within 15%)", lambda x: x >= 1 / 1.15),
            ("local-2t vs local-1t (speed-up)", "local-1t", "local-2t", "(reference)", None),
        ]
        for name, base, new, target, ok in checks:
            if (job, base) in wall and (job, new) in wall:
                x = wall[(job, base)] / wall[(job, new)]
                out.append(
                    {
                        "job": job,
                        "ratio": name,
                        "value": round(x, 3),
                        "target": target,
                        "met": None if ok is None else bool(ok(x)),
                    }
                )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="a .jsonl/.txt corpus file (default: bench/data/corpus/train.jsonl)")
    ap.add_argument("--mb", type=float, help="use only the first MB of the corpus's lines (a quick run)")
    ap.add_argument("--jobs", default="count,pretokenize", help=f"comma-separated, of {','.join(JOBS)}")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {','.join(CONFIGS)}")
    ap.add_argument("--vocab", type=int, default=32768, help="vocabulary of the train job")
    ap.add_argument(
        "--task-threads", type=int, help="num_threads given to the cluster jobs (default: None, the library's choice)"
    )
    ap.add_argument(
        "--no-malloc-trim",
        action="store_true",
        help="start the workers without Dask's MALLOC_TRIM_THRESHOLD_=65536 (distributed.nanny.pre-spawn-environ)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each row keeps its best wall time")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tok", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        job, config = args.child.split(",")
        row = child(
            job, config, args.corpus, args.tok, args.work, args.vocab, args.task_threads, not args.no_malloc_trim
        )
        print(json.dumps(row))
        return 0

    jobs = [j for j in args.jobs.split(",") if j]
    configs = [c for c in args.configs.split(",") if c]
    for name, got, known in (("job", jobs, JOBS), ("config", configs, CONFIGS)):
        bad = [x for x in got if x not in known]
        if bad:
            ap.error(f"unknown {name} {bad}; expected some of {known}")
    try:
        src = Path(args.corpus) if args.corpus else corpus_path("train.jsonl")
    except CorpusMissing as e:
        print(e, file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="tokenforge-dask-bench-"))
    try:
        corpus = _prefix(src, args.mb, work) if args.mb else src
        corpus_mb = corpus.stat().st_size / MB
        print(f"corpus {corpus} ({corpus_mb:.1f} MB); load average {os.getloadavg()}; {os.cpu_count()} cores")
        tok = _train_pretok_tokenizer(corpus, work) if "pretokenize" in jobs else work / "none"
        rows = []
        for job in jobs:
            best: dict = {}
            for round_ in range(args.repeat):  # rounds over the configurations: a burst of load meets all
                for config in configs:
                    if job == "train" and config not in TRAIN_CONFIGS:
                        continue
                    row = _run_child(args, job, config, corpus, tok, work)
                    print(
                        f"  {job:12s} {config:9s} round {round_ + 1}: "
                        + (f"{row['wall_s']:8.2f} s" if "wall_s" in row else row.get("error", "?")),
                        flush=True,
                    )
                    old = best.get(config)
                    if old is None or "error" in row or ("error" not in old and row["wall_s"] < old["wall_s"]):
                        row["walls"] = (old or {}).get("walls", []) + [row.get("wall_s")]
                        best[config] = row
                    else:
                        old["walls"].append(row.get("wall_s"))
                    if row.get("digest") and best[config].get("digest") != row["digest"]:
                        best[config]["digest"] = "differs between rounds"
            rows.extend(best[c] for c in configs if c in best)
        for job in jobs:
            digests = {r["digest"] for r in rows if r["job"] == job and "digest" in r}
            for r in rows:
                if r["job"] == job and "digest" in r:
                    r["same"] = "yes" if len(digests) == 1 else "NO"
        print(f"\nload average after: {os.getloadavg()}\n")
        print_table(rows, corpus_mb)
        rs = ratios(rows)
        print()
        for r in rs:
            met = "" if r["met"] is None else ("met" if r["met"] else "MISSED")
            print(f"{r['job']:12s} {r['ratio']:34s} {r['value']:6.2f}x  target {r['target']:22s} {met}")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "corpus": str(corpus),
                        "corpus_bytes": corpus.stat().st_size,
                        "cores": os.cpu_count(),
                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "rows": rows,
                        "ratios": rs,
                    },
                    indent=1,
                )
            )
        return 0 if all(r.get("same", "yes") == "yes" and "error" not in r for r in rows) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
