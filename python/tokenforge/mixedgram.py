"""Mixedgram: a latin1 tokenizer of 4,096 ids = the 256 bytes + the 3,840 best 2..8-grams.

The vocabulary of a text is every distinct 2..8-gram, counted with overlaps,
ranked by ``n × count`` (ties: longer first, then byte order); the top 3,840
become ids 256..4095. Text is cut greedily (longest n-gram at each position,
else the byte) or optimally (fewest tokens). Ids are 12 bits, packed two per
three bytes, so a ``.mxgram`` file (the vocabulary as a 38,400-byte header,
then the packed ids) also compresses text: two 8-grams, 16 bytes, are 3 bytes.

Rules the seed leaves open are fixed in the spec (``docs/formats.md`` has the
byte layout):

- Text is latin1: a ``str`` of characters U+0000..U+00FF, or ``bytes`` taken as
  latin1. Anything else raises :class:`Latin1Error` naming the character and
  its offset, unless ``errors="replace"`` (which writes ``?``).
- NUL characters are removed before training and encoding; decoding cannot
  bring them back. Id 0 is the packed stream's padding.

Special tokens. The 4,096 ids are all spoken for, so special tokens (for use
as an LM tokenizer, e.g. ``special_tokens="nanochat"``) take the *last* ids,
4096 - k .. 4095, and the vocabulary keeps the best 3,840 - k n-grams. By
default there are none (the seed's layout). Special tokens are ASCII. They
live in the vocabulary JSON (:meth:`Mixedgram.save`); a ``.mxgram`` header has
no place for them (their entries are written as unused), so compressed files
never contain them.

Not handled: text in other encodings than latin1 (decode it first, or pass
``encoding=`` when reading a file), NUL round trips, streams longer than
memory (files are read whole).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Literal, Optional, Sequence, Type, Union, cast

import numpy as np

from . import _core
from .base import SpecialArg, Tokenizer
from .chat import special_token_list
from .data.corpus import corpus_files, corpus_paths, iterator_documents
from .errors import FormatError, SpecialTokenError, TokenforgeError, VocabSizeError
from .formats import mxgram as _fmt
from .formats.atomic import atomic_open
from .formats.kinds import Format, dir_holding
from .formats.suffixes import check_save_suffix
from .hybrid import class_or_instance
from .ids import IdBatch, check_texts
from .latin1 import latin1_of_file, to_latin1
from .progress import progress_bar
from .rust_backed import RustBacked

__all__ = [
    "Mixedgram",
    "CompressStats",
    "VOCAB_SIZE",
    "NGRAM_SLOTS",
    "HEADER_BYTES",
    "PARSES",
    "to_latin1",
    "pack",
    "unpack",
    "pack12",
    "unpack12",
    "inspect_file",
]

VOCAB_SIZE = 4096
NGRAM_SLOTS = 3840
FIRST_NGRAM_ID = 256
HEADER_BYTES = _core.MIXEDGRAM_HEADER_BYTES
PARSES = ("greedy", "optimal")
_DIR_FILE = "mixedgram.json"
# Large inputs are encoded / decoded in steps of about this many bytes so a
# progress bar can move; each step is one GIL-free Rust call.
_STEP = 8 << 20


# ---------------------------------------------------------------------------
# text in and out
# ---------------------------------------------------------------------------
def _names_file(s: str) -> bool:
    return len(s) < 4096 and "\n" not in s and "\0" not in s and os.path.isfile(s)


def _read_source(
    src: object, text: Latin1Text | None, path: str | os.PathLike[str] | None, encoding: str, errors: str
) -> tuple[bytes, Path | None]:
    """(latin1 bytes, path or None) from exactly one of src / text= / path=.

    ``src``: a ``os.PathLike`` is a file; a ``str`` naming an existing file
    (one line, under 4096 characters) is that file; any other ``str`` or
    bytes-like is the text itself. ``text=``/``path=`` remove the guess.
    """
    given = sum(x is not None for x in (src, text, path))
    if given != 1:
        raise TypeError("give exactly one of: the text or path, text=, or path=")
    if src is not None:
        if isinstance(src, os.PathLike) or (isinstance(src, str) and _names_file(src)):
            path = src
        else:
            text = cast(Latin1Text, src)  # anything else is the text: to_latin1 refuses what is not
    if path is not None:
        p = Path(path)
        return latin1_of_file(p.read_bytes(), p, encoding, errors), p
    assert text is not None  # exactly one of the three was given (checked above)
    return to_latin1(text, errors), None


def _check_vocab_size(vocab_size: object) -> None:
    """``train(corpus, vocab_size)`` has every family's shape; mixedgram's size is
    the format's: 12-bit ids, 256 bytes and 3,840 n-gram slots."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    if vocab_size != VOCAB_SIZE:
        raise VocabSizeError(
            f"vocab_size {vocab_size}: a mixedgram vocabulary always has {VOCAB_SIZE:,} ids (12-bit codes: "
            f"256 bytes and {NGRAM_SLOTS:,} n-gram slots); leave vocab_size out or pass {VOCAB_SIZE}"
        )


