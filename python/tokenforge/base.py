"""The contract every tokenizer family meets.

A family subclasses :class:`Tokenizer` and implements the abstract members;
everything else (nanochat's method names, chat rendering, batch helpers) comes
from here so that families behave alike. The optional hooks other parts of
tokenforge call (``embedding_metadata``, ``model_vocab_size``, ``merge_parts``, ``normalize``, ``inspect_extra``,
``_fingerprint_files``, ``_jsonl_block_encoder``) are declared here with their
defaults, so no caller probes with ``hasattr``. Which families exist, and which
files each reads (:func:`tokenforge.load`), is :mod:`tokenforge.registry`.

Lone surrogates (a ``str`` may hold U+D800..U+DFFF unpaired, e.g. from
``json.loads('"\\ud800"')`` or ``os.fsdecode`` of bad bytes) have no UTF-8, so
the Rust cores refuse them. They round-trip as their "surrogatepass" bytes
(``"\\ud800"`` is ED A0 80): :func:`encode_around_surrogates` cuts the text at
each one, encodes the parts as usual and each lone surrogate as the byte ids of
its three bytes (a family's :meth:`Tokenizer._byte_id`), and :func:`decode_utf8`
(the error handler ``"tokenforge-surrogates"``) turns exactly such bytes back
into the surrogate. Ordinary text never pays for this: the cutting runs only
after a core has raised ``UnicodeEncodeError``.

Tokenizers pickle (for worker processes: multiprocessing, DataLoader workers,
Dask) and ``copy.deepcopy`` as the bytes of their own saved file, rebuilt by
the family's strict reader (``Tokenizer.__reduce_ex__``); ``copy.copy`` stays
a shallow copy.

Not handled: a family subclass's own extra attributes when pickled (it is
rebuilt from the family's file); training on text with lone surrogates (the cores' counters refuse
it); a parse across a lone surrogate (the text on either side is encoded on its
own, as if the surrogate were a document boundary).
"""

from __future__ import annotations

import abc
import codecs
import itertools
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    import numpy as np

from .chat import ChatMixin
from .embedding_meta import EmbeddingModeError
from .errors import SpecialTokenError, TokenforgeError

if TYPE_CHECKING:
    from . import _core

__all__ = [
    "Tokenizer",
    "RustBacked",
    "CoreEncoded",
    "ids_dtype",
    "is_integer",
    "SURROGATE_ERRORS",
    "feed_around_surrogates",
    "feed_in_batches",
    "decode_utf8",
    "encode_around_surrogates",
]


def is_integer(x) -> bool:
    """An ``int`` or a numpy integer, not a ``bool``. numpy is not imported to
    answer: a numpy integer can exist only once something has imported numpy."""
    if isinstance(x, int):
        return not isinstance(x, bool)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


def ids_dtype(vocab_size: int):
    """The smallest unsigned dtype that holds every id of a vocabulary."""
    import numpy as np  # numpy is imported when first needed (see the module docstring)

    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


# ---- lone surrogates ----------------------------------------------------------
#: The codecs error handler for the decoding rule of :func:`decode_utf8` (registered on import).
SURROGATE_ERRORS = "tokenforge-surrogates"
_SURROGATE_RUN = re.compile("[\ud800-\udfff]+")
#: A lone surrogate's "surrogatepass" UTF-8 bytes (never valid UTF-8).
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def _surrogate_errors(exc):
    """Decoding UTF-8: ED A0..BF 80..BF (a lone surrogate's surrogatepass bytes,
    as :func:`encode_around_surrogates` writes them) becomes that surrogate;
    any other invalid span becomes U+FFFD exactly as ``"replace"`` makes it."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    m = _SURROGATE_BYTES.match(exc.object, exc.start)
    if m is not None:
        return m.group().decode("utf-8", "surrogatepass"), m.end()
    return "\ufffd", exc.end


codecs.register_error(SURROGATE_ERRORS, _surrogate_errors)


def decode_utf8(data: bytes) -> str:
    """Token bytes as text: invalid UTF-8 becomes U+FFFD (as with ``"replace"``),
    except the surrogatepass bytes of a lone surrogate (ED A0..BF 80..BF), which
    become that surrogate again, so ``decode(encode(s)) == s`` for every str.

    Gives exactly ``data.decode("utf-8", "tokenforge-surrogates")``, faster:
    valid UTF-8 (nearly always) is one strict decode; otherwise the bytes are
    cut at each surrogate's three bytes and the stretches between decoded with
    the builtin "replace" (an invalid span never contains ED past its first
    byte, so the cut changes nothing), instead of one Python call per invalid
    byte (15x slower on random bytes)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    pos = 0
    for m in _SURROGATE_BYTES.finditer(data):
        out.append(data[pos : m.start()].decode("utf-8", "replace"))
        out.append(m.group().decode("utf-8", "surrogatepass"))
        pos = m.end()
    out.append(data[pos:].decode("utf-8", "replace"))
    return "".join(out)


