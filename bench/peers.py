"""Exact BPE encoders and BPE trainers: tokenforge against its peers, on cl100k and o200k.

Usage::

    make bench-peers                          # installs the peers with pip, then runs this
    python bench/peers.py                     # everything: encode, long, train (about 15 minutes)
    python bench/peers.py --only encode --rounds 2 --ranks cl100k
    python bench/peers.py --skip tokie,fastokens --json /tmp/peers.json

Encoders (each in its own child interpreter, bench/common.py): tiktoken,
tokenforge (``BPETokenizer.from_tiktoken`` with the pattern *name* "cl100k" /
"o200k"; while tokenforge has no "o200k" name, tiktoken's o200k ``pat_str``,
i.e. the general-regex path, and the table says so), tokenforge with
tiktoken's own regex string (``tokenforge-regex``), tokenforge returning one
uint32 array per text (``tokenforge-np``, ``encode_to_numpy``: what gigatoken's
``encode`` returns, so the like-for-like row against it), gigatoken, toktok-rs,
quicktok-v1, fastokens, riptoken, bpe-openai and tokie.

The ranks come from bpe-openai's wheel (``bpe_openai/data/{cl100k,o200k}_base.tiktoken.gz``),
decompressed into a temporary directory: nothing is downloaded. tiktoken's
pattern and special tokens are taken from ``tiktoken_ext.openai_public`` (its
rank loader stubbed out). toktok-rs, quicktok-v1 and bpe-openai only use the
vocabularies built into their wheels; tokie reads a Hugging Face
``tokenizer.json``, written by tokenforge's ``save_hf`` from the same ranks.
Whether each peer's ids equal tiktoken's is checked on every document.

Parts:

encode  Single thread, MB/s per text class (english, code, multilingual, all):
        ``python bench/build_corpus.py --classes DIR`` writes the classes (English
        prose and Python source from the bench corpus, German/Russian/Chinese
        man pages from Debian's manpages-de/-ru/-zh). Every child loads one
        encoder (timed: the load time), encodes the class's documents one by
        one three times: the first pass is "unseen" (the encoder has seen none
        of this text), the best of the other two is "warm". ``--rounds``
        rounds, interleaved (round 1 of every peer, then round 2, ...), best
        kept. In the first round the "all" child also returns a digest of
        every document's ids, compared with tiktoken's (exactness).
long    ``"a" * 1_000_000`` and 1,000,000 random ASCII letters (seeded, no
        space), MB/s of the first call (nothing of the text seen yet: the
        target is judged on it) and the best of two more calls (a peer that
        caches whole pieces answers these from its cache), killed after
        ``--long-timeout`` s.
train   ``--vocab`` ids (default 32,768) on the first ``--train-mb`` MB of the
        training text: tokenforge, rustbpe, HF tokenizers, sentencepiece (with
        bench/bpe.py's functions), gigatoken and ffbpe; time and peak RSS of
        each child; ``--train-rounds`` rounds interleaved (default 3: a 10 MB job takes
        tokenforge 0.24-0.36 s, and with one round the rustbpe ratio read 3.8x and 2.9x in
        two runs 40 minutes apart, the trainer unchanged but for the scanner's build), best
        time kept.

Output: the tables, with ratios against tiktoken (encoders) or tokenforge
(trainers), the issue-14 targets, and with ``--json FILE`` everything as JSON.

Not handled: batch or multi-thread encoding (bench/bpe.py's batch part); special
tokens (all encoders run their ordinary path); peers whose Python API changes
between versions (the builders below follow the installed versions named in
the output); cache-size limits of peers that cache (unseen text is the only
cold-cache measure).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import random
import shutil
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import CORPUS_DIR, MB, format_table, run_function  # noqa: E402

RANKS = ("cl100k", "o200k")
CLASSES = ("english", "code", "multilingual", "all")
#: peer -> (module to import, PyPI distribution for its version)
ENCODERS = {
    "tiktoken": ("tiktoken", "tiktoken"),
    "tokenforge": ("tokenforge", None),
    "tokenforge-regex": ("tokenforge", None),
    "tokenforge-np": ("tokenforge", None),
    "gigatoken": ("gigatoken", "gigatoken"),
    "toktok-rs": ("toktok", "toktok-rs"),
    "quicktok-v1": ("quicktok", "quicktok-v1"),
    "fastokens": ("fastokens", "fastokens"),
    "riptoken": ("riptoken", "riptoken"),
    "bpe-openai": ("bpe_openai", "bpe-openai"),
    "tokie": ("tokie", "tokie"),
}
#: encoders that use only the vocabulary built into their wheel
BUNDLED = {"toktok-rs", "quicktok-v1", "bpe-openai"}
TRAINERS = {
    "tokenforge": ("tokenforge", None),
    "rustbpe": ("rustbpe", "rustbpe"),
    "hf": ("tokenizers", "tokenizers"),
    "sentencepiece": ("sentencepiece", "sentencepiece"),
    "gigatoken": ("gigatoken", "gigatoken"),
    "ffbpe": ("ffbpe", "ffbpe"),
}
#: for the single-thread encode children: numpy (imported by the peers that return arrays, and
#: by every child for the exactness digests) starts OpenBLAS's threads, which spin on the other
#: core for a while (0.08 s of CPU after a bare `import numpy` here); no encoder uses BLAS
QUIET_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: the exact peers issue 14 asks tokenforge to be ahead of on every column
AHEAD_OF = ("toktok-rs", "quicktok-v1", "fastokens")
PARTS = ("encode", "long", "train")
LONG_KINDS = ("aaaa", "letters")
DEFAULT_CLASSES_DIR = CORPUS_DIR.parent / "classes"


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def class_docs(classes_dir: str, klass: str) -> list[str]:
    """The documents of one text class; "all" is the three classes in order."""
    names = ("english", "code", "multilingual") if klass == "all" else (klass,)
    out = []
    for name in names:
        with open(Path(classes_dir) / f"{name}.jsonl", encoding="utf-8") as f:
            out += [json.loads(line)["text"] for line in f]
    return out


def long_text(kind: str) -> str:
    if kind == "aaaa":
        return "a" * MB
    rng = random.Random(1234)
    return "".join(rng.choices(string.ascii_letters, k=MB))


def tiktoken_spec(ranks: str) -> tuple[str, dict[str, int]]:
    """(pat_str, special tokens) of tiktoken's ``<ranks>_base``, without its rank file."""
    from tiktoken_ext import openai_public as op

    real = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        spec = getattr(op, f"{ranks}_base")()
    finally:
        op.load_tiktoken_bpe = real
    return spec["pat_str"], dict(spec["special_tokens"])


