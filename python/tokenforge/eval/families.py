"""Tokenizer specifications for comparisons: ``family[:option...]`` strings.

Grammar: a comma-separated list of specs; each is a family name followed by
``:``-separated options. A bare word is a family-specific switch; ``key=value``
is passed to the family's trainer as a keyword (ints, floats, true/false and
none are converted).

``bpe``                          byte-level BPE (:class:`tokenforge.BPETokenizer`),
                                 e.g. ``bpe:pattern=gpt2``; options pattern,
                                 special_tokens, tie_break, min_frequency, layout
``bpe:parity``                   parity-aware BPE on the training documents'
                                 languages (JSON lines with ``lang``); dev text:
                                 each language's training documents of the
                                 parallel units the reference language has,
                                 measured against the reference's bytes of the
                                 same units (``parity_measure=parallel``; or
                                 tokens, bytes, chars on all its documents;
                                 ``compare --parity-dev`` gives parallel dev
                                 text instead, measured by its tokens);
                                 ``parity_global_merges=N`` (hybrid; 0.5: half);
                                 ``parity_window=W[:parity_window_alpha=A]``
                                 (the moving-window variant);
                                 ``parity_tolerance=E`` (global merges while
                                 the dev costs are within 1+E);
                                 ``parity_shared=F`` (the worst language's
                                 pair most shared among those within F of
                                 its top count); ``parity_rule=levelup``,
                                 ``excess``, ``group``, ``keep``, ``discount``,
                                 ``lift`` or ``devlift`` (tokenforge's rules,
                                 against ``--reference-lang``; knob
                                 ``parity_gain=G``)
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
``spm:unigram``, ``spm:bpe``     SentencePiece Unigram / BPE trained by sentencepiece,
``hf:wordpiece``, ``hf:unigram`` BERT's WordPiece / a Metaspace Unigram trained by
                                 tokenizers (:class:`tokenforge.PipelineTokenizer`;
                                 also spelled ``pipeline:spm_unigram`` ...); the
                                 library must be installed

Every family, its bare words, its ``key=value`` options and their defaults
come from its record in :mod:`tokenforge.registry` (the one place); an option
the family does not know is a :class:`SpecError` naming it and the known ones
(``bpe:patern=gpt2`` never trains with the defaults).

Not handled: values with ``,`` or ``:`` in them (the separators); lists as
values (``special_tokens`` takes the family's named sets or one token).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ..errors import TokenforgeError
from ..registry import FAMILIES, LZ78_STRATEGIES, SPEC_ALIASES, family

if TYPE_CHECKING:
    from ..base import Tokenizer
    from ..data.languages import TrainLanguages

__all__ = ["Spec", "parse_specs", "family_class", "train_tokenizer", "LZ78_STRATEGIES", "FAMILY_CLASSES", "SpecError"]

#: family name -> class name in the tokenforge namespace (from the registry)
FAMILY_CLASSES = {name: fam.class_name for name, fam in FAMILIES.items()}


class SpecError(TokenforgeError):
    """A tokenizer specification that does not parse."""


def _value(v: str) -> object:
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
        head = [self.family, *self.words]
        for alias, fam in SPEC_ALIASES.items():  # written as the alias: spm:unigram
            if self.family == fam and self.words and self.words[0].startswith(alias + "_"):
                head = [alias, self.words[0][len(alias) + 1 :], *self.words[1:]]
        return ":".join([*head, *(f"{k}={v}" for k, v in self.kwargs)])

    @property
    def fixed_vocab(self) -> bool:
        return FAMILIES[self.family].spec.fixed_vocab

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
        if fam in SPEC_ALIASES:  # spm:unigram -> pipeline:spm_unigram
            words_at = [k for k, o in enumerate(opts) if o.strip() and "=" not in o]
            if words_at:
                opts[words_at[0]] = f"{fam}_{opts[words_at[0]].strip()}"
            fam = SPEC_ALIASES[fam]
        if fam not in FAMILIES:
            raise SpecError(f"unknown tokenizer family {fam!r} in {raw!r}; known: {', '.join(FAMILIES)}")
        rule = FAMILIES[fam].spec
        words, kwargs = [], []
        for o in opts:
            o = o.strip()
            if not o:
                continue
            if "=" in o:
                k, v = o.split("=", 1)
                if not k.isidentifier():
                    raise SpecError(f"option {o!r} in {raw!r}: {k!r} is not a keyword name")
                known = rule.known_options()
                if k not in known:
                    raise SpecError(f"{raw!r}: {fam} has no option {k!r}; its options are {', '.join(known)}")
                kwargs.append((k, _value(v)))
            else:
                words.append(o.lower())
        if rule.words is None:
            if words:
                raise SpecError(f"{raw!r}: {fam} takes only key=value options, not {', '.join(words)}")
            expanded: list[tuple[str, ...]] = [()]
        else:
            try:
                expanded = rule.words(words, raw)
            except SpecError:
                raise
            except TokenforgeError as e:
                raise SpecError(str(e)) from None
        out.extend(Spec(fam, tuple(w), tuple(kwargs)) for w in expanded)
    seen, unique = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def family_class(name: str) -> type[Tokenizer]:
    """The family's class (from its record in :mod:`tokenforge.registry`)."""
    return family(name).cls


def train_tokenizer(
    spec: Spec,
    docs: list[str],
    vocab_size: int | None,
    *,
    num_threads: int | None = None,
    progress: bool | None = None,
    languages: TrainLanguages | None = None,
) -> Tokenizer:
    """Train the tokenizer ``spec`` describes on ``docs`` at ``vocab_size`` ids
    (the family's record says how; its option defaults, updated by the spec's).
    ``languages``: the same documents with their languages
    (:class:`~tokenforge.data.languages.TrainLanguages`), for the families whose
    record takes them."""
    rule = family(spec.family).spec
    options = {**rule.options, **dict(spec.kwargs)}
    extra = {"languages": languages} if rule.takes_languages else {}
    return rule.train(
        spec.words, options, list(docs), vocab_size, num_threads=num_threads, progress=bool(progress), **extra
    )
