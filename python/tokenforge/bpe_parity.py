"""Parity-aware BPE's inputs: per-language training text, development text, and
how compression is compared across languages (Foroutan et al. 2025, arXiv
2508.04796; the rule itself runs in the Rust trainer, ``src/bpe/parity.rs``, and
is stated in docs/algorithms.md).

``BPETokenizer.train(corpus, vocab_size, parity=DEV)``:

- ``DEV`` maps each language code to its development ("dev") text, read as the
  corpus is: paths (a path or a list of paths) in ``train``, texts (an
  iterable of str) in ``train_from_iterator``. The dev text decides which
  language is worst compressed before each merge; it is never learned from.
- The training corpus carries languages one of two ways: a mapping language ->
  corpus (paths in ``train``, texts in ``train_from_iterator``), or, in
  ``train``, JSON-lines files whose lines have a ``lang`` field (the held-out
  format of ``tokenforge compare``; a line without one is an error).
- Every language needs both training text and dev text: a dev language with
  no training text, or a training language with no dev text, is a
  :class:`~tokenforge.errors.CorpusError` naming it.
- ``parity_measure``: "tokens" (default: the dev texts are parallel, the same
  content in every language, and the language whose dev text takes the most
  tokens is the worst), "bytes" or "chars" (dev tokens per UTF-8 byte or per
  character, for dev texts that are not parallel; note that a script of two or
  three bytes a character looks better compressed per byte), or a mapping
  language -> a positive int, the size of each language's dev text in a unit
  common to all (e.g. the bytes of the reference language's version of the
  same documents; ``tokenforge compare``'s ``bpe:parity`` does this).
- ``parity_global_merges``: the first N merges are plain BPE's (the paper's
  hybrid variant), the rest parity-aware; a float in [0, 1) is a share of
  the merges asked for (0.5: the first half).
- ``parity_window`` (0: off; the paper uses 100) and ``parity_window_alpha``
  (default 2): the paper's moving-window variant: a language picked for more
  than ``alpha / L`` of the last ``window`` parity merges is passed over for
  the next worst.
- ``parity_tolerance`` (0: off): the tolerance variant: while every language's
  dev cost is within a factor ``1 + tolerance`` of the cheapest one's, the
  merge is a global one (plain BPE's pick), and the worst language is served
  only when the spread is wider.
- ``parity_shared`` (0: off, else >= 1): the shared-pair variant: among the
  worst language's pairs counting at least ``1 / shared`` of its top pair's
  count (in its training text), the one most frequent over all languages.
- ``parity_rule`` (:data:`RULES`): "foroutan2025" (the paper's, default);
  "levelup": like the tolerance variant, but measured against
  ``parity_reference`` (a language code) instead of the cheapest language: a
  global merge while every language costs at most ``1 + parity_tolerance``
  times the reference (0 allowed), else the worst language is served; the
  global merges do not wait for a language cheaper than the reference to be
  pulled up to it (though, never the worst, it gets no parity merge and can
  still fall behind: docs/results/parity-frontier/README.md).
  ``parity_reference="median"`` (with any rule but the paper's): the
  reference is, before each merge, the median language (the lower median of
  the languages' dev costs, ties to the first in sorted order) instead of a
  fixed one, so the languages below the median are left to the global merges
  whoever the cheapest is. "excess": no
  language is served alone; each merge is, among plain BPE's pick and the top
  pair of every language dearer than the reference, the one with the largest
  ``global count + parity_gain * sum_l excess_l * count_l`` (``excess_l``: the
  language's dev cost over the reference's, minus 1; 0 at or below it). Gain 0
  is plain BPE; the larger the gain, the more the dear languages' pairs weigh.
  It takes no tolerance, shared factor or window. "group": the language as
  "levelup" picks it (``parity_tolerance`` included); the pair, among the
  worst language's pairs counting at least ``1 / parity_shared`` of its top
  pair's count (``parity_shared`` >= 1 required; at most 64 of them, its
  best first), the one with the largest ``sum_l w_l count_l``, ``w_l = 1 +
  parity_gain`` for a language dearer than the reference, else 1: the
  shared-pair variant's choice leaning towards the pairs the other dear
  languages share (gain 0: the shared-pair choice, capped). "keep":
  "levelup" for the languages dearer than the reference, and a language
  cheaper than it keeps its premium: when the parity phase starts (after the
  global merges) each language's floor is its premium then, or 1 if that is
  above 1; a merge is global while every language's premium is within
  ``1 + parity_tolerance`` of its floor, else the language furthest above
  its floor (premium / floor) is served. A language cheaper than the
  reference is served once its premium rises above where it started, instead
  of never (under "levelup" it is never the worst). "discount" (issue 36):
  "levelup"'s language and the shared-pair variant's band (``parity_shared``
  >= 1 required), the pair scored by its global count minus ``parity_gain``
  (in [0, 1], rounded to 1/1024) times its count in the reference language
  (a fixed one, not "median"): a pair that also shortens the reference
  raises every premium, so it weighs less (gain 0: the shared-pair pick;
  1: the count over the other languages). "lift" (issue 36, session 20):
  "levelup"'s language and the shared-pair band (``parity_shared`` >= 1
  required), the pair scored by its global count plus ``parity_gain`` (in
  [0, 2**20], rounded to 1/1024) times its count in the language served: a
  linear trade between helping every language and helping the one served, in
  place of the band's hard edge alone (gain 0: the shared-pair pick).
  "devlift": "lift" with the pair's count in every language's *dev* text in
  place of its count over all training text: the global loss as the dev text
  measures it (training text of other kinds, in no dev text, does not weigh).

The ``parity_*`` settings travel from ``train`` as one checked value,
:class:`ParitySettings` (its :meth:`~ParitySettings.check` is their one check),
held by :class:`ParityCounts` next to the counts; the training text of every
language is counted through one runner (a scheduler address is connected once).
Counted here, in-memory texts that are both a language's training and dev text
(``compare``'s near-parallel dev text is its training pages) are counted once,
their counts added to both sides.

Not handled: the paper's target-ratio variant; documents
without a language in a parity corpus (refused, not dropped); per-language
weights.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import Any

from . import _core
from .cluster import runner
from .counting import UNBOUNDED, DocRule, count_pieces, memory_budget, settle_shared
from .data.corpus import Texts, corpus_paths
from .data.languages import is_language_code, read_language_documents
from .errors import CorpusError, TokenforgeError

__all__ = [
    "MEASURES",
    "MEDIAN",
    "RULES",
    "PARALLEL",
    "ParityCounts",
    "ParitySettings",
    "count_parity",
    "as_texts",
    "compare_parity_inputs",
]

#: the named ways to compare dev compression across languages
MEASURES = ("tokens", "bytes", "chars")
#: the rules that pick the merges after the global ones (see the module docstring)
RULES = ("foroutan2025", "levelup", "excess", "group", "keep", "discount", "lift", "devlift")
#: the lift rule's largest gain (``src/bpe/parity.rs``: ``LIFT_MAX``)
LIFT_MAX = 2.0**20
#: ``parity_reference`` naming the median language (see the module docstring)
MEDIAN = "median"
#: the core's index for the median language (``src/bpe/parity.rs``: ``MEDIAN``, ``usize::MAX``)
MEDIAN_INDEX = 2**64 - 1


@dataclasses.dataclass(frozen=True)
class ParitySettings:
    """How parity training compares and serves the languages: every setting of
    ``BPETokenizer.train``'s ``parity_*`` arguments, as one value (see the module
    docstring for each). :meth:`check` is their one check."""

    measure: str | Mapping[str, int] = "tokens"
    global_merges: int | float = 0  # merges, or a share of them (resolved by :meth:`ParityCounts.resolve_global`)
    window: int = 0
    window_alpha: float = 2.0
    tolerance: float = 0.0
    shared: float = 0.0
    rule: str = "foroutan2025"
    reference: str | None = None
    gain: float = 1.0

    def check(self, parity: object) -> list[str]:
        """The dev languages of ``parity``, sorted, when these settings are valid
        for them; the typed error naming the argument otherwise."""
        if not isinstance(parity, Mapping) or isinstance(parity, (str, bytes)):
            raise TypeError(
                f"parity must map each language code to its dev text (e.g. {{'de': 'dev.de.txt'}}), "
                f"not {type(parity).__name__}"
            )
        if not parity:
            raise TokenforgeError("parity: no language given; map each language code to its dev text")
        langs = sorted(_check_lang(k, "parity") for k in parity)
        measure, global_merges, window, window_alpha = self.measure, self.global_merges, self.window, self.window_alpha
        tolerance, shared, rule, reference, gain = self.tolerance, self.shared, self.rule, self.reference, self.gain
        if isinstance(measure, Mapping):
            for lang in langs:
                if lang not in measure:
                    raise TokenforgeError(f"parity_measure gives no size for the dev text of {lang!r}")
            for lang, v in measure.items():
                if lang not in parity:
                    raise TokenforgeError(f"parity_measure names {lang!r}, which has no dev text in parity")
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise TokenforgeError(f"parity_measure[{lang!r}] must be a positive int, not {v!r}")
        elif measure not in MEASURES:
            raise TokenforgeError(
                f"unknown parity_measure {measure!r}; expected one of {', '.join(MEASURES)} or a mapping "
                "language -> positive int"
            )
        if isinstance(global_merges, float):
            if not 0.0 <= global_merges < 1.0:
                raise TokenforgeError(
                    f"parity_global_merges as a share of the merges must be in [0, 1), not {global_merges!r}"
                )
        elif isinstance(global_merges, bool) or not isinstance(global_merges, int) or global_merges < 0:
            raise TokenforgeError(
                f"parity_global_merges must be an int >= 0 (merges) or a float in [0, 1) (a share of them), "
                f"not {global_merges!r}"
            )
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise TokenforgeError(f"parity_window must be an int >= 0 (0: off), not {window!r}")
        if isinstance(window_alpha, bool) or not isinstance(window_alpha, (int, float)) or not window_alpha > 0:
            raise TokenforgeError(f"parity_window_alpha must be a number above 0, not {window_alpha!r}")
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < math.inf:
            raise TokenforgeError(f"parity_tolerance must be a number >= 0 (0: off; 0.05: 5%), not {tolerance!r}")
        if (
            isinstance(shared, bool)
            or not isinstance(shared, (int, float))
            or not (shared == 0 or 1 <= shared < math.inf)
        ):
            raise TokenforgeError(f"parity_shared must be 0 (off) or a number >= 1, not {shared!r}")
        if rule not in RULES:
            raise TokenforgeError(f"unknown parity_rule {rule!r}; expected one of {', '.join(RULES)}")
        if rule != "foroutan2025":
            if reference not in parity and reference != MEDIAN:
                raise TokenforgeError(
                    f"parity_rule={rule!r} needs parity_reference, one of the dev languages ({', '.join(langs)}) "
                    f"or {MEDIAN!r}, not {reference!r}"
                )
            if rule in ("discount", "lift", "devlift") and not shared:
                raise TokenforgeError(f"parity_rule={rule!r} needs parity_shared >= 1 (the band it picks from)")
            if rule == "discount" and reference == MEDIAN:
                raise TokenforgeError(
                    "parity_rule='discount' needs parity_shared >= 1 (the band it picks from) and a fixed "
                    f"parity_reference language, not {reference!r}"
                )
            if rule == "group" and not shared:
                raise TokenforgeError(
                    "parity_rule='group' needs parity_shared >= 1 (the band of the worst language's pairs it "
                    "chooses from)"
                )
            if rule == "excess" and (tolerance or shared or window):
                raise TokenforgeError(
                    "parity_rule='excess' takes no parity_tolerance, parity_shared or parity_window (its knob is "
                    "parity_gain)"
                )
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 <= gain < math.inf:
            raise TokenforgeError(f"parity_gain must be a number >= 0 (0: plain BPE), not {gain!r}")
        if rule == "discount" and not gain <= 1:
            raise TokenforgeError(f"parity_gain must be in [0, 1] with parity_rule='discount', not {gain!r}")
        if rule in ("lift", "devlift") and not gain <= LIFT_MAX:
            raise TokenforgeError(f"parity_gain must be in [0, {LIFT_MAX:g}] with parity_rule={rule!r}, not {gain!r}")
        return langs

    def normalized(self) -> ParitySettings:
        """The checked settings in the core's types (a plain dict of ints as the measure, floats)."""
        measure = self.measure if isinstance(self.measure, str) else {k: int(v) for k, v in self.measure.items()}
        return dataclasses.replace(
            self,
            measure=measure,
            window_alpha=float(self.window_alpha),
            tolerance=float(self.tolerance),
            shared=float(self.shared),
            gain=float(self.gain),
        )


