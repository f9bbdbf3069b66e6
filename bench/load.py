"""Load time: tokenforge's three readers against tiktoken and HF tokenizers, same files.

For cl100k_base and o200k_base (the rank files ship in the ``bpe-openai``
wheel: ``pip install bpe-openai``; gunzipped to a temporary directory, no
download), this writes our tokenforge-bpe JSON (``save``) and an HF
``tokenizer.json`` (``save_hf``) of the same vocabulary, then times in one
process, in interleaved rounds (every loader once per round, best round
kept, as ``bench/common.py``'s ``interleaved`` does):

* ``tf .tiktoken``: ``BPETokenizer.from_tiktoken(path, pattern=pat_str)``
* ``tf json``:      ``tokenforge.load(path)``
* ``tf hf``:        ``BPETokenizer.from_hf(path)``
* ``tiktoken``:     what ``tiktoken.get_encoding`` does, from the same file
  (``load_tiktoken_bpe`` + ``tiktoken.Encoding(...)``; the encoding's
  constructor in ``tiktoken_ext.openai_public`` is called with its file
  reader pointed at the local file, so the pattern and specials are its own)
* ``hf tokenizers``: ``tokenizers.Tokenizer.from_file`` of our tokenizer.json

and prints seconds and the ratio to tiktoken (and, for the HF file, to HF
tokenizers). Each tokenforge load is checked once to encode a sample as
tiktoken does. Target (issue 14, item 5): every tokenforge load <= 0.3 s.

Usage: ``python bench/load.py [--rounds 7] [--only cl100k_base]``.

Not handled: cold page cache (files are read once before timing), loading
over a network.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ENCODINGS = ("cl100k_base", "o200k_base")
TARGET = 0.3
SAMPLE = (
    "The quick brown fox jumps over the lazy dog. It's 2026; naïve café, Straße, "
    "Привет мир, 你好世界, def f(x):\n    return x ** 2  # 😀\n\n\n   spaces   and\ttabs 12345678"
)


def rank_file(name: str, out: Path) -> Path:
    """The gunzipped rank file from the bpe-openai wheel."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bpe-openai is not installed (pip install bpe-openai): it ships the rank files")
    src = Path(list(spec.submodule_search_locations)[0]) / "data" / f"{name}.tiktoken.gz"
    dst = out / f"{name}.tiktoken"
    dst.write_bytes(gzip.decompress(src.read_bytes()))
    return dst


def tiktoken_spec(name: str, path: Path) -> dict:
    """tiktoken's own constructor arguments for ``name``, its ranks read from ``path``."""
    import tiktoken_ext.openai_public as public
    from tiktoken.load import load_tiktoken_bpe

    saved = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(str(path))
    try:
        return getattr(public, name)()
    finally:
        public.load_tiktoken_bpe = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", choices=ENCODINGS)
    args = ap.parse_args()

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer as HFTokenizer

    import tokenforge
    from tokenforge import BPETokenizer

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; best of {args.rounds} interleaved rounds")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in [args.only] if args.only else ENCODINGS:
            tt_path = rank_file(name, tmp)
            spec = tiktoken_spec(name, tt_path)
            pat, specials = spec["pat_str"], spec["special_tokens"]
            tok = BPETokenizer.from_tiktoken(tt_path, pattern=pat, special_tokens=specials)
            json_path, hf_path = tmp / f"{name}.json", tmp / f"{name}.hf.json"
            tok.save(json_path)
            tok.save_hf(hf_path)
            enc = tiktoken.Encoding(**spec)
            want = enc.encode(SAMPLE, allowed_special="all")

            def tt_load(tt_path=tt_path, spec=spec):
                ranks = load_tiktoken_bpe(str(tt_path))
                return tiktoken.Encoding(**{**spec, "mergeable_ranks": ranks})

            runs = {
                "tf .tiktoken": lambda: BPETokenizer.from_tiktoken(tt_path, pattern=pat, special_tokens=specials),
                "tf json": lambda: tokenforge.load(json_path),
                "tf hf": lambda: BPETokenizer.from_hf(hf_path),
                "tiktoken": tt_load,
                "hf tokenizers": lambda: HFTokenizer.from_file(str(hf_path)),
            }
            for what in ("tf .tiktoken", "tf json", "tf hf"):
                got = runs[what]().encode(SAMPLE, allowed_special="all")
                if got != want:
                    sys.exit(f"{name}: {what} encodes the sample differently from tiktoken")
            best: dict[str, float] = {}
            for _ in range(args.rounds):
                for what, run in runs.items():
                    gc.collect()
                    t = time.perf_counter()
                    obj = run()
                    dt = time.perf_counter() - t
                    del obj
                    best[what] = min(best.get(what, dt), dt)
            sizes = {
                "tf .tiktoken": tt_path,
                "tf json": json_path,
                "tf hf": hf_path,
                "tiktoken": tt_path,
                "hf tokenizers": hf_path,
            }
            for what, t in best.items():
                ratio = t / best["tiktoken"]
                vs_hf = f"{t / best['hf tokenizers']:.2f}x" if what in ("tf hf", "hf tokenizers") else ""
                ok = ("ok" if t <= TARGET else "MISSED") if what.startswith("tf") else ""
                mb = sizes[what].stat().st_size / 1e6
                rows.append((name, what, f"{mb:.1f}", f"{t:.3f}", f"{ratio:.2f}x", vs_hf, ok))
    headers = ("encoding", "loader", "file MB", "best s", "vs tiktoken", "vs HF", f"<= {TARGET} s")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
