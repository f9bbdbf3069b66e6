"""Types of the compiled extension ``tokenforge._core`` (``src/py/``).

``make lint`` checks this file against the built module with
``python -m mypy.stubtest tokenforge._core``, so a binding that gains, loses or
renames a class, function, method or argument fails lint until this file
follows. The methods every encoder family shares come from one macro
(``src/py/encoder.rs``); here they live on :class:`_Encoder`, a stub-only
base that does not exist at runtime.

Argument types are what the bindings accept: pyo3 turns a Python sequence
into a ``Vec`` (not a ``str``), ``bytes`` into ``&[u8]``, and a ``dict`` into
``PyDict``; token ids go in as any iterable of ints or a 1-D integer array.

Not handled: what stubtest cannot see -- return types and the element types
of containers are checked by mypy at the call sites only, not against the
Rust code, and a default pyo3 shows as ``...`` (``BpeTrainer.run``'s
``max_merges``, ``mixedgram_train``'s ``slots``) is not compared.
"""

from collections.abc import Iterable, Sequence
from typing import Any, Final, final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "GPT4_PATTERN",
    "CL100K_PATTERN",
    "GPT2_PATTERN",
    "__version__",
    "split",
    "BpeModel",
    "WordCounter",
    "BpeTrainer",
    "bpe_rank_splits",
    "bpe_layout",
    "bpe_special_ids",
    "MIXEDGRAM_HEADER_BYTES",
    "MixedgramModel",
    "mixedgram_train",
    "mixedgram_pack",
    "mixedgram_unpack",
    "mixedgram_pack12",
    "mixedgram_unpack12",
    "mixedgram_decompress",
    "mixedgram_strip_nul",
    "Lz78Model",
    "Lz78Trainer",
    "Lz78Online",
    "lz78_finish",
    "lz78_patricia",
    "lz78_patricia_encode",
]

__version__: Final[str]
GPT4_PATTERN: Final[str]
CL100K_PATTERN: Final[str]
GPT2_PATTERN: Final[str]
MIXEDGRAM_HEADER_BYTES: Final[int]

# Token ids as the bindings read them (`py::ids_from`): a list of ints or a
# 1-D uint32/uint16/int64/int32 numpy array.
_Ids = Iterable[int] | NDArray[np.integer[Any]]
# One `.jsonl` block encoded (`py::jsonl_block`): tokens (uint16 if narrow,
# else uint32), per-document token, byte and character counts, lines read.
_JsonlBlock = tuple[
    NDArray[np.uint16] | NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.uint64], int
]

def split(pattern: str | None, text: str, use_regex: bool = False) -> list[str]: ...

class _Encoder:
    """The methods `encoder_class!` gives every encoder family (stub only)."""

    @property
    def vocab_size(self) -> int: ...
    @property
    def pattern(self) -> str | None: ...
    def encode_ordinary(self, text: str) -> list[int]: ...
    def encode_ordinary_numpy(self, text: str) -> NDArray[np.uint32]: ...
    def encode(self, text: str, allowed: Sequence[int] | None = None) -> list[int]: ...
    def encode_batch(
        self,
        texts: Iterable[str],
        num_threads: int | None = None,
        allowed: Sequence[int] | None = None,
        specials: bool = False,
    ) -> list[list[int]]: ...
    def encode_batch_numpy(
        self,
        texts: Iterable[str],
        num_threads: int | None = None,
        allowed: Sequence[int] | None = None,
        specials: bool = False,
    ) -> tuple[NDArray[np.uint32], NDArray[np.uint64]]: ...
    def encode_jsonl_block(
        self,
        head: bytes,
        body: bytes,
        end: int,
        field: str,
        file_start: bool,
        skip: int,
        bos: int | None,
        narrow: bool,
        num_threads: int | None = None,
    ) -> _JsonlBlock | None: ...
    def decode_bytes(self, ids: _Ids) -> bytes: ...
    def id_bytes(self, id: int) -> bytes | None: ...
    def token_lengths(self) -> NDArray[np.int32]: ...
    def find_special(self, text: str) -> tuple[str, int] | None: ...

# --- BPE (src/py/bpe.rs) ---

@final
class BpeModel(_Encoder):
    def __new__(
        cls,
        byte_ids: Sequence[int],
        merges: Sequence[tuple[int, int, int]],
        specials: Sequence[tuple[str, int]],
        pattern: str | None,
        rule: str = "bytes",
    ) -> BpeModel: ...
    def encode_piece(self, piece: bytes) -> list[int]: ...

