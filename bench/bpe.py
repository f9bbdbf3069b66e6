"""BPE benchmark: tokenforge against rustbpe, Hugging Face tokenizers, sentencepiece and tiktoken.

Usage::

    python bench/build_corpus.py                  # once: the corpus (bench/data/corpus)
    python bench/bpe.py --quick                   # smoke run: 5 MB, 4,096 vocab, small inputs
    python bench/bpe.py                           # full: 50 MB, 32,768 vocab
    python bench/bpe.py --only train,parity       # parts: train, encode, batch, patho, parity
    python bench/bpe.py --pattern o200k           # every tool splits with tiktoken's o200k pattern
    python bench/bpe.py --skip sentencepiece,hf   # leave peers out
    python bench/bpe.py --spm-mb 10               # sentencepiece on a smaller slice

Every measurement runs in its own child process (bench/common.py), so the peak
RSS reported is that tool's own. Parts:

train   Train a ``--vocab`` vocabulary on the first ``--mb`` MB of the training
        text with tokenforge (``num_threads=--threads``), rustbpe, HF tokenizers
        (byte-level BPE, same split regex) and sentencepiece (BPE with byte
        fallback, from a text file; ``--spm-mb`` gives it a smaller slice).
        Each tool's module is imported before timing (import is not training).
        Iterator-based trainers get the same documents: the text cut at
        paragraph breaks into pieces of about ``--doc-kb`` KB. All use the same
        split pattern: ``--pattern gpt4`` (default), nanochat's (:data:`PATTERN`,
        numbers of 1-2 digits), or ``--pattern o200k``, tiktoken's o200k_base
        ``pat_str`` (read from the installed tiktoken; tokenforge gets the name). Throughput is
        MB/s of training text, so a smaller sentencepiece slice stays comparable.
encode  Single-thread ``encode_ordinary`` of ``--encode-mb`` MB of held-out text
        as one string: tokenforge vs tiktoken (an ``Encoding`` built from the
        tokenforge-trained ranks, or rustbpe's when tokenforge is missing).
batch   The same text as ~4 KB documents: tokenforge ``encode_batch`` on 1 and
        ``--threads`` threads, tiktoken ``encode_ordinary_batch``, HF
        ``encode_batch`` (an HF tokenizer built from the same ranks). The
        scaling target (2 threads >= 1.8x our 1 thread) is taken from the
        ``batch-scaling`` row, which times 1 and 2 threads back to back in one
        process, round after round (``common.interleaved``).
patho   ``"a" * N`` and N random letters and punctuation without whitespace
        (seeded), N = 1,000,000 (``--patho-mb``): tokenforge and tiktoken, each
        call in a child killed after ``--patho-timeout`` seconds ("> N s").
parity  tokenforge's merges equal rustbpe's (same corpus, vocabulary and
        pattern) and tokenforge's ids equal tiktoken's on the held-out text.

If ``import tokenforge`` fails (or has no ``BPETokenizer``), the peers still run
and tiktoken/HF encode with rustbpe's ranks. Results: one table with ratios
against tokenforge and the acceptance targets beside them, parity PASS/FAIL,
and ``bench/results/bpe_<time>.json``. Trained vocabularies are cached in
``bench/data/bpe/`` for the encode parts.
"""

from __future__ import annotations

import argparse
import base64
import inspect
import json
import os
import random
import shutil
import string
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    BENCH_DIR,
    CORPUS_DIR,
    MB,
    Bench,
    CorpusMissing,
    interleaved,
    load_docs,
    load_text,
    run_function,
    split_docs,
    text_mb,
)

#: nanochat's split pattern: GPT-4's with numbers of at most 2 digits.
PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)


def o200k_pat_str() -> str:
    """tiktoken's o200k_base ``pat_str``, read from the installed tiktoken
    (its constructor, with the rank loader stubbed out: nothing is downloaded)."""
    from tiktoken_ext import openai_public

    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return openai_public.ENCODING_CONSTRUCTORS["o200k_base"]()["pat_str"]
    finally:
        openai_public.load_tiktoken_bpe = real


