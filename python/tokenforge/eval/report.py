"""The comparison report: Markdown, HTML, PNG plots and the raw JSON.

:func:`write_report` takes the result dict of :func:`tokenforge.eval.compare.run_compare`
and writes, into one directory, atomically file by file:

``results.json``          every number (format ``tokenforge-compare``, version 1)
``report.md``             a summary paragraph (:func:`summary`: which tokenizer wins on what, by how
                          much, against the noise across seeds), then bits per byte, compression,
                          languages, the tables, the verdicts and the reproducing command
``report.html``           the same, self-contained except for the PNGs beside it
``bytes_per_token.png``   held-out bytes per token against vocabulary size
``bpb.png``               bits per byte, mean ± std over seeds (with ``--bpb``)
``token_lengths.png``     share of held-out tokens by token length in bytes (one panel per
                          tokenizer past four, shared axes: a dozen stay readable)
``premiums.png``          premium per language per tokenizer (held-out documents with languages)

The HTML also shows one held-out paragraph cut by every tokenizer, side by
side (:func:`sample_paragraph`, :func:`sample_cut`), each with a link that opens
the playground (``tokenforge serve``, :mod:`tokenforge.serve`) on it, and the
command that starts the playground with the report's tokenizers.

Every plot's value axis starts at zero (and says so), so a gap looks as large as
it is; bars carry their values, where small differences are read. matplotlib is
imported only here, with the non-interactive Agg backend.

Not handled: a summary of more than the best and the next best per measure,
and noise estimates for compression (one held-out text, no seeds).
"""

from __future__ import annotations

import html
import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..formats.atomic import atomic_write
from ..registry import FAMILIES, SEED_ORDERING

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = [
    "write_report",
    "render_markdown",
    "render_html",
    "seed_ordering",
    "summary",
    "family_tables",
    "language_table",
    "gini_table",
    "sample_paragraph",
    "sample_cut",
    "playground_command",
]

FORMAT = "tokenforge-compare"
VERSION = 1


