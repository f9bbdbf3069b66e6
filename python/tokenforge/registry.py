"""The family seam: one :class:`Family` record per tokenizer family, and :func:`load`.

Everything that must know "which families exist and what each can do" reads
:data:`FAMILIES` and nothing else: :func:`load` (each family's file sniffers,
in order), the ``tokenforge`` command (each family's subcommand hook),
``compare``'s spec parser and trainer (:mod:`tokenforge.eval.families`: the
spec words, the known ``key=value`` options with their defaults, how to train
from a spec), shards and fingerprints (the family of a tokenizer). What a
*tokenizer* can do beyond the contract (embedding metadata, fingerprint files,
inspect extras, a JSON-lines block encoder, the rows a model needs) are hooks
declared with defaults on :class:`tokenforge.base.Tokenizer`; no caller probes
with ``hasattr``.

The records name the families explicitly; nothing registers itself when a
module is imported. A record's callables import their family lazily, so
importing this module costs nothing and never imports a family, ``eval``,
``torch`` or the CLI.

Adding a family: write its module (a :class:`~tokenforge.base.Tokenizer`
subclass with ``train(corpus)`` and ``train_from_iterator(texts)``, see
:mod:`tokenforge.data.corpus`), then add one :class:`Family` to
:data:`FAMILIES` (and its sniffers' place in :data:`LOAD_ORDER`). A family
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
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .errors import FormatError, TokenforgeError

__all__ = [
    "Family",
    "Format",
    "SpecRule",
    "FAMILIES",
    "LOAD_ORDER",
    "family",
    "family_of",
    "load",
    "formats",
    "register",
    "unregister",
    "registered",
]


@dataclasses.dataclass(frozen=True)
class Format:
    """One file kind a family reads: ``sniff(path, head)`` gets the path and its
    first 4 KiB (b"" for a directory) and says whether ``read(path)`` can read it."""

    name: str
    sniff: Callable[[Path, bytes], bool]
    read: Callable[[Path], Any]


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
    keys its cache by them (every spec of the family when None).
    """

    options: Mapping[str, Any]
    train: Callable[..., Any]
    words: Callable[[list[str], str], list[tuple[str, ...]]] | None = None
    more_options: Callable[[], Sequence[str]] | None = None
    fixed_vocab: bool = False
    takes_languages: bool = False
    languages_for: Callable[[tuple[str, ...]], bool] | None = None

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
class Family:
    """One tokenizer family: what every part of tokenforge needs to know about it.

    ``name``: the short name in files, specs and reports (``Tokenizer.family``).
    ``module``/``class_name``: where its class lives (imported on first use).
    ``formats``: its readers, most specific first (a lazy list). ``spec``: how
    ``compare`` trains it. ``cli``: adds its ``tokenforge`` subcommand(s) to an
    argparse subparsers object (None: the core commands serve it).
    ``embedding_modes``: the tree embedding modes its tokenizers' hook
    :meth:`~tokenforge.base.Tokenizer.embedding_metadata` answers (the hook
    itself is on the class; this is what reports and docs state).
    """

    name: str
    module: str
    class_name: str
    formats: Callable[[], Sequence[Format]]
    spec: SpecRule
    cli: Callable[[Any], None] | None = None
    embedding_modes: tuple[str, ...] = ()

    @property
    def cls(self):
        """The family's class (imports its module)."""
        return getattr(importlib.import_module(self.module), self.class_name)


# ---------------------------------------------------------------------------
# bpe
# ---------------------------------------------------------------------------
def _bpe_formats() -> list[Format]:
    from . import bpe
    from .formats.hf_json import read_hf_json, sniff_hf_json
    from .formats.seed003 import sniff_seed003
    from .formats.tfjson import read_tfjson, sniff_tfjson
    from .formats.tiktoken_io import read_tiktoken_file, sniff_tiktoken

    cls = bpe.BPETokenizer
    return [
        Format("tokenforge-bpe", sniff_tfjson, lambda p: cls(read_tfjson(p))),
        Format("tokenforge-bpe-dir", bpe._sniff_dir, cls.from_directory),
        Format("huggingface-tokenizer.json", sniff_hf_json, lambda p: cls(read_hf_json(p))),
        Format("tiktoken", sniff_tiktoken, lambda p: cls(read_tiktoken_file(p))),
        Format("seed003-pickles", sniff_seed003, lambda p: cls(bpe._read_seed003_files(p))),
    ]


#: bpe's options that only ``bpe:parity`` takes, with their defaults
_BPE_PARITY_OPTIONS = {
    "parity_global_merges": 0,
    "parity_measure": "parallel",
    "parity_window": 0,
    "parity_window_alpha": 2.0,
    "parity_tolerance": 0.0,
    "parity_shared": 0.0,
}


def _bpe_words(words: list[str], raw: str) -> list[tuple[str, ...]]:
    """``bpe`` takes one bare word, ``parity`` (parity-aware training)."""
    for w in words:
        if w != "parity":
            raise TokenforgeError(f"{raw!r}: bpe takes the word 'parity' and key=value options, not {w!r}")
    return [("parity",) if words else ()]


def _bpe_train(words, options, docs, vocab_size, *, num_threads=None, progress=False, languages=None):
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
        **options,
    )


# ---------------------------------------------------------------------------
# lz78
# ---------------------------------------------------------------------------
def _lz78_formats() -> list[Format]:
    from . import lz78
    from .formats.lz78_tsv import sniff_lz78_tsv

    cls = lz78.LZ78Tokenizer
    return [
        Format("tokenforge-lz78-tsv", sniff_lz78_tsv, lambda p: cls.from_tsv(p, tsv_format=None)),
        Format("tokenforge-lz78-dir", lz78._sniff_dir, cls.from_directory),
    ]


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
#: the strategy of a bare ``lz78`` spec
LZ78_DEFAULT_STRATEGY = "frequency_gated"


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
    from .lz78 import _ACCEPTS

    return sorted(set().union(*_ACCEPTS.values()))


