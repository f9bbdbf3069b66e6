"""GPT-family patterns on the fast path: encoding MB/s by how the pattern is spelled.

Usage::

    python bench/patterns.py                 # 5 MB of bench/data/corpus/heldout.txt, 3 rounds
    python bench/patterns.py --mb 2 --rounds 5

Rows, single thread, the same documents (``split_docs`` pieces of about 4 KB),
ids checked identical to tiktoken's before timing:

cl100k name         tokenforge, cl100k ranks, pattern ``"cl100k"`` (our spelling)
cl100k pat_str      tokenforge, cl100k ranks, tiktoken's own ``pat_str`` (recognised: same scanner)
cl100k regex        tokenforge, cl100k ranks, ``(?:pat_str)``: an equivalent spelling the core does
                    not recognise, so it runs on fancy-regex (what any pattern got before)
cl100k tiktoken     ``tiktoken.Encoding.encode_ordinary_batch(num_threads=1)``
o200k ...           the same with the o200k ranks and tiktoken's o200k ``pat_str``
other: NAME         patterns outside the GPT family (``OTHER_PATTERNS``: whitespace, word and
                    punctuation, single digits, a lookahead, camel case), on the general regex
                    path, with the cl100k ranks, against tiktoken with the same ``pat_str``
                    (issue 14: any other pattern is never slower than tiktoken's with it)

Rank files: the ones ``bpe-openai``'s wheel ships (``bpe_openai/data/*.tiktoken.gz``;
a dev dependency), found without importing it. All rows are timed round after
round in one process (``common.interleaved``) and the best round is kept; the
load average is printed with the table, since the host is shared.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import importlib.util
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import format_table, interleaved, load_text, split_docs, text_mb  # noqa: E402


def ranks(name: str) -> dict[bytes, int]:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bpe-openai is not installed (pip install bpe-openai): it ships the rank files")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    out = {}
    for line in gzip.decompress(path.read_bytes()).splitlines():
        if line:
            tok, rank = line.split()
            out[base64.b64decode(tok)] = int(rank)
    return out


def pat_strs() -> dict[str, str]:
    """tiktoken's pat_str per encoding, without loading its rank files."""
    from tiktoken_ext import openai_public

    saved = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return {n: openai_public.ENCODING_CONSTRUCTORS[n]()["pat_str"] for n in ("cl100k_base", "o200k_base")}
    finally:
        openai_public.load_tiktoken_bpe = saved


#: patterns no scanner recognises, each covering every character (tiktoken drops the
#: text between matches; tokenforge keeps it as a piece, so only covering patterns
#: can give the same ids)
OTHER_PATTERNS = {
    "whitespace": r"\S+|\s+",
    "words": r"\w+|[^\w\s]+|\s+",
    "digits": r" ?\p{L}+| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "lookahead": r"[^\s]+(?=\s|$)|\S+|\s+",
    "camel": r" ?[A-Z]?[a-z]+| ?[A-Z]+(?![a-z])| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import tiktoken

    from tokenforge import BPETokenizer

    docs = split_docs(load_text("heldout", mb=args.mb))
    mb = sum(text_mb(d) for d in docs)
    pats = pat_strs()
    runs = {}
    for enc_name, short in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
        r = ranks(enc_name)
        pat = pats[enc_name]
        tt = tiktoken.Encoding(enc_name, pat_str=pat, mergeable_ranks=r, special_tokens={})
        want = tt.encode_ordinary_batch(docs, num_threads=1)
        toks = {
            f"{short} name": BPETokenizer.from_tiktoken(r, pattern=short),
            f"{short} pat_str": BPETokenizer.from_tiktoken(r, pattern=pat),
            f"{short} regex": BPETokenizer.from_tiktoken(r, pattern=f"(?:{pat})"),
        }
        for label, tok in toks.items():
            if tok.encode_batch(docs, num_threads=1) != want:
                sys.exit(f"{label}: ids differ from tiktoken's")
            runs[label] = lambda tok=tok: tok.encode_batch(docs, num_threads=1)
        runs[f"{short} tiktoken"] = lambda tt=tt: tt.encode_ordinary_batch(docs, num_threads=1)
    r = ranks("cl100k_base")
    for name, pat in OTHER_PATTERNS.items():
        tt = tiktoken.Encoding(f"other-{name}", pat_str=pat, mergeable_ranks=r, special_tokens={})
        tok = BPETokenizer.from_tiktoken(r, pattern=pat)
        if tok.encode_batch(docs, num_threads=1) != tt.encode_ordinary_batch(docs, num_threads=1):
            sys.exit(f"other: {name}: ids differ from tiktoken's")
        runs[f"other: {name}"] = lambda tok=tok: tok.encode_batch(docs, num_threads=1)
        runs[f"other: {name} tiktoken"] = lambda tt=tt: tt.encode_ordinary_batch(docs, num_threads=1)
    state: dict = {}
    for _ in range(args.rounds):
        best = interleaved(state, runs)
    rows = []
    for label in runs:
        family = label.removesuffix(" tiktoken") if label.startswith("other:") else label.split()[0]
        base = best[f"best_{family} tiktoken"]
        t = best[f"best_{label}"]
        rows.append([label, f"{mb / t:.1f}", f"{base / t:.2f}x"])
    print(f"{mb:.2f} MB of heldout.txt in {len(docs)} documents, single thread, best of {args.rounds} rounds")
    print(format_table(["row", "MB/s", "vs tiktoken"], rows, right=[False, True, True]))
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