def feed_around_surrogates(feed: Callable, texts: list[str], *args):
    """``feed(texts, *args)`` for a core trainer or counter. The core takes only
    UTF-8, so when it raises ``UnicodeEncodeError`` (a text holds lone
    surrogates) the texts are fed again cut at every run of them: training sees
    the text around a surrogate, the surrogate itself adds no statistics (encode
    turns it into byte ids, :func:`encode_around_surrogates`). Ordinary batches
    are never scanned."""
    try:
        return feed(texts, *args)
    except UnicodeEncodeError:
        parts = [p for t in texts for p in _SURROGATE_RUN.split(t) if p]
        return feed(parts, *args)


def feed_in_batches(
    feed: Callable, texts: Iterable[str], num_threads, batch_chars: int, bar=None, wants_more=None
) -> None:
    """The one batching rule for training: hand ``texts`` to a core trainer or
    counter, ``feed(batch, num_threads)``, in batches of about ``batch_chars``
    characters (lone surrogates as :func:`feed_around_surrogates` does);
    ``bar.update(chars)`` after each batch; ``wants_more()`` returning False
    stops reading early (a trainer that is full)."""
    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= batch_chars:
            feed_around_surrogates(feed, batch, num_threads)
            if bar is not None:
                bar.update(size)
            batch, size = [], 0
            if wants_more is not None and not wants_more():
                return
    if batch and (wants_more is None or wants_more()):
        feed_around_surrogates(feed, batch, num_threads)
        if bar is not None:
            bar.update(size)


def encode_around_surrogates(
    texts: Sequence[str], encode_parts: Callable[[list[str]], list], byte_id: Callable[[int], int]
) -> list[list[int]]:
    """The one rule for lone surrogates: each text is cut at every run of lone
    surrogates; the parts between go to ``encode_parts`` (all texts' parts in one
    call, so a family's parallel batch encoder serves; it returns one list of
    ids per part), and each surrogate becomes ``byte_id(b)`` for the three bytes
    ``b`` of ``ch.encode("utf-8", "surrogatepass")``. Families call it only after
    their core raised ``UnicodeEncodeError``, so ordinary text is never scanned.
    Two surrogates in a row (even a high then a low one) stay two code points."""
    parts: list[str] = []
    plans: list[list] = []  # per text: an int (index into parts) or a list of byte ids
    for text in texts:
        plan: list = []
        pos = 0
        for m in _SURROGATE_RUN.finditer(text):
            if m.start() > pos:
                plan.append(len(parts))
                parts.append(text[pos : m.start()])
            plan.append([byte_id(b) for b in m.group().encode("utf-8", "surrogatepass")])
            pos = m.end()
        if pos < len(text):
            plan.append(len(parts))
            parts.append(text[pos:] if pos else text)
        plans.append(plan)
    encoded = encode_parts(parts) if parts else []
    out = []
    for plan in plans:
        ids: list[int] = []
        for item in plan:
            ids.extend(encoded[item] if isinstance(item, int) else item)
        out.append(ids)
    return out


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

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError(f"batch index {i} out of range for {n} texts")
        return self.ids[self.offsets[k] : self.offsets[k + 1]]

    def __iter__(self):
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


def _flat(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(flat uint32 ids, int64 offsets of len(lists)+1), as the cores' ``encode_batch_numpy`` give."""
    import numpy as np

    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)), out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1]))
    return flat, offsets


