#!/usr/bin/env python3
"""The fairness frontier of parity-aware BPE: how much of the inequality between
languages each rule and knob removes (the Gini of the per-language premiums, cut
against plain BPE's) for how much global compression it gives up (held-out
bytes/token, lost against plain BPE's), at each vocabulary size.

Two sets, both from ``python bench/build_corpus.py --multilingual DIR``:

- near-parallel (Debian's man pages): training text ``train.jsonl``; the parity
  dev text is each language's training pages parallel to English within the
  length band (``tokenforge compare``'s ``bpe:parity``:
  :func:`tokenforge.bpe_parity.compare_parity_inputs`); reported on the held-out
  pages ``heldout.jsonl``;
- exactly parallel (gettext catalogs): the same training text; dev text
  ``parallel-dev.jsonl``; reported on ``parallel-test.jsonl`` (left out when
  the files are absent).

Every tokenizer is measured twice: on the dev text (premium: dev tokens per unit
of dev text against the reference's, the unit the trainer compares; bytes/token
over the dev text) -- the figures a user can choose a knob by -- and on the
held-out text (:func:`tokenforge.eval.languages.per_language_metrics`; global
bytes/token = all held-out bytes over all tokens) -- the figures reported. For
each rule the "dev pick" is its knob with the largest dev Gini cut within the
loss budget on dev (``--budget``, per set), reported on held-out text.

Writes ``frontier.json`` (every figure), ``frontier.md`` (the tables) and
``frontier.png`` (Gini cut against bytes/token loss, one panel per set and
size, one line per rule through its knobs) into ``-o``.

Usage::

    python bench/parity_frontier.py --data bench/data/multilingual --vocab 8192 32768 \\
        -o docs/results/parity-frontier
    # rows for new knobs only, added to the file (the plain rows must agree)
    python bench/parity_frontier.py --vocab 8192 32768 --only "foroutan2025 shared 1.4 global 0.1" \\
        --add -o docs/results/parity-frontier

Not handled: repeated timings (train seconds are one run each, on a shared
machine; bench/parity.py times the rules against plain training properly);
other reference languages than ``--reference``; Dask.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _discount(gain: float, shared: float, share: float) -> tuple[str, str, dict]:
    """The discount rule (issue 36, session 19): the shared-pair band, each pair's global
    count less ``gain`` times English's, after a global phase of ``share`` of the merges."""
    label = f"discount {gain:g} shared {shared:g} global {share:g}"
    kw = {"parity_rule": "discount", "parity_gain": gain, "parity_shared": shared, "parity_global_merges": share}
    return (label, "discount shared + global", kw)


def _lift(rule: str, gain: float, shared: float, share: float) -> tuple[str, str, dict]:
    """The lift rules (issue 36, session 20): the shared-pair band, each pair's global count
    ("lift": over the training text, "devlift": over the dev text) plus ``gain`` times its count
    in the language served, after a global phase of ``share`` of the merges."""
    label = f"{rule} {gain:g} shared {shared:g} global {share:g}"
    kw = {"parity_rule": rule, "parity_gain": gain, "parity_shared": shared, "parity_global_merges": share}
    return (label, f"{rule} shared + global", kw)


def _shared_global(shared: float, share: float) -> tuple[str, str, dict]:
    """The shared-pair variant after a global phase of ``share`` of the merges."""
    label = f"foroutan2025 shared {shared:g} global {share:g}"
    return (label, "foroutan2025 shared + global", {"parity_shared": shared, "parity_global_merges": share})


#: the lift rules' points on the frontier: rule -> (gain, shared, global share) each
LIFT_POINTS = {
    "lift": [(1.0, 1.45, 0.15), (1.0, 1.4, 0.1), (1.0, 1.6, 0.1), (4.0, 2.0, 0.15), (4.0, 4.0, 0.15), (16.0, 3.0, 0.1)],
    "devlift": [
        (0.0, 1.45, 0.15),
        (0.0, 1.6, 0.1),
        (1.0, 1.45, 0.15),
        (1.0, 1.6, 0.1),
        (1.0, 2.0, 0.1),
        (4.0, 2.0, 0.15),
    ],
}

