"""What ``tokenforge inspect`` (and the demo) says about a vocabulary: statistics
every family answers through the contract, plus the family's own
(:meth:`~tokenforge.base.Tokenizer.inspect_extra`), and their text layout.

Not handled: statistics that need the training corpus (only an optional text
to measure bytes per token on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["vocabulary_stats", "inspect_lines"]


def vocabulary_stats(tok: Tokenizer, text: str | None = None, top: int = 10) -> dict:
    """Statistics every family can answer through the contract."""
    import numpy as np  # here, not at import: `tokenforge --help` stays light

    tb = tok.token_bytes()
    used = tb > 0
    stats = {
        "class": type(tok).__name__,
        "vocab_size": int(tok.vocab_size),
        "special_tokens": len(tok.special_tokens),
        "byte_length_mean": float(tb[used].mean()) if used.any() else 0.0,
        "byte_length_max": int(tb.max()) if len(tb) else 0,
        "byte_length_histogram": {int(k): int(v) for k, v in zip(*np.unique(tb[used], return_counts=True))},
    }
    order = np.argsort(-tb, kind="stable")[:top]
    stats["longest_tokens"] = [(int(i), tok.id_to_token(int(i))) for i in order if tb[i] > 0]
    not_utf8 = 0
    for i in np.nonzero(used)[0]:
        try:
            tok.id_to_bytes(int(i)).decode("utf-8")
        except UnicodeDecodeError:
            not_utf8 += 1
    stats["tokens_not_valid_utf8_alone"] = not_utf8
    stats.update(tok.inspect_extra())
    if text is not None:
        ids = tok.encode_ordinary(text)
        nbytes = len(text.encode("utf-8"))
        stats["text_bytes"] = nbytes
        stats["text_tokens"] = len(ids)
        stats["bytes_per_token"] = nbytes / max(1, len(ids))
        stats["distinct_ids_used"] = len(set(ids))
    return stats


# the generic statistics inspect_lines prints itself; a family's extras that repeat them are left to --json
_GENERIC_KEYS = {
    "class",
    "read_as",
    "vocab_size",
    "special_tokens",
    "byte_length_mean",
    "byte_length_max",
    "byte_length_histogram",
    "longest_tokens",
    "tokens_not_valid_utf8_alone",
    "text_bytes",
    "text_tokens",
    "bytes_per_token",
    "distinct_ids_used",
}


def inspect_lines(stats: dict, tok: Tokenizer | None = None, width: int = 100) -> list[str]:
    """``tokenforge inspect``'s text: each fact once, a handful of lines whatever the vocabulary.

    A family's scalar extras (``inspect_extra``) go on one wrapped line; its
    lists and tables (an LZ78 depth histogram or longest entries, which the
    generic length histogram and longest tokens already show) only in ``--json``.
    """
    import textwrap

    def wrap(head: str, items: list[str]) -> list[str]:
        # lines break only between items (no-break spaces inside an item while wrapping)
        text = ", ".join(i.replace(" ", "\0") for i in items)
        lines = textwrap.wrap(
            text,
            width=width,
            initial_indent=f"  {head}: ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        return [x.replace("\0", " ") for x in lines] or [f"  {head}: none"]

    def show(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    out = [f"{stats['class']}: {stats['vocab_size']:,} ids ({stats['special_tokens']} special tokens)"]
    if "read_as" in stats:
        out.append(f"  read as: {stats['read_as']}")
    bad = stats.get("tokens_not_valid_utf8_alone", 0)
    out.append(
        f"  token bytes: mean {stats['byte_length_mean']:.2f}, max {stats['byte_length_max']}"
        + (f"; {bad:,} ids are not valid UTF-8 on their own" if bad else "")
    )
    extras = [(k, v) for k, v in stats.items() if k not in _GENERIC_KEYS and not isinstance(v, (dict, list, tuple))]
    if extras:
        family = (tok.family if tok is not None else None) or stats["class"]
        out += wrap(str(family), [f"{k.removeprefix(f'{family}_').replace('_', ' ')} {show(v)}" for k, v in extras])
    hist = stats["byte_length_histogram"]
    out += wrap("ids by length in bytes", [f"{n}: {c:,}" for n, c in sorted(hist.items())])
    out += wrap("longest tokens", [f"{i} {t!r}" for i, t in stats["longest_tokens"]])
    if "text_bytes" in stats:
        out.append(
            f"  on the text: {stats['text_bytes']:,} bytes -> {stats['text_tokens']:,} tokens "
            f"({stats['bytes_per_token']:.3f} bytes per token), {stats['distinct_ids_used']:,} distinct ids"
        )
    return out
