"""``tokenforge grow``: the ever-growing vocabulary from the command line.

    tokenforge grow learn --source NAME --num-merges K CORPUS...   learn merges from a source, append them
    tokenforge grow sync URL [--sha256 HEX] [--every 10m]          take a published copy if it extends ours
    tokenforge grow inspect                                        sizes, per-source counts, newest merges

Every command works on ``--tokenizer PATH`` (default ``tokenizer.json`` in
the current directory, which must then exist); ``learn`` and ``sync`` create
the file at a ``--tokenizer`` path (byte-level) if it does not exist yet, never
at the default, and replace it atomically. ``sync --every 10m`` keeps the file current until
interrupted (Ctrl-C: exit status 130). Also runs standalone:
``python -m tokenforge.cli.grow ...``.

Not handled: running two ``sync --every`` on one file (both work; the last
rename wins, and each only ever writes a vocabulary that extends the other's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..errors import TokenforgeError

if TYPE_CHECKING:
    from ..growing import GrowingBPETokenizer

__all__ = ["add_parser", "main"]

_DEFAULT_PATH = "tokenizer.json"


def _path(args: argparse.Namespace) -> Path:
    positional = getattr(args, "tokenizer_positional", None)
    if positional is not None:
        if args.tokenizer is not None:
            from .kit import UsageError

            raise UsageError("name the tokenizer once: TOKENIZER or -t/--tokenizer, not both")
        args.tokenizer, args.tokenizer_positional = positional, None
    return Path(_DEFAULT_PATH if args.tokenizer is None else args.tokenizer)


def _open(args: argparse.Namespace, create: bool) -> tuple[GrowingBPETokenizer, bool]:
    """The tokenizer of ``--tokenizer`` (default ``./tokenizer.json``, which must
    exist: a new file is created only where ``--tokenizer`` says)."""
    from ..growing import GrowingBPETokenizer

    path = _path(args)
    if path.exists():
        return GrowingBPETokenizer.load(path), False
    if not create:
        raise TokenforgeError(
            f"no tokenizer at {path}; create one with 'grow learn' or 'grow sync', or pass --tokenizer"
        )
    if args.tokenizer is None:
        raise TokenforgeError(
            f"no {_DEFAULT_PATH} in the current directory; pass --tokenizer PATH to say where to create one"
        )
    return GrowingBPETokenizer(), True


def cmd_learn(args: argparse.Namespace) -> int:
    path = _path(args)
    tok, new = _open(args, create=True)
    if args.vocab_size is not None:
        tok.vocab_size = args.vocab_size
    corpus = [Path(p) for p in args.corpus]
    from .kit import check_inputs

    check_inputs(corpus)
    if tok.is_full:
        print(f"{path}: the vocabulary is full ({tok.current_vocab_size} of {tok.vocab_size} ids); nothing learned")
        return 0
    before = tok.current_vocab_size
    t0 = time.perf_counter()
    # files: read here, or by the workers of --scheduler's cluster
    n = tok.learn_merges(
        corpus,
        args.num_merges,
        source=args.source,
        min_frequency=args.min_frequency,
        num_threads=args.threads,
        progress=not args.quiet,
        client=args.scheduler,
        text_field=args.text_field,
        max_memory=args.max_memory,
        tmp_dir=args.tmp_dir,
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


_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_SIZES = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}


def duration(text: str) -> float:
    """Seconds in ``"600"``, ``"30s"``, ``"10m"``, ``"1.5h"``, ``"1d"`` (argparse type)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _UNITS or float(m.group(1)) * _UNITS[m.group(2)] <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration such as 600, 30s, 10m or 1h, not {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def size(text: str) -> int:
    """Bytes in ``"1000000"``, ``"512K"``, ``"256M"``, ``"2G"`` (binary units; argparse type)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _SIZES or int(float(m.group(1)) * _SIZES[m.group(2)]) < 1:
        raise argparse.ArgumentTypeError(f"expected a size such as 1000000, 512K, 256M or 2G, not {text!r}")
    return int(float(m.group(1)) * _SIZES[m.group(2)])


def cmd_sync(args: argparse.Namespace) -> int:
    from ..growing import DEFAULT_MAX_BYTES

    if args.max_bytes is None:
        args.max_bytes = DEFAULT_MAX_BYTES
    path = _path(args)
    tok, _ = _open(args, create=True)
    if args.every is None:
        report = tok.sync(args.url, sha256=args.sha256, timeout=args.timeout, path=path, max_bytes=args.max_bytes)
        print(report)
        return 0
    return _sync_every(tok, path, args)


def _sync_every(tok: GrowingBPETokenizer, path: Path, args: argparse.Namespace) -> int:
    """Check now and every ``--every``; each update and failure is a line on stderr; Ctrl-C ends it (130)."""
    import logging

    logger = logging.getLogger("tokenforge.growing")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    print(f"keeping {path} current from {args.url}, checking every {args.every:g} s; Ctrl-C to stop", flush=True)
    handle = tok.auto_sync(
        args.url, args.every, sha256=args.sha256, timeout=args.timeout, path=path, max_bytes=args.max_bytes
    )
    try:
        while handle.running:
            # sleep, not Thread.join: a Ctrl-C that interrupts join() can leave the
            # thread's lock held, and the join in stop() below would then never return
            time.sleep(0.5)
        return 1  # the thread never ends on its own; if it did, say so
    finally:
        handle.stop(timeout=30)  # a download in progress is cut off at once; bounded all the same
        logger.removeHandler(handler)
        logger.setLevel(level)


def _newest(tok: GrowingBPETokenizer, n: int) -> list[dict]:
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


def cmd_inspect(args: argparse.Namespace) -> int:
    path = _path(args)
    tok, _ = _open(args, create=False)
    newest = _newest(tok, args.newest)
    if args.json:
        print(json.dumps({**tok.get_stats(), "path": str(path), "newest_merges": newest}, indent=2, ensure_ascii=False))
        return 0
    from ..formats.patterns import pattern_name_for

    pattern = pattern_name_for(tok.pattern)
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
    common.add_argument(
        "--tokenizer",
        "-t",
        default=None,
        help=f"the tokenizer.json to use (default: ./{_DEFAULT_PATH}, which must exist; a new one is created only "
        "at a path given here)",
    )
    sub = p.add_subparsers(dest="grow_command", metavar="{learn,sync,inspect}")
    sub.required = True

    learn = sub.add_parser("learn", parents=[common], help="learn merges from a corpus and append them")
    learn.add_argument("corpus", nargs="+", help="files or directories (.txt, .jsonl, .parquet, optionally .gz/.zst)")
    learn.add_argument("--source", required=True, help="the name credited with the new merges")
    learn.add_argument(
        "--num-merges", type=int, required=True, help="merges to learn (fewer if the vocabulary fills up)"
    )
    learn.add_argument(
        "--min-frequency", type=int, default=2, help="stop when the best pair occurs fewer times (default 2)"
    )
    learn.add_argument("--vocab-size", type=int, default=None, help="set the declared maximum number of ids")
    learn.add_argument("--threads", type=int, default=None, help="threads for counting (default: all cores)")
    learn.add_argument("--text-field", default="text", help="JSON/parquet field holding the text (default: text)")
    from .kit import memory_args, scheduler_arg

    scheduler_arg(learn, "count the corpus")
    memory_args(learn, "counting and learning the merges")
    learn.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    learn.set_defaults(func=cmd_learn)

    sync = sub.add_parser("sync", parents=[common], help="take a published tokenizer.json if it extends the local one")
    sync.add_argument("url", help="http(s) or file URL, or a path")
    sync.add_argument("--sha256", default=None, help="refuse the download unless it has this SHA-256")
    sync.add_argument(
        "--timeout", type=float, default=10.0, help="deadline in seconds for the whole download (default 10)"
    )
    sync.add_argument(
        "--max-bytes",
        type=size,
        default=None,
        help="refuse a remote file larger than this (e.g. 64M, 1G; default 256M: ~3.8 million merges)",
    )
    sync.add_argument(
        "--every",
        type=duration,
        default=None,
        metavar="DURATION",
        help="keep checking every DURATION (e.g. 10m, 600, 1h) until interrupted; failures back off",
    )
    sync.add_argument(
        "--verbose", "-v", action="store_true", help="with --every: also log the checks that found nothing new"
    )
    sync.set_defaults(func=cmd_sync)

    insp = sub.add_parser("inspect", parents=[common], help="vocabulary size, per-source contributions, newest merges")
    # first and positional, as in every command about one tokenizer (-t/--tokenizer still works)
    insp.add_argument(
        "tokenizer_positional",
        nargs="?",
        default=None,
        metavar="TOKENIZER",
        help=f"the tokenizer.json to inspect (default: ./{_DEFAULT_PATH})",
    )
    insp.add_argument("--newest", type=int, default=10, help="how many of the newest merges to show (default 10)")
    insp.add_argument("--json", action="store_true", help="machine-readable output")
    insp.set_defaults(func=cmd_inspect)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``grow`` (with learn, sync, inspect) on the top-level command's subparsers."""
    p = subparsers.add_parser("grow", help="the ever-growing vocabulary: learn, sync, inspect")
    _add_commands(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from .kit import ArgumentParser, exit_codes_epilog, run_command

    p = ArgumentParser(
        prog="python -m tokenforge.cli.grow", description=__doc__.split("\n\n")[0], epilog=exit_codes_epilog()
    )
    _add_commands(p)
    args = p.parse_args(argv)
    return run_command(args.func, args, f"tokenforge grow {args.grow_command}")


if __name__ == "__main__":
    sys.exit(main())
