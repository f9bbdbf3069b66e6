"""The ever-growing BPE vocabulary (seed 002, NeuroShard's ``NeuroTokenizer``).

Ids: PAD 0, BOS 1, EOS 2, UNK 3, 4-9 reserved, byte b at b + 10, learned
merges from 266 upwards. ``current_vocab_size`` (= ``next_merge_id``) is the
number of ids in use; ``vocab_size`` is the declared maximum (10,000,000 by
default). The vocabulary only ever grows: :meth:`~GrowingBPETokenizer.learn_merges`
appends merges learned from a new source on top of the existing ones, and
:meth:`~GrowingBPETokenizer.sync` takes a remote copy only if it extends the
local one, so every id ever handed out keeps its meaning.

Text is NFC-normalised, split with GPT-4's (cl100k) pattern (numbers of 1-3
digits), and each piece is encoded from its bytes by applying the learned
merges, lowest merge id first, leftmost on a tie. Training and encoding use the
same Rust engine as :class:`tokenforge.BPETokenizer`; only the id layout differs.

Decisions where the seed leaves room (see ``docs`` and ``specs/growing.md``):

- ties between equally frequent pairs go to the smaller ``(left, right)`` id pair
  (the seed's ``Counter.most_common`` depends on insertion order), so training
  is deterministic whatever the thread count;
- ``decode`` follows the seed: ids 0-3 give nothing, reserved ids 4-9 and ids
  not (yet) in the vocabulary give ``"<unk>"``. With ``skip_special_tokens=False``
  ids 0-3 give their text (``<|bos|>``...) instead of nothing;
- ``encode`` is the contract's, as every family's (no BOS/EOS unless asked with
  nanochat's ``prepend``/``append``); the seed's encode -- BOS ... EOS by
  default, ``max_length``, ``truncation``, ``padding`` -- is
  :meth:`~GrowingBPETokenizer.encode_for_model`, and ``batch_encode`` (the
  seed's batch call) goes through it. The seed's own example
  (``encode("Hello, world!")`` giving merges only) reads as ``encode``;
- ``encode`` does not count tokens into ``total_tokens_processed`` (the seed
  did, which made saved files depend on how much had been encoded);
  :meth:`learn_merges` adds the UTF-8 bytes it learned from;
- because text is NFC-normalised, ``decode(encode(s)) == unicodedata.normalize("NFC", s)``:
  the round trip is exact for NFC text (nearly all text), not for every str;
- a lone surrogate (Python allows them in a str) is encoded as the byte ids of
  its three "surrogatepass" bytes and decodes back (see :mod:`tokenforge.base`).

The sync protocol (what a remote must be to be taken, the bounded download,
the auto-sync thread) lives in :mod:`tokenforge.sync`; :meth:`~GrowingBPETokenizer.sync`
and :meth:`~GrowingBPETokenizer.auto_sync` here are thin methods over it.

Not handled: special-token text inside input is plain text unless
``allowed_special`` says otherwise; removing or renumbering merges (by design);
what :mod:`tokenforge.sync` does not handle.
"""

from __future__ import annotations

import json
import os
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

import numpy as np

from . import _core
from . import sync as _sync
from .base import Tokenizer
from .bpe_structure import Detail, bpe_embedding_metadata, merge_detail
from .counting import DocRule, count_pieces
from .data.corpus import Texts, corpus_source
from .errors import TokenforgeError, VocabSizeError
from .formats.growing_json import (
    BYTE_OFFSET,
    DEFAULT_VOCAB_SIZE,
    MAX_ID,
    MERGE_OFFSET,
    GrowingData,
    growing_json_from_bytes,
    growing_json_text,
    read_growing_json,
    sniff_growing_json,
    write_growing_json,
)
from .formats.kinds import HEAD_BYTES, Format
from .formats.patterns import resolve_pattern
from .formats.suffixes import check_save_suffix
from .ids import IdBatch, check_text, check_texts
from .progress import run_sliced
from .rust_backed import batch_flat, batch_ids
from .surrogates import decode_utf8, encode_around_surrogates
from .sync import DEFAULT_MAX_BYTES, AutoSync, SyncReport

__all__ = [
    "GrowingBPETokenizer",
    "NeuroTokenizer",
    "SyncReport",
    "AutoSync",
    "get_neuro_tokenizer",
    "DEFAULT_MAX_BYTES",
]

_SPECIALS = {"<|pad|>": 0, "<|bos|>": 1, "<|eos|>": 2, "<|unk|>": 3}
_SPECIAL_TEXT = {i: s.encode() for s, i in _SPECIALS.items()}
_UNK_TEXT = b"<unk>"
_BYTE_IDS = [b + BYTE_OFFSET for b in range(256)]
_DEFAULT_FILE = "tokenizer.json"
#: the vocabulary's own file in a save_pretrained directory (tokenizer.json there is Hugging Face's)
_PRETRAINED_FILE = "tokenforge-growing.json"


