"""The LZ78 family: dictionaries built by Lempel-Ziv 78 parsing, used by greedy longest match.

Id layout (the seed's): 0 reserved (root / padding, never emitted); 1..N the
output entries; ``N + 1 + b`` the byte-fallback id of byte ``b``; ``N + 257``
``<|bos|>``, ``N + 258`` ``<|eos|>``, ``N + 259`` ``<|pad|>``; then any extra
special tokens (e.g. nanochat's chat tokens) in the order given.

Encoding is greedy longest match over the output entries, on UTF-8 bytes; a
byte that starts no match becomes its fallback id (even inside a multi-byte
character), so every input round-trips; a lone surrogate (Python allows them
in a str) becomes the fallback ids of its three "surrogatepass" bytes and
decodes back (see :mod:`tokenforge.base`). With chunking (the default) the text
is first split by the GPT-4 pattern and each chunk is matched on its own;
chunking must be the same at training and at encoding (see
docs/algorithms.md for what a mismatch costs).

Seven training strategies (rules and tuned defaults in docs/algorithms.md):
``standard``, ``frequency_gated``, ``multi_round``, ``cost_adjusted``,
``smart_prune``, ``flat_prune``, ``compressed``.

Training on a Dask cluster (``train(..., client=)``) counts the unique
chunks on the workers and builds the online pool in one task that reads the
partitions in order; the pruning runs on the client, and for the pool
strategies each round's dictionary-usage counts are computed by the workers
over the chunks they keep (only the summed counts come back; flat_prune
gathers the chunks, its candidates are made from them). The file is the one
single-machine training writes.

Not handled: Unicode normalisation; online (adaptive) LZ78 coding of text
— the dictionary is static once trained; training from an iterator on a
cluster (the workers read corpus files); spreading the online pool itself
over workers (it must see the corpus in order, so it is one task).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from . import _core
from .base import Tokenizer
from .batching import batched, feed_in_batches
from .chat import special_token_list
from .data.corpus import Texts, corpus_documents
from .data.partition import Partition, auto_target_bytes, partition_documents, plan_partitions
from .errors import PatternError, TokenforgeError, VocabSizeError, warn_user
from .formats.kinds import Format, dir_holding
from .formats.lz78_tsv import (
    LZ78Data,
    drop_unwritable,
    lz78_tsv_from_bytes,
    lz78_tsv_text,
    read_lz78_tsv,
    write_lz78_tsv,
)
from .formats.patterns import NAMED_PATTERNS
from .formats.suffixes import check_save_suffix
from .ids import check_texts
from .progress import progress_bar
from .rust_backed import CoreEncoded, batch_flat

if TYPE_CHECKING:
    from .cluster import Runner

__all__ = ["LZ78Tokenizer", "STRATEGIES", "SEED_SPECIALS", "DEFAULT_PARAMS", "lz78_inspect"]

STRATEGIES = ("standard", "frequency_gated", "multi_round", "cost_adjusted", "smart_prune", "flat_prune", "compressed")
#: the strategy when none is named, in Python, on the command line and in a bare
#: ``lz78`` spec: at BPE parity like for like, keeps a tree (docs/algorithms.md)
DEFAULT_STRATEGY = "smart_prune"
#: the dictionary size when none is named
DEFAULT_VOCAB_SIZE = 32768
#: the seed's three special tokens, at N+257, N+258, N+259
SEED_SPECIALS = ("<|bos|>", "<|eos|>", "<|pad|>")
#: tuned defaults per strategy (measurements in docs/algorithms.md)
DEFAULT_PARAMS: dict[str, dict] = {
    "standard": {},
    "frequency_gated": {"evict_interval": 0, "evict_fraction": 0.1, "evict_threshold": 0, "decay": 1.0},
    "multi_round": {"pool": "frequency_gated", "pool_factor": 4.0, "rounds": 3},
    "cost_adjusted": {"pool": "frequency_gated", "pool_factor": 4.0, "rounds": 3},
    "smart_prune": {"pool": "frequency_gated", "pool_factor": 8.0, "rounds": 6},
    "flat_prune": {"pool_factor": 8.0, "max_chars": 16, "drop_fraction": 0.1},
    "compressed": {"pool": "frequency_gated", "pool_factor": 2.0, "rounds": 3},
}
#: parameters each strategy accepts
_ACCEPTS = {
    "standard": set(),
    "frequency_gated": {"evict_interval", "evict_fraction", "evict_threshold", "decay"},
    "multi_round": {"pool", "pool_factor", "rounds", "evict_interval", "evict_fraction", "evict_threshold", "decay"},
    "flat_prune": {"pool_factor", "max_chars", "drop_fraction", "max_substrings"},
}
_ACCEPTS["cost_adjusted"] = _ACCEPTS["multi_round"]
_ACCEPTS["smart_prune"] = _ACCEPTS["multi_round"]
_ACCEPTS["compressed"] = _ACCEPTS["multi_round"] | {"multiple"}

_BATCH_CHARS = 16 << 20
_DIR_FILE = "lz78.tsv"


def _extra_specials(special_tokens: object) -> list[str]:
    # the seed's three are always there
    return [s for s in special_token_list(special_tokens) if s not in SEED_SPECIALS]


def _pattern_of(name: str | None) -> str | None:
    """The chunking regex a dictionary's ``pattern`` setting names (none: GPT-4's)."""
    if name is None:
        return _core.GPT4_PATTERN
    if name not in NAMED_PATTERNS:  # the TSV reader refuses these; this is LZ78Data built in memory
        raise PatternError(f"unknown split pattern name {name!r}; expected one of {', '.join(NAMED_PATTERNS)}")
    return NAMED_PATTERNS[name]


class LZ78Tokenizer(CoreEncoded, Tokenizer):
    """A tokenizer over an LZ78-family dictionary.

    Build one with :meth:`train`, :meth:`from_tsv`, :meth:`from_directory` or
    :func:`tokenforge.load`. ``tokenize_smart`` and ``tokenize_flat`` (the
    seed's names for the smart_prune and flat_prune encoders) are the same
    greedy longest match over output entries as :meth:`encode`.
    """

    _model: _core.Lz78Model

    family = "lz78"

    def __init__(self, data: LZ78Data, *, chunking: bool | None = None, special_tokens: object = None) -> None:
        if not isinstance(data, LZ78Data):
            raise TypeError(
                "LZ78Tokenizer(data) takes an LZ78Data; use LZ78Tokenizer.train, from_tsv or from_directory"
            )
        if data.structure not in ("tree", "flat", "compressed"):
            raise TokenforgeError(f"unknown dictionary structure {data.structure!r}; expected tree, flat or compressed")
        extras = _extra_specials(special_tokens if special_tokens is not None else data.settings.get("specials"))
        self._data = _outputs_first(data)
        self._extras = extras
        if chunking is None:
            chunking = data.settings.get("chunking", True)
        self._chunking = bool(chunking)
        self._build()

    def _build(self) -> None:
        outputs = self._data.output_patterns()
        n = len(outputs)
        names = list(SEED_SPECIALS) + self._extras
        self._specials = {s: n + 257 + i for i, s in enumerate(names)}
        self._n = n
        pattern = _pattern_of(self._data.settings.get("pattern")) if self._chunking else None
        self._model = _core.Lz78Model(outputs, list(self._specials.items()), pattern)

    # ---- construction ------------------------------------------------------
    @classmethod
    def from_tsv(
        cls,
        tsv_path: str | os.PathLike[str],
        tsv_format: str | None = "lz78",
        *,
        chunking: bool | None = None,
        special_tokens: object = None,
        strict: bool = True,
    ) -> "LZ78Tokenizer":
        """Load a dictionary TSV (the seed's ``from_tsv``).

        ``tsv_format``: "lz78" (``code, parent_code, char, pattern``) or
        "compressed" (``node_idx, edge_label, parent_idx, output_code,
        pattern``). ``chunking``: None takes the file's setting (our files) or
        True (seed files). ``special_tokens``: extra specials after
        ``<|pad|>`` ("nanochat" adds the chat tokens). ``strict=False`` reads
        a seed file with the seed loader's leniency (see
        :func:`tokenforge.formats.lz78_tsv.read_lz78_tsv`).
        """
        data = read_lz78_tsv(tsv_path, tsv_format, strict=strict)
        return cls(data, chunking=chunking, special_tokens=special_tokens)

    @classmethod
    def train(
        cls,
        corpus: object,
        vocab_size: int = DEFAULT_VOCAB_SIZE,
        *,
        strategy: str = DEFAULT_STRATEGY,
        chunking: bool = True,
        special_tokens: object = None,
        num_threads: int | None = None,
        progress: bool | None = None,
        text_field: str = "text",
        split_on: str | None = None,
        errors: str = "strict",
        client: Any = None,
        **strategy_params: Any,
    ) -> "LZ78Tokenizer":
        """Train a dictionary so that the tokenizer has ``vocab_size`` ids in all
        (the shape of every family's ``train``: the corpus and the size, the
        rest by keyword; ``strategy`` is one of :data:`STRATEGIES`, default
        :data:`DEFAULT_STRATEGY`).

        N = vocab_size − 260 − len(extra specials) output entries (fewer if the
        corpus runs out). ``corpus``: a path or a list of paths (``str`` or
        ``pathlib.Path``, streamed in order); texts go to :meth:`train_from_iterator`. ``chunking``: phrases never cross a GPT-4
        pattern chunk; the same setting is then used for encoding. Without
        chunking each document is one chunk (a ``.txt`` file yields blocks of
        about 1 MB, unless ``split_on`` names a document separator), and the
        pruning strategies keep every distinct document in memory.
        ``strategy_params`` override :data:`DEFAULT_PARAMS` (``multiple`` is
        compressed's name for ``pool_factor``). Output does not depend on
        ``num_threads``. ``errors``: how corpus files' bad UTF-8 and lone
        surrogate escapes are read (see :func:`~tokenforge.data.corpus.iter_documents`).

        ``client``: train on a Dask cluster — a ``distributed.Client``, a
        scheduler address (``"tcp://host:8786"``) or a runner of
        :func:`tokenforge.cluster.runner` (``runner(None)`` runs the same
        tasks in this process). The workers count the unique chunks of the
        corpus's partitions; the online pool (every strategy but flat_prune)
        is one task reading the partitions in order; the pruning runs here.
        The pool strategies keep the chunk counts on the workers, which count
        each pruning round's dictionary usage (only the sums travel here);
        flat_prune brings the merged chunk counts here (its candidates are
        made from the chunks). The result and its saved file are
        byte-identical to training without a client. It needs corpus files
        (not :meth:`train_from_iterator`) that the workers can read.
        """
        if isinstance(vocab_size, str) and vocab_size in STRATEGIES:
            raise TypeError(
                f"LZ78Tokenizer.train(corpus, vocab_size, strategy=...): the strategy is a keyword now, as in "
                f"every family's train; pass strategy={vocab_size!r}"
            )
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
        if strategy not in STRATEGIES:
            raise TokenforgeError(f"unknown LZ78 strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
        extras = _extra_specials(special_tokens)
        n = int(vocab_size) - 260 - len(extras)
        if n < 1:
            raise VocabSizeError(
                f"vocab_size {vocab_size} is too small: id 0, 256 byte-fallback ids and {3 + len(extras)} special tokens need {261 + len(extras)} at least"
            )
        unknown = set(strategy_params) - _ACCEPTS[strategy]
        if unknown:
            raise TokenforgeError(
                f"strategy {strategy} does not take {', '.join(sorted(unknown))}; it takes {', '.join(sorted(_ACCEPTS[strategy])) or 'no parameters'}"
            )
        params = dict(DEFAULT_PARAMS[strategy])
        params.update(strategy_params)
        if "multiple" in params:
            params["pool_factor"] = params.pop("multiple")
        try:
            trainer = _core.Lz78Trainer(strategy, n, _core.GPT4_PATTERN if chunking else None, params)
        except ValueError as e:  # a parameter of the wrong type or range, as the core reports it
            if isinstance(e, TokenforgeError):
                raise
            raise TokenforgeError(f"strategy {strategy}: {e}") from None
        if client is not None:
            del trainer  # it only checked the parameters
            if isinstance(corpus, Texts):
                raise TokenforgeError(
                    "LZ78Tokenizer.train_from_iterator cannot use a cluster (client=): the workers read corpus "
                    "files; pass paths to LZ78Tokenizer.train"
                )
            entries, flat, stats = _train_on_cluster(
                client,
                corpus,
                strategy,
                n,
                _core.GPT4_PATTERN if chunking else None,
                params,
                {"text_field": text_field, "split_on": split_on, "errors": errors},
                num_threads,
                progress,
            )
        else:
            docs = corpus_documents(
                corpus, who="LZ78Tokenizer.train", text_field=text_field, split_on=split_on, errors=errors
            )
            # standard stops once full (usually within the first MB): small batches let it stop reading early
            limit = (1 << 20) if strategy == "standard" else _BATCH_CHARS
            with progress_bar(total=None, desc=f"lz78 {strategy}", unit="B", enabled=progress is not False) as bar:
                feed_in_batches(trainer.feed, docs, num_threads, limit, bar, wants_more=lambda: trainer.wants_more)
            entries, flat, stats = trainer.finish(num_threads)
        if not entries:
            raise TokenforgeError("the corpus is empty: no dictionary entry could be built")
        settings = {
            "strategy": strategy,
            "chunking": bool(chunking),
            "pattern": "gpt4",
            "vocab_size_requested": int(vocab_size),
            "params": params,
            "specials": extras,
            "training": {k: int(v) for k, v in stats.items()},
            "trainer": f"tokenforge {_core.__version__}",
        }
        got = sum(1 for e in entries if e[3])
        if got < n:
            warn_user(
                f"the corpus gave only {got} of the {n} dictionary entries asked for; the tokenizer has "
                f"{got + 260 + len(extras)} ids instead of {vocab_size}",
            )
        if strategy == "compressed":
            data = _to_compressed(entries, settings)
        else:
            nodes = [(p, c, pat, out) for p, c, pat, out in entries]
            data = LZ78Data(structure="flat" if flat else "tree", nodes=nodes, settings=settings)
        return cls(data)

    @classmethod
    def train_from_iterator(
        cls, iterator: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE, **kwargs: Any
    ) -> "LZ78Tokenizer":
        """Train from an iterable of str (texts, never paths), streamed in order;
        the other arguments are :meth:`train`'s (keywords)."""
        return cls.train(Texts(iterator), vocab_size, **kwargs)

    # ---- the contract ------------------------------------------------------
    @property
    def num_codes(self) -> int:
        """N: the output entries (ids 1..N)."""
        return self._n

    @property
    def structure(self) -> str:
        """ "tree", "flat" (flat_prune) or "compressed" (a Patricia trie)."""
        return self._data.structure

    @property
    def strategy(self) -> str | None:
        return self._data.settings.get("strategy")

    @property
    def chunking(self) -> bool:
        return self._chunking

    @property
    def data(self) -> LZ78Data:
        return self._data

    def byte_fallback_id(self, b: int) -> int:
        """The id of byte ``b`` (N + 1 + b)."""
        if not 0 <= int(b) < 256:
            raise TokenforgeError(f"a byte is 0..255, not {b}")
        return self._n + 1 + int(b)

    byte_id = byte_fallback_id  # the hook lone surrogates are encoded with (tokenforge.base)

    def tokenize_smart(self, text: str) -> list[int]:
        """Greedy longest match over output entries only (the smart_prune encoder; same as encode_ordinary)."""
        return self.encode_ordinary(text)

    def tokenize_flat(self, text: str) -> list[int]:
        """Greedy longest match over the dictionary's strings (the flat_prune encoder; same as encode_ordinary)."""
        return self.encode_ordinary(text)

    # ---- chunking and output vocabulary -------------------------------------
    def set_chunking(self, chunking: bool) -> None:
        """Encode with (True) or without (False) GPT-4-pattern chunking.

        Warns when it differs from how the dictionary was trained: a
        dictionary trained without chunking loses 22-38% in bytes per token
        when encoded with it (docs/algorithms.md).
        """
        chunking = bool(chunking)
        trained = self._data.settings.get("chunking")
        if trained is not None and trained != chunking:
            warn_user(
                f"this dictionary was trained with chunking={trained}; encoding with chunking={chunking} "
                "gives longer token sequences",
            )
        self._chunking = chunking
        pattern = _pattern_of(self._data.settings.get("pattern")) if chunking else None
        self._model = self._model.with_pattern(pattern)

    def _emitted(self, text: str | Iterable[str], num_threads: int | None = None) -> np.ndarray:
        """bool per output id 1..N (index id-1): does encoding ``text`` emit it?

        ``text``: a str or an iterable of str, encoded in batches of about
        16M characters (memory bounded by a batch, not by the corpus).
        """
        if isinstance(text, (bytes, bytearray)):
            raise TypeError("text must be a str or an iterable of str, not bytes")
        texts = [text] if isinstance(text, str) else text
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        for batch in batched(texts, _BATCH_CHARS):
            check_texts(batch)
            flat, _ = batch_flat(self._model, batch, num_threads, self.byte_id)
            counts[:] += np.bincount(np.asarray(flat, dtype=np.int64), minlength=self.vocab_size)[: self.vocab_size]
        return counts[1 : self._n + 1] > 0

    def count_never_emitted(self, text: str | Iterable[str], num_threads: int | None = None) -> int:
        """How many of the N output ids encoding ``text`` never emits (what
        :meth:`compact_output_vocab` would make prefix-only); nothing changes."""
        return int((~self._emitted(text, num_threads)).sum())

    def compact_output_vocab(self, text: str | Iterable[str], num_threads: int | None = None) -> int:
        """Mark the output entries that encoding ``text`` never emits as
        prefix-only (kept for structure, given no id) and renumber the
        remaining outputs 1..N'. ``text`` is a str or an iterable of str
        (streamed in batches). Returns how many were marked. Ids change:
        re-encode afterwards.
        """
        used = self._emitted(text, num_threads)
        unused = int((~used).sum())
        if unused == 0:
            return 0
        if unused == self._n:
            raise TokenforgeError("the text uses no dictionary entry at all; compacting would leave none")
        d = self._data
        if d.structure == "compressed":
            nodes = [(p, lab, (o if o > 0 and used[o - 1] else -1), pat) for p, lab, o, pat in d.nodes]
            new = {o: k + 1 for k, o in enumerate(sorted(n[2] for n in nodes if n[2] > 0))}
            nodes = [(p, lab, new[o] if o > 0 else -1, pat) for p, lab, o, pat in nodes]
            self._data = LZ78Data("compressed", nodes, dict(d.settings))
        elif d.structure == "flat":
            nodes = [n for k, n in enumerate(d.nodes) if used[k]]
            self._data = LZ78Data("flat", nodes, dict(d.settings))
        else:
            # outputs occupy codes 1..N in order; output k is node k
            flags = [bool(n[3] and used[k]) if k < self._n else False for k, n in enumerate(d.nodes)]
            order = [k for k in range(len(d.nodes)) if flags[k]] + [k for k in range(len(d.nodes)) if not flags[k]]
            code = {k: i + 1 for i, k in enumerate(order)}
            nodes = []
            for k in order:
                p, c, pat, _ = d.nodes[k]
                nodes.append((code[p - 1] if p else 0, c, pat, flags[k]))
            self._data = LZ78Data("tree", nodes, dict(d.settings))
        self._build()
        return unused

    # ---- structure ------------------------------------------------------------
    def to_compressed(self) -> "LZ78Tokenizer":
        """The same dictionary as a Patricia trie (the compressed TSV format); ids are unchanged."""
        if self._data.structure == "compressed":
            return self
        entries = [(p, c, pat, out) for p, c, pat, out in self._data.nodes]
        data = _to_compressed(entries, dict(self._data.settings))
        tok = LZ78Tokenizer(data, chunking=self._chunking, special_tokens=self._extras)
        return tok

    def embedding_metadata(self, mode: str = "structured") -> dict:
        """Per id, the parent index and the character index for structured embeddings.

        ``mode``: "structured" (the LZ78 parent, TSV ``parent_code``; parents
        range over all dictionary nodes, prefix-only ones included) or
        "hierarchical" (the longest proper prefix that is itself an output
        entry; parents are output ids). "tuple" is structured's metadata. A
        compressed dictionary has no LZ78 parents: both modes give the
        hierarchical parents. The character is the entry's last character.
        Byte-fallback ids have parent 0 and their byte as character; id 0 and
        the special tokens get characters of their own.

        Returns ``{"mode", "parent", "char" (int64 arrays of vocab_size),
        "num_parents", "num_chars", "chars" (a label per character index)}``.
        Character indices: 0..255 are bytes (ASCII characters are their own
        byte), then the dictionary's other characters, then one per special
        token and one for id 0.
        """
        if mode == "tuple":
            mode = "structured"
        if mode not in ("structured", "hierarchical"):
            raise TokenforgeError(f"unknown embedding mode {mode!r}; expected 'structured', 'hierarchical' or 'tuple'")
        if self._data.structure == "flat":
            raise TokenforgeError(
                f"{mode} embeddings need a tree dictionary, but this one is flat (flat_prune): its entries are "
                "independent strings with no parent. Use flat embeddings, or train with a tree strategy "
                "(frequency_gated, multi_round, cost_adjusted, smart_prune, compressed)"
            )
        V = self.vocab_size
        n = self._n
        outputs = self._data.output_patterns()
        parent = np.zeros(V, dtype=np.int64)
        char = np.zeros(V, dtype=np.int64)
        labels = [bytes([b]).decode("latin-1") if b < 128 else f"<0x{b:02X}>" for b in range(256)]
        char_index: dict[str, int] = {}

        def cidx(c: str) -> int:
            if ord(c) < 128:
                return ord(c)
            i = char_index.get(c)
            if i is None:
                i = char_index[c] = len(labels)
                labels.append(c)
            return i

        structured = mode == "structured" and self._data.structure == "tree"
        if structured:
            for k, (p, c, pat, out) in enumerate(self._data.nodes[:n]):
                parent[k + 1] = p
                char[k + 1] = cidx(c)
            num_parents = len(self._data.nodes) + 1
        else:
            out_id = {p: k + 1 for k, p in enumerate(outputs)}
            for k, pat in enumerate(outputs):
                par = 0
                for j in range(len(pat) - 1, 0, -1):
                    q = out_id.get(pat[:j])
                    if q is not None:
                        par = q
                        break
                parent[k + 1] = par
                char[k + 1] = cidx(pat[-1])
            num_parents = n + 1
        for b in range(256):
            parent[n + 1 + b] = 0
            char[n + 1 + b] = b
        for s, i in self._specials.items():
            char[i] = len(labels)
            labels.append(s)
        char[0] = len(labels)
        labels.append("<reserved>")
        return {
            "mode": mode,
            "parent": parent,
            "char": char,
            "num_parents": int(num_parents),
            "num_chars": len(labels),
            "chars": labels,
        }

    def inspect_extra(self) -> dict:
        """LZ78 statistics for ``tokenforge inspect`` (see :func:`lz78_inspect`)."""
        return lz78_inspect(self)

    # ---- files -------------------------------------------------------------
    def _settings_for_save(self) -> dict:
        s = dict(self._data.settings)
        s["specials"] = list(self._extras)
        s.setdefault("chunking", self._chunking)
        s.setdefault("pattern", "gpt4")
        return s

    def _saved_data(self) -> LZ78Data:
        return LZ78Data(self._data.structure, self._data.nodes, self._settings_for_save())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the dictionary TSV (with header). A path ending in ``.tsv`` is
        the file; anything else is a directory that gets ``lz78.tsv``."""
        check_save_suffix(path, (".tsv",), "LZ78Tokenizer.save")
        p = Path(path)
        if p.suffix.lower() != ".tsv":
            p.mkdir(parents=True, exist_ok=True)
            p = p / _DIR_FILE
        write_lz78_tsv(p, self._saved_data())

    def to_bytes(self) -> bytes:
        """The TSV :meth:`save` writes, as bytes (how a tokenizer pickles: :mod:`tokenforge.base`)."""
        return lz78_tsv_text(self._saved_data()).encode("utf-8")

    def transport_state(self) -> dict:
        # the file records the chunking the dictionary was trained with; set_chunking may have changed it
        return {"chunking": self._chunking}

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "LZ78Tokenizer":
        chunking = state.get("chunking")
        if chunking is not None and not isinstance(chunking, bool):
            raise TypeError(f"chunking must be True, False or None, not {chunking!r}")
        return cls(lz78_tsv_from_bytes(data, f"<pickled {cls.__name__}>"), chunking=chunking)

    def save_tsv(
        self,
        path: str | os.PathLike[str],
        tsv_format: str | None = None,
        *,
        style: str = "tokenforge",
        unwritable: str = "error",
    ) -> int:
        """Write one TSV file in ``tsv_format`` ("lz78" or "compressed"; default: the dictionary's own).

        ``style="tokenforge"`` (default): our header, escapes, the ``output``
        column. ``style="seed"``: exactly the seed's columns
        (``code, parent_code, char, pattern`` or the compressed five), no
        header, no escapes -- a file the seed's loader reads back with the same
        ids. The seed's format cannot hold a tab, LF or CR: such entries are
        refused (:class:`~tokenforge.formats.lz78_tsv.SeedStyleError`, naming
        the code) unless ``unwritable="drop"``, which leaves them (and their
        descendants) out, renumbers the rest and warns -- ids then differ from
        this tokenizer's. A tree with prefix-only entries (smart_prune,
        :meth:`compact_output_vocab`) is written in the seed style only as
        ``tsv_format="compressed"``. Returns the number of entries dropped.
        """
        if tsv_format not in (None, "lz78", "compressed"):
            raise TokenforgeError(f"unknown tsv_format {tsv_format!r}; expected 'lz78' or 'compressed'")
        if style not in ("tokenforge", "seed"):
            raise TokenforgeError(f"unknown TSV style {style!r}; expected 'tokenforge' or 'seed'")
        if unwritable not in ("error", "drop"):
            raise TokenforgeError(f"unwritable must be 'error' or 'drop', not {unwritable!r}")
        if tsv_format == "lz78" and self._data.structure == "compressed":
            raise TokenforgeError(
                "a compressed (Patricia) dictionary has no LZ78 parents; it can only be written in the compressed format"
            )
        data = self._data
        dropped = 0
        if style == "seed" and unwritable == "drop":
            data, dropped = drop_unwritable(data)
            if dropped:
                warn_user(
                    f"left out {dropped} dictionary entries holding a tab, LF or CR (the seed's TSV cannot hold "
                    f"them); the file has {data.num_outputs} output entries instead of {self._n}, so its ids differ "
                    "from this tokenizer's",
                )
        if tsv_format == "compressed" and data.structure != "compressed":
            data = _to_compressed(list(data.nodes), dict(data.settings))
        write_lz78_tsv(Path(path), LZ78Data(data.structure, data.nodes, self._settings_for_save()), style=style)
        return dropped

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> "LZ78Tokenizer":
        """Load what :meth:`save` wrote into a directory."""
        return cls.from_tsv(Path(directory) / _DIR_FILE, tsv_format=None)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "LZ78Tokenizer":
        p = Path(path)
        if p.is_dir():
            return cls.from_directory(p)
        return cls.from_tsv(p, tsv_format=None)

    def __repr__(self) -> str:
        return (
            f"LZ78Tokenizer(vocab_size={self.vocab_size}, N={self._n}, structure={self.structure!r}, "
            f"strategy={self.strategy!r}, chunking={self._chunking})"
        )


# ---- training on a cluster ----------------------------------------------------
# The single-machine trainer (_core.Lz78Trainer) is an online builder and a
# chunk counter fed side by side. On a cluster they come apart: the counting
# is per partition on the workers (WordCounters), the online builder is one
# task that reads the partitions in order (it must see the corpus in order, on
# one thread), and _core.lz78_finish — the same strategy code
# Lz78Trainer.finish runs — prunes on the client.
#
# The pool strategies (multi_round, cost_adjusted, smart_prune, compressed)
# never bring the chunks to the client: each partition's WordCounter stays on
# the worker that counted it (a future), the pool is shipped to the workers
# once (an Lz78UsagePool, its trie built once per worker), and lz78_finish
# calls back once per pruning round with that round's mask (a bitset of the
# pool codes, ~pool/8 bytes): each worker counts usage over its partitions'
# chunks, the UsageCounts are summed in a tree, and only the sum (one varint
# per pool code) reaches the client. The unique-chunk count of the stats comes
# from a tree merge of the counters that stays on the workers (only the
# numbers come back). flat_prune still gathers the merged chunk counter: its
# candidate strings are generated from the chunks themselves.


def _cluster_count(
    part: Partition, pattern: str | None, options: dict, num_threads: int | None
) -> tuple[_core.WordCounter, int]:
    """Worker task: (WordCounter of the partition's chunks, texts fed)."""
    counter = _core.WordCounter(pattern)
    texts = 0

    def feed(batch: list[str], nt: int | None) -> None:
        nonlocal texts
        counter.add_texts(batch, nt)
        texts += len(batch)  # after add_texts: a batch refused for lone surrogates is fed again, cut

    feed_in_batches(feed, partition_documents(part, **options), num_threads, _BATCH_CHARS)
    return counter, texts


def _cluster_merge(*parts: tuple[_core.WordCounter, int]) -> tuple[_core.WordCounter, int]:
    """Reduce task: the sum of (WordCounter, texts) pairs."""
    return _core.WordCounter.merged([c for c, _ in parts]), sum(t for _, t in parts)


def _cluster_summary(counted: tuple[_core.WordCounter, int]) -> tuple[int, int, int]:
    """Worker task: (unique chunks, texts, corpus bytes) of a merged (WordCounter, texts)."""
    counter, texts = counted
    return counter.unique, texts, counter.total_bytes


def _cluster_usage_pool(pool: dict) -> _core.Lz78UsagePool:
    """Worker task: the pool ready to count usage (its trie built here, once)."""
    parents, chars, _, _ = pool["pool"]
    return _core.Lz78UsagePool(parents, chars)


def _cluster_usage(
    counted: tuple[_core.WordCounter, int], usage_pool: _core.Lz78UsagePool, mask: bytes, num_threads: int | None
) -> _core.UsageCounts:
    """Worker task: one round's UsageCounts over one partition's chunks."""
    return usage_pool.usage(counted[0], mask, num_threads)


def _cluster_usage_merge(*parts: _core.UsageCounts) -> _core.UsageCounts:
    """Reduce task: the sum of UsageCounts."""
    return _core.UsageCounts.merged(list(parts))


def _cluster_pool(
    parts: list[Partition],
    strategy: str,
    n: int,
    pattern: str | None,
    params: dict,
    options: dict,
    num_threads: int | None,
) -> dict:
    """Worker task: the online builder over every partition, in order, as
    plain data (``pool`` as ``_core.lz78_finish`` takes it, and the texts and
    bytes it read: standard stops reading once full)."""
    online = _core.Lz78Online(strategy, n, pattern, params)
    # a standard builder (or pool) stops once full, usually within the first MB: small batches let it stop early
    limit = (1 << 20) if "standard" in (strategy, params.get("pool")) else _BATCH_CHARS
    for part in parts:
        if not online.wants_more:
            break
        docs = partition_documents(part, **options)
        feed_in_batches(online.feed, docs, num_threads, limit, wants_more=lambda: online.wants_more)
    texts, nbytes = online.texts, online.corpus_bytes
    return {"pool": online.finish(), "texts": texts, "corpus_bytes": nbytes}


def _train_on_cluster(
    client: Any,
    corpus: object,
    strategy: str,
    n: int,
    pattern: str | None,
    params: dict,
    options: dict,
    num_threads: int | None,
    progress: bool | None,
) -> Any:
    """``Lz78Trainer``'s (entries, flat, stats), computed by tasks on ``client``'s cluster.

    The pool strategies go to :func:`_prune_on_cluster` (the chunks stay on the
    workers). flat_prune gathers the merged chunk counter here: its candidate
    strings are generated from the chunks themselves, not from usage counts.
    """
    from .cluster import runner, task_threads

    with runner(client, progress=progress) as run:
        # about four partitions per worker thread (auto_target_bytes), so the workers finish together
        target = auto_target_bytes(corpus, run.threads, who="LZ78Tokenizer.train")
        parts = plan_partitions(corpus, who="LZ78Tokenizer.train", target_bytes=target, **options)
        if strategy in ("multi_round", "cost_adjusted", "smart_prune", "compressed"):
            return _prune_on_cluster(run, parts, strategy, n, pattern, params, options, num_threads)
        tasks = task_threads(run, num_threads)
        pool = counted = None
        if strategy != "flat_prune":
            pool = run.submit(_cluster_pool, parts, strategy, n, pattern, params, options, tasks)
        if strategy not in ("standard", "frequency_gated"):
            handles = run.map(
                _cluster_count,
                parts,
                pattern,
                options,
                tasks,
                desc=f"lz78 {strategy} counting",
                weights=[p.nbytes for p in parts],
            )
            counted = run.reduce(_cluster_merge, handles)
        pool, counted = run.gather([pool, counted])
    if counted is not None:
        counter, texts = counted
        nbytes = counter.total_bytes
    else:
        counter, texts, nbytes = None, pool["texts"], pool["corpus_bytes"]
    return _core.lz78_finish(
        strategy,
        n,
        pool["pool"] if pool is not None else None,
        counter,
        texts,
        nbytes,
        params,
        num_threads,
    )


def _prune_on_cluster(
    run: Runner,
    parts: list[Partition],
    strategy: str,
    n: int,
    pattern: str | None,
    params: dict,
    options: dict,
    num_threads: int | None,
) -> Any:
    """The pool strategies on a cluster (``run``: a runner of :mod:`tokenforge.cluster`):
    the chunk counters stay on the workers, which count each pruning round's usage
    (see the section comment)."""
    from .cluster import task_threads

    weights = [p.nbytes for p in parts]
    tasks = task_threads(run, num_threads)
    pool = run.submit(_cluster_pool, parts, strategy, n, pattern, params, options, tasks)
    counted = run.map(_cluster_count, parts, pattern, options, tasks, desc=f"lz78 {strategy} counting", weights=weights)
    summary = run.submit(_cluster_summary, run.reduce(_cluster_merge, counted))
    usage_pool = run.submit(_cluster_usage_pool, pool)
    pool, (unique, texts, nbytes) = run.gather([pool, summary])
    del summary  # the merged counter it was made from goes with it

    def usage(mask: bytes) -> Any:
        shared = run.scatter(mask)
        per_part = run.map(
            _cluster_usage,
            counted,
            usage_pool,
            shared,
            tasks,
            desc=f"lz78 {strategy} usage",
            weights=weights,
        )
        return run.gather(run.reduce(_cluster_usage_merge, per_part))

    return _core.lz78_finish(
        strategy, n, pool["pool"], None, texts, nbytes, params, num_threads, unique_chunks=unique, usage=usage
    )


def _outputs_first(data: LZ78Data) -> LZ78Data:
    """The same dictionary with output entries at codes 1..N (parents remapped), as ids need."""
    if data.structure == "compressed":
        return data
    nodes = data.nodes
    k = 0
    while k < len(nodes) and nodes[k][3]:
        k += 1
    if all(not n[3] for n in nodes[k:]):
        return data
    order = [i for i, n in enumerate(nodes) if n[3]] + [i for i, n in enumerate(nodes) if not n[3]]
    code = {i + 1: j + 1 for j, i in enumerate(order)}
    new = [(code.get(nodes[i][0], 0), nodes[i][1], nodes[i][2], nodes[i][3]) for i in order]
    return LZ78Data(data.structure, new, data.settings)


def _to_compressed(entries: Iterable[tuple[int, str, str, bool]], settings: dict) -> LZ78Data:
    """Patricia trie of a tree or flat dictionary ((parent, char, pattern, output) per code)."""
    items = []
    out_id = 0
    for p, c, pat, out in entries:
        if out:
            out_id += 1
            items.append((pat, out_id))
        else:
            items.append((pat, -1))
    rows, _trie_nodes = _core.lz78_patricia(items)
    nodes = [(parent, label, out, pat) for parent, label, out, pat in rows]
    return LZ78Data(structure="compressed", nodes=nodes, settings=settings)


def lz78_inspect(tokenizer: LZ78Tokenizer, top: int = 10) -> dict:
    """Dictionary statistics for ``tokenforge inspect``.

    entries (all nodes), output entries, prefix-only entries, trie nodes (the
    plain character trie of all entries, root excluded), Patricia nodes, node
    compression ratio (trie / Patricia), depth histogram (output entries by
    length in characters, i.e. depth in the plain trie) and the longest
    output entries.
    """
    d = tokenizer.data
    if d.structure == "compressed":
        items = [(pat, out) for _, _, out, pat in d.nodes]
        entries = len(d.nodes)
    else:
        items = []
        k = 0
        for _, _, pat, out in d.nodes:
            if out:
                k += 1
            items.append((pat, k if out else -1))
        entries = len(d.nodes)
    rows, trie_nodes = _core.lz78_patricia(items) if items else ([], 0)
    outputs = d.output_patterns()
    hist: dict[int, int] = {}
    for p in outputs:
        hist[len(p)] = hist.get(len(p), 0) + 1
    longest = sorted(range(len(outputs)), key=lambda i: (-len(outputs[i]), i))[:top]
    return {
        "lz78_structure": d.structure,
        "lz78_strategy": d.settings.get("strategy"),
        "lz78_chunking": tokenizer.chunking,
        "entries": entries,
        "output_entries": len(outputs),
        "prefix_only_entries": entries - len(outputs)
        if d.structure != "compressed"
        else sum(1 for r in d.nodes if r[2] <= 0),
        "trie_nodes": int(trie_nodes),
        "patricia_nodes": len(rows),
        "node_compression_ratio": (trie_nodes / len(rows)) if rows else 1.0,
        "depth_histogram": dict(sorted(hist.items())),
        "longest_entries": [(i + 1, outputs[i]) for i in longest],
    }


def token_detail(tok: LZ78Tokenizer) -> Callable[[int, Callable[[int], dict]], dict]:
    """The playground's detail of ``tok``'s ids (the family record's ``detail``
    hook): an entry's ``parent`` (its code and pattern; code 0 is the empty
    root) and ``char``, the character that extends it; a compressed (Patricia)
    dictionary gives the parent node's pattern and the ``edge`` label; a flat
    one says ``flat``; byte-fallback ids say ``byte``. The Patricia node of each
    output id is indexed once, here."""
    data = tok.data
    nodes, structure, n = data.nodes, data.structure, tok.num_codes
    node_of = {}
    if structure == "compressed":  # Patricia: output id -> node index
        node_of = {node[2]: k + 1 for k, node in enumerate(nodes) if node[2] > 0}

    def detail(id: int, ref: Callable[[int], dict]) -> dict:
        if id > n:
            return {"byte": id - n - 1}
        if id < 1:
            return {}
        if structure == "tree":  # output entries are codes 1..N
            parent, char, _pattern, _out = nodes[id - 1]
            return {"parent": {"code": parent, "pattern": nodes[parent - 1][2] if parent else ""}, "char": char}
        if structure == "compressed":
            k = node_of.get(id)
            if k is None:
                return {}
            parent, label, _out, _pattern = nodes[k - 1]
            return {"parent": {"node": parent, "pattern": nodes[parent - 1][3] if parent else ""}, "edge": label}
        return {"flat": True}

    return detail


def chunking_twin(tok: LZ78Tokenizer) -> tuple[bool, LZ78Tokenizer]:
    """``(chunking, twin)``: whether ``tok`` chunks its text, and a copy that does
    the other (the family record's ``chunking_twin`` hook: the playground's
    toggle). The copy travels through the file's bytes; the warning that it
    was trained with the other chunking is what the toggle is for, so it is
    not shown."""
    import copy
    import warnings

    chunking = bool(tok.chunking)
    twin = copy.deepcopy(tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        twin.set_chunking(not chunking)
    return chunking, twin


def strategy_params() -> list[str]:
    """Every parameter some strategy takes (the spec options ``compare`` accepts beyond its own)."""
    return sorted(set().union(*_ACCEPTS.values()))


def file_formats() -> list[Format]:
    """The LZ78 files :func:`tokenforge.load` reads (the family's record points here)."""
    from .formats.lz78_tsv import sniff_lz78_tsv

    cls = LZ78Tokenizer
    return [
        Format("tokenforge-lz78-tsv", sniff_lz78_tsv, lambda p: cls.from_tsv(p, tsv_format=None)),
        Format("tokenforge-lz78-dir", dir_holding(_DIR_FILE), cls.from_directory),
    ]
