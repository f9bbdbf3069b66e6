"""The contract every tokenizer family meets.

A family subclasses :class:`Tokenizer` and implements the abstract members;
everything else (nanochat's method names, chat rendering, batch helpers) comes
from here so that families behave alike. Training and loading are declared here
too (``train``, ``train_from_iterator``, ``load``), and the optional hooks other
parts of tokenforge call (``embedding_metadata``, ``model_vocab_size``,
``merge_parts``, ``normalize``, ``inspect_extra``, ``fingerprint_files``,
``jsonl_block_encoder``) with their defaults, so no caller probes with
``hasattr``. Which families exist, and which files each reads
(:func:`tokenforge.load`), is :mod:`tokenforge.registry`.

The contract's helpers live one idea per module, and are re-exported here under
their old names: lone surrogates (:mod:`tokenforge.surrogates`), ids in bulk
and :class:`IdBatch` (:mod:`tokenforge.ids`), the batching rule
(:mod:`tokenforge.batching`), the members a Rust model gives
(:mod:`tokenforge.rust_backed`), pickling through the file format
(:mod:`tokenforge.pickling`).

Not handled: a family subclass's own extra attributes when pickled (it is
rebuilt from the family's file); training on text with lone surrogates (the
cores' counters refuse it); a parse across a lone surrogate (the text on either
side is encoded on its own, as if the surrogate were a document boundary).
"""

from __future__ import annotations

import abc
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union, cast, overload

if TYPE_CHECKING:
    import numpy as np

from .batching import feed_in_batches
from .chat import ChatMixin
from .embedding_meta import EmbeddingModeError
from .errors import SpecialTokenError, TokenforgeError
from .ids import IdBatch, check_texts, flat_ids, ids_dtype, is_integer
from .pickling import FileTransport
from .rust_backed import CoreEncoded, RustBacked, batch_flat, batch_ids
from .surrogates import SURROGATE_ERRORS, decode_utf8, encode_around_surrogates, feed_around_surrogates

#: what ``allowed_special`` and ``disallowed_special`` take: "all" or special-token texts
SpecialArg = Union[str, Iterable[str]]

__all__ = [
    "Tokenizer",
    "special_stretches",
    "RustBacked",
    "CoreEncoded",
    "ids_dtype",
    "is_integer",
    "SURROGATE_ERRORS",
    "feed_around_surrogates",
    "feed_in_batches",
    "decode_utf8",
    "encode_around_surrogates",
    "IdBatch",
    "batch_ids",
    "batch_flat",
]


def special_stretches(text: str, allowed: Mapping[str, int]) -> Iterator[tuple[int, int, int | None]]:
    """The one split of ``text`` at the ``allowed`` special tokens' texts:
    ``(start, end, id)`` for each stretch ``text[start:end]`` of ordinary text
    (possibly empty) and the id of the special token after it (None after the
    last stretch). The leftmost special first, the longest at one position
    (tiktoken's and tokenizers' added-token matching).

    Each name's next occurrence is remembered and searched for again only once
    the split has passed it, so a name that never occurs is scanned for once,
    not once per special found (linear in the text for a fixed set of names)."""
    names = sorted(allowed, key=len, reverse=True)
    found = {name: text.find(name) for name in names}
    i = 0
    while True:
        best: tuple[int, str] | None = None
        for name in names:
            j = found[name]
            if j != -1 and j < i:
                j = found[name] = text.find(name, i)
            if j != -1 and (best is None or j < best[0]):
                best = (j, name)
        if best is None:
            yield i, len(text), None
            return
        j, name = best
        yield i, j, allowed[name]
        i = j + len(name)


