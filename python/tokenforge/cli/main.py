"""The ``tokenforge`` command.

    tokenforge train CORPUS... --vocab-size N -o OUT     train a BPE tokenizer
    tokenforge encode TOKENIZER [TEXT | --file F]        text -> ids
    tokenforge decode TOKENIZER [IDS... | --file F]      ids -> text
    tokenforge inspect TOKENIZER [--text F]              vocabulary statistics
    tokenforge demo                                      train on the built-in corpus and show it

Families add their own subcommands (``tokenforge lz78 ...``, ``tokenforge
mixedgram ...``, ``tokenforge grow ...``) through an ``add_parser`` function in
their ``tokenforge.cli.<family>`` module.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import TokenforgeError

# modules that may contribute subcommands: each has add_parser(subparsers)
_FAMILY_CLIS = ("lz78", "mixedgram", "grow", "compare")


def _specials_arg(value: str):
    if value in ("nanochat",):
        return "nanochat"
    if value in ("none", ""):
        return None
    return [s for s in value.split(",") if s]


def cmd_train(args) -> int:
    from ..bpe import BPETokenizer

    corpus = [Path(p) for p in args.corpus]
    for p in corpus:
        if not p.exists():
            raise TokenforgeError(f"corpus path {p} does not exist")
    t0 = time.perf_counter()
    tok = BPETokenizer.train(
        corpus,
        args.vocab_size,
        pattern=None if args.pattern == "none" else args.pattern,
        special_tokens=_specials_arg(args.specials),
        tie_break=args.tie_break,
        min_frequency=args.min_frequency,
        num_threads=args.threads,
        layout=args.layout,
        text_field=args.text_field,
        split_on=args.split_on,
        progress=not args.quiet,
        errors=args.errors,
    )
    dt = time.perf_counter() - t0
    out = Path(args.output)
    if args.format == "tokenforge":
        tok.save(out)
    elif args.format == "tiktoken":
        tok.save_tiktoken(out)
    elif args.format == "hf":
        tok.save_hf(out)
    mb = tok.data.training.get("corpus_bytes", 0) / 1e6
    print(f"trained {tok!r} on {mb:.1f} MB in {dt:.1f} s; wrote {out}")
    return 0


def _read_text(args) -> str:
    if args.file:
        return Path(args.file).read_text(encoding="utf-8")
    if args.text is not None:
        return args.text
    return sys.stdin.read()


def cmd_encode(args) -> int:
    from ..base import load

    tok = load(args.tokenizer)
    text = _read_text(args)
    ids = tok.encode(text, allowed_special="all" if args.allow_special else ())
    if args.npy:
        from ..base import ids_dtype
        from ..formats.atomic import atomic_open

        with atomic_open(args.npy, "wb") as f:
            np.save(f, np.asarray(ids, dtype=ids_dtype(tok.vocab_size)))
        print(f"{len(ids)} ids -> {args.npy}")
    elif args.json:
        print(json.dumps(ids))
    else:
        print(" ".join(map(str, ids)))
    return 0


def cmd_decode(args) -> int:
    from ..base import load

    tok = load(args.tokenizer)
    if args.file:
        if args.file.endswith(".npy"):
            ids = np.load(args.file, allow_pickle=False)
        else:
            ids = [int(x) for x in Path(args.file).read_text().replace(",", " ").replace("[", " ").replace("]", " ").split()]
    elif args.ids:
        ids = [int(x) for x in " ".join(args.ids).replace(",", " ").replace("[", " ").replace("]", " ").split()]
    else:
        ids = [int(x) for x in sys.stdin.read().replace(",", " ").replace("[", " ").replace("]", " ").split()]
    sys.stdout.write(tok.decode(ids))
    if sys.stdout.isatty():
        sys.stdout.write("\n")
    return 0


def vocabulary_stats(tok, text: str | None = None, top: int = 10) -> dict:
    """Statistics every family can answer through the contract."""
    tb = tok.token_bytes()
    used = tb > 0
    stats = {
        "class": type(tok).__name__,
        "vocab_size": int(tok.vocab_size),
        "special_tokens": len(tok.special_tokens),
        "byte_length_mean": float(tb[used].mean()) if used.any() else 0.0,
        "byte_length_max": int(tb.max()) if len(tb) else 0,
        "byte_length_histogram": {int(k): int(v) for k, v in zip(*np.unique(tb[used], return_counts=True))},
    }
    order = np.argsort(-tb, kind="stable")[:top]
    stats["longest_tokens"] = [(int(i), tok.id_to_token(int(i))) for i in order if tb[i] > 0]
    not_utf8 = 0
    for i in np.nonzero(used)[0]:
        try:
            tok.id_to_bytes(int(i)).decode("utf-8")
        except UnicodeDecodeError:
            not_utf8 += 1
    stats["tokens_not_valid_utf8_alone"] = not_utf8
    if hasattr(tok, "inspect_extra"):
        stats.update(tok.inspect_extra())
    if text is not None:
        ids = tok.encode_ordinary(text)
        nbytes = len(text.encode("utf-8"))
        stats["text_bytes"] = nbytes
        stats["text_tokens"] = len(ids)
        stats["bytes_per_token"] = nbytes / max(1, len(ids))
        stats["distinct_ids_used"] = len(set(ids))
    return stats


def cmd_inspect(args) -> int:
    from ..base import load

    tok = load(args.tokenizer)
    text = Path(args.text).read_text(encoding="utf-8") if args.text else None
    stats = vocabulary_stats(tok, text, top=args.top)
    if args.json:
        print(json.dumps(stats, indent=2, ensure_ascii=False))
        return 0
    print(f"{stats['class']}: {stats['vocab_size']:,} ids, {stats['special_tokens']} special tokens")
    for k, v in stats.items():
        if k in ("class", "vocab_size", "special_tokens", "longest_tokens", "byte_length_histogram"):
            continue
        print(f"  {k}: {v:.3f}" if isinstance(v, float) else f"  {k}: {v}")
    hist = stats["byte_length_histogram"]
    print("  token length (bytes) histogram:")
    peak = max(hist.values()) if hist else 1
    for length, n in sorted(hist.items()):
        print(f"    {length:3d} {n:7d} {'#' * max(1, round(40 * n / peak))}")
    print("  longest tokens:")
    for i, t in stats["longest_tokens"]:
        print(f"    {i:7d} {t!r}")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokenforge", description="Train, compare and use LM tokenizers.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser("train", help="train a byte-level BPE tokenizer")
    t.add_argument("corpus", nargs="+", help=".txt/.jsonl/.parquet files or directories (optionally .gz/.zst)")
    t.add_argument("--vocab-size", type=int, required=True, help="total ids, special tokens included")
    t.add_argument("-o", "--output", required=True, help="output directory (or .json / .tiktoken file)")
    t.add_argument("--pattern", default="gpt4", help="gpt4 (default), gpt2, cl100k, none, or a regex")
    t.add_argument("--specials", default="nanochat", help="nanochat (default), none, or a comma-separated list")
    t.add_argument("--tie-break", default="pair_ids", choices=["pair_ids", "lexicographic"])
    t.add_argument("--min-frequency", type=int, default=1)
    t.add_argument("--threads", type=int, default=None)
    t.add_argument("--layout", default="nanochat", choices=["nanochat", "specials_first"])
    t.add_argument("--text-field", default="text", help="JSON field / parquet column holding the text")
    t.add_argument("--split-on", default=None, help="split .txt files into documents at this string")
    t.add_argument("--errors", default="strict", choices=["strict", "replace", "ignore"],
                   help="invalid UTF-8 or a lone surrogate escape in the corpus: an error naming file and line "
                        "(strict, default), U+FFFD (replace) or dropped (ignore)")
    t.add_argument("--format", default="tokenforge", choices=["tokenforge", "tiktoken", "hf"])
    t.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("encode", help="encode text to ids")
    e.add_argument("tokenizer")
    e.add_argument("text", nargs="?", default=None, help="the text (default: stdin)")
    e.add_argument("--file", help="read the text from this file")
    e.add_argument("--allow-special", action="store_true", help="turn special-token text into special ids")
    e.add_argument("--json", action="store_true", help="print a JSON list")
    e.add_argument("--npy", help="write the ids to this .npy file instead")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode ids to text")
    d.add_argument("tokenizer")
    d.add_argument("ids", nargs="*", help="ids (default: stdin)")
    d.add_argument("--file", help="a file of ids (whitespace/JSON) or a .npy array")
    d.set_defaults(func=cmd_decode)

    i = sub.add_parser("inspect", help="vocabulary statistics, longest tokens, bytes per token")
    i.add_argument("tokenizer")
    i.add_argument("--text", help="measure bytes per token on this UTF-8 file")
    i.add_argument("--top", type=int, default=10)
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_inspect)

    m = sub.add_parser("demo", help="train on the built-in corpus (Python's own docs and sources) and show the result")
    m.add_argument("--vocab-size", type=int, default=8192)
    m.add_argument("--max-mb", type=float, default=None, help="use at most this many MB of the corpus")
    m.add_argument("--out", default="reports/demo", help="where the demo writes its tokenizer")
    m.add_argument("--threads", type=int, default=None)
    m.add_argument("--no-color", action="store_true")
    m.add_argument("--families", default=None, help="what the comparison part compares (default: every family present)")
    m.add_argument("--seeds", type=int, default=2, help="seeds per bits-per-byte measurement (default 2)")
    m.add_argument("--no-bpb", action="store_true", help="compare compression only (no language models)")
    m.set_defaults(func=cmd_demo)

    for name in _FAMILY_CLIS:
        try:
            mod = importlib.import_module(f"tokenforge.cli.{name}")
        except ImportError:
            continue
        add = getattr(mod, "add_parser", None)
        if add is not None:
            add(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return 130
    except (TokenforgeError, FileNotFoundError, TypeError) as e:
        print(f"tokenforge {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
