"""The members a family gets from its Rust model, written once.

:class:`RustBacked` answers the byte-level members of the contract
(``decode_bytes``, ``token_bytes``, ``id_to_bytes``) from a core model;
:class:`CoreEncoded` adds encoding for a family whose encoding is exactly its
core's (BPE, LZ78), with :func:`batch_ids` and :func:`batch_flat` the one path
from a core's parallel batch encoders to lists or an
:class:`~tokenforge.ids.IdBatch`, lone surrogates included
(:mod:`tokenforge.surrogates`). List a mixin before
:class:`~tokenforge.base.Tokenizer` in a family's bases.

Not handled: a core without ``encode_batch_numpy`` (the growing vocabulary and
mixedgram write their own encoders over these helpers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .errors import TokenforgeError
from .ids import IdBatch, check_text, check_texts, flat_ids
from .surrogates import encode_around_surrogates

if TYPE_CHECKING:
    import numpy as np

    from . import _core

__all__ = ["RustBacked", "CoreEncoded", "batch_ids", "batch_flat"]


class RustBacked:
    """The byte-level members of a family whose Rust model (``self._model``)
    answers ``decode_bytes(ids)``, ``token_lengths()`` and ``id_bytes(id)``.
    List it before :class:`~tokenforge.base.Tokenizer` in the bases."""

    if TYPE_CHECKING:  # set by the family; `check_id` comes from Tokenizer
        _model: Any
        check_id: Callable[[int], int]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return self._model.decode_bytes(ids)

    def token_bytes(self) -> np.ndarray:
        return self._model.token_lengths()

    def id_to_bytes(self, id: int) -> bytes:
        b = self._model.id_bytes(self.check_id(id))
        if b is None:
            raise TokenforgeError(f"token id {id} is not used by this vocabulary")
        return b


class CoreEncoded(RustBacked):
    """A :class:`RustBacked` family whose encoding is exactly its core's
    (no Python step before or after): ``self._model`` also answers
    ``encode_ordinary``, ``encode_ordinary_numpy``, ``encode(text, allowed)``,
    ``encode_batch`` / ``encode_batch_numpy``, ``encode_jsonl_block`` and
    ``vocab_size``; ``self._specials`` maps special texts to ids."""

    if TYPE_CHECKING:  # set by the family; `byte_id` comes from Tokenizer
        _model: _core._Encoder
        _specials: dict[str, int]
        byte_id: Callable[[int], int]

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        if not isinstance(text, str):  # inline: one call less per encode on the hot path
            check_text(text)
        try:
            return self._model.encode_ordinary(text)
        except UnicodeEncodeError:  # lone surrogates: the core takes only UTF-8
            return encode_around_surrogates([text], self._model.encode_batch, self.byte_id)[0]

    def encode_to_numpy(self, text: str) -> np.ndarray:
        """Encode one text straight into a uint32 numpy array."""
        if not isinstance(text, str):  # inline: one call less per encode on the hot path
            check_text(text)
        try:
            return self._model.encode_ordinary_numpy(text)
        except UnicodeEncodeError:  # lone surrogates
            import numpy as np

            return np.asarray(self.encode_ordinary(text), dtype=np.uint32)

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        ids = list(allowed.values())
        try:
            return self._model.encode(text, ids)
        except UnicodeEncodeError:  # lone surrogates (never inside a special token)
            return encode_around_surrogates(
                [text], lambda parts: [self._model.encode(t, ids) for t in parts], self.byte_id
            )[0]

    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False
    ) -> list[list[int]] | IdBatch:
        """Encode many texts in parallel (GIL released). ``as_numpy`` gives one
        array per text, views into one buffer (uint16 when the vocabulary fits)."""
        check_texts(texts)
        return batch_ids(self._model, list(texts), num_threads, as_numpy, self.byte_id)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        check_texts(texts)
        return batch_flat(self._model, list(texts), num_threads, self.byte_id)

    def jsonl_block_encoder(self) -> Callable[..., Any] | None:
        return self._model.encode_jsonl_block


def batch_ids(
    model: Any, texts: Sequence[str], num_threads: int | None, as_numpy: bool, byte_id: Callable[[int], int]
) -> list[list[int]] | IdBatch:
    """Encode ``texts`` with a core model in parallel: lists of ids, or an
    :class:`~tokenforge.ids.IdBatch` (one flat uint32 buffer). Texts with lone
    surrogates: :func:`~tokenforge.surrogates.encode_around_surrogates` with ``byte_id``."""
    if not as_numpy:
        try:
            return model.encode_batch(texts, num_threads)
        except UnicodeEncodeError:
            return encode_around_surrogates(texts, lambda parts: model.encode_batch(parts, num_threads), byte_id)
    return IdBatch(*batch_flat(model, texts, num_threads, byte_id))


def batch_flat(
    model: Any, texts: Sequence[str], num_threads: int | None, byte_id: Callable[[int], int]
) -> tuple[np.ndarray, np.ndarray]:
    """A core model's ``encode_batch_numpy`` (flat uint32 ids, int64 offsets),
    also for texts with lone surrogates (:func:`~tokenforge.surrogates.encode_around_surrogates`)."""
    try:
        return model.encode_batch_numpy(texts, num_threads)
    except UnicodeEncodeError:
        return flat_ids(encode_around_surrogates(texts, lambda parts: model.encode_batch(parts, num_threads), byte_id))
