"""The ``tokenforge`` command.

    tokenforge train CORPUS... --vocab-size N -o OUT     train a BPE tokenizer
    tokenforge encode TOKENIZER [TEXT | --file F]        text -> ids
    tokenforge decode TOKENIZER [IDS... | --file F]      ids -> text
    tokenforge inspect TOKENIZER [--text F]              vocabulary statistics
    tokenforge demo                                      train on the built-in corpus and show it
    tokenforge reseal FILE...                            accept a deliberate edit of a file of ours

Families add their own subcommands (``tokenforge lz78 ...``, ``tokenforge
mixedgram ...``, ``tokenforge grow ...``): the record of each family in
:mod:`tokenforge.registry` names its CLI module, whose ``add_parser`` this
module calls; an import error there is an error, never a missing subcommand.

Every multi-word option takes both spellings, ``--vocab-size`` and
``--vocab_size`` (:class:`~tokenforge.cli.kit.ArgumentParser`, which every
subcommand's parser and the seed scripts' parsers are). Every command runs
through :func:`~tokenforge.cli.kit.run_command`: a user error is one line on
stderr and a documented exit status (:data:`~tokenforge.cli.kit.EXIT_CODES`);
a closed pipe (``| head``) ends quietly. Those live in :mod:`tokenforge.cli.kit`,
which the family subcommands import too.

Not handled: abbreviations of an option in its other spelling (``--vocab_s``);
errors that are bugs (anything not listed in :data:`EXIT_CODES`) keep their
traceback, so they can be reported.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from ..errors import TokenforgeError
from ..registry import FAMILIES
from . import compare as _compare_cli
from . import serve as _serve_cli
from .kit import (  # noqa: F401  (the kit's names stay importable from tokenforge.cli.main)
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OS,
    EXIT_USAGE,
    ArgumentParser,
    check_inputs,
    exit_codes_epilog,
    memory_args,
    read_utf8,
    run_command,
    scheduler_arg,
)
from .pretokenize import pretokenize_and_report
from .stats import inspect_lines, vocabulary_stats  # noqa: F401  (tokenforge.cli.main.vocabulary_stats stays)


def _specials_arg(value: str) -> str | list[str] | None:
    if value in ("nanochat",):
        return "nanochat"
    if value in ("none", ""):
        return None
    return [s for s in value.split(",") if s]


def _lang_paths(items: list[str], what: str) -> dict[str, list[Path]]:
    """``LANG=PATH`` arguments (repeatable) -> {lang: [paths]}; a missing file is exit 3."""
    from ..data.languages import parse_heldout_arg

    out: dict[str, list[Path]] = {}
    for item in items:
        lang, path = parse_heldout_arg(item)
        if lang is None:
            raise TokenforgeError(f"{what} {item!r}: expected LANG=PATH (e.g. de=dev.de.txt)")
        check_inputs([path], f"{what} path")
        out.setdefault(lang, []).append(Path(path))
    return out


def _train_corpus(args: argparse.Namespace) -> tuple[object, dict[str, list[Path]] | None]:
    """The corpus of ``tokenforge train``: paths; with ``--parity``, either all
    ``LANG=PATH`` (per-language training files) or all paths (JSON lines whose
    lines carry ``lang``)."""
    if not args.parity:
        corpus = [Path(p) for p in args.corpus]
        check_inputs(corpus)
        return corpus, None
    from ..data.languages import parse_heldout_arg

    tagged = [parse_heldout_arg(x)[0] is not None for x in args.corpus]
    dev = _lang_paths(args.parity, "--parity")
    if all(tagged):
        return _lang_paths(args.corpus, "corpus"), dev
    if any(tagged):
        raise TokenforgeError(
            "with --parity, give the corpus either all as LANG=PATH or all as JSON-lines files whose lines "
            "carry a 'lang' field, not both"
        )
    corpus = [Path(p) for p in args.corpus]
    check_inputs(corpus)
    return corpus, dev


def _int_or_share(value: str) -> int | float:
    """``--parity-global-merges``: an int (merges) or a float in [0, 1) (a share of them)."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or a float in [0, 1), not {value!r}") from None


def _parity_measure_arg(value: str) -> str | dict[str, int]:
    """``--parity-measure``: a name, or ``LANG=N,LANG=N`` (each dev text's size in a common unit)."""
    if "=" not in value:
        return value
    out = {}
    for part in value.split(","):
        lang, _, n = part.partition("=")
        try:
            out[lang.strip()] = int(n)
        except ValueError:
            raise TokenforgeError(f"--parity-measure {value!r}: {n!r} is not an integer") from None
    return out