class Tokenizer(ChatMixin, abc.ABC):
    """The tokenizer contract.

    Ids are ints in ``range(vocab_size)``. ``decode(encode(s)) == s`` for every
    ``str`` s. Special tokens are never produced from text unless the caller
    asks for them (see each family's ``encode``) or the tokenizer records that
    policy (:attr:`default_allowed_special`: seed 003's BPE tokenizers).
    """

    #: short family name used in files and reports ("bpe", "lz78", ...)
    family: str = "abstract"

    # ---- the abstract core -------------------------------------------------
    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, specials included."""

    @property
    @abc.abstractmethod
    def special_tokens(self) -> dict[str, int]:
        """Special token text -> id."""

    @abc.abstractmethod
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text; special-token text is encoded as plain text."""

    @abc.abstractmethod
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes the ids stand for (special tokens as their text)."""

    @abc.abstractmethod
    def token_bytes(self) -> np.ndarray:
        """Raw byte length of every id (0 for special and unused ids), int32."""

    @abc.abstractmethod
    def id_to_bytes(self, id: int) -> bytes:
        """The raw bytes of one id (a special token's text, UTF-8)."""

    @abc.abstractmethod
    def save(self, path) -> None:
        """Write the tokenizer so that :func:`tokenforge.load` reads it back."""

    # ---- process transport (pickle, copy.deepcopy) -------------------------
    # A tokenizer travels to another process (multiprocessing, DataLoader
    # workers, Dask) as the bytes of its own saved file, checksum included, and
    # is rebuilt there by parsing them with the family's strict reader: no Rust
    # object and no Python object graph is pickled, and the pickle is only a
    # transport (never a file format). A family opts in by defining
    # ``_to_bytes`` and ``_from_bytes``; ``_transport_state`` adds the settings
    # of a live tokenizer that its file does not hold (plain values only).
    def _to_bytes(self) -> bytes:
        """The bytes :meth:`save` writes for this tokenizer (its defining file)."""
        raise NotImplementedError

    @classmethod
    def _from_bytes(cls, data: bytes, state: dict) -> "Tokenizer":
        """The tokenizer ``_to_bytes`` gave ``data`` for, with ``state`` from
        :meth:`_transport_state` applied; the family's strict reader checks
        ``data`` (checksum included)."""
        raise NotImplementedError

    def _transport_state(self) -> dict:
        """Settings of this tokenizer that its saved file does not record (plain values)."""
        return {}

    def __reduce_ex__(self, protocol):
        # __reduce_ex__ rather than __reduce__: a Tokenizer subclass without the
        # hooks (a pure-Python family) keeps Python's default pickling.
        if type(self)._to_bytes is Tokenizer._to_bytes:
            return super().__reduce_ex__(protocol)
        return (_rebuild_tokenizer, (type(self), self._to_bytes(), self._transport_state()))

    def __copy__(self):
        # copy.copy stays a shallow copy (what it was before __reduce_ex__ above):
        # families use it for cheap variants that share the Rust model.
        cls = type(self)
        new = cls.__new__(cls)
        new.__dict__.update(self.__dict__)
        return new

    def _byte_id(self, b: int) -> int:
        """The id that stands for the single byte ``b`` (how a lone surrogate is
        encoded: :func:`encode_around_surrogates`). Families that encode UTF-8
        define it."""
        raise NotImplementedError(f"{type(self).__name__} has no byte ids for lone surrogates")

    # ---- shared behaviour --------------------------------------------------
    #: What ``encode`` does with special-token text when the caller does not say
    #: (``allowed_special=None``): ``()`` keeps it ordinary text; a family may
    #: record another policy per tokenizer (seed 003's BPE tokenizers: ``"all"``).
    default_allowed_special = ()

    def encode(self, text, prepend=None, append=None, num_threads=None, *, allowed_special=None, disallowed_special=()):
        """Encode a str (-> list of ids) or a list of str (-> list of lists).

        ``prepend``/``append`` are a special token's text or an id, added to every
        sequence (nanochat's signature). By default special-token text in ``text``
        is encoded as ordinary text, so ``decode(encode(s)) == s`` always holds
        (a tokenizer may record another default, :attr:`default_allowed_special`).
        ``allowed_special`` ("all" or a set of special texts) turns that text into
        the special ids; ``()`` keeps it text; ``disallowed_special`` ("all" or a
        set) makes its presence an error instead (tiktoken's safety check).
        """
        allowed, disallowed = self._special_policy(allowed_special, disallowed_special)
        pre = None if prepend is None else self._special_id(prepend)
        post = None if append is None else self._special_id(append)

        def one(t: str) -> list[int]:
            if disallowed:
                self._raise_if_special(t, disallowed)
            if allowed:
                return self._encode_with_specials(t, allowed)
            return self.encode_ordinary(t)

        if isinstance(text, str):
            out = [one(text)]
        elif isinstance(text, (list, tuple)):
            _check_texts(text)
            if not allowed and not disallowed:
                out = self.encode_batch(text, num_threads=num_threads)
            elif not disallowed:
                out = self._encode_batch_with_specials(text, allowed, num_threads)
            else:
                out = [one(t) for t in text]
        else:
            raise TypeError(f"encode expects a str or a list of str, not {type(text).__name__}")
        for ids in out:
            if pre is not None:
                ids.insert(0, pre)
            if post is not None:
                ids.append(post)
        return out[0] if isinstance(text, str) else out

    def _special_policy(self, allowed_special, disallowed_special) -> tuple[dict[str, int], dict[str, int]]:
        specials = self.special_tokens
        if allowed_special is None:  # the caller did not say: this tokenizer's recorded default
            allowed_special = self.default_allowed_special

        def pick(arg, what: str) -> dict[str, int]:
            if arg == "all":
                return dict(specials)
            if isinstance(arg, str):
                raise TypeError(
                    f"{what} must be 'all' or a collection of special-token strings, not the string {arg!r}"
                )
            chosen = {}
            for name in arg:
                if name not in specials:
                    known = ", ".join(sorted(specials)) or "none"
                    raise SpecialTokenError(
                        f"{what} names {name!r}, which is not a special token of this tokenizer (known: {known})"
                    )
                chosen[name] = specials[name]
            return chosen

        allowed = pick(allowed_special, "allowed_special")
        disallowed = pick(disallowed_special, "disallowed_special")
        for name in allowed:
            disallowed.pop(name, None)
        return allowed, disallowed

    @staticmethod
    def _raise_if_special(text: str, disallowed: dict[str, int]) -> None:
        hits = [(text.find(name), name) for name in disallowed if name in text]
        if hits:
            at, name = min(hits)
            raise SpecialTokenError(
                f"the text contains the special token {name!r} at offset {at}. Pass "
                f"allowed_special={{{name!r}}} (or 'all') to encode it as the special token, or "
                f"disallowed_special=() to encode it as ordinary text"
            )

    def _encode_batch_with_specials(self, texts, allowed: dict[str, int], num_threads) -> list[list[int]]:
        """:meth:`_encode_with_specials` of each text; families may do it in parallel."""
        return [self._encode_with_specials(t, allowed) for t in texts]

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        """Encode text, turning occurrences of the ``allowed`` specials into their ids.

        Generic version (leftmost, longest special first); families may override it.
        """
        out: list[int] = []
        i = 0
        names = sorted(allowed, key=len, reverse=True)
        while True:
            best = None
            for name in names:
                j = text.find(name, i)
                if j != -1 and (best is None or j < best[0]):
                    best = (j, name)
            if best is None:
                out.extend(self.encode_ordinary(text[i:]))
                return out
            j, name = best
            out.extend(self.encode_ordinary(text[i:j]))
            out.append(allowed[name])
            i = j + len(name)

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False):
        """Encode many texts: a list of id lists, or with ``as_numpy`` an
        :class:`IdBatch` (one flat ``uint32`` array and ``int64`` offsets, a
        numpy view per text on demand)."""
        _check_texts(texts)
        if as_numpy:
            return IdBatch(*self.encode_batch_flat(texts, num_threads=num_threads))
        return [self.encode_ordinary(t) for t in texts]

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Encode many texts into one flat ``uint32`` array of ids and ``int64``
        offsets of ``len(texts) + 1``: text ``i``'s ids are
        ``ids[offsets[i]:offsets[i + 1]]`` (equal to ``encode_ordinary(texts[i])``).

        The one batch rule for bulk ids: families with a Rust core
        (:class:`CoreEncoded`, growing) encode with the GIL released straight
        into the one buffer numpy wraps, without a Python object per text; this
        default, for the others, goes through :meth:`encode_batch`."""
        _check_texts(texts)
        return _flat([self.encode_ordinary(t) for t in texts])

    #: How text becomes the bytes the ids stand for: "utf-8" (a lone surrogate as
    #: its three "surrogatepass" bytes) or "latin-1" (mixedgram). Offsets use it.
    text_encoding = "utf-8"

    def encode_with_offsets(
        self, text: str, *, allowed_special=None, disallowed_special=()
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """``(ids, offsets)``: the ids of :meth:`encode` (no BOS/EOS added) and, per
        id, the span ``(start, end)`` of characters of ``text`` its bytes cover
        (the first and last character touched; a token inside one multi-byte
        character gets that character's span, as Hugging Face's ``offsets`` do).
        See :mod:`tokenforge.offsets`."""
        from .offsets import spans_of

        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets expects a str, not {type(text).__name__}")
        # the contract's encode, also where a family's own adds BOS/EOS (growing's seed-style encode)
        ids = Tokenizer.encode(self, text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        return ids, spans_of(self, text, ids)

    def encode_batch_with_offsets(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """:meth:`encode_with_offsets` of many texts (ids encoded as one
        :meth:`encode_batch`, in parallel where the family can)."""
        from .offsets import spans_of

        _check_texts(texts)
        batch = self.encode_batch(list(texts), num_threads=num_threads)
        return [(ids, spans_of(self, t, ids)) for t, ids in zip(texts, batch)]

    def decode(self, ids) -> str:
        """Decode ids to text (invalid UTF-8 becomes U+FFFD; a lone surrogate's
        bytes become the surrogate again, see :func:`decode_utf8`)."""
        return decode_utf8(self.decode_bytes(ids))

    def id_to_token(self, id: int) -> str:
        """One id as text (bytes that are not valid UTF-8 alone become U+FFFD)."""
        # "replace", not decode_utf8: this is one token shown to a person, and a
        # lone surrogate in it would make printing it fail.
        return self.id_to_bytes(id).decode("utf-8", errors="replace")

    def _check_id(self, id) -> int:
        if not is_integer(id):
            raise TypeError(f"token id must be an int, not {type(id).__name__}")
        if not 0 <= int(id) < self.vocab_size:
            raise TokenforgeError(f"token id {int(id)} is out of range for a vocabulary of {self.vocab_size}")
        return int(id)

    # ---- nanochat's names --------------------------------------------------
    def get_vocab_size(self) -> int:
        return self.vocab_size

    def get_special_tokens(self) -> set[str]:
        return set(self.special_tokens)

    def encode_special(self, text: str) -> int:
        """The id of a special token, by its text."""
        try:
            return self.special_tokens[text]
        except KeyError:
            known = ", ".join(sorted(self.special_tokens)) or "none"
            raise SpecialTokenError(
                f"unknown special token {text!r}; this tokenizer's special tokens are: {known}"
            ) from None

    def _special_id(self, token) -> int:
        if is_integer(token):
            return self._check_id(token)
        return self.encode_special(token)

    def _jsonl_block_encoder(self):
        """For :func:`tokenforge.data.shards.pretokenize`: the core's parser-and-encoder
        of JSON-lines blocks, for families whose ``encode_batch`` is exactly their
        core's ``encode_ordinary`` (no Python step before or after); None here."""
        return None

    # ---- optional hooks (defaults; families override what they offer) ------
    @property
    def model_vocab_size(self) -> int:
        """Rows a language model needs: the ids that can occur (``vocab_size``
        here; the growing vocabulary answers the ids in use)."""
        return self.vocab_size

    def embedding_metadata(self, mode: str = "structured") -> dict:
        """Parent/character indices of every id for the tree embedding ``mode``
        (the dict of :mod:`tokenforge.embedding_meta`). Here: no tree at all."""
        raise EmbeddingModeError(
            f"{type(self).__name__} has no parent/character structure, so the {mode!r} embedding cannot be "
            f"built; use mode 'flat'"
        )

    def merge_parts(self) -> Mapping[int, tuple[int, int]]:
        """``{id: (left, right)}``: the two ids each merged id was built from, both
        smaller than it (BPE merges; :func:`tokenforge.torch.expand_vocabulary`
        initialises a new row from its parts' rows). Empty here: no merges."""
        return {}

    def normalize(self, text: str) -> str:
        """The text as the tokenizer sees it before splitting (the growing
        vocabulary applies NFC); unchanged here. Metrics count the bytes seen."""
        return text

    def inspect_extra(self) -> dict:
        """Family-specific statistics for ``tokenforge inspect`` (none here)."""
        return {}

    def _fingerprint_files(self) -> dict[str, bytes] | None:
        """For :func:`tokenforge.data.fingerprint.tokenizer_fingerprint`: ``{name: bytes}``
        of the files that define the tokenizer (no derived views), which spares
        saving to disk; None here (the fingerprint saves a copy instead)."""
        return None

    def get_bos_token_id(self) -> int:
        for name in ("<|bos|>", "<|endoftext|>", "<bos>", "<s>"):
            if name in self.special_tokens:
                return self.special_tokens[name]
        raise SpecialTokenError(
            "this tokenizer has no BOS token (<|bos|> or <|endoftext|>); add one with special_tokens="
        )

    def get_token_bytes(self, device=None):
        """``token_bytes()``; as a torch tensor on ``device`` when one is given (nanochat)."""
        tb = self.token_bytes()
        if device is None:
            return tb
        import numpy as np
        import torch  # lazy: torch is an optional extra

        return torch.as_tensor(tb.astype(np.int32), device=device)