def rank_files(workdir: Path) -> dict[str, str]:
    """``{ranks: path}``: bpe-openai's wheel's rank files, decompressed into ``workdir``."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bpe-openai is not installed: its wheel carries the rank files (pip install bpe-openai)")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    out = {}
    for r in RANKS:
        src = data / f"{r}_base.tiktoken.gz"
        dst = workdir / f"{r}_base.tiktoken"
        with gzip.open(src, "rb") as f, open(dst, "wb") as g:
            shutil.copyfileobj(f, g)
        out[r] = str(dst)
    return out


def tf_pattern(ranks: str, regex: bool):
    """(pattern argument for from_tiktoken, note) for tokenforge's rows."""
    from tokenforge.bpe import PATTERNS

    pat, _ = tiktoken_spec(ranks)
    if regex:
        return pat, "tiktoken's regex string"
    if ranks in PATTERNS:
        return ranks, f'pattern "{ranks}"'
    return pat, f'no "{ranks}" pattern name yet: tiktoken\'s regex string (general-regex path)'


def make_hf_json(ranks_file: str, ranks: str, out: str) -> None:
    """A tokenizer.json (for tokie) with the ranks and tiktoken's pattern, via tokenforge."""
    import tokenforge

    pat, _ = tiktoken_spec(ranks)
    # Oniguruma (HF tokenizers) reads cl100k's possessive "\p{N}{1,3}+" as a repetition of
    # 1-3 digits (any run of digits); at the end of its alternative the greedy "{1,3}" is
    # the same match as the possessive one, so spell it that way for tokie.
    pat = pat.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")
    tokenforge.BPETokenizer.from_tiktoken(ranks_file, pattern=pat).save_hf(out)


