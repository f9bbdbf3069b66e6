"""Encode speed of imported tokenizers against the libraries that made them.

    python bench/imported.py                       # 1 MB measured, models trained on 4 MB
    python bench/imported.py --mb 2 --train-mb 8 --threads 2

The same model file and the same text on both sides: a SentencePiece unigram
``.model`` (sentencepiece's ``encode`` against ``tokenforge.load`` of that
file), and tokenizer.json files of a Unigram (Metaspace) and a WordPiece (BERT's
pipeline) model (``tokenizers``' ``encode(..., add_special_tokens=False)``
against tokenforge). Each row runs in its own child process
(``common.run_function``), best of ``--repeat``; "1 thread" encodes the
documents one call at a time, "batch" hands the whole list to the library's
batch call with ``--threads`` threads (sentencepiece ``num_threads``,
tokenizers ``encode_batch`` under ``RAYON_NUM_THREADS``, tokenforge
``encode_batch(num_threads=)``). Before timing, each child checks that its ids
equal the reference's on the first 200 documents.

Text: the benchmark corpus (``bench/data/corpus/train_50mb.txt``, see
``build_corpus.py``) when it exists, else this Python's standard library
(``tokenforge.data.default_corpus``), cut into documents of about 4 KB; the
training text comes first, the measured text after it. Models and text are
written under ``bench/data/imported/``.

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

from common import Bench, CorpusMissing, load_text, run_function, split_docs, text_mb  # noqa: E402

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
def setup(tool: str, model: str, threads: int):
    import tokenforge

    docs = (DATA / "test.txt").read_text(encoding="utf-8").split("\x00")
    path = str(DATA / model)
    if tool == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=path)
        ref = sp
        one, batch = sp.encode, (lambda ds: sp.encode(ds, num_threads=threads))
    elif tool == "tokenizers":
        from tokenizers import Tokenizer

        t = Tokenizer.from_file(path)
        ref = t
        one = lambda d: t.encode(d, add_special_tokens=False).ids  # noqa: E731
        batch = lambda ds: t.encode_batch(ds, add_special_tokens=False)  # noqa: E731
    else:
        tok = tokenforge.load(path)
        one, batch = tok.encode, (lambda ds: tok.encode_batch(ds, num_threads=threads))
        ref = None
    if ref is not None or tool == "tokenforge":
        _check(model, one, docs[:200])
    return {"docs": docs, "one": one, "batch": batch}


def _check(model: str, one, docs) -> None:
    """The ids equal the reference library's on these documents (else the row fails)."""
    if model.endswith(".model"):
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(DATA / model))
        want = [sp.encode(d) for d in docs]
    else:
        from tokenizers import Tokenizer

        t = Tokenizer.from_file(str(DATA / model))
        want = [t.encode(d, add_special_tokens=False).ids for d in docs]
    got = [list(one(d)) for d in docs]
    if got != want:
        bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        raise AssertionError(f"ids differ from the reference on document {bad}")


def encode_each(state):
    one = state["one"]
    return {"ids": sum(len(one(d)) for d in state["docs"])}


def encode_batch(state):
    return {"texts": len(state["batch"](state["docs"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="MB of text measured")
    ap.add_argument("--train-mb", type=float, default=4.0, help="MB of text the models are trained on")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    source = prepare(args.train_mb, args.mb, args.vocab)
    mb = text_mb("".join((DATA / "test.txt").read_text(encoding="utf-8").split("\x00")))
    rows = [
        ("unigram.model", "sentencepiece", "spm unigram"),
        ("unigram.json", "tokenizers", "hf unigram"),
        ("wordpiece.json", "tokenizers", "hf wordpiece"),
    ]
    baselines = {}
    for _, ref, label in rows:
        baselines[f"{label} 1 thread"] = ref
        baselines[f"{label} batch"] = ref
    b = Bench("imported", baselines=baselines, meta={"text": source, "vocab": args.vocab, "threads": args.threads})
    env = {"RAYON_NUM_THREADS": str(args.threads)}
    for model, ref, label in rows:
        for tool in (ref, "tokenforge"):
            for fn, how in ((encode_each, "1 thread"), (encode_batch, "batch")):
                b.add(
                    run_function(
                        fn,
                        tool,
                        model,
                        args.threads,
                        setup=setup,
                        group=f"{label} {how}",
                        tool=tool,
                        mb=mb,
                        repeat=args.repeat,
                        env=env,
                    )
                )
    print(f"text: {source}, {mb:.2f} MB measured; vocab {args.vocab}; batch with {args.threads} threads")
    b.print_table()
    b.save()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
