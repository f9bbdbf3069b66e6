"""``tokenforge compare``: train or load tokenizers, measure them, write a report.

    tokenforge compare                                   BPE at 8,192 on the built-in corpus
    tokenforge compare CORPUS... --heldout FILE \\
        --families bpe,lz78:frequency_gated,lz78:frequency_gated:nochunk \\
        --vocab-sizes 8192 --bpb --seeds 3 -o reports/bench
    tokenforge compare CORPUS... --heldout de=de.txt --heldout en=en.txt --reference-lang en

Families are given as specs (``bpe``, ``lz78:<strategy>[:nochunk]``, ``lz78:all``,
``mixedgram``, ``growing[:rounds=N]``, each with optional ``key=value`` training
options); a family this tokenforge does not have is skipped and listed in the
report. ``--load LABEL=PATH`` adds tokenizers from files. Held-out documents
with a language (``--heldout LANG=PATH``, or a ``lang`` field in JSON lines)
add per-language bytes/token, characters/token, fertility, continued-word rate
and the premium against ``--reference-lang``, with their Gini per tokenizer; ``--parity-dev`` gives
``bpe:parity`` parallel development text of its own. The report (Markdown,
HTML, PNG plots, JSON) goes to ``-o`` with the exact command that reproduces it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Callable

from ..registry import DEFAULT_SPEC, FAMILIES
from .kit import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from ..eval.compare import CompareOptions


def _ints(text: str) -> list[int]:
    try:
        out = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def _seeds(text: str) -> list[int]:
    """``3`` = seeds 0,1,2; ``0,5,7`` = those seeds."""
    try:
        if "," in text:
            return [int(x) for x in text.split(",") if x.strip()]
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seeds or a comma-separated list of seeds, got {text!r}"
        ) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of seeds >= 1, got {text!r}")
    return list(range(n))


def _checked(parse: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse ``type``: the option's text as given (the report's command shows it so),
    once ``parse`` accepts it; a text it refuses is a command-line error (exit status 2,
    one line), as for any other malformed number."""

    def check(text: str) -> str:
        parse(text)
        return text

    check.__name__ = parse.__name__
    return check


def _load_arg(text: str) -> tuple[str, str]:
    if "=" not in text:
        return text, text
    label, path = text.split("=", 1)
    return label, path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "corpus",
        nargs="*",
        help="corpus files or directories (.txt/.jsonl/.parquet[.gz/.zst]); default: the built-in corpus",
    )
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="[LANG=]PATH",
        help="held-out file (repeatable; default: every tenth corpus document). LANG=PATH gives its documents a "
        "language; JSON lines may carry 'lang' (and 'parallel_id') fields. Documents with a language get "
        "per-language metrics, premiums and their Gini",
    )
    p.add_argument(
        "--parity-dev",
        action="append",
        default=[],
        metavar="[LANG=]PATH",
        help="development text of every bpe:parity spec (repeatable; LANG=PATH or JSON lines with 'lang'): "
        "parallel text, the same content in every language (default: the training documents' parallel units)",
    )
    p.add_argument(
        "--reference-lang",
        default="en",
        metavar="LANG",
        help="the language premiums are measured against (default en)",
    )
    p.add_argument(
        "--families",
        default=DEFAULT_SPEC,
        help="comma-separated specs: " + ", ".join(f.spec.synopsis or f.name for f in FAMILIES.values()),
    )
    p.add_argument(
        "--vocab-sizes", default="8192", type=_checked(_ints), help="comma-separated vocabulary sizes (default 8192)"
    )
    p.add_argument(
        "--load", action="append", default=[], metavar="LABEL=PATH", help="also compare a tokenizer file (repeatable)"
    )
    p.add_argument(
        "--train-mb", type=float, default=None, help="train tokenizers on at most this many MB (default: all)"
    )
    p.add_argument("--eval-mb", type=float, default=2.0, help="held-out MB for compression metrics (default 2)")
    p.add_argument("--text-field", default="text", help="JSON field / parquet column holding the text")
    b = p.add_argument_group("bits per byte")
    b.add_argument("--bpb", action="store_true", help="train the harness's GPT per tokenizer and report bits per byte")
    b.add_argument(
        "--seeds", default="1", type=_checked(_seeds), help="number of seeds (3 = seeds 0,1,2) or a list (0,5,7)"
    )
    b.add_argument("--bpb-train-mb", type=float, default=2.0, help="training text per model, MB (default 2)")
    b.add_argument("--bpb-eval-mb", type=float, default=0.5, help="held-out text scored, MB (default 0.5)")
    b.add_argument(
        "--bpb-vocab-sizes",
        default=None,
        type=_checked(_ints),
        help="measure BPB only at these vocabulary sizes (default: all)",
    )
    b.add_argument(
        "--embeddings", default="flat", help="embedding modes: flat, structured, hierarchical, tuple (comma-separated)"
    )
    # the harness's model (eval.bpb.BPBConfig's defaults; a test keeps them equal, so that
    # --help does not import the harness and numpy)
    b.add_argument("--layers", type=int, default=4, help="transformer layers (default 4)")
    b.add_argument("--width", type=int, default=128, help="model width, the embedding size (default 128)")
    b.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    b.add_argument("--seq-len", type=int, default=256, help="context length in tokens (default 256)")
    b.add_argument("--batch-size", type=int, default=8, help="training sequences per step (default 8)")
    b.add_argument(
        "--epochs", type=float, default=1.0, help="passes over the training text; fractions allowed (default 1)"
    )
    b.add_argument("--lr", type=float, default=3e-3, help="peak learning rate, cosine-decayed (default 0.003)")
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    b.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the models (faster where supported)")
    p.add_argument(
        "--threads", type=int, default=None, help="threads for training, encoding and torch (default: all cores)"
    )
    p.add_argument(
        "-o",
        "--output",
        "--out",
        dest="out",
        default="reports/compare",
        help="report directory (default reports/compare; --out is the older spelling)",
    )
    p.add_argument(
        "--no-reuse",
        action="store_true",
        help="retrain tokenizers and recompute bits-per-byte results even when cached ones match",
    )
    p.add_argument("--title", default="Tokenizer comparison", help="the report's title (default: Tokenizer comparison)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="train or load tokenizers, measure compression (and bits per byte), write a report"
    )
    add_arguments(p)
    p.set_defaults(func=cmd_compare)