#: (label, rule family, BPETokenizer.train parity keyword arguments)
CONFIGS: list[tuple[str, str, dict]] = [
    ("foroutan2025", "foroutan2025", {}),
    ("foroutan2025 global 0.25", "foroutan2025 global", {"parity_global_merges": 0.25}),
    ("foroutan2025 global 0.5", "foroutan2025 global", {"parity_global_merges": 0.5}),
    ("foroutan2025 global 0.75", "foroutan2025 global", {"parity_global_merges": 0.75}),
    ("foroutan2025 tolerance 0.05", "foroutan2025 tolerance", {"parity_tolerance": 0.05}),
    ("foroutan2025 tolerance 0.15", "foroutan2025 tolerance", {"parity_tolerance": 0.15}),
    ("foroutan2025 tolerance 0.3", "foroutan2025 tolerance", {"parity_tolerance": 0.3}),
    ("foroutan2025 shared 1.5", "foroutan2025 shared", {"parity_shared": 1.5}),
    ("foroutan2025 shared 2", "foroutan2025 shared", {"parity_shared": 2.0}),
    ("foroutan2025 shared 3", "foroutan2025 shared", {"parity_shared": 3.0}),
    ("foroutan2025 shared 4", "foroutan2025 shared", {"parity_shared": 4.0}),
    _shared_global(2.0, 0.25),
    _shared_global(2.0, 0.5),
    _shared_global(1.5, 0.25),
    _shared_global(1.5, 0.1),
    _shared_global(1.5, 0.05),
    _shared_global(1.25, 0.1),
    _shared_global(1.4, 0.1),
    _shared_global(1.4, 0.15),
    _shared_global(1.5, 0.15),
    _shared_global(1.35, 0.15),
    _shared_global(1.45, 0.1),
    _shared_global(1.45, 0.05),
    _shared_global(1.4, 0.05),
    _shared_global(1.4, 0.2),
    _shared_global(1.45, 0.15),
    ("foroutan2025 shared 1.25", "foroutan2025 shared", {"parity_shared": 1.25}),
    ("levelup 0", "levelup", {"parity_rule": "levelup", "parity_tolerance": 0.0}),
    ("levelup 0.1", "levelup", {"parity_rule": "levelup", "parity_tolerance": 0.1}),
    ("levelup 0.15", "levelup", {"parity_rule": "levelup", "parity_tolerance": 0.15}),
    ("levelup 0.2", "levelup", {"parity_rule": "levelup", "parity_tolerance": 0.2}),
    *[
        (
            f"levelup {tol:g} shared 1.4 global 0.1",
            "levelup shared + global",
            {"parity_rule": "levelup", "parity_tolerance": tol, "parity_shared": 1.4, "parity_global_merges": 0.1},
        )
        for tol in (0.105, 0.11, 0.12)
    ],
    (
        "levelup median 0",
        "levelup median",
        {"parity_rule": "levelup", "parity_reference": "median", "parity_tolerance": 0.0},
    ),
    (
        "levelup median 0.02",
        "levelup median",
        {"parity_rule": "levelup", "parity_reference": "median", "parity_tolerance": 0.02},
    ),
    (
        "levelup median 0.05",
        "levelup median",
        {"parity_rule": "levelup", "parity_reference": "median", "parity_tolerance": 0.05},
    ),
    ("levelup 0 global 0.1", "levelup", {"parity_rule": "levelup", "parity_global_merges": 0.1}),
    ("keep 0 global 0.1", "keep", {"parity_rule": "keep", "parity_global_merges": 0.1}),
    ("keep 0.1 global 0.1", "keep", {"parity_rule": "keep", "parity_tolerance": 0.1, "parity_global_merges": 0.1}),
    ("keep 0 global 0.25", "keep", {"parity_rule": "keep", "parity_global_merges": 0.25}),
    (
        "keep 0 shared 2 global 0.1",
        "keep",
        {"parity_rule": "keep", "parity_shared": 2.0, "parity_global_merges": 0.1},
    ),
    ("group F2 gain 0", "group F2", {"parity_rule": "group", "parity_shared": 2.0, "parity_gain": 0.0}),
    ("group F2 gain 1", "group F2", {"parity_rule": "group", "parity_shared": 2.0, "parity_gain": 1.0}),
    ("group F2 gain 4", "group F2", {"parity_rule": "group", "parity_shared": 2.0, "parity_gain": 4.0}),
    ("group F1.5 gain 1", "group gain 1", {"parity_rule": "group", "parity_shared": 1.5, "parity_gain": 1.0}),
    ("group F3 gain 1", "group gain 1", {"parity_rule": "group", "parity_shared": 3.0, "parity_gain": 1.0}),
    ("group F4 gain 1", "group gain 1", {"parity_rule": "group", "parity_shared": 4.0, "parity_gain": 1.0}),
    (
        "group F2 gain 1 tolerance 0.1",
        "group tolerance",
        {"parity_rule": "group", "parity_shared": 2.0, "parity_gain": 1.0, "parity_tolerance": 0.1},
    ),
    ("excess 4", "excess", {"parity_rule": "excess", "parity_gain": 4.0}),
    ("excess 16", "excess", {"parity_rule": "excess", "parity_gain": 16.0}),
    ("excess 64", "excess", {"parity_rule": "excess", "parity_gain": 64.0}),
    ("excess 256", "excess", {"parity_rule": "excess", "parity_gain": 256.0}),
    *[_discount(g, f, sh) for g in (0.25, 0.5, 1.0) for f, sh in ((1.45, 0.15), (1.4, 0.1), (2.0, 0.1))],
    # session 20: the lift rule, a linear trade between the global count and the served language's
    *[_lift(rule, g, f, sh) for rule, points in LIFT_POINTS.items() for g, f, sh in points],
    # Japanese as the reference (session 19): it and English, the two cheapest under plain BPE,
    # are not levelled down (keep: each keeps its premium against Japanese)
    *[
        (
            f"{rule} ja {tol:g} shared {f:g} global {sh:g}",
            f"{rule} ja shared + global",
            {
                "parity_rule": rule,
                "parity_reference": "ja",
                "parity_tolerance": tol,
                "parity_shared": f,
                "parity_global_merges": sh,
            },
        )
        for rule, tol, f, sh in (
            ("levelup", 0.0, 1.45, 0.15),
            ("levelup", 0.0, 1.25, 0.1),
            ("levelup", 0.05, 1.45, 0.15),
            ("keep", 0.0, 1.45, 0.15),
        )
    ],
]