# ---------------------------------------------------------------------------
# numbers -> text
# ---------------------------------------------------------------------------
def _f(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _bpb_cell(b: dict | None) -> str:
    if not b:
        return "–"
    if b.get("error"):
        return "n/a"
    s = b["bpb"]
    return f"{s['mean']:.4f} ± {s['std']:.4f}" if s["n"] > 1 else f"{s['mean']:.4f}"


def _rows(results: dict) -> list[dict]:
    return [r for r in results["rows"] if not r.get("error")]


def compression_table(results: dict) -> tuple[list[str], list[list[str]]]:
    head = ["tokenizer", "ids", "bytes/token", "chars/token", "vocab used", "Rényi eff. (α=2.5)", "train s"]
    rows = []
    for r in _rows(results):
        m = r["metrics"]
        rows.append(
            [
                r["label"],
                f"{m['model_vocab_size']:,}",
                _f(m["bytes_per_token"]),
                _f(m["chars_per_token"]),
                f"{100 * m['vocab_utilisation']:.1f}%",
                _f(m["renyi_efficiency"]),
                _f(r.get("train_seconds"), 1) + ("" if m.get("lossless", True) else " (lossy)"),
            ]
        )
    return head, rows


def family_tables(results: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """``(title, note, head, rows)`` of each family's own table (its record's
    :class:`~tokenforge.registry.ReportRule`), for the families whose rows carry
    its measurement (stored under the family's name)."""
    out = []
    for name, fam in FAMILIES.items():
        if fam.report is None:
            continue
        rows = [r for r in _rows(results) if r.get(name)]
        if rows:
            head, cells = fam.report.table(rows)
            out.append((fam.report.title, fam.report.note, head, cells))
    return out


def bpb_entries(results: dict) -> list[tuple[str, str, dict]]:
    """(label, mode, bpb dict) for every BPB run, in row order."""
    out = []
    for r in _rows(results):
        for mode, b in (r.get("bpb") or {}).items():
            out.append((r["label"], mode, b))
    return out


def _text_bytes(results: dict) -> int | None:
    """UTF-8 bytes of the held-out text every BPB run scores (None in older results)."""
    n = (results.get("bpb_setup") or {}).get("eval_bytes")
    return int(n) if n else None


def scores_whole_text(results: dict, b: dict) -> bool:
    """Whether a BPB run scored every byte of the text: a tokenizer that normalizes
    (lower-cases, NFKC, drops what it cannot spell: the imported WordPiece and
    SentencePiece models) is scored over the bytes its tokens spell, fewer, so its
    bits per byte are over another text and not comparable with the others'."""
    whole = _text_bytes(results)
    return whole is None or b.get("eval_bytes") is None or int(b["eval_bytes"]) >= whole


#: The rank cell of a BPB run over a normalized text (see :func:`scores_whole_text`).
ANOTHER_TEXT = "– (another text)"


def bpb_table(results: dict) -> tuple[list[str], list[list[str]]]:
    """Runs that score the whole text ranked by mean BPB; runs over a normalized text
    (fewer bytes) after them, unranked; failed runs last."""
    head = [
        "rank", "tokenizer", "embedding", "BPB (mean ± std)", "seeds", "per seed", "train tokens", "s / seed",
        "bytes scored",
    ]  # fmt: skip
    whole = _text_bytes(results)
    ok = [(lbl, mode, b) for lbl, mode, b in bpb_entries(results) if not b.get("error")]
    ok.sort(key=lambda e: (not scores_whole_text(results, e[2]), e[2]["bpb"]["mean"]))
    rows = []
    rank = 0
    for lbl, mode, b in ok:
        runs = b["runs"]
        secs = sum(x["train_seconds"] + x["eval_seconds"] for x in runs) / max(1, len(runs))
        scored = b.get("eval_bytes")
        if scores_whole_text(results, b):
            rank += 1
            place = str(rank)
            cell = "all" if scored is None else f"{int(scored):,} (all)"
        else:  # scores_whole_text is false only with both counts known
            place = ANOTHER_TEXT
            n, of = int(scored or 0), int(whole or 0)
            cell = f"{n:,} of {of:,} ({100 * n / of:.1f}%)"
        rows.append(
            [
                place,
                lbl,
                mode,
                _bpb_cell(b),
                str(b["bpb"]["n"]),
                ", ".join(f"{x['bpb']:.4f}" for x in runs),
                f"{b['train_tokens']:,}",
                f"{secs:.0f}",
                cell,
            ]
        )
    for lbl, mode, b in bpb_entries(results):
        if b.get("error"):
            rows.append(["–", lbl, mode, "n/a", "0", b["error"], "", "", ""])
    return head, rows


BPB_PARTIAL_NOTE = (
    'Rows marked "another text" score fewer bytes than the held-out text holds: their tokenizer normalizes '
    "it (lower-cases, NFKC, drops what it cannot spell) and their bits are over the bytes its tokens spell. "
    "They model less of the text, so their bits per byte are not comparable with the ranked rows and are not "
    "ranked against them."
)


def _pct_diff(a: float, b: float) -> str:
    return f"{100 * abs(a / b - 1):.1f}%"


def _noise(best: dict, other: dict) -> str:
    """How a gap between two BPB summaries compares with their seeds' spread (the
    rule :func:`seed_ordering` uses: a gap larger than the two stds together)."""
    n = min(best["n"], other["n"])
    if n < 2:
        return "measured on one seed, so with no estimate of the noise (--seeds 3 gives one)"
    spread = best["std"] + other["std"]
    if other["mean"] - best["mean"] > spread:
        return f"larger than the noise across {n} seeds (the two stds together: {spread:.4f})"
    return f"within the noise across {n} seeds (the two stds together: {spread:.4f}): not a clear win"


def summary(results: dict) -> list[str]:
    """The report's opening paragraph, as sentences: which tokenizer wins on what,
    by how much, and (for bits per byte) whether the margin is larger than the
    noise across seeds. Compression is compared at one vocabulary size (bytes
    per token grow with it); bits per byte across every size (its unit does not
    depend on the tokenizer), per embedding mode; fairness by the Gini."""
    rows = _rows(results)
    if not rows:
        return ["No tokenizer was measured."]
    out = []
    bpb: dict[str, list[tuple[str, dict]]] = {}
    for r in rows:
        for mode, b in (r.get("bpb") or {}).items():
            if not b.get("error") and scores_whole_text(results, b):
                bpb.setdefault(mode, []).append((r["label"], b["bpb"]))
    for mode, entries in bpb.items():
        entries.sort(key=lambda e: e[1]["mean"])
        emb = "" if list(bpb) == ["flat"] else f" ({mode} embedding)"
        (win, sa), rest = entries[0], entries[1:]
        if not rest:
            out.append(f"Bits per byte{emb}: only {win} was measured, {sa['mean']:.4f}.")
            continue
        nxt, sb = rest[0]
        out.append(
            f"Lowest bits per byte{emb}: {win}, {sa['mean']:.4f} against {sb['mean']:.4f} for {nxt}, the next best "
            f"({_pct_diff(sa['mean'], sb['mean'])} lower); the gap of {sb['mean'] - sa['mean']:.4f} is "
            f"{_noise(sa, sb)}."
        )
    by_size: dict[int, list[dict]] = {}
    for r in rows:
        by_size.setdefault(int(r["metrics"]["model_vocab_size"]), []).append(r)
    for size, group in sorted(by_size.items()):
        if len(group) < 2:
            continue
        group = sorted(group, key=lambda r: -r["metrics"]["bytes_per_token"])
        a, b = group[0], group[1]
        ma, mb = a["metrics"]["bytes_per_token"], b["metrics"]["bytes_per_token"]
        out.append(
            f"Best compression at {size:,} ids: {a['label']}, {ma:.3f} bytes per token, {_pct_diff(ma, mb)} more "
            f"than {b['label']} ({mb:.3f}); one held-out text, so no noise estimate."
        )
    if not any(len(g) > 1 for g in by_size.values()):
        best = max(rows, key=lambda r: r["metrics"]["bytes_per_token"])
        others = (
            "" if len(rows) == 1 else " (the others have other vocabulary sizes, so their compression is not compared)"
        )
        out.append(f"{best['label']}: {best['metrics']['bytes_per_token']:.3f} bytes per token{others}.")
    fair = [(r["label"], r["languages"]["gini"]) for r in rows if (r.get("languages") or {}).get("gini") is not None]
    if len(fair) > 1:
        fair.sort(key=lambda e: e[1])
        out.append(
            f"Fairest across languages: {fair[0][0]}, a Gini of premiums of {fair[0][1]:.3f} against "
            f"{fair[1][1]:.3f} for {fair[1][0]}."
        )
    return out


def seed_ordering(results: dict) -> list[str]:
    """Whether the seed's ordering (:data:`tokenforge.registry.SEED_ORDERING`: BPE <
    frequency_gated chunked < unchunked, by BPB) holds, per vocab size and mode."""
    by: dict = {}
    for r in _rows(results):
        if r["spec"] not in SEED_ORDERING:
            continue
        for mode, b in (r.get("bpb") or {}).items():
            if not b.get("error"):
                by.setdefault((r["vocab_size"], mode), {})[r["spec"]] = b["bpb"]
    lines = []
    for (vocab, mode), d in sorted(by.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        if len(d) < len(SEED_ORDERING):
            continue
        a, b, c = (d[spec] for spec in SEED_ORDERING)
        holds = a["mean"] < b["mean"] < c["mean"]

        def sep(x: dict, y: dict) -> bool:
            return (y["mean"] - x["mean"]) > (x["std"] + y["std"])

        firm = holds and sep(a, b) and sep(b, c)
        verdict = "holds" if holds else "does not hold"
        margin = (
            " (every gap larger than the two stds together)"
            if firm
            else (" (but a gap is within the seeds' spread)" if holds else "")
        )
        lines.append(
            f"At {vocab} ids, {mode} embedding: BPE {a['mean']:.4f} ± {a['std']:.4f}, frequency_gated chunked "
            f"{b['mean']:.4f} ± {b['std']:.4f}, unchunked {c['mean']:.4f} ± {c['std']:.4f}: the seed's ordering "
            f"BPE < chunked < unchunked {verdict}{margin}. Seed reported 0.9433 < 1.0999 < 1.1757 (d12 GPT, C4)."
        )
    return lines


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def _lang_rows(results: dict) -> list[tuple[str, dict]]:
    return [(r["label"], r["languages"]) for r in _rows(results) if r.get("languages")]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def language_table(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per tokenizer and language: the figures of :mod:`tokenforge.eval.languages`."""
    ref = (results.get("languages") or {}).get("reference", "en")
    head = [
        "tokenizer",
        "language",
        "bytes/token",
        "chars/token",
        "fertility",
        "continued words",
        f"premium vs {ref}",
        "premium from",
    ]
    rows = []
    for label, lg in _lang_rows(results):
        for lang, m in (lg.get("languages") or {}).items():
            if m.get("error"):
                rows.append([label, lang, "n/a", "", "", "", "", m["error"][:80]])
                continue
            how = m.get("method") or "–"
            if how == "parallel":
                how = f"{m['units']} parallel docs"
            if m.get("lossless") is False:
                how += " (lossy: not in the Gini)"
            rows.append(
                [
                    label,
                    lang,
                    _f(m["bytes_per_token"]),
                    _f(m["chars_per_token"]),
                    _f(m["fertility"], 2),
                    _pct(m["continued_word_rate"]),
                    _f(m["premium"], 2),
                    how,
                ]
            )
    return head, rows


def _family_baselines(results: dict) -> dict[int, dict]:
    """``id(row)`` -> the row of its family's default tokenizer (spec = the family's
    name, e.g. ``bpe`` for ``bpe:parity``) at the same vocabulary size, where the
    comparison has one and it is another row."""
    plain = {(r["family"], r.get("vocab_size")): r for r in _rows(results) if r.get("spec") == r.get("family")}
    out = {}
    for r in _rows(results):
        base = plain.get((r.get("family"), r.get("vocab_size")))
        if base is not None and base is not r:
            out[id(r)] = base
    return out


def _change(x: float | None, base: float | None) -> str:
    return "–" if x is None or not base else f"{100 * (x / base - 1):+.1f}%"


def gini_table(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per tokenizer: the Gini of its per-language premiums, its costliest
    language, and what its fairness cost globally: its Gini and held-out
    bytes/token against its family's default tokenizer at the same size
    (:func:`_family_baselines`; ``bpe:parity`` against ``bpe``)."""
    head = [
        "tokenizer",
        "Gini of premiums (0 = fair)",
        "highest premium",
        "languages",
        "Gini vs family default",
        "bytes/token vs family default",
    ]
    bases = _family_baselines(results)
    rows = []
    for r in _rows(results):
        if not r.get("languages"):
            continue
        label, lg = r["label"], r["languages"]
        base = bases.get(id(r))
        ls = {
            k: v for k, v in (lg.get("languages") or {}).items() if v.get("premium") is not None and v.get("lossless")
        }
        top = max(ls.items(), key=lambda kv: kv[1]["premium"], default=None)
        rows.append(
            [
                label,
                _f(lg.get("gini"), 3) if not lg.get("error") else "n/a",
                f"{top[1]['premium']:.2f} ({top[0]})" if top else "–",
                str(len(ls)),
                _change(lg.get("gini"), ((base or {}).get("languages") or {}).get("gini")),
                _change(r["metrics"]["bytes_per_token"], base["metrics"]["bytes_per_token"] if base else None),
            ]
        )
    return head, rows


_LANG_NOTE = (
    "Fertility: tokens per whitespace-separated word (the tokens of the encoded text that touch the word); "
    "continued words: the share of words touched by more than one token; both left out for languages written "
    "without spaces. Premium: the language's token cost against the reference language, as the ratio of token "
    "counts on parallel documents (the same page in both languages) where there are any, otherwise as the "
    "ratio of bytes/token. Gini: over the per-language premiums of one tokenizer, the reference included. "
    "What fairness cost: a tokenizer's Gini and held-out bytes/token against its family's default tokenizer at "
    "the same size (bpe:parity against bpe), when the comparison has it: a fairer tokenizer usually pays in "
    "global compression."
)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save_png(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write(path, buf.getvalue())


def plot_bytes_per_token(results: dict, path: Path) -> bool:
    rows = _rows(results)
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    groups: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        groups.setdefault(r["spec"], []).append((r["metrics"]["model_vocab_size"], r["metrics"]["bytes_per_token"]))
    for spec, pts in groups.items():
        pts.sort()
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", label=spec)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)  # from zero: a gap looks as large as it is
    ax.set_xlabel("vocabulary size (ids, log scale)")
    ax.set_ylabel("held-out bytes per token (axis from 0)")
    ax.set_title("Compression against vocabulary size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    _save_png(fig, path)
    plt.close(fig)
    return True


def plot_bpb(results: dict, path: Path) -> bool:
    ok = [(lbl, mode, b) for lbl, mode, b in bpb_entries(results) if not b.get("error")]
    if not ok:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(ok) + 2), 4.2))
    names = [lbl if mode == "flat" else f"{lbl}\n[{mode}]" for lbl, mode, _ in ok]
    # a run over a normalized text (fewer bytes) is another measurement: grey, and said so
    whole = [scores_whole_text(results, b) for _, _, b in ok]
    names = [n if w else f"{n}\n(another text)" for n, w in zip(names, whole)]
    means = [b["bpb"]["mean"] for _, _, b in ok]
    stds = [b["bpb"]["std"] for _, _, b in ok]
    # bars from zero, so a gap of 1% looks like 1%; each bar's value is written on it,
    # which is where a small difference can be read
    xs = range(len(ok))
    colors = ["#4c72b0" if w else "#aaaaaa" for w in whole]
    ax.bar(xs, means, yerr=stds, capsize=5, width=0.6, color=colors, ecolor="#222")
    for x, m, sd in zip(xs, means, stds):
        ax.annotate(f"{m:.4f}", (x, m + sd), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    ax.set_xlim(-0.6, len(ok) - 0.4)
    ax.set_ylim(0, max(m + sd for m, sd in zip(means, stds)) * 1.12)
    ax.set_xticks(range(len(ok)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    n = max(b["bpb"]["n"] for _, _, b in ok)
    ax.set_ylabel("bits per byte, lower is better (axis from 0)")
    ax.set_title(f"Held-out bits per byte, mean ± std over {n} seed{'s' if n > 1 else ''}")
    ax.grid(True, axis="y", alpha=0.3)
    _save_png(fig, path)
    plt.close(fig)
    return True


#: Up to this many tokenizers share one plot of token lengths; more get small multiples.
LENGTHS_ONE_PLOT = 4


def token_length_layout(n: int) -> tuple[int, int]:
    """(rows, columns) of the token-length plot for ``n`` tokenizers: one
    panel up to :data:`LENGTHS_ONE_PLOT`, else one small panel each, four to
    a row, so a dozen tokenizers stay readable."""
    if n <= LENGTHS_ONE_PLOT:
        return 1, 1
    cols = 4
    return -(-n // cols), cols


def _length_shares(r: dict, top: int) -> list[float]:
    h = {int(k): v for k, v in r["metrics"]["token_length_histogram"].items()}
    total = sum(h.values()) or 1
    return [h.get(x, 0) / total for x in range(1, top + 1)]


def plot_token_lengths(results: dict, path: Path) -> bool:
    rows = _rows(results)
    if not rows:
        return False
    plt = _plt()
    top = 1
    for r in rows:
        h = r["metrics"]["token_length_histogram"]
        top = max(top, min(max((int(k) for k in h), default=1), 24))
    xs = list(range(1, top + 1))
    nrows, ncols = token_length_layout(len(rows))
    if nrows == ncols == 1:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in rows:
            ax.plot(xs, _length_shares(r, top), marker=".", label=r["label"])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("token length (bytes)")
        ax.set_ylabel("share of held-out tokens (axis from 0)")
        ax.set_title("Token length distribution")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    else:
        # small multiples: one panel per tokenizer on shared axes, with the
        # median share over all tokenizers in grey behind each for reference
        shares = [_length_shares(r, top) for r in rows]
        median = [sorted(col)[len(col) // 2] for col in zip(*shares)]
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(3.0 * ncols, 2.4 * nrows + 0.6),
            sharex=True,
            sharey=True,
            squeeze=False,
            layout="constrained",
        )
        for k, ax in enumerate(axes.flat):
            if k >= len(rows):
                ax.set_visible(False)
                continue
            ax.plot(xs, median, color="#bbbbbb", linewidth=1.2, label="median of all")
            ax.bar(xs, shares[k], color="#4c72b0", width=0.8)
            h = rows[k]["metrics"]["token_length_histogram"]
            mean = sum(int(n) * c for n, c in h.items()) / (sum(h.values()) or 1)
            ax.set_title(f"{rows[k]['label']}\nmean {mean:.2f} bytes", fontsize=8)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelsize=7)
        for ax in axes[-1]:
            ax.set_xlabel("token length (bytes)", fontsize=8)
        for ax in axes[:, 0]:
            ax.set_ylabel("share of tokens", fontsize=8)
        axes.flat[0].legend(fontsize=6, loc="upper right")
        fig.suptitle("Token length distribution (grey: median over all tokenizers)", fontsize=10)
    _save_png(fig, path)
    plt.close(fig)
    return True


def plot_premiums(results: dict, path: Path) -> bool:
    entries = [(label, lg) for label, lg in _lang_rows(results) if lg.get("languages")]
    langs = sorted({k for _, lg in entries for k, v in lg["languages"].items() if v.get("premium") is not None})
    if not entries or not langs:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(langs) * max(1, len(entries)) ** 0.5 + 3), 4.2))
    width = 0.8 / len(entries)
    for k, (label, lg) in enumerate(entries):
        xs = [i + (k - (len(entries) - 1) / 2) * width for i in range(len(langs))]
        ms = [lg["languages"].get(lang) or {} for lang in langs]
        # a language the tokenizer cannot spell (lossless false) has no bar: its token count is not its cost
        ys = [(m.get("premium") or 0.0) if m.get("lossless") else 0.0 for m in ms]
        g = lg.get("gini")
        lossy = sum(1 for m in ms if m and not m.get("lossless"))
        note = f"Gini {g:.3f}" if g is not None else "no Gini"
        note += f"; {lossy} lossy language{'s' if lossy != 1 else ''} not shown" if lossy else ""
        ax.bar(xs, ys, width=width, label=f"{label} ({note})")
    ax.axhline(1.0, color="#444", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(langs)))
    ax.set_xticklabels(langs)
    ref = (results.get("languages") or {}).get("reference", "en")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"premium against {ref} (tokens per {ref} token; axis from 0)")
    ax.set_title("Token cost per language")
    ax.grid(True, axis="y", alpha=0.3)
    if len(entries) > 4:  # beside the axes: inside, a long legend hides the last languages' bars
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=7)
    _save_png(fig, path)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------