#: ``--pattern`` choices: our pattern name -> the regex string the peers get
#: (rustbpe, HF tokenizers and tiktoken take the regex text; tokenforge takes
#: the name, and would recognise the text too).
PATTERN_REGEX = {"gpt4": lambda: PATTERN, "o200k": o200k_pat_str}


def pattern_regex(name: str) -> str:
    return PATTERN_REGEX[name]()


CACHE = BENCH_DIR / "data" / "bpe"
#: rounds of the interleaved 1-thread / N-thread batch measurement (at least)
SCALING_ROUNDS = 40
TF_TOOLS = ("tokenforge",)
PEERS = ("rustbpe", "hf", "sentencepiece", "tiktoken")
PARTS = ("train", "encode", "batch", "patho", "parity")


# --------------------------------------------------------------------------
# inputs (run inside the children)
# --------------------------------------------------------------------------
def training_text(mb: float) -> str:
    if mb <= 50:
        return load_text("train_50mb", mb=mb)
    text = "\n\n".join(load_docs("train", mb=mb))
    return text.encode()[: int(mb * MB)].decode("utf-8", "ignore")


def setup_train(
    mb: float, vocab: int, threads: int, doc_kb: float, out_dir: str, tag: str, pattern: str = "gpt4"
) -> dict:
    text = training_text(mb)
    docs = split_docs(text, int(doc_kb * 1024))
    del text
    return {
        "docs": docs,
        "vocab": vocab,
        "threads": threads,
        "out_dir": out_dir,
        "tag": tag,
        "mb": mb,
        "pattern": pattern,
        "regex": pattern_regex(pattern),
    }


def setup_train_tokenforge(*args) -> dict:
    """``setup_train`` plus the import of tokenforge: module import is not
    training, for any tool (each trainer's setup imports its own module)."""
    import tokenforge  # noqa: F401

    return setup_train(*args)


def setup_train_rustbpe(*args) -> dict:
    import rustbpe  # noqa: F401

    return setup_train(*args)


def setup_train_hf(*args) -> dict:
    import tokenizers  # noqa: F401

    return setup_train(*args)


def setup_spm(
    mb: float, vocab: int, threads: int, doc_kb: float, out_dir: str, tag: str, pattern: str = "gpt4"
) -> dict:
    path = Path(out_dir) / f"spm_input_{mb:g}mb.txt"
    if not path.exists():
        path.write_text(training_text(mb), encoding="utf-8")
    return {"path": str(path), "vocab": vocab, "threads": threads, "out_dir": out_dir, "tag": tag, "mb": mb}


def heldout_text(mb: float) -> str:
    return load_text("heldout", mb=mb)


def save_ranks(ranks: dict[bytes, int], path: Path) -> None:
    """tiktoken's text format: base64 of the token's bytes, space, rank; one per line."""
    tmp = path.with_name(path.name + ".tmp")
    lines = (f"{base64.b64encode(t).decode('ascii')} {r}\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))
    tmp.write_text("".join(lines), encoding="ascii")
    os.replace(tmp, path)


def load_ranks(path) -> dict[bytes, int]:
    ranks = {}
    for line in Path(path).read_text(encoding="ascii").splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def ranks_path(tool: str, tag: str) -> Path:
    return CACHE / f"{tool}_{tag}.tiktoken"


def tf_model_path(tag: str) -> Path:
    return CACHE / f"tokenforge_{tag}"


# --------------------------------------------------------------------------
# training (timed functions; each runs in its own child)
# --------------------------------------------------------------------------
def tf_train_kwargs(threads: int, pattern: str = "gpt4") -> dict:
    """tokenforge.BPETokenizer.train keyword arguments: the documented ones, and
    no special tokens when the signature allows it (so that the number of
    merges is the same as the peers')."""
    import tokenforge

    kw = {"pattern": pattern, "num_threads": threads, "progress": False}
    try:
        params = inspect.signature(tokenforge.BPETokenizer.train).parameters
    except (TypeError, ValueError):
        params = {}
    if "special_tokens" in params:
        kw["special_tokens"] = []
    return kw


def train_tokenforge(st: dict) -> dict:
    import tokenforge

    tok = tokenforge.BPETokenizer.train_from_iterator(
        iter(st["docs"]), st["vocab"], **tf_train_kwargs(st["threads"], st["pattern"])
    )
    st["tok"] = tok
    return {"vocab_size": tok.vocab_size}


def after_tokenforge(st: dict) -> dict:
    tok = st["tok"]
    save_ranks(tok.mergeable_ranks(), ranks_path("tokenforge", st["tag"]))
    tok.save(tf_model_path(st["tag"]))
    return {}


def train_rustbpe(st: dict) -> dict:
    import rustbpe

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(st["docs"]), st["vocab"], pattern=st["regex"])
    st["tok"] = tok
    return {"vocab_size": tok.vocab_size}