#: per set: (the held-out file, the dev file or None for the training pages, loss budget, Gini-cut target)
SETS = {
    "near-parallel": ("heldout.jsonl", None, 0.03, 0.45),
    "exactly-parallel": ("parallel-test.jsonl", "parallel-dev.jsonl", 0.02, 0.50),
}


def _dev_figures(tok, dev: dict, norms, reference: str) -> dict:
    """Premiums, Gini and bytes/token of ``tok`` on the dev texts, measured as the trainer measures them."""
    from tokenforge.eval.languages import gini

    cost, nbytes, ntokens = {}, 0, 0
    for lang, texts in sorted(dev.items()):
        texts = list(texts)
        ids, _ = tok.encode_batch_flat(texts)
        n = len(ids)
        nbytes += sum(len(t.encode("utf-8")) for t in texts)
        ntokens += n
        cost[lang] = n / (norms[lang] if isinstance(norms, dict) else 1)
    prem = {lang: c / cost[reference] for lang, c in cost.items()}
    return {"premiums": prem, "gini": gini(prem.values()), "bytes_per_token": nbytes / ntokens}


def _dev_figures_recorded(tok, norms, reference: str) -> dict:
    """:func:`_dev_figures` of a parity-trained tokenizer from its own record: the trainer
    counts each language's dev tokens under its merges exactly (the same figures as
    encoding the dev text again, which costs more than the training on these sets)."""
    from tokenforge.eval.languages import gini

    rec = tok.data.training["parity"]["per_language"]
    cost = {lang: v["dev_tokens_after"] / (norms[lang] if isinstance(norms, dict) else 1) for lang, v in rec.items()}
    prem = {lang: c / cost[reference] for lang, c in sorted(cost.items())}
    nbytes = sum(v["dev_bytes"] for v in rec.values())
    ntokens = sum(v["dev_tokens_after"] for v in rec.values())
    return {"premiums": prem, "gini": gini(prem.values()), "bytes_per_token": nbytes / ntokens}