def _check_parse(parse: object) -> str:
    if not isinstance(parse, str) or parse not in PARSES:
        raise TokenforgeError(f"unknown parse {parse!r}; expected 'greedy' or 'optimal'")
    return parse


class _WithPath:
    """Re-raise a FormatError from the core with the file's path added."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = path

    def __enter__(self) -> _WithPath:
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> Literal[False]:
        if self.path is not None and isinstance(exc, FormatError) and exc.path is None:
            raise FormatError(exc.reason, path=self.path, line=exc.line, offset=exc.offset) from None
        return False


# ---------------------------------------------------------------------------
# packing (module level: no vocabulary needed)
# ---------------------------------------------------------------------------
def pack(ids: Iterable[int]) -> bytes:
    """Pack token ids (1..4095) two per three bytes; an odd count gets a padding 0."""
    return _core.mixedgram_pack(ids)


def unpack(data: Buffer, as_numpy: bool = False) -> Any:
    """Ids of a packed stream (the final padding 0 dropped). A length that is not
    a multiple of 3, or a 0 before the end, raises FormatError with the offset."""
    arr = _core.mixedgram_unpack(bytes(data))
    return arr if as_numpy else arr.tolist()


def pack12(values: Iterable[int]) -> bytes:
    """Raw 12-bit packing of any values 0..4095 (no padding rule)."""
    return _core.mixedgram_pack12(values)


def unpack12(data: Buffer) -> list[int]:
    """Raw 12-bit unpacking: two values per three bytes."""
    return _core.mixedgram_unpack12(bytes(data)).tolist()


# ---------------------------------------------------------------------------
# the tokenizer
# ---------------------------------------------------------------------------
class _Keep:
    """The default of ``special_tokens``: keep what the tokenizer has (shown as such by help())."""

    def __repr__(self) -> str:
        return "<keep>"


_KEEP = _Keep()

#: a text as mixedgram reads it: a str of latin1 characters, or its bytes
Latin1Text = Union[str, bytes, bytearray, memoryview]
#: bytes-like data (a packed stream, an n-gram)
Buffer = Union[bytes, bytearray, memoryview]


def _special_ids(special_tokens: object) -> dict[str, int]:
    """{text: id} from None, "nanochat", a list (last ids, in order) or a dict."""
    if isinstance(special_tokens, dict):
        out = dict(special_tokens)
    else:
        names = special_token_list(special_tokens, or_dict=True)
        if len(names) > NGRAM_SLOTS:
            raise SpecialTokenError(f"{len(names)} special tokens do not fit in {NGRAM_SLOTS} slots")
        first = VOCAB_SIZE - len(names)
        out = {name: first + j for j, name in enumerate(names)}
    for text, i in out.items():
        if not isinstance(text, str) or not text or not text.isascii() or "\0" in text:
            raise SpecialTokenError(
                f"special token {text!r}: mixedgram special tokens are non-empty ASCII strings without NUL"
            )
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not FIRST_NGRAM_ID <= int(i) < VOCAB_SIZE:
            raise SpecialTokenError(
                f"special token {text!r} has id {i!r}; special ids are {FIRST_NGRAM_ID}..{VOCAB_SIZE - 1}"
            )
    return {t: int(i) for t, i in out.items()}


@dataclasses.dataclass
class CompressStats:
    """What :meth:`Mixedgram.compress` did."""

    input_bytes: int  #: latin1 bytes read, NULs included
    nul_removed: int
    tokens: int
    output_bytes: int  #: the .mxgram file: 38,400 + 3 × ceil(tokens / 2)
    parse: str
    trained: bool  #: whether the vocabulary was trained on this input
    tokenizer: "Mixedgram"

    @property
    def ratio(self) -> float:
        """Input bytes per output byte (higher is better)."""
        return self.input_bytes / self.output_bytes if self.output_bytes else 0.0


class Mixedgram(RustBacked, Tokenizer):
    """The mixedgram tokenizer (seed 001): 4,096 ids, latin1 text, 12-bit packing.

    Build one with :meth:`train` (or :meth:`compress` of a text), :meth:`load`
    / :func:`tokenforge.load`, or from a list of n-grams (``ngrams[i]`` is id
    256 + i; ``b""`` leaves the slot unused). ``parse`` is the default of
    :meth:`encode`: "greedy" (the seed's) or "optimal" (fewest tokens).
    ``errors`` ("strict" or "replace") is what encoding does with characters
    above U+00FF.
    """

    text_encoding = "latin-1"  # one byte per character (offsets)

    family = "mixedgram"

    def __init__(
        self,
        ngrams: Iterable[Buffer] = (),
        special_tokens: object = None,
        *,
        counts: Sequence[int] | None = None,
        training: dict | None = None,
        parse: str = "greedy",
        errors: str = "strict",
    ) -> None:
        grams = [bytes(g) for g in ngrams]
        if len(grams) > NGRAM_SLOTS:
            raise TokenforgeError(f"{len(grams)} n-grams given; a mixedgram vocabulary has {NGRAM_SLOTS} slots")
        grams += [b""] * (NGRAM_SLOTS - len(grams))
        specials = _special_ids(special_tokens)
        self._model = _core.MixedgramModel(grams, [(i, t.encode("ascii")) for t, i in specials.items()])
        self._ngrams = grams
        self._specials = specials
        self._counts = None if counts is None else [int(c) for c in counts] + [0] * (NGRAM_SLOTS - len(counts))
        self._training = dict(training or {})
        self.parse = _check_parse(parse)
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
        self.errors = errors

    # ---- training ----------------------------------------------------------
    @class_or_instance
    def train(
        cls: type[Mixedgram],
        self: Mixedgram | None,
        corpus: object = None,
        vocab_size: int = VOCAB_SIZE,
        *,
        text: Latin1Text | None = None,
        path: str | os.PathLike[str] | None = None,
        special_tokens: object = _KEEP,
        encoding: str = "latin-1",
        errors: str | None = None,
        num_threads: int | None = None,
        progress: bool = False,
        client: Any = None,
        partition_bytes: int | None = None,
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
    ) -> "Mixedgram":
        """Train on one text. ``corpus`` follows every family's corpus rule:
        a path or a list of paths (``str`` or ``pathlib.Path``; a directory gives
        its corpus files) whose bytes are latin1 unless ``encoding=`` says
        otherwise, several files joined by a newline; a ``str`` that names no
        file is a :class:`~tokenforge.errors.CorpusError`. ``bytes`` there (or
        ``text=``, a ``str`` of latin1 characters or bytes) is the text itself;
        ``path=`` is one file. Many texts: :meth:`train_from_iterator`. NULs are
        removed first. ``vocab_size`` is there for every family's shape,
        ``train(corpus, vocab_size, ...)``: a mixedgram vocabulary always has
        4,096 ids, and any other value is a
        :class:`~tokenforge.errors.VocabSizeError`.

        On the class this returns a new tokenizer; on an instance it replaces
        that instance's vocabulary and returns it. The result does not depend
        on ``num_threads``.

        ``client`` (a ``distributed.Client``, a scheduler address, or a runner
        of :mod:`tokenforge.cluster`) counts on a cluster: workers read pieces
        of about ``partition_bytes`` of the files (URLs such as ``s3://...``
        too) and count their n-grams level by level
        (:mod:`tokenforge.mixedgram_dist`); the result is byte-identical to
        training here, statistics included.

        ``max_memory`` (bytes or a size such as ``"4GB"``; None: 3/4 of the
        memory available) bounds the counting here: the text is held whole
        (with two bits a byte for the positions still counted), and the
        n-gram tables of levels 3..8 spill sorted runs to ``tmp_dir`` (None:
        the system's) past ``counting.SPILL_SHARE`` of the rest, merged at the
        end of each level into exactly the n-grams the selection needs (those
        counted at least ``c`` times, see :mod:`tokenforge.mixedgram`'s spec).
        Nothing is ever dropped: the vocabulary and its statistics are
        byte-identical to unbounded training, or, when the needed n-grams of
        a level do not fit ``counting.KEEP_SHARE`` of the rest (or the text
        alone passes the budget), a :class:`~tokenforge.errors.TokenforgeError`
        names a budget that would do. Not applied with ``client`` (an explicit
        ``max_memory`` there is refused).
        """
        _check_vocab_size(vocab_size)
        errors = errors or (self.errors if self is not None else "strict")
        if special_tokens is _KEEP:
            special_tokens = dict(self._specials) if self is not None else None
        specials = _special_ids(special_tokens)
        paths = None
        if client is not None:
            if max_memory is not None:
                raise TokenforgeError(
                    "Mixedgram.train: max_memory applies to counting here; with client= the workers count and "
                    "the budget is not applied (leave max_memory out)"
                )
            tok = cls._train_distributed(
                corpus, text, path, specials, encoding, errors, client, partition_bytes, num_threads, progress
            )
            tok.errors = errors
            if self is None:
                return tok
            self.__dict__.update({k: v for k, v in tok.__dict__.items() if k not in ("parse",)})
            return self
        if corpus is not None and not isinstance(corpus, (bytes, bytearray, memoryview)):
            if text is not None or path is not None:
                raise TypeError("give exactly one of: the text or path, text=, or path=")
            # any file is read as bytes; a directory gives its corpus files (.txt, .jsonl, ...)
            paths = [
                f for p in corpus_paths(corpus, who="Mixedgram.train") for f in (corpus_files(p) if p.is_dir() else [p])
            ]
        with progress_bar(total=None, desc="mixedgram: reading", unit="B", enabled=progress) as bar:
            if paths is None:
                data, _ = _read_source(corpus, text, path, encoding, errors)
            else:
                data = b"\n".join(_read_source(None, None, p, encoding, errors)[0] for p in paths)
            bar.update(len(data))
        tok = cls._train_bytes(
            data, specials, num_threads=num_threads, progress=progress, max_memory=max_memory, tmp_dir=tmp_dir
        )
        tok.errors = errors
        if self is None:
            return tok
        self.__dict__.update({k: v for k, v in tok.__dict__.items() if k not in ("parse",)})
        return self

    @classmethod
    def train_from_iterator(cls, iterator: Iterable[str], vocab_size: int = VOCAB_SIZE, **kwargs: Any) -> "Mixedgram":
        """Train on an iterable of str (texts, never paths), joined by a newline
        into one text; the other arguments are :meth:`train`'s."""
        _check_vocab_size(vocab_size)
        docs = iterator_documents(iterator, who="Mixedgram.train_from_iterator")
        return cls.train(text="\n".join(docs), vocab_size=vocab_size, **kwargs)

    @classmethod
    def _train_bytes(
        cls,
        data: bytes,
        specials: dict[str, int],
        *,
        num_threads: int | None = None,
        progress: bool = False,
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
    ) -> "Mixedgram":
        slots = NGRAM_SLOTS - len(specials)
        spill = _spill_bounds(len(data), max_memory, tmp_dir)
        with progress_bar(total=None, desc="mixedgram: counting 2..8-grams", unit="B", enabled=progress) as bar:
            top, stats = _core.mixedgram_train(data, slots, num_threads, spill)
            bar.update(len(data))
        return cls._from_selection(top, stats, specials)

    @classmethod
    def _train_distributed(
        cls,
        src: object,
        text: Latin1Text | None,
        path: str | os.PathLike[str] | None,
        specials: dict[str, int],
        encoding: str,
        errors: str,
        client: Any,
        partition_bytes: int | None,
        num_threads: int | None,
        progress: bool,
    ) -> "Mixedgram":
        from . import mixedgram_dist as dist

        target = dist.DEFAULT_TARGET_BYTES if partition_bytes is None else partition_bytes
        if src is not None and not isinstance(src, (bytes, bytearray, memoryview)):
            if text is not None or path is not None:
                raise TypeError("give exactly one of: the text or path, text=, or path=")
            pieces = dist.plan_pieces(dist.corpus_items(src), target_bytes=target, encoding=encoding, errors=errors)
        elif path is not None and src is None and text is None:
            pieces = dist.plan_pieces([str(path)], target_bytes=target, encoding=encoding, errors=errors)
        else:
            data, _ = _read_source(src, text, None, encoding, errors)
            pieces = dist.plan_text_pieces(data, target_bytes=target)
        top, stats = dist.select(
            pieces, NGRAM_SLOTS - len(specials), client=client, num_threads=num_threads, progress=progress
        )
        return cls._from_selection(top, stats, specials)

    @classmethod
    def _from_selection(cls, top: Sequence[tuple[bytes, int]], stats: dict, specials: dict[str, int]) -> "Mixedgram":
        grams = [g for g, _ in top]
        counts = [c for _, c in top]
        # Specials sit in the last slots; n-grams fill from 256 and never reach them.
        training = {
            "text_bytes": stats["text_bytes"],
            "nul_removed": stats["nul_removed"],
            "distinct_counted": {str(n): stats["distinct"][n] for n in range(2, 9)},
        }
        return cls(grams, specials, counts=counts, training=training)

    # ---- the contract ------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    @property
    def ngrams(self) -> list[bytes]:
        """The 3,840 slots, id 256 + i; ``b""`` for unused and special slots."""
        return list(self._ngrams)

    @property
    def ngram_count(self) -> int:
        return self._model.ngram_count

    @property
    def counts(self) -> list[int] | None:
        """Training counts per slot (0 for unused), if known."""
        return None if self._counts is None else list(self._counts)

    @property
    def training(self) -> dict:
        return dict(self._training)

    def _with_parse(self, parse: str | None) -> "Mixedgram":
        p = self.parse if parse is None else _check_parse(parse)
        if p == self.parse:
            return self
        other = copy.copy(self)
        other.parse = p
        return other

    def encode(
        self,
        text: Latin1Text | list[str] | tuple[str, ...],
        prepend: str | int | None = None,
        append: str | int | None = None,
        num_threads: int | None = None,
        *,
        allowed_special: SpecialArg | None = (),
        disallowed_special: SpecialArg = (),
        parse: str | None = None,
    ) -> Any:  # as the contract's overloads: list[int] for one text, list[list[int]] for a list
        """The contract's ``encode`` (a str or a list of str; bytes are taken as
        latin1), plus ``parse``: "greedy" or "optimal" (default: ``self.parse``)."""
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("latin-1")
        tok = self._with_parse(parse)
        return Tokenizer.encode(
            tok,
            text,
            prepend,
            append,
            num_threads,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
        )

    def normalize(self, text: str) -> str:
        """The text as mixedgram sees it: NUL characters removed (see the module docstring)."""
        return text.replace("\x00", "")

    def encode_ordinary(self, text: str, parse: str | None = None) -> list[int]:
        return self.encode_to_numpy(text, parse=parse).tolist()

    def encode_to_numpy(self, text: str, parse: str | None = None) -> np.ndarray:
        """Encode one text (str or latin1 bytes) straight into a uint16 array."""
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        p = self.parse if parse is None else _check_parse(parse)
        return self._model.encode(to_latin1(text, self.errors), p)

    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False, parse: str | None = None
    ) -> list[list[int]] | IdBatch:
        """Encode many texts in parallel (GIL released)."""
        check_texts(texts)
        p = self.parse if parse is None else _check_parse(parse)
        data = [to_latin1(t, self.errors) for t in texts]
        flat, offsets = self._model.encode_batch(data, p, num_threads)
        if as_numpy:
            return IdBatch(flat.astype(np.uint32), offsets)
        ids = flat.tolist()
        off = offsets.tolist()
        return [ids[off[i] : off[i + 1]] for i in range(len(data))]

    def encode_batch_flat(
        self, texts: Sequence[str], num_threads: int | None = None, parse: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(flat uint32 ids, int64 offsets) of many texts (see
        :meth:`Tokenizer.encode_batch_flat`); the core's ids are uint16, widened once."""
        check_texts(texts)
        p = self.parse if parse is None else _check_parse(parse)
        flat, offsets = self._model.encode_batch([to_latin1(t, self.errors) for t in texts], p, num_threads)
        return flat.astype(np.uint32), offsets

    def decode(self, ids: Iterable[int]) -> str:
        """The latin1 text of ``ids`` (special tokens as their text)."""
        return self._model.decode_bytes(ids).decode("latin-1")

    def id_to_token(self, id: int) -> str:
        return self.id_to_bytes(id).decode("latin-1")

    # ---- packing -----------------------------------------------------------
    def pack(self, ids: Iterable[int]) -> bytes:
        """Pack ids two per three bytes (see :func:`tokenforge.mixedgram.pack`)."""
        return pack(ids)

    def unpack(self, data: Buffer, as_numpy: bool = False) -> Any:
        """Ids of a packed stream (see :func:`tokenforge.mixedgram.unpack`)."""
        return unpack(data, as_numpy=as_numpy)

    # ---- .mxgram files -----------------------------------------------------
    @class_or_instance
    def compress(
        cls: type[Mixedgram],
        self: Mixedgram | None,
        src: object = None,
        dst: str | os.PathLike[str] | None = None,
        *,
        text: Latin1Text | None = None,
        path: str | os.PathLike[str] | None = None,
        parse: str | None = None,
        train: bool | None = None,
        encoding: str = "latin-1",
        errors: str | None = None,
        num_threads: int | None = None,
        progress: bool = False,
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
    ) -> CompressStats:
        """Write ``dst`` as a ``.mxgram`` file of the text ``src`` (str, bytes or a
        path, as in :meth:`train`; or ``text=`` / ``path=``).

        The vocabulary is trained on the text when called on the class, on an
        instance without n-grams, or with ``train=True``; otherwise the
        instance's vocabulary is used. The write is atomic. ``max_memory`` and
        ``tmp_dir`` bound the training's counting, as in :meth:`train`.
        """
        if dst is None:
            raise TypeError("compress needs a destination path (dst)")
        errors = errors or (self.errors if self is not None else "strict")
        with progress_bar(total=None, desc="mixedgram: reading", unit="B", enabled=progress) as bar:
            data, _ = _read_source(src, text, path, encoding, errors)
            bar.update(len(data))
        input_bytes = len(data)
        data, removed = _core.mixedgram_strip_nul(data)
        must_train = train if train is not None else (self is None or self.ngram_count == 0)
        if must_train:
            tok = cls._train_bytes(
                data, {}, num_threads=num_threads, progress=progress, max_memory=max_memory, tmp_dir=tmp_dir
            )
        elif self is None:
            raise TypeError("compress(train=False) on the class has no vocabulary: call it on a trained Mixedgram")
        else:
            tok = self
        p = tok.parse if parse is None else _check_parse(parse)
        model = tok._model
        if progress and p == "greedy" and len(data) > _STEP:
            parts = []
            with progress_bar(total=len(data), desc="mixedgram: encoding", unit="B", enabled=True) as bar:
                pos = 0
                while pos < len(data):
                    ids, nxt = model.encode_range(data, pos, pos + _STEP)
                    parts.append(ids)
                    bar.update(nxt - pos)
                    pos = nxt
            ids = np.concatenate(parts) if parts else np.zeros(0, np.uint16)
            ntok = len(ids)
            chunks = [model.header(), _core.mixedgram_pack(ids)]
        else:
            blob, ntok = model.compress(data, p)
            chunks = [blob]
        size = sum(len(c) for c in chunks)
        with progress_bar(total=size, desc="mixedgram: writing", unit="B", enabled=progress) as bar:
            with atomic_open(dst, "wb") as f:
                for c in chunks:
                    f.write(c)
                    bar.update(len(c))
        return CompressStats(input_bytes, int(removed), int(ntok), size, p, bool(must_train), tok)

    @staticmethod
    def decompress_bytes(src: Buffer | str | os.PathLike[str], *, progress: bool = False) -> bytes:
        """The latin1 bytes of a ``.mxgram`` file (a path, or the file's bytes)."""
        where: Path | None
        if isinstance(src, (bytes, bytearray, memoryview)):
            where, data = None, bytes(src)
        else:
            where = Path(src)
            data = where.read_bytes()
        with _WithPath(where):
            if not progress or len(data) <= HEADER_BYTES + _STEP:
                return _core.mixedgram_decompress(data)
            model = _core.MixedgramModel.from_header(data)
            out = []
            step = _STEP - _STEP % 3
            end = len(data)
            if (end - HEADER_BYTES) % 3:
                # Let the core report the exact offset of the stray bytes.
                _core.mixedgram_decompress(data)
            with progress_bar(total=end - HEADER_BYTES, desc="mixedgram: decoding", unit="B", enabled=True) as bar:
                for start in range(HEADER_BYTES, end, step):
                    stop = min(start + step, end)
                    out.append(model.decode_stream(data[start:stop], start, stop == end))
                    bar.update(stop - start)
            return b"".join(out)

    @class_or_instance
    def decompress(
        cls: type[Mixedgram], self: Mixedgram | None, src: Buffer | str | os.PathLike[str], *, progress: bool = False
    ) -> str:
        """The text of a ``.mxgram`` file (its own vocabulary is used), NULs gone."""
        return cls.decompress_bytes(src, progress=progress).decode("latin-1")

    # ---- saving and loading -------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the vocabulary. ``*.mxgram``: the seed's header with an empty
        stream (no special tokens, no counts); ``*.json``: tokenforge's
        vocabulary JSON; anything else: a directory with ``mixedgram.json``."""
        check_save_suffix(path, (".mxgram", ".json"), "Mixedgram.save")
        p = Path(path)
        if p.suffix.lower() == ".mxgram":
            if self._specials:
                raise TokenforgeError(
                    "a .mxgram header has no place for special tokens; save to a .json file (or a directory) to keep them"
                )
            with atomic_open(p, "wb") as f:
                f.write(self._model.header())
            return
        if p.suffix.lower() != ".json":
            p.mkdir(parents=True, exist_ok=True)
            p = p / _DIR_FILE
        _fmt.write_vocab_json(p, self._ngrams, self._counts, self._specials, self._training)

    def to_bytes(self) -> bytes:
        """The vocabulary JSON :meth:`save` writes, as bytes (how a tokenizer pickles: :mod:`tokenforge.base`)."""
        return _fmt.vocab_json_text(self._ngrams, self._counts, self._specials, self._training).encode("utf-8")

    def transport_state(self) -> dict:
        return {"parse": self.parse, "errors": self.errors}

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "Mixedgram":
        d = _fmt.vocab_json_from_bytes(data, f"<pickled {cls.__name__}>")
        return cls(
            d["ngrams"],
            d["special_tokens"],
            counts=d["counts"],
            training=d["training"],
            parse=state.get("parse", "greedy"),
            errors=state.get("errors", "strict"),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Mixedgram":
        """Load a vocabulary JSON, a directory holding ``mixedgram.json``, or the
        vocabulary of a ``.mxgram`` file (only its header is read)."""
        p = Path(path)
        if p.is_dir():
            p = p / _DIR_FILE
        with open(p, "rb") as f:
            head = f.read(HEADER_BYTES)
        if _fmt.sniff_vocab_json(p, head):
            d = _fmt.read_vocab_json(p)
            return cls(d["ngrams"], d["special_tokens"], counts=d["counts"], training=d["training"])
        with _WithPath(p):
            model = _core.MixedgramModel.from_header(head)
        return cls(model.ngrams(), training={"source": p.name})

    def __repr__(self) -> str:
        return f"Mixedgram(ngrams={self.ngram_count}, specials={len(self._specials)}, parse={self.parse!r})"


# ---------------------------------------------------------------------------
# inspection
# ---------------------------------------------------------------------------
def _spill_bounds(
    text_bytes: int, max_memory: int | str | None, tmp_dir: str | os.PathLike[str] | None
) -> tuple[str, int, int, float, int] | None:
    """The core's bounds of counting under a memory budget (``_core.mixedgram_train``'s
    ``spill``: tmp_dir, table limit, kept-table limit, budget per kept byte, bytes held
    besides), or None without a budget. The text and its two bit vectors (a bit per
    position each) are held whole: a budget they pass is an error naming one that
    would do."""
    from .counting import KEEP_SHARE, MIN_BUDGET, SPILL_SHARE, memory_budget, spill_parent

    budget = memory_budget(max_memory)
    if budget is None:
        return None
    fixed = text_bytes + 2 * (text_bytes // 8 + 16)
    rest = budget - fixed
    if rest < MIN_BUDGET:
        raise TokenforgeError(
            f"Mixedgram.train: max_memory={budget} bytes: the memory budget is too small: the text and its position "
            f"bits take {fixed} bytes, held whole; a budget of at least {fixed + MIN_BUDGET} bytes"
        )
    return spill_parent(tmp_dir), int(rest * SPILL_SHARE), int(rest * KEEP_SHARE), 1 / KEEP_SHARE, fixed


def _overlaps(grams: list[bytes]) -> dict:
    """How many vocabulary n-grams sit inside a longer one ("actual" in "actually")."""
    vocab = set(g for g in grams if g)
    inside = set()
    prefix = set()
    suffix = set()
    for g in vocab:
        n = len(g)
        for m in range(2, n):
            for i in range(n - m + 1):
                s = g[i : i + m]
                if s in vocab:
                    inside.add(s)
                    if i == 0:
                        prefix.add(s)
                    if i + m == n:
                        suffix.add(s)
    return {
        "inside_longer": len(inside),
        "prefix_of_longer": len(prefix),
        "suffix_of_longer": len(suffix),
    }


def inspect_file(path: str | os.PathLike[str], *, top: int = 20, progress: bool = False) -> dict:
    """Statistics of a ``.mxgram`` file or a saved vocabulary: entries by n, the
    top entries, overlaps, and (for a ``.mxgram``) how the stream uses them and
    the compression ratio."""
    p = Path(path)
    size = p.stat().st_size if p.is_file() else None
    head = b""
    if p.is_file():
        with open(p, "rb") as f:
            head = f.read(4096)
    is_vocab = p.is_dir() or _fmt.sniff_vocab_json(p, head)
    info: dict = {"path": str(p), "kind": "vocabulary" if is_vocab else "mxgram", "file_bytes": size}
    uses = None
    if is_vocab:
        tok = Mixedgram.load(p)
    else:
        data = p.read_bytes()
        with _WithPath(p):
            model = _core.MixedgramModel.from_header(data)
            if (len(data) - HEADER_BYTES) % 3:
                _core.mixedgram_decompress(data)  # names the offset of the stray bytes
            hist = np.zeros(VOCAB_SIZE, np.uint64)
            step = _STEP - _STEP % 3
            with progress_bar(
                total=len(data) - HEADER_BYTES, desc="mixedgram: reading stream", unit="B", enabled=progress
            ) as bar:
                for start in range(HEADER_BYTES, len(data), step):
                    stop = min(start + step, len(data))
                    hist += model.histogram(data[start:stop], start, stop == len(data))
                    bar.update(stop - start)
        tok = Mixedgram(model.ngrams())
        uses = hist
        lengths = tok.token_bytes().astype(np.uint64)
        tokens = int(hist.sum())
        text_bytes = int((hist * lengths).sum())
        stream = len(data) - HEADER_BYTES
        ngram_uses = hist[FIRST_NGRAM_ID:]
        used_slots = np.array([bool(g) for g in tok.ngrams])
        info["stream"] = {
            "tokens": tokens,
            "stream_bytes": stream,
            "text_bytes": text_bytes,
            "bytes_per_token": text_bytes / tokens if tokens else 0.0,
            "ngram_tokens": int(ngram_uses.sum()),
            "byte_tokens": int(hist[:FIRST_NGRAM_ID].sum()),
            "unused_entries": int((used_slots & (ngram_uses == 0)).sum()),
            "ratio_file": text_bytes / len(data) if len(data) else 0.0,
            "ratio_stream": text_bytes / stream if stream else 0.0,
        }
    grams = tok.ngrams
    by_n = {n: 0 for n in range(2, 9)}
    for g in grams:
        if g:
            by_n[len(g)] += 1
    info["ngrams"] = tok.ngram_count
    info["unused_slots"] = NGRAM_SLOTS - tok.ngram_count - len(tok.special_tokens)
    info["special_tokens"] = tok.special_tokens
    info["by_n"] = by_n
    info["overlaps"] = _overlaps(grams)
    counts = tok.counts
    rows = []
    for i, g in enumerate(grams):
        if not g:
            continue
        row = {"id": FIRST_NGRAM_ID + i, "ngram": g.decode("latin-1"), "n": len(g)}
        if counts is not None:
            row["count"] = counts[i]
            row["score"] = counts[i] * len(g)
        if uses is not None:
            row["uses"] = int(uses[FIRST_NGRAM_ID + i])
        rows.append(row)
        if len(rows) >= top:
            break
    info["top"] = rows
    return info


# ---------------------------------------------------------------------------
# tokenforge.load
# ---------------------------------------------------------------------------
def token_detail(tok: Mixedgram) -> Callable[[int, Callable[[int], dict]], dict]:
    """The playground's detail of ``tok``'s ids (the family record's ``detail``
    hook): ``n``, the n-gram's length in bytes, and its training ``count`` when
    the file kept counts; ``byte`` for the 256 byte ids."""
    counts = tok.counts

    def detail(id: int, ref: Callable[[int], dict]) -> dict:
        if id < 256:
            return {"byte": id}
        out: dict = {"n": len(tok.id_to_bytes(id))}
        if counts is not None and id - 256 < len(counts):
            out["count"] = int(counts[id - 256])
        return out

    return detail


def file_formats() -> list[Format]:
    """The mixedgram files :func:`tokenforge.load` reads (the family's record points here)."""
    return [
        Format("tokenforge-mixedgram", _fmt.sniff_vocab_json, Mixedgram.load),
        Format("tokenforge-mixedgram-dir", dir_holding(_DIR_FILE), Mixedgram.load),
        Format("mxgram", _fmt.sniff_mxgram, Mixedgram.load),
    ]
