"""Ids in bulk: what an id is, and the one flat layout of many texts' ids.

:class:`IdBatch` is what ``encode_batch(..., as_numpy=True)`` returns (one flat
``uint32`` array and ``int64`` offsets); :func:`flat_ids` builds that layout from
lists; :func:`ids_dtype` picks the array type a vocabulary needs;
:func:`is_integer` says what counts as an id; :func:`check_texts` is the one
check of a batch's argument. numpy is imported only by the functions that make
or read arrays (``import tokenforge`` plus a BPE load imports no numpy).

Not handled: ids wider than 32 bits; ragged batches of other dtypes.
"""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, overload

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import TypeIs

__all__ = ["IdBatch", "check_text", "check_texts", "flat_ids", "ids_dtype", "is_integer"]


def is_integer(x: object) -> TypeIs[int | np.integer[Any]]:
    """An ``int`` or a numpy integer, not a ``bool``. numpy is not imported to
    answer: a numpy integer can exist only once something has imported numpy."""
    if isinstance(x, int):
        return not isinstance(x, bool)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


def ids_dtype(vocab_size: int) -> Any:
    """The smallest unsigned dtype that holds every id of a vocabulary."""
    import numpy as np  # numpy is imported when first needed (see the module docstring)

    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


def check_text(text: object) -> None:
    """One text to encode is a str: anything else is a ``TypeError`` naming its type."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")


def check_texts(texts: Iterable[object]) -> None:
    """A batch is a sequence of str: a single str (or bytes) or a non-str item is a
    ``TypeError`` that says what to pass."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode_batch expects a list of str, not a single str; use encode(text)")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode_batch: item {i} is {type(t).__name__}, expected str")


class IdBatch(Sequence["np.ndarray"]):
    """The ids of many texts in one flat ``uint32`` array, ``ids``, with
    ``int64`` ``offsets`` of ``len + 1``: text ``i``'s ids are
    ``ids[offsets[i]:offsets[i + 1]]``. What ``encode_batch(..., as_numpy=True)``
    returns: no Python object per text is made until one is asked for
    (``batch[i]`` is a view into ``ids``; iterating gives the views in order).
    ``ids, offsets = batch.ids, batch.offsets`` hands the two arrays to numpy,
    torch (``torch.from_numpy``) or a file."""

    __slots__ = ("ids", "offsets")

    def __init__(self, ids: np.ndarray, offsets: np.ndarray):
        if offsets.ndim != 1 or len(offsets) == 0 or int(offsets[0]) != 0 or int(offsets[-1]) != len(ids):
            raise ValueError("offsets must start at 0 and end at len(ids)")
        self.ids = ids
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, i: slice) -> list[np.ndarray]: ...
    def __getitem__(self, i: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError(f"batch index {i} out of range for {n} texts")
        return self.ids[self.offsets[k] : self.offsets[k + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        ids, off = self.ids, self.offsets.tolist()
        for k in range(len(off) - 1):
            yield ids[off[k] : off[k + 1]]

    def lengths(self) -> np.ndarray:
        """The number of ids of each text (``int64``)."""
        import numpy as np

        return np.diff(self.offsets)

    def tolist(self) -> list[list[int]]:
        """The ids as lists, as ``encode_batch`` without ``as_numpy`` gives them."""
        ids, off = self.ids.tolist(), self.offsets.tolist()
        return [ids[off[k] : off[k + 1]] for k in range(len(off) - 1)]

    def __repr__(self) -> str:
        return f"IdBatch({len(self)} texts, {len(self.ids)} ids)"


def flat_ids(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(flat uint32 ids, int64 offsets of len(lists)+1), as the cores' ``encode_batch_numpy`` give."""
    import numpy as np

    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)), out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1]))
    return flat, offsets
