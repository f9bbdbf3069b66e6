"""The LZ78 family's commands: ``tokenforge lz78 train|setup|pretokenize``.

The same three are the seed's scripts, with the seed's names and flags:

    python scripts/lz78_tok_train.py --strategy frequency_gated --vocab_size 32000
    python scripts/lz78_setup_tokenizer.py --tsv_path P --tsv_format lz78|compressed
    python scripts/lz78_pretokenize.py

``train`` reads the corpus named positionally as in every command (or with the
seed's ``--input``: files or directories of .txt/.jsonl/.parquet, optionally
.gz/.zst), or the built-in default corpus (Python's own docs and sources) when
none is given, and writes the dictionary TSV (``-o/--output``). ``setup`` turns
a TSV into a tokenizer directory (``lz78.tsv`` with our header, plus
``token_bytes.npy`` for bits-per-byte evaluation, written as one save); by default it
gives the seed's layout (root, codes, 256 byte fallbacks, bos, eos, pad) and
adds nanochat's chat tokens only with ``--chat_tokens``. ``--tsv_style seed``
(train) writes exactly the seed's columns; ``--compact_output_vocab`` (train,
setup) gives no id to entries the text never emits. ``pretokenize`` writes
the one shard format, :func:`tokenforge.data.shards.pretokenize`'s (resumable;
Ctrl-C keeps the finished shards and says so).

Not handled: compacting against a text other than the training corpus in
``train`` (use ``setup --compact_output_vocab --input``), and pretokenizing
into the old ``tokenforge-token-shards`` layout (still read by ``ShardSet``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from ..errors import TokenforgeError

if TYPE_CHECKING:
    from ..lz78 import LZ78Tokenizer

__all__ = ["add_parser", "main_train", "main_setup", "main_pretokenize"]


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------
def _specials(value: str) -> str | list[str] | None:
    if value in ("none", ""):
        return None
    if value == "nanochat":
        return "nanochat"
    return [s for s in value.split(",") if s]


def _param(value: str) -> tuple[str, object]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"--param takes key=value, not {value!r}")
    k, v = value.split("=", 1)
    for conv in (int, float):
        try:
            return k, conv(v)
        except ValueError:
            pass
    return k, v


def _train_args(p: argparse.ArgumentParser) -> None:
    # the record's copies of lz78.STRATEGIES and DEFAULT_STRATEGY (a test keeps them
    # equal): building the parser (--help) imports neither the family nor numpy
    from ..registry import LZ78_DEFAULT_STRATEGY, LZ78_STRATEGIES
    from .kit import memory_args

    _corpus_args(p)
    p.add_argument(
        "--strategy",
        default=LZ78_DEFAULT_STRATEGY,
        choices=LZ78_STRATEGIES,
        help=f"training strategy (default: {LZ78_DEFAULT_STRATEGY}, as LZ78Tokenizer.train)",
    )
    p.add_argument("--vocab_size", type=int, default=32768, help="total ids, specials included (default 32768)")
    p.add_argument(
        "-o", "--output", default=None, help="output TSV or directory (default: lz78_<strategy>_<vocab_size>.tsv)"
    )
    p.add_argument("--no_chunking", action="store_true", help="train without GPT-4-pattern chunking")
    p.add_argument(
        "--special_tokens",
        default="none",
        help="extra specials after <|pad|>: none (default), nanochat, or a comma list",
    )
    p.add_argument(
        "--param",
        action="append",
        type=_param,
        default=[],
        metavar="KEY=VALUE",
        help="a strategy parameter (repeatable)",
    )
    p.add_argument("--max_chars", type=int, default=None, help="read at most this many characters of the corpus")
    p.add_argument("--text_field", default="text", help="JSON field / parquet column holding the text")
    p.add_argument("--num_threads", type=int, default=None, help="counting threads (default: all cores)")
    p.add_argument(
        "--scheduler",
        metavar="ADDR",
        default=None,
        help="count on this Dask cluster (e.g. tcp://host:8786); the workers read the --input files",
    )
    p.add_argument(
        "--tsv_format",
        default=None,
        choices=["lz78", "compressed"],
        help="file format (default: the dictionary's own: compressed for the compressed strategy, else lz78)",
    )
    memory_args(p, "the chunk counts", spell="_")
    _style_args(p)
    p.add_argument(
        "--compact_output_vocab",
        action="store_true",
        help="after training, give no id to entries that encoding the training corpus never emits (fewer ids)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def _style_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tsv_style",
        default="tokenforge",
        choices=["tokenforge", "seed"],
        help="tokenforge (default: header, escapes, output column) or seed (exactly the seed's columns, "
        "no header, no escapes)",
    )
    p.add_argument(
        "--drop_unwritable",
        action="store_true",
        help="with --tsv_style seed: leave out entries holding a tab, LF or CR (ids then change) instead of refusing",
    )


def _setup_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tsv_path", required=True, help="the dictionary TSV")
    p.add_argument(
        "--tsv_format",
        default="lz78",
        choices=["lz78", "compressed"],
        help="the TSV's columns: lz78 (code, parent, char, pattern; default) or compressed (Patricia trie)",
    )
    p.add_argument(
        "-o",
        "--output",
        "--output_dir",
        dest="output_dir",
        default=None,
        help="tokenizer directory (default: 'tokenizer' beside the TSV)",
    )
    p.add_argument(
        "--special_tokens",
        default="none",
        help="extra specials after <|pad|>: none (default: the seed's layout, or the file's own), "
        "nanochat, or a comma list",
    )
    p.add_argument(
        "--chat_tokens",
        action="store_true",
        help="add nanochat's 8 chat tokens after <|pad|> (same as --special_tokens nanochat)",
    )
    p.add_argument(
        "--no_chunking", action="store_true", help="encode without chunking (only if the dictionary was trained so)"
    )
    p.add_argument("--lenient", action="store_true", help="read a seed file with the seed loader's leniency")
    p.add_argument(
        "--compact_output_vocab",
        action="store_true",
        help="give no id to entries that encoding the --input text never emits (fewer ids)",
    )
    p.add_argument(
        "--input",
        nargs="*",
        default=None,
        help="with --compact_output_vocab: the text to encode (default: the built-in corpus)",
    )
    p.add_argument("--text_field", default="text", help="JSON field / parquet column holding the text")


def _pretokenize_args(p: argparse.ArgumentParser) -> None:
    _corpus_args(p)
    p.add_argument("-t", "--tokenizer", default="tokenizer", help="tokenizer directory or TSV (default: ./tokenizer)")
    p.add_argument(
        "-o",
        "--output",
        "--output_dir",
        dest="output_dir",
        default="pretokenized",
        help="where shards and index.json go (default: ./pretokenized)",
    )
    p.add_argument(
        "--shard_tokens",
        type=int,
        default=1 << 24,
        help="tokens per shard, at least (a shard ends at a document boundary; default 16M)",
    )
    p.add_argument(
        "--batch_chars", type=int, default=4 << 20, help="characters encoded per parallel batch (default 4M)"
    )
    p.add_argument("--text_field", default="text", help="JSON field / parquet column holding the text")
    p.add_argument("--num_threads", type=int, default=None, help="encoding threads (default: all cores)")
    p.add_argument("--no_bos", action="store_true", help="do not start every document with <|bos|>")
    p.add_argument("--overwrite", action="store_true", help="replace the shards in --output instead of resuming")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def _corpus_args(p: argparse.ArgumentParser) -> None:
    """The corpus, positional as in every command reading one; ``--input`` is the seed's spelling."""
    p.add_argument("corpus", nargs="*", default=[], help="corpus files or directories (default: the built-in corpus)")
    p.add_argument("--input", nargs="*", default=None, help="the same as CORPUS (the seed scripts' spelling)")


