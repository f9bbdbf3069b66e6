#!/usr/bin/env python3
"""Where parity training's global loss goes: each language's held-out tokens against plain BPE's.

Trains plain BPE and the given parity settings on the near-parallel Debian set
(``python bench/build_corpus.py --multilingual DIR``; the dev text as in
bench/parity_frontier.py: ``tokenforge compare``'s ``bpe:parity`` inputs, English
the reference), encodes the held-out pages, and prints per language: its share
of the held-out bytes, its held-out tokens' change against plain BPE, its share
of all the extra tokens (the global bytes/token loss), and the merges the
parity phase picked for it.

Usage::

    python bench/parity_loss_split.py --vocab 32768 --settings shared=1.45,global=0.15

Not handled: the exactly parallel set (its dev text is a separate file); any
settings but ``parity_shared``, ``parity_global_merges``, ``parity_rule``,
``parity_gain`` and ``parity_tolerance`` (short names ``shared``, ``global``,
``rule``, ``gain``, ``tolerance``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

KNOBS = {
    "shared": ("parity_shared", float),
    "global": ("parity_global_merges", float),
    "rule": ("parity_rule", str),
    "gain": ("parity_gain", float),
    "tolerance": ("parity_tolerance", float),
}


def _settings(text: str) -> dict:
    out: dict = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in KNOBS:
            raise SystemExit(f"unknown setting {name!r}; expected one of {', '.join(KNOBS)}")
        key, kind = KNOBS[name]
        out[key] = kind(value)
    if out.get("parity_rule", "foroutan2025") != "foroutan2025":
        out.setdefault("parity_reference", "en")
    return out


def main() -> None:
    from tokenforge import BPETokenizer
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import TrainLanguages, read_language_documents

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="bench/data/multilingual", help="the --multilingual directory")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--settings", default="shared=1.45,global=0.15", help="comma-separated name=value")
    args = ap.parse_args()
    data = Path(args.data)
    train_docs = tuple(read_language_documents(data / "train.jsonl"))
    held = list(read_language_documents(data / "heldout.jsonl"))
    corpus, dev, norms = compare_parity_inputs(TrainLanguages(train_docs, "en", ()), "parallel")
    dev = {k: list(v.texts) for k, v in dev.items()}

    def tokens(tok) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in held:
            out[d.lang] = out.get(d.lang, 0) + len(tok.encode(d.text))
        return out

    plain = tokens(BPETokenizer.train_from_iterator([d.text for d in train_docs], args.vocab, progress=False))
    kw = _settings(args.settings)
    tok = BPETokenizer.train_from_iterator(corpus, args.vocab, parity=dev, parity_measure=norms, progress=False, **kw)
    mine = tokens(tok)
    nbytes: dict[str, int] = {}
    for d in held:
        nbytes[d.lang] = nbytes.get(d.lang, 0) + len(d.text.encode("utf-8"))
    extra = sum(mine.values()) - sum(plain.values())
    merges = {k: v["merges"] for k, v in tok.data.training["parity"]["per_language"].items()}
    print(f"{args.vocab} ids, {kw}: held-out tokens {extra:+d} ({extra / sum(plain.values()):+.2%}) against plain BPE")
    print("| language | bytes share | tokens vs plain | share of the extra tokens | parity merges |")
    print("|---|---|---|---|---|")
    for lang in sorted(plain, key=lambda x: -(mine[x] - plain[x])):
        print(
            f"| {lang} | {nbytes[lang] / sum(nbytes.values()):.1%} | {mine[lang] / plain[lang] - 1:+.1%} "
            f"| {(mine[lang] - plain[lang]) / extra:+.1%} | {merges.get(lang, 0)} |"
        )


if __name__ == "__main__":
    main()