def _rebuild_tokenizer(cls, data: bytes, state: dict) -> Tokenizer:
    """Unpickling a tokenizer: parse its saved file's bytes (see ``Tokenizer.__reduce_ex__``)."""
    if not (isinstance(cls, type) and issubclass(cls, Tokenizer)):
        raise TypeError(f"not a tokenizer class: {cls!r}")
    if not isinstance(data, bytes) or not isinstance(state, dict):
        raise TypeError("a pickled tokenizer holds the bytes of its saved file and a dict of settings")
    return cls._from_bytes(data, state)


class RustBacked:
    """The byte-level members of a family whose Rust model (``self._model``)
    answers ``decode_bytes(ids)``, ``token_lengths()`` and ``id_bytes(id)``.
    List it before :class:`Tokenizer` in the bases."""

    if TYPE_CHECKING:  # set by the family; `_check_id` comes from Tokenizer
        _model: Any
        _check_id: Callable[[int], int]

    def decode_bytes(self, ids) -> bytes:
        return self._model.decode_bytes(ids)

    def token_bytes(self) -> np.ndarray:
        return self._model.token_lengths()

    def id_to_bytes(self, id: int) -> bytes:
        b = self._model.id_bytes(self._check_id(id))
        if b is None:
            raise TokenforgeError(f"token id {id} is not used by this vocabulary")
        return b


