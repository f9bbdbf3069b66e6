"""Byte-level BPE: training and encoding in Rust, files and APIs in Python.

One engine serves several id layouts:

- ``"nanochat"`` (default): bytes 0..255, merges from 256, special tokens after.
- ``"specials_first"`` (seed 003, gpt_from_scratch): bytes 0..255, special
  tokens from 256, merges after them.

Encoding follows tiktoken exactly: a piece that is itself a token is emitted
whole; otherwise the adjacent pair whose concatenated bytes has the lowest rank
merges first, leftmost on a tie. Ranks are ids.

Seed 003's entry points (``BPETokenizer().train(input_path=..., save_dir=...)``,
``BPETokenizer.from_file(vocab.pkl, merges.pkl)``) make *seed-mode* tokenizers:
``data.split_specials`` is true, recorded in the saved JSON, and ``encode``
splits the special tokens out of the text by default, as the seed does.

A lone surrogate in the text (Python allows them) is encoded as the byte ids
of its three "surrogatepass" bytes and decoded back (see :mod:`tokenforge.base`).

Not handled here: Unicode normalisation (text is encoded as given),
byte-fallback-free vocabularies (every byte always has an id), and, when seed
003's trainer splits a file at several special tokens, the order of two
specials that overlap each other in the text (the file is streamed split at
the longest special first, then at the others, longest first).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from . import _core
from .base import SpecialArg, Tokenizer
from .bpe_structure import Detail, bpe_embedding_metadata, merge_detail
from .chat import special_token_list
from .errors import CorpusError, FormatError, PatternError, TokenforgeError, warn_user
from .formats.bpe_data import BPEData
from .formats.kinds import Format, dir_holding, read_any
from .formats.patterns import NAMED_PATTERNS, resolve_pattern
from .hybrid import class_or_instance
from .ids import is_integer
from .progress import run_sliced
from .rust_backed import CoreEncoded
from .surrogates import encode_around_surrogates

if TYPE_CHECKING:
    from .bpe_parity import ParityCounts

__all__ = ["BPETokenizer", "PATTERNS", "resolve_pattern"]

#: Named split patterns. "gpt4" is nanochat's (numbers of 1-2 digits); "o200k" is
#: GPT-4o's (tiktoken's o200k_base pattern). These and the other spellings of
#: GPT-family patterns in use (tiktoken's own cl100k ``pat_str``, Llama-3's and
#: Qwen2's tokenizer.json) run on the core's hand-written scanners.
#: The table is formats/patterns.NAMED_PATTERNS (the one name -> regex lookup, with
#: ``resolve_pattern``), plus "none".
PATTERNS: dict[str, str | None] = {**NAMED_PATTERNS, "none": None}

LAYOUTS = ("nanochat", "specials_first")
TIE_BREAKS = ("pair_ids", "lexicographic")
_DIR_FILE = "tokenforge.json"


class _Default:
    """A keyword left out by the caller: the mode's default applies (nanochat's,
    or seed 003's when ``input_path`` is given)."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()
_NANOCHAT_DEFAULTS = {"pattern": "gpt4", "tie_break": "pair_ids", "layout": "nanochat"}
_SEED003_DEFAULTS = {"pattern": "gpt2", "tie_break": "lexicographic", "layout": "specials_first"}


def _special_list(special_tokens: object) -> list[str]:
    return special_token_list(special_tokens)


def _check_seed_specials(specials: list[str]) -> None:
    """Before training: the specials must fit seed 003's ``special_tokens.txt``."""
    from .formats.seed003 import check_special_line

    for text in specials:
        check_special_line(text)