def cmd_train(args: argparse.Namespace) -> int:
    from ..bpe import BPETokenizer

    corpus, parity = _train_corpus(args)
    if args.format == "tokenforge":  # refused before training, not after: -o x.tiktoken wants --format tiktoken
        from ..formats.suffixes import check_save_suffix

        check_save_suffix(args.output, (".json",), "tokenforge train (pick the file's format with --format)")
    extra = {}
    if parity is not None:
        extra = dict(
            parity=parity,
            parity_measure=_parity_measure_arg(args.parity_measure),
            parity_global_merges=args.parity_global_merges,
            parity_window=args.parity_window,
            parity_window_alpha=args.parity_window_alpha,
            parity_tolerance=args.parity_tolerance,
            parity_shared=args.parity_shared,
        )
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
        client=args.scheduler,
        max_memory=args.max_memory,
        tmp_dir=args.tmp_dir,
        **extra,
    )
    dt = time.perf_counter() - t0
    out = Path(args.output)
    if args.format == "tokenforge":
        tok.save(out)
    elif args.format == "tiktoken":
        tok.save_tiktoken(out)
    elif args.format == "hf":
        tok.save_hf(out)
    elif args.format == "nanochat":
        tok.save_nanochat(out)
    elif args.format == "transformers":
        tok.save_pretrained(out)
    mb = tok.data.training.get("corpus_bytes", 0) / 1e6
    print(f"trained {tok!r} on {mb:.1f} MB in {dt:.1f} s; wrote {out}")
    return 0


def cmd_pretokenize(args: argparse.Namespace) -> int:
    from ..registry import load

    corpus = [Path(p) for p in args.corpus]
    check_inputs(corpus)
    check_inputs([args.tokenizer], "tokenizer")
    tok = load(args.tokenizer)
    return pretokenize_and_report(
        corpus,
        tok,
        Path(args.output),
        shard_tokens=args.shard_tokens,
        num_threads=args.threads,
        bos=not args.no_bos,
        text_field=args.text_field,
        split_on=args.split_on,
        progress=False if args.quiet else None,
        overwrite=args.overwrite,
        errors=args.errors,
        client=args.scheduler,
        partition_bytes=None if args.partition_mb is None else max(1, int(args.partition_mb * 1e6)),
    )


def _read_text(args: argparse.Namespace) -> str:
    if args.file:
        return read_utf8(args.file)
    if args.text is not None:
        return args.text
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokenforgeError(f"<stdin>: not UTF-8 text at byte {e.start} ({e.reason})") from None


def cmd_encode(args: argparse.Namespace) -> int:
    from ..registry import load

    tok = load(args.tokenizer)
    text = _read_text(args)
    ids = tok.encode(text, allowed_special="all" if args.allow_special else None)  # None: the tokenizer's policy
    if args.npy:
        import numpy as np

        from ..formats.atomic import atomic_open
        from ..ids import ids_dtype

        with atomic_open(args.npy, "wb") as f:
            np.save(f, np.asarray(ids, dtype=ids_dtype(tok.vocab_size)))
        print(f"{len(ids)} ids -> {args.npy}")
    elif args.json:
        print(json.dumps(ids))
    else:
        print(" ".join(map(str, ids)))
    return 0


def _parse_ids(text: str, where: str) -> list[int]:
    out = []
    for k, x in enumerate(text.replace(",", " ").replace("[", " ").replace("]", " ").split()):
        try:
            out.append(int(x))
        except ValueError:
            raise TokenforgeError(f"{where}: item {k} ({x[:40]!r}) is not an integer id") from None
    return out


def cmd_decode(args: argparse.Namespace) -> int:
    from ..registry import load

    tok = load(args.tokenizer)
    if args.file:
        if args.file.endswith(".npy"):
            import numpy as np

            ids = np.load(args.file, allow_pickle=False)
        else:
            ids = _parse_ids(read_utf8(args.file), args.file)
    elif args.ids:
        ids = _parse_ids(" ".join(args.ids), "ids")
    else:
        ids = _parse_ids(sys.stdin.read(), "<stdin>")
    text = tok.decode(ids)
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        # a lone surrogate (decode gives back what encode took; tokenforge.base):
        # on a UTF-8 stream, write its "surrogatepass" bytes, the bytes its ids stand for
        import codecs

        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None or codecs.lookup(sys.stdout.encoding or "ascii").name != "utf-8":
            raise
        sys.stdout.flush()
        buffer.write(text.encode("utf-8", "surrogatepass"))
        buffer.flush()
    if sys.stdout.isatty():
        sys.stdout.write("\n")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..registry import identify

    form = identify(args.tokenizer)
    tok = form.read(Path(args.tokenizer))
    text = read_utf8(args.text) if args.text else None
    stats = vocabulary_stats(tok, text, top=args.top)
    stats["read_as"] = form.name
    if args.json:
        print(json.dumps(stats, indent=2, ensure_ascii=False))
        return 0
    print("\n".join(inspect_lines(stats, tok)))
    return 0


