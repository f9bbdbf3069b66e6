"""Tokenizer specifications for comparisons: ``family[:option...]`` strings.

Grammar: a comma-separated list of specs; each is a family name followed by
``:``-separated options. A bare word is a family-specific switch; ``key=value``
is passed to the family's trainer as a keyword (ints, floats, true/false and
none are converted).

``bpe``                          byte-level BPE (:class:`tokenforge.BPETokenizer`),
                                 e.g. ``bpe:pattern=gpt2``
``lz78:<strategy>[:nochunk][:compact]``
                                 an LZ78 strategy (standard, frequency_gated,
                                 multi_round, cost_adjusted, smart_prune,
                                 flat_prune, compressed), chunked (the default) or
                                 not; ``compact`` then runs
                                 ``compact_output_vocab`` on the training text
                                 (entries it never emits get no id, so the
                                 tokenizer has fewer ids than asked);
                                 ``lz78`` alone is ``lz78:frequency_gated``;
                                 ``lz78:all`` is every strategy, chunked and not
``mixedgram``                    the 4,096-id mixedgram (one size; vocab sizes
                                 are ignored), e.g. ``mixedgram:parse=optimal``
``growing[:rounds=N]``           the growing BPE vocabulary, grown in N rounds
                                 over N consecutive slices of the corpus (default 1)

A family whose class is not part of this tokenforge (``getattr(tokenforge,
name)`` is None) is reported as unavailable and skipped, never an error.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

from ..errors import TokenforgeError

__all__ = ["Spec", "parse_specs", "family_class", "train_tokenizer", "LZ78_STRATEGIES", "FAMILY_CLASSES", "SpecError"]

#: family name -> class name in the tokenforge namespace
FAMILY_CLASSES = {
    "bpe": "BPETokenizer",
    "lz78": "LZ78Tokenizer",
    "mixedgram": "Mixedgram",
    "growing": "GrowingBPETokenizer",
}
LZ78_STRATEGIES = ("standard", "frequency_gated", "multi_round", "cost_adjusted", "smart_prune", "flat_prune", "compressed")


class SpecError(TokenforgeError):
    """A tokenizer specification that does not parse."""


def _value(v: str):
    low = v.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low == "none":
        return None
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


@dataclasses.dataclass(frozen=True)
class Spec:
    """One parsed specification."""

    family: str
    words: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, object], ...] = ()

    @property
    def text(self) -> str:
        parts = [self.family, *self.words, *(f"{k}={v}" for k, v in self.kwargs)]
        return ":".join(parts)

    @property
    def fixed_vocab(self) -> bool:
        return self.family == "mixedgram"

    def slug(self, vocab_size: int | None) -> str:
        s = re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.text.replace(":", "-"))
        return s if vocab_size is None else f"{s}-{vocab_size}"

    def label(self, vocab_size: int | None) -> str:
        return self.text if vocab_size is None else f"{self.text} @{vocab_size}"


def parse_specs(text: str) -> list[Spec]:
    """Parse ``"bpe,lz78:frequency_gated,lz78:frequency_gated:nochunk"``; see the module docstring."""
    out: list[Spec] = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        fam, *opts = raw.split(":")
        fam = fam.strip().lower()
        if fam not in FAMILY_CLASSES:
            raise SpecError(f"unknown tokenizer family {fam!r} in {raw!r}; known: {', '.join(FAMILY_CLASSES)}")
        words, kwargs = [], []
        for o in opts:
            o = o.strip()
            if not o:
                continue
            if "=" in o:
                k, v = o.split("=", 1)
                if not k.isidentifier():
                    raise SpecError(f"option {o!r} in {raw!r}: {k!r} is not a keyword name")
                kwargs.append((k, _value(v)))
            else:
                words.append(o.lower())
        if fam == "lz78":
            if "all" in words:
                rest = [w for w in words if w != "all"]
                for s in LZ78_STRATEGIES:
                    for chunk in ((), ("nochunk",)):
                        out.append(Spec("lz78", (s, *chunk, *rest), tuple(kwargs)))
                continue
            strategies = [w for w in words if w in LZ78_STRATEGIES]
            others = [w for w in words if w not in LZ78_STRATEGIES]
            bad = [w for w in others if w not in ("chunk", "nochunk", "compact")]
            if bad or len(strategies) > 1:
                raise SpecError(
                    f"{raw!r}: lz78 takes one strategy ({', '.join(LZ78_STRATEGIES)}), 'chunk' or 'nochunk', "
                    "and 'compact'"
                )
            strategy = strategies[0] if strategies else "frequency_gated"
            chunk = ("nochunk",) if "nochunk" in others else ()
            compact = ("compact",) if "compact" in others else ()
            out.append(Spec("lz78", (strategy, *chunk, *compact), tuple(kwargs)))
            continue
        if words:
            raise SpecError(f"{raw!r}: {fam} takes only key=value options, not {', '.join(words)}")
        out.append(Spec(fam, (), tuple(kwargs)))
    seen, unique = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def family_class(family: str):
    """The family's class in this tokenforge, or None when it is not part of it."""
    import tokenforge

    return getattr(tokenforge, FAMILY_CLASSES[family], None)


def _accepted(fn, kwargs: dict) -> dict:
    """The subset of ``kwargs`` that ``fn`` accepts (all of them if it takes **kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def train_tokenizer(spec: Spec, docs: list[str], vocab_size: int | None, *, num_threads=None, progress=None):
    """Train the tokenizer ``spec`` describes on ``docs`` at ``vocab_size`` ids."""
    cls = family_class(spec.family)
    if cls is None:
        raise SpecError(f"this tokenforge has no {FAMILY_CLASSES[spec.family]} ({spec.family} family)")
    kw = dict(spec.kwargs)
    common = {"num_threads": num_threads, "progress": bool(progress)}
    if spec.family == "bpe":
        return cls.train(docs, vocab_size, **_accepted(cls.train, {**common, **kw}))
    if spec.family == "lz78":
        strategy = spec.words[0]
        chunking = "nochunk" not in spec.words
        args = {**common, "strategy": strategy, "vocab_size": vocab_size, "chunking": chunking, **kw}
        tok = cls.train(docs, **_accepted(cls.train, args))
        if "compact" in spec.words:
            tok.compact_output_vocab(docs, num_threads=num_threads)
        return tok
    if spec.family == "mixedgram":
        specials = kw.pop("special_tokens", ["<|bos|>"])
        errors = kw.pop("errors", "replace")
        parse = kw.pop("parse", None)
        tok = cls.train(text="\n".join(docs), special_tokens=specials, errors=errors,
                        **_accepted(cls.train, {**common, **kw}))
        if parse is not None:
            tok.parse = parse
        return tok
    if spec.family == "growing":
        rounds = int(kw.pop("rounds", 1))
        if rounds < 1:
            raise SpecError(f"{spec.text}: rounds must be >= 1")
        tok = cls(vocab_size, **_accepted(cls, {k: v for k, v in kw.items() if k in ("pattern", "normalization")}))
        learn_kw = {k: v for k, v in kw.items() if k not in ("pattern", "normalization")}
        n = len(docs)
        for r in range(rounds):
            part = docs[r * n // rounds : (r + 1) * n // rounds]
            room = vocab_size - tok.next_merge_id
            want = room // (rounds - r)
            if want <= 0 or not part:
                continue
            tok.learn_merges(part, num_merges=want, source=f"round{r + 1}",
                             **_accepted(tok.learn_merges, {**common, **learn_kw}))
        return tok
    raise SpecError(f"no trainer for family {spec.family!r}")  # pragma: no cover
