#!/usr/bin/env python3
"""The cost of parity-aware BPE training against plain BPE on the same text.

Both train on the Debian multilingual set (``python bench/build_corpus.py
--multilingual DIR``): plain BPE on every training document, parity BPE on the
same documents per language, with ``tokenforge compare``'s ``bpe:parity`` dev
text (each language's training units parallel to English, sized by the English
bytes; :func:`tokenforge.bpe_parity.compare_parity_inputs`). The timed call is
the whole ``train_from_iterator`` (counting, then merging); each run is a fresh
child process (bench/common.py), so peak RSS is each trainer's own. The texts are
loaded in the untimed setup and count in the peak (the same for both).

Usage::

    python bench/parity.py --data bench/data/multilingual --vocab 8192 32768 --repeat 3
    python bench/parity.py --vocab 32768 --tools plain parity levelup excess group shared

Not handled: Dask (``client=``) timings; the per-language counting is
sequential over languages (each count is parallel inside).
"""

from __future__ import annotations

import argparse
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


#: the timed trainers: plain BPE, the paper's rule, and tokenforge's rules (issue 36)
TOOLS = {"plain": plain, "parity": parity, "levelup": levelup, "excess": excess, "group": group, "shared": shared}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="bench/data/multilingual", help="the --multilingual directory")
    ap.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--tools", nargs="+", default=["plain", "parity"], choices=sorted(TOOLS), help="default: plain parity"
    )
    args = ap.parse_args(argv)
    data = str(Path(args.data).resolve())
    mb = (Path(data) / "train.jsonl").stat().st_size / 1e6
    b = Bench("parity", baseline="plain")
    for vocab in args.vocab:
        for tool in args.tools:
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
