"""Long runs of one character: is every BPE step linear in the token length?

A web or code corpus holds runs of one character (rules of ``=`` or ``-``,
base64 padding, minified files). BPE training turns a run of L characters
into tokens of up to ~L bytes, and every step that handles tokens must stay
linear (or n log n) in their bytes. This script puts one run of 10 K, 100 K
and 1 M identical characters into a normal corpus (a few MB of the built-in
default corpus, :mod:`tokenforge.data.default_corpus`) and times:

* ``train``          BPETokenizer.train on corpus + run (GPT-4 pattern: the run is one piece)
* ``load``           BPETokenizer.load of the saved tokenforge JSON
* ``save_hf``        writing the Hugging Face tokenizer.json
* ``from_tiktoken``  reading the ``.tiktoken`` file that ``save_tiktoken`` wrote
* ``word run``       training on the run alone as one word (``pattern=None``)
* ``word text``      training on L bytes of corpus text without whitespace as one word (``pattern=None``)

and prints, per step, the ratio between consecutive sizes: 10x the length
should cost at most ~10x the time (here most of the time is the corpus, so
the ratios are close to 1 when nothing is quadratic). The row "0" is the
corpus alone. Not a test; no pass/fail, only numbers::

    python bench/robustness.py                  # 2 MB corpus, vocabulary 8192, '=' runs
    python bench/robustness.py --mb 5 --char - --sizes 10000,100000,1000000,3000000

Not handled: peak memory (see bench/bpe.py for that) and other families.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from tokenforge import BPETokenizer  # noqa: E402
from tokenforge.data.default_corpus import iter_default_corpus  # noqa: E402

STEPS = ("train", "load", "save_hf", "from_tiktoken", "word run", "word text")


def corpus(mb: float) -> list[str]:
    docs, size = [], 0
    for doc in iter_default_corpus():
        docs.append(doc)
        size += len(doc.encode("utf-8"))
        if size >= mb * 1e6:
            break
    return docs


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(docs: list[str], text: str, run: str, vocab: int, repeat: int, tmp: Path) -> tuple[dict, int]:
    out = {}
    holder = {}

    def train():
        holder["tok"] = BPETokenizer.train_from_iterator(docs + ([run] if run else []), vocab, progress=False)

    out["train"] = best(train, repeat)
    tok = holder["tok"]
    longest = max(len(tok._model.id_bytes(i) or b"") for i in range(tok.vocab_size))
    tok.save(tmp / "tok.json")
    out["load"] = best(lambda: BPETokenizer.load(tmp / "tok.json"), repeat)
    out["save_hf"] = best(lambda: tok.save_hf(tmp / "tokenizer.json"), repeat)
    tok.save_tiktoken(tmp / "tok.tiktoken")
    out["from_tiktoken"] = best(lambda: BPETokenizer.from_tiktoken(tmp / "tok.tiktoken", pattern="gpt4"), repeat)
    n = len(run)
    if n:
        # a run alone learns only ~log2(n) merges; the warning about fewer merges than asked is expected
        warnings.simplefilter("ignore")
        word_vocab = min(vocab, 4096)
        out["word run"] = best(
            lambda: BPETokenizer.train_from_iterator(
                [run], word_vocab, pattern=None, special_tokens=None, progress=False
            ),
            repeat,
        )
        out["word text"] = best(
            lambda: BPETokenizer.train_from_iterator(
                [text[:n]], word_vocab, pattern=None, special_tokens=None, progress=False
            ),
            repeat,
        )
    return out, longest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=2.0, help="MB of the default corpus (default 2)")
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--char", default="=", help="the repeated character (default '=')")
    ap.add_argument("--sizes", default="10000,100000,1000000", help="run lengths, comma-separated")
    ap.add_argument("--repeat", type=int, default=1, help="best of N timings per step")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    docs = corpus(args.mb)
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    # one long word of real text: the corpus without whitespace
    text = "".join("".join(d.split()) for d in docs)
    while len(text) < max(sizes):
        text += text
    print(
        f"corpus: {len(docs)} documents, {mb:.1f} MB of the default corpus; vocabulary {args.vocab_size}; "
        f"runs of {args.char!r}; best of {args.repeat}"
    )
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for n in [0] + sizes:
            run = args.char * n
            rows[n], longest = measure(docs, text, run, args.vocab_size, args.repeat, Path(d))
            cells = "  ".join(f"{s} {rows[n][s]:7.3f}s" for s in STEPS if s in rows[n])
            print(f"{n:>9,}  longest token {longest:>9,} B  {cells}", flush=True)
    print("\nratio of times between consecutive sizes (10x the length):")
    for a, b in zip(sizes, sizes[1:]):
        cells = "  ".join(f"{s} {rows[b][s] / max(rows[a][s], 1e-9):6.2f}x" for s in STEPS)
        print(f"{a:>9,} -> {b:>9,}  {cells}")
    worst = max(rows[b][s] / max(rows[a][s], 1e-9) for a, b in zip(sizes, sizes[1:]) for s in STEPS)
    print(f"\nlargest ratio: {worst:.2f}x (linear: at most ~10x per 10x)")


if __name__ == "__main__":
    main()
