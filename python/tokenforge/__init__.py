"""tokenforge: train, compare and use the tokenizers language models are trained on.

Families: :class:`BPETokenizer` (byte-level BPE, nanochat/tiktoken compatible).
Every family meets the :class:`Tokenizer` contract and has one record in
:mod:`tokenforge.registry`; :func:`load` reads any file tokenforge writes.

``import tokenforge`` loads only the extension, :mod:`tokenforge.errors` and
the registry (a few milliseconds). Every other public name is imported the
first time it is used (PEP 562 ``__getattr__``), so a script that only loads a
BPE tokenizer never imports the LZ78, mixedgram or growing families. numpy is
imported by the functions that need it (arrays of ids, embedding metadata),
not by loading or encoding to lists. Heavy optional dependencies (torch, dask,
matplotlib) are imported only by the functions that need them.

Not handled: ``dir(tokenforge)`` lists the lazy names before they are
imported, but ``vars(tokenforge)`` holds only those already used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors
from ._core import __version__
from .errors import (
    ChecksumError,
    CorpusError,
    FormatError,
    Latin1Error,
    PatternError,
    SpecialTokenError,
    SyncError,
    TokenforgeError,
    TokenforgeWarning,
    UnsafePickleError,
    VersionError,
    VocabSizeError,
)
from .registry import BUILT_IN as _BUILT_IN
from .registry import FAMILIES as _FAMILIES
from .registry import load

if TYPE_CHECKING:
    from .base import Tokenizer
    from .bpe import BPETokenizer
    from .chat import SPECIAL_TOKENS
    from .growing import GrowingBPETokenizer, NeuroTokenizer
    from .ids import IdBatch
    from .lz78 import LZ78Tokenizer
    from .mixedgram import Mixedgram
    from .pipeline import PipelineTokenizer

#: public name -> the module that defines it, imported on first use: the
#: contract's names, then each built-in family's class and exports, as its
#: record in tokenforge.registry says
_LAZY = {
    "Tokenizer": f"{__name__}.base",
    "IdBatch": f"{__name__}.ids",
    "SPECIAL_TOKENS": f"{__name__}.chat",
    **{name: _FAMILIES[f].module for f in _BUILT_IN for name in (_FAMILIES[f].class_name, *_FAMILIES[f].exports)},
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tokenforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "BPETokenizer",
    "GrowingBPETokenizer",
    "NeuroTokenizer",
    "Mixedgram",
    "LZ78Tokenizer",
    "PipelineTokenizer",
    "Tokenizer",
    "IdBatch",
    "load",
    "errors",
    "SPECIAL_TOKENS",
    "TokenforgeError",
    "FormatError",
    "VersionError",
    "ChecksumError",
    "TokenforgeWarning",
    "SpecialTokenError",
    "VocabSizeError",
    "CorpusError",
    "PatternError",
    "UnsafePickleError",
    "Latin1Error",
    "SyncError",
]
