#!/usr/bin/env python3
"""LZ78 family benchmark: one run, one table.

For every strategy, with and without chunking, at 8,192 and 32,768 ids:
training time, bytes per token on held-out text, and an exact round trip of
the held-out text; at 32,768 also single-thread and all-thread encoding
throughput, and (tree dictionaries) that Patricia matching gives the plain
trie's ids on the held-out text. Beside them: our BPE at the same sizes
(``BPETokenizer.train(..., pattern="gpt4", special_tokens=None)``) and
tiktoken encoding with the same BPE ranks. Training speed of ``standard`` and
``frequency_gated`` is also measured on a larger slice (``--speed-mb``).

Vocabulary sizes are totals: an LZ78 tokenizer of 32,768 ids has N = 32,508
codes (id 0, 256 byte fallbacks and 3 specials take the rest); BPE has 256
bytes + 32,512 merges.

Corpus: ``--corpus DIR`` or $TOKENFORGE_BENCH_CORPUS or bench/data/corpus
(``train.jsonl``, ``heldout.jsonl``, made by bench/build_corpus.py); without
one, the built-in corpus (Python's docs and sources), 95% train / 5% held out.

    python bench/lz78.py                     # the full table (a few minutes)
    python bench/lz78.py --quick             # 8,192 only, chunked only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from tokenforge import BPETokenizer, LZ78Tokenizer, _core
from tokenforge.lz78 import STRATEGIES

BENCH = Path(__file__).resolve().parent
MB = 1_000_000


def load_docs(path: Path, max_bytes: float | None):
    docs, n = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)["text"]
            docs.append(d)
            n += len(d.encode("utf-8"))
            if max_bytes is not None and n >= max_bytes:
                break
    return docs, n


def corpus(args):
    cands = [args.corpus, os.environ.get("TOKENFORGE_BENCH_CORPUS"), BENCH / "data" / "corpus"]
    for c in cands:
        if c and (Path(c) / "train.jsonl").is_file() and (Path(c) / "heldout.jsonl").is_file():
            c = Path(c)
            train, tb = load_docs(c / "train.jsonl", args.train_mb * MB or None)
            speed, sb = load_docs(c / "train.jsonl", args.speed_mb * MB)
            held, hb = load_docs(c / "heldout.jsonl", None)
            args.full_path = c / "train.jsonl"
            return str(c), train, tb, speed, sb, held, hb
    from tokenforge.data.default_corpus import iter_default_corpus

    docs = list(iter_default_corpus())
    cut = len(docs) * 95 // 100
    train, held = docs[:cut], docs[cut:]
    size = lambda ds: sum(len(d.encode()) for d in ds)  # noqa: E731
    return "built-in (Python docs and sources)", train, size(train), train, size(train), held, size(held)


def full_roundtrip(tok, path: Path, threads) -> bool:
    """decode(encode(doc)) == doc for every document of a JSON-lines file, in batches."""
    batch = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                batch.append(json.loads(line)["text"])
            if len(batch) == 512:
                if not all(tok.decode(x) == d for x, d in zip(tok.encode_batch(batch, num_threads=threads), batch)):
                    return False
                batch = []
    return all(tok.decode(x) == d for x, d in zip(tok.encode_batch(batch, num_threads=threads), batch))


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def enc_speed(encode, text: str, nbytes: int, repeat: int = 5) -> float:
    best = min(timed(lambda: encode(text))[1] for _ in range(repeat))
    return nbytes / MB / best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None)
    ap.add_argument(
        "--train-mb",
        type=float,
        default=10.0,
        help="training slice for the compression table (MB; 0 = all of train.jsonl)",
    )
    ap.add_argument(
        "--full-roundtrip", action="store_true", help="also round-trip all of train.jsonl with every 32,768 tokenizer"
    )
    ap.add_argument(
        "--speed-mb", type=float, default=50.0, help="slice for standard/frequency_gated training speed (MB)"
    )
    ap.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument("--quick", action="store_true", help="8,192 only, chunked only, no speed slice")
    ap.add_argument("--threads", type=int, default=None, help="threads for training and batch encoding (default: all)")
    ap.add_argument("--json", default=str(BENCH / "results" / "lz78.json"))
    args = ap.parse_args(argv)
    vocabs = [8192] if args.quick else sorted(args.vocab)
    chunkings = [True] if args.quick else [True, False]
    big = max(vocabs)

    where, train, tbytes, speed_docs, sbytes, held, hbytes = corpus(args)
    held_text = "".join(held)
    print(
        f"corpus: {where}; train {tbytes / MB:.1f} MB ({len(train)} docs), held-out {hbytes / MB:.1f} MB ({len(held)} docs); "
        f"{os.cpu_count()} cpus, {platform.python_version()}",
        flush=True,
    )

    rows = []  # dicts
    mismatch = []  # (strategy, trained chunking, bytes/token encoded the other way, same way)
    # ---- BPE and tiktoken ---------------------------------------------------------
    bpe = {}
    for V in vocabs:
        tok, dt = timed(
            lambda: BPETokenizer.train_from_iterator(
                train, V, pattern="gpt4", special_tokens=None, num_threads=args.threads, progress=False
            )
        )
        ntok = sum(len(x) for x in tok.encode_batch(held, num_threads=args.threads))
        bpe[V] = {"tok": tok, "bpt": hbytes / ntok, "train_s": dt}
    tb = bpe[big]["tok"]
    r = {
        "name": "bpe (ours)",
        "chunk": "gpt4",
        "train_s": bpe[big]["train_s"],
        "train_mbs": tbytes / MB / bpe[big]["train_s"],
    }
    for V in vocabs:
        r[f"bpt_{V}"] = bpe[V]["bpt"]
    r["enc1"] = enc_speed(tb.encode_ordinary, held_text, hbytes)
    r["encN"] = enc_speed(lambda t: tb._model.encode_batch_numpy(held, args.threads), held_text, hbytes)
    r["roundtrip"] = tb.decode(tb.encode_ordinary(held_text)) == held_text
    rows.append(r)
    tiktoken_mbs = None
    try:
        enc = tb.to_tiktoken()
        tiktoken_mbs = enc_speed(enc.encode_ordinary, held_text, hbytes)
        rows.append(
            {
                "name": "tiktoken (same BPE ranks)",
                "chunk": "gpt4",
                "enc1": tiktoken_mbs,
                "encN": enc_speed(
                    lambda t: enc.encode_ordinary_batch(held, num_threads=os.cpu_count() or 1), held_text, hbytes
                ),
            }
        )
    except Exception as e:  # pragma: no cover - tiktoken missing
        print(f"tiktoken: skipped ({e})", flush=True)
    bpe_summary = ", ".join("%d: %.3f B/tok" % (V, bpe[V]["bpt"]) for V in vocabs)
    print(f"BPE: {bpe_summary}; tiktoken {tiktoken_mbs or 0:.1f} MB/s", flush=True)

    # ---- LZ78: every strategy x chunking x vocab ------------------------------------
    for strategy in args.strategies:
        for chunking in chunkings:
            r = {"name": f"lz78 {strategy}", "chunk": "gpt4" if chunking else "none"}
            for V in vocabs:
                tok, dt = timed(
                    lambda: LZ78Tokenizer.train_from_iterator(
                        train, V, strategy=strategy, chunking=chunking, num_threads=args.threads, progress=False
                    )
                )
                ids = tok.encode_batch(held, num_threads=args.threads)
                ntok = sum(len(x) for x in ids)
                ok = all(tok.decode(x) == h for x, h in zip(ids, held))
                r[f"bpt_{V}"] = hbytes / ntok
                r.setdefault("roundtrip", True)
                r["roundtrip"] = r["roundtrip"] and ok
                if V == big:
                    r["train_s"] = dt
                    r["train_mbs"] = tok.data.settings["training"]["corpus_bytes"] / MB / dt
                    r["n"] = tok.num_codes
                    r["entries"] = len(tok.data.nodes)
                    if chunking:
                        r["enc1"] = enc_speed(tok.encode_ordinary, held_text, hbytes)
                        r["encN"] = enc_speed(
                            lambda t: tok.encode_batch_flat(held, num_threads=args.threads), held_text, hbytes
                        )
                        r["roundtrip"] = r["roundtrip"] and tok.decode(tok.encode_ordinary("".join(train))) == "".join(
                            train
                        )
                    if args.full_roundtrip and getattr(args, "full_path", None):
                        r["roundtrip"] = r["roundtrip"] and full_roundtrip(tok, args.full_path, args.threads)
                    if tok.structure != "flat":
                        items, k = [], 0
                        if tok.structure == "compressed":
                            items = [(pat, out) for _, _, out, pat in tok.data.nodes]
                        else:
                            for _, _, pat, out in tok.data.nodes:
                                k += out
                                items.append((pat, k if out else -1))
                        pat = _core.GPT4_PATTERN if chunking else None
                        r["patricia_same"] = _core.lz78_patricia_encode(
                            items, tok.num_codes, held_text if chunking else held[0], pat
                        ) == (tok.encode_ordinary(held_text if chunking else held[0]))
                        from tokenforge.lz78 import lz78_inspect

                        r["node_ratio"] = lz78_inspect(tok)["node_compression_ratio"]
                    if strategy in ("frequency_gated", "smart_prune", "flat_prune"):
                        # chunking mismatch: encode with the other setting
                        import warnings

                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            tok.set_chunking(not chunking)
                        flat, _ = tok.encode_batch_flat(held, num_threads=args.threads)
                        mismatch.append((strategy, chunking, hbytes / len(flat), r[f"bpt_{V}"]))
            r["vs_bpe"] = r[f"bpt_{big}"] / bpe[big]["bpt"]
            rows.append(r)
            print(
                f"  {r['name']:<26} {r['chunk']:<5} "
                + " ".join(f"{V}: {r[f'bpt_{V}']:.3f}" for V in vocabs)
                + f"  ({r['vs_bpe']:.3f}x BPE, train {r['train_s']:.1f} s)",
                flush=True,
            )

    # ---- training speed of the online strategies on a larger slice ---------------------
    speed = {}
    if not args.quick:
        for strategy in ("standard", "frequency_gated"):
            if strategy not in args.strategies:
                continue
            tok, dt = timed(
                lambda: LZ78Tokenizer.train_from_iterator(
                    speed_docs, big, strategy=strategy, num_threads=args.threads, progress=False
                )
            )
            read = tok.data.settings["training"]["corpus_bytes"]
            # parse rate: the trainer alone, fed in 1 MB batches until it wants no more
            tr = _core.Lz78Trainer(
                strategy, tok.num_codes if strategy == "standard" else big - 260, _core.GPT4_PATTERN, {}
            )
            t0 = time.perf_counter()
            i, fed = 0, 0
            while tr.wants_more and i < len(speed_docs):
                j, size = i, 0
                while j < len(speed_docs) and size < MB:
                    size += len(speed_docs[j])
                    j += 1
                tr.feed(speed_docs[i:j], args.threads)
                i = j
            feed_s = time.perf_counter() - t0
            fed = tr.finish(args.threads)[2]["corpus_bytes"]
            speed[strategy] = {
                "mb_read": read / MB,
                "seconds": dt,
                "mbs": read / MB / dt,
                "parse_mbs": fed / MB / feed_s,
            }

    # ---- the table ---------------------------------------------------------------------
    head = (
        ["tokenizer", "chunk"]
        + [f"B/tok {V}" for V in vocabs]
        + [f"x BPE {big}", "train s", "train MB/s", "enc MB/s 1 thr", "enc MB/s all", "nodes ratio", "round trip"]
    )
    lines = []
    for r in rows:

        def f(k, fmt):
            return format(r[k], fmt) if k in r and r[k] is not None else ""

        rt = "" if "roundtrip" not in r else ("ok" if r["roundtrip"] else "FAIL")
        if "patricia_same" in r and not r["patricia_same"]:
            rt += " patricia!=trie"
        lines.append(
            [r["name"], r["chunk"]]
            + [f(f"bpt_{V}", ".3f") for V in vocabs]
            + [
                f("vs_bpe", ".3f"),
                f("train_s", ".1f"),
                f("train_mbs", ".1f"),
                f("enc1", ".1f"),
                f("encN", ".1f"),
                f("node_ratio", ".2f"),
                rt,
            ]
        )
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    print()
    print(f"LZ78 family vs BPE — train {tbytes / MB:.1f} MB, held-out {hbytes / MB:.1f} MB, corpus {where}")
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("-|-".join("-" * w for w in widths))
    for l in lines:
        print(" | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(l, widths))))
    if mismatch:
        print("chunking mismatch at %d (bytes/token: same setting -> other setting at encoding):" % big)
        for strategy, chunking, other, same in mismatch:
            print(
                f"  {strategy:<16} trained {'gpt4' if chunking else 'none'}: {same:.3f} -> {other:.3f} ({100 * (other / same - 1):+.1f}%)"
            )

    for s, v in speed.items():
        print(
            f"training speed, {s} (32,768, chunked, {sbytes / MB:.0f} MB given): train() read {v['mb_read']:.1f} MB in {v['seconds']:.2f} s "
            f"= {v['mbs']:.1f} MB/s end to end; parsing alone {v['parse_mbs']:.1f} MB/s"
        )

    # ---- acceptance ------------------------------------------------------------------------
    lz = [r for r in rows if r["name"].startswith("lz78")]
    best = max(lz, key=lambda r: r["vs_bpe"])
    checks = [
        (
            f"best LZ78 config ≥ 0.95x BPE bytes/token at {big}",
            best["vs_bpe"] >= 0.95,
            f"{best['name']} ({best['chunk']}) {best['vs_bpe']:.3f}x",
        )
    ]
    best_chunked = max((r for r in lz if r["chunk"] == "gpt4"), key=lambda r: r["vs_bpe"], default=None)
    if best_chunked is not None:
        checks.append(
            (
                "best chunked LZ78 config ≥ 0.95x BPE (like for like)",
                best_chunked["vs_bpe"] >= 0.95,
                f"{best_chunked['name']} {best_chunked['vs_bpe']:.3f}x",
            )
        )
    if tiktoken_mbs:
        slow = min((r for r in lz if "enc1" in r), key=lambda r: r["enc1"], default=None)
        if slow is not None:
            checks.append(
                (
                    "single-thread encoding ≥ 3x tiktoken (every strategy)",
                    slow["enc1"] >= 3 * tiktoken_mbs,
                    f"slowest {slow['name']} {slow['enc1']:.1f} MB/s = {slow['enc1'] / tiktoken_mbs:.1f}x tiktoken {tiktoken_mbs:.1f} MB/s",
                )
            )
    for s, v in speed.items():
        if s == "standard":
            # standard stops reading once its dictionary is full (about 1 MB); its whole run is
            # fixed costs (building the tokenizer), so its MB/s is the parsing rate
            checks.append(
                (
                    f"{s} training ≥ 20 MB/s (parsing rate; it reads only {v['mb_read']:.1f} MB)",
                    v["parse_mbs"] >= 20,
                    f"{v['parse_mbs']:.1f} MB/s parsing, whole train() {v['seconds']:.2f} s",
                )
            )
        else:
            checks.append((f"{s} training ≥ 20 MB/s (end to end)", v["mbs"] >= 20, f"{v['mbs']:.1f} MB/s"))
    checks.append(("every configuration round-trips exactly", all(r.get("roundtrip", True) for r in rows), ""))
    checks.append(("Patricia == plain trie on held-out text", all(r.get("patricia_same", True) for r in rows), ""))
    print()
    for name, ok, detail in checks:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}  {detail}")

    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "corpus": where,
                "train_bytes": tbytes,
                "heldout_bytes": hbytes,
                "rows": rows,
                "speed": speed,
                "checks": [{"name": n, "ok": o, "detail": d} for n, o, d in checks],
            },
            indent=1,
            default=str,
        )
    )
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