# --------------------------------------------------------------------------
# encoders (built inside the children)
# --------------------------------------------------------------------------
def build_encoder(peer: str, ranks: str, files: dict):
    """A function str -> ids (a list or an array) for ``peer`` with ``ranks``."""
    path = files[ranks]
    pat, specials = tiktoken_spec(ranks)
    name = f"{ranks}_base"
    if peer == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=load_tiktoken_bpe(path), special_tokens=specials)
        return enc.encode_ordinary
    if peer in ("tokenforge", "tokenforge-regex", "tokenforge-np"):
        import tokenforge

        pattern, _ = tf_pattern(ranks, peer == "tokenforge-regex")
        tok = tokenforge.BPETokenizer.from_tiktoken(path, pattern=pattern)
        if peer == "tokenforge-np":
            # the ids as one uint32 array, as gigatoken's encode returns them; numpy is imported
            # here, in the load (as `import gigatoken` does), so that no version of tokenforge that
            # imports numpy lazily pays for it inside the first ("unseen") pass
            import numpy  # noqa: F401

            return tok.encode_to_numpy
        return tok.encode_ordinary
    if peer == "gigatoken":
        import gigatoken

        pre = {"cl100k": "gpt4", "o200k": "o200k"}[ranks]
        return gigatoken.Tokenizer.from_tiktoken(path, pretokenizer=pre, special_tokens=specials).encode
    if peer == "toktok-rs":
        import toktok

        return toktok._encoding(name).encode_ordinary  # the full surface, documented as such in toktok/__init__.py
    if peer == "quicktok-v1":
        import quicktok

        return quicktok.get_encoding(name).encode  # == tiktoken's encode_ordinary (its docstring)
    if peer == "fastokens":
        import fastokens

        tok = fastokens.Tokenizer.from_tiktoken(path, pattern=pat, special_tokens=specials)
        return lambda text: tok.encode_ordinary(text).ids
    if peer == "riptoken":
        import riptoken

        return riptoken.CoreBPE(riptoken.load_tiktoken_bpe(path), specials, pat).encode_ordinary
    if peer == "bpe-openai":
        from bpe_openai import _bindings

        # The Rust backend itself: bpe_openai.Encoding refuses inputs of >= 1,000,000 characters.
        return _bindings.tokenizer_for_encoding(name).encode
    if peer == "tokie":
        import tokie

        tok = tokie.Tokenizer.from_json(files[f"hf_{ranks}"])
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    raise ValueError(peer)


def _digest(ids) -> str:
    import numpy as np

    return hashlib.blake2b(np.asarray(ids, dtype=np.uint32).tobytes(), digest_size=8).hexdigest()


def measure_encode(peer: str, ranks: str, klass: str, files: dict, classes_dir: str, exact: bool) -> dict:
    """Child: load (timed), one unseen pass, two warm passes over the class's documents."""
    docs = class_docs(classes_dir, klass)
    t = time.perf_counter()
    enc = build_encoder(peer, ranks, files)
    load = time.perf_counter() - t
    out = [None] * len(docs)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        for i, d in enumerate(docs):
            out[i] = enc(d)
        times.append(time.perf_counter() - t)
    ret = {
        "load_s": load,
        "unseen_s": times[0],
        "warm_s": min(times[1:]),
        "mb": sum(len(d.encode()) for d in docs) / MB,
        "tokens": int(sum(len(x) for x in out)),
    }
    if exact:
        ret["digests"] = [_digest(x) for x in out]
        ret["lens"] = [len(x) for x in out]
    return ret


def measure_long(peer: str, ranks: str, kind: str, files: dict) -> dict:
    """Child: the first call on the long text (nothing of it cached yet), then the best of two more."""
    text = long_text(kind)
    enc = build_encoder(peer, ranks, files)
    times, n = [], 0
    for _ in range(3):  # noqa: B007
        t = time.perf_counter()
        n = len(enc(text))
        times.append(time.perf_counter() - t)
    return {
        "first_s": times[0],
        "best_s": min(times[1:]),
        "tokens": n,
        "mb": len(text.encode()) / MB,
        "digest": _digest(enc(text)),
    }


# --------------------------------------------------------------------------
# trainers (bench/bpe.py's, plus gigatoken and ffbpe)
# --------------------------------------------------------------------------
def train_gigatoken(st: dict) -> dict:
    import gigatoken

    vocab, merges = gigatoken.train_bpe("".join(st["docs"]).encode(), st["vocab"], [])
    return {"vocab_size": len(vocab)}