def options_from_args(args: argparse.Namespace, command: str) -> CompareOptions:
    from ..eval.bpb import BPBConfig
    from ..eval.compare import CompareOptions

    cfg = BPBConfig(
        n_layer=args.layers,
        n_head=args.heads,
        n_embd=args.width,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        epochs=args.epochs,
        lr=args.lr,
        device=args.device,
        threads=args.threads,
        autocast="bf16" if args.bf16 else None,
    )
    return CompareOptions(
        corpus=list(args.corpus),
        heldout=list(args.heldout) or None,
        parity_dev=list(args.parity_dev) or None,
        reference_lang=args.reference_lang,
        families=args.families,
        vocab_sizes=_ints(args.vocab_sizes),
        load=[_load_arg(x) for x in args.load],
        train_mb=args.train_mb,
        eval_mb=args.eval_mb,
        bpb=args.bpb,
        seeds=_seeds(args.seeds),
        bpb_train_mb=args.bpb_train_mb,
        bpb_eval_mb=args.bpb_eval_mb,
        bpb_vocab_sizes=None if args.bpb_vocab_sizes is None else _ints(args.bpb_vocab_sizes),
        embeddings=[m.strip() for m in args.embeddings.split(",") if m.strip()],
        bpb_config=cfg,
        threads=args.threads,
        out=args.out,
        text_field=args.text_field,
        progress=False if args.quiet else None,
        command=command,
        title=args.title,
        reuse=not args.no_reuse,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from ..eval.compare import run_compare
    from .kit import check_inputs

    check_inputs(args.corpus)  # a missing corpus file is the OS-class error (exit 3), as in every command
    opts = options_from_args(args, _rebuild_command(args))
    try:
        results = run_compare(opts)
    except KeyboardInterrupt:
        print(
            f"interrupted: the finished part of the report is in {opts.out}/ (status: interrupted); "
            "trained tokenizers and pretokenized shards are kept there and the same command reuses them",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(f"report: {opts.out}/report.html and {opts.out}/report.md ({len(results['rows'])} tokenizers)")
    return 0


def _rebuild_command(args: argparse.Namespace) -> str:
    """The canonical command line equivalent to ``args`` (every non-default option, in a fixed order)."""
    parts = ["tokenforge", "compare", *args.corpus]
    for x in args.heldout:
        parts += ["--heldout", x]
    for x in args.parity_dev:
        parts += ["--parity-dev", x]
    parser = argparse.ArgumentParser()
    add_arguments(parser)  # the defaults live in one place: the parser's
    keys = "reference_lang families vocab_sizes train_mb eval_mb text_field seeds bpb_vocab_sizes bpb_train_mb"
    keys += " bpb_eval_mb embeddings layers width heads seq_len batch_size epochs lr device threads out title"
    defaults = {key: parser.get_default(key) for key in keys.split()}
    for key, default in defaults.items():
        v = getattr(args, key, default)
        if v != default:
            parts += [("-o" if key == "out" else "--" + key.replace("_", "-")), str(v)]
    for x in args.load:
        parts += ["--load", x]
    if args.bpb:
        parts.append("--bpb")
    if args.no_reuse:
        parts.append("--no-reuse")
    if getattr(args, "bf16", False):
        parts.append("--bf16")
    return shlex.join(parts)
