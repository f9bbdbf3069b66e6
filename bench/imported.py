"""Encode speed of imported tokenizers against the libraries that made them.

    python bench/imported.py                       # 1 MB measured, models trained on 4 MB
    python bench/imported.py --mb 2 --train-mb 8 --threads 2 --repeat 7

The same model file and the same text on both sides: a SentencePiece unigram
``.model`` (sentencepiece's ``encode`` against ``tokenforge.load`` of that
file), and tokenizer.json files of a Unigram (Metaspace), the SentencePiece
model converted as T5's file was (its charsmap as a ``Precompiled`` normalizer,
tests/spm_convert.py) and a WordPiece (BERT's pipeline) model (``tokenizers``' ``encode(..., add_special_tokens=False)``
against tokenforge). Each model runs in its own child process
(``common.run_function``) holding both sides, which are timed interleaved
(``common.interleaved``: every run once per round, back to back, ``--repeat``
rounds, the best time of each kept), so a burst of load on the shared machine
meets both sides alike. "1 thread" encodes the documents one call at a time,
"batch" hands the whole list to the library's batch call with ``--threads``
threads (sentencepiece ``num_threads``, tokenizers ``encode_batch`` under
``RAYON_NUM_THREADS``, tokenforge ``encode_batch(num_threads=)``). For the
tokenizer.json models two more rows say where tokenforge's time goes: the
Python stages before the model (normalizer, pre-tokenizer) and the Rust model
alone on their words. Before timing, the child checks that tokenforge's ids
equal the reference's on the first 200 documents. The load average is printed
before and after. ``--instructions`` also counts, with valgrind's callgrind,
the instructions per byte of each side encoding the text one document at a
time on one thread (a child encoding it twice minus one encoding it once): a
figure the shared machine's load does not move (a few minutes: each child runs
about 50 times slower under valgrind).

Text: the benchmark corpus (``bench/data/corpus/train_50mb.txt``, see
``build_corpus.py``) when it exists, else this Python's standard library
(``tokenforge.data.default_corpus``), cut into documents of about 4 KB; the
training text comes first, the measured text after it. Models and text are
written under ``bench/data/imported/``.

Measured (1 MB of the default corpus, vocab 8,000, 2 cores at load 8-13 from other
work): instructions per byte on one thread, reference / tokenforge: spm unigram
396 / 256 (1.55x fewer), hf unigram 3,615 / 1,247 (2.90x), hf wordpiece 3,850 /
1,789 (2.15x). Wall clock, interleaved, two runs: 1 thread 1.27-3.26x (spm),
4.0-4.5x (hf unigram), 1.41-1.74x (hf wordpiece) faster; batch on 2 threads
1.39-3.35x, 2.1-4.2x, 1.00-2.69x. tokenforge's time on a tokenizer.json goes to
the Python stages before the model (3.4-8.2 MB/s; the Rust model alone 17-53 MB/s),
which also hold the GIL in a batch.

The T5-style row (``--mb 0.5 --train-mb 2 --repeat 3``, default corpus, load 12-13):
tokenizers 1.66 MB/s one thread, 1.12 batch; tokenforge 4.87 (2.93x) and 3.74
(3.33x); its stages before the model (the Precompiled normalizer in Rust, Strip,
Replace and Metaspace in Python) 7.6 MB/s, the model alone 14.2 MB/s.

Not handled: the speed of loading the files; vocabularies larger than
``--vocab`` (8,000 by default).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CorpusMissing, interleaved, load_text, run_function, split_docs, text_mb  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "imported"


def _text(mb: float) -> tuple[str, str]:
    try:
        return "bench corpus train_50mb", load_text("train_50mb", mb=mb)
    except CorpusMissing:
        from tokenforge.data.default_corpus import iter_default_corpus

        return "Python standard library (default corpus)", "\n\n".join(iter_default_corpus(max_bytes=int(mb * 1e6)))


def prepare(train_mb: float, mb: float, vocab: int) -> str:
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    DATA.mkdir(parents=True, exist_ok=True)
    source, text = _text(train_mb + mb)
    cut = len(text.encode()[: int(train_mb * 1e6)].decode("utf-8", "ignore"))
    train_docs, test_docs = split_docs(text[:cut]), split_docs(text[cut:])
    (DATA / "test.txt").write_text("\x00".join(test_docs), encoding="utf-8")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(train_docs),
        model_writer=out,
        vocab_size=vocab,
        minloglevel=2,
        num_threads=2,
        max_sentence_length=1 << 16,
    )
    (DATA / "unigram.model").write_bytes(out.getvalue())
    # the same model as a T5-style tokenizer.json: its charsmap as a Precompiled normalizer
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from spm_convert import converted_tokenizer

    converted_tokenizer(out.getvalue()).save(str(DATA / "t5.json"))
    uni = Tokenizer(models.Unigram())
    uni.normalizer = normalizers.NFKC()
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    uni.decoder = decoders.Metaspace()
    uni.train_from_iterator(
        train_docs,
        trainers.UnigramTrainer(vocab_size=vocab, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False),
    )
    uni.save(str(DATA / "unigram.json"))
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer()
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(
        train_docs, trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=["[UNK]"], show_progress=False)
    )
    wp.save(str(DATA / "wordpiece.json"))
    return source


# ---- children -----------------------------------------------------------------
def setup(model: str, threads: int):
    """Both sides on one model: the reference library and tokenforge's load of the
    same file; each side's ids checked against the reference on 200 documents."""
    import tokenforge

    docs = (DATA / "test.txt").read_text(encoding="utf-8").split("\x00")
    path = str(DATA / model)
    if model.endswith(".model"):
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=path)
        ref_one, ref_batch = sp.encode, (lambda ds: sp.encode(ds, num_threads=threads))
    else:
        from tokenizers import Tokenizer

        t = Tokenizer.from_file(path)
        ref_one = lambda d: t.encode(d, add_special_tokens=False).ids  # noqa: E731
        ref_batch = lambda ds: t.encode_batch(ds, add_special_tokens=False)  # noqa: E731
    tok = tokenforge.load(path)
    runs = {
        "ref 1 thread": lambda: [ref_one(d) for d in docs],
        "ours 1 thread": lambda: [tok.encode(d) for d in docs],
        "ref batch": lambda: ref_batch(docs),
        "ours batch": lambda: tok.encode_batch(docs, num_threads=threads),
    }
    pipe = tok._pipe
    if hasattr(pipe, "words"):
        # where tokenforge's time goes on a tokenizer.json: the Python stages before
        # the model (normalizer, pre-tokenizer) against the Rust model on their words
        words = [pipe.words(d) for d in docs]
        runs["ours stages before the model"] = lambda: [pipe.words(d) for d in docs]
        runs["ours model alone"] = lambda: [pipe.model.encode_words(w) for w in words]
    want = [list(ref_one(d)) for d in docs[:200]]
    got = [tok.encode(d) for d in docs[:200]]
    if got != want:
        bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        raise AssertionError(f"ids differ from the reference on document {bad}")
    return {"runs": runs}