def train_ffbpe(st: dict) -> dict:
    import ffbpe

    model = ffbpe.train_bpe(iter(st["docs"]), vocab_size=st["vocab"])
    return {"vocab_size": len(model.vocab)}


def trainer_fns():
    import bpe

    return {
        "tokenforge": (bpe.train_tokenforge, bpe.setup_train),
        "rustbpe": (bpe.train_rustbpe, bpe.setup_train),
        "hf": (bpe.train_hf, bpe.setup_train),
        "sentencepiece": (bpe.train_spm, bpe.setup_spm),
        "gigatoken": (train_gigatoken, bpe.setup_train),
        "ffbpe": (train_ffbpe, bpe.setup_train),
    }


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def version_of(tool: str, table: dict) -> str | None:
    mod, dist = table[tool]
    if importlib.util.find_spec(mod) is None:
        return None
    if dist is None:
        try:
            return importlib.metadata.version("tokenforge")
        except importlib.metadata.PackageNotFoundError:
            return "tree"
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _err(r) -> str:
    if r.timeout is not None:
        return f"> {r.timeout:g} s"
    lines = (r.error or r.status()).strip().splitlines()
    return lines[-1].split(".")[-1][:60] if lines else "failed"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_encode(a, peers, files, res) -> None:
    enc = res.setdefault("encode", {})
    for rnd in range(a.rounds):
        for ranks in a.ranks:
            for klass in CLASSES:
                for peer in peers:
                    exact = rnd == 0 and klass == "all"
                    key = f"{ranks}/{klass}/{peer}"
                    r = run_function(
                        measure_encode, peer, ranks, klass, files, a.classes_dir, exact,
                        group="encode", tool=key, timeout=a.encode_timeout, quiet=True, env=QUIET_BLAS,
                    )  # fmt: skip
                    row = enc.setdefault(key, {"peer": peer, "ranks": ranks, "class": klass, "rounds": []})
                    if not r.ok:
                        row["error"] = _err(r)
                        _say(f"  round {rnd + 1} {key}: FAILED {row['error']}")
                        continue
                    x = r.extra
                    if exact:
                        row["digests"], row["lens"] = x.pop("digests"), x.pop("lens")
                    row["rounds"].append({k: x[k] for k in ("load_s", "unseen_s", "warm_s")})
                    row["mb"], row["tokens"] = x["mb"], x["tokens"]
                    for k in ("load_s", "unseen_s", "warm_s"):
                        row[k] = min(rr[k] for rr in row["rounds"])
                    _say(
                        f"  round {rnd + 1} {key}: load {x['load_s']:.2f} s, unseen {x['mb'] / x['unseen_s']:.1f} MB/s, "
                        f"warm {x['mb'] / x['warm_s']:.1f} MB/s"
                    )


def exactness(res, ranks: str, peer: str, docs_all: list[str] | None) -> dict:
    enc = res.get("encode", {})
    ref, row = enc.get(f"{ranks}/all/tiktoken", {}), enc.get(f"{ranks}/all/{peer}", {})
    if "digests" not in ref or "digests" not in row:
        return {"checked": 0, "differ": None, "example": row.get("error") or "not measured"}
    n = len(ref["digests"])
    bad = [i for i in range(n) if ref["digests"][i] != row["digests"][i]]
    out = {"checked": n, "differ": len(bad), "example": None}
    if bad:
        i = bad[0]
        head = docs_all[i][:40] if docs_all else ""
        out["example"] = (
            f"doc {i} ({len(docs_all[i].encode()) if docs_all else '?'} bytes, {head!r}...): "
            f"{row['lens'][i]} ids vs tiktoken's {ref['lens'][i]}"
        )
    return out