@dataclasses.dataclass
class ParityCounts:
    """Counted per-language text, ready for ``_core.BpeTrainer.parity`` (languages sorted)."""

    languages: list[str]
    train: list[Any]  # _core.WordCounter per language
    dev: list[Any]
    train_bytes: list[int]
    dev_bytes: list[int]
    settings: ParitySettings
    #: per language, what the memory budget dropped (``WordCounter.budget_dropped``; empty: no budget)
    budget_dropped: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)

    def total_budget_dropped(self) -> tuple[int, int, int]:
        """(distinct pieces, occurrences) the budget dropped over all languages, and the
        highest of their thresholds (each language's own is in :meth:`record`)."""
        d = self.budget_dropped
        return (sum(x[0] for x in d), sum(x[1] for x in d), max((x[2] for x in d), default=0))

    def reference_index(self) -> int | None:
        """The reference language's index for the core (None for the paper's rule, which has
        none; :data:`MEDIAN_INDEX` for ``"median"``)."""
        s = self.settings
        if s.rule == "foroutan2025" or s.reference is None:
            return None
        return MEDIAN_INDEX if s.reference == MEDIAN else self.languages.index(s.reference)

    def resolve_global(self, num_merges: int) -> int:
        """The number of global merges: as given, or the share of ``num_merges``."""
        g = self.settings.global_merges
        return int(g * num_merges) if isinstance(g, float) else g

    def core_measure(self) -> tuple[str, list[int] | None]:
        """(the core's measure name, explicit norms or None)."""
        m = self.settings.measure
        if isinstance(m, str):
            return m, None
        return "tokens", [m[lang] for lang in self.languages]

    def record(self, summary: list[tuple[int, int, int]], num_merges: int) -> dict:
        """The ``parity`` entry of the saved file's training section (``num_merges``: asked for)."""
        s = self.settings
        per = {}
        for i, lang in enumerate(self.languages):
            before, after, merges = summary[i]
            per[lang] = {
                "train_bytes": int(self.train_bytes[i]),
                "dev_bytes": int(self.dev_bytes[i]),
                "dev_tokens_before": int(before),
                "dev_tokens_after": int(after),
                "merges": int(merges),
            }
            if self.budget_dropped and self.budget_dropped[i][2]:
                dropped = self.budget_dropped[i]
                per[lang]["budget_dropped_below"] = int(dropped[2])
                per[lang]["budget_dropped_unique"] = int(dropped[0])
                per[lang]["budget_dropped_pieces"] = int(dropped[1])
        return {
            "rule": s.rule,
            **({"reference": s.reference} if s.rule != "foroutan2025" else {}),
            **({"gain": s.gain} if s.rule in ("excess", "group", "discount", "lift", "devlift") else {}),
            "languages": list(self.languages),
            "measure": s.measure if isinstance(s.measure, str) else dict(sorted(s.measure.items())),
            "global_merges": self.resolve_global(num_merges),
            **({"global_share": s.global_merges} if isinstance(s.global_merges, float) else {}),
            **({"window": s.window, "window_alpha": s.window_alpha} if s.window else {}),
            **({"tolerance": s.tolerance} if s.tolerance else {}),
            **({"shared": s.shared} if s.shared else {}),
            "per_language": per,
        }


