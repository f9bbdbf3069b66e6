"""The LZ78 family's commands: ``tokenforge lz78 train|setup|pretokenize``.

The same three are the seed's scripts, with the seed's names and flags:

    python scripts/lz78_tok_train.py --strategy frequency_gated --vocab_size 32000
    python scripts/lz78_setup_tokenizer.py --tsv_path P --tsv_format lz78|compressed
    python scripts/lz78_pretokenize.py

``train`` reads the corpus given with ``--input`` (files or directories of
.txt/.jsonl/.parquet, optionally .gz/.zst), or the built-in default corpus
(Python's own docs and sources) when none is given, and writes the dictionary
TSV. ``setup`` turns a TSV into a tokenizer directory (``lz78.tsv`` with our
header, plus ``token_bytes.npy`` for bits-per-byte evaluation). ``pretokenize``
turns a corpus into token shards (see :func:`pretokenize`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import FormatError, TokenforgeError

__all__ = ["add_parser", "main_train", "main_setup", "main_pretokenize", "pretokenize", "SHARD_INDEX"]

SHARD_INDEX = "index.json"
SHARD_FORMAT = "tokenforge-token-shards"
SHARD_VERSION = 1


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------
def _specials(value: str):
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
    from ..lz78 import STRATEGIES

    p.add_argument("--strategy", default="frequency_gated", choices=STRATEGIES, help="training strategy (default: frequency_gated, as the seed)")
    p.add_argument("--vocab_size", type=int, default=32768, help="total ids, specials included (default 32768)")
    p.add_argument("--input", nargs="*", default=None, help="corpus files or directories (default: the built-in corpus)")
    p.add_argument("--output", default=None, help="output TSV (default: lz78_<strategy>_<vocab_size>.tsv)")
    p.add_argument("--no_chunking", action="store_true", help="train without GPT-4-pattern chunking")
    p.add_argument("--special_tokens", default="none", help="extra specials after <|pad|>: none (default), nanochat, or a comma list")
    p.add_argument("--param", action="append", type=_param, default=[], metavar="KEY=VALUE", help="a strategy parameter (repeatable)")
    p.add_argument("--max_chars", type=int, default=None, help="read at most this many characters of the corpus")
    p.add_argument("--text_field", default="text", help="JSON field / parquet column holding the text")
    p.add_argument("--num_threads", type=int, default=None)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def _setup_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tsv_path", required=True, help="the dictionary TSV")
    p.add_argument("--tsv_format", default="lz78", choices=["lz78", "compressed"])
    p.add_argument("--output_dir", default=None, help="tokenizer directory (default: 'tokenizer' beside the TSV)")
    p.add_argument("--special_tokens", default="nanochat", help="extra specials after <|pad|>: nanochat (default), none, or a comma list")
    p.add_argument("--no_chunking", action="store_true", help="encode without chunking (only if the dictionary was trained so)")
    p.add_argument("--lenient", action="store_true", help="read a seed file with the seed loader's leniency")


def _pretokenize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", default="tokenizer", help="tokenizer directory or TSV (default: ./tokenizer)")
    p.add_argument("--input", nargs="*", default=None, help="corpus files or directories (default: the built-in corpus)")
    p.add_argument("--output_dir", default="pretokenized", help="where shards and index.json go (default: ./pretokenized)")
    p.add_argument("--shard_tokens", type=int, default=1 << 26, help="tokens per shard, at least (a shard ends at a document boundary)")
    p.add_argument("--batch_docs", type=int, default=1024, help="documents encoded per parallel batch")
    p.add_argument("--text_field", default="text")
    p.add_argument("--num_threads", type=int, default=None)
    p.add_argument("--no_bos", action="store_true", help="do not start every document with <|bos|>")
    p.add_argument("-q", "--quiet", action="store_true")


def _corpus(inputs, text_field: str, max_chars: int | None = None):
    from ..data.corpus import iter_documents
    from ..data.default_corpus import iter_default_corpus

    if not inputs:
        docs = iter_default_corpus()
    else:
        paths = [Path(p) for p in inputs]
        from .main import check_inputs

        check_inputs(paths)
        docs = iter_documents(paths, text_field=text_field)
    if max_chars is None:
        return docs

    def limited():
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
def cmd_train(args) -> int:
    from ..lz78 import LZ78Tokenizer

    params = dict(args.param)
    out = Path(args.output or f"lz78_{args.strategy}_{args.vocab_size}.tsv")
    t0 = time.perf_counter()
    tok = LZ78Tokenizer.train(
        _corpus(args.input, args.text_field, args.max_chars),
        args.strategy,
        args.vocab_size,
        chunking=not args.no_chunking,
        special_tokens=_specials(args.special_tokens),
        num_threads=args.num_threads,
        progress=not args.quiet,
        **params,
    )
    dt = time.perf_counter() - t0
    if out.suffix.lower() != ".tsv":
        tok.save(out)
    else:
        tok.save_tsv(out)
    mb = tok.data.settings.get("training", {}).get("corpus_bytes", 0) / 1e6
    print(f"trained {tok!r} on {mb:.1f} MB in {dt:.1f} s; wrote {out}")
    return 0


def cmd_setup(args) -> int:
    from ..lz78 import LZ78Tokenizer

    tsv = Path(args.tsv_path)
    tok = LZ78Tokenizer.from_tsv(
        tsv,
        tsv_format=args.tsv_format,
        chunking=False if args.no_chunking else None,
        special_tokens=_specials(args.special_tokens),
        strict=not args.lenient,
    )
    out = Path(args.output_dir) if args.output_dir else tsv.parent / "tokenizer"
    tok.save(out)
    from ..formats.atomic import atomic_open

    with atomic_open(out / "token_bytes.npy", "wb") as f:
        np.save(f, tok.token_bytes().astype(np.int32))
    print(f"{tok!r}\nwrote {out / 'lz78.tsv'} and {out / 'token_bytes.npy'}")
    return 0


def _load_tokenizer(path):
    from ..lz78 import LZ78Tokenizer

    p = Path(path)
    if not p.exists():
        raise TokenforgeError(f"no tokenizer at {p}; build one with lz78_setup_tokenizer.py (or pass --tokenizer)")
    tok = LZ78Tokenizer.load(p)
    file = p / "lz78.tsv" if p.is_dir() else p
    return tok, hashlib.sha256(file.read_bytes()).hexdigest()


def pretokenize(
    tokenizer,
    documents,
    output_dir,
    *,
    tokenizer_sha256: str = "",
    shard_tokens: int = 1 << 26,
    batch_docs: int = 1024,
    num_threads: int | None = None,
    bos: bool = True,
    progress: bool = True,
) -> dict:
    """Encode ``documents`` into token shards under ``output_dir``; resumable.

    Each document becomes ``[<|bos|>] + ids``. Shards are ``shard_NNNNN.npy``
    (uint16 when the vocabulary fits, else uint32), each closed at the first
    document boundary after ``shard_tokens`` tokens and written atomically;
    ``index.json`` (also atomic, rewritten after every shard) lists them with
    their token and document counts. Run again with the same tokenizer and
    corpus, it skips the documents already in finished shards and goes on.
    Returns the index.
    """
    from ..base import ids_dtype
    from ..data.corpus import progress_bar
    from ..formats.atomic import atomic_open, atomic_write

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = ids_dtype(tokenizer.vocab_size)
    index_path = out / SHARD_INDEX
    index = {
        "format": SHARD_FORMAT,
        "version": SHARD_VERSION,
        "dtype": np.dtype(dtype).name,
        "vocab_size": tokenizer.vocab_size,
        "bos_id": tokenizer.get_bos_token_id() if bos else None,
        "tokenizer_sha256": tokenizer_sha256,
        "shards": [],
        "documents_done": 0,
        "tokens_done": 0,
        "complete": False,
    }
    if index_path.exists():
        try:
            old = json.loads(index_path.read_text())
        except json.JSONDecodeError as e:
            raise FormatError(f"not valid JSON ({e.msg})", path=index_path, line=e.lineno) from None
        if old.get("format") != SHARD_FORMAT or old.get("version") != SHARD_VERSION:
            raise FormatError("not a tokenforge shard index (or an unknown version)", path=index_path)
        for k in ("dtype", "vocab_size", "bos_id", "tokenizer_sha256"):
            if old.get(k) != index[k]:
                raise TokenforgeError(
                    f"{index_path} was written with a different {k} ({old.get(k)!r} vs {index[k]!r}); "
                    "use another --output_dir or delete it to start over"
                )
        index = old
        if index.get("complete"):
            return index
    skip = index["documents_done"]
    bos_id = index["bos_id"]
    pending: list[np.ndarray] = []
    pending_tokens = 0
    pending_docs = 0

    def flush():
        nonlocal pending, pending_tokens, pending_docs
        if not pending_docs:
            return
        name = f"shard_{len(index['shards']):05d}.npy"
        arr = np.concatenate(pending).astype(dtype, copy=False)
        with atomic_open(out / name, "wb") as f:
            np.save(f, arr)
        index["shards"].append({"file": name, "tokens": int(arr.size), "documents": pending_docs, "first_document": index["documents_done"]})
        index["documents_done"] += pending_docs
        index["tokens_done"] += int(arr.size)
        atomic_write(index_path, json.dumps(index, indent=1) + "\n")
        pending, pending_tokens, pending_docs = [], 0, 0

    def encode(batch: list[str]):
        nonlocal pending_tokens, pending_docs
        flat, offsets = tokenizer.encode_batch_flat(batch, num_threads)
        offsets = offsets.astype(np.int64)
        lens = np.diff(offsets) + (1 if bos_id is not None else 0)
        if bos_id is not None:
            starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
            merged = np.empty(int(lens.sum()), dtype=np.uint32)
            mask = np.ones(merged.size, dtype=bool)
            mask[starts] = False
            merged[starts] = bos_id
            merged[mask] = flat
        else:
            merged = flat
        # cut into shards at document boundaries
        ends = np.cumsum(lens)
        start_doc, start_tok = 0, 0
        for d in range(len(batch)):
            if pending_tokens + (int(ends[d]) - start_tok) >= shard_tokens:
                pending.append(merged[start_tok : int(ends[d])])
                pending_tokens += int(ends[d]) - start_tok
                pending_docs += d + 1 - start_doc
                flush()
                start_doc, start_tok = d + 1, int(ends[d])
        if start_tok < merged.size or start_doc < len(batch):
            pending.append(merged[start_tok:])
            pending_tokens += merged.size - start_tok
            pending_docs += len(batch) - start_doc

    batch: list[str] = []
    seen = 0
    with progress_bar(total=None, desc="pretokenizing", unit="B", enabled=progress) as bar:
        for doc in documents:
            seen += 1
            if seen <= skip:
                continue
            batch.append(doc)
            if len(batch) >= batch_docs:
                encode(batch)
                bar.update(sum(len(t) for t in batch))
                batch = []
        if batch:
            encode(batch)
            bar.update(sum(len(t) for t in batch))
        flush()
    index["complete"] = True
    atomic_write(index_path, json.dumps(index, indent=1) + "\n")
    return index


def cmd_pretokenize(args) -> int:
    tok, sha = _load_tokenizer(args.tokenizer)
    t0 = time.perf_counter()
    index = pretokenize(
        tok,
        _corpus(args.input, args.text_field),
        args.output_dir,
        tokenizer_sha256=sha,
        shard_tokens=args.shard_tokens,
        batch_docs=args.batch_docs,
        num_threads=args.num_threads,
        bos=not args.no_bos,
        progress=not args.quiet,
    )
    dt = time.perf_counter() - t0
    print(
        f"{index['tokens_done']:,} tokens from {index['documents_done']:,} documents in "
        f"{len(index['shards'])} shards ({index['dtype']}) in {args.output_dir} ({dt:.1f} s)"
    )
    return 0


# ---------------------------------------------------------------------------
# wiring
# ---------------------------------------------------------------------------
def add_parser(subparsers) -> None:
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


def _run(build, func, argv, prog: str) -> int:
    from .main import ArgumentParser, exit_codes_epilog, run_command  # both option spellings, one error handler

    p = ArgumentParser(prog=prog, epilog=exit_codes_epilog())
    build(p)
    args = p.parse_args(argv)
    return run_command(func, args, prog)


def main_train(argv=None) -> int:
    return _run(_train_args, cmd_train, argv, "lz78_tok_train.py")


def main_setup(argv=None) -> int:
    return _run(_setup_args, cmd_setup, argv, "lz78_setup_tokenizer.py")


def main_pretokenize(argv=None) -> int:
    return _run(_pretokenize_args, cmd_pretokenize, argv, "lz78_pretokenize.py")