def _instructions_child(model: str, side: str, rounds: int) -> None:
    """Load one side and encode the measured documents ``rounds`` times, one call each
    (run under ``perf stat``; see :func:`instructions`)."""
    docs = (DATA / "test.txt").read_text(encoding="utf-8").split("\x00")
    path = str(DATA / model)
    if side == "tokenforge":
        import tokenforge

        one = tokenforge.load(path).encode
    elif model.endswith(".model"):
        import sentencepiece as spm

        one = spm.SentencePieceProcessor(model_file=path).encode
    else:
        from tokenizers import Tokenizer

        t = Tokenizer.from_file(path)
        one = lambda d: t.encode(d, add_special_tokens=False).ids  # noqa: E731
    one(docs[0])
    for _ in range(rounds):
        for d in docs:
            one(d)


def instructions(model: str, side: str) -> float | None:
    """Instructions of encoding the measured text once on one thread: callgrind's
    count for a child that encodes it twice minus one that encodes it once
    (start-up and loading cancel). A count, not a time: the machine's load does not
    move it. None when valgrind is missing or fails."""
    import subprocess

    counts = []
    for rounds in (1, 2):
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--child"]
        try:
            r = subprocess.run([*cmd, model, side, str(rounds)], capture_output=True, text=True)
        except OSError:
            return None
        line = next((x for x in r.stderr.splitlines() if "Collected :" in x), "")
        try:
            counts.append(float(line.split(":")[-1]))
        except ValueError:
            return None
    return counts[1] - counts[0]


def one_round(state):
    """One interleaved round: every run once, back to back (common.interleaved)."""
    return interleaved(state, state["runs"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="MB of text measured")
    ap.add_argument("--train-mb", type=float, default=4.0, help="MB of text the models are trained on")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (the best of each run is kept)")
    ap.add_argument("--reuse", action="store_true", help="measure the models and text of the last run again")
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="also count each side's instructions per byte on one thread (callgrind; load-independent)",
    )
    args = ap.parse_args()
    source = "the last run's text (--reuse)" if args.reuse else prepare(args.train_mb, args.mb, args.vocab)
    mb = text_mb("".join((DATA / "test.txt").read_text(encoding="utf-8").split("\x00")))
    rows = [
        ("unigram.model", "sentencepiece", "spm unigram"),
        ("unigram.json", "tokenizers", "hf unigram"),
        ("t5.json", "tokenizers", "hf t5-style"),
        ("wordpiece.json", "tokenizers", "hf wordpiece"),
    ]
    env = {"RAYON_NUM_THREADS": str(args.threads)}
    load = os.getloadavg()
    print(f"text: {source}, {mb:.2f} MB measured; vocab {args.vocab}; batch with {args.threads} threads")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    print(f"{'model':14} {'run':30} {'MB/s':>8} {'ours / reference':>17}")
    for model, ref, label in rows:
        r = run_function(
            one_round, model, args.threads, setup=setup, group=label, tool="both", repeat=args.repeat, env=env
        )
        if not r.ok:
            print(f"{label:14} failed: {r.error or r.timeout}")
            continue
        best = {k[5:]: v for k, v in r.extra.items() if k.startswith("best_")}
        for name, sec in best.items():
            who = name.replace("ref", ref, 1) if name.startswith("ref") else name.replace("ours", "tokenforge", 1)
            ratio = ""
            if name.startswith("ours") and ("ref" + name[4:]) in best:
                ratio = f"{best['ref' + name[4:]] / sec:.2f}x faster" if sec else ""
            print(f"{label:14} {who:30} {mb / sec:8.2f} {ratio:>17}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.instructions:
        nbytes = mb * 1e6
        print(f"{'model':14} {'1 thread, instructions/byte':>28} {'reference':>10} {'tokenforge':>10} {'ratio':>7}")
        for model, ref, label in rows:
            theirs, ours = instructions(model, ref), instructions(model, "tokenforge")
            if theirs is None or ours is None:
                print(f"{label:14} perf stat could not count instructions")
                continue
            print(f"{label:14} {'':>28} {theirs / nbytes:10.1f} {ours / nbytes:10.1f} {theirs / ours:6.2f}x")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    if sys.argv[1:2] == ["--child"]:
        _instructions_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