def _heldout_figures(tok, docs, reference: str) -> dict:
    from tokenforge.eval.languages import per_language_metrics

    m = per_language_metrics(tok, docs, reference=reference)
    langs = m["languages"]
    nbytes = sum(v["bytes"] for v in langs.values())
    ntokens = sum(v["tokens"] for v in langs.values())
    return {
        "premiums": {k: v["premium"] for k, v in langs.items()},
        "gini": m["gini"],
        "bytes_per_token": nbytes / ntokens,
    }


def _cut(row: dict, base: dict) -> None:
    """Add the Gini cut and the bytes/token loss against plain BPE (``base``) to each measurement of ``row``."""
    for where in ("dev", "heldout"):
        r, b = row[where], base[where]
        r["gini_cut"] = 1 - r["gini"] / b["gini"] if b["gini"] else 0.0
        r["loss"] = 1 - r["bytes_per_token"] / b["bytes_per_token"]


def run(args) -> dict:
    from tokenforge import BPETokenizer
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import TrainLanguages, read_language_documents

    data = Path(args.data)
    train_docs = tuple(read_language_documents(Path(args.train) if args.train else data / "train.jsonl"))
    only = set(args.only.split(",")) if args.only else None
    configs = [c for c in CONFIGS if only is None or c[0] in only]
    sets = {}
    for name, (held, devf, budget, target) in SETS.items():
        held_path = data / held
        if args.heldout and name == "near-parallel":
            held_path = Path(args.heldout)
        if not held_path.is_file() or (devf and not (data / devf).is_file()):
            print(f"[frontier] {name}: {held_path} or its dev file is missing; left out", file=sys.stderr)
            continue
        dev_docs = tuple(read_language_documents(data / devf)) if devf else ()
        corpus, dev, norms = compare_parity_inputs(TrainLanguages(train_docs, args.reference, dev_docs), "parallel")
        dev = {k: list(v.texts) for k, v in dev.items()}
        sets[name] = {
            "heldout": list(read_language_documents(held_path)),
            "corpus": corpus,
            "dev": dev,
            "norms": norms,
            "budget": budget,
            "target": target,
        }
    texts = [d.text for d in train_docs]
    out: dict = {"reference": args.reference, "sizes": {}}
    for vocab in args.vocab:
        t0 = time.perf_counter()
        plain = BPETokenizer.train_from_iterator(texts, vocab, num_threads=args.threads, progress=False)
        plain_s = time.perf_counter() - t0
        per_set = {}
        for name, s in sets.items():
            base = {
                "dev": _dev_figures(plain, s["dev"], s["norms"], args.reference),
                "heldout": _heldout_figures(plain, s["heldout"], args.reference),
                "train_s": plain_s,
            }
            rows = []
            for label, family, kw in configs:
                t0 = time.perf_counter()
                tok = BPETokenizer.train_from_iterator(
                    s["corpus"],
                    vocab,
                    parity=s["dev"],
                    parity_measure=s["norms"],
                    num_threads=args.threads,
                    progress=False,
                    **{"parity_reference": args.reference, **kw},
                )
                row = {
                    "label": label,
                    "family": family,
                    "options": kw,
                    "train_s": time.perf_counter() - t0,
                    "dev": _dev_figures_recorded(tok, s["norms"], args.reference),
                    "heldout": _heldout_figures(tok, s["heldout"], args.reference),
                }
                _cut(row, base)
                rows.append(row)
                h = row["heldout"]
                print(
                    f"[frontier] {vocab} {name} {label}: Gini {h['gini']:.4f} ({-h['gini_cut']:+.0%}), "
                    f"bytes/token {h['bytes_per_token']:.3f} ({-h['loss']:+.1%}), {row['train_s']:.1f} s",
                    file=sys.stderr,
                )
            per_set[name] = {"plain": base, "rows": rows, "dev_picks": _dev_picks(rows, s["budget"])}
            per_set[name].update(budget=s["budget"], target=s["target"])
        out["sizes"][str(vocab)] = per_set
    return out