class BPETokenizer(CoreEncoded, Tokenizer):
    """A byte-level BPE tokenizer (nanochat-compatible by default).

    Build one with :meth:`train`, :meth:`train_from_iterator`, :func:`tokenforge.load`,
    :meth:`from_directory`, :meth:`from_tiktoken`, :meth:`from_hf` or :meth:`from_file`.
    """

    family = "bpe"

    def __init__(self, data: BPEData | None = None) -> None:
        if data is None:  # seed 003: BPETokenizer() then .train(...)
            data = BPEData(
                byte_ids=list(range(256)), merges=[], special_tokens={}, pattern=PATTERNS["gpt4"], pattern_name="gpt4"
            )
        self._set(data)

    def _set(self, data: BPEData) -> None:
        data.validate()
        # a fast reader's model, built from the same content (formats/bpe_data.py), is used as it is
        model = data.engine_model()
        if model is None:
            model = _core.BpeModel(
                list(data.byte_ids),
                [(a, b, c) for a, b, c in data.merges],
                list(data.special_tokens.items()),
                data.pattern,
                "bytes",
            )
        self._data = data
        self._model = model
        self._specials = dict(data.special_tokens)

    # ---- training ----------------------------------------------------------
    @class_or_instance
    def train(
        cls: type[BPETokenizer],
        self: BPETokenizer | None,
        corpus: object = None,
        vocab_size: int | None = None,
        *,
        save_dir: str | os.PathLike[str] | None = None,
        special_tokens: object = "nanochat",
        pattern: str | None | _Default = _DEFAULT,
        tie_break: str | _Default = _DEFAULT,
        min_frequency: int = 1,
        num_threads: int | None = None,
        layout: str | _Default = _DEFAULT,
        text_field: str = "text",
        split_on: str | None = None,
        progress: bool | None = None,
        input_path: str | os.PathLike[str] | None = None,
        errors: str = "strict",
        client: Any = None,
        prune_below: int | None = None,
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
        parity: Mapping[str, object] | None = None,
        parity_measure: str | Mapping[str, int] = "tokens",
        parity_global_merges: int | float = 0,
        parity_window: int = 0,
        parity_window_alpha: float = 2.0,
        parity_tolerance: float = 0.0,
        parity_shared: float = 0.0,
        parity_rule: str = "foroutan2025",
        parity_reference: str | None = None,
        parity_gain: float = 1.0,
    ) -> BPETokenizer:
        """Train a tokenizer of ``vocab_size`` ids (specials included).

        ``corpus``: a path or a list of paths, ``str`` or ``pathlib.Path``
        (.txt/.jsonl/.parquet, optionally .gz/.zst, or directories; streamed); a
        ``str`` that names no file is a :class:`~tokenforge.errors.CorpusError`.
        Texts go to :meth:`train_from_iterator`. ``pattern``: "gpt4" (nanochat), "gpt2",
        "cl100k", any regex, or None (whole documents are the sequences); with a
        regex, text between its matches is a piece too (no text is ever dropped).
        ``tie_break``: "pair_ids" (rustbpe: the smaller pair of ids) or
        "lexicographic" (seed 003: the larger pair of byte strings).
        ``layout``: "nanochat" (merges from 256, specials last) or "specials_first".
        ``min_frequency``: stop when the best pair occurs fewer times.
        ``errors``: how corpus files' bad UTF-8 and lone surrogate escapes in
        JSON lines are read (see :func:`~tokenforge.data.corpus.iter_documents`).
        Output does not depend on ``num_threads``. Ctrl-C stops cleanly and
        writes nothing. ``save_dir``: save the result there (:meth:`save`).

        ``client``: a ``distributed.Client`` or a scheduler address
        (``"tcp://host:8786"``) counts the corpus's partitions on that Dask
        cluster (the workers read the files: paths or fsspec URLs they can
        open) and runs the merges here; the result is byte-identical to
        training without it (:mod:`tokenforge.counting`). ``prune_below``
        (bounded mode, for huge corpora): each partition drops the pieces it
        counted fewer times than this before merging; not exact (recorded in
        the file); None (default) is exact.

        ``max_memory`` (bytes or a size such as ``"4GB"``; None: 3/4 of the
        available memory; with ``client``, the client's counter, into which each
        partition's counts are merged as they arrive): counts past a share of it
        spill sorted runs to ``tmp_dir`` (None: the system's temporary
        directory) and are merged back exactly; if the distinct pieces would
        not fit training's share, the rarest are dropped (every piece counted
        fewer than some threshold), with a warning, and the file's training
        section records it (``budget_dropped_below``, ``budget_dropped_unique``,
        ``budget_dropped_pieces``). Nothing dropped: the file is byte-identical
        to unbounded training. A budget whose kept pieces would make up less than
        half of the corpus's pieces is a :class:`~tokenforge.errors.TokenforgeError`
        naming a budget that would do. docs/scale.md says how many pieces a budget holds.
        With ``parity``, one budget covers every language (see
        :func:`tokenforge.bpe_parity.count_parity`); the drop is recorded per
        language in the ``parity`` record and summed at the top.

        ``parity`` (parity-aware BPE, Foroutan et al. 2025): a mapping language
        code -> development text (paths here; texts in
        :meth:`train_from_iterator`). Each merge is then the pair most frequent
        in the training text of the language whose dev text is worst compressed
        under the merges so far (docs/algorithms.md). The corpus must carry
        languages: a mapping language -> paths, or JSON lines with a ``lang``
        field; every language needs training and dev text (else
        :class:`~tokenforge.errors.CorpusError`). ``parity_measure``: "tokens"
        (parallel dev texts; default), "bytes", "chars", or a mapping language ->
        the dev text's size in a unit common to all. ``parity_global_merges``:
        the first N merges are plain BPE's (the hybrid variant; a float in
        [0, 1): that share of the merges). ``parity_window`` (> 0) and
        ``parity_window_alpha``: the moving-window variant.
        ``parity_tolerance`` (> 0): a global merge while every language's dev
        cost is within ``1 + tolerance`` of the cheapest. ``parity_shared``
        (>= 1): the worst language's pair most frequent over all languages among
        its pairs within that factor of its top count. ``parity_rule``:
        "foroutan2025" (the paper's, default), "levelup" (global merges while
        every language costs at most ``1 + parity_tolerance`` times
        ``parity_reference``'s; else the worst language is served) or
        "excess" (the pair with the largest count over all languages plus
        ``parity_gain`` times each dearer language's excess premium over
        ``parity_reference`` times its count there) or "group" ("levelup"'s
        language, and among its pairs within ``parity_shared`` of its top
        count the one most frequent over all languages, the languages dearer
        than the reference weighted ``1 + parity_gain``) or "keep" ("levelup",
        and a language cheaper than the reference is served once its premium
        rises above where it was when the parity phase started) or
        "discount" ("levelup"'s language, the shared-pair band, each pair's
        global count less ``parity_gain`` (0 to 1) times its count in
        ``parity_reference``) or "lift" ("levelup"'s language, the shared-pair
        band, each pair's global count plus ``parity_gain`` times its count in
        the language served) or "devlift" ("lift" with each pair's count in
        the dev text of every language as its global count).
        ``parity_reference``:
        a dev language, or "median" (before each merge, the median language by
        dev cost). The settings
        and each language's dev tokens before and after go to the file's
        training section (``parity``). See :mod:`tokenforge.bpe_parity`.

        Seed 003's call, with ``input_path`` (``BPETokenizer().train(input_path=...,
        vocab_size=..., save_dir=..., special_tokens=[...])``), follows that seed:
        by default GPT-2's pattern, specials right after the bytes, lexicographic
        ties, ``["<|endoftext|>"]`` as specials, and the text split at every
        special token (longest first) so none is learned from; the tokenizer is in
        seed mode (:attr:`split_specials`), and ``save_dir`` gets the seed's files
        (``bpe_vocab.pkl``, ``bpe_merges.pkl``, ``special_tokens.txt``,
        ``pre_tokenization_pattern.txt``) beside tokenforge's ``tokenforge.json``.
        ``pattern``, ``tie_break`` and ``layout`` given explicitly are honoured
        (and recorded) in either mode.
        """
        seed_mode = input_path is not None
        if seed_mode:
            if corpus is not None:
                raise TypeError("give either corpus or input_path, not both")
            corpus = input_path
            specials = _special_list(["<|endoftext|>"] if special_tokens == "nanochat" else special_tokens)
            _check_seed_specials(specials)
        else:
            specials = _special_list(special_tokens)
        defaults = _SEED003_DEFAULTS if seed_mode else _NANOCHAT_DEFAULTS
        if isinstance(pattern, _Default):
            pattern = defaults["pattern"]
        if isinstance(tie_break, _Default):
            tie_break = defaults["tie_break"]
        if isinstance(layout, _Default):
            layout = defaults["layout"]
        if corpus is None:
            raise TypeError("train() needs a corpus (a path or a list of paths; texts go to train_from_iterator)")
        # counting and the corpus readers are imported here, not at module level: loading a
        # tokenizer never needs them (`import tokenforge` + a load stays cheap)
        from .counting import DocRule, count_pieces

        if seed_mode and specials:
            split_on = split_on or max(specials, key=len)
            rule = DocRule(split_at=tuple(specials))
        else:
            rule = DocRule()
        # checked before the corpus is read
        _check_train_args(vocab_size, layout, len(specials), tie_break, min_frequency, num_threads)
        regex, _ = resolve_pattern(pattern)
        # how the corpus is read and counted, with or without parity
        reading: dict[str, Any] = dict(
            who="BPETokenizer.train",
            rule=rule,
            text_field=text_field,
            split_on=split_on,
            errors=errors,
            num_threads=num_threads,
            progress=progress,
            client=client,
            prune_below=prune_below,
        )
        counter: ParityCounts | _core.WordCounter
        if parity is not None:
            if seed_mode:
                raise TokenforgeError("parity training is not available in seed 003's mode (input_path=)")
            from .bpe_parity import ParitySettings, count_parity

            settings = ParitySettings(
                measure=parity_measure,
                global_merges=parity_global_merges,
                window=parity_window,
                window_alpha=parity_window_alpha,
                tolerance=parity_tolerance,
                shared=parity_shared,
                rule=parity_rule,
                reference=parity_reference,
                gain=parity_gain,
            )
            counter = count_parity(corpus, parity, regex, settings, max_memory=max_memory, tmp_dir=tmp_dir, **reading)
        else:
            counter = count_pieces(corpus, regex, max_memory=max_memory, tmp_dir=tmp_dir, **reading)
        data = _train(
            counter,
            vocab_size,
            specials=specials,
            pattern=pattern,
            tie_break=tie_break,
            min_frequency=min_frequency,
            num_threads=num_threads,
            layout=layout,
            progress=progress,
        )
        data.split_specials = seed_mode
        if self is None:
            tok = cls(data)
        else:
            self._set(data)
            tok = self
        if save_dir is not None:
            if seed_mode:  # seed 003's files and ours, as one save
                from .formats.atomic import atomic_write_all
                from .formats.seed003 import seed003_items
                from .formats.suffixes import check_save_suffix
                from .formats.tfjson import tfjson_items

                check_save_suffix(save_dir, (), "BPETokenizer.train(save_dir=...)")  # a directory
                items = tfjson_items(Path(save_dir) / _DIR_FILE, tok._data)
                items += seed003_items(save_dir, tok._data, allow_other_pattern=True)
                Path(save_dir).mkdir(parents=True, exist_ok=True)
                atomic_write_all(items)
            else:
                tok.save(save_dir)
        return tok

    @classmethod
    def train_from_iterator(cls, iterator: Iterable[str], vocab_size: int, **kwargs: Any) -> "BPETokenizer":
        """nanochat's name: train from an iterable of str (texts, never paths);
        the other arguments are :meth:`train`'s. With ``parity=``, the
        iterator may be a mapping language -> texts, and ``parity``'s values
        are texts too."""
        if kwargs.get("parity") is not None:
            from collections.abc import Mapping

            from .bpe_parity import as_texts

            kwargs["parity"] = as_texts(kwargs["parity"], "parity")
            if isinstance(iterator, Mapping):
                return cls.train(as_texts(iterator, "the corpus"), vocab_size, **kwargs)
        from .data.corpus import Texts

        return cls.train(Texts(iterator), vocab_size, **kwargs)

    # ---- the contract ------------------------------------------------------
    @property
    def pattern(self) -> str | None:
        return self._data.pattern

    @property
    def split_specials(self) -> bool:
        """Seed 003's policy: ``encode`` turns special-token text into special ids
        (longest first) unless the caller says otherwise (``allowed_special=()``).
        ``encode_ordinary`` and ``encode_batch`` never do. Recorded in the saved
        JSON; false for tokenforge's own tokenizers. Settable."""
        return self._data.split_specials

    @split_specials.setter
    def split_specials(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"split_specials must be True or False, not {value!r}")
        self._data = dataclasses.replace(self._data, split_specials=value)

    @property
    def default_allowed_special(self) -> SpecialArg:
        return "all" if self._data.split_specials else ()

    @property
    def merges(self) -> list[tuple[int, int, int]]:
        """(left, right, new_id) in the order learned."""
        return [(a, b, c) for a, b, c in self._data.merges]

    def merge_parts(self) -> dict[int, tuple[int, int]]:
        """``{new_id: (left, right)}`` for every merge."""
        return {c: (a, b) for a, b, c in self._data.merges}

    @property
    def data(self) -> BPEData:
        return self._data

    def byte_id(self, b: int) -> int:
        """The id of the single byte ``b`` (its entry in the byte table; not b
        itself in every layout, e.g. imported tiktoken/HF vocabularies)."""
        return self._data.byte_ids[b]

    def _encode_batch_with_specials(
        self, texts: Sequence[str], allowed: dict[str, int], num_threads: int | None
    ) -> list[list[int]]:
        ids = list(allowed.values())
        try:
            return self._model.encode_batch(list(texts), num_threads, ids, True)
        except UnicodeEncodeError:  # lone surrogates
            return encode_around_surrogates(
                list(texts), lambda parts: self._model.encode_batch(parts, num_threads, ids, True), self.byte_id
            )

    def embedding_metadata(self, mode: str = "structured") -> dict:
        """Parent/character indices for tree embeddings: each merge's left part is the
        parent, its right part the character (see :mod:`tokenforge.bpe_structure`)."""
        return bpe_embedding_metadata(self.merges, self.model_vocab_size, mode, who=type(self).__name__)

    # ---- files -------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Save in tokenforge's format. A path ending in ``.json`` is the file;
        anything else is a directory that gets ``tokenforge.json`` (nanochat's
        ``save(dir)``). A human-readable ``*.vocab.txt`` is written beside it."""
        from .formats.suffixes import check_save_suffix
        from .formats.tfjson import write_tfjson

        check_save_suffix(path, (".json",), "BPETokenizer.save")
        p = Path(path)
        if p.suffix != ".json":
            p.mkdir(parents=True, exist_ok=True)
            p = p / _DIR_FILE
        write_tfjson(p, self._data)

    def to_bytes(self) -> bytes:
        """The JSON :meth:`save` writes, as bytes (how a tokenizer pickles: :mod:`tokenforge.base`)."""
        from .formats.tfjson import tfjson_text

        return tfjson_text(self._data).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "BPETokenizer":
        from .formats.tfjson import tfjson_from_bytes

        return cls(tfjson_from_bytes(data, f"<pickled {cls.__name__}>"))

    def fingerprint_files(self) -> dict:
        """What defines this tokenizer (see tokenforge.data.fingerprint): the JSON
        :meth:`save` writes; its vocabulary view is derived from it."""
        from .formats.tfjson import tfjson_text

        return {_DIR_FILE: tfjson_text(self._data).encode("utf-8")}

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> "BPETokenizer":
        """nanochat's name: load what :meth:`save` wrote into a directory."""
        return cls.load(Path(directory) / _DIR_FILE)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BPETokenizer":
        from .formats.tfjson import read_tfjson

        p = Path(path)
        if p.is_dir():
            p = p / _DIR_FILE
        return cls(read_tfjson(p))

    # tiktoken
    def mergeable_ranks(self) -> dict[bytes, int]:
        """tiktoken's ``mergeable_ranks`` (token bytes -> rank = id), specials excluded."""
        from .formats.tiktoken_io import mergeable_ranks

        return mergeable_ranks(self._data)

    def to_tiktoken(self, name: str = "tokenforge") -> Any:
        """A working ``tiktoken.Encoding`` with the same ranks, pattern and specials."""
        from .formats.tiktoken_io import GAP_PROBES, to_tiktoken

        enc = to_tiktoken(self._data, name=name)
        if self.pattern is not None and self.pattern not in NAMED_PATTERNS.values():
            # a custom pattern reaches tiktoken widened to keep the gaps between its
            # matches; that cannot work for every regex (one that matches the empty
            # string loses a character there): checked on probe texts, refused if not
            for text in GAP_PROBES:
                try:
                    same = enc.encode_ordinary(text) == self.encode_ordinary(text)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException:  # tiktoken's core panics on some such patterns (PanicException)
                    same = False
                if not same:
                    raise PatternError(
                        f"tiktoken cannot split as tokenforge does with the pattern {self.pattern!r} (checked on "
                        f"{text!r}): tiktoken drops the text between matches and this pattern cannot be widened "
                        "to keep it (does it match the empty string?). Export with save_hf (Hugging Face keeps "
                        "the gaps), or train with a pattern that matches every character"
                    )
        return enc

    def save_tiktoken(self, path: str | os.PathLike[str]) -> None:
        """Write the ranks as a ``.tiktoken`` file (pattern and specials are not part of that format)."""
        from .formats.tiktoken_io import write_tiktoken_file

        write_tiktoken_file(path, self._data)

    @classmethod
    def from_tiktoken(
        cls, source: Any, pattern: str | None | _Default = _DEFAULT, special_tokens: Mapping[str, int] | None = None
    ) -> "BPETokenizer":
        """From a ``.tiktoken`` file, a ``{bytes: rank}`` dict, or a ``tiktoken.Encoding``.

        ``pattern``: a name or a regex (None: no pre-tokenization). Left out, a file
        or dict must be one of OpenAI's rank files (cl100k_base, o200k_base, r50k_base,
        p50k_base, recognised by content), whose pattern is used; anything else is a
        FormatError asking for ``pattern=``. An Encoding carries its own pattern."""
        from .formats.tiktoken_io import FROM_FILE, data_from_ranks, read_tiktoken_file, tiktoken_ranks_pattern

        if hasattr(source, "_mergeable_ranks") and hasattr(source, "_pat_str"):
            ranks = source._mergeable_ranks
            return cls(data_from_ranks(ranks, source._pat_str, dict(source._special_tokens)))
        regex = FROM_FILE if isinstance(pattern, _Default) else resolve_pattern(pattern)[0]
        if isinstance(source, dict):
            return cls(data_from_ranks(source, tiktoken_ranks_pattern(source, regex), special_tokens))
        return cls(read_tiktoken_file(source, regex, special_tokens))

    # Hugging Face
    def save_hf(self, path: str | os.PathLike[str]) -> None:
        """Write a Hugging Face ``tokenizer.json`` giving the same ids."""
        from .formats.hf_json import write_hf_json

        write_hf_json(path, self._data)

    # where models are trained
    def save_nanochat(self, directory: str | os.PathLike[str], *, name: str = "tokenforge") -> list[Path]:
        """Write nanochat's tokenizer directory: ``tokenizer.pkl`` (a pickled
        ``tiktoken.Encoding`` with this tokenizer's pattern, ranks and specials,
        written by ``pickle.dump`` as nanochat does; needs tiktoken) and
        ``token_bytes.pt`` (int32 byte length per id, 0 for specials; needs
        torch: without it a warning says so and the pickle is written alone).
        nanochat's ``RustBPETokenizer.from_directory``, ``get_tokenizer()`` and
        ``get_token_bytes()`` read them; so does :func:`tokenforge.load`, through a
        restricted reader. Returns the paths written. See
        :mod:`tokenforge.formats.nanochat`."""
        from .formats.nanochat import write_nanochat

        return write_nanochat(directory, self, name=name)

    def save_pretrained(self, directory: str | os.PathLike[str], **options: Any) -> list[Path]:
        """Write what transformers' ``AutoTokenizer.from_pretrained(directory)``
        needs: ``tokenizer.json``, ``tokenizer_config.json`` (bos/eos/pad/unk, the
        chat template, ``model_max_length`` when given) and
        ``special_tokens_map.json``. Options: ``bos_token``, ``eos_token``,
        ``pad_token``, ``unk_token`` (a special token's text, or None),
        ``model_max_length`` (int) and ``chat_template`` (Jinja, or None for none);
        by default the roles come from the tokenizer's specials and nanochat's
        layout gets :data:`tokenforge.chat.CHAT_TEMPLATE`, whose
        ``apply_chat_template`` gives :meth:`render_conversation`'s ids and mask.
        Returns the paths written. See :mod:`tokenforge.formats.hf_pretrained`."""
        from .formats.hf_pretrained import write_pretrained

        return write_pretrained(directory, self._data, **options)

    def to_hf(self) -> Any:
        """A ``tokenizers.Tokenizer`` giving the same ids."""
        import json

        from tokenizers import Tokenizer as HFTokenizer

        from .formats.hf_json import hf_json_dict

        return HFTokenizer.from_str(json.dumps(hf_json_dict(self._data)))

    @classmethod
    def from_hf(cls, path: str | os.PathLike[str]) -> "BPETokenizer":
        from .formats.hf_json import read_hf_json

        return cls(read_hf_json(path))

    # seed 003
    @classmethod
    def from_file(
        cls,
        vocab_path: str | os.PathLike[str],
        merges_path: str | os.PathLike[str] | None = None,
        special_tokens_path: str | os.PathLike[str] | None = None,
    ) -> "BPETokenizer":
        """Seed 003's loader: ``bpe_vocab.pkl`` + ``bpe_merges.pkl`` (+ ``special_tokens.txt``,
        + ``pre_tokenization_pattern.txt`` beside the vocabulary), read with a
        restricted unpickler, as a seed-mode tokenizer (:attr:`split_specials`);
        or any other BPE file (:func:`file_formats`: ours, tiktoken's, Hugging
        Face's). Without the pattern file the seed's GPT-2 pattern applies, with a
        warning."""
        from .formats.seed003 import sniff_seed003

        p = Path(vocab_path)
        head = p.read_bytes()[:4096] if p.is_file() else b""
        if merges_path is not None or sniff_seed003(p, head):
            return cls(read_seed003_files(p, merges_path, special_tokens_path))
        tok = read_any(p, file_formats(), "a BPE tokenizer file")
        if not isinstance(tok, cls):
            raise FormatError(f"{p} holds a {type(tok).__name__}, not a BPE tokenizer")
        return tok

    def export_seed003(self, directory: str | os.PathLike[str]) -> None:
        """Write seed 003's files: ``bpe_vocab.pkl``, ``bpe_merges.pkl`` (plain-data
        pickles the seed's code loads), ``special_tokens.txt`` and
        ``pre_tokenization_pattern.txt``, which :meth:`from_file` reads back, so
        the ids survive whatever the pattern."""
        from .formats.seed003 import write_seed003

        write_seed003(directory, self._data, allow_other_pattern=True)

    def __repr__(self) -> str:
        seed = ", split_specials=True" if self._data.split_specials else ""
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self._data.merges)}, pattern={self._data.pattern_name!r}, specials={len(self._specials)}{seed})"


