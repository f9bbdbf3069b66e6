"""Distributed mixedgram training against single-machine training on the same file.

    python bench/mixedgram_dist.py FILE [--workers 2] [--partition-mb 5]

Trains once here (``Mixedgram.train(FILE)``, all cores) and once on a fresh
``distributed.LocalCluster`` of ``--workers`` processes of one thread each
(cluster start-up not timed), checks that the saved ``.mxgram`` files are
byte-identical, and prints both wall-clock times. One run each: the machine
may be shared, so read the numbers as rough.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tokenforge import Mixedgram


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partition-mb", type=float, default=5.0)
    a = ap.parse_args()
    import distributed

    size = a.file.stat().st_size
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        single = Mixedgram.train(a.file)
        t_single = time.perf_counter() - t
        single.save(Path(d) / "single.mxgram")
        with (
            distributed.LocalCluster(
                n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            t = time.perf_counter()
            dist = Mixedgram.train(a.file, client=client, partition_bytes=int(a.partition_mb * 1e6))
            t_dist = time.perf_counter() - t
        dist.save(Path(d) / "dist.mxgram")
        same = (Path(d) / "single.mxgram").read_bytes() == (Path(d) / "dist.mxgram").read_bytes()
    print(
        f"{size / 1e6:.1f} MB: single machine {t_single:.2f} s; LocalCluster({a.workers}) {t_dist:.2f} s; "
        f".mxgram identical: {same}"
    )


if __name__ == "__main__":
    main()