@final
class WordCounter:
    def __new__(cls, pattern: str | None) -> WordCounter: ...
    def add_texts(self, texts: Iterable[str], num_threads: int | None = None) -> None: ...
    def add_word(self, word: bytes, count: int) -> None: ...
    @property
    def unique(self) -> int: ...
    @property
    def total_pieces(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> WordCounter: ...
    def merge(self, other: WordCounter) -> None: ...
    @staticmethod
    def merged(counters: Sequence[WordCounter]) -> WordCounter: ...
    def prune_below(self, min_count: int) -> int: ...
    @property
    def dropped(self) -> tuple[int, int, int]: ...
    @property
    def pattern(self) -> str | None: ...
    def count(self, piece: bytes) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    def items(self) -> list[tuple[bytes, int]]: ...

@final
class BpeTrainer:
    def __new__(
        cls,
        counter: WordCounter,
        byte_ids: Sequence[int],
        merges: Sequence[tuple[int, int, int]],
        next_id: int,
        num_merges: int,
        tie_break: str = "pair_ids",
        min_frequency: int = 1,
        num_threads: int | None = None,
    ) -> BpeTrainer: ...
    def run(self, max_merges: int = ..., seconds: float = 0.25) -> int: ...
    @property
    def done(self) -> bool: ...
    @property
    def merges_done(self) -> int: ...
    def merges(self) -> list[tuple[int, int, int]]: ...

def bpe_rank_splits(
    tokens: Sequence[tuple[bytes, int]], rule: str, which: Sequence[int] | None = None
) -> list[tuple[int, list[int]]]: ...
def bpe_layout(layout: str, vocab_size: int, specials: int) -> tuple[int, int]: ...
def bpe_special_ids(layout: str, specials: int, merges: int) -> list[int]: ...

# --- LZ78 (src/py/lz78.rs) ---

@final
class Lz78Model(_Encoder):
    def __new__(cls, outputs: Sequence[str], specials: Sequence[tuple[str, int]], pattern: str | None) -> Lz78Model: ...
    def with_pattern(self, pattern: str | None) -> Lz78Model: ...
    @property
    def n(self) -> int: ...
    def trie_size(self) -> tuple[int, int]: ...

@final
class Lz78Trainer:
    def __new__(
        cls, strategy: str, n: int, pattern: str | None, params: dict[str, Any] | None = None
    ) -> Lz78Trainer: ...
    def feed(self, texts: Sequence[str], num_threads: int | None = None) -> None: ...
    @property
    def wants_more(self) -> bool: ...
    def finish(
        self, num_threads: int | None = None
    ) -> tuple[list[tuple[int, str, str, bool]], bool, dict[str, int]]: ...

# An online builder's pool as plain data: parent code per entry, one character
# per entry, evictions, evicted.
_Lz78Pool = tuple[list[int], str, int, int]

@final
class Lz78Online:
    def __new__(
        cls, strategy: str, n: int, pattern: str | None, params: dict[str, Any] | None = None
    ) -> Lz78Online: ...
    def feed(self, texts: Sequence[str], num_threads: int | None = None) -> None: ...
    @property
    def wants_more(self) -> bool: ...
    @property
    def texts(self) -> int: ...
    @property
    def corpus_bytes(self) -> int: ...
    def finish(self) -> _Lz78Pool: ...

def lz78_finish(
    strategy: str,
    n: int,
    pool: tuple[Sequence[int], str, int, int] | None,
    counter: WordCounter | None,
    texts: int,
    corpus_bytes: int,
    params: dict[str, Any] | None = None,
    num_threads: int | None = None,
) -> tuple[list[tuple[int, str, str, bool]], bool, dict[str, int]]: ...
def lz78_patricia(items: Sequence[tuple[str, int]]) -> tuple[list[tuple[int, str, int, str]], int]: ...
def lz78_patricia_encode(
    items: Sequence[tuple[str, int]], n: int, text: str, pattern: str | None = None
) -> list[int]: ...

# --- mixedgram (src/py/mixedgram.rs) ---

@final
class MixedgramModel:
    def __new__(cls, ngrams: Sequence[bytes], specials: Sequence[tuple[int, bytes]] = ...) -> MixedgramModel: ...
    @staticmethod
    def from_header(data: bytes) -> MixedgramModel: ...
    def ngrams(self) -> list[bytes]: ...
    @property
    def ngram_count(self) -> int: ...
    def encode(self, data: bytes, parse: str = "greedy") -> NDArray[np.uint16]: ...
    def encode_range(self, data: bytes, start: int, stop: int) -> tuple[NDArray[np.uint16], int]: ...
    def encode_batch(
        self, texts: Sequence[bytes], parse: str = "greedy", num_threads: int | None = None
    ) -> tuple[NDArray[np.uint16], NDArray[np.uint64]]: ...
    def decode_bytes(self, ids: _Ids) -> bytes: ...
    def id_bytes(self, id: int) -> bytes | None: ...
    def token_lengths(self) -> NDArray[np.int32]: ...
    def header(self) -> bytes: ...
    def compress(self, data: bytes, parse: str = "greedy") -> tuple[bytes, int]: ...
    def decode_stream(self, data: bytes, base: int = 0, is_last: bool = True) -> bytes: ...
    def histogram(self, data: bytes, base: int = 0, is_last: bool = True) -> NDArray[np.uint64]: ...

def mixedgram_train(
    data: bytes, slots: int = ..., num_threads: int | None = None
) -> tuple[list[tuple[bytes, int]], dict[str, Any]]: ...
def mixedgram_pack(ids: _Ids) -> bytes: ...
def mixedgram_unpack(data: bytes) -> NDArray[np.uint16]: ...
def mixedgram_pack12(ids: _Ids) -> bytes: ...
def mixedgram_unpack12(data: bytes) -> NDArray[np.uint16]: ...
def mixedgram_decompress(data: bytes) -> bytes: ...
def mixedgram_strip_nul(data: bytes) -> tuple[bytes, int]: ...