# documents
# ---------------------------------------------------------------------------
def _md_table(head: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(esc, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(lines)


def _setup_lines(results: dict) -> list[str]:
    c = results["corpus"]
    lines = [
        f"Corpus: {c['description']}; tokenizers trained on {c['train_bytes'] / 1e6:.2f} MB "
        f"({c['train_documents']:,} documents); compression measured on {c['eval_bytes'] / 1e6:.2f} MB of held-out text "
        f"({c['eval_documents']:,} documents).",
    ]
    if results.get("languages"):
        lg = results["languages"]
        per = ", ".join(f"{k} {v['documents']:,} docs" for k, v in lg["held_out"].items())
        cap = lg.get("max_bytes_per_language")
        lines.append(
            f"Languages: {per}; reference {lg['reference']}"
            + (f"; at most {cap / 1e6:.2f} MB per language." if cap else ".")
        )
    if c.get("parity_dev"):
        per = ", ".join(f"{k} {v['bytes'] / 1e6:.2f} MB" for k, v in c["parity_dev_languages"].items())
        lines.append(f"Parity dev text (`bpe:parity`): {c['parity_dev']} ({per}).")
    if results.get("bpb_setup"):
        b = results["bpb_setup"]
        cfg = b["config"]
        lines.append(
            f"Bits per byte: a GPT of {cfg['n_layer']} layers × {cfg['n_embd']} wide ({cfg['n_head']} heads, context "
            f"{cfg['seq_len']}, {b.get('params_blocks', 0) / 1e6:.2f}M parameters outside the embedding and output layer) trained "
            f"per tokenizer on the same {b['train_bytes'] / 1e6:.2f} MB ({cfg['epochs']:g} epoch, batch {cfg['batch_size']}, "
            f"AdamW lr {cfg['lr']:g}) and scored on the same {b['eval_bytes'] / 1e6:.2f} MB held out; seeds "
            f"{', '.join(map(str, b['seeds']))}; device {cfg['device']}, {cfg.get('autocast') or 'float32'}. Special tokens "
            f"carry 0 bytes and are not scored."
        )
    return lines


def _partial(results: dict) -> str:
    status = results.get("status", "complete")
    if status == "complete":
        return ""
    return " (so far: the run was interrupted)" if status == "interrupted" else " (so far: the run has not finished)"


def render_markdown(results: dict, plots: dict[str, str]) -> str:
    out = [f"# {results.get('title', 'Tokenizer comparison')}", ""]
    out += [f"**Summary{_partial(results)}.** " + " ".join(summary(results)), ""]
    for line in _setup_lines(results):
        out += [line, ""]
    out += ["Reproduce with:", "", "```sh", results["command"], "```", ""]
    out += [f"*{n}*" for n in results.get("notes", [])] + ([""] if results.get("notes") else [])
    if bpb_entries(results):
        head, rows = bpb_table(results)
        out += ["## Bits per byte (lower is better)", "", _md_table(head, rows), ""]
        if any(r[0] == ANOTHER_TEXT for r in rows):
            out += [BPB_PARTIAL_NOTE, ""]
        if "bpb" in plots:
            out += [f"![bits per byte with error bars]({plots['bpb']})", ""]
        verdicts = seed_ordering(results)
        if verdicts:
            out += ["### The seed's ordering", ""] + [f"- {v}" for v in verdicts] + [""]
    head, rows = compression_table(results)
    out += ["## Compression (held-out text)", "", _md_table(head, rows), ""]
    if "bytes_per_token" in plots:
        out += [f"![bytes per token against vocabulary size]({plots['bytes_per_token']})", ""]
    if "token_lengths" in plots:
        out += [f"![token length distribution]({plots['token_lengths']})", ""]
    if _lang_rows(results):
        out += ["## Languages", "", _LANG_NOTE, ""]
        head, rows = gini_table(results)
        out += [_md_table(head, rows), ""]
        head, rows = language_table(results)
        out += [_md_table(head, rows), ""]
        if "premiums" in plots:
            out += [f"![premium per language]({plots['premiums']})", ""]
    command = playground_command(results)
    if command:
        out += ["See where each tokenizer cuts the text (report.html shows a paragraph; the playground any text):", ""]
        out += ["```bash", command, "```", ""]
    for title, note, head, rows in family_tables(results):
        out += [f"## {title}", "", note, "", _md_table(head, rows), ""]
    skipped = results.get("skipped") or []
    errors = [r for r in results["rows"] if r.get("error")]
    if skipped or errors:
        out += ["## Not measured", ""]
        out += [f"- `{s['spec']}`: {s['reason']}" for s in skipped]
        out += [f"- `{r['label']}`: {r['error']}" for r in errors]
        out += [""]
    env = results.get("environment", {})
    if env:
        out += ["## Environment", ""] + [f"- {k}: {v}" for k, v in env.items()] + [""]
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td:first-child,th:first-child,td:nth-child(2){text-align:left}pre{background:#f4f4f4;padding:.8em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:10px}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px}.card h3{font-size:1em;margin:.2em 0}
.card p{margin:0 0 .3em;color:#666;font-size:.85em}
.toks{font:13px/1.8 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
.t0{background:#fde2c8}.t1{background:#cfe8fc}.t2{background:#d8f3d0}.t3{background:#f6d4f0}
.t4{background:#fff1b3}.t5{background:#d9d6fb}.x{font-size:10px;color:#6b2b00}"""


# ---------------------------------------------------------------------------
# one paragraph, cut by each tokenizer; the playground
# ---------------------------------------------------------------------------
#: the sample paragraph's length bounds, in characters
SAMPLE_MIN_CHARS, SAMPLE_MAX_CHARS = 120, 400
#: where ``tokenforge serve`` listens by default (the links' address)
PLAYGROUND_URL = "http://127.0.0.1:8765/"


def sample_paragraph(docs: Iterable[str]) -> str:
    """A paragraph of the held-out text to show cut by each tokenizer: the first
    one of at least :data:`SAMPLE_MIN_CHARS` characters (else the longest),
    cut at a space before :data:`SAMPLE_MAX_CHARS`."""
    best = ""
    for d in docs:
        for para in d.split("\n\n"):
            para = para.strip()
            if len(para) >= SAMPLE_MIN_CHARS:
                best = para
                break
            if len(para) > len(best):
                best = para
        if len(best) >= SAMPLE_MIN_CHARS:
            break
    if len(best) > SAMPLE_MAX_CHARS:
        cut = best.rfind(" ", 0, SAMPLE_MAX_CHARS)
        best = best[: cut if cut > SAMPLE_MIN_CHARS else SAMPLE_MAX_CHARS]
    return best


def sample_cut(tok: Tokenizer, text: str) -> dict:
    """``{"ids", "pieces"}`` of ``text`` (pieces as the playground's API gives them)."""
    from .pieces import TokenInfo

    ids = [int(i) for i in tok.encode_ordinary(text)]
    pieces, _ = TokenInfo(tok).pieces(ids)
    return {"ids": ids, "pieces": pieces}


def _serve_rows(results: dict) -> list[dict]:
    return [r for r in _rows(results) if r.get("sample") and r.get("serve_path")]


def playground_command(results: dict) -> str | None:
    """``tokenforge serve NAME=PATH ...`` for the report's tokenizers (None without files)."""
    import shlex

    rows = _serve_rows(results)
    if not rows:
        return None
    return shlex.join(["tokenforge", "serve", *(f"{r['serve_name']}={r['serve_path']}" for r in rows)])


def _playground_link(text: str, names: list[str]) -> str:
    from urllib.parse import urlencode

    return PLAYGROUND_URL + "#" + urlencode([("t", text), *(("k", n) for n in names)])


def _sample_html(results: dict) -> list[str]:
    e = html.escape
    text = results.get("sample_text")
    rows = [r for r in _rows(results) if r.get("sample")]
    if not text or not rows:
        return []
    parts = ["<h2>One paragraph, cut by each tokenizer</h2>"]
    command = playground_command(results)
    if command:
        everyone = _playground_link(text, [r["serve_name"] for r in _serve_rows(results)])
        parts += [
            f"<p>Each coloured span is one token (hover: its id). Every name links to the playground opened on "
            f'this paragraph (<a href="{e(everyone)}">all of them</a>); start it with:</p>',
            f"<pre><code>{e(command)}</code></pre>",
        ]
    cards = []
    for r in rows:
        ids, pieces = r["sample"]["ids"], r["sample"]["pieces"]
        spans = "".join(
            f'<span class="t{k % 6}{"" if isinstance(p, str) else " x"}" title="id {i}">'
            f"{e(p if isinstance(p, str) else '⟨' + p['hex'] + '⟩')}</span>"
            for k, (i, p) in enumerate(zip(ids, pieces))
        )
        name = e(r["label"])
        if r.get("serve_path"):
            name = f'<a href="{e(_playground_link(text, [r["serve_name"]]))}">{name}</a>'
        cards.append(
            f'<div class="card"><h3>{name}</h3><p>{len(ids):,} tokens</p><div class="toks">{spans}</div></div>'
        )
    parts.append(f'<div class="cards">{"".join(cards)}</div>')
    return parts


def _html_table(head: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    e = html.escape
    th = "".join(f"<th>{e(str(h))}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def render_html(results: dict, plots: dict[str, str]) -> str:
    e = html.escape
    title = e(results.get("title", "Tokenizer comparison"))
    parts = [
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<p class="summary"><b>Summary{e(_partial(results))}.</b> {e(" ".join(summary(results)))}</p>',
    ]
    parts += [f"<p>{e(line)}</p>" for line in _setup_lines(results)]
    parts += ["<p>Reproduce with:</p>", f"<pre><code>{e(results['command'])}</code></pre>"]
    parts += [f"<p><em>{e(n)}</em></p>" for n in results.get("notes", [])]
    if bpb_entries(results):
        head, rows = bpb_table(results)
        parts += ["<h2>Bits per byte (lower is better)</h2>", _html_table(head, rows)]
        if any(r[0] == ANOTHER_TEXT for r in rows):
            parts.append(f"<p>{e(BPB_PARTIAL_NOTE)}</p>")
        if "bpb" in plots:
            parts.append(f'<img src="{e(plots["bpb"])}" alt="bits per byte with error bars">')
        verdicts = seed_ordering(results)
        if verdicts:
            parts += ["<h3>The seed's ordering</h3>", "<ul>" + "".join(f"<li>{e(v)}</li>" for v in verdicts) + "</ul>"]
    head, rows = compression_table(results)
    parts += ["<h2>Compression (held-out text)</h2>", _html_table(head, rows)]
    for key, alt in (
        ("bytes_per_token", "bytes per token against vocabulary size"),
        ("token_lengths", "token length distribution"),
    ):
        if key in plots:
            parts.append(f'<img src="{e(plots[key])}" alt="{e(alt)}">')
    if _lang_rows(results):
        parts += ["<h2>Languages</h2>", f"<p>{e(_LANG_NOTE)}</p>"]
        parts += [_html_table(*gini_table(results)), _html_table(*language_table(results))]
        if "premiums" in plots:
            parts.append(f'<img src="{e(plots["premiums"])}" alt="premium per language">')
    parts += _sample_html(results)
    for title, note, head, rows in family_tables(results):
        parts += [f"<h2>{e(title)}</h2>", f"<p>{e(note)}</p>", _html_table(head, rows)]
    skipped = results.get("skipped") or []
    errors = [r for r in results["rows"] if r.get("error")]
    if skipped or errors:
        items = [f"<li><code>{e(s['spec'])}</code>: {e(s['reason'])}</li>" for s in skipped]
        items += [f"<li><code>{e(r['label'])}</code>: {e(r['error'])}</li>" for r in errors]
        parts += ["<h2>Not measured</h2>", "<ul>" + "".join(items) + "</ul>"]
    env = results.get("environment", {})
    if env:
        parts += [
            "<h2>Environment</h2>",
            "<ul>" + "".join(f"<li>{e(k)}: {e(str(v))}</li>" for k, v in env.items()) + "</ul>",
        ]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(results: dict, out_dir: str | os.PathLike[str], *, plots: bool = True) -> dict[str, Path]:
    """Write the report files into ``out_dir``; returns {kind: path} of what was written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    names: dict[str, str] = {}
    if plots:
        try:
            _plt()
        except ImportError:
            plots = False
            results = {
                **results,
                "notes": [
                    *results.get("notes", []),
                    "No plots: matplotlib is not installed (pip install 'tokenforge[plot]').",
                ],
            }
    if plots:
        for key, fn in (
            ("bytes_per_token", plot_bytes_per_token),
            ("bpb", plot_bpb),
            ("token_lengths", plot_token_lengths),
            ("premiums", plot_premiums),
        ):
            p = out / f"{key}.png"
            if fn(results, p):
                names[key] = p.name
                written[key] = p
            elif p.exists():
                p.unlink()  # a plot of an earlier run that this one has no data for
    doc = {"format": FORMAT, "version": VERSION, **results, "plots": names}
    atomic_write(out / "results.json", json.dumps(doc, indent=1, default=_json_default) + "\n")
    written["json"] = out / "results.json"
    atomic_write(out / "report.md", render_markdown(results, names))
    written["markdown"] = out / "report.md"
    atomic_write(out / "report.html", render_html(results, names))
    written["html"] = out / "report.html"
    _readable(written.values())
    return written


def _readable(paths: Iterable[Path]) -> None:
    """Atomic writes create files only the owner can read; a report is meant to be shared."""
    mask = os.umask(0)
    os.umask(mask)
    for p in paths:
        try:
            os.chmod(p, 0o666 & ~mask)
        except OSError:
            pass


def _json_default(o: object) -> object:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON-able: {type(o).__name__}")