def _check_train_args(
    vocab_size: object,
    layout: object,
    num_specials: int,
    tie_break: object,
    min_frequency: object,
    num_threads: int | None,
) -> tuple[int, int, int]:
    """(vocab_size, first merge id, number of merges) for valid training arguments; the typed error otherwise."""
    if not is_integer(vocab_size):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    if layout not in LAYOUTS:
        raise TokenforgeError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    # the id layout lives in the core (crate::bpe::layout): VocabSizeError if vocab_size is too small
    first_merge, num_merges = _core.bpe_layout(layout, int(vocab_size), num_specials)
    if tie_break not in TIE_BREAKS:
        raise TokenforgeError(f"unknown tie_break {tie_break!r}; expected one of {', '.join(TIE_BREAKS)}")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
        raise TokenforgeError(f"min_frequency must be an int >= 1, not {min_frequency!r}")
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise TokenforgeError(f"num_threads must be a positive int or None, not {num_threads!r}")
    return int(vocab_size), first_merge, num_merges


def _train(
    counter: Any,
    vocab_size: object,
    *,
    specials: list[str],
    pattern: str | None,
    tie_break: str,
    min_frequency: int,
    num_threads: int | None,
    layout: str,
    progress: bool | None,
) -> BPEData:
    """Merges from the piece counts of a corpus (a ``_core.WordCounter``, or
    the per-language counts of parity training; consumed)."""
    from .bpe_parity import ParityCounts

    vocab_size, first_merge, num_merges = _check_train_args(
        vocab_size, layout, len(specials), tie_break, min_frequency, num_threads
    )
    regex, pattern_name = resolve_pattern(pattern)
    show = progress if progress is not None else None
    parity = counter if isinstance(counter, ParityCounts) else None
    if parity is not None:
        corpus_bytes = sum(parity.train_bytes)
        unique = sum(c.unique for c in parity.train)
        drops = [c.dropped for c in parity.train]
        dropped = (sum(d[0] for d in drops), sum(d[1] for d in drops), max(d[2] for d in drops))
        budget_dropped = parity.total_budget_dropped()
        measure, norms = parity.core_measure()
        try:
            trainer = _core.BpeTrainer.parity(
                parity.train,
                parity.dev,
                list(range(256)),
                first_merge,
                num_merges,
                tie_break,
                min_frequency,
                num_threads,
                parity.resolve_global(num_merges),
                measure,
                norms,
                parity.settings.window,
                parity.settings.window_alpha,
                parity.settings.tolerance,
                parity.settings.shared,
                parity.settings.rule,
                parity.reference_index(),
                parity.settings.gain,
            )
        except TokenforgeError as e:  # the core names languages by index: say which
            names = ", ".join(f"{i} = {lang}" for i, lang in enumerate(parity.languages))
            raise CorpusError(f"parity training: {e} (languages: {names})") from None
    else:
        corpus_bytes = counter.total_bytes
        dropped = counter.dropped
        budget_dropped = counter.budget_dropped
        unique = counter.unique
        trainer = _core.BpeTrainer(
            counter, list(range(256)), [], first_merge, num_merges, tie_break, min_frequency, num_threads
        )
    run_sliced(trainer, num_merges, "merging", "merges", enabled=show is not False)
    merges = trainer.merges()
    # nanochat: the specials follow the merges learned (fewer than asked leaves no gap)
    special_ids = dict(zip(specials, _core.bpe_special_ids(layout, len(specials), len(merges))))
    training = {
        "vocab_size_requested": vocab_size,
        "merges_requested": num_merges,
        "num_merges": len(merges),
        "tie_break": tie_break,
        "min_frequency": min_frequency,
        "layout": layout,
        "corpus_bytes": int(corpus_bytes),
        "unique_pieces": int(unique),
        "trainer": f"tokenforge {_core.__version__}",
    }
    if dropped[2]:  # bounded mode: the counts were not exact (absent when they were)
        training["pruned_below"] = int(dropped[2])
        training["pruned_unique"] = int(dropped[0])
        training["pruned_pieces"] = int(dropped[1])
    if budget_dropped[2]:  # a memory budget dropped the rarest pieces (exact counts otherwise)
        training["budget_dropped_below"] = int(budget_dropped[2])
        training["budget_dropped_unique"] = int(budget_dropped[0])
        training["budget_dropped_pieces"] = int(budget_dropped[1])
    if parity is not None:
        training["parity"] = parity.record(trainer.parity_summary() or [], num_merges)
    if len(merges) < num_merges:
        training["stopped_early"] = _warn_fewer_merges(
            len(merges), num_merges, vocab_size, len(specials), min_frequency
        )
    return BPEData(
        byte_ids=list(range(256)),
        merges=list(merges),
        special_tokens=special_ids,
        pattern=regex,
        pattern_name=pattern_name,
        training=training,
    )