def _lz78_train(words, options, docs, vocab_size, *, num_threads=None, progress=False):
    from .lz78 import LZ78Tokenizer

    tok = LZ78Tokenizer.train_from_iterator(
        docs, words[0], vocab_size, "nochunk" not in words, num_threads=num_threads, progress=progress, **options
    )
    if "compact" in words:
        tok.compact_output_vocab(docs, num_threads=num_threads)
    return tok


def _lz78_cli(subparsers) -> None:
    from .cli.lz78 import add_parser

    add_parser(subparsers)


# ---------------------------------------------------------------------------
# mixedgram
# ---------------------------------------------------------------------------
def _mixedgram_formats() -> list[Format]:
    from . import mixedgram
    from .formats import mxgram

    cls = mixedgram.Mixedgram
    return [
        Format("tokenforge-mixedgram", mxgram.sniff_vocab_json, cls.load),
        Format("tokenforge-mixedgram-dir", mixedgram._sniff_dir, cls.load),
        Format("mxgram", mxgram.sniff_mxgram, cls.load),
    ]


def _mixedgram_train(words, options, docs, vocab_size, *, num_threads=None, progress=False):
    from .mixedgram import Mixedgram

    options = dict(options)
    parse = options.pop("parse")
    tok = Mixedgram.train_from_iterator(docs, num_threads=num_threads, progress=progress, **options)
    if parse is not None:
        tok.parse = parse
    return tok


def _mixedgram_cli(subparsers) -> None:
    from .cli.mixedgram import add_parser

    add_parser(subparsers)


# ---------------------------------------------------------------------------
# growing
# ---------------------------------------------------------------------------
def _growing_formats() -> list[Format]:
    from . import growing
    from .formats.growing_json import sniff_growing_json

    cls = growing.GrowingBPETokenizer
    return [
        Format("growing-tokenizer.json", sniff_growing_json, cls.load),
        Format("growing-tokenizer-dir", growing._sniff_dir, cls.load),
    ]


def _growing_train(words, options, docs, vocab_size, *, num_threads=None, progress=False):
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


def _grow_cli(subparsers) -> None:
    from .cli.grow import add_parser

    add_parser(subparsers)


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
            _bpe_formats,
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
            ),
            cli=None,  # `tokenforge train` (cli/main.py) is BPE's
            embedding_modes=("structured", "tuple"),
        ),
        Family(
            "lz78",
            "tokenforge.lz78",
            "LZ78Tokenizer",
            _lz78_formats,
            SpecRule(options={"special_tokens": None}, train=_lz78_train, words=_lz78_words, more_options=_lz78_params),
            cli=_lz78_cli,
            embedding_modes=("structured", "hierarchical", "tuple"),
        ),
        Family(
            "mixedgram",
            "tokenforge.mixedgram",
            "Mixedgram",
            _mixedgram_formats,
            SpecRule(
                options={"special_tokens": ["<|bos|>"], "errors": "replace", "parse": None},
                train=_mixedgram_train,
                fixed_vocab=True,
            ),
            cli=_mixedgram_cli,
        ),
        Family(
            "growing",
            "tokenforge.growing",
            "GrowingBPETokenizer",
            _growing_formats,
            SpecRule(
                options={"rounds": 1, "pattern": "cl100k", "normalization": "NFC", "min_frequency": 2},
                train=_growing_train,
            ),
            cli=_grow_cli,
            embedding_modes=("structured", "tuple"),
        ),
    )
}

#: the order :func:`load` tries the families' sniffers in: the most specific
#: first (the growing vocabulary's tokenizer.json has "next_merge_id" and may
#: also hold a key named "model", which Hugging Face's sniffer looks for;
#: mixedgram's and LZ78's sniffers look for their own markers)
LOAD_ORDER = ("growing", "mixedgram", "lz78", "bpe")


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
    FAMILIES[fam.name] = fam
    return fam


def unregister(name: str) -> Family:
    """Remove a record :func:`register` added and return it; the built-in
    families (:data:`LOAD_ORDER`) cannot be removed."""
    if name in LOAD_ORDER:
        raise TokenforgeError(f"{name!r} is a built-in family and cannot be unregistered")
    if name not in FAMILIES:
        raise TokenforgeError(f"no registered family named {name!r}")
    return FAMILIES.pop(name)


@contextlib.contextmanager
def registered(fam: Family):
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


def family_of(tok) -> Family | None:
    """The record of a tokenizer's family (by its ``family`` name), or None for a
    tokenizer outside the registry (a test's stub, a user's own class)."""
    return FAMILIES.get(tok.family)


def formats() -> list[Format]:
    """Every reader :func:`load` tries, in order."""
    order = list(LOAD_ORDER) + [n for n in FAMILIES if n not in LOAD_ORDER]
    return [fmt for name in order if name in FAMILIES for fmt in FAMILIES[name].formats()]


def load(path):
    """Load any tokenizer file or directory tokenforge writes (or imports)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    head = b""
    if p.is_file():
        with open(p, "rb") as f:
            head = f.read(4096)
    known = formats()
    for fmt in known:
        try:
            ok = fmt.sniff(p, head)
        except OSError:
            ok = False
        if ok:
            return fmt.read(p)
    kinds = ", ".join(f.name for f in known)
    raise FormatError(f"not a tokenizer file tokenforge recognises (known kinds: {kinds})", path=p)
