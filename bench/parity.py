#!/usr/bin/env python3
"""The cost of parity-aware BPE training against plain BPE on the same text.

Both train on the Debian multilingual set (``python bench/build_corpus.py
--multilingual DIR``): plain BPE on every training document, parity BPE on the
same documents per language, with ``tokenforge compare``'s ``bpe:parity`` dev
text (each language's training units parallel to English, sized by the English
bytes; :func:`tokenforge.bpe_parity.compare_parity_inputs`). The timed call is
the whole ``train_from_iterator`` (counting, then merging).

The tools are timed interleaved: one child process per vocabulary size loads
the text once, then runs every tool once a round, ``--repeat`` rounds, keeping
each tool's best wall time and best CPU time (the process's, all threads); a
burst of load on the shared machine then meets every tool alike, and the CPU
times, which load barely moves, give the ratios a second reading. The load
average is printed before and after each size. ``--separate`` instead runs
each tool in its own child (bench/common.py), which also gives each its own
peak memory.

Usage::

    python bench/parity.py --data bench/data/multilingual --vocab 8192 32768 --repeat 3
    python bench/parity.py --vocab 32768 --tools plain parity levelup excess group shared shared_global discount lift devlift

Not handled: Dask (``client=``) timings; the per-language counting is
sequential over languages (each count is parallel inside).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Bench, run_function  # noqa: E402


def setup(data: str, vocab: int, threads: int | None):
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import TrainLanguages, read_language_documents

    docs = read_language_documents(Path(data) / "train.jsonl")
    corpus, dev, sizes = compare_parity_inputs(TrainLanguages(tuple(docs), "en"), "parallel")
    texts = [d.text for d in docs]
    return {"texts": texts, "corpus": corpus, "dev": dev, "sizes": sizes, "vocab": vocab, "threads": threads}


def plain(state) -> dict:
    from tokenforge import BPETokenizer

    tok = BPETokenizer.train_from_iterator(state["texts"], state["vocab"], num_threads=state["threads"], progress=False)
    return {"merges": len(tok.merges)}


def parity(state, **rule) -> dict:
    from tokenforge import BPETokenizer

    tok = BPETokenizer.train_from_iterator(
        state["corpus"],
        state["vocab"],
        parity=state["dev"],
        parity_measure=state["sizes"],
        num_threads=state["threads"],
        progress=False,
        **rule,
    )
    return {"merges": len(tok.merges)}


def levelup(state) -> dict:
    return parity(state, parity_rule="levelup", parity_reference="en", parity_tolerance=0.1)


def excess(state) -> dict:
    return parity(state, parity_rule="excess", parity_reference="en", parity_gain=16.0)


def group(state) -> dict:
    return parity(state, parity_rule="group", parity_reference="en", parity_shared=2.0, parity_gain=1.0)


def shared(state) -> dict:
    return parity(state, parity_shared=2.0)


def shared_global(state) -> dict:
    return parity(state, parity_shared=1.5, parity_global_merges=0.25)


def banded(state, rule: str, gain: float, shared: float, global_merges: float) -> dict:
    # a rule that picks from the shared-pair band, English the reference
    return parity(
        state,
        parity_rule=rule,
        parity_reference="en",
        parity_gain=gain,
        parity_shared=shared,
        parity_global_merges=global_merges,
    )


def discount(state) -> dict:
    # the frontier's marked discount point (docs/results/parity-frontier/frontier.md)
    return banded(state, "discount", 0.5, 2.0, 0.1)


def lift(state) -> dict:
    return banded(state, "lift", 1.0, 1.45, 0.15)


def devlift(state) -> dict:
    return banded(state, "devlift", 1.0, 1.6, 0.1)


#: the timed trainers: plain BPE, the paper's rule, and tokenforge's rules (issue 36)
TOOLS = {
    "plain": plain,
    "parity": parity,
    "levelup": levelup,
    "excess": excess,
    "group": group,
    "shared": shared,
    "shared_global": shared_global,
    "discount": discount,
    "lift": lift,
    "devlift": devlift,
}


def interleaved_rounds(state, tools: list[str], repeat: int) -> dict:
    """Every tool once a round, ``repeat`` rounds: per tool, the best wall and CPU seconds."""
    import gc
    import os
    import time

    best: dict[str, list[float]] = {}
    load = [os.getloadavg()[0]]
    for _ in range(repeat):
        for tool in tools:
            gc.collect()
            t, c = time.perf_counter(), time.process_time()
            TOOLS[tool](state)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            b = best.setdefault(tool, [wall, cpu])
            best[tool] = [min(b[0], wall), min(b[1], cpu)]
    load.append(os.getloadavg()[0])
    return {"best": best, "load": load}


def _interleaved_run(state) -> dict:
    return interleaved_rounds(state, state["tools"], state["repeat"])


def _interleaved_setup(data: str, vocab: int, threads: int | None, tools: list[str], repeat: int):
    return {**setup(data, vocab, threads), "tools": tools, "repeat": repeat}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="bench/data/multilingual", help="the --multilingual directory")
    ap.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--tools", nargs="+", default=["plain", "parity"], choices=sorted(TOOLS), help="default: plain parity"
    )
    ap.add_argument("--separate", action="store_true", help="each tool in its own child (not interleaved)")
    args = ap.parse_args(argv)
    data = str(Path(args.data).resolve())
    mb = (Path(data) / "train.jsonl").stat().st_size / 1e6
    tools = ["plain", *[t for t in args.tools if t != "plain"]]
    if not args.separate:
        for vocab in args.vocab:
            res = run_function(
                _interleaved_run,
                data,
                vocab,
                args.threads,
                tools,
                args.repeat,
                setup=_interleaved_setup,
                group=f"train-{vocab}",
                tool="interleaved",
                mb=mb,
            )
            if not res.ok:
                print(f"{vocab} ids: failed: {res.error}")
                continue
            best, load = res.extra["best"], res.extra["load"]
            print(
                f"\n{vocab:,} ids, best of {args.repeat} interleaved rounds "
                f"(1-minute load {load[0]:.1f} before, {load[1]:.1f} after, {os.cpu_count()} CPUs)"
            )
            print(f"{'tool':14s} {'wall s':>8s} {'x plain':>8s} {'CPU s':>8s} {'x plain':>8s}")
            w0, c0 = best["plain"]
            for tool in tools:
                w, c = best[tool]
                print(f"{tool:14s} {w:8.2f} {w / w0:8.2f} {c:8.2f} {c / c0:8.2f}")
        return 0
    b = Bench("parity", baseline="plain")
    for vocab in args.vocab:
        for tool in tools:
            fn = TOOLS[tool]
            b.add(
                run_function(
                    fn,
                    data,
                    vocab,
                    args.threads,
                    setup=setup,
                    group=f"train-{vocab}",
                    tool=tool,
                    mb=mb,
                    repeat=args.repeat,
                )
            )
    b.print_table()
    b.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
