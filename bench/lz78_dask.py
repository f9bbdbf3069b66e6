"""LZ78 pool-strategy training on one machine and on a LocalCluster: time and
the bytes that reach the client.

    python bench/lz78_dask.py FILE... [--strategy smart_prune] [--vocab 32768] [--workers 2]

Runs single-machine training, then the same training with ``client=`` a
``LocalCluster(workers, 1 thread each)``, checks that the saved files are
byte-identical, and prints wall times and the pickled size of everything
``runner.gather`` brought to the client (the pool, the counts or, before the
usage counts moved to the workers, the merged chunk counter).

Not handled: per-worker memory (see bench/dask.py), clusters on other machines.
"""

from __future__ import annotations

import argparse
import pickle
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--strategy", default="smart_prune")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-single", action="store_true")
    a = ap.parse_args()

    import distributed

    from tokenforge import LZ78Tokenizer
    from tokenforge import cluster as cl

    gathered = {"calls": 0, "bytes": 0}
    orig = cl.DaskRunner.gather

    def gather(self, handles):
        out = orig(self, handles)
        gathered["calls"] += 1
        gathered["bytes"] += len(pickle.dumps(out, protocol=5))
        return out

    cl.DaskRunner.gather = gather
    tmp = Path(tempfile.mkdtemp())
    one = None
    if not a.skip_single:
        t = time.perf_counter()
        tok = LZ78Tokenizer.train(a.files, a.vocab, strategy=a.strategy, progress=False)
        print(f"single machine: {time.perf_counter() - t:.1f} s  {tok.data.settings['training']}")
        tok.save(tmp / "one.tsv")
        one = (tmp / "one.tsv").read_bytes()
    with (
        distributed.LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as c,
        distributed.Client(c) as client,
    ):
        t = time.perf_counter()
        tok = LZ78Tokenizer.train(a.files, a.vocab, strategy=a.strategy, progress=False, client=client)
        print(f"LocalCluster({a.workers}): {time.perf_counter() - t:.1f} s  {tok.data.settings['training']}")
    tok.save(tmp / "dist.tsv")
    print(f"gathered to the client: {gathered['bytes']:,} bytes pickled in {gathered['calls']} gathers")
    if one is not None:
        print("identical files:", one == (tmp / "dist.tsv").read_bytes())


if __name__ == "__main__":
    main()