def _check_lang(lang: object, what: str) -> str:
    if not isinstance(lang, str) or not is_language_code(lang):
        raise TokenforgeError(f"{what}: {lang!r} is not a language code (e.g. en, de, pt-BR)")
    return lang


def as_texts(mapping: Mapping, what: str) -> dict[str, Texts]:
    """``train_from_iterator``'s per-language mappings: every value is texts."""
    if isinstance(mapping, (str, bytes)) or not isinstance(mapping, Mapping):
        raise TypeError(f"{what} must map language codes to texts, not {type(mapping).__name__}")
    return {k: v if isinstance(v, Texts) else Texts(v) for k, v in mapping.items()}


def _training_sources(corpus: Any, who: str, text_field: str) -> dict[str, Any]:
    """language -> corpus for the training text (see the module docstring)."""
    if isinstance(corpus, Mapping):
        return {_check_lang(k, f"{who}: the corpus mapping"): v for k, v in corpus.items()}
    if isinstance(corpus, Texts):
        raise CorpusError(
            f"{who}: parity training needs the language of every training text; pass the corpus as a "
            "mapping language -> texts"
        )
    by_lang: dict[str, list[str]] = {}
    for path in corpus_paths(corpus, who=who):
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if f.suffix != ".jsonl":
                raise CorpusError(
                    f"{who}: {f} gives its documents no language; for parity training pass the corpus as a "
                    "mapping language -> paths, or JSON lines with a 'lang' field"
                )
            for i, d in enumerate(read_language_documents(f, text_field=text_field)):
                if d.lang is None:
                    raise CorpusError(
                        f"{who}: {f}: document {i + 1} has no 'lang' field; parity training needs the "
                        "language of every training document"
                    )
                by_lang.setdefault(d.lang, []).append(d.text)
    return {lang: Texts(texts) for lang, texts in by_lang.items()}


