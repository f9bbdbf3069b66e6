"""Byte-level BPE: training and encoding in Rust, files and APIs in Python.

One engine serves several id layouts:

- ``"nanochat"`` (default): bytes 0..255, merges from 256, special tokens after.
- ``"specials_first"`` (seed 003, gpt_from_scratch): bytes 0..255, special
  tokens from 256, merges after them.

Encoding follows tiktoken exactly: a piece that is itself a token is emitted
whole; otherwise the adjacent pair whose concatenated bytes has the lowest rank
merges first, leftmost on a tie. Ranks are ids.

Not handled here: Unicode normalisation (text is encoded as given) and
byte-fallback-free vocabularies (every byte always has an id).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from . import _core
from .base import CoreEncoded, Tokenizer, register_format
from .chat import SPECIAL_TOKENS
from .data.corpus import iter_documents, progress_bar
from .errors import FormatError, PatternError, SpecialTokenError, TokenforgeError, VocabSizeError
from .formats.bpe_data import BPEData

__all__ = ["BPETokenizer", "PATTERNS", "resolve_pattern"]

#: Named split patterns. "gpt4" is nanochat's (numbers of 1-2 digits).
PATTERNS: dict[str, str | None] = {
    "gpt4": _core.GPT4_PATTERN,
    "cl100k": _core.CL100K_PATTERN,
    "gpt2": _core.GPT2_PATTERN,
    "none": None,
}

LAYOUTS = ("nanochat", "specials_first")
TIE_BREAKS = ("pair_ids", "lexicographic")
# Text is handed to the Rust counter in batches of about this many characters:
# large enough to keep both cores busy, small enough to bound memory.
_BATCH_CHARS = 4 << 20
_DIR_FILE = "tokenforge.json"


def resolve_pattern(pattern) -> tuple[str | None, str]:
    """(regex or None, name) for a pattern name, a regex, or None."""
    if pattern is None:
        return None, "none"
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a name ({', '.join(PATTERNS)}), a regex string or None, not {type(pattern).__name__}")
    if pattern in PATTERNS:
        return PATTERNS[pattern], pattern
    for name, p in PATTERNS.items():
        if p == pattern:
            return p, name
    try:
        _core.split(pattern, "", True)
    except PatternError:
        raise
    except Exception as e:  # pragma: no cover - defensive
        raise PatternError(f"split pattern {pattern!r} does not compile: {e}") from None
    return pattern, "custom"


def _special_list(special_tokens) -> list[str]:
    if special_tokens is None:
        return []
    if special_tokens == "nanochat":
        return list(SPECIAL_TOKENS)
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings (or 'nanochat' or None), not a single string")
    out = list(special_tokens)
    for i, s in enumerate(out):
        if not isinstance(s, str) or not s:
            raise SpecialTokenError(f"special_tokens[{i}] must be a non-empty string, not {s!r}")
    if len(set(out)) != len(out):
        dup = next(s for s in out if out.count(s) > 1)
        raise SpecialTokenError(f"special token {dup!r} is listed twice")
    return out


_CORPUS_SUFFIXES = (".txt", ".jsonl", ".parquet", ".txt.gz", ".jsonl.gz", ".parquet.gz", ".txt.zst", ".jsonl.zst", ".parquet.zst")


def _is_path(x) -> bool:
    if isinstance(x, os.PathLike):
        return True
    # In a list, a str counts as a path only if it names an existing corpus
    # file (.txt/.jsonl/.parquet, optionally .gz/.zst); anything else is text.
    # Directories must be given as a single path or as pathlib.Path objects.
    if not (isinstance(x, str) and 0 < len(x) < 4096 and x.endswith(_CORPUS_SUFFIXES) and "\n" not in x):
        return False
    try:
        return Path(x).is_file()
    except (OSError, ValueError):  # too long for a file name, NUL inside, ...
        return False


def _looks_like_paths(corpus) -> bool:
    """A list of Path objects, or of strings that all name existing corpus files."""
    return isinstance(corpus, (list, tuple)) and len(corpus) > 0 and all(_is_path(x) for x in corpus)


def _documents(corpus, text_field: str, split_on: str | None, errors: str = "strict"):
    if isinstance(corpus, (str, os.PathLike)):
        return iter_documents(Path(corpus), text_field=text_field, split_on=split_on, errors=errors)
    if _looks_like_paths(corpus):
        return iter_documents([Path(x) for x in corpus], text_field=text_field, split_on=split_on, errors=errors)
    if isinstance(corpus, (bytes, bytearray)):
        raise TypeError("corpus must be paths or an iterable of str, not bytes")
    try:
        it = iter(corpus)
    except TypeError:
        raise TypeError(f"corpus must be a path, a list of paths or an iterable of str, not {type(corpus).__name__}") from None
    return iter_documents(it, text_field=text_field, split_on=split_on, errors=errors)


class _HybridMethod:
    """A method that is a classmethod when called on the class (returns a new
    tokenizer) and an instance method when called on an instance (seed 003's
    ``BPETokenizer().train(...)``, which trains in place)."""

    def __init__(self, func):
        self.func = func
        functools.update_wrapper(self, func)

    def __get__(self, obj, cls):
        return functools.partial(self.func, cls, obj)


class BPETokenizer(CoreEncoded, Tokenizer):
    """A byte-level BPE tokenizer (nanochat-compatible by default).

    Build one with :meth:`train`, :meth:`train_from_iterator`, :func:`tokenforge.load`,
    :meth:`from_directory`, :meth:`from_tiktoken`, :meth:`from_hf` or :meth:`from_file`.
    """

    family = "bpe"

    def __init__(self, data: BPEData | None = None):
        if data is None:  # seed 003: BPETokenizer() then .train(...)
            data = BPEData(byte_ids=list(range(256)), merges=[], special_tokens={}, pattern=PATTERNS["gpt4"], pattern_name="gpt4")
        self._set(data)

    def _set(self, data: BPEData) -> None:
        data.validate()
        model = _core.BpeModel(
            list(data.byte_ids),
            [tuple(m) for m in data.merges],
            list(data.special_tokens.items()),
            data.pattern,
            "bytes",
        )
        self._data = data
        self._model = model
        self._specials = dict(data.special_tokens)

    # ---- training ----------------------------------------------------------
    @_HybridMethod
    def train(
        cls,
        self,
        corpus=None,
        vocab_size: int | None = None,
        save_dir=None,
        special_tokens="nanochat",
        *,
        pattern="gpt4",
        tie_break: str = "pair_ids",
        min_frequency: int = 1,
        num_threads: int | None = None,
        layout: str = "nanochat",
        text_field: str = "text",
        split_on: str | None = None,
        progress: bool | None = None,
        input_path=None,
        errors: str = "strict",
    ):
        """Train a tokenizer of ``vocab_size`` ids (specials included).

        ``corpus``: a path, a list of paths (.txt/.jsonl/.parquet, optionally .gz/.zst;
        streamed) or an iterable of str. ``pattern``: "gpt4" (nanochat), "gpt2",
        "cl100k", any regex, or None (whole documents are the sequences).
        ``tie_break``: "pair_ids" (rustbpe: the smaller pair of ids) or
        "lexicographic" (seed 003: the larger pair of byte strings).
        ``min_frequency``: stop when the best pair occurs fewer times.
        ``errors``: how corpus files' bad UTF-8 and lone surrogate escapes in
        JSON lines are read (see :func:`~tokenforge.data.corpus.iter_documents`).
        Output does not depend on ``num_threads``. Ctrl-C stops cleanly and
        writes nothing.

        Called on an instance with seed 003's arguments (``input_path``,
        ``vocab_size``, ``save_dir``, ``special_tokens``) it follows that seed:
        GPT-2 pattern, specials right after the bytes, lexicographic ties, the
        file split at the first special token, and the result saved in ``save_dir``.
        """
        seed_mode = self is not None and input_path is not None
        if input_path is not None:
            if corpus is not None:
                raise TypeError("give either corpus or input_path, not both")
            corpus = input_path
        if seed_mode:
            specials = _special_list(["<|endoftext|>"] if special_tokens == "nanochat" else special_tokens)
            pattern, layout, tie_break = "gpt2", "specials_first", "lexicographic"
            split_on = split_on or (specials[0] if specials else None)
        else:
            specials = _special_list(special_tokens)
        if corpus is None:
            raise TypeError("train() needs a corpus (a path, paths, or an iterable of str)")
        data = _train(
            _documents(corpus, text_field, split_on, errors),
            vocab_size,
            specials=specials,
            pattern=pattern,
            tie_break=tie_break,
            min_frequency=min_frequency,
            num_threads=num_threads,
            layout=layout,
            progress=progress,
        )
        if self is None:
            tok = cls(data)
        else:
            self._set(data)
            tok = self
        if save_dir is not None:
            tok.save(save_dir)
        return tok

    @classmethod
    def train_from_iterator(cls, iterator: Iterable[str], vocab_size: int, **kwargs) -> "BPETokenizer":
        """nanochat's name: train from an iterable of str."""
        return cls.train(iter(iterator), vocab_size, **kwargs)

    # ---- the contract ------------------------------------------------------
    @property
    def pattern(self) -> str | None:
        return self._data.pattern

    @property
    def merges(self) -> list[tuple[int, int, int]]:
        """(left, right, new_id) in the order learned."""
        return [tuple(m) for m in self._data.merges]

    @property
    def data(self) -> BPEData:
        return self._data

    def _encode_batch_with_specials(self, texts, allowed: dict[str, int], num_threads) -> list[list[int]]:
        return self._model.encode_batch(list(texts), num_threads, list(allowed.values()), True)

    def embedding_metadata(self, mode: str = "structured") -> dict:
        """Parent/character indices for tree embeddings: each merge's left part is the
        parent, its right part the character (see :mod:`tokenforge.eval.bpe_structure`)."""
        from .eval.bpe_structure import bpe_embedding_metadata

        return bpe_embedding_metadata(self, mode)

    # ---- files -------------------------------------------------------------
    def save(self, path) -> None:
        """Save in tokenforge's format. A path ending in ``.json`` is the file;
        anything else is a directory that gets ``tokenforge.json`` (nanochat's
        ``save(dir)``). A human-readable ``*.vocab.txt`` is written beside it."""
        from .formats.tfjson import write_tfjson

        p = Path(path)
        if p.suffix != ".json":
            p.mkdir(parents=True, exist_ok=True)
            p = p / _DIR_FILE
        write_tfjson(p, self._data)

    def _fingerprint_files(self) -> dict:
        """What defines this tokenizer (see tokenforge.data.fingerprint): the JSON
        :meth:`save` writes; its vocabulary view is derived from it."""
        from .formats.tfjson import tfjson_text

        return {_DIR_FILE: tfjson_text(self._data).encode("utf-8")}

    @classmethod
    def from_directory(cls, directory) -> "BPETokenizer":
        """nanochat's name: load what :meth:`save` wrote into a directory."""
        return cls.load(Path(directory) / _DIR_FILE)

    @classmethod
    def load(cls, path) -> "BPETokenizer":
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

    def to_tiktoken(self, name: str = "tokenforge"):
        """A working ``tiktoken.Encoding`` with the same ranks, pattern and specials."""
        from .formats.tiktoken_io import to_tiktoken

        return to_tiktoken(self._data, name=name)

    def save_tiktoken(self, path) -> None:
        """Write the ranks as a ``.tiktoken`` file (pattern and specials are not part of that format)."""
        from .formats.tiktoken_io import write_tiktoken_file

        write_tiktoken_file(path, self._data)

    @classmethod
    def from_tiktoken(cls, source, pattern="gpt4", special_tokens=None) -> "BPETokenizer":
        """From a ``.tiktoken`` file, a ``{bytes: rank}`` dict, or a ``tiktoken.Encoding``."""
        from .formats.tiktoken_io import data_from_ranks, read_tiktoken_file

        if hasattr(source, "_mergeable_ranks") and hasattr(source, "_pat_str"):
            ranks = source._mergeable_ranks
            return cls(data_from_ranks(ranks, source._pat_str, dict(source._special_tokens)))
        regex, _ = resolve_pattern(pattern)
        if isinstance(source, dict):
            return cls(data_from_ranks(source, regex, special_tokens))
        return cls(read_tiktoken_file(source, regex, special_tokens))

    # Hugging Face
    def save_hf(self, path) -> None:
        """Write a Hugging Face ``tokenizer.json`` giving the same ids."""
        from .formats.hf_json import write_hf_json

        write_hf_json(path, self._data)

    def to_hf(self):
        """A ``tokenizers.Tokenizer`` giving the same ids."""
        import json

        from tokenizers import Tokenizer as HFTokenizer

        from .formats.hf_json import hf_json_dict

        return HFTokenizer.from_str(json.dumps(hf_json_dict(self._data)))

    @classmethod
    def from_hf(cls, path) -> "BPETokenizer":
        from .formats.hf_json import read_hf_json

        return cls(read_hf_json(path))

    # seed 003
    @classmethod
    def from_file(cls, vocab_path, merges_path=None, special_tokens_path=None) -> "BPETokenizer":
        """Seed 003's loader: ``bpe_vocab.pkl`` + ``bpe_merges.pkl`` (+ ``special_tokens.txt``),
        read with a restricted unpickler; or any file :func:`tokenforge.load` reads."""
        from .formats.seed003 import read_seed003, sniff_seed003

        p = Path(vocab_path)
        head = p.read_bytes()[:4096] if p.is_file() else b""
        if merges_path is not None or sniff_seed003(p, head):
            return cls(read_seed003(p, merges_path, special_tokens_path))
        from .base import load

        tok = load(p)
        if not isinstance(tok, cls):
            raise FormatError(f"{p} holds a {type(tok).__name__}, not a BPE tokenizer")
        return tok

    def export_seed003(self, directory) -> None:
        """Write seed 003's three files (for tools that only read those)."""
        from .formats.seed003 import write_seed003

        write_seed003(directory, self._data, allow_other_pattern=True)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self._data.merges)}, pattern={self._data.pattern_name!r}, specials={len(self._specials)})"



