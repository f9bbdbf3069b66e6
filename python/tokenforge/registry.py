"""The family seam: one :class:`Family` record per tokenizer family, and :func:`load`.

Everything that must know "which families exist and what each can do" reads
:data:`FAMILIES` and nothing else: :func:`load` (each family's file sniffers,
in order), the ``tokenforge`` command (each family's subcommand module, by
name), ``compare``'s spec parser and trainer (:mod:`tokenforge.eval.families`:
the spec words, the known ``key=value`` options with their defaults, how to
train from a spec), the report (a family's own table), the playground (a
token's detail, the text encoding, LZ78's chunking toggle) and
``import tokenforge`` (the names it re-exports). What a
*tokenizer* can do beyond the contract (embedding metadata, fingerprint files,
inspect extras, a JSON-lines block encoder, the rows a model needs) are hooks
declared with defaults on :class:`tokenforge.base.Tokenizer`; no caller probes
with ``hasattr``.

The records name the families explicitly; nothing registers itself when a
module is imported. A record's callables import their family lazily, so
importing this module costs nothing and never imports a family, ``eval``,
``torch`` or the CLI (which it never imports at all: the command line imports
the module a record names).

Adding a family: write its module (a :class:`~tokenforge.base.Tokenizer`
subclass with ``train(corpus)`` and ``train_from_iterator(texts)``, see
:mod:`tokenforge.data.corpus`, and the public functions the record points to,
``file_formats`` and ``token_detail``), then add one :class:`Family` to
:data:`FAMILIES` (its ``sniff_rank`` places its sniffers in :data:`LOAD_ORDER`).
This module is the only one outside a family's own modules that names it. A family
that lives outside the package (a test's toy family, a user's own class) is
added at run time with :func:`register` and removed with :func:`unregister`
(or both, around a block, with :func:`registered`); its sniffers are tried
after those of the built-in families, so it can never shadow their files.
``docs/architecture.md`` walks through it.

Not handled: families from other packages found automatically (entry points);
a record added at run time is seen by :func:`load`, ``compare``, shards and
fingerprints at once, but by the command line only when its parser is built
afterwards (``tokenforge.cli.main.main`` builds one per call); ``FAMILY_CLASSES``
in :mod:`tokenforge.eval.families` lists the built-in families only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from .errors import TokenforgeError
from .formats.kinds import Format
from .formats.kinds import identify as identify_kind

if TYPE_CHECKING:
    from .base import Tokenizer

# the arguments of a SpecRule's train (see SpecRule)
Words = Sequence[str]
Options = Mapping[str, Any]
Threads = int | None

__all__ = [
    "Family",
    "Format",
    "SpecRule",
    "FAMILIES",
    "LOAD_ORDER",
    "BUILT_IN",
    "ReportRule",
    "sniff_order",
    "DEFAULT_SPEC",
    "DEMO_SPECS",
    "SEED_ORDERING",
    "family",
    "family_of",
    "load",
    "identify",
    "formats",
    "register",
    "unregister",
    "registered",
]


@dataclasses.dataclass(frozen=True)
class SpecRule:
    """How ``compare`` trains the family from a spec ``family[:word...][:key=value...]``.

    ``options``: every ``key=value`` option the family takes, with its default
    (the one place the defaults live; an unknown key is refused). ``more_options``:
    a lazy list of further option names whose defaults live with the family's
    trainer (LZ78's strategy parameters). ``words``: ``(words, raw) -> [words, ...]``,
    the family's bare words normalised (one spec may expand to several);
    None when the family takes none. ``train(words, options, docs, vocab_size,
    num_threads=, progress=)`` returns the tokenizer (``options`` are the defaults
    updated with the spec's). ``fixed_vocab``: vocabulary sizes do not apply.
    ``takes_languages``: ``train`` also gets ``languages=``, the training
    documents with their languages (:class:`tokenforge.data.languages.TrainLanguages`,
    or None when the corpus carries none); ``languages_for(words)``: whether the
    spec with these (normalised) bare words reads them, so that ``compare``
    keys its cache by them (every spec of the family when None). ``synopsis``:
    the spec forms ``compare --help`` shows (the family's name when empty).
    ``demo``: the specs ``tokenforge demo`` compares and the playground trains
    for a built-in family (None: the family's name; (): none).
    """

    options: Mapping[str, Any]
    train: Callable[..., Any]
    words: Callable[[list[str], str], list[tuple[str, ...]]] | None = None
    more_options: Callable[[], Sequence[str]] | None = None
    fixed_vocab: bool = False
    takes_languages: bool = False
    languages_for: Callable[[tuple[str, ...]], bool] | None = None
    synopsis: str = ""
    demo: tuple[str, ...] | None = None

    def reads_languages(self, words: tuple[str, ...]) -> bool:
        """Whether the spec with bare words ``words`` trains on the languages
        (and ``compare --parity-dev``'s dev text)."""
        return self.takes_languages and (self.languages_for is None or self.languages_for(words))

    def known_options(self) -> list[str]:
        names = list(self.options)
        if self.more_options is not None:
            names += [n for n in self.more_options() if n not in self.options]
        return names


@dataclasses.dataclass(frozen=True)
class ReportRule:
    """A family's own part of ``compare``'s results and report.

    ``measure(tok, train_docs, num_threads)`` returns a JSON-able dict that
    ``compare`` stores in each of the family's result rows under the family's
    name; ``table(rows)`` turns the rows that have it into ``(head, rows)`` of
    strings, shown under ``title`` after ``note``.
    """

    title: str
    note: str
    measure: Callable[[Any, Sequence[str], int | None], dict]
    table: Callable[[list[dict]], tuple[list[str], list[list[str]]]]


@dataclasses.dataclass(frozen=True)
class Family:
    """One tokenizer family: what every part of tokenforge needs to know about it.

    ``name``: the short name in files, specs and reports (``Tokenizer.family``).
    ``module``/``class_name``: where its class lives (imported on first use).
    ``formats``: its readers, most specific first (a lazy list; a family
    module's ``file_formats``). ``spec``: how ``compare`` trains it. ``cli``:
    the name of the module whose ``add_parser(subparsers)`` adds the family's
    ``tokenforge`` subcommand(s) (None: the core commands serve it); the
    command line imports it by that name, so the registry never imports the CLI.
    ``embedding_modes``: the tree embedding modes its tokenizers' hook
    :meth:`~tokenforge.base.Tokenizer.embedding_metadata` answers (the hook
    itself is on the class; this is what reports and docs state).
    ``sniff_rank``: where its sniffers go in :func:`load`'s order, lowest first
    (a family whose files another family's sniffer would also accept ranks
    before it); families registered at run time come after every built-in one
    whatever their rank. ``exports``: further public names of ``module`` that
    ``import tokenforge`` re-exports beside ``class_name`` (an alias).
    ``report``: the family's own measurement and table in ``compare``'s report
    (:class:`ReportRule`; None: the common tables only). ``detail(tok)``: a
    function ``detail(id, ref)`` saying how ``id`` came to be, for the
    playground (``ref(other_id)`` is the playground's reference to another id;
    None: no detail). ``text_encoding``: the encoding its tokenizers read text
    in ("utf-8", or "latin-1" for mixedgram). ``chunking_twin(tok)``:
    ``(chunking, twin)``, whether ``tok`` chunks its text and a copy that does
    the other, for the playground's toggle (None: no toggle).
    """

    name: str
    module: str
    class_name: str
    formats: Callable[[], Sequence[Format]]
    spec: SpecRule
    cli: str | None = None
    embedding_modes: tuple[str, ...] = ()
    sniff_rank: int = 100
    exports: tuple[str, ...] = ()
    report: ReportRule | None = None
    detail: Callable[[Any], Callable[[int, Callable[[int], dict]], dict]] | None = None
    text_encoding: str = "utf-8"
    chunking_twin: Callable[[Any], tuple[bool, Any]] | None = None

    @property
    def cls(self) -> type[Tokenizer]:
        """The family's class (imports its module)."""
        return getattr(importlib.import_module(self.module), self.class_name)


def _hook(module: str, name: str) -> Callable[..., Any]:
    """A built-in family's public function ``name`` (``file_formats``,
    ``token_detail``), its module imported when it is first called."""
    return lambda *args: getattr(importlib.import_module(module), name)(*args)


# ---------------------------------------------------------------------------
# bpe
# ---------------------------------------------------------------------------
#: bpe's options that only ``bpe:parity`` takes, with their defaults
_BPE_PARITY_OPTIONS = {
    "parity_global_merges": 0,
    "parity_measure": "parallel",
    "parity_window": 0,
    "parity_window_alpha": 2.0,
    "parity_tolerance": 0.0,
    "parity_shared": 0.0,
    "parity_rule": "foroutan2025",
    "parity_gain": 1.0,
}


def _bpe_words(words: list[str], raw: str) -> list[tuple[str, ...]]:
    """``bpe`` takes one bare word, ``parity`` (parity-aware training)."""
    for w in words:
        if w != "parity":
            raise TokenforgeError(f"{raw!r}: bpe takes the word 'parity' and key=value options, not {w!r}")
    return [("parity",) if words else ()]


def _bpe_train(
    words: Words,
    options: Options,
    docs: Any,
    vocab_size: int,
    *,
    num_threads: Threads = None,
    progress: bool = False,
    languages: Any = None,
) -> Tokenizer:
    """Plain BPE on ``docs``; ``bpe:parity``: per language, on the documents of
    ``languages`` (see :func:`tokenforge.bpe_parity.compare_parity_inputs`)."""
    from .bpe import BPETokenizer

    options = dict(options)
    parity = {k: options.pop(k) for k in _BPE_PARITY_OPTIONS}
    if "parity" not in words:
        changed = [k for k, v in parity.items() if v != _BPE_PARITY_OPTIONS[k]]
        if changed:
            raise TokenforgeError(f"bpe: {', '.join(changed)} only apply to bpe:parity")
        return BPETokenizer.train_from_iterator(docs, vocab_size, num_threads=num_threads, progress=progress, **options)
    from .bpe_parity import compare_parity_inputs

    corpus, dev, measure = compare_parity_inputs(languages, parity["parity_measure"])
    return BPETokenizer.train_from_iterator(
        corpus,
        vocab_size,
        num_threads=num_threads,
        progress=progress,
        parity=dev,
        parity_measure=measure,
        parity_global_merges=parity["parity_global_merges"],
        parity_window=parity["parity_window"],
        parity_window_alpha=parity["parity_window_alpha"],
        parity_tolerance=parity["parity_tolerance"],
        parity_shared=parity["parity_shared"],
        parity_rule=parity["parity_rule"],
        parity_reference=languages.reference,
        parity_gain=parity["parity_gain"],
        **options,
    )


# ---------------------------------------------------------------------------
# lz78
# ---------------------------------------------------------------------------
#: LZ78 strategies a spec may name (the core's list; checked against lz78.STRATEGIES by the tests)
LZ78_STRATEGIES = (
    "standard",
    "frequency_gated",
    "multi_round",
    "cost_adjusted",
    "smart_prune",
    "flat_prune",
    "compressed",
)
#: the strategy of a bare ``lz78`` spec and of ``tokenforge lz78 train`` (lz78.DEFAULT_STRATEGY, kept
#: equal by a test)
LZ78_DEFAULT_STRATEGY = "smart_prune"


def _lz78_words(words: list[str], raw: str) -> list[tuple[str, ...]]:
    if "all" in words:
        rest = tuple(w for w in words if w != "all")
        return [(s, *chunk, *rest) for s in LZ78_STRATEGIES for chunk in ((), ("nochunk",))]
    strategies = [w for w in words if w in LZ78_STRATEGIES]
    others = [w for w in words if w not in LZ78_STRATEGIES]
    bad = [w for w in others if w not in ("chunk", "nochunk", "compact")]
    if bad or len(strategies) > 1:
        raise TokenforgeError(
            f"{raw!r}: lz78 takes one strategy ({', '.join(LZ78_STRATEGIES)}), 'chunk' or 'nochunk', and 'compact'"
        )
    strategy = strategies[0] if strategies else LZ78_DEFAULT_STRATEGY
    chunk = ("nochunk",) if "nochunk" in others else ()
    compact = ("compact",) if "compact" in others else ()
    return [(strategy, *chunk, *compact)]


def _lz78_params() -> list[str]:
    from .lz78 import strategy_params

    return strategy_params()


def _lz78_outputs(tok: Any, train_docs: Sequence[str], num_threads: int | None) -> dict:
    """An LZ78 dictionary's output vocabulary: output ids, prefix-only entries
    (kept for the trie, no id) and output ids the training text never emits
    (what ``compact`` would make prefix-only)."""
    info = tok.inspect_extra()
    return {
        "output_ids": int(info["output_entries"]),
        "prefix_only": int(info["prefix_only_entries"]),
        "entries": int(info["entries"]),
        "never_emitted": tok.count_never_emitted(train_docs, num_threads=num_threads),
    }


def _lz78_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """LZ78 rows: output ids, prefix-only entries, and output ids the training text never emits."""
    head = ["tokenizer", "output ids", "prefix-only entries (no id)", "output ids never emitted (training text)"]
    out = []
    for r in rows:
        z = r["lz78"]
        n = max(1, z["output_ids"])
        out.append(
            [
                r["label"],
                f"{z['output_ids']:,}",
                f"{z['prefix_only']:,}",
                f"{z['never_emitted']:,} ({100 * z['never_emitted'] / n:.1f}%)",
            ]
        )
    return head, out


_LZ78_REPORT = ReportRule(
    title="LZ78 output vocabulary",
    note="Prefix-only entries stay in the trie for matching but have no id. Output ids the training text never "
    "emits cost softmax rows for nothing; the spec option `compact` (lz78:STRATEGY:compact) or "
    "`--compact_output_vocab` makes them prefix-only.",
    measure=_lz78_outputs,
    table=_lz78_table,
)


def _lz78_train(
    words: Words, options: Options, docs: Any, vocab_size: int, *, num_threads: Threads = None, progress: bool = False
) -> Tokenizer:
    from .lz78 import LZ78Tokenizer

    tok = LZ78Tokenizer.train_from_iterator(
        docs,
        vocab_size,
        strategy=words[0],
        chunking="nochunk" not in words,
        num_threads=num_threads,
        progress=progress,
        **options,
    )
    if "compact" in words:
        tok.compact_output_vocab(docs, num_threads=num_threads)
    return tok


# ---------------------------------------------------------------------------
# mixedgram
# ---------------------------------------------------------------------------
#: the family's parse rules (a copy of mixedgram.PARSES, kept equal by a test, so
#: that building the command line's parser imports neither the family nor numpy)
MIXEDGRAM_PARSES = ("greedy", "optimal")


def _mixedgram_train(
    words: Words,
    options: Options,
    docs: Any,
    vocab_size: int | None,
    *,
    num_threads: Threads = None,
    progress: bool = False,
) -> Tokenizer:
    from .mixedgram import Mixedgram

    options = dict(options)
    parse = options.pop("parse")
    tok = Mixedgram.train_from_iterator(docs, num_threads=num_threads, progress=progress, **options)
    if parse is not None:
        tok.parse = parse
    return tok


# ---------------------------------------------------------------------------
# growing
# ---------------------------------------------------------------------------
def _growing_train(
    words: Words, options: Options, docs: Any, vocab_size: int, *, num_threads: Threads = None, progress: bool = False
) -> Tokenizer:
    """Grown in ``rounds`` rounds over as many consecutive slices of ``docs``."""
    from .growing import GrowingBPETokenizer

    options = dict(options)
    rounds = options.pop("rounds")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise TokenforgeError(f"growing: rounds must be an int >= 1, not {rounds!r}")
    tok = GrowingBPETokenizer(vocab_size, pattern=options.pop("pattern"), normalization=options.pop("normalization"))
    n = len(docs)
    for r in range(rounds):
        part = docs[r * n // rounds : (r + 1) * n // rounds]
        want = (vocab_size - tok.next_merge_id) // (rounds - r)
        if want <= 0 or not part:
            continue
        tok.learn_merges(
            iter(part),
            num_merges=want,
            source=f"round{r + 1}",
            num_threads=num_threads,
            progress=bool(progress),
            **options,
        )
    return tok


# ---------------------------------------------------------------------------
# pipeline (imported tokenizer.json / SentencePiece files)
# ---------------------------------------------------------------------------
#: what ``pipeline:WORD`` trains (with sentencepiece or tokenizers; see PipelineTokenizer.train)
PIPELINE_ALGORITHMS = ("spm_unigram", "spm_bpe", "hf_wordpiece", "hf_unigram")


#: spec spellings of the field's standard algorithms: ``spm:unigram`` is
#: ``pipeline:spm_unigram`` (the alias's name, then its word, joined by ``_``)
SPEC_ALIASES = {"spm": "pipeline", "hf": "pipeline"}


def _pipeline_settings(tok: Any, train_docs: Sequence[str], num_threads: Threads) -> dict:
    """The report's record of how a standard algorithm was trained (library, version, settings)."""
    from .pipeline import ALGORITHMS, TRAIN_SETTINGS, trained_algorithm

    algorithm = trained_algorithm(tok)
    if algorithm is None:
        return {}
    library = ALGORITHMS[algorithm]
    try:
        from importlib.metadata import version

        library += " " + version(library)
    except Exception:  # a library without metadata: its name alone
        pass
    # how much of the text its ids keep, on the first MB of the training documents:
    # the bytes its tokens spell (normalize()) against the text's, and the share of
    # documents decode(encode(d)) gives back exactly
    sample, size = [], 0
    for d in train_docs:
        if size >= 1 << 20:
            break
        sample.append(d)
        size += len(d.encode("utf-8"))
    spelled = sum(len(tok.normalize(d).encode("utf-8")) for d in sample)
    exact = sum(tok.decode(ids) == d for d, ids in zip(sample, tok.encode_batch(sample, num_threads=num_threads)))
    return {
        "algorithm": algorithm,
        "library": library,
        "settings": TRAIN_SETTINGS[algorithm],
        "spelled_bytes_share": spelled / max(1, size),
        "exact_documents_share": exact / max(1, len(sample)),
    }


def _pipeline_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["tokenizer", "trained by", "bytes its tokens spell / text bytes", "documents decoded exactly", "settings"]
    return head, [
        [
            r["label"],
            r["pipeline"]["library"],
            f"{r['pipeline']['spelled_bytes_share']:.1%}",
            f"{r['pipeline']['exact_documents_share']:.1%}",
            r["pipeline"]["settings"],
        ]
        for r in rows
        if r["pipeline"]
    ]


_PIPELINE_REPORT = ReportRule(
    title="Standard algorithms: how they were trained",
    note="SentencePiece and Hugging Face tokenizers trained by their own libraries on the same training text and "
    "vocabulary size as the others, then imported (their ids are the library's own). They do not keep all of the "
    "text (normalization, dropped whitespace, unknown characters): bytes/token above counts the caller's bytes; "
    "the share of them their tokens spell and of documents decoded exactly are measured on the first MB of the "
    "training text.",
    measure=_pipeline_settings,
    table=_pipeline_table,
)


def _pipeline_words(words: list[str], raw: str) -> list[tuple[str, ...]]:
    if len(words) != 1 or words[0] not in PIPELINE_ALGORITHMS:
        names = ", ".join(a.replace("_", ":", 1) for a in PIPELINE_ALGORITHMS)
        raise TokenforgeError(f"{raw!r}: the standard algorithms are {names} (also pipeline:spm_unigram ...)")
    return [tuple(words)]


def _pipeline_train(
    words: Words, options: Options, docs: Any, vocab_size: int, *, num_threads: Threads = None, progress: bool = False
) -> Tokenizer:
    from .pipeline import PipelineTokenizer

    return PipelineTokenizer.train_from_iterator(docs, vocab_size, algorithm=words[0], num_threads=num_threads)


# ---------------------------------------------------------------------------
# the records
# ---------------------------------------------------------------------------
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "bpe",
            "tokenforge.bpe",
            "BPETokenizer",
            _hook("tokenforge.bpe", "file_formats"),
            SpecRule(
                options={
                    "pattern": "gpt4",
                    "special_tokens": "nanochat",
                    "tie_break": "pair_ids",
                    "min_frequency": 1,
                    "layout": "nanochat",
                    **_BPE_PARITY_OPTIONS,
                },
                train=_bpe_train,
                words=_bpe_words,
                takes_languages=True,
                languages_for=lambda words: "parity" in words,
                synopsis="bpe",
            ),
            cli=None,  # `tokenforge train` (cli/main.py) is BPE's
            embedding_modes=("structured", "tuple"),
            detail=_hook("tokenforge.bpe", "token_detail"),
            sniff_rank=40,  # last: Hugging Face's and tiktoken's sniffers are the least specific
        ),
        Family(
            "lz78",
            "tokenforge.lz78",
            "LZ78Tokenizer",
            _hook("tokenforge.lz78", "file_formats"),
            SpecRule(
                options={"special_tokens": None},
                train=_lz78_train,
                words=_lz78_words,
                more_options=_lz78_params,
                synopsis="lz78:<strategy>[:nochunk], lz78:all",
                demo=("lz78:frequency_gated", "lz78:frequency_gated:nochunk"),
            ),
            cli="tokenforge.cli.lz78",
            embedding_modes=("structured", "hierarchical", "tuple"),
            detail=_hook("tokenforge.lz78", "token_detail"),
            chunking_twin=_hook("tokenforge.lz78", "chunking_twin"),
            sniff_rank=30,
            report=_LZ78_REPORT,
        ),
        Family(
            "mixedgram",
            "tokenforge.mixedgram",
            "Mixedgram",
            _hook("tokenforge.mixedgram", "file_formats"),
            SpecRule(
                options={"special_tokens": ["<|bos|>"], "errors": "replace", "parse": None},
                train=_mixedgram_train,
                fixed_vocab=True,
            ),
            cli="tokenforge.cli.mixedgram",
            detail=_hook("tokenforge.mixedgram", "token_detail"),
            text_encoding="latin-1",
            sniff_rank=20,
        ),
        Family(
            "growing",
            "tokenforge.growing",
            "GrowingBPETokenizer",
            _hook("tokenforge.growing", "file_formats"),
            SpecRule(
                options={"rounds": 1, "pattern": "cl100k", "normalization": "NFC", "min_frequency": 2},
                train=_growing_train,
                synopsis="growing[:rounds=N]",
            ),
            cli="tokenforge.cli.grow",
            embedding_modes=("structured", "tuple"),
            detail=_hook("tokenforge.growing", "token_detail"),
            sniff_rank=10,  # first: its tokenizer.json may hold a key "model", which Hugging Face's sniffer looks for
            exports=("NeuroTokenizer",),
        ),
        Family(
            "pipeline",
            "tokenforge.pipeline",
            "PipelineTokenizer",
            _hook("tokenforge.pipeline", "file_formats"),
            SpecRule(
                {},
                _pipeline_train,
                words=_pipeline_words,
                synopsis="spm:unigram, spm:bpe, hf:wordpiece, hf:unigram (or pipeline:spm_unigram ...)",
                demo=(),  # none: its trainers are optional packages (sentencepiece, tokenizers)
            ),
            detail=_hook("tokenforge.pipeline", "token_detail"),
            report=_PIPELINE_REPORT,
            # before bpe: its tokenizer.json sniffer says yes only to files BPE's byte-level reader refuses
            sniff_rank=35,
        ),
    )
}

#: the built-in families, in their records' order; they cannot be unregistered
BUILT_IN: tuple[str, ...] = tuple(FAMILIES)

#: the order :func:`load` tries the built-in families' sniffers in, from their
#: records' ``sniff_rank``: the most specific first (the growing vocabulary's
#: tokenizer.json has "next_merge_id" and may also hold a key named "model",
#: which Hugging Face's sniffer looks for; mixedgram's and LZ78's sniffers look
#: for their own markers)
LOAD_ORDER: tuple[str, ...] = tuple(sorted(BUILT_IN, key=lambda n: FAMILIES[n].sniff_rank))


#: what ``compare`` compares when no ``--families`` is given
DEFAULT_SPEC = "bpe"


#: what ``tokenforge demo`` compares and the playground trains without files: each
#: built-in family's ``SpecRule.demo`` specs, in the records' order
def _demo_specs(name: str) -> tuple[str, ...]:
    demo = FAMILIES[name].spec.demo
    return demo if demo is not None else (name,)


DEMO_SPECS = ",".join(s for n in BUILT_IN for s in _demo_specs(n))

#: the seed's claim about bits per byte, lowest first: BPE, then LZ78's
#: frequency_gated strategy with chunking, then without (the report's verdict)
SEED_ORDERING = ("bpe", "lz78:frequency_gated", "lz78:frequency_gated:nochunk")


#: a family name: what a spec (``name:word:key=value``, comma-separated, lower-cased) can hold
_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")


def register(fam: Family) -> Family:
    """Add a family record at run time (a family defined outside the package).

    From then on :func:`load` tries its sniffers (after the built-in families'),
    ``compare`` accepts its spec, shards and fingerprints name it, and a
    command-line parser built afterwards has its subcommand. The name must be
    new and fit in a spec (a lower-case letter, then letters, digits, ``_`` or
    ``-``). Returns ``fam``; :func:`unregister` undoes it."""
    if not isinstance(fam, Family):
        raise TypeError(f"register expects a tokenforge.registry.Family, not {type(fam).__name__}")
    if not isinstance(fam.name, str) or not _NAME.match(fam.name):
        raise TokenforgeError(
            f"family name {fam.name!r} cannot be written in a spec: use a lower-case letter, then letters, digits, "
            "'_' or '-'"
        )
    if fam.name in FAMILIES:
        raise TokenforgeError(f"a family named {fam.name!r} is already registered")
    if not isinstance(fam.spec, SpecRule):
        raise TypeError(f"family {fam.name!r}: spec must be a SpecRule, not {type(fam.spec).__name__}")
    if fam.cli is not None and not isinstance(fam.cli, str):
        raise TypeError(
            f"family {fam.name!r}: cli must be the name of a module with add_parser(subparsers), "
            f"not {type(fam.cli).__name__}"
        )
    FAMILIES[fam.name] = fam
    return fam


def unregister(name: str) -> Family:
    """Remove a record :func:`register` added and return it; the built-in
    families (:data:`BUILT_IN`) cannot be removed."""
    if name in BUILT_IN:
        raise TokenforgeError(f"{name!r} is a built-in family and cannot be unregistered")
    if name not in FAMILIES:
        raise TokenforgeError(f"no registered family named {name!r}")
    return FAMILIES.pop(name)


@contextlib.contextmanager
def registered(fam: Family) -> Iterator[Family]:
    """``with registered(fam):`` the family is registered inside the block
    only (it is removed however the block ends)."""
    register(fam)
    try:
        yield fam
    finally:
        unregister(fam.name)


def family(name: str) -> Family:
    """The record of a family by name (a TokenforgeError naming the known ones otherwise)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise TokenforgeError(f"unknown tokenizer family {name!r}; known: {', '.join(FAMILIES)}") from None


def family_of(tok: Any) -> Family | None:
    """The record of a tokenizer's family (by its ``family`` name), or None for a
    tokenizer outside the registry (a test's stub, a user's own class)."""
    return FAMILIES.get(tok.family)


def sniff_order() -> list[str]:
    """The families in the order :func:`load` tries their sniffers: the built-in
    ones by rank (:data:`LOAD_ORDER`), then those registered at run time, by
    rank and then in the order they were registered (so they can never shadow
    a built-in family's files)."""
    added = sorted((n for n in FAMILIES if n not in BUILT_IN), key=lambda n: FAMILIES[n].sniff_rank)
    return list(LOAD_ORDER) + added


def formats() -> list[Format]:
    """Every reader :func:`load` tries, in order."""
    return [fmt for name in sniff_order() for fmt in FAMILIES[name].formats()]


def identify(path: str | os.PathLike[str]) -> Format:
    """The reader :func:`load` uses for ``path`` (its ``name`` says which form
    the file or directory is: ``tokenforge inspect`` prints it)."""
    return identify_kind(path, formats())


def load(path: str | os.PathLike[str]) -> Tokenizer:
    """Load any tokenizer file or directory tokenforge writes (or imports), or a
    pretrained encoding by name ("cl100k_base", "o200k_base") from the package
    that ships it (:mod:`tokenforge.formats.named`)."""
    if isinstance(path, str) and not Path(path).exists():
        from .formats.named import is_named

        if is_named(path):
            from .bpe import BPETokenizer
            from .formats.named import named_data

            return BPETokenizer(named_data(path))
    return identify(path).read(Path(path))
