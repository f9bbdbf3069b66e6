"""The contract every tokenizer family meets, and ``tokenforge.load``.

A family subclasses :class:`Tokenizer` and implements the abstract members;
everything else (nanochat's method names, chat rendering, batch helpers) comes
from here so that families behave alike. A family that writes files registers
a sniffer with :func:`register_format` so :func:`load` recognises them.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from .chat import ChatMixin
from .errors import FormatError, SpecialTokenError, TokenforgeError

__all__ = ["Tokenizer", "RustBacked", "CoreEncoded", "load", "register_format", "ids_dtype"]


def ids_dtype(vocab_size: int):
    """The smallest unsigned dtype that holds every id of a vocabulary."""
    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


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
                raise TypeError(f"{what} must be 'all' or a collection of special-token strings, not the string {arg!r}")
            chosen = {}
            for name in arg:
                if name not in specials:
                    known = ", ".join(sorted(specials)) or "none"
                    raise SpecialTokenError(f"{what} names {name!r}, which is not a special token of this tokenizer (known: {known})")
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
        """Encode many texts; ``as_numpy`` gives one numpy array per text."""
        _check_texts(texts)
        out = [self.encode_ordinary(t) for t in texts]
        if as_numpy:
            dt = ids_dtype(self.vocab_size)
            return [np.asarray(x, dtype=dt) for x in out]
        return out

    def decode(self, ids) -> str:
        """Decode ids to text (invalid UTF-8 becomes U+FFFD)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def id_to_token(self, id: int) -> str:
        """One id as text (bytes that are not valid UTF-8 alone become U+FFFD)."""
        return self.id_to_bytes(id).decode("utf-8", errors="replace")

    def _check_id(self, id) -> int:
        if isinstance(id, (bool,)) or not isinstance(id, (int, np.integer)):
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
            raise SpecialTokenError(f"unknown special token {text!r}; this tokenizer's special tokens are: {known}") from None

    def _special_id(self, token) -> int:
        if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
            return self._check_id(token)
        return self.encode_special(token)

    def _jsonl_block_encoder(self):
        """For :func:`tokenforge.data.shards.pretokenize`: the core's parser-and-encoder
        of JSON-lines blocks, for families whose ``encode_batch`` is exactly their
        core's ``encode_ordinary`` (no Python step before or after); None here."""
        return None

    def get_bos_token_id(self) -> int:
        for name in ("<|bos|>", "<|endoftext|>", "<bos>", "<s>"):
            if name in self.special_tokens:
                return self.special_tokens[name]
        raise SpecialTokenError("this tokenizer has no BOS token (<|bos|> or <|endoftext|>); add one with special_tokens=")

    def get_token_bytes(self, device=None):
        """``token_bytes()``; as a torch tensor on ``device`` when one is given (nanochat)."""
        tb = self.token_bytes()
        if device is None:
            return tb
        import torch  # lazy: torch is an optional extra

        return torch.as_tensor(tb.astype(np.int32), device=device)


class RustBacked:
    """The byte-level members of a family whose Rust model (``self._model``)
    answers ``decode_bytes(ids)``, ``token_lengths()`` and ``id_bytes(id)``.
    List it before :class:`Tokenizer` in the bases."""

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

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return self._model.encode_ordinary(text)

    def encode_to_numpy(self, text: str) -> np.ndarray:
        """Encode one text straight into a uint32 numpy array."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return self._model.encode_ordinary_numpy(text)

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        return self._model.encode(text, list(allowed.values()))

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False):
        """Encode many texts in parallel (GIL released). ``as_numpy`` gives one
        array per text, views into one buffer (uint16 when the vocabulary fits)."""
        _check_texts(texts)
        return batch_ids(self._model, list(texts), num_threads, as_numpy, self.vocab_size)

    def _jsonl_block_encoder(self):
        return self._model.encode_jsonl_block


def batch_ids(model, texts: list[str], num_threads: int | None, as_numpy: bool, vocab_size: int):
    """Encode ``texts`` with a core model in parallel: lists of ids, or numpy
    arrays (views into one buffer; uint16 when ``vocab_size`` fits)."""
    if not as_numpy:
        return model.encode_batch(texts, num_threads)
    flat, offsets = model.encode_batch_numpy(texts, num_threads)
    dt = ids_dtype(vocab_size)
    if dt != np.uint32:
        flat = flat.astype(dt)
    return np.split(flat, offsets[1:-1].astype(np.intp)) if texts else []


def _check_texts(texts) -> None:
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode_batch expects a list of str, not a single str; use encode(text)")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode_batch: item {i} is {type(t).__name__}, expected str")


# ---- file registry ----------------------------------------------------------
_FORMATS: list[tuple[str, Callable[[Path, bytes], bool], Callable[[Path], Tokenizer]]] = []


def register_format(name: str, sniff: Callable[[Path, bytes], bool], loader: Callable[[Path], Tokenizer]) -> None:
    """Register a reader. ``sniff(path, head)`` gets the path and its first 4 KiB
    (b"" for a directory) and says whether ``loader(path)`` can read it."""
    _FORMATS.append((name, sniff, loader))


def load(path) -> Tokenizer:
    """Load any tokenizer file or directory tokenforge writes (or imports)."""
    from . import _register_all  # noqa: F401  (families register themselves on import)

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    head = b""
    if p.is_file():
        with open(p, "rb") as f:
            head = f.read(4096)
    for name, sniff, loader in _FORMATS:
        try:
            ok = sniff(p, head)
        except OSError:
            ok = False
        if ok:
            return loader(p)
    kinds = ", ".join(n for n, _, _ in _FORMATS)
    raise FormatError(f"not a tokenizer file tokenforge recognises (known kinds: {kinds})", path=p)