def add_rows(old: dict, new: dict) -> dict:
    """``--add``: ``new``'s rows into ``old`` (a row of the same label replaced), every set's
    rows in :data:`CONFIGS` order and its dev picks chosen again. The plain baseline of a set
    in both must be the same figures (the same data and trainer), else SystemExit."""
    if old["reference"] != new["reference"]:
        raise SystemExit(f"--add: the reference {new['reference']!r} is not the file's {old['reference']!r}")
    order = {c[0]: i for i, c in enumerate(CONFIGS)}
    for size, sets in new["sizes"].items():
        for name, got in sets.items():
            have = old["sizes"].setdefault(size, {}).get(name)
            if have is None:
                old["sizes"][size][name] = got
                continue
            if have["plain"]["heldout"] != got["plain"]["heldout"] or have["plain"]["dev"] != got["plain"]["dev"]:
                raise SystemExit(f"--add: plain BPE's figures at {size} ids on {name} differ from the file's; run all")
            labels = {r["label"] for r in got["rows"]}
            rows = [r for r in have["rows"] if r["label"] not in labels] + got["rows"]
            rows.sort(key=lambda r: order.get(r["label"], len(order)))
            have.update(rows=rows, dev_picks=_dev_picks(rows, have["budget"]))
    return old


def _dev_picks(rows: list[dict], budget: float) -> dict[str, str]:
    """Per rule family: the knob with the largest dev Gini cut whose dev loss is within ``budget``."""
    picks: dict[str, str] = {}
    best: dict[str, float] = {}
    for r in rows:
        fam = r["family"].split(" ")[0]
        if r["dev"]["loss"] <= budget and r["dev"]["gini_cut"] > best.get(fam, -1e9):
            best[fam] = r["dev"]["gini_cut"]
            picks[fam] = r["label"]
    return picks


def _levels(s: dict, reference: str) -> str:
    """What the held-out Gini would be if every language's dev premium were ``x``:
    each language's held-out premium over its dev premium under the paper's rule
    (which brings every dev premium to one level) is a property of the sample
    (how much longer its held-out translations are than its dev ones), so the
    held-out premium is about ``x`` times that factor. Empty without that row."""
    from tokenforge.eval.languages import gini

    row = next((r for r in s["rows"] if r["label"] == "foroutan2025"), None)
    if row is None:
        return ""
    f = {k: row["heldout"]["premiums"][k] / v for k, v in row["dev"]["premiums"].items() if k != reference}
    want = s["plain"]["heldout"]["gini"] * (1 - s["target"])
    cells = ", ".join(
        f"{x:.2f} → {gini([1.0, *(x * v for v in f.values())]):.4f}" for x in (1.0, 1.04, 1.08, 1.12, 1.16, 1.2)
    )
    spread = ", ".join(f"{k} {v:.3f}" for k, v in sorted(f.items()))
    return (
        f"Held-out premium over dev premium under the paper's rule (a property of the sample): {spread}. Held-out "
        f"Gini if every dev premium were x: {cells}; the target is {want:.4f}."
    )