def _inputs(args: argparse.Namespace) -> list[str] | None:
    """The corpus named either way; both at once is a usage error."""
    if args.corpus and args.input:
        from .kit import UsageError

        raise UsageError("name the corpus once: as CORPUS or with --input, not both")
    return list(args.corpus or args.input or []) or None


def _corpus(inputs: Sequence[str] | None, text_field: str, max_chars: int | None = None) -> Iterator[str]:
    from ..data.corpus import iter_documents
    from ..data.default_corpus import iter_default_corpus

    if not inputs:
        docs = iter_default_corpus()
    else:
        paths = [Path(p) for p in inputs]
        from .kit import check_inputs

        check_inputs(paths)
        docs = iter_documents(paths, text_field=text_field)
    if max_chars is None:
        return docs

    def limited() -> Iterator[str]:
        left = max_chars
        for d in docs:
            if left <= 0:
                return
            yield d[:left]
            left -= len(d)

    return limited()


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------
def cmd_train(args: argparse.Namespace) -> int:
    from ..lz78 import LZ78Tokenizer

    params = dict(args.param)
    inputs = _inputs(args)
    out = Path(args.output or f"lz78_{args.strategy}_{args.vocab_size}.tsv")
    t0 = time.perf_counter()
    if args.scheduler:
        from .kit import check_inputs

        if args.max_chars is not None:
            raise TokenforgeError("--max_chars cannot be used with --scheduler (the workers read whole files)")
        if not inputs:
            raise TokenforgeError("--scheduler needs corpus files that the workers can read")
        corpus = [Path(p) for p in inputs]
        check_inputs(corpus)
        tok = LZ78Tokenizer.train(
            corpus,
            args.vocab_size,
            strategy=args.strategy,
            chunking=not args.no_chunking,
            special_tokens=_specials(args.special_tokens),
            num_threads=args.num_threads,
            progress=not args.quiet,
            text_field=args.text_field,
            client=args.scheduler,
            **params,
        )
    else:
        tok = LZ78Tokenizer.train_from_iterator(
            _corpus(inputs, args.text_field, args.max_chars),
            args.vocab_size,
            strategy=args.strategy,
            chunking=not args.no_chunking,
            special_tokens=_specials(args.special_tokens),
            num_threads=args.num_threads,
            progress=not args.quiet,
            max_memory=args.max_memory,
            tmp_dir=args.tmp_dir,
            **params,
        )
    dt = time.perf_counter() - t0
    mb = tok.data.settings.get("training", {}).get("corpus_bytes", 0) / 1e6
    print(f"trained {tok!r} on {mb:.1f} MB in {dt:.1f} s")
    if args.compact_output_vocab:
        _compact(tok, _corpus(inputs, args.text_field, args.max_chars))
    return _write(tok, out, args)


