"""``tokenforge mixedgram``: compress, decompress and inspect ``.mxgram`` files.

    tokenforge mixedgram compress IN -o OUT    # train on IN, write OUT (.mxgram)
    tokenforge mixedgram decompress IN -o OUT  # OUT "-" writes to stdout
    tokenforge mixedgram inspect FILE          # a .mxgram or a saved vocabulary

The top-level command calls :func:`add_parser` with its subparsers; every
leaf parser sets ``func``; errors are reported by the top-level command's
handler (:func:`tokenforge.cli.kit.run_command`: one line, documented exit status).
``python -m tokenforge.cli.mixedgram compress IN -o OUT`` works on its own too.
OUT may also follow IN positionally (the older spelling).
Progress goes to stderr (a bar on a terminal, a line every 10 s otherwise);
``--quiet`` turns it off.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from ..errors import TokenforgeError

__all__ = ["add_parser", "main"]

_PROG = "tokenforge mixedgram"


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n:,} B"


def _output_args(p: argparse.ArgumentParser, what: str) -> None:
    """``-o/--output``, as in every command writing a file; OUT after IN is the older spelling."""
    p.add_argument("legacy_output", nargs="?", metavar="OUT", help=f"{what} (older spelling of -o OUT)")
    p.add_argument("-o", "--output", default=None, help=what)


def _output(args: argparse.Namespace) -> str:
    """The one output path the command line named."""
    from .kit import UsageError

    if args.output is not None and args.legacy_output is not None:
        raise UsageError("name the output once: -o OUT or OUT after IN, not both")
    out = args.output if args.output is not None else args.legacy_output
    if out is None:
        raise UsageError("name the file to write with -o OUT")
    return out


def _compress(args: argparse.Namespace) -> int:
    from ..mixedgram import Mixedgram

    args.output = _output(args)

    if args.vocab and args.scheduler:
        raise TokenforgeError("--scheduler trains the vocabulary on a cluster; with --vocab there is nothing to train")
    trained_on_cluster = False
    if args.scheduler:  # the workers count the n-grams; the compression itself runs here
        tok = Mixedgram.train(
            path=args.input,
            encoding=args.encoding,
            errors=args.errors,
            num_threads=args.threads,
            progress=not args.quiet,
            client=args.scheduler,
            max_memory=args.max_memory,
            tmp_dir=args.tmp_dir,
        )
        trained_on_cluster = True
    if args.vocab or trained_on_cluster:
        tok = tok if trained_on_cluster else Mixedgram.load(args.vocab)
        stats = tok.compress(
            path=args.input,
            dst=args.output,
            parse=args.parse,
            train=False,
            encoding=args.encoding,
            errors=args.errors,
            progress=not args.quiet,
        )
    else:
        stats = Mixedgram.compress(
            path=args.input,
            dst=args.output,
            parse=args.parse,
            encoding=args.encoding,
            errors=args.errors,
            num_threads=args.threads,
            progress=not args.quiet,
            max_memory=args.max_memory,
            tmp_dir=args.tmp_dir,
        )
    if not args.quiet:
        nul = f", {stats.nul_removed:,} NUL removed" if stats.nul_removed else ""
        origin = f"trained on {args.input}" if stats.trained or trained_on_cluster else f"from {args.vocab}"
        print(
            f"{args.input}: {_mb(stats.input_bytes)} -> {args.output}: {_mb(stats.output_bytes)} "
            f"({stats.ratio:.3f}x), {stats.tokens:,} tokens, {stats.parse} parse, "
            f"{stats.tokenizer.ngram_count:,} n-grams {origin}{nul}",
            file=sys.stderr,
        )
    return 0


def _decompress(args: argparse.Namespace) -> int:
    from ..formats.atomic import atomic_write
    from ..mixedgram import Mixedgram

    args.output = _output(args)

    data = Mixedgram.decompress_bytes(Path(args.input), progress=not args.quiet)
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        atomic_write(args.output, data)
    if not args.quiet and args.output != "-":
        print(f"{args.input} -> {args.output}: {_mb(len(data))}", file=sys.stderr)
    return 0


def _show(ngram: str) -> str:
    return json.dumps(ngram, ensure_ascii=False)


def _inspect(args: argparse.Namespace) -> int:
    from ..mixedgram import inspect_file

    info = inspect_file(args.file, top=args.top, progress=not args.quiet)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return 0
    out = []
    size = f", {_mb(info['file_bytes'])}" if info["file_bytes"] is not None else ""
    out.append(f"{info['path']}: {info['kind']}{size}")
    specials = f", {len(info['special_tokens'])} special tokens" if info["special_tokens"] else ""
    out.append(f"vocabulary: 256 bytes + {info['ngrams']:,} n-grams ({info['unused_slots']:,} unused slots{specials})")
    out.append("  by n: " + "  ".join(f"{n}: {c:,}" for n, c in info["by_n"].items()))
    ov = info["overlaps"]
    out.append(
        f"overlaps: {ov['inside_longer']:,} entries lie inside a longer entry "
        f"({ov['prefix_of_longer']:,} as its prefix, {ov['suffix_of_longer']:,} as its suffix)"
    )
    s = info.get("stream")
    if s:
        out.append(
            f"stream: {s['tokens']:,} tokens ({s['ngram_tokens']:,} n-grams, {s['byte_tokens']:,} bytes), "
            f"{s['bytes_per_token']:.3f} text bytes per token; {s['unused_entries']:,} entries never used"
        )
        out.append(
            f"compression: {_mb(s['text_bytes'])} of text in {_mb(info['file_bytes'])}: "
            f"{s['ratio_file']:.3f}x (stream alone {s['ratio_stream']:.3f}x)"
        )
    if info["top"]:
        out.append(f"top {len(info['top'])} entries (in id order = training rank):")
        cols = [c for c in ("count", "score", "uses") if c in info["top"][0]]
        out.append("  " + "  ".join(["  id", "n"] + [f"{c:>10}" for c in cols] + ["n-gram"]))
        for r in info["top"]:
            out.append(
                "  " + "  ".join([f"{r['id']:4d}", f"{r['n']}"] + [f"{r[c]:>10,}" for c in cols] + [_show(r["ngram"])])
            )
    print("\n".join(out))
    return 0


def _add_commands(parser: argparse.ArgumentParser) -> None:
    from ..registry import MIXEDGRAM_PARSES as PARSES

    sub = parser.add_subparsers(dest="mixedgram_command", metavar="COMMAND")
    sub.required = True

    c = sub.add_parser(
        "compress",
        help="write a .mxgram file of a latin1 text",
        description="Train a vocabulary on IN (or use --vocab) and write IN as a .mxgram file.",
    )
    c.add_argument("input", metavar="IN", help="text file (bytes taken as latin1 unless --encoding)")
    _output_args(c, "the .mxgram file to write")
    c.add_argument("--parse", choices=PARSES, default="greedy", help="greedy longest match (default) or fewest tokens")
    c.add_argument(
        "--vocab",
        metavar="FILE",
        help="use this saved vocabulary (.json, .mxgram or directory) instead of training on IN",
    )
    c.add_argument(
        "--encoding",
        default="latin-1",
        help="how IN is encoded (default latin-1); characters above U+00FF are an error",
    )
    c.add_argument(
        "--errors",
        choices=("strict", "replace"),
        default="strict",
        help="'replace' writes '?' for characters above U+00FF",
    )
    c.add_argument("--threads", type=int, default=None, help="training threads (default: all cores)")
    c.add_argument(
        "--scheduler",
        metavar="ADDR",
        default=None,
        help="count the n-grams on this Dask cluster (e.g. tcp://host:8786; the workers read IN at the same path)",
    )
    from .kit import memory_args

    memory_args(c, "counting the n-grams")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    c.set_defaults(func=_compress)

    d = sub.add_parser(
        "decompress", help="the text of a .mxgram file", description="Write the latin1 text of a .mxgram file."
    )
    d.add_argument("input", metavar="IN", help="the .mxgram file")
    _output_args(d, "the text file to write ('-' for stdout)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    d.set_defaults(func=_decompress)

    i = sub.add_parser(
        "inspect",
        help="vocabulary, overlaps and compression of a .mxgram file",
        description="Show a .mxgram file's (or a saved vocabulary's) entries by n, top entries, overlap statistics and compression ratio.",
    )
    i.add_argument("file", metavar="FILE", help="a .mxgram file, a vocabulary .json or its directory")
    i.add_argument("--top", type=int, default=20, help="entries to list (default 20)")
    i.add_argument("--json", action="store_true", help="print the statistics as JSON")
    i.add_argument("-q", "--quiet", action="store_true", help="no progress")
    i.set_defaults(func=_inspect)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``mixedgram {compress,decompress,inspect}`` on a top-level parser's subparsers."""
    p = subparsers.add_parser(
        "mixedgram",
        help="the latin1 2..8-gram tokenizer: compress, decompress, inspect .mxgram files",
        description="Mixedgram: a 4,096-id latin1 tokenizer whose ids pack two per three bytes.",
    )
    _add_commands(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from .kit import ArgumentParser, exit_codes_epilog, run_command

    parser = ArgumentParser(
        prog="python -m tokenforge.cli.mixedgram", description=__doc__.split("\n\n")[0], epilog=exit_codes_epilog()
    )
    _add_commands(parser)
    args = parser.parse_args(argv)
    return run_command(args.func, args, _PROG)


if __name__ == "__main__":
    sys.exit(main())