def read_seed003_files(
    path: str | os.PathLike[str],
    merges_path: str | os.PathLike[str] | None = None,
    special_tokens_path: str | os.PathLike[str] | None = None,
) -> BPEData:
    """Seed 003's files as a seed-mode BPEData: the vocabulary files, and the
    split pattern from ``pre_tokenization_pattern.txt`` (GPT-2's, with a warning,
    when that file is missing)."""
    from .formats.patterns import pattern_name_for
    from .formats.seed003 import PATTERN_FILE, read_pattern_file, read_seed003

    data = read_seed003(path, merges_path, special_tokens_path)
    present, pattern = read_pattern_file(path)
    if not present:
        warn_user(
            f"no {PATTERN_FILE} beside {path}: using the seed's GPT-2 split pattern; if these files "
            "were trained with another pattern, ids will differ (write the regex to that file)",
        )
    elif pattern is not None:
        try:
            _core.split(pattern, "", True)
        except PatternError as e:
            where = Path(path) if Path(path).is_dir() else Path(path).parent
            raise FormatError(f"the split pattern does not compile: {e}", path=where / PATTERN_FILE) from None
    if present:
        data = dataclasses.replace(data, pattern=pattern, pattern_name=pattern_name_for(pattern))
    return dataclasses.replace(data, split_specials=True)