def _compact(tok: LZ78Tokenizer, texts: Iterable[str]) -> None:
    before = tok.vocab_size
    marked = tok.compact_output_vocab(texts)
    print(
        f"compact_output_vocab: {marked:,} entries are never emitted; now prefix-only, {before:,} ids became {tok.vocab_size:,}"
    )


def _write(tok: LZ78Tokenizer, out: Path, args: argparse.Namespace) -> int:
    """Write ``tok`` to ``out`` in the asked format and style; on a seed-style
    refusal keep the work in our own style beside it and say so."""
    from ..formats.lz78_tsv import SeedStyleError

    if out.suffix.lower() != ".tsv":
        if args.tsv_style == "seed":
            raise TokenforgeError(f"--tsv_style seed writes one .tsv file; {out} is not a .tsv path")
        tok.save(out)
        print(f"wrote {out}")
        return 0
    try:
        tok.save_tsv(out, args.tsv_format, style=args.tsv_style, unwritable="drop" if args.drop_unwritable else "error")
    except SeedStyleError as e:
        keep = out.with_name(out.stem + ".tokenforge.tsv")
        tok.save_tsv(keep, args.tsv_format)
        print(
            f"error: {e}\nnot written: {out}; the dictionary is kept in the tokenforge style in {keep}", file=sys.stderr
        )
        return 2
    print(f"wrote {out} ({args.tsv_style} style)")
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from ..lz78 import LZ78Tokenizer

    tsv = Path(args.tsv_path)
    specials = _specials(args.special_tokens)
    if args.chat_tokens:
        if specials not in (None, "nanochat"):
            raise TokenforgeError("--chat_tokens and --special_tokens with a list of tokens: give one of them")
        specials = "nanochat"
    tok = LZ78Tokenizer.from_tsv(
        tsv,
        tsv_format=args.tsv_format,
        chunking=False if args.no_chunking else None,
        special_tokens=specials,
        strict=not args.lenient,
    )
    if args.compact_output_vocab:
        _compact(tok, _corpus(args.input, args.text_field))
    out = Path(args.output_dir) if args.output_dir else tsv.parent / "tokenizer"
    import io

    import numpy as np

    from ..formats.atomic import atomic_write_all
    from ..formats.suffixes import check_save_suffix

    check_save_suffix(out, (), "lz78 setup --output")  # a directory
    npy = io.BytesIO()
    np.save(npy, tok.token_bytes().astype(np.int32))
    out.mkdir(parents=True, exist_ok=True)
    # the TSV and its token lengths as one save: a failure while writing replaces neither
    atomic_write_all([(out / "lz78.tsv", tok.to_bytes()), (out / "token_bytes.npy", npy.getvalue())])
    print(f"{tok!r}\nwrote {out / 'lz78.tsv'} and {out / 'token_bytes.npy'}")
    return 0


