"""tokenforge: train, compare and use the tokenizers language models are trained on.

Families: :class:`BPETokenizer` (byte-level BPE, nanochat/tiktoken compatible).
Every family meets the :class:`Tokenizer` contract and has one record in
:mod:`tokenforge.registry`; :func:`load` reads any file tokenforge writes.
Heavy optional dependencies (torch, dask, matplotlib) are imported only by the
functions that need them.
"""

from . import errors
from ._core import __version__
from .base import IdBatch, Tokenizer
from .bpe import BPETokenizer
from .chat import SPECIAL_TOKENS
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
from .growing import GrowingBPETokenizer, NeuroTokenizer
from .lz78 import LZ78Tokenizer
from .mixedgram import Mixedgram
from .registry import load

__all__ = [
    "__version__",
    "BPETokenizer",
    "GrowingBPETokenizer",
    "NeuroTokenizer",
    "Mixedgram",
    "LZ78Tokenizer",
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