def render_markdown(res: dict) -> str:
    lines = [
        "Gini cut and bytes/token loss: against plain BPE at the same size (positive = better fairness / worse "
        "compression). Dev: on the parity dev text, as the trainer measures it; held out: on the held-out "
        "set. **Bold**: the rule's dev pick (its largest dev Gini cut within the set's loss budget on dev); "
        "✓: the held-out figures meet the set's target.",
        "",
    ]
    for vocab, per_set in res["sizes"].items():
        for name, s in per_set.items():
            p = s["plain"]
            lines += [
                f"### {name}, {int(vocab):,} ids (target: Gini cut ≥ {s['target']:.0%} at loss ≤ {s['budget']:.0%})",
                "",
                f"Plain BPE: held-out Gini {p['heldout']['gini']:.4f}, bytes/token {p['heldout']['bytes_per_token']:.3f}; "
                f"dev Gini {p['dev']['gini']:.4f}; trained in {p['train_s']:.1f} s.",
                "",
            ]
            levels = _levels(s, res["reference"])
            lines += [levels, ""] if levels else []
            lines += [
                "| rule | dev Gini cut | dev loss | held-out Gini | Gini cut | bytes/token | loss | target | train s |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            picks = set(s["dev_picks"].values())
            for r in s["rows"]:
                d, h = r["dev"], r["heldout"]
                ok = h["gini_cut"] >= s["target"] and h["loss"] <= s["budget"]
                label = f"**{r['label']}**" if r["label"] in picks else r["label"]
                lines.append(
                    f"| {label} | {d['gini_cut']:.0%} | {d['loss']:.1%} | {h['gini']:.4f} | {h['gini_cut']:.0%} | "
                    f"{h['bytes_per_token']:.3f} | {h['loss']:.1%} | {'✓' if ok else ''} | {r['train_s']:.1f} |"
                )
            lines.append("")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    panels = [(v, n) for v, per in res["sizes"].items() for n in per]
    cols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, 4.6 * nrows), squeeze=False)
    for ax, (vocab, name) in zip(axes.flat, panels):
        s = res["sizes"][vocab][name]
        fams: dict[str, list] = {}
        ax.set_prop_cycle(color=plt.cm.tab20.colors)  # type: ignore[attr-defined]
        for r in s["rows"]:
            fams.setdefault(r["family"], []).append((100 * r["heldout"]["loss"], 100 * r["heldout"]["gini_cut"]))
        for fam, pts in fams.items():
            pts.sort()
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=4, label=fam)
        lo, hi = ax.get_xlim()
        lo, hi = min(lo, -0.5), max(hi, 100 * s["budget"] + 0.5)
        top = max(ax.get_ylim()[1], 100 * s["target"] + 5)
        # the target region: at least the Gini cut asked for, at most the loss allowed
        ax.fill_between([lo, 100 * s["budget"]], 100 * s["target"], top, color="0.9", zorder=0)
        ax.axhline(100 * s["target"], color="0.5", lw=0.8, ls="--")
        ax.axvline(100 * s["budget"], color="0.5", lw=0.8, ls="--")
        ax.set_xlim(lo, hi)
        ax.set_ylim(top=top)
        ax.set_title(f"{name}, {int(vocab):,} ids (held out; shaded: the target)", fontsize=10)
        ax.set_xlabel("global bytes/token loss vs plain BPE (%)")
        ax.set_ylabel("Gini of premiums cut vs plain BPE (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="bench/data/multilingual", help="the --multilingual directory")
    ap.add_argument("--train", help="training JSON lines instead of DATA/train.jsonl")
    ap.add_argument("--heldout", help="near-parallel held-out JSON lines instead of DATA/heldout.jsonl")
    ap.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--reference", default="en")
    ap.add_argument("--only", help="comma-separated labels of the configurations to run (default: all)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("-o", "--out", required=True, help="directory for frontier.json, frontier.md, frontier.png")
    ap.add_argument("--replot", action="store_true", help="only redraw frontier.md and .png from OUT/frontier.json")
    ap.add_argument("--add", action="store_true", help="add the rows run (--only) to OUT/frontier.json, then redraw")
    args = ap.parse_args(argv)
    res = json.loads((Path(args.out) / "frontier.json").read_text()) if args.replot else run(args)
    if args.add:
        res = add_rows(json.loads((Path(args.out) / "frontier.json").read_text()), res)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from tokenforge.formats.atomic import atomic_write

    if not args.replot:
        atomic_write(out / "frontier.json", (json.dumps(res, indent=1) + "\n").encode())
    atomic_write(out / "frontier.md", (render_markdown(res) + "\n").encode())
    plot(res, out / "frontier.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