def _load_tokenizer(path: str | os.PathLike[str]) -> LZ78Tokenizer:
    from ..lz78 import LZ78Tokenizer

    p = Path(path)
    if not p.exists():
        raise TokenforgeError(f"no tokenizer at {p}; build one with lz78_setup_tokenizer.py (or pass --tokenizer)")
    return LZ78Tokenizer.load(p)


def cmd_pretokenize(args: argparse.Namespace) -> int:
    from .kit import check_inputs
    from .pretokenize import pretokenize_and_report

    inputs = _inputs(args)
    tok = _load_tokenizer(args.tokenizer)
    corpus: Iterable[Path] | Iterable[str]
    if inputs:
        corpus = [Path(p) for p in inputs]
        check_inputs(corpus)  # exit status 3, as for every command's missing input
    else:
        from ..data.default_corpus import iter_default_corpus

        corpus = iter_default_corpus()
    return pretokenize_and_report(
        corpus,
        tok,
        Path(args.output_dir),
        shard_tokens=args.shard_tokens,
        num_threads=args.num_threads,
        batch_chars=args.batch_chars,
        bos=not args.no_bos,
        text_field=args.text_field,
        progress=False if args.quiet else None,
        overwrite=args.overwrite,
    )


# ---------------------------------------------------------------------------
# wiring
# ---------------------------------------------------------------------------
def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``tokenforge lz78 train|setup|pretokenize``."""
    p = subparsers.add_parser("lz78", help="LZ78 family: train a dictionary, set up a tokenizer, pretokenize a corpus")
    sub = p.add_subparsers(dest="lz78_command", metavar="SUBCOMMAND")
    sub.required = True
    t = sub.add_parser("train", help="train an LZ78 dictionary (lz78_tok_train.py)")
    _train_args(t)
    t.set_defaults(func=cmd_train)
    s = sub.add_parser("setup", help="build a tokenizer directory from a TSV (lz78_setup_tokenizer.py)")
    _setup_args(s)
    s.set_defaults(func=cmd_setup)
    k = sub.add_parser("pretokenize", help="corpus -> token shards (lz78_pretokenize.py)")
    _pretokenize_args(k)
    k.set_defaults(func=cmd_pretokenize)


def _run(
    build: Callable[[argparse.ArgumentParser], object],
    func: Callable[[argparse.Namespace], int | None],
    argv: Sequence[str] | None,
    prog: str,
) -> int:
    from .kit import ArgumentParser, exit_codes_epilog, run_command  # both option spellings, one error handler

    p = ArgumentParser(prog=prog, epilog=exit_codes_epilog())
    build(p)
    args = p.parse_args(argv)
    return run_command(func, args, prog)


def main_train(argv: Sequence[str] | None = None) -> int:
    return _run(_train_args, cmd_train, argv, "lz78_tok_train.py")


def main_setup(argv: Sequence[str] | None = None) -> int:
    return _run(_setup_args, cmd_setup, argv, "lz78_setup_tokenizer.py")


def main_pretokenize(argv: Sequence[str] | None = None) -> int:
    return _run(_pretokenize_args, cmd_pretokenize, argv, "lz78_pretokenize.py")