def _train(
    documents,
    vocab_size,
    *,
    specials: list[str],
    pattern,
    tie_break: str,
    min_frequency: int,
    num_threads: int | None,
    layout: str,
    progress: bool | None,
) -> BPEData:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    vocab_size = int(vocab_size)
    if vocab_size < 256 + len(specials):
        raise VocabSizeError(
            f"vocab_size {vocab_size} is too small: 256 byte tokens + {len(specials)} special tokens need at least {256 + len(specials)}"
        )
    if tie_break not in TIE_BREAKS:
        raise TokenforgeError(f"unknown tie_break {tie_break!r}; expected one of {', '.join(TIE_BREAKS)}")
    if layout not in LAYOUTS:
        raise TokenforgeError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
        raise TokenforgeError(f"min_frequency must be an int >= 1, not {min_frequency!r}")
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise TokenforgeError(f"num_threads must be a positive int or None, not {num_threads!r}")
    regex, pattern_name = resolve_pattern(pattern)
    num_merges = vocab_size - 256 - len(specials)
    if layout == "nanochat":
        first_merge = 256
        special_ids = {s: 256 + num_merges + i for i, s in enumerate(specials)}
    else:
        first_merge = 256 + len(specials)
        special_ids = {s: 256 + i for i, s in enumerate(specials)}

    show = progress if progress is not None else None
    counter = _core.WordCounter(regex)
    batch: list[str] = []
    size = 0
    with progress_bar(total=None, desc="counting pieces", unit="B", enabled=show is not False) as bar:
        for doc in documents:
            batch.append(doc)
            size += len(doc)
            if size >= _BATCH_CHARS:
                counter.add_texts(batch, num_threads)
                bar.update(size)
                batch, size = [], 0
        if batch:
            counter.add_texts(batch, num_threads)
            bar.update(size)
    corpus_bytes = counter.total_bytes
    unique = counter.unique
    trainer = _core.BpeTrainer(counter, list(range(256)), [], first_merge, num_merges, tie_break, min_frequency, num_threads)
    with progress_bar(total=num_merges, desc="merging", unit="merges", enabled=show is not False) as bar:
        while not trainer.done:
            bar.update(trainer.run(seconds=0.2))
    merges = trainer.merges()
    if layout == "nanochat" and len(merges) < num_merges:
        # fewer merges than asked (corpus too small or min_frequency): specials follow the merges
        special_ids = {s: 256 + len(merges) + i for i, s in enumerate(specials)}
    training = {
        "vocab_size_requested": vocab_size,
        "num_merges": len(merges),
        "tie_break": tie_break,
        "min_frequency": min_frequency,
        "layout": layout,
        "corpus_bytes": int(corpus_bytes),
        "unique_pieces": int(unique),
        "trainer": f"tokenforge {_core.__version__}",
    }
    return BPEData(
        byte_ids=list(range(256)),
        merges=[tuple(m) for m in merges],
        special_tokens=special_ids,
        pattern=regex,
        pattern_name=pattern_name,
        training=training,
    )


def _sniff_dir(path: Path, head: bytes) -> bool:
    return path.is_dir() and (path / _DIR_FILE).is_file()


def _register() -> None:
    from .formats.hf_json import read_hf_json, sniff_hf_json
    from .formats.seed003 import read_seed003, sniff_seed003
    from .formats.tfjson import read_tfjson, sniff_tfjson
    from .formats.tiktoken_io import read_tiktoken_file, sniff_tiktoken

    register_format("tokenforge-bpe", sniff_tfjson, lambda p: BPETokenizer(read_tfjson(p)))
    register_format("tokenforge-bpe-dir", _sniff_dir, BPETokenizer.from_directory)
    register_format("huggingface-tokenizer.json", sniff_hf_json, lambda p: BPETokenizer(read_hf_json(p)))
    register_format("tiktoken", sniff_tiktoken, lambda p: BPETokenizer(read_tiktoken_file(p)))
    register_format("seed003-pickles", sniff_seed003, lambda p: BPETokenizer(read_seed003(p)))