def count_parity(
    corpus: Any,
    parity: Mapping[str, Any],
    regex: str | None,
    settings: ParitySettings,
    *,
    who: str,
    rule: DocRule,
    text_field: str,
    split_on: str | None,
    errors: str,
    num_threads: int | None,
    progress: bool | None,
    client: Any,
    prune_below: int | None,
    max_memory: int | str | None = None,
    tmp_dir: Any = None,
) -> ParityCounts:
    """Count every language's training text and dev text with ``regex``. A
    scheduler address as ``client`` is connected once for all the languages.

    ``max_memory`` (:func:`~tokenforge.counting.count_pieces`'s; None: the default
    share of the available memory) is one budget over all the languages'
    counts: each language's training table spills past its 1/L of the spill
    share; the dev texts (the measure) are counted whole, in memory, and their
    training cost taken from the budget first (a budget they fill is an
    error); then :func:`~tokenforge.counting.settle_shared`
    keeps, in every language, its most frequent pieces in the share of the rest
    that its pieces would cost -- nothing is dropped anywhere when all of them
    fit, and when not, every language loses the same share of its cost, its
    rarest pieces first."""
    langs = settings.check(parity)
    sources = _training_sources(corpus, who, text_field)
    for lang in langs:
        if lang not in sources:
            raise CorpusError(
                f"{who}: the dev language {lang!r} has no training text (training languages: "
                f"{', '.join(sorted(sources)) or 'none'})"
            )
    for lang in sorted(sources):
        if lang not in parity:
            raise CorpusError(
                f"{who}: the training language {lang!r} has no dev text in parity (dev languages: "
                f"{', '.join(langs)}); give it one, or leave its text out"
            )
    common: dict[str, Any] = dict(
        rule=rule, text_field=text_field, split_on=split_on, errors=errors, num_threads=num_threads
    )
    budget = memory_budget(max_memory)
    # each language's training table spills past its share of one budget; settled together below
    under = dict(max_memory=budget, tmp_dir=tmp_dir, budget_share=1 / len(langs), settle=False)
    # dev text: counted whole, in memory (it is the measure); its cost is charged to the budget below
    dev_kw = dict(common, max_memory=UNBOUNDED)
    train, dev = [], []
    run = None if client is None else runner(client, progress=progress)
    try:
        for lang in langs:
            split = _shared_texts(sources[lang], parity[lang]) if run is None and prune_below is None else None
            if split is None:
                c = count_pieces(
                    sources[lang],
                    regex,
                    client=run,
                    who=who,
                    progress=progress,
                    prune_below=prune_below,
                    desc=f"counting {lang}",
                    **under,
                    **common,
                )
                d = count_pieces(parity[lang], regex, who=f"{who} (dev text of {lang!r})", progress=False, **dev_kw)
            else:
                # the dev text that is also training text is counted once
                # (`compare`'s near-parallel dev text is 55-100% of the training
                # bytes: counted twice, the counting took 1.5x plain training's)
                only_train, both, only_dev = split
                c = count_pieces(
                    Texts(only_train), regex, who=who, progress=progress, desc=f"counting {lang}", **under, **common
                )
                if both:
                    b = count_pieces(Texts(both), regex, who=who, progress=progress, desc=f"counting {lang}", **dev_kw)
                    c.merge(b)  # spills as needed: b itself is dev text, counted whole
                    if only_dev:
                        d = count_pieces(Texts(only_dev), regex, who=who, progress=False, **dev_kw)
                        d = _core.WordCounter.merged([b, d])
                    else:
                        d = b
                else:
                    d = count_pieces(
                        Texts(only_dev), regex, who=f"{who} (dev text of {lang!r})", progress=False, **dev_kw
                    )
            if c.total_bytes == 0:
                raise CorpusError(f"{who}: the training text of {lang!r} is empty")
            train.append(c)
            if d.total_bytes == 0:
                raise CorpusError(f"{who}: the dev text of {lang!r} is empty")
            dev.append(d)
    finally:
        if run is not None and run is not client:
            run.close()
    drops = []
    if budget is not None:
        drops = settle_shared(train, langs, budget, who, held=sum(int(d.train_cost_total()) for d in dev))
        if prune_below and client is None:  # on a cluster the partitions were pruned by the workers
            for c in train:
                c.prune_below(prune_below)
    return ParityCounts(
        languages=langs,
        train=train,
        dev=dev,
        train_bytes=[int(c.total_bytes) for c in train],
        dev_bytes=[int(d.total_bytes) for d in dev],
        settings=settings.normalized(),
        budget_dropped=drops,
    )


