"""``tokenforge grow``: the ever-growing vocabulary from the command line.

    tokenforge grow learn --source NAME --num-merges K CORPUS...   learn merges from a source, append them
    tokenforge grow sync URL [--sha256 HEX]                        take a published copy if it extends ours
    tokenforge grow inspect                                        sizes, per-source counts, newest merges

Every command works on ``--tokenizer PATH`` (default ``tokenizer.json``);
``learn`` and ``sync`` create it (byte-level) if it does not exist yet and
replace it atomically. Also runs standalone: ``python -m tokenforge.cli.grow ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..errors import TokenforgeError

__all__ = ["add_parser", "main"]

_DEFAULT_PATH = "tokenizer.json"


def _open(path: Path, create: bool):
    from ..growing import GrowingBPETokenizer

    if path.exists():
        return GrowingBPETokenizer.load(path), False
    if not create:
        raise TokenforgeError(f"no tokenizer at {path}; create one with 'grow learn' or 'grow sync', or pass --tokenizer")
    return GrowingBPETokenizer(), True


def cmd_learn(args) -> int:
    from ..data.corpus import iter_documents

    path = Path(args.tokenizer)
    tok, new = _open(path, create=True)
    if args.vocab_size is not None:
        tok.vocab_size = args.vocab_size
    corpus = [Path(p) for p in args.corpus]
    from .main import check_inputs

    check_inputs(corpus)
    if tok.is_full:
        print(f"{path}: the vocabulary is full ({tok.current_vocab_size} of {tok.vocab_size} ids); nothing learned")
        return 0
    before = tok.current_vocab_size
    t0 = time.perf_counter()
    docs = iter_documents(corpus, text_field=args.text_field, progress=not args.quiet)
    n = tok.learn_merges(
        docs,
        args.num_merges,
        source=args.source,
        min_frequency=args.min_frequency,
        num_threads=args.threads,
        progress=not args.quiet,
    )
    dt = time.perf_counter() - t0
    tok.save(path)
    why = ""
    if n < args.num_merges:
        why = " (vocabulary full)" if tok.is_full else f" (no pair left with frequency >= {args.min_frequency})"
    print(
        f"{'created' if new else 'updated'} {path}: learned {n} merges from {args.source!r} in {dt:.1f} s{why}; "
        f"vocabulary {before} -> {tok.current_vocab_size}"
    )
    return 0


def cmd_sync(args) -> int:
    path = Path(args.tokenizer)
    tok, _ = _open(path, create=True)
    report = tok.sync(args.url, sha256=args.sha256, timeout=args.timeout, path=path)
    print(report)
    return 0


def _newest(tok, n: int) -> list[dict]:
    from ..formats.tfjson import render_bytes

    out = []
    m = tok.merge_list
    for a, b, z in reversed(m[max(0, len(m) - n) :]):
        out.append(
            {
                "id": z,
                "left": a,
                "right": b,
                "text": render_bytes(tok.id_to_bytes(z)),
                "parts": [render_bytes(tok.id_to_bytes(a)), render_bytes(tok.id_to_bytes(b))],
            }
        )
    return out


def cmd_inspect(args) -> int:
    path = Path(args.tokenizer)
    tok, _ = _open(path, create=False)
    newest = _newest(tok, args.newest)
    if args.json:
        print(json.dumps({**tok.get_stats(), "path": str(path), "newest_merges": newest}, indent=2, ensure_ascii=False))
        return 0
    from ..bpe import PATTERNS
    from ..formats.growing_json import CL100K_PATTERN

    names = {v: k for k, v in PATTERNS.items()}
    names[CL100K_PATTERN] = "cl100k"
    pattern = names.get(tok.pattern, "custom")
    print(f"{path}: growing BPE vocabulary")
    print(f"  ids in use         {tok.current_vocab_size:,} (next merge id {tok.next_merge_id:,})")
    print(f"  declared maximum   {tok.vocab_size:,}")
    print(f"  merges             {tok.current_vocab_size - tok.MERGE_OFFSET:,}")
    print(f"  text               {tok.normalization or 'not normalised'}, split with {pattern}")
    print(f"  learned from       {tok.total_tokens_processed:,} bytes")
    sources = tok.sources_contributed
    if sources:
        width = max(len(s) for s in sources)
        print("  sources:")
        for name, count in sources.items():
            print(f"    {name:<{width}}  {count:,} merges")
    else:
        print("  sources:           none recorded")
    if newest:
        print(f"  newest merges ({len(newest)}):")
        for m in newest:
            print(f"    {m['id']:>9}  {m['parts'][0]} + {m['parts'][1]} -> {m['text']}")
    return 0


def _add_commands(p: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tokenizer", "-t", default=_DEFAULT_PATH, help="the tokenizer.json to use (default: %(default)s)")
    sub = p.add_subparsers(dest="grow_command", metavar="{learn,sync,inspect}")
    sub.required = True

    learn = sub.add_parser("learn", parents=[common], help="learn merges from a corpus and append them")
    learn.add_argument("corpus", nargs="+", help="files or directories (.txt, .jsonl, .parquet, optionally .gz/.zst)")
    learn.add_argument("--source", required=True, help="the name credited with the new merges")
    learn.add_argument("--num-merges", type=int, required=True, help="merges to learn (fewer if the vocabulary fills up)")
    learn.add_argument("--min-frequency", type=int, default=2, help="stop when the best pair occurs fewer times (default 2)")
    learn.add_argument("--vocab-size", type=int, default=None, help="set the declared maximum number of ids")
    learn.add_argument("--threads", type=int, default=None, help="threads for counting (default: all cores)")
    learn.add_argument("--text-field", default="text", help="JSON/parquet field holding the text (default: text)")
    learn.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    learn.set_defaults(func=cmd_learn)

    sync = sub.add_parser("sync", parents=[common], help="take a published tokenizer.json if it extends the local one")
    sync.add_argument("url", help="http(s) or file URL, or a path")
    sync.add_argument("--sha256", default=None, help="refuse the download unless it has this SHA-256")
    sync.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    sync.set_defaults(func=cmd_sync)

    insp = sub.add_parser("inspect", parents=[common], help="vocabulary size, per-source contributions, newest merges")
    insp.add_argument("--newest", type=int, default=10, help="how many of the newest merges to show (default 10)")
    insp.add_argument("--json", action="store_true", help="machine-readable output")
    insp.set_defaults(func=cmd_inspect)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``grow`` (with learn, sync, inspect) on the top-level command's subparsers."""
    p = subparsers.add_parser("grow", help="the ever-growing vocabulary: learn, sync, inspect")
    _add_commands(p)
    return p


def main(argv=None) -> int:
    from .main import ArgumentParser, exit_codes_epilog, run_command

    p = ArgumentParser(prog="python -m tokenforge.cli.grow", description=__doc__.split("\n\n")[0], epilog=exit_codes_epilog())
    _add_commands(p)
    args = p.parse_args(argv)
    return run_command(args.func, args, f"tokenforge grow {args.grow_command}")


if __name__ == "__main__":
    sys.exit(main())