class Tokenizer(ChatMixin, FileTransport, abc.ABC):
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
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer so that :func:`tokenforge.load` reads it back."""

    # ---- training and loading ------------------------------------------------
    # Declared here so the contract names them; every built-in family defines
    # all three with its own options (see docs/architecture.md, "The corpus
    # rule"). A family that cannot train or load says so by leaving these.
    @classmethod
    def train(cls, *args: Any, **kwargs: Any) -> Tokenizer:
        """Train a tokenizer of this family on files: the first argument, the
        corpus, is a path or a non-empty list of paths (:mod:`tokenforge.data.corpus`)."""
        raise NotImplementedError(f"{cls.__name__} does not train")

    @classmethod
    def train_from_iterator(cls, *args: Any, **kwargs: Any) -> Tokenizer:
        """Train a tokenizer of this family on texts: the first argument is an
        iterable of str, each a text."""
        raise NotImplementedError(f"{cls.__name__} does not train")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Read a tokenizer of this family from a file :meth:`save` wrote."""
        raise NotImplementedError(f"{cls.__name__} does not load files; use tokenforge.load")

    def byte_id(self, b: int) -> int:
        """The id that stands for the single byte ``b`` (how a lone surrogate is
        encoded: :func:`tokenforge.surrogates.encode_around_surrogates`).
        Families that encode UTF-8 define it."""
        raise NotImplementedError(f"{type(self).__name__} has no byte ids for lone surrogates")

    # ---- shared behaviour --------------------------------------------------
    #: What ``encode`` does with special-token text when the caller does not say
    #: (``allowed_special=None``): ``()`` keeps it ordinary text; a family may
    #: record another policy per tokenizer (seed 003's BPE tokenizers: ``"all"``).
    @property
    def default_allowed_special(self) -> SpecialArg:
        return ()

    @overload
    def encode(
        self,
        text: str,
        prepend: str | int | None = None,
        append: str | int | None = None,
        num_threads: int | None = None,
        *,
        allowed_special: SpecialArg | None = None,
        disallowed_special: SpecialArg = (),
    ) -> list[int]: ...
    @overload
    def encode(
        self,
        text: list[str] | tuple[str, ...],
        prepend: str | int | None = None,
        append: str | int | None = None,
        num_threads: int | None = None,
        *,
        allowed_special: SpecialArg | None = None,
        disallowed_special: SpecialArg = (),
    ) -> list[list[int]]: ...
    def encode(
        self,
        text: str | Sequence[str],
        prepend: str | int | None = None,
        append: str | int | None = None,
        num_threads: int | None = None,
        *,
        allowed_special: SpecialArg | None = None,
        disallowed_special: SpecialArg = (),
    ) -> list[int] | list[list[int]]:
        """Encode a str (-> list of ids) or a list of str (-> list of lists).

        ``prepend``/``append`` are a special token's text or an id, added to every
        sequence (nanochat's signature). By default special-token text in ``text``
        is encoded as ordinary text, so ``decode(encode(s)) == s`` always holds
        (a tokenizer may record another default, :attr:`default_allowed_special`).
        ``allowed_special`` ("all" or a set of special texts) turns that text into
        the special ids; ``()`` keeps it text; ``disallowed_special`` ("all" or a
        set) makes its presence an error instead (tiktoken's safety check).
        """
        # The common call, encode(str) with nothing else said, is encode_ordinary:
        # the policy dicts and the closure below cost ~2 us a call, 5-10x the
        # encoding of a short text.
        if (
            type(text) is str
            and prepend is None
            and append is None
            and allowed_special is None
            and not disallowed_special
            and not self.default_allowed_special
        ):
            return self.encode_ordinary(text)
        allowed, disallowed = self._special_policy(allowed_special, disallowed_special)
        pre = None if prepend is None else self._special_id(prepend)
        post = None if append is None else self._special_id(append)

        def one(t: str) -> list[int]:
            if disallowed:
                self._raise_if_special(t, disallowed)
            if allowed:
                return self._encode_with_specials(t, allowed)
            return self.encode_ordinary(t)

        out: list[list[int]]
        if isinstance(text, str):
            out = [one(text)]
        elif isinstance(text, (list, tuple)):
            check_texts(text)
            if not allowed and not disallowed:
                out = cast("list[list[int]]", self.encode_batch(text, num_threads=num_threads))
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

    def _special_policy(
        self, allowed_special: SpecialArg | None, disallowed_special: SpecialArg
    ) -> tuple[dict[str, int], dict[str, int]]:
        specials = self.special_tokens
        if allowed_special is None:  # the caller did not say: this tokenizer's recorded default
            allowed_special = self.default_allowed_special

        def pick(arg: SpecialArg, what: str) -> dict[str, int]:
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

    def _encode_batch_with_specials(
        self, texts: Sequence[str], allowed: dict[str, int], num_threads: int | None
    ) -> list[list[int]]:
        """:meth:`_encode_with_specials` of each text; families may do it in parallel."""
        return [self._encode_with_specials(t, allowed) for t in texts]

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        """Encode text, turning occurrences of the ``allowed`` specials into their ids.

        Generic version (leftmost, longest special first); families may override it.
        """
        out: list[int] = []
        for start, end, special in special_stretches(text, allowed):
            out.extend(self.encode_ordinary(text[start:end]))
            if special is not None:
                out.append(special)
        return out

    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False
    ) -> list[list[int]] | IdBatch:
        """Encode many texts: a list of id lists, or with ``as_numpy`` an
        :class:`IdBatch` (one flat ``uint32`` array and ``int64`` offsets, a
        numpy view per text on demand)."""
        check_texts(texts)
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
        check_texts(texts)
        return flat_ids([self.encode_ordinary(t) for t in texts])

    #: How text becomes the bytes the ids stand for: "utf-8" (a lone surrogate as
    #: its three "surrogatepass" bytes) or "latin-1" (mixedgram). Offsets use it.
    text_encoding = "utf-8"

    def encode_with_offsets(
        self, text: str, *, allowed_special: SpecialArg | None = None, disallowed_special: SpecialArg = ()
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """``(ids, offsets)``: the ids of :meth:`encode` (no BOS/EOS added) and, per
        id, the span ``(start, end)`` of characters of ``text`` its bytes cover
        (the first and last character touched; a token inside one multi-byte
        character gets that character's span, as Hugging Face's ``offsets`` do).
        See :mod:`tokenforge.offsets`."""
        from .offsets import spans_of

        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets expects a str, not {type(text).__name__}")
        ids = self.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        return ids, spans_of(self, text, ids)

    def encode_batch_with_offsets(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """:meth:`encode_with_offsets` of many texts (ids encoded as one
        :meth:`encode_batch`, in parallel where the family can)."""
        from .offsets import spans_of

        check_texts(texts)
        batch = cast("list[list[int]]", self.encode_batch(list(texts), num_threads=num_threads))
        return [(ids, spans_of(self, t, ids)) for t, ids in zip(texts, batch)]

    def decode(self, ids: Iterable[int]) -> str:
        """Decode ids to text (invalid UTF-8 becomes U+FFFD; a lone surrogate's
        bytes become the surrogate again, see :func:`decode_utf8`)."""
        return decode_utf8(self.decode_bytes(ids))

    def id_to_token(self, id: int) -> str:
        """One id as text (bytes that are not valid UTF-8 alone become U+FFFD)."""
        # "replace", not decode_utf8: this is one token shown to a person, and a
        # lone surrogate in it would make printing it fail.
        return self.id_to_bytes(id).decode("utf-8", errors="replace")

    def check_id(self, id: Any) -> int:
        """``id`` as an int in ``range(vocab_size)``: a ``TypeError`` for what is not
        an integer, a ``TokenforgeError`` naming the id and the vocabulary size for
        one out of range. Families check every id a caller gives with it."""
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

    def _special_id(self, token: Any) -> int:
        if is_integer(token):
            return self.check_id(token)
        return self.encode_special(token)

    def jsonl_block_encoder(self) -> Callable[..., Any] | None:
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

    def fingerprint_files(self) -> dict[str, bytes] | None:
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

    def get_token_bytes(self, device: Any = None) -> Any:
        """``token_bytes()``; as a torch tensor on ``device`` when one is given (nanochat)."""
        tb = self.token_bytes()
        if device is None:
            return tb
        import numpy as np
        import torch  # lazy: torch is an optional extra

        return torch.as_tensor(tb.astype(np.int32), device=device)