def _shared_texts(train: Any, dev: Any) -> tuple[list[str], list[str], list[str]] | None:
    """(texts only in ``train``, texts in both, texts only in ``dev``), matched as
    multisets of str, when both are in-memory lists or tuples of str (``Texts``);
    None otherwise (paths, iterators, other items: counted as given). Cost: one
    hash of each text (Python caches a str's hash)."""
    if not (isinstance(train, Texts) and isinstance(dev, Texts)):
        return None
    tt, dt = train.texts, dev.texts
    if not (isinstance(tt, (list, tuple)) and isinstance(dt, (list, tuple))):
        return None
    if not all(type(t) is str for t in tt) or not all(type(t) is str for t in dt):
        return None
    left: dict[str, int] = {}
    for t in dt:
        left[t] = left.get(t, 0) + 1
    only_train, both = [], []
    for t in tt:
        n = left.get(t, 0)
        if n:
            left[t] = n - 1
            both.append(t)
        else:
            only_train.append(t)
    only_dev = [t for t, n in left.items() for _ in range(n)]
    return only_train, both, only_dev


#: ``bpe:parity``'s default measure in ``tokenforge compare``
PARALLEL = "parallel"
#: a parallel unit counts for the dev text when its length ratio to the reference
#: is within this factor of its language's median ratio
PARALLEL_BAND = 1.5


