"""Lone surrogates: the one rule that makes ``decode(encode(s)) == s`` for every str.

A ``str`` may hold U+D800..U+DFFF unpaired (e.g. from ``json.loads('"\\ud800"')``
or ``os.fsdecode`` of bad bytes). Such a code point has no UTF-8, so the Rust
cores refuse it. It round-trips as its "surrogatepass" bytes (``"\\ud800"`` is
ED A0 80): :func:`encode_around_surrogates` cuts the text at each one, encodes
the parts as usual and each lone surrogate as the byte ids of its three bytes
(a family's :meth:`tokenforge.base.Tokenizer.byte_id`), and :func:`decode_utf8`
(the error handler ``"tokenforge-surrogates"``, registered on import) turns
exactly such bytes back into the surrogate. Ordinary text never pays for this:
the cutting runs only after a core has raised ``UnicodeEncodeError``.

Not handled: training on text with lone surrogates (the cores' counters refuse
it: :func:`feed_around_surrogates` feeds the text around them); a parse across a
lone surrogate (the text on either side is encoded on its own, as if the
surrogate were a document boundary).
"""

from __future__ import annotations

import codecs
import re
from typing import Callable, Sequence, TypeVar

__all__ = [
    "SURROGATE_ERRORS",
    "decode_utf8",
    "encode_around_surrogates",
    "feed_around_surrogates",
]

T = TypeVar("T")

#: The codecs error handler for the decoding rule of :func:`decode_utf8` (registered on import).
SURROGATE_ERRORS = "tokenforge-surrogates"
_SURROGATE_RUN = re.compile("[\ud800-\udfff]+")
#: A lone surrogate's "surrogatepass" UTF-8 bytes (never valid UTF-8).
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def _surrogate_errors(exc: UnicodeError) -> tuple[str, int]:
    """Decoding UTF-8: ED A0..BF 80..BF (a lone surrogate's surrogatepass bytes,
    as :func:`encode_around_surrogates` writes them) becomes that surrogate;
    any other invalid span becomes U+FFFD exactly as ``"replace"`` makes it."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    m = _SURROGATE_BYTES.match(exc.object, exc.start)
    if m is not None:
        return m.group().decode("utf-8", "surrogatepass"), m.end()
    return "\ufffd", exc.end


codecs.register_error(SURROGATE_ERRORS, _surrogate_errors)


def decode_utf8(data: bytes) -> str:
    """Token bytes as text: invalid UTF-8 becomes U+FFFD (as with ``"replace"``),
    except the surrogatepass bytes of a lone surrogate (ED A0..BF 80..BF), which
    become that surrogate again, so ``decode(encode(s)) == s`` for every str.

    Gives exactly ``data.decode("utf-8", "tokenforge-surrogates")``, faster:
    valid UTF-8 (nearly always) is one strict decode; otherwise the bytes are
    cut at each surrogate's three bytes and the stretches between decoded with
    the builtin "replace" (an invalid span never contains ED past its first
    byte, so the cut changes nothing), instead of one Python call per invalid
    byte (15x slower on random bytes)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    pos = 0
    for m in _SURROGATE_BYTES.finditer(data):
        out.append(data[pos : m.start()].decode("utf-8", "replace"))
        out.append(m.group().decode("utf-8", "surrogatepass"))
        pos = m.end()
    out.append(data[pos:].decode("utf-8", "replace"))
    return "".join(out)


def feed_around_surrogates(feed: Callable[..., T], texts: list[str], *args: object) -> T:
    """``feed(texts, *args)`` for a core trainer or counter. The core takes only
    UTF-8, so when it raises ``UnicodeEncodeError`` (a text holds lone
    surrogates) the texts are fed again cut at every run of them: training sees
    the text around a surrogate, the surrogate itself adds no statistics (encode
    turns it into byte ids, :func:`encode_around_surrogates`). Ordinary batches
    are never scanned."""
    try:
        return feed(texts, *args)
    except UnicodeEncodeError:
        parts = [p for t in texts for p in _SURROGATE_RUN.split(t) if p]
        return feed(parts, *args)


def encode_around_surrogates(
    texts: Sequence[str], encode_parts: Callable[[list[str]], list[list[int]]], byte_id: Callable[[int], int]
) -> list[list[int]]:
    """The one rule for lone surrogates: each text is cut at every run of lone
    surrogates; the parts between go to ``encode_parts`` (all texts' parts in one
    call, so a family's parallel batch encoder serves; it returns one list of
    ids per part), and each surrogate becomes ``byte_id(b)`` for the three bytes
    ``b`` of ``ch.encode("utf-8", "surrogatepass")``. Families call it only after
    their core raised ``UnicodeEncodeError``, so ordinary text is never scanned.
    Two surrogates in a row (even a high then a low one) stay two code points."""
    parts: list[str] = []
    plans: list[list[int | list[int]]] = []  # per text: an int (index into parts) or a list of byte ids
    for text in texts:
        plan: list[int | list[int]] = []
        pos = 0
        for m in _SURROGATE_RUN.finditer(text):
            if m.start() > pos:
                plan.append(len(parts))
                parts.append(text[pos : m.start()])
            plan.append([byte_id(b) for b in m.group().encode("utf-8", "surrogatepass")])
            pos = m.end()
        if pos < len(text):
            plan.append(len(parts))
            parts.append(text[pos:] if pos else text)
        plans.append(plan)
    encoded = encode_parts(parts) if parts else []
    out = []
    for plan in plans:
        ids: list[int] = []
        for item in plan:
            ids.extend(encoded[item] if isinstance(item, int) else item)
        out.append(ids)
    return out