class CoreEncoded(RustBacked):
    """A :class:`RustBacked` family whose encoding is exactly its core's
    (no Python step before or after): ``self._model`` also answers
    ``encode_ordinary``, ``encode_ordinary_numpy``, ``encode(text, allowed)``,
    ``encode_batch`` / ``encode_batch_numpy``, ``encode_jsonl_block`` and
    ``vocab_size``; ``self._specials`` maps special texts to ids."""

    if TYPE_CHECKING:  # set by the family; `_byte_id` comes from Tokenizer
        _model: _core._Encoder
        _specials: dict[str, int]
        _byte_id: Callable[[int], int]

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        try:
            return self._model.encode_ordinary(text)
        except UnicodeEncodeError:  # lone surrogates: the core takes only UTF-8
            return encode_around_surrogates([text], self._model.encode_batch, self._byte_id)[0]

    def encode_to_numpy(self, text: str) -> np.ndarray:
        """Encode one text straight into a uint32 numpy array."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
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
                [text], lambda parts: [self._model.encode(t, ids) for t in parts], self._byte_id
            )[0]

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False):
        """Encode many texts in parallel (GIL released). ``as_numpy`` gives one
        array per text, views into one buffer (uint16 when the vocabulary fits)."""
        _check_texts(texts)
        return batch_ids(self._model, list(texts), num_threads, as_numpy, self._byte_id)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        _check_texts(texts)
        return batch_flat(self._model, list(texts), num_threads, self._byte_id)

    def _jsonl_block_encoder(self):
        return self._model.encode_jsonl_block


def batch_ids(model, texts: Sequence[str], num_threads: int | None, as_numpy: bool, byte_id: Callable[[int], int]):
    """Encode ``texts`` with a core model in parallel: lists of ids, or an
    :class:`IdBatch` (one flat uint32 buffer). Texts with lone surrogates:
    :func:`encode_around_surrogates` with ``byte_id``."""
    if not as_numpy:
        try:
            return model.encode_batch(texts, num_threads)
        except UnicodeEncodeError:
            return encode_around_surrogates(texts, lambda parts: model.encode_batch(parts, num_threads), byte_id)
    return IdBatch(*batch_flat(model, texts, num_threads, byte_id))


def batch_flat(
    model, texts: Sequence[str], num_threads: int | None, byte_id: Callable[[int], int]
) -> tuple[np.ndarray, np.ndarray]:
    """A core model's ``encode_batch_numpy`` (flat uint32 ids, int64 offsets),
    also for texts with lone surrogates (:func:`encode_around_surrogates`)."""
    try:
        return model.encode_batch_numpy(texts, num_threads)
    except UnicodeEncodeError:
        return _flat(encode_around_surrogates(texts, lambda parts: model.encode_batch(parts, num_threads), byte_id))


def _check_texts(texts) -> None:
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode_batch expects a list of str, not a single str; use encode(text)")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode_batch: item {i} is {type(t).__name__}, expected str")