def compare_parity_inputs(languages: Mapping[str, Any], measure: Any) -> tuple[dict[str, Texts], dict[str, Texts], Any]:
    """``bpe:parity`` in ``tokenforge compare``: (training texts per language, dev
    texts per language, measure) from the training documents' languages
    (a :class:`~tokenforge.data.languages.TrainLanguages`).

    ``measure="parallel"`` (the default): a language's dev text is its training
    documents of the parallel units (``parallel_id``) that the reference
    language also has and that look parallel: the unit's length ratio (its
    bytes / the reference's bytes of the same unit) lies within a factor
    :data:`PARALLEL_BAND` of the language's median ratio. Its size is the
    reference language's UTF-8 bytes of those units, so the worst language is
    the one with the most tokens per reference byte: the premium ``compare``
    reports (a ratio of sums over parallel units), measured on training text
    (the held-out set stays unseen). Units outside the band are left out
    because near-parallel units are not all parallel: a translation of an
    older, longer page, or one with a translators' section, would make its
    language look worse compressed than it is (on the Debian man pages, a few
    long Italian pages made Italian's ratio 1.79 by sums against a median of
    1.17). "tokens", "bytes" or "chars": every training document of a language
    is its dev text, measured so.

    With dev documents of their own (``languages.dev``, from ``compare
    --parity-dev``), those are the dev text and are taken as exactly parallel
    (the paper's setting: the same content in every language, e.g. FLORES, or
    the gettext messages ``bench/build_corpus.py --multilingual`` writes):
    ``"parallel"`` then measures each language by its dev tokens in all
    (``"tokens"``). Where the documents carry ``parallel_id`` every language
    must have the same units (a unit one language lacks would make it look
    better compressed); "tokens", "bytes" or "chars" measure them so.
    """
    from .data.languages import TrainLanguages

    if not isinstance(languages, TrainLanguages) or not any(d.lang for d in languages.docs):
        raise CorpusError("bpe:parity needs training documents that carry a language (JSON lines with a 'lang' field)")
    by_lang: dict[str, list] = {}
    for i, d in enumerate(languages.docs):
        if d.lang is None:
            raise CorpusError(f"bpe:parity: training document {i + 1} has no language; every one needs a 'lang'")
        by_lang.setdefault(d.lang, []).append(d)
    corpus = {lang: Texts([d.text for d in docs]) for lang, docs in by_lang.items()}
    if languages.dev:
        return corpus, _own_dev(languages.dev, measure == PARALLEL), "tokens" if measure == PARALLEL else measure
    if measure != PARALLEL:
        return corpus, {lang: Texts([d.text for d in docs]) for lang, docs in by_lang.items()}, measure
    ref = languages.reference
    if ref not in by_lang:
        raise CorpusError(
            f"bpe:parity: the reference language {ref!r} has no training documents (languages: "
            f"{', '.join(sorted(by_lang))}); its parallel units size every language's dev text"
        )
    ref_bytes: dict[str, int] = {}
    for d in by_lang[ref]:
        if d.parallel_id is not None:
            ref_bytes[d.parallel_id] = ref_bytes.get(d.parallel_id, 0) + len(d.text.encode("utf-8"))
    dev: dict[str, Texts] = {}
    sizes: dict[str, int] = {}
    for lang, docs in sorted(by_lang.items()):
        mine = [d for d in docs if d.parallel_id in ref_bytes and ref_bytes[d.parallel_id] > 0]
        if not mine:
            raise CorpusError(
                f"bpe:parity: no training document of {lang!r} is parallel to one of {ref!r} (same "
                "'parallel_id'); give parallel documents, or use parity_measure=chars"
            )
        unit_bytes: dict[str, int] = {}
        for d in mine:
            unit_bytes[d.parallel_id] = unit_bytes.get(d.parallel_id, 0) + len(d.text.encode("utf-8"))
        ratio = {u: unit_bytes[u] / ref_bytes[u] for u in sorted(unit_bytes)}
        med = statistics.median(ratio.values())
        keep = {u for u, r in ratio.items() if med / PARALLEL_BAND <= r <= med * PARALLEL_BAND}
        dev[lang] = Texts([d.text for d in mine if d.parallel_id in keep])
        sizes[lang] = sum(ref_bytes[u] for u in keep)
    return corpus, dev, sizes


def _own_dev(docs: Any, parallel: bool) -> dict[str, Texts]:
    """Dev texts per language from ``compare --parity-dev``'s documents; with
    ``parallel``, where they carry ``parallel_id``, every language must have the
    same units (the text is compared by token counts)."""
    by_lang: dict[str, list] = {}
    for d in docs:
        by_lang.setdefault(d.lang, []).append(d)
    if parallel and any(d.parallel_id is not None for d in docs):
        units = {lang: {d.parallel_id for d in ds} for lang, ds in by_lang.items()}
        every = set().union(*units.values())
        for lang, have in sorted(units.items()):
            if None in have:
                raise CorpusError(
                    f"bpe:parity: a --parity-dev document of {lang!r} has no 'parallel_id' where others have one"
                )
            if have != every:
                missing = sorted(str(u) for u in every - have)
                raise CorpusError(
                    f"bpe:parity: the --parity-dev text of {lang!r} lacks {len(missing)} of the {len(every)} parallel "
                    f"units (e.g. {missing[0]!r}); dev texts compared by token counts must be parallel (or give "
                    "parity_measure=bytes or chars)"
                )
    return {lang: Texts([d.text for d in ds]) for lang, ds in sorted(by_lang.items())}