def run_long(a, peers, files, res) -> None:
    out = res.setdefault("long", {})
    for ranks in a.ranks:
        for kind in LONG_KINDS:
            for peer in sorted(peers, key=lambda p: p != "tiktoken"):
                if peer in ("tokenforge-regex", "tokenforge-np"):
                    continue
                key = f"{ranks}/{kind}/{peer}"
                r = run_function(
                    measure_long,
                    peer,
                    ranks,
                    kind,
                    files,
                    group="long",
                    tool=key,
                    timeout=a.long_timeout,
                    quiet=True,
                    env=QUIET_BLAS,
                )
                if r.ok:
                    x = r.extra
                    out[key] = {
                        "mbps": x["mb"] / x["best_s"],
                        "first_mbps": x["mb"] / x["first_s"],
                        "best_s": x["best_s"],
                        "digest": x["digest"],
                    }
                    ref = out.get(f"{ranks}/{kind}/tiktoken", {}).get("digest")
                    out[key]["exact"] = None if ref is None else ref == x["digest"]
                    _say(f"  {key}: first call {out[key]['first_mbps']:.1f}, again {out[key]['mbps']:.1f} MB/s")
                else:
                    out[key] = {"error": _err(r)}
                    _say(f"  {key}: {out[key]['error']}")


def run_train(a, res) -> None:

    fns = trainer_fns()
    out = res.setdefault("train", {})
    tmp = tempfile.TemporaryDirectory(prefix="tfbench-peers-train-")
    tag = f"peers_{a.train_mb:g}mb_v{a.vocab}"
    env = {
        "RAYON_NUM_THREADS": str(a.threads),
        "RAYON_RS_NUM_THREADS": str(a.threads),
        "TOKENIZERS_PARALLELISM": "true",
    }
    trainers = []
    for t in TRAINERS:
        if t in a.skip:
            continue
        v = version_of(t, TRAINERS)
        if v is None:
            print(f"trainer {t}: skipped, not installable here (import of {TRAINERS[t][0]} failed)")
            out[t] = {"error": "not installed"}
            continue
        trainers.append(t)
        out[t] = {"version": v, "rounds": []}
    for _ in range(a.train_rounds):
        for t in trainers:
            fn, setup = fns[t]
            r = run_function(
                fn, a.train_mb, a.vocab, a.threads, 4, tmp.name, tag,
                setup=setup, group="train", tool=t, mb=a.train_mb, timeout=a.train_timeout, env=env,
            )  # fmt: skip
            if r.ok:
                out[t]["rounds"].append(
                    {"s": r.best, "peak_rss_mb": r.peak_rss_mb, "vocab_size": r.extra.get("vocab_size")}
                )
            else:
                out[t]["error"] = _err(r)
    for t in trainers:
        rounds = out[t]["rounds"]
        if rounds:
            best = min(rounds, key=lambda x: x["s"])
            out[t].update(best)
            out[t].pop("error", None)
    tmp.cleanup()


# --------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------
def _mbps(row: dict | None, which: str) -> float | None:
    if not row or which not in row:
        return None
    return row["mb"] / row[which]


def encode_table(res, ranks: str, which: str, peers) -> str:
    enc = res.get("encode", {})
    rows = []
    for peer in peers:
        cells = [peer]
        for klass in CLASSES:
            v = _mbps(enc.get(f"{ranks}/{klass}/{peer}"), which)
            base = _mbps(enc.get(f"{ranks}/{klass}/tiktoken"), which)
            if v is None:
                cells.append(enc.get(f"{ranks}/{klass}/{peer}", {}).get("error", "-"))
            elif base:
                cells.append(f"{v:7.1f} ({v / base:.2f}x)")
            else:
                cells.append(f"{v:7.1f}")
        rows.append(cells)
    return format_table(["MB/s (x tiktoken)", *CLASSES], rows, [False] + [True] * len(CLASSES))