def cmd_reseal(args: argparse.Namespace) -> int:
    from ..formats.checksum import reseal

    for p in args.files:  # in order; the first error ends the command, as in every other one
        print(f"{p}: {reseal(p)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)


_TOKENIZER_HELP = "a tokenizer file or directory of any family (tokenforge inspect says how it is read)"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="tokenforge", description="Train, compare and use LM tokenizers.", epilog=exit_codes_epilog()
    )
    from .._core import __version__

    p.add_argument("-V", "--version", action="version", version=f"tokenforge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser("train", help="train a byte-level BPE tokenizer")
    t.add_argument(
        "corpus",
        nargs="+",
        help=".txt/.jsonl/.parquet files or directories (optionally .gz/.zst); with --parity, LANG=PATH "
        "per language, or JSON lines with a 'lang' field",
    )
    t.add_argument("--vocab-size", type=int, required=True, help="total ids, special tokens included")
    t.add_argument("-o", "--output", required=True, help="output directory (or .json / .tiktoken file)")
    t.add_argument(
        "--pattern",
        default="gpt4",
        help="gpt4 (default), gpt2, cl100k, o200k, none, tiktoken's or Hugging Face's name of one "
        "(cl100k_base, o200k_base, gpt-4, ...), or a regex",
    )
    t.add_argument("--specials", default="nanochat", help="nanochat (default), none, or a comma-separated list")
    t.add_argument(
        "--tie-break",
        default="pair_ids",
        choices=["pair_ids", "lexicographic"],
        help="between pairs of equal count: the smaller pair of ids (pair_ids, default, as rustbpe) or the "
        "larger pair of byte strings (lexicographic, as seed 003)",
    )
    t.add_argument(
        "--min-frequency", type=int, default=1, help="stop when the best pair occurs fewer times (default 1)"
    )
    t.add_argument("--threads", type=int, default=None, help="counting threads (default: all cores)")
    t.add_argument(
        "--layout",
        default="nanochat",
        choices=["nanochat", "specials_first"],
        help="id layout: bytes, merges, then specials (nanochat, default) or specials first (as seed 003)",
    )
    t.add_argument("--text-field", default="text", help="JSON field / parquet column holding the text")
    t.add_argument("--split-on", default=None, help="split .txt files into documents at this string")
    t.add_argument(
        "--errors",
        default="strict",
        choices=["strict", "replace", "ignore"],
        help="invalid UTF-8 or a lone surrogate escape in the corpus: an error naming file and line "
        "(strict, default), U+FFFD (replace) or dropped (ignore)",
    )
    t.add_argument(
        "--format",
        default="tokenforge",
        choices=["tokenforge", "tiktoken", "hf", "nanochat", "transformers"],
        help="tokenforge (default: our file or directory), tiktoken (a .tiktoken rank file), hf (a "
        "tokenizer.json), nanochat (a directory with tokenizer.pkl and token_bytes.pt), transformers (a "
        "directory AutoTokenizer.from_pretrained reads, with a chat template)",
    )
    t.add_argument(
        "--parity",
        action="append",
        default=[],
        metavar="LANG=PATH",
        help="parity-aware BPE: a language's development text (repeat per language; every training "
        "language needs one); each merge then serves the language worst compressed on its dev text",
    )
    t.add_argument(
        "--parity-measure",
        default="tokens",
        help="with --parity: tokens (parallel dev texts, default), bytes, chars, or LANG=N,... (each dev "
        "text's size in a unit common to all)",
    )
    t.add_argument(
        "--parity-global-merges",
        type=_int_or_share,
        default=0,
        metavar="N",
        help="with --parity: the first N merges are plain BPE's (hybrid variant; default 0); "
        "0.5: the first half of them",
    )
    t.add_argument(
        "--parity-window",
        type=int,
        default=0,
        metavar="W",
        help="with --parity: the moving-window variant over the last W merges (0: off; the paper uses 100)",
    )
    t.add_argument(
        "--parity-window-alpha",
        type=float,
        default=2.0,
        metavar="A",
        help="with --parity-window: pass over a language picked for more than A / (languages) of the window",
    )
    t.add_argument(
        "--parity-tolerance",
        type=float,
        default=0.0,
        metavar="E",
        help="with --parity: a global merge while every language's dev cost is within 1+E of the cheapest (0: off)",
    )
    t.add_argument(
        "--parity-shared",
        type=float,
        default=0.0,
        metavar="F",
        help="with --parity: the worst language's pair most frequent over all languages among its pairs "
        "within a factor F of its top count (0: off)",
    )
    scheduler_arg(t, "count the corpus")
    memory_args(t, "counting and training")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    t.set_defaults(func=cmd_train)

    pt = sub.add_parser(
        "pretokenize",
        help="encode a corpus into token shards with any tokenizer (resumable; on a Dask cluster with --scheduler)",
    )
    pt.add_argument("corpus", nargs="+", help=".txt/.jsonl/.parquet files or directories (optionally .gz/.zst)")
    pt.add_argument("-t", "--tokenizer", required=True, help="a tokenizer file or directory of any family")
    pt.add_argument("-o", "--output", required=True, help="the shard directory (index.json and shard files)")
    pt.add_argument("--shard-tokens", type=int, default=1 << 24, help="tokens per shard (default 16,777,216)")
    pt.add_argument("--threads", type=int, default=None, help="encoding threads (default: all cores)")
    pt.add_argument("--text-field", default="text", help="JSON field / parquet column holding the text")
    pt.add_argument("--split-on", default=None, help="split .txt files into documents at this string")
    pt.add_argument(
        "--errors", default="strict", choices=["strict", "replace", "ignore"], help="invalid UTF-8 in the corpus"
    )
    pt.add_argument("--no-bos", action="store_true", help="do not start every document with the BOS id")
    pt.add_argument("--overwrite", action="store_true", help="replace what --output holds instead of resuming")
    scheduler_arg(pt, "encode the corpus")
    pt.add_argument("--partition-mb", type=float, default=None, help="with --scheduler: about this many MB per task")
    pt.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    pt.set_defaults(func=cmd_pretokenize)

    e = sub.add_parser("encode", help="encode text to ids")
    e.add_argument("tokenizer", help=_TOKENIZER_HELP)
    e.add_argument("text", nargs="?", default=None, help="the text (default: stdin)")
    e.add_argument("--file", help="read the text from this file")
    e.add_argument(
        "--allow-special",
        action="store_true",
        help="turn special-token text into special ids (seed 003's tokenizers always do)",
    )
    e.add_argument("--json", action="store_true", help="print a JSON list")
    e.add_argument("--npy", help="write the ids to this .npy file instead")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode ids to text")
    d.add_argument("tokenizer", help=_TOKENIZER_HELP)
    d.add_argument("ids", nargs="*", help="ids (default: stdin)")
    d.add_argument("--file", help="a file of ids (whitespace/JSON) or a .npy array")
    d.set_defaults(func=cmd_decode)

    i = sub.add_parser("inspect", help="vocabulary statistics, longest tokens, bytes per token")
    i.add_argument("tokenizer", help=_TOKENIZER_HELP)
    i.add_argument("--text", help="measure bytes per token on this UTF-8 file")
    i.add_argument("--top", type=int, default=10, help="how many of the longest tokens to show (default 10)")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(func=cmd_inspect)

    m = sub.add_parser("demo", help="train on the built-in corpus (Python's own docs and sources) and show the result")
    m.add_argument("--vocab-size", type=int, default=8192, help="ids of the tokenizers it trains (default 8192)")
    m.add_argument("--max-mb", type=float, default=None, help="use at most this many MB of the corpus")
    m.add_argument(
        "-o",
        "--output",
        "--out",
        dest="out",
        default="reports/demo",
        help="where the demo writes its tokenizer and report (default reports/demo; --out is the older spelling)",
    )
    m.add_argument("--threads", type=int, default=None, help="threads for training and encoding (default: all cores)")
    m.add_argument("--no-color", action="store_true", help="print the token view without terminal colours")
    m.add_argument("--families", default=None, help="what the comparison part compares (default: every family present)")
    m.add_argument("--seeds", type=int, default=2, help="seeds per bits-per-byte measurement (default 2)")
    m.add_argument("--no-bpb", action="store_true", help="compare compression only (no language models)")
    m.set_defaults(func=cmd_demo)

    r = sub.add_parser(
        "reseal",
        help="record the checksum of a file of ours edited by hand on purpose "
        "(also: python -m tokenforge.formats.checksum reseal FILE)",
    )
    r.add_argument("files", nargs="+", metavar="FILE", help="tokenizer or shard index files")
    r.set_defaults(func=cmd_reseal)

    for fam in FAMILIES.values():  # each family's own subcommands: the module its record names
        if fam.cli is not None:
            importlib.import_module(fam.cli).add_parser(sub)
    _compare_cli.add_parser(sub)
    _serve_cli.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # the full command in messages: "tokenforge grow sync", "tokenforge lz78 train"
    words = [args.command] + [v for k, v in vars(args).items() if k.endswith("_command") and isinstance(v, str)]
    return run_command(args.func, args, " ".join(["tokenforge", *words]))


if __name__ == "__main__":
    sys.exit(main())