def _warn_fewer_merges(learned: int, asked: int, vocab_size: int, num_specials: int, min_frequency: int) -> str:
    """Warn that training stopped short; returns the reason recorded in the file."""
    if min_frequency > 1:
        reason = f"no pair of adjacent tokens occurs at least min_frequency={min_frequency} times"
    else:
        reason = "no pair of adjacent tokens is left: every piece of the corpus is already one token"
    warn_user(
        f"BPE training learned {learned} merges, not the {asked} asked for: {reason}. The tokenizer has "
        f"{256 + learned + num_specials} ids, not vocab_size={vocab_size} (a larger corpus"
        f"{' or a lower min_frequency' if min_frequency > 1 else ''} gives more); the saved file records "
        "merges_requested and num_merges",
    )
    return reason


def token_detail(tok: BPETokenizer) -> Detail:
    """The playground's detail of ``tok``'s ids: a merge's two parts, or ``byte``
    (the family record's ``detail`` hook; see :func:`tokenforge.bpe_structure.merge_detail`)."""
    return merge_detail(tok.merges, tok.id_to_bytes)


def file_formats() -> list[Format]:
    """The BPE files :func:`tokenforge.load` and :meth:`BPETokenizer.from_file`
    read, most specific first (the family's record in :mod:`tokenforge.registry`
    points here)."""
    from .formats.hf_json import read_hf_json, sniff_hf_json
    from .formats.hf_pretrained import read_pretrained, sniff_pretrained
    from .formats.nanochat import read_nanochat, sniff_nanochat
    from .formats.seed003 import sniff_seed003
    from .formats.tfjson import read_tfjson, sniff_tfjson
    from .formats.tiktoken_io import read_tiktoken_file, sniff_tiktoken

    cls = BPETokenizer
    return [
        Format("tokenforge-bpe", sniff_tfjson, lambda p: cls(read_tfjson(p))),
        Format("tokenforge-bpe-dir", dir_holding(_DIR_FILE), cls.from_directory),
        Format("nanochat", sniff_nanochat, lambda p: cls(read_nanochat(p))),
        Format("transformers-dir", sniff_pretrained, lambda p: cls(read_pretrained(p))),
        Format("huggingface-tokenizer.json", sniff_hf_json, lambda p: cls(read_hf_json(p))),
        Format("tiktoken", sniff_tiktoken, lambda p: cls(read_tiktoken_file(p))),
        Format("seed003-pickles", sniff_seed003, lambda p: cls(read_seed003_files(p))),
    ]