def print_report(a, res, peers) -> list[str]:
    meta = res["meta"]
    enc = res.get("encode", {})
    lines = []
    p = lines.append
    p(f"peers bench: {meta['started']} UTC, load at start {meta['uptime_start']}")
    p("versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    for ranks in a.ranks:
        note = meta.get("tokenforge_pattern", {}).get(ranks)
        if enc:
            sizes = ", ".join(
                f"{k} {enc[f'{ranks}/{k}/tiktoken']['mb']:.1f} MB"
                for k in CLASSES
                if f"{ranks}/{k}/tiktoken" in enc and "mb" in enc[f"{ranks}/{k}/tiktoken"]
            )
            for which, title in (("warm_s", "warm (best of passes 2-3)"), ("unseen_s", "unseen text (first pass)")):
                p("")
                p(f"== {ranks} ranks, single thread, {title}; best of {a.rounds} interleaved rounds; {sizes}")
                p(f"   tokenforge row: {note}")
                p(encode_table(res, ranks, which, peers))
    if enc:
        p("")
        p("== exactness (documents of 'all' whose ids differ from tiktoken's) and load time (best of rounds)")
        docs_all = class_docs(a.classes_dir, "all")
        rows, examples = [], []
        for peer in peers:
            row = [peer]
            for ranks in a.ranks:
                e = exactness(res, ranks, peer, docs_all)
                res.setdefault("exactness", {})[f"{ranks}/{peer}"] = e
                loads = [
                    enc[k]["load_s"]
                    for k in enc
                    if k.startswith(f"{ranks}/") and k.endswith(f"/{peer}") and "load_s" in enc[k]
                ]
                row.append("-" if e["differ"] is None else f"{e['differ']}/{e['checked']}")
                row.append(f"{min(loads):.3f}" if loads else "-")
                if e["example"]:
                    examples.append(f"   {peer}, {ranks}: {e['example']}")
            rows.append(row)
        hdr = ["peer"]
        for ranks in a.ranks:
            hdr += [f"{ranks} differ", f"{ranks} load s"]
        p(format_table(hdr, rows, [False] + [True] * (len(hdr) - 1)))
        if examples:
            p("   first difference:")
            lines.extend(examples)
        if BUNDLED & set(peers):
            p(
                f"   {', '.join(sorted(BUNDLED & set(peers)))}: vocabulary built into the wheel (not the rank file); load = building it"
            )
    long = res.get("long", {})
    if long:
        p("")
        p(
            '== long pieces: "a" * 1_000_000 and 1,000,000 random letters without a space, MB/s: '
            "first call / best of two more (peers that cache whole pieces answer the repeats from the cache)"
        )
        rows = []
        for peer in peers:
            if peer in ("tokenforge-regex", "tokenforge-np"):
                continue
            row = [peer]
            for ranks in a.ranks:
                for kind in LONG_KINDS:
                    x = long.get(f"{ranks}/{kind}/{peer}", {})
                    if "mbps" in x:
                        first = f"{x['first_mbps']:.1f} / " if "first_mbps" in x else ""
                        row.append(
                            first
                            + f"{x['mbps']:.1f}"
                            + {True: "", False: " (ids differ)", None: " (unchecked)"}[x["exact"]]
                        )
                    else:
                        row.append(x.get("error", "-"))
            rows.append(row)
        p(format_table(["peer"] + [f"{r} {k}" for r in a.ranks for k in LONG_KINDS], rows, [False] + [True] * 4))
    train = res.get("train", {})
    if train:
        p("")
        p(f"== training: {a.train_mb:g} MB -> {a.vocab:,} ids, {a.threads} threads, own child each (peak RSS), "
          f"best of {a.train_rounds}")  # fmt: skip
        tf = train.get("tokenforge", {})
        rows = []
        for t, x in train.items():
            if "s" not in x:
                rows.append([t, x.get("version", ""), x.get("error", "-"), "", "", "", ""])
                continue
            ratio = f"{x['s'] / tf['s']:.2f}x" if tf.get("s") else ""
            mem = (
                f"{x['peak_rss_mb'] / tf['peak_rss_mb']:.2f}" if tf.get("peak_rss_mb") and x.get("peak_rss_mb") else ""
            )
            rows.append([t, x.get("version", ""), f"{x['s']:.2f}", f"{a.train_mb / x['s']:.1f}",
                         f"{x['peak_rss_mb']:.0f}" if x.get("peak_rss_mb") else "", ratio, mem])  # fmt: skip
        p(format_table(["trainer", "version", "s", "MB/s", "peak MB", "time / tokenforge's", "RSS / tokenforge's"],
                       rows, [False, False, True, True, True, True, True]))  # fmt: skip
        p(
            "   tokenforge, rustbpe, hf: nanochat's split pattern (bench/bpe.py); sentencepiece: its own BPE from a text "
            "file; gigatoken, ffbpe: their own default pre-tokenizers (not configurable here)"
        )
    tg = targets(a, res)
    if tg:
        p("")
        p("== issue 14 targets (tokenforge row)")
        for name, measured, goal, ok in tg:
            p(f"   {'PASS' if ok else ('FAIL' if ok is not None else 'n/a ')}  {name}: {measured} (goal {goal})")
    p("")
    p(f"load at end: {res['meta'].get('uptime_end', '?')}")
    return lines


def targets(a, res) -> list[tuple]:
    enc, out = res.get("encode", {}), []
    for ranks in a.ranks:
        for which, label in (("warm_s", "warm"), ("unseen_s", "unseen")):
            tf = _mbps(enc.get(f"{ranks}/all/tokenforge"), which)
            gg = _mbps(enc.get(f"{ranks}/all/gigatoken"), which)
            if tf and gg:
                out.append((f"{ranks} {label} 'all' >= 0.75x gigatoken", f"{tf / gg:.2f}x", "0.75x", tf / gg >= 0.75))
            # gigatoken's encode returns a uint32 array: tokenforge's encode_to_numpy is the like-for-like call
            tn = _mbps(enc.get(f"{ranks}/all/tokenforge-np"), which)
            if tn and gg:
                out.append(
                    (
                        f"{ranks} {label} 'all' >= 0.75x gigatoken, both as arrays",
                        f"{tn / gg:.2f}x",
                        "0.75x",
                        tn / gg >= 0.75,
                    )
                )
            for peer in AHEAD_OF:
                worst = None
                for klass in CLASSES:
                    t, o = (
                        _mbps(enc.get(f"{ranks}/{klass}/tokenforge"), which),
                        _mbps(enc.get(f"{ranks}/{klass}/{peer}"), which),
                    )
                    if t and o:
                        worst = t / o if worst is None else min(worst, t / o)
                if worst is not None:
                    out.append(
                        (f"{ranks} {label} ahead of {peer} on every class", f"worst {worst:.2f}x", ">1x", worst > 1)
                    )
        e = res.get("exactness", {}).get(f"{ranks}/tokenforge")
        if e and e["differ"] is not None:
            out.append(
                (f"{ranks} ids identical to tiktoken", f"{e['differ']} of {e['checked']} differ", "0", e["differ"] == 0)
            )
        for peer in ("tokenforge",):
            loads = [
                enc[k]["load_s"]
                for k in enc
                if k.startswith(f"{ranks}/") and k.endswith(f"/{peer}") and "load_s" in enc[k]
            ]
            if loads:
                out.append((f"{ranks} load", f"{min(loads):.2f} s", "<= 0.3 s", min(loads) <= 0.3))
    long = res.get("long", {})
    for ranks in a.ranks:
        for kind in LONG_KINDS:
            # the first call: a peer that caches whole pieces answers a repeat from its cache
            tf = long.get(f"{ranks}/{kind}/tokenforge", {}).get("first_mbps")
            exact_peers = [
                long[k]["first_mbps"] for k in long
                if k.startswith(f"{ranks}/{kind}/") and "first_mbps" in long[k] and not k.endswith("/tokenforge")
                and long[k].get("exact") and res.get("exactness", {}).get(f"{ranks}/{k.rsplit('/', 1)[1]}", {}).get("differ") == 0
            ]  # fmt: skip
            if tf and exact_peers:
                out.append(
                    (
                        f"{ranks} {kind} >= best exact peer (first call)",
                        f"{tf:.1f} vs {max(exact_peers):.1f} MB/s",
                        ">=",
                        tf >= max(exact_peers),
                    )
                )
    train = res.get("train", {})
    tf, rb = train.get("tokenforge", {}), train.get("rustbpe", {})
    if tf.get("s") and rb.get("s"):
        out.append(("training time vs rustbpe", f"{rb['s'] / tf['s']:.2f}x faster", ">= 3x", rb["s"] / tf["s"] >= 3))
        if tf.get("peak_rss_mb") and rb.get("peak_rss_mb"):
            out.append(
                (
                    "training peak RSS vs rustbpe",
                    f"{tf['peak_rss_mb']:.0f} vs {rb['peak_rss_mb']:.0f} MB",
                    "<=",
                    tf["peak_rss_mb"] <= rb["peak_rss_mb"],
                )
            )
    return out


def _uptime() -> str:
    try:
        return "load average %.2f, %.2f, %.2f" % os.getloadavg()
    except OSError:
        return "?"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", default=",".join(PARTS), help=f"parts to run ({','.join(PARTS)})")
    ap.add_argument("--ranks", default=",".join(RANKS), help="cl100k,o200k")
    ap.add_argument("--skip", default="", help="encoders or trainers to leave out (comma-separated)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved encode rounds, best kept (default 3)")
    ap.add_argument(
        "--classes-dir", default=str(DEFAULT_CLASSES_DIR), help=f"text classes (default {DEFAULT_CLASSES_DIR})"
    )
    ap.add_argument(
        "--classes-mb", type=float, default=3, help="MB per class when the classes must be built (default 3)"
    )
    ap.add_argument("--encode-timeout", type=float, default=300)
    ap.add_argument("--long-timeout", type=float, default=60)
    ap.add_argument("--train-mb", type=float, default=10, help="training text in MB (default 10)")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=2, help="threads for the trainers (default 2)")
    ap.add_argument("--train-rounds", type=int, default=3)
    ap.add_argument("--train-timeout", type=float, default=1800)
    ap.add_argument("--json", metavar="FILE", help="write all results as JSON to FILE")
    a = ap.parse_args(argv)
    a.only = [p for p in a.only.split(",") if p]
    a.ranks = [r for r in a.ranks.split(",") if r]
    a.skip = {s for s in a.skip.split(",") if s}
    bad = (set(a.only) - set(PARTS)) | (set(a.ranks) - set(RANKS)) | (a.skip - set(ENCODERS) - set(TRAINERS))
    if bad:
        ap.error(f"unknown part, ranks or tool: {', '.join(sorted(bad))}")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    import datetime as dt

    res = {"meta": {"started": dt.datetime.utcnow().isoformat(timespec="seconds"), "uptime_start": _uptime(),
                    "cpus": os.cpu_count(), "args": {k: sorted(v) if isinstance(v, set) else v for k, v in vars(a).items()}}}  # fmt: skip
    peers, versions = [], {}
    for peer in ENCODERS:
        if peer in a.skip:
            continue
        v = version_of(peer, ENCODERS)
        if v is None:
            print(f"encoder {peer}: skipped, not installed (import {ENCODERS[peer][0]} failed)")
            continue
        peers.append(peer)
        versions[peer.replace("-regex", "")] = v
    res["meta"]["versions"] = versions
    if "tiktoken" not in peers and "encode" in a.only:
        print("tiktoken is needed as the reference of the encode part", file=sys.stderr)
        return 2
    cdir = Path(a.classes_dir)
    if "encode" in a.only and not (cdir / "CLASSES.json").is_file():
        import build_corpus

        _say(f"building the text classes in {cdir}")
        if build_corpus.build_classes(CORPUS_DIR, cdir, a.classes_mb, True, os.cpu_count() or 1):
            return 2
    work = tempfile.TemporaryDirectory(prefix="tfbench-peers-")
    files = rank_files(Path(work.name))
    if "tokenforge" in peers:
        res["meta"]["tokenforge_pattern"] = {r: tf_pattern(r, False)[1] for r in a.ranks}
    if "tokie" in peers:
        if version_of("tokenforge", ENCODERS) is None:
            print("encoder tokie: skipped, its tokenizer.json is written by tokenforge, which is not importable")
            peers.remove("tokie")
        else:
            for r in a.ranks:
                files[f"hf_{r}"] = str(Path(work.name) / f"{r}_tokenizer.json")
                make_hf_json(files[r], r, files[f"hf_{r}"])
    if "encode" in a.only:
        _say(f"encode: {len(peers)} encoders x {len(a.ranks)} rank files x {len(CLASSES)} classes x {a.rounds} rounds")
        run_encode(a, peers, files, res)
    if "long" in a.only:
        _say("long pieces")
        run_long(a, peers, files, res)
    if "train" in a.only:
        _say("training")
        run_train(a, res)
    res["meta"]["uptime_end"] = _uptime()
    lines = print_report(a, res, peers)
    print("\n".join(lines))
    res["report"] = lines
    for row in res.get("encode", {}).values():
        row.pop("digests", None)
        row.pop("lens", None)
    if a.json:
        tmp = Path(a.json).with_name(Path(a.json).name + ".tmp")
        tmp.write_text(json.dumps(res, indent=2) + "\n")
        os.replace(tmp, a.json)
        print(f"JSON written to {a.json}")
    work.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