def _nfc(text: str) -> str:
    # normalize() starts with a quick check, so NFC text (nearly all) costs one scan.
    return unicodedata.normalize("NFC", text)


def _resolve_pattern(pattern: str | None) -> str | None:
    return resolve_pattern(pattern)[0]


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise TokenforgeError(f"{name} must be {rng}, not {value}")
    return value


@dataclass(frozen=True, eq=False)
class _State:
    """One vocabulary: its data and the Rust model built from it, swapped as one reference.

    Every method reads ``self._state`` once, so a concurrent :meth:`~GrowingBPETokenizer.sync`
    (or :meth:`~GrowingBPETokenizer.auto_sync`) gives it the old or the new vocabulary, never
    a mix. ``views`` caches the read-only mappings derived from ``data``.
    """

    data: GrowingData
    model: _core.BpeModel
    views: dict = field(default_factory=dict)


class GrowingBPETokenizer(Tokenizer):
    """A byte-level BPE vocabulary that only grows (seed 002's ``NeuroTokenizer``).

    ``GrowingBPETokenizer()`` is the byte-level start (266 ids); grow it with
    :meth:`learn_merges`, read and write the seed's ``tokenizer.json`` with
    :meth:`load`/:meth:`save`, and follow a published copy with :meth:`sync`.
    """

    family = "growing"

    PAD_TOKEN = "<|pad|>"
    BOS_TOKEN = "<|bos|>"
    EOS_TOKEN = "<|eos|>"
    UNK_TOKEN = "<|unk|>"
    PAD_ID = 0
    BOS_ID = 1
    EOS_ID = 2
    UNK_ID = 3
    BYTE_OFFSET = BYTE_OFFSET
    MERGE_OFFSET = MERGE_OFFSET

    def __init__(
        self, vocab_size: int = DEFAULT_VOCAB_SIZE, *, pattern: str | None = "cl100k", normalization: str | None = "NFC"
    ) -> None:
        vocab_size = _check_int("vocab_size", vocab_size, MERGE_OFFSET, MAX_ID + 1)
        if normalization not in ("NFC", None):
            raise TokenforgeError(f'normalization must be "NFC" or None, not {normalization!r}')
        self._path: Path | None = None
        self._lock = threading.RLock()
        self._set(GrowingData(vocab_size=vocab_size, pattern=_resolve_pattern(pattern), normalization=normalization))

    @classmethod
    def train(
        cls,
        corpus: object,
        vocab_size: int = DEFAULT_VOCAB_SIZE,
        *,
        num_merges: int | None = None,
        pattern: str | None = "cl100k",
        normalization: str | None = "NFC",
        text_field: str = "text",
        split_on: str | None = None,
        errors: str = "strict",
        **learn_kwargs: Any,
    ) -> "GrowingBPETokenizer":
        """A new vocabulary of at most ``vocab_size`` ids, its merges learned from
        files: ``corpus`` is a path or a list of paths (``str`` or ``pathlib.Path``;
        a ``str`` that names no file is a :class:`~tokenforge.errors.CorpusError`);
        texts go to :meth:`train_from_iterator`. ``num_merges`` defaults to filling
        the vocabulary; ``learn_kwargs`` are :meth:`learn_merges`'s (``source``,
        ``min_frequency``, ``num_threads``, ``progress``, ``client``, ``max_memory``,
        ``tmp_dir``)."""
        tok = cls(vocab_size, pattern=pattern, normalization=normalization)
        room = tok.vocab_size - tok.next_merge_id
        unknown = set(learn_kwargs) - {
            "source",
            "min_frequency",
            "num_threads",
            "progress",
            "client",
            "max_memory",
            "tmp_dir",
        }
        if unknown:
            raise TypeError(
                f"GrowingBPETokenizer.train() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
            )
        learn_kwargs.setdefault("source", None)
        learn_kwargs.setdefault("min_frequency", 2)
        learn_kwargs.setdefault("num_threads", None)
        learn_kwargs.setdefault("progress", False)
        tok._learn(
            corpus,
            room if num_merges is None else num_merges,
            text_field=text_field,
            split_on=split_on,
            errors=errors,
            who="GrowingBPETokenizer.train",
            **learn_kwargs,
        )
        return tok

    @classmethod
    def train_from_iterator(
        cls, iterator: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE, **kwargs: Any
    ) -> "GrowingBPETokenizer":
        """:meth:`train` on an iterable of str (texts, never paths)."""
        return cls.train(Texts(iterator), vocab_size, **kwargs)

    @classmethod
    def _from_data(cls, data: GrowingData, path: str | os.PathLike[str] | None = None) -> "GrowingBPETokenizer":
        tok = cls.__new__(cls)
        tok._path = None if path is None else Path(path)
        tok._lock = threading.RLock()
        tok._set(data)
        return tok

    def _set(self, data: GrowingData) -> None:
        """Install a vocabulary (builds the Rust model first, so a failure changes nothing)."""
        triples = [(a, b, MERGE_OFFSET + k) for k, (a, b) in enumerate(data.pairs)]
        model = _core.BpeModel(_BYTE_IDS, triples, list(_SPECIALS.items()), data.pattern, "pairs")
        self._state = _State(data, model)  # one reference: readers see the old or the new state, whole

    @property
    def _data(self) -> GrowingData:
        return self._state.data

    @property
    def _model(self) -> _core.BpeModel:
        return self._state.model

    # ---- sizes and tables ----------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """The declared maximum number of ids (10,000,000 by default), not the ids in use."""
        return self._data.vocab_size

    @vocab_size.setter
    def vocab_size(self, value: int) -> None:
        value = _check_int("vocab_size", value, MERGE_OFFSET, MAX_ID + 1)
        if value < self.current_vocab_size:
            raise VocabSizeError(f"vocab_size {value} is below the {self.current_vocab_size} ids already in use")
        self._data.vocab_size = value

    @property
    def current_vocab_size(self) -> int:
        """Ids in use: valid ids are ``0 .. current_vocab_size - 1`` (= ``next_merge_id``)."""
        return self._data.next_merge_id

    @property
    def next_merge_id(self) -> int:
        """The id the next learned merge will get."""
        return self._data.next_merge_id

    def __len__(self) -> int:
        return self.current_vocab_size

    @property
    def merges(self) -> Mapping[tuple[int, int], int]:
        """``{(left, right): id}`` in id order (read-only; grow with learn_merges or sync)."""
        st = self._state
        if "merges" not in st.views:
            st.views["merges"] = MappingProxyType({p: MERGE_OFFSET + k for k, p in enumerate(st.data.pairs)})
        return st.views["merges"]

    @property
    def merge_to_tokens(self) -> Mapping[int, tuple[int, int]]:
        """``{id: (left, right)}`` (read-only)."""
        st = self._state
        if "m2t" not in st.views:
            st.views["m2t"] = MappingProxyType({MERGE_OFFSET + k: p for k, p in enumerate(st.data.pairs)})
        return st.views["m2t"]

    def merge_parts(self) -> Mapping[int, tuple[int, int]]:
        """``{id: (left, right)}`` for every merge (:attr:`merge_to_tokens`; ids in
        the model's id space: byte b is b + 10, merges from 266)."""
        return self.merge_to_tokens

    @property
    def model_vocab_size(self) -> int:
        """Rows a language model needs: the ids in use (``current_vocab_size``), not the declared maximum."""
        return self.current_vocab_size

    def embedding_metadata(self, mode: str = "structured") -> dict:
        """Parent/character indices of the ids in use: each merge's left part is the
        parent, its right part the character (:mod:`tokenforge.bpe_structure`)."""
        return bpe_embedding_metadata(self.merge_list, self.model_vocab_size, mode, who=type(self).__name__)

    @property
    def merge_list(self) -> list[tuple[int, int, int]]:
        """``[(left, right, id), ...]`` in id order."""
        return [(a, b, MERGE_OFFSET + k) for k, (a, b) in enumerate(self._data.pairs)]

    @property
    def sources_contributed(self) -> dict[str, int]:
        """Merges contributed by each source (a copy)."""
        return dict(self._data.sources_contributed)

    @property
    def total_tokens_processed(self) -> int:
        """UTF-8 bytes of text :meth:`learn_merges` has learned from (kept from loaded files)."""
        return self._data.total_tokens_processed

    @property
    def pattern(self) -> str | None:
        return self._data.pattern

    @property
    def normalization(self) -> str | None:
        return self._data.normalization

    @property
    def path(self) -> Path | None:
        """The file this tokenizer was loaded from or last saved to (what :meth:`sync` replaces)."""
        return self._path

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(_SPECIALS)

    pad_token_id = property(lambda self: self.PAD_ID)
    bos_token_id = property(lambda self: self.BOS_ID)
    eos_token_id = property(lambda self: self.EOS_ID)
    unk_token_id = property(lambda self: self.UNK_ID)

    def get_vocab_size(self) -> int:
        """nanochat's name; here the ids in use (the declared maximum is ``vocab_size``)."""
        return self.current_vocab_size

    def has_source_contributed(self, source_name: str) -> bool:
        return source_name in self._data.sources_contributed

    def record_source_contribution(self, source_name: str, num_merges: int) -> None:
        """Set a source's merge count (the seed's bookkeeping call; learn_merges does this itself)."""
        if not isinstance(source_name, str) or not source_name:
            raise TokenforgeError(f"source name must be a non-empty str, not {source_name!r}")
        self._data.sources_contributed[source_name] = _check_int("num_merges", num_merges, 0)

    def get_stats(self) -> dict:
        return {
            "vocab_size": self.vocab_size,
            "current_vocab": self.current_vocab_size,
            "num_merges": len(self._data.pairs),
            "total_tokens_processed": self.total_tokens_processed,
            "can_learn_more": self.next_merge_id < self.vocab_size,
            "sources_contributed": self.sources_contributed,
        }

    # ---- encoding --------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The text as the tokenizer sees it (NFC unless normalization is None)."""
        return _nfc(text) if self._data.normalization == "NFC" else text

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text`` without BOS/EOS; special-token text is plain text."""
        check_text(text)
        st = self._state
        return self._encode_one(st, _nfc(text) if st.data.normalization == "NFC" else text, None)

    def byte_id(self, b: int) -> int:
        """The id of byte ``b`` (b + 10): how a lone surrogate's bytes are encoded."""
        return b + BYTE_OFFSET

    def _encode_one(self, st: _State, text: str, allowed: list[int] | None) -> list[int]:
        """Normalised text -> ids with the state ``st`` (``allowed``: special ids to recognise, or None)."""
        model = st.model
        enc = model.encode_ordinary if allowed is None else (lambda t: model.encode(t, allowed))
        try:
            return enc(text)
        except UnicodeEncodeError:  # lone surrogates: the core takes only UTF-8
            return encode_around_surrogates([text], lambda parts: [enc(t) for t in parts], self.byte_id)[0]

    def encode_to_numpy(self, text: str) -> np.ndarray:
        """Ids of ``text`` (no BOS/EOS) as a uint32 array."""
        check_text(text)
        st = self._state
        text = _nfc(text) if st.data.normalization == "NFC" else text
        try:
            return st.model.encode_ordinary_numpy(text)
        except UnicodeEncodeError:  # lone surrogates
            return np.asarray(self._encode_one(st, text, None), dtype=np.uint32)

    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False
    ) -> list[list[int]] | IdBatch:
        """Ids of many texts (no BOS/EOS), encoded in parallel with the GIL released."""
        check_texts(texts)
        st = self._state
        if st.data.normalization == "NFC":
            texts = [_nfc(t) for t in texts]
        return batch_ids(st.model, texts, num_threads, as_numpy, self.byte_id)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(flat uint32 ids, int64 offsets) of many texts (no BOS/EOS; see :meth:`Tokenizer.encode_batch_flat`)."""
        check_texts(texts)
        st = self._state
        texts = [_nfc(t) for t in texts] if st.data.normalization == "NFC" else list(texts)
        return batch_flat(st.model, texts, num_threads, self.byte_id)

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        st = self._state
        return self._encode_one(st, _nfc(text) if st.data.normalization == "NFC" else text, list(allowed.values()))

    # ``encode`` is the contract's (no BOS/EOS, nanochat's prepend/append); the
    # seed's encode, with its HF-style options, is ``encode_for_model``.
    def encode_for_model(
        self,
        text: str | list[str],
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool = False,
        padding: bool = False,
        *,
        allowed_special: str | Iterable[str] = (),
        disallowed_special: str | Iterable[str] = (),
        num_threads: int | None = None,
    ) -> list[int] | list[list[int]]:
        """The seed's encode (NeuroShard's ``NeuroTokenizer.encode``): a str
        (-> ids) or a list of str (-> list of ids), ready for the model.

        ``add_special_tokens`` wraps the ids of :meth:`encode` in BOS ... EOS;
        with ``max_length``, ``truncation`` cuts to that length (EOS may be cut)
        and ``padding`` right-pads with PAD. ``allowed_special`` ("all" or a
        set of special texts) turns that text into the special ids;
        ``disallowed_special`` makes its presence an error.
        """
        if max_length is not None:
            max_length = _check_int("max_length", max_length, 0)
        allowed, disallowed = allowed_special, disallowed_special
        if isinstance(text, str):
            ids = self.encode(text, allowed_special=allowed, disallowed_special=disallowed)
            return self._finish(ids, add_special_tokens, max_length, truncation, padding)
        batch = self.encode(text, num_threads=num_threads, allowed_special=allowed, disallowed_special=disallowed)
        return [self._finish(p, add_special_tokens, max_length, truncation, padding) for p in batch]

    def _finish(
        self, ids: list[int], add_special_tokens: bool, max_length: int | None, truncation: bool, padding: bool
    ) -> list[int]:
        if add_special_tokens:
            ids = [self.BOS_ID, *ids, self.EOS_ID]
        if truncation and max_length is not None and len(ids) > max_length:
            ids = ids[:max_length]
        if padding and max_length is not None and len(ids) < max_length:
            ids = ids + [self.PAD_ID] * (max_length - len(ids))
        return ids

    def batch_encode(
        self, texts: Sequence[str], max_length: int | None = None, padding: bool = True, truncation: bool = True
    ) -> dict:
        """The seed's batch call: ``{"input_ids": [...], "attention_mask": [...]}`` (mask 0 on PAD)."""
        ids = cast(
            "list[list[int]]",
            self.encode_for_model(list(texts), max_length=max_length, truncation=truncation, padding=padding),
        )
        return {"input_ids": ids, "attention_mask": [[0 if t == self.PAD_ID else 1 for t in x] for x in ids]}

    # ---- decoding --------------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int], skip_special_tokens: bool = False) -> bytes:
        """Bytes of the ids: PAD/BOS/EOS/UNK as their text (nothing if
        ``skip_special_tokens``), reserved ids 4-9 as ``<unk>``. An id that is not
        in the vocabulary (negative, or ``current_vocab_size`` or more) is a
        TokenforgeError naming it and its position, as in every family."""
        arr = _ids_array(ids)
        if arr.size == 0:
            return b""
        st = self._state
        n = st.data.next_merge_id
        regular = (arr >= BYTE_OFFSET) & (arr < n)
        if regular.all():
            return st.model.decode_bytes(arr.astype(np.uint32))
        invalid = np.flatnonzero((arr < 0) | (arr >= n))
        if invalid.size:
            i = int(invalid[0])
            raise TokenforgeError(f"token id {int(arr[i])} (at position {i}) is not in the vocabulary of {n} ids")
        out = bytearray()
        start = 0
        for i in np.flatnonzero(~regular).tolist():
            if i > start:
                out += st.model.decode_bytes(arr[start:i].astype(np.uint32))
            t = int(arr[i])
            if 0 <= t < 4:
                if not skip_special_tokens:
                    out += _SPECIAL_TEXT[t]
            else:
                out += _UNK_TEXT
            start = i + 1
        if start < arr.size:
            out += st.model.decode_bytes(arr[start:].astype(np.uint32))
        return bytes(out)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of the ids (the seed's rule: PAD/BOS/EOS/UNK give nothing, reserved
        ids give ``<unk>``; an id not in the vocabulary is an error, see :meth:`decode_bytes`); invalid UTF-8 becomes U+FFFD, a lone
        surrogate's bytes the surrogate (:func:`tokenforge.base.decode_utf8`)."""
        return decode_utf8(self.decode_bytes(ids, skip_special_tokens=skip_special_tokens))

    def decode_batch(self, batch: Iterable[Iterable[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(x, skip_special_tokens=skip_special_tokens) for x in batch]

    def token_bytes(self) -> np.ndarray:
        """Byte length of every id in use (``current_vocab_size`` entries; 0 for ids 0-9), int32."""
        return self._model.token_lengths()

    def id_to_bytes(self, id: int) -> bytes:
        """The bytes of one id (a special token's text for 0-3)."""
        if isinstance(id, bool) or not isinstance(id, (int, np.integer)):
            raise TypeError(f"token id must be an int, not {type(id).__name__}")
        i = int(id)
        if i in _SPECIAL_TEXT:
            return _SPECIAL_TEXT[i]
        if 4 <= i < BYTE_OFFSET:
            raise TokenforgeError(f"token id {i} is reserved and has no bytes")
        st = self._state
        if not 0 <= i < st.data.next_merge_id:
            raise TokenforgeError(
                f"token id {i} is not in the vocabulary yet (current_vocab_size {st.data.next_merge_id})"
            )
        data = st.model.id_bytes(i)
        if data is None:  # ids 0-9 are answered above; the core has bytes for every other id in use
            raise TokenforgeError(f"token id {i} has no bytes")
        return data

    # ---- learning --------------------------------------------------------------
    def learn_merges(
        self,
        texts: Iterable[str | os.PathLike[str]] | os.PathLike[str],
        num_merges: int = 1000,
        *,
        source: str | None = None,
        min_frequency: int = 2,
        num_threads: int | None = None,
        progress: bool = False,
        client: Any = None,
        text_field: str = "text",
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
    ) -> int:
        """Learn up to ``num_merges`` new merges from ``texts`` and append them.

        The texts are normalised and split as for encoding, each piece is first
        encoded with the existing merges, and BPE continues from there (Rust
        trainer; ties to the smaller id pair). New merges get ids from
        ``next_merge_id``; no existing id changes. Stops early when the best
        pair occurs fewer than ``min_frequency`` times or the vocabulary
        reaches ``vocab_size``. ``source`` is credited with the merges learned.
        Returns how many merges were learned. Interrupting (Ctrl-C) changes nothing.

        ``texts`` may also be files: a ``pathlib.Path`` or a list of them (read
        as ``train(corpus)`` reads its corpus; ``text_field`` names the JSON
        field / parquet column). ``client``: a
        ``distributed.Client`` or a scheduler address counts on that Dask
        cluster (files are read by the workers; texts are shipped to them in
        batches) and learns the merges here, with the same result as without
        it (:mod:`tokenforge.counting`).

        ``max_memory`` and ``tmp_dir``: counting's memory budget, as for
        :meth:`BPETokenizer.train <tokenforge.BPETokenizer.train>` (None: 3/4 of
        the available memory): past it, counts spill to sorted runs under
        ``tmp_dir`` and stay exact; if the distinct pieces still do not fit, the
        rarest are dropped with a warning saying how many. Counting here only
        (a ``client`` counts on the cluster's workers).
        """
        return self._learn(
            corpus_source(texts, who="GrowingBPETokenizer.learn_merges"),
            num_merges,
            source=source,
            min_frequency=min_frequency,
            num_threads=num_threads,
            progress=progress,
            client=client,
            text_field=text_field,
            max_memory=max_memory,
            tmp_dir=tmp_dir,
        )

    def _learn(
        self,
        corpus: object,
        num_merges: int,
        *,
        source: str | None,
        min_frequency: int,
        num_threads: int | None,
        progress: bool | None,
        client: Any = None,
        text_field: str = "text",
        split_on: str | None = None,
        errors: str = "strict",
        who: str = "GrowingBPETokenizer.learn_merges",
        max_memory: int | str | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
    ) -> int:
        """:meth:`learn_merges` on a corpus (paths or URLs by the corpus rule, or :class:`Texts`)."""
        num_merges = _check_int("num_merges", num_merges, 0)
        min_frequency = _check_int("min_frequency", min_frequency, 1)
        if source is not None and (not isinstance(source, str) or not source):
            raise TokenforgeError(f"source must be a non-empty str or None, not {source!r}")
        if num_threads is not None:
            num_threads = _check_int("num_threads", num_threads, 1)
        with self._lock:  # one change to the vocabulary at a time (learn, sync, auto_sync)
            data = self._data
            room = data.vocab_size - data.next_merge_id
            num = min(num_merges, room)
            counter = count_pieces(
                corpus,
                data.pattern,
                client=client,
                who=who,
                rule=DocRule(normalization=data.normalization),
                text_field=text_field,
                split_on=split_on,
                errors=errors,
                num_threads=num_threads,
                progress=bool(progress),
                max_memory=max_memory,
                tmp_dir=tmp_dir,
            )
            seen_bytes = counter.total_bytes
            if num <= 0:
                return 0
            trainer = _core.BpeTrainer(
                counter, _BYTE_IDS, self.merge_list, data.next_merge_id, num, "pair_ids", min_frequency, num_threads
            )
            run_sliced(trainer, num, "merging", "merges", enabled=bool(progress))
            new = trainer.merges()
            new_data = GrowingData(
                pairs=data.pairs + [(a, b) for a, b, _ in new],
                vocab_size=data.vocab_size,
                sources_contributed=dict(data.sources_contributed),
                total_tokens_processed=data.total_tokens_processed + int(seen_bytes),
                pattern=data.pattern,
                normalization=data.normalization,
            )
            if source is not None:
                new_data.sources_contributed[source] = new_data.sources_contributed.get(source, 0) + len(new)
            self._set(new_data)
            return len(new)

    @property
    def is_full(self) -> bool:
        return self.next_merge_id >= self.vocab_size

    # ---- files -----------------------------------------------------------------
    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write the seed's tokenizer.json (plus ``merge_to_tokens`` and tokenforge's
        keys) atomically. A directory gets ``tokenizer.json``. Without a path,
        the file it was loaded from."""
        p = self._target(path)
        write_growing_json(p, self._data)
        self._path = p

    def _target(self, path: str | os.PathLike[str] | None) -> Path:
        if path is None:
            if self._path is None:
                raise TokenforgeError("save() needs a path: this tokenizer was not loaded from or saved to a file")
            return self._path
        check_save_suffix(path, (".json",), "GrowingBPETokenizer.save")
        p = Path(path)
        if p.is_dir():
            p = p / _DEFAULT_FILE
        return p

    def save_pretrained(self, directory: str | os.PathLike[str], **options: Any) -> list[Path]:
        """Write what transformers' ``AutoTokenizer.from_pretrained(directory)`` reads
        (see :meth:`tokenforge.BPETokenizer.save_pretrained` for the options):
        a ``tokenizer.json`` with this layout's ids (offset 10, ids 4-9 as the
        reserved special tokens ``<|reserved_4|>`` .. ``<|reserved_9|>``, so that
        ``len(tokenizer)`` is :attr:`current_vocab_size`), its NFC normaliser and a
        post-processor that wraps a text in ``<|bos|>`` ... ``<|eos|>`` as
        :meth:`encode_for_model` does by default; bos/eos/pad/unk are
        ``<|bos|>``/``<|eos|>``/``<|pad|>``/``<|unk|>``. The vocabulary itself
        (sources, counts, declared size) is written beside them as
        ``tokenforge-growing.json``, which :func:`tokenforge.load` reads back."""
        from .formats.bpe_data import BPEData
        from .formats.hf_json import hf_json_dict
        from .formats.hf_pretrained import write_pretrained
        from .formats.patterns import pattern_name_for

        data = self._data
        specials = {**_SPECIALS, **{f"<|reserved_{i}|>": i for i in range(len(_SPECIALS), BYTE_OFFSET)}}
        merges = [(a, b, MERGE_OFFSET + k) for k, (a, b) in enumerate(data.pairs)]
        bpe = BPEData(list(_BYTE_IDS), merges, specials, data.pattern, pattern_name_for(data.pattern), {})
        doc = hf_json_dict(bpe)
        if data.normalization == "NFC":
            doc["normalizer"] = {"type": "NFC"}

        def piece(token: str) -> dict:
            return {"SpecialToken": {"id": token, "type_id": 0}}

        seq = {"Sequence": {"id": "A", "type_id": 0}}
        doc["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [piece(self.BOS_TOKEN), seq, piece(self.EOS_TOKEN)],
            "pair": [
                piece(self.BOS_TOKEN),
                seq,
                piece(self.EOS_TOKEN),
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": self.EOS_TOKEN, "type_id": 1}},
            ],
            "special_tokens": {
                t: {"id": t, "ids": [_SPECIALS[t]], "tokens": [t]} for t in (self.BOS_TOKEN, self.EOS_TOKEN)
            },
        }
        own = growing_json_text(data).encode("utf-8")
        return write_pretrained(directory, bpe, document=doc, extra_files={_PRETRAINED_FILE: own}, **options)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "GrowingBPETokenizer":
        """Read a tokenizer.json written by the seed (with or without
        ``merge_to_tokens``) or by :meth:`save` (a directory: its tokenizer.json,
        or the ``tokenforge-growing.json`` :meth:`save_pretrained` writes);
        validated (errors name the key)."""
        p = Path(path)
        if p.is_dir():
            p = p / (_PRETRAINED_FILE if (p / _PRETRAINED_FILE).is_file() else _DEFAULT_FILE)
        if not p.exists():
            raise FileNotFoundError(f"no such tokenizer file: {p}")
        return cls._from_data(read_growing_json(p), p)

    def to_bytes(self) -> bytes:
        """The tokenizer.json :meth:`save` writes, as bytes (how a tokenizer pickles: :mod:`tokenforge.base`)."""
        return growing_json_text(self._data).encode("utf-8")

    def transport_state(self) -> dict:
        # where save() and sync() write by default
        return {"path": None if self._path is None else str(self._path)}

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "GrowingBPETokenizer":
        path = state.get("path")
        if path is not None and not isinstance(path, str):
            raise TypeError(f"path must be a str or None, not {type(path).__name__}")
        return cls._from_data(growing_json_from_bytes(data, f"<pickled {cls.__name__}>"), path)

    def to_dict(self) -> dict:
        """The saved document as a dict."""
        return json.loads(growing_json_text(self._data))

    # ---- sync ------------------------------------------------------------------
    def sync(
        self,
        source: str | os.PathLike[str],
        *,
        sha256: str | None = None,
        timeout: float = 10,
        path: str | os.PathLike[str] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        _cancel: threading.Event | None = None,
    ) -> SyncReport:
        """Update from a published tokenizer.json (an http(s)/file URL or a path).

        The remote is taken only if it *extends* this vocabulary: every local
        merge has the same id there and it has more merges. An older or equal
        remote is ignored (``status`` "older"/"up-to-date"). Anything else -- a
        remote that changes an existing merge, another split pattern or
        normalisation, malformed or truncated JSON, a ``sha256`` mismatch, a
        refused connection, more than ``max_bytes`` (:data:`DEFAULT_MAX_BYTES`),
        more than ``timeout`` seconds in all -- raises :class:`SyncError` and
        changes nothing. ``timeout`` is a deadline for the whole download
        (connection, headers and body), however slowly the server sends; the
        body is streamed to an anonymous temporary file, never held whole in
        memory while it arrives. When taken, the local file (``path``, else the
        file this tokenizer was loaded from or saved to) is replaced atomically
        and the vocabulary is swapped in one step (a concurrent ``encode`` uses
        the old or the new one, never a mix).
        """
        src, sha256, timeout, max_bytes = _sync.check_sync_options(source, sha256, timeout, max_bytes)
        target = None if path is None else self._target(path)
        remote, digest = _sync.fetch_vocabulary(
            src, sha256=sha256, timeout=timeout, max_bytes=max_bytes, cancel=_cancel
        )
        with self._lock:  # compare with, and replace, the vocabulary as it is now
            if target is None:
                target = self._path
            report, new = _sync.extension(self._data, remote, src, digest, None if target is None else str(target))
            if new is not None:
                if target is not None:
                    write_growing_json(target, new)  # atomic: the old file stays whole until the rename
                    self._path = target
                self._set(new)
        return report

    def auto_sync(
        self,
        source: str | os.PathLike[str],
        interval: float = 600,
        *,
        sha256: str | None = None,
        timeout: float = 10,
        path: str | os.PathLike[str] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_backoff: float | None = None,
        on_update: Callable[[SyncReport], object] | None = None,
    ) -> "AutoSync":
        """Keep this tokenizer current: :meth:`sync` from ``source`` now and every ``interval`` seconds.

        Seed 002's training nodes "auto-update their tokenizers" every 10
        minutes; this is that, in a background daemon thread, with the rules of
        :meth:`sync` (only a remote that extends the vocabulary is taken; a
        pinned ``sha256`` if given; ``timeout`` and ``max_bytes`` per check).
        An update swaps the vocabulary in one step (a concurrent ``encode`` sees
        the old or the new one, never a mix) and rewrites ``path`` (else the
        file the tokenizer was loaded from or saved to) atomically. A failed
        check (unreachable, refused, malformed) keeps the current vocabulary,
        is logged (logger ``tokenforge.growing``) and backs off: after ``k``
        failures in a row the next check comes after ``interval * 2**k``
        seconds, at most ``max_backoff`` (default: the larger of ``interval``
        and one hour). ``on_update(report)`` is called after each update.
        Returns an :class:`AutoSync` handle: ``stop()`` ends the thread
        (promptly, also in the middle of a download); it is also a context manager.
        """
        return _sync.start_auto_sync(
            self,
            source,
            interval,
            sha256=sha256,
            timeout=timeout,
            path=path,
            max_bytes=max_bytes,
            max_backoff=max_backoff,
            on_update=on_update,
        )

    def __repr__(self) -> str:
        return (
            f"GrowingBPETokenizer(current_vocab_size={self.current_vocab_size}, vocab_size={self.vocab_size}, "
            f"sources={len(self._data.sources_contributed)})"
        )


#: the seed's name
NeuroTokenizer = GrowingBPETokenizer

_default: GrowingBPETokenizer | None = None


def get_neuro_tokenizer() -> GrowingBPETokenizer:
    """The process-wide default tokenizer (byte-level until it learns or syncs), as in the seed."""
    global _default
    if _default is None:
        _default = GrowingBPETokenizer()
    return _default


def _ids_array(ids: Iterable[int]) -> np.ndarray:
    """Ids as an int64 array (lists, tuples, numpy arrays, CPU tensors)."""
    if isinstance(ids, (str, bytes)):
        raise TypeError("token ids must be a sequence of ints, not str/bytes")
    one = isinstance(ids, (int, np.integer)) and not isinstance(ids, bool)
    try:
        arr = np.asarray([ids] if one else ids)
    except (OverflowError, ValueError) as e:
        raise TokenforgeError(f"token ids must be a flat sequence of ints in 0..{MAX_ID}: {e}") from None
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1:
        raise TypeError(f"token ids must be one flat sequence, not an array of shape {arr.shape}")
    if arr.dtype.kind == "u":
        if arr.dtype.itemsize == 8 and arr.max() > np.iinfo(np.int64).max:
            raise TokenforgeError("token id out of range")
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind != "i":
        items = arr.tolist()
        bad = next((x for x in items if isinstance(x, bool) or not isinstance(x, (int, np.integer))), None)
        if bad is None:  # Python ints too large for int64
            at, big = next((i, x) for i, x in enumerate(items) if not -(2**63) <= x < 2**63)
            raise TokenforgeError(f"token id {big} (at position {at}) is out of range (ids are 0..{MAX_ID})")
        raise TypeError(f"token ids must be ints, found {type(bad).__name__} {bad!r}")
    return arr.astype(np.int64, copy=False)


def _sniff_dir(path: Path, head: bytes) -> bool:
    if path.is_dir() and (path / _PRETRAINED_FILE).is_file():
        f = path / _PRETRAINED_FILE  # save_pretrained's directory
    else:
        f = path / _DEFAULT_FILE
    if not (path.is_dir() and f.is_file()):
        return False
    with open(f, "rb") as fh:
        return sniff_growing_json(f, fh.read(HEAD_BYTES))


def token_detail(tok: GrowingBPETokenizer) -> Detail:
    """The playground's detail of ``tok``'s ids (the family record's ``detail``
    hook): a merge's two parts, or ``byte``, plus the ``source`` that added the
    merge when the per-source counts add up to the merges (sources are
    credited in the order they were learned; otherwise ``source`` is absent)."""
    merges = tok.merge_list
    sources = tok.sources_contributed
    source_of: list[tuple[int, str]] = []  # (first id after the source's merges, name)
    if merges and sum(sources.values()) == len(merges):
        end = merges[0][2]
        for name, n in sources.items():
            end += n
            source_of.append((end, name))
    return merge_detail(merges, tok.id_to_bytes, source_of)


def file_formats() -> list[Format]:
    """The growing vocabulary's files :func:`tokenforge.load` reads (the family's record points here)."""
    return [
        Format("growing-tokenizer.json", sniff_growing_json, GrowingBPETokenizer.load),
        Format("growing-tokenizer-dir", _sniff_dir, GrowingBPETokenizer.load),
    ]
