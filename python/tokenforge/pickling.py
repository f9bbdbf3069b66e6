"""Tokenizers between processes: pickled as the bytes of their own saved file.

A tokenizer travels to another process (multiprocessing, DataLoader workers,
Dask) and through ``copy.deepcopy`` as its class, the exact bytes its ``save``
writes (checksum included) and a dict of plain settings its file does not
hold; it is rebuilt there by parsing those bytes with the family's strict
reader. No Rust object and no Python object graph is pickled, and the pickle is
only a transport, never a file format. :class:`FileTransport` is that rule, a
base of :class:`tokenforge.base.Tokenizer`: a family opts in by defining
``to_bytes`` and ``from_bytes`` (and ``transport_state`` for its live
settings); ``copy.copy`` stays a shallow copy.

Not handled: a family subclass's own extra attributes (it is rebuilt from the
family's file); a class without the two hooks keeps Python's default pickling.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FileTransport"]


class FileTransport:
    """Pickling and deep copies through the family's own file format."""

    def to_bytes(self) -> bytes:
        """The bytes ``save`` writes for this tokenizer (its defining file)."""
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes, state: dict[str, Any]) -> Any:
        """The tokenizer ``to_bytes`` gave ``data`` for, with ``state`` from
        :meth:`transport_state` applied; the family's strict reader checks
        ``data`` (checksum included)."""
        raise NotImplementedError

    def transport_state(self) -> dict[str, Any]:
        """Settings of this tokenizer that its saved file does not record (plain values)."""
        return {}

    def __reduce_ex__(self, protocol: Any) -> Any:
        # __reduce_ex__ rather than __reduce__: a subclass without the hooks (a
        # pure-Python family) keeps Python's default pickling.
        if type(self).to_bytes is FileTransport.to_bytes:
            return super().__reduce_ex__(protocol)
        return (rebuild, (type(self), self.to_bytes(), self.transport_state()))

    def __copy__(self) -> Any:
        # copy.copy stays a shallow copy (what it was before __reduce_ex__ above):
        # families use it for cheap variants that share the Rust model.
        cls = type(self)
        new = cls.__new__(cls)
        new.__dict__.update(self.__dict__)
        return new


def rebuild(cls: Any, data: bytes, state: dict[str, Any]) -> Any:
    """Unpickling a tokenizer: parse its saved file's bytes (see ``FileTransport.__reduce_ex__``)."""
    if not (isinstance(cls, type) and issubclass(cls, FileTransport)):
        raise TypeError(f"not a tokenizer class: {cls!r}")
    if not isinstance(data, bytes) or not isinstance(state, dict):
        raise TypeError("a pickled tokenizer holds the bytes of its saved file and a dict of settings")
    return cls.from_bytes(data, state)