def after_rustbpe(st: dict) -> dict:
    save_ranks(dict(st["tok"].get_mergeable_ranks()), ranks_path("rustbpe", st["tag"]))
    return {}


def train_hf(st: dict) -> dict:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(pattern=Regex(st["regex"]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=st["vocab"],
        min_frequency=0,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(iter(st["docs"]), trainer=trainer, length=len(st["docs"]))
    return {"vocab_size": tok.get_vocab_size()}


def train_spm(st: dict) -> dict:
    import sentencepiece as spm

    prefix = os.path.join(st["out_dir"], f"spm_{st['tag']}")
    spm.SentencePieceTrainer.train(
        input=st["path"],
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=st["vocab"],
        byte_fallback=True,
        character_coverage=0.9999,
        num_threads=st["threads"],
        input_sentence_size=0,
        shuffle_input_sentence=False,
        max_sentence_length=1 << 16,
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        split_digits=False,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    return {"vocab_size": sp.get_piece_size()}


# --------------------------------------------------------------------------
# encoders built from ranks
# --------------------------------------------------------------------------
def tiktoken_encoding(ranks: dict[bytes, int], pattern: str = "gpt4"):
    import tiktoken

    return tiktoken.Encoding("bench", pat_str=pattern_regex(pattern), mergeable_ranks=ranks, special_tokens={})


def hf_tokenizer(ranks: dict[bytes, int], pattern: str = "gpt4"):
    """An HF byte-level BPE tokenizer with the vocabulary of ``ranks``, built
    by tokenforge's own tokenizer.json exporter (the one the parity check tests)."""
    import json

    from tokenizers import Tokenizer

    from tokenforge.formats.hf_json import hf_json_dict
    from tokenforge.formats.tiktoken_io import data_from_ranks

    return Tokenizer.from_str(json.dumps(hf_json_dict(data_from_ranks(ranks, pattern_regex(pattern)))))


def load_tokenforge(tag: str):
    import tokenforge

    return tokenforge.load(tf_model_path(tag))


# --------------------------------------------------------------------------
# encoding (setup builds the encoder and the input; the fn is timed)
# --------------------------------------------------------------------------
def patho_text(kind: str, mb: float) -> str:
    n = int(mb * MB)
    if kind == "repeat":
        return "a" * n
    rng = random.Random(1234)
    return "".join(rng.choices(string.ascii_letters + string.punctuation, k=n))


def setup_encode(
    tool: str, ranks_file: str, tag: str, input_kind: str, mb: float, threads: int, pattern: str = "gpt4"
) -> dict:
    if input_kind in ("text", "docs"):
        text = heldout_text(mb)
        data = text if input_kind == "text" else split_docs(text, 4096)
    else:
        data = patho_text(input_kind, mb)
    if tool.startswith("tokenforge"):
        enc = load_tokenforge(tag)
    elif tool.startswith("tiktoken"):
        enc = tiktoken_encoding(load_ranks(ranks_file), pattern)
    elif tool.startswith("hf"):
        enc = hf_tokenizer(load_ranks(ranks_file), pattern)
    else:
        raise ValueError(tool)
    return {"enc": enc, "data": data, "threads": threads}


def enc_single(st: dict) -> dict:
    return {"tokens": len(st["enc"].encode_ordinary(st["data"]))}


def enc_tf_batch(st: dict) -> dict:
    out = st["enc"].encode_batch(st["data"], num_threads=st["threads"])
    return {"tokens": sum(map(len, out))}


def enc_tiktoken_batch(st: dict) -> dict:
    out = st["enc"].encode_ordinary_batch(st["data"], num_threads=st["threads"])
    return {"tokens": sum(map(len, out))}


def enc_hf_batch(st: dict) -> dict:
    tok = st["enc"]
    fast = getattr(tok, "encode_batch_fast", None)
    out = (fast or tok.encode_batch)(st["data"], add_special_tokens=False)
    return {"tokens": sum(len(e.ids) for e in out), "hf_method": "encode_batch_fast" if fast else "encode_batch"}


def enc_tf_scaling(st: dict) -> dict:
    """One round: our encode_batch on 1 thread, then on ``threads``, back to back."""
    enc, data, n = st["enc"], st["data"], st["threads"]
    best = interleaved(
        st,
        {"1t": lambda: enc.encode_batch(data, num_threads=1), f"{n}t": lambda: enc.encode_batch(data, num_threads=n)},
    )
    return {**best, "ratio": best["best_1t"] / best[f"best_{n}t"]}


def check_ids(tag: str, ranks_file: str, mb: float, pattern: str = "gpt4") -> dict:
    """tokenforge ids == tiktoken ids on held-out text, whole and as a batch."""
    text = heldout_text(mb)
    tf = load_tokenforge(tag)
    tk = tiktoken_encoding(load_ranks(ranks_file), pattern)
    a, b = tf.encode_ordinary(text), tk.encode_ordinary(text)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    docs = split_docs(text, 4096)
    batch_ok = [list(x) for x in tf.encode_batch(docs, num_threads=2)] == tk.encode_ordinary_batch(docs, num_threads=2)
    # the exported Hugging Face tokenizer.json, loaded by `tokenizers`, on the same text
    import tempfile

    from tokenizers import Tokenizer as HFTokenizer

    with tempfile.TemporaryDirectory() as d:
        tf.save_hf(f"{d}/tokenizer.json")
        hf = HFTokenizer.from_file(f"{d}/tokenizer.json")
    hf_ids = [i for e in hf.encode_batch(docs, add_special_tokens=False) for i in e.ids]
    hf_equal = hf_ids == [i for x in tf.encode_batch(docs) for i in x]
    return {
        "equal": first is None,
        "batch_equal": batch_ok,
        "hf_equal": hf_equal,
        "tokens_tokenforge": len(a),
        "tokens_tiktoken": len(b),
        "first_difference": first,
    }


def check_lexicographic(mb: float, merges: int) -> dict:
    """tie_break="lexicographic" merges == the slow pure-Python reference of seed 003's rule."""
    import tokenforge
    from tokenforge.reference import bpe as ref

    text = load_text("train_50mb", mb)
    counts = ref.count_words([text], ref.GPT2_PATTERN)
    want = [tuple(m) for m in ref.train_reference(counts, merges, tie_break="lexicographic")]
    got = tokenforge.BPETokenizer.train_from_iterator(
        [text], 256 + merges, pattern="gpt2", tie_break="lexicographic", special_tokens=None, progress=False
    ).merges
    return {"equal": got == want, "merges": len(got)}


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def corpus_id() -> str:
    """A short id of the corpus build (from MANIFEST.json), so cached vocabularies follow it."""
    try:
        man = json.loads((CORPUS_DIR / "MANIFEST.json").read_text())
        return man["files"]["train_50mb.txt"]["sha256"][:8]
    except (OSError, ValueError, KeyError):
        return "unknown"


def tokenforge_status() -> str | None:
    """None when tokenforge can be benchmarked, else why not."""
    try:
        import tokenforge
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return f"import tokenforge failed ({type(e).__name__}: {e})"
    if not hasattr(tokenforge, "BPETokenizer"):
        return "tokenforge has no BPETokenizer yet"
    return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 5 MB, 4,096 vocab, 2 MB encode, 0.1 MB pathological"
    )
    ap.add_argument("--mb", type=float, help="training text in MB (default 50; quick 5)")
    ap.add_argument("--vocab", type=int, help="vocabulary size (default 32768; quick 4096)")
    ap.add_argument("--spm-mb", type=float, help="sentencepiece's training text in MB (default: same as --mb)")
    ap.add_argument(
        "--encode-mb", type=float, help="held-out text to encode in MB (default 10, capped by heldout.txt; quick 2)"
    )
    ap.add_argument("--patho-mb", type=float, help="size of each pathological input in MB (default 1; quick 0.1)")
    ap.add_argument(
        "--patho-timeout", type=float, help="seconds before a pathological run is killed (default 60; quick 20)"
    )
    ap.add_argument(
        "--train-timeout", type=float, default=3600, help="seconds before a training run is killed (default 3600)"
    )
    ap.add_argument(
        "--pattern",
        choices=sorted(PATTERN_REGEX),
        default="gpt4",
        help="split pattern for every tool: gpt4 (nanochat's, default) or o200k (tiktoken's o200k_base pat_str)",
    )
    ap.add_argument("--threads", type=int, default=2, help="threads for the parallel runs (default 2)")
    ap.add_argument(
        "--doc-kb", type=float, default=4, help="document size fed to iterator-based trainers, KB (default 4)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="encode runs per measurement, best kept (default 3)")
    ap.add_argument("--train-repeat", type=int, default=1, help="training runs per tool, best kept (default 1)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts to run ({','.join(PARTS)})")
    ap.add_argument("--skip", default="", help=f"comma-separated tools to leave out (tokenforge,{','.join(PEERS)})")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/*.json")
    a = ap.parse_args(argv)
    q = a.quick
    a.mb = a.mb or (5 if q else 50)
    a.vocab = a.vocab or (4096 if q else 32768)
    a.spm_mb = a.spm_mb or a.mb
    a.encode_mb = a.encode_mb or (2 if q else 10)
    a.patho_mb = a.patho_mb or (0.1 if q else 1)
    a.patho_timeout = a.patho_timeout or (20 if q else 60)
    a.only = {p.strip() for p in a.only.split(",") if p.strip()}
    a.skip = {p.strip() for p in a.skip.split(",") if p.strip()}
    bad = (a.only - set(PARTS)) | (a.skip - set(PEERS) - set(TF_TOOLS))
    if bad:
        ap.error(f"unknown part or tool: {', '.join(sorted(bad))}")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        heldout_mb = text_mb(load_text("heldout"))
        load_text("train_50mb", mb=0.001)
    except CorpusMissing as e:
        print(e, file=sys.stderr)
        return 2
    encode_mb = min(a.encode_mb, heldout_mb)
    CACHE.mkdir(parents=True, exist_ok=True)
    tag = f"{a.mb:g}mb_v{a.vocab}_{corpus_id()}" + ("" if a.pattern == "gpt4" else f"_{a.pattern}")
    if "train" in a.only:  # this run's training results, never an older run's, feed the later parts
        for p in (ranks_path("tokenforge", tag), ranks_path("rustbpe", tag)):
            p.unlink(missing_ok=True)
        shutil.rmtree(tf_model_path(tag), ignore_errors=True)

    why_not = tokenforge_status() if "tokenforge" not in a.skip else "skipped with --skip"
    have_tf = why_not is None
    if not have_tf:
        print(f"NOTE: tokenforge is not benchmarked: {why_not}. Running the peers only.", file=sys.stderr)
    use = lambda tool: tool not in a.skip  # noqa: E731

    b = Bench(
        "bpe_quick" if a.quick else "bpe",
        baseline="tokenforge",
        baselines={"batch": "tokenforge-1t"},
        meta={
            "args": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(a).items()},
            "tokenforge": "ok" if have_tf else why_not,
            "encode_mb": encode_mb,
            "pattern": pattern_regex(a.pattern),
        },
    )
    print(
        f"BPE bench: train {a.mb:g} MB, vocab {a.vocab}, pattern {a.pattern}, {a.threads} threads, encode {encode_mb:.1f} MB held-out; "
        f"parts: {', '.join(p for p in PARTS if p in a.only)}",
        file=sys.stderr,
    )

    tmp = tempfile.TemporaryDirectory(prefix="tfbench-bpe-")
    targs = (a.mb, a.vocab, a.threads, a.doc_kb, tmp.name, tag, a.pattern)
    tenv = {
        "RAYON_NUM_THREADS": str(a.threads),
        "RAYON_RS_NUM_THREADS": str(a.threads),
        "TOKENIZERS_PARALLELISM": "true",
    }
    common_kw = dict(group="train", mb=a.mb, repeat=a.train_repeat, timeout=a.train_timeout, env=tenv)

    # ---- training ---------------------------------------------------------
    if "train" in a.only:
        if have_tf:
            b.add(
                run_function(
                    train_tokenforge,
                    *targs,
                    setup=setup_train_tokenforge,
                    after=after_tokenforge,
                    tool="tokenforge",
                    **common_kw,
                )
            )
        if use("rustbpe"):
            b.add(
                run_function(
                    train_rustbpe, *targs, setup=setup_train_rustbpe, after=after_rustbpe, tool="rustbpe", **common_kw
                )
            )
        if use("hf"):
            b.add(run_function(train_hf, *targs, setup=setup_train_hf, tool="hf", **common_kw))
        if use("sentencepiece"):
            spm_args = (a.spm_mb, *targs[1:])
            b.add(
                run_function(
                    train_spm, *spm_args, setup=setup_spm, tool="sentencepiece", **{**common_kw, "mb": a.spm_mb}
                )
            )

    # The encode parts and the parity check need trained vocabularies (this
    # run's, or cached ones for the same corpus, size and vocabulary); train
    # what is missing, untimed.
    encoding = bool(a.only & {"encode", "batch", "patho"})
    prep = dict(setup=setup_train, group="prep", timeout=a.train_timeout, env=tenv)
    trained_here = "train" in a.only  # if it failed above, do not try again
    if have_tf and (encoding or "parity" in a.only) and not trained_here and not ranks_path("tokenforge", tag).exists():
        print("  (training tokenforge for the encode parts)", file=sys.stderr)
        run_function(train_tokenforge, *targs, after=after_tokenforge, tool="tokenforge", **prep)
    tf_ok = have_tf and tf_model_path(tag).exists() and ranks_path("tokenforge", tag).exists()
    need_rb = (encoding and not tf_ok) or ("parity" in a.only and tf_ok and use("rustbpe"))
    if need_rb and not (trained_here and use("rustbpe")) and not ranks_path("rustbpe", tag).exists():
        print("  (training rustbpe for the encode parts / parity)", file=sys.stderr)
        run_function(train_rustbpe, *targs, after=after_rustbpe, tool="rustbpe", **prep)
    ranks_src = "tokenforge" if tf_ok else "rustbpe"
    rfile = str(ranks_path(ranks_src, tag))
    b.meta["encode_ranks_from"] = ranks_src

    def enc(fn, tool, group, kind, mb, threads=1, timeout=None, env=None, repeat=None):
        return b.add(
            run_function(
                fn,
                tool,
                rfile,
                tag,
                kind,
                mb,
                threads,
                a.pattern,
                setup=setup_encode,
                group=group,
                tool=tool,
                mb=mb,
                repeat=repeat or a.repeat,
                timeout=timeout,
                env=env,
            )
        )

    if not Path(rfile).exists() and a.only & {"encode", "batch", "patho"}:
        print(f"no trained ranks ({rfile}); skipping the encode parts", file=sys.stderr)
    else:
        # ---- single-thread encode -----------------------------------------
        if "encode" in a.only:
            if tf_ok:
                enc(enc_single, "tokenforge", "encode", "text", encode_mb)
            if use("tiktoken"):
                enc(enc_single, "tiktoken", "encode", "text", encode_mb)
        # ---- batch encode ------------------------------------------------
        if "batch" in a.only:
            benv = {
                "RAYON_NUM_THREADS": str(a.threads),
                "RAYON_RS_NUM_THREADS": str(a.threads),
                "TOKENIZERS_PARALLELISM": "true",
            }
            if tf_ok:
                enc(enc_tf_batch, "tokenforge-1t", "batch", "docs", encode_mb, 1)
                enc(enc_tf_batch, f"tokenforge-{a.threads}t", "batch", "docs", encode_mb, a.threads)
                # rounds are short (~0.06 s for 8.5 MB): many of them (~2.5 s in all), so the best
                # of each meets a quiet moment even when the host is busy for a second
                enc(
                    enc_tf_scaling,
                    f"tokenforge-1t|{a.threads}t",
                    "batch-scaling",
                    "docs",
                    encode_mb,
                    a.threads,
                    repeat=max(a.repeat, SCALING_ROUNDS),
                )
            if use("tiktoken"):
                enc(enc_tiktoken_batch, "tiktoken-1t", "batch", "docs", encode_mb, 1)
                enc(enc_tiktoken_batch, f"tiktoken-{a.threads}t", "batch", "docs", encode_mb, a.threads)
            if use("hf"):
                enc(enc_hf_batch, f"hf-{a.threads}t", "batch", "docs", encode_mb, a.threads, env=benv)
        # ---- pathological ------------------------------------------------
        if "patho" in a.only:
            for kind, group in (("repeat", "patho-aaaa"), ("random", "patho-nospace")):
                if tf_ok:
                    enc(enc_single, "tokenforge", group, kind, a.patho_mb, timeout=a.patho_timeout)
                if use("tiktoken"):
                    enc(enc_single, "tiktoken", group, kind, a.patho_mb, timeout=a.patho_timeout)

    # ---- parity --------------------------------------------------------------
    parity: list[tuple[str, str, str]] = []
    if "parity" in a.only:
        parity = run_parity(a, tag, tf_ok, encode_mb)
        b.meta["parity"] = parity

    # ---- targets ---------------------------------------------------------------
    b.target("train/rustbpe", "≥1.5x", b.speedup("train", "rustbpe"), 1.5)
    b.target("train/rustbpe", "mem ≤1x", b.mem_ratio("train", "rustbpe"), 1.0, higher_is_better=False)
    b.target("train/hf", "≥3x", b.speedup("train", "hf"), 3.0)
    b.target("encode/tiktoken", "≥1.5x", b.speedup("encode", "tiktoken"), 1.5)
    scaling = b.get("batch-scaling", f"tokenforge-1t|{a.threads}t")
    b.target(
        f"batch-scaling/tokenforge-1t|{a.threads}t",
        f"≥1.8x 1t (interleaved, best of {max(a.repeat, SCALING_ROUNDS)})",
        scaling.extra.get("ratio") if scaling and scaling.ok else None,
        1.8,
    )
    for group in ("patho-aaaa", "patho-nospace"):
        r = b.get(group, "tokenforge")
        b.target(f"{group}/tokenforge", "≥10 MB/s", r.mbps if r else None, 10.0, unit=" MB/s")

    b.print_table()
    if not have_tf:
        print(f"NOTE: tokenforge was not measured ({why_not}); ratios need it. Encoders used {ranks_src}'s ranks.")
    print(
        "targets: train ≥1.5x rustbpe and ≥3x HF, peak RSS ≤ rustbpe; encode ≥1.5x tiktoken (1 thread); "
        f"batch on {a.threads} threads ≥1.8x our 1 thread; pathological ≥10 MB/s"
    )
    for name, status, detail in parity:
        print(f"parity {name}: {status}  {detail}")
    if not a.no_save:
        b.save()
    tmp.cleanup()
    failed = [r for r in b.results if r.error]
    for r in failed:
        print(f"\n{r.name} failed:\n{r.error}", file=sys.stderr)
    return 0


def _inv(x: float | None) -> float | None:
    return None if not x else 1 / x


def run_parity(a, tag: str, tf_ok: bool, encode_mb: float) -> list[tuple[str, str, str]]:
    out = []
    tf_r, rb_r = ranks_path("tokenforge", tag), ranks_path("rustbpe", tag)
    if not tf_ok:
        why = "no tokenforge vocabulary (tokenforge not importable, skipped, or its training failed)"
        return [("merges", "SKIPPED", why), ("ids", "SKIPPED", why)]
    if rb_r.exists():
        x, y = load_ranks(tf_r), load_ranks(rb_r)
        xs = sorted(x.items(), key=lambda kv: kv[1])
        ys = sorted(y.items(), key=lambda kv: kv[1])
        n = min(len(xs), len(ys))
        diff = next((i for i in range(n) if xs[i] != ys[i]), None)
        if diff is None:
            note = f"{n} ranks identical" + (
                "" if len(xs) == len(ys) else f" (tokenforge {len(xs)}, rustbpe {len(ys)})"
            )
            out.append(("merges", "PASS", note))
        else:
            out.append(("merges", "FAIL", f"rank {diff}: tokenforge {xs[diff][0]!r} vs rustbpe {ys[diff][0]!r}"))
    else:
        out.append(("merges", "SKIPPED", "no rustbpe ranks"))
    r = run_function(
        check_ids,
        tag,
        str(tf_r),
        encode_mb,
        a.pattern,
        group="parity",
        tool="ids",
        timeout=1800,
        env={"RAYON_NUM_THREADS": str(a.threads)},
    )
    if r.ok:
        e = r.extra
        ok = e.get("equal") and e.get("batch_equal")
        detail = (
            f"{e.get('tokens_tokenforge')} tokens on {encode_mb:.1f} MB held-out; batch "
            f"{'equal' if e.get('batch_equal') else 'DIFFERENT'}"
        )
        if not e.get("equal"):
            detail += (
                f"; first difference at token {e.get('first_difference')} (tiktoken {e.get('tokens_tiktoken')} tokens)"
            )
        out.append(("ids", "PASS" if ok else "FAIL", detail))
        out.append(
            (
                "hf-ids",
                "PASS" if e.get("hf_equal") else "FAIL",
                "exported tokenizer.json in HF tokenizers: ids " + ("identical" if e.get("hf_equal") else "DIFFERENT"),
            )
        )
    else:
        out.append(("ids", "FAIL", f"check failed: {(r.error or r.status()).strip().splitlines()[-1]}"))
    mb, n = (0.5, 100) if a.quick else (2.0, 300)
    r = run_function(check_lexicographic, mb, n, group="parity", tool="lexicographic", timeout=3600)
    if r.ok:
        out.append(
            (
                "lexicographic",
                "PASS" if r.extra.get("equal") else "FAIL",
                f"{r.extra.get('merges')} merges on {mb} MB vs the slow reference of seed 003's rule",
            )
        )
    else:
        out.append(("lexicographic", "FAIL", f"check failed: {(r.error or r.status()).strip().splitlines()[-1]}"))
    return out


if __name__ == "__main__":
    sys.exit(main())
