"""Training on a pretraining-sized corpus: counting speed and memory, tokenforge against its peers.

Builds its own synthetic web-like corpus once, in ``bench/data/`` (git-ignored):
JSON lines whose ``text`` is drawn from an open vocabulary (word ranks from a
Zipf law over an unbounded rank space, so the number of distinct words keeps
growing with the corpus as Heaps' law says), with numbers, Greek and CJK words,
punctuation and newlines, plus a configurable share of random identifiers
(hex hashes, mixed-case ids) that web text is full of. Sizes 0.25 / 1 / 2 / 8 GB
(``--size``); the same seed gives the same bytes.

Then, each in its own child process (bench/common.py: peak RSS is the child's),
trains a BPE of ``--vocab`` ids with the GPT-4 pattern on ``--threads`` cores:

* ``tokenforge files``   ``BPETokenizer.train(path)``: tokenforge reads the file
* ``tokenforge iter``    ``train_from_iterator`` fed by ``json.loads`` in Python
* ``tokenforge budget``  ``train(path, max_memory=...)`` below what the unbounded
                         run held (``--budget``), when the build has ``max_memory``
* ``rustbpe``            ``train_from_iterator`` fed by ``json.loads``
* ``HF tokenizers``      ``train_from_iterator`` (corpora up to 1 GB)
* ``sentencepiece``      BPE from the same texts as plain lines (up to 0.25 GB)

and prints wall time, CPU time (user + system of the child), peak RSS, and
ratios against rustbpe, beside the targets of issue 34 (2 GB: <= 15 s wall,
>= 12x rustbpe, peak RSS <= 0.5x rustbpe's). ``--only phases`` cuts
tokenforge's training into counting, the merge loop's setup, the first 1,000
merges (which touch most pieces, on every thread) and the rest (wall and CPU
seconds each, their total against the 15 s target, one child); ``--only pretokenize`` times
``pretokenize`` of the corpus into shards (a tokenizer trained untimed on its
first 16 MB) beside training's counting pass alone, in the same run, and the
floor of that comparison: counting plus every distinct piece of the corpus
encoded once by a fresh copy of the tokenizer (the merging pretokenizing must
do and counting does not); ``--only profile`` prints where
counting's time goes (reading, JSON, splitting and counting), measured by
timing each stage alone in one child. The machine's load average is printed
with every table: timings on a shared machine are noisy, ratios from one run
less so.

    python bench/scale.py --size 0.25                 # all tools
    python bench/scale.py --size 2 --only tokenforge,rustbpe

Not handled: real web text (the generator only imitates its vocabulary
statistics), other patterns than GPT-4's, and multi-file corpora.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Bench, Target, run_function  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SIZES = {"0.25": 0.25, "1": 1.0, "2": 2.0, "8": 8.0}
GB = 1 << 30
#: the GPT-4 (cl100k) split pattern, rustbpe's default; tokenforge gets it by name
GPT4 = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)
GENERATOR_VERSION = 2


# --------------------------------------------------------------------------
# the corpus
# --------------------------------------------------------------------------
def _word_of(rank: int, alphabet: str) -> str:
    """A word for a rank: its digits in a syllable alphabet (distinct ranks, distinct words)."""
    syll = ("ka", "to", "ri", "ne", "sa", "mu", "lo", "vi", "de", "po", "an", "es", "or", "in", "ul", "be")
    out = []
    r = rank + 1
    while r:
        r, d = divmod(r, len(syll))
        out.append(syll[d])
    w = "".join(out)
    if alphabet == "greek":
        return w.translate(str.maketrans("aeiouklmnprstvdb", "αειουκλμνπρστβδβ"))
    if alphabet == "cjk":
        return "".join(chr(0x4E00 + (ord(c) * 37 + i * 11) % 0x5000) for i, c in enumerate(w[: max(2, len(w) // 3)]))
    return w


def build_corpus(size_gb: float, ident_share: float, seed: int = 34) -> Path:
    """Write ``scale_<size>gb.jsonl`` (and the same texts as ``.txt`` lines, for
    sentencepiece, when at most 0.25 GB) once; returns the JSON-lines path."""
    import numpy as np

    tag = f"scale_{size_gb:g}gb_id{ident_share:g}_s{seed}_v{GENERATOR_VERSION}"
    path = DATA / f"{tag}.jsonl"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    target = int(size_gb * GB)
    # word cache: ranks below this are looked up, above it made on the fly (rare)
    cache_n = 1 << 20
    latin = [_word_of(r, "latin") for r in range(cache_n)]
    t0 = time.perf_counter()
    tmp = path.with_name(path.name + ".tmp")
    txt = DATA / f"{tag}.txt" if size_gb <= 0.25 else None
    txt_f = open(txt.with_name(txt.name + ".tmp"), "w", encoding="utf-8") if txt else None
    written = 0
    punct = np.array([".", ",", "!", "?", ":", ";", " -", "'s", "(", ")"], dtype=object)
    with open(tmp, "w", encoding="utf-8") as f:
        while written < target:
            n = int(rng.integers(50, 800))  # words in this document
            ranks = rng.zipf(1.25, n) - 1  # unbounded ranks: Heaps' law vocabulary growth
            kind = rng.random(n)
            words = []
            for r, k in zip(ranks.tolist(), kind.tolist()):
                if k < ident_share:
                    if k < ident_share / 2:
                        words.append(rng.bytes(6).hex())
                    else:
                        words.append("id_" + rng.bytes(4).hex() + "X" + str(int(r) % 997))
                elif k < ident_share + 0.04:
                    words.append(str(r * 7 + int(k * 1e6) % 1000))
                elif k < ident_share + 0.06:
                    words.append(_word_of(r, "greek"))
                elif k < ident_share + 0.08:
                    words.append(_word_of(r, "cjk"))
                else:
                    w = latin[r] if r < cache_n else _word_of(r, "latin")
                    words.append(w.capitalize() if k > 0.97 else w)
                if k * 1000 % 10 < 1:
                    words.append(str(punct[int(k * 1e4) % len(punct)]))
            text = " ".join(words)
            # paragraphs
            text = text.replace(" . ", ".\n\n", 3)
            line = json.dumps({"id": written, "text": text}, ensure_ascii=False) + "\n"
            f.write(line)
            if txt_f is not None:
                txt_f.write(text.replace("\n", " ") + "\n")
            written += len(line.encode("utf-8"))
            if written % (64 << 20) < len(line):
                print(f"  corpus: {written / GB:.2f} GB ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if txt_f is not None:
        txt_f.close()
        os.replace(txt.with_name(txt.name + ".tmp"), txt)
    os.replace(tmp, path)
    return path


def texts_of(path: str):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


# --------------------------------------------------------------------------
# timed functions (each in its own child)
# --------------------------------------------------------------------------
def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def setup(path: str, vocab: int, threads: int, extra: dict | None = None) -> dict:
    return {"path": path, "vocab": vocab, "threads": threads, "extra": extra or {}, "cpu0": _cpu()}


def setup_tf(*a):
    import tokenforge  # noqa: F401

    return setup(*a)


def setup_rustbpe(*a):
    import rustbpe  # noqa: F401

    return setup(*a)


def setup_hf(*a):
    import tokenizers  # noqa: F401

    return setup(*a)


def setup_spm(*a):
    import sentencepiece  # noqa: F401

    return setup(*a)


def _done(st: dict, **kw) -> dict:
    return {"cpu_s": round(_cpu() - st["cpu0"], 2), **kw}


def train_tf_files(st: dict) -> dict:
    import tokenforge

    kw = dict(st["extra"])
    tok = tokenforge.BPETokenizer.train(
        st["path"], st["vocab"], special_tokens=[], pattern="cl100k", num_threads=st["threads"], progress=False, **kw
    )
    tr = tok.data.training
    out = {
        k: tr[k]
        for k in ("unique_pieces", "budget_dropped_unique", "budget_dropped_pieces", "budget_dropped_below")
        if k in tr
    }
    return _done(st, merges_sha=_merges_sha(tok), **out)


def train_tf_iter(st: dict) -> dict:
    import tokenforge

    tok = tokenforge.BPETokenizer.train_from_iterator(
        texts_of(st["path"]),
        st["vocab"],
        special_tokens=[],
        pattern="cl100k",
        num_threads=st["threads"],
        progress=False,
    )
    return _done(st, merges_sha=_merges_sha(tok))


def _merges_sha(tok) -> str:
    ranks = tok.mergeable_ranks()
    return hashlib.sha256(b"".join(t + b"\0" for t, _ in sorted(ranks.items(), key=lambda kv: kv[1]))).hexdigest()[:12]


def train_rustbpe(st: dict) -> dict:
    import rustbpe

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(texts_of(st["path"]), st["vocab"], pattern=GPT4)
    ranks = dict(tok.get_mergeable_ranks())
    sha = hashlib.sha256(b"".join(t + b"\0" for t, _ in sorted(ranks.items(), key=lambda kv: kv[1]))).hexdigest()[:12]
    return _done(st, merges_sha=sha)


class _Lines:
    """The texts of a JSON-lines file, re-read on each iteration, with a length
    (what bench/bpe.py's HF trainer takes), without holding them in memory."""

    def __init__(self, path: str):
        self.path = path

    def __iter__(self):
        return texts_of(self.path)

    def __len__(self) -> int:
        with open(self.path, "rb") as f:
            return sum(1 for _ in f)


def train_hf(st: dict) -> dict:
    import bpe

    out = bpe.train_hf({"regex": GPT4, "vocab": st["vocab"], "docs": _Lines(st["path"])})
    return _done(st, **out)


def train_spm(st: dict) -> dict:
    import tempfile

    import bpe

    with tempfile.TemporaryDirectory() as tmp:
        txt = str(Path(st["path"]).with_suffix(".txt"))
        bpe.train_spm({"path": txt, "out_dir": tmp, "tag": "scale", "vocab": st["vocab"], "threads": st["threads"]})
    return _done(st)


# --------------------------------------------------------------------------
# profile: counting's stages, each alone
# --------------------------------------------------------------------------
def phases(st: dict) -> dict:
    """Training ``path`` cut into its phases, in one child: counting (the Rust
    reader), the merge loop's setup (pieces laid out, pairs indexed) and the
    merge loop itself; seconds of wall and of CPU (all threads) each."""
    from tokenforge import _core
    from tokenforge.counting import count_pieces
    from tokenforge.formats.patterns import resolve_pattern

    regex, _ = resolve_pattern("cl100k")
    first, n = _core.bpe_layout("nanochat", st["vocab"], 0)
    out = {}

    def timed(name, fn):
        t, c = time.perf_counter(), _cpu()
        r = fn()
        # the peak so far: the phase where it rises is the one that sets it
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out[name] = [round(time.perf_counter() - t, 2), round(_cpu() - c, 2), round(peak)]
        return r

    wc = timed("count", lambda: count_pieces(st["path"], regex, num_threads=st["threads"], progress=False))
    unique = wc.unique
    tr = timed(
        "setup",
        lambda: _core.BpeTrainer(wc, list(range(256)), [], first, n, "pair_ids", 1, st["threads"]),
    )

    def loop(upto):
        while not tr.done and tr.merges_done < upto:
            tr.run(max_merges=upto - tr.merges_done, seconds=1.0)

    # the first merges touch most pieces (and run on every thread); the later
    # ones touch few, and their cost is the pair index's and the heap's
    timed("merges 1-1000", lambda: loop(1000))
    timed("merges 1001-", lambda: loop(n))
    # the same digest as the training rows' (their ranks: the byte tokens, then the merges)
    tokens = [bytes([b]) for b in range(256)]
    for a, b, _z in tr.merges():
        tokens.append(tokens[a] + tokens[b])
    sha = hashlib.sha256(b"".join(t + b"\0" for t in tokens)).hexdigest()[:12]
    return _done(st, phases=out, unique_pieces=unique, merges_sha=sha)


def setup_pretok(path: str, vocab: int, threads: int, extra=None) -> dict:
    """A tokenizer of ``vocab`` ids trained (untimed) on the first 16 MB of the corpus."""
    import itertools
    import tempfile

    import tokenforge

    texts, size = [], 0
    for t in itertools.takewhile(lambda _: size < 16 << 20, texts_of(path)):
        texts.append(t)
        size += len(t)
    tok = tokenforge.BPETokenizer.train_from_iterator(
        iter(texts), vocab, pattern="cl100k", num_threads=threads, progress=False
    )
    st = setup(path, vocab, threads, extra)
    st["tok"] = tok
    st["out"] = tempfile.mkdtemp(prefix="scale-pretok-")
    st["cpu0"] = _cpu()
    return st


def pretokenize_files(st: dict) -> dict:
    """tokenforge.data.shards.pretokenize of the corpus into shards (then removed)."""
    import hashlib
    import shutil

    from tokenforge.data.shards import pretokenize

    try:
        shards = pretokenize(st["path"], st["tok"], st["out"], num_threads=st["threads"], progress=False)
        tokens = int(shards.num_tokens)
        # the token stream's hash (of the shards' SHA-256s, in order): equal
        # across builds and thread counts when the ids are
        stream = hashlib.sha256("".join(e["sha256"] for e in shards.index["shards"]).encode()).hexdigest()[:16]
    finally:
        shutil.rmtree(st["out"], ignore_errors=True)
    return _done(st, tokens=tokens, token_stream_sha256=stream)


def _distinct_pieces(path: str, threads: int) -> list[str]:
    """Every distinct piece of ``path`` (GPT-4 pattern), read from the counter's
    own transport bytes (``WordCounter.to_bytes``: magic, version, kind, flags,
    the pattern, five varints, the piece count, then each piece and its count)."""
    from tokenforge.counting import count_pieces
    from tokenforge.formats.patterns import resolve_pattern
    from tokenforge.formats.sentencepiece_model import _Reader  # the same LEB128 varints

    regex, _ = resolve_pattern("cl100k")
    b = count_pieces(path, regex, num_threads=threads, progress=False).to_bytes()
    if b[:6] != b"TFCT\x01\x01":  # the transport framing, version 1, kind 1 (piece counts)
        raise SystemExit(f"WordCounter.to_bytes starts {b[:6]!r}: not the layout this bench reads")
    varint = _Reader(b, path).varint
    pos = 7
    if b[6] & 1:  # the flags: a pattern follows (its length, then its bytes)
        n, pos = varint(pos)
        pos += n
    for _ in range(5):
        _, pos = varint(pos)
    count, pos = varint(pos)
    pieces = []
    for _ in range(count):
        n, pos = varint(pos)
        pieces.append(b[pos : pos + n].decode("utf-8"))
        _, pos = varint(pos + n)
    return pieces


def setup_distinct(*a):
    """A fresh copy of the pretokenize row's tokenizer (so its caches start
    empty, as pretokenize's do) and the corpus's distinct pieces, shuffled
    (seed 0) and joined by newlines into documents of 400 pieces."""
    import random

    import tokenforge

    st = setup_pretok(*a)
    saved = os.path.join(st["out"], "tokenizer.json")
    st["tok"].save(saved)
    st["tok"] = tokenforge.load(saved)
    pieces = _distinct_pieces(st["path"], st["threads"])
    random.Random(0).shuffle(pieces)
    st["docs"] = ["\n".join(pieces[i : i + 400]) for i in range(0, len(pieces), 400)]
    st["distinct"] = len(pieces)
    st["cpu0"] = _cpu()
    return st


def encode_distinct(st: dict) -> dict:
    """``encode_batch_flat`` of every distinct piece of the corpus once (see
    ``setup_distinct``): about one merge per distinct piece, the work that
    pretokenizing has and counting has not."""
    import shutil

    shutil.rmtree(st["out"], ignore_errors=True)
    ids, _ = st["tok"].encode_batch_flat(st["docs"], num_threads=st["threads"])
    return _done(st, tokens=len(ids), distinct=st["distinct"])


def count_files(st: dict) -> dict:
    """Training's counting pass alone (``count_pieces`` of the file: read, JSON,
    split, count), the figure ``pretokenize`` is set beside."""
    from tokenforge.counting import count_pieces
    from tokenforge.formats.patterns import resolve_pattern

    regex, _ = resolve_pattern("cl100k")
    wc = count_pieces(st["path"], regex, num_threads=st["threads"], progress=False)
    return _done(st, unique_pieces=wc.unique)


def profile_counting(st: dict) -> dict:
    """Seconds (wall, and CPU of all threads) of each stage of counting ``path``, each alone."""
    from tokenforge import _core
    from tokenforge.counting import COUNT_BLOCK_BYTES, DocRule, _count_docs, count_pieces
    from tokenforge.data.corpus import corpus_documents, jsonl_blocks
    from tokenforge.formats.patterns import resolve_pattern

    path, threads = st["path"], st["threads"]
    regex, _ = resolve_pattern("cl100k")
    out = {}

    def timed(name, fn):
        t, c = time.perf_counter(), _cpu()
        r = fn()
        out[name] = f"{time.perf_counter() - t:.2f} wall, {_cpu() - c:.2f} CPU"
        return r

    timed(
        f"read {COUNT_BLOCK_BYTES >> 20} MB blocks",
        lambda: sum(len(b.body) for b in jsonl_blocks([Path(path)], COUNT_BLOCK_BYTES)),
    )
    timed("read + json.loads per line (Python)", lambda: sum(len(s) for s in texts_of(path)))
    wc = timed(
        "count: Rust JSON reader + split + count",
        lambda: count_pieces(path, regex, num_threads=threads, progress=False),
    )
    timed(
        "count: Python reader + add_texts", lambda: _count_docs(corpus_documents(path), regex, DocRule(), threads, None)
    )
    docs = list(texts_of(path))

    def split_count():
        w = _core.WordCounter(regex)
        for i in range(0, len(docs), 4096):
            w.add_texts(docs[i : i + 4096], threads)

    timed("split + count of texts in memory (add_texts)", split_count)
    docs.clear()
    out["unique pieces"] = wc.unique
    out["pieces"] = wc.total_pieces
    return out


def _pretokenize_rows(b: Bench, args: tuple, mb: float) -> None:
    """``pretokenize`` into shards and, in the same run, training's counting pass
    alone on the same file and threads (each in its own child): wall and CPU
    seconds, peak RSS, the ratios, and the load average before and after each.
    A third row encodes every distinct piece of the corpus once with a fresh
    copy of the tokenizer: the merging that pretokenizing must do and counting
    does not, so counting + that row is what pretokenizing costs at the least
    with this encoder (printed as the floor)."""
    rows = {}
    for tool, fn, st in (
        ("counting", count_files, setup_tf),
        ("pretokenize", pretokenize_files, setup_pretok),
        ("distinct pieces once", encode_distinct, setup_distinct),
    ):
        load = _uptime()
        r = run_function(fn, *args, None, setup=st, group="pretokenize", tool=tool, mb=mb)
        r.extra["load_before"], r.extra["load_after"] = load, _uptime()
        b.add(r)
        rows[tool] = r
    print(
        f"\n{'pretokenize vs counting':24} {'wall s':>8} {'MB/s':>7} {'CPU s':>8} {'peak MB':>8}  load before -> after"
    )
    for tool, r in rows.items():
        if not r.ok:
            print(f"{tool:24} {r.status()}: {r.error}")
            continue
        print(
            f"{tool:24} {r.best:8.2f} {mb / r.best:7.0f} {r.extra.get('cpu_s', 0):8.2f} {r.peak_rss_mb:8.0f}  "
            f"{r.extra['load_before']} -> {r.extra['load_after']}"
        )
    c, p = rows["counting"], rows["pretokenize"]
    if c.ok and p.ok:
        print(
            f"pretokenize / counting: {p.best / c.best:.2f}x the wall time, "
            f"{p.extra['cpu_s'] / max(c.extra['cpu_s'], 1e-9):.2f}x the CPU time "
            f"(target: <= 1x); {p.extra['tokens']:,} tokens (stream {p.extra['token_stream_sha256']}), "
            f"{c.extra['unique_pieces']:,} distinct pieces"
        )
        d = rows["distinct pieces once"]
        if d.ok:
            floor_wall, floor_cpu = c.best + d.best, c.extra["cpu_s"] + d.extra["cpu_s"]
            print(
                f"floor (counting + each of the {d.extra['distinct']:,} distinct pieces encoded once): "
                f"{floor_wall:.2f} s wall = {floor_wall / c.best:.2f}x counting, {floor_cpu:.2f} CPU s = "
                f"{floor_cpu / max(c.extra['cpu_s'], 1e-9):.2f}x; pretokenize is {p.best / floor_wall:.2f}x "
                f"the floor's wall time, {p.extra['cpu_s'] / max(floor_cpu, 1e-9):.2f}x its CPU time"
            )
        t = Target("pretokenize", "pretokenize wall vs counting's <= 1x", p.best / c.best, 1.0, False)
        b.targets.append(t)
        print("  " + t.render())


# --------------------------------------------------------------------------
def _uptime() -> str:
    return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="0.25", help="corpus size in GB")
    ap.add_argument("--idents", type=float, default=0.01, help="share of random identifiers among words")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--only", default="", help="comma-separated: tokenforge,iter,budget,rustbpe,hf,spm,phases,pretokenize,profile"
    )
    ap.add_argument(
        "--budget", default=None, help="max_memory for the budget row (default: a third of the files run's RSS)"
    )
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args(argv)
    size = SIZES[a.size]
    only = set(filter(None, a.only.split(","))) or {"tokenforge", "iter", "budget", "rustbpe", "hf", "spm"}
    print(f"building / finding the {size:g} GB corpus ...", file=sys.stderr)
    path = str(build_corpus(size, a.idents))
    mb = os.path.getsize(path) / 1e6
    args = (path, a.vocab, a.threads)
    b = Bench(f"scale_{a.size}gb", baseline="rustbpe")
    rows = {}
    print(f"corpus {path}: {mb:.0f} MB; {_uptime()}", file=sys.stderr)

    def run(tool, fn, st, group="train", extra=None):
        r = run_function(fn, *args, extra, setup=st, group=group, tool=tool, mb=mb, timeout=a.timeout)
        r.extra["load_after"] = _uptime()
        rows[tool] = r
        b.add(r)
        return r

    if "tokenforge" in only:
        run("tokenforge files", train_tf_files, setup_tf)
    if "rustbpe" in only:
        run("rustbpe", train_rustbpe, setup_rustbpe)
    if "iter" in only:
        run("tokenforge iter", train_tf_iter, setup_tf)
    if "budget" in only and "tokenforge files" in rows and rows["tokenforge files"].ok:
        import inspect

        import tokenforge

        if "max_memory" in inspect.signature(tokenforge.BPETokenizer.train).parameters:
            budget = a.budget or f"{int(rows['tokenforge files'].peak_rss_mb / 3)}MB"
            run(f"tokenforge max_memory={budget}", train_tf_files, setup_tf, extra={"max_memory": budget})
    if "hf" in only and size <= 1:
        run("HF tokenizers", train_hf, setup_hf)
    if "spm" in only and size <= 0.25:
        run("sentencepiece", train_spm, setup_spm)

    targets = []
    tf, rb = rows.get("tokenforge files"), rows.get("rustbpe")
    if tf and tf.ok and size == 2:
        targets.append(Target("train/tokenforge files", "wall <= 15 s at 2 GB", tf.best, 15.0, False, " s"))
    if tf and rb and tf.ok and rb.ok:
        targets.append(Target("train/tokenforge files", "speed vs rustbpe >= 12x", rb.best / tf.best, 12.0))
        targets.append(
            Target("train/tokenforge files", "peak RSS vs rustbpe <= 0.5x", tf.peak_rss_mb / rb.peak_rss_mb, 0.5, False)
        )
    it = rows.get("tokenforge iter")
    if tf and it and tf.ok and it.ok:
        targets.append(Target("train/tokenforge files", "files vs Python iterator >= 1x", it.best / tf.best, 1.0))
    for t in targets:
        b.targets.append(t)
    b.print_table()
    print()
    print(f"{'tool':34} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'x rustbpe':>9}  merges     notes")
    for tool, r in rows.items():
        if not r.ok:
            print(f"{tool:34} {r.status()}: {r.error or ''}")
            continue
        ratio = f"{rb.best / r.best:.2f}" if rb and rb.ok else "-"
        notes = {
            k: v for k, v in r.extra.items() if k not in ("cpu_s", "merges_sha", "child_ru_maxrss_mb", "load_after")
        }
        print(
            f"{tool:34} {r.best:8.2f} {r.extra.get('cpu_s', 0):8.2f} {r.peak_rss_mb:8.0f} {ratio:>9}  "
            f"{r.extra.get('merges_sha', '-'):10} {notes}"
        )
    for t in targets:
        print("  " + t.render())
    print(f"machine: {os.cpu_count()} cores, {_uptime()}")
    if "pretokenize" in only:
        _pretokenize_rows(b, args, mb)
    if "phases" in only or "profile" in only:
        r = run_function(phases, *args, None, setup=setup_tf, group="phases", tool="tokenforge files", mb=mb)
        if r.ok:
            print(
                f"\nphases of tokenforge's training (wall s, CPU s, peak MB so far; {r.peak_rss_mb:.0f} MB peak; "
                f"{_uptime()}):"
            )
            for k, (w, c, m) in r.extra["phases"].items():
                print(f"  {k:14} {w:7.2f} {c:7.2f} {m:7.0f}")
            wall = sum(w for w, _, _ in r.extra["phases"].values())
            cpu = sum(c for _, c, _ in r.extra["phases"].values())
            print(f"  {'total':14} {wall:7.2f} {cpu:7.2f}   (target at 2 GB: <= 15 s wall)")
            print(f"  unique pieces: {r.extra['unique_pieces']:,}; merges sha {r.extra['merges_sha']}")
        else:
            print(f"phases: {r.status()}: {r.error}")
    if "profile" in only:
        r = run_function(profile_counting, *args, None, setup=setup_tf, group="profile", tool="counting", mb=mb)
        print("\nwhere counting's time goes (s):")
        for k, v in r.extra.items():
            print(f"  {k:50} {v}")
    b.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
