"""nanochat's tokenizer directory: ``tokenizer.pkl`` and ``token_bytes.pt``.

nanochat (karpathy/nanochat) keeps its tokenizer as two files in one directory:

* ``tokenizer.pkl``   a pickle of a ``tiktoken.Encoding`` (what ``pickle.dump(enc)``
                      writes: the class ``tiktoken.core.Encoding`` created with
                      ``NEWOBJ`` and its state, the dict ``{name, pat_str,
                      mergeable_ranks, special_tokens}``, applied with ``BUILD``);
                      ``RustBPETokenizer.from_directory`` unpickles it;
* ``token_bytes.pt``  ``torch.save`` of an int32 tensor with every id's byte
                      length, 0 for special tokens (``get_token_bytes()``; the
                      loss in bits per byte divides by it).

:func:`write_nanochat` writes both the way nanochat's own training script does:
the pickle through ``pickle.dump`` of a real ``tiktoken.Encoding`` (so tiktoken
must be installed, as it must be for nanochat to read it), the tensor through
``torch.save`` (without torch, a warning says so and the pickle is written
alone; a ``token_bytes.pt`` of an earlier save there is removed, not left to
describe another vocabulary). The two files are one save (:func:`.atomic.atomic_write_all`): both are
complete before either is renamed, so a failure never leaves a new pickle
beside an old tensor.

:func:`read_nanochat` never gives the pickle to an unpickler as it is. It
decodes the opcodes (``pickletools.genops``, which runs nothing), requires the
exact envelope ``pickle.dump`` writes around an ``Encoding`` (the class named
``tiktoken.core.Encoding`` and nothing else, ``EMPTY_TUPLE NEWOBJ`` at the start,
``BUILD STOP`` at the end), and unpickles only the state between them, re-framed
as a pickle of plain data, with the restricted machinery of
:func:`tokenforge.formats.seed003.load_plain_pickle_bytes` (no import, no call,
bombs refused before anything is built). The tokenizer is then rebuilt from
that plain dict; no ``tiktoken`` object is ever made. Anything else is an
:class:`~tokenforge.errors.UnsafePickleError`, a malformed state a
:class:`~tokenforge.errors.FormatError`.

Not handled: a pickle of an encoding tiktoken has registered by name (tiktoken
stores only the name, ``"cl100k_base"``; load the name's rank file instead: the
error says so); pickles of protocol 0 to 2 (``copyreg._reconstructor``, or bytes
stored through ``_codecs.encode``: refused as imports), which Python 3 never
writes by default; reading ``token_bytes.pt`` (it is derived
from the ranks, and reading it would mean unpickling torch's zip archive), so
:func:`read_nanochat` reads ``tokenizer.pkl`` alone.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

from ..errors import FormatError, TokenforgeError, TokenforgeWarning, UnsafePickleError
from .atomic import atomic_write_all
from .bpe_data import BPEData
from .patterns import WHOLE_TEXT_PATTERN

__all__ = ["PICKLE_FILE", "TOKEN_BYTES_FILE", "read_nanochat", "sniff_nanochat", "write_nanochat"]

PICKLE_FILE = "tokenizer.pkl"
TOKEN_BYTES_FILE = "token_bytes.pt"

_CLASS = ("tiktoken.core", "Encoding")
_STATE_KEYS = ("name", "pat_str", "mergeable_ranks", "special_tokens")
_MEMO_STORES = frozenset(("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"))
_STRINGS = frozenset(("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"))
#: a head that names tiktoken's Encoding class early: what sniffing looks for
_SNIFF_MARKS = (b"tiktoken.core", b"Encoding")


# ------------------------------------------------------------------ writing
def write_nanochat(directory: str | os.PathLike[str], tok: Any, *, name: str = "tokenforge") -> list[Path]:
    """Write ``tokenizer.pkl`` (and ``token_bytes.pt`` when torch is installed)
    into ``directory``; returns the paths written. ``tok`` is a tokenizer with
    ``to_tiktoken`` (a :class:`~tokenforge.BPETokenizer`) and ``<|bos|>``, the
    one special token nanochat's loader asks for."""
    if "<|bos|>" not in tok.special_tokens:
        known = ", ".join(sorted(tok.special_tokens)) or "none"
        raise TokenforgeError(
            f"nanochat's tokenizer needs the special token <|bos|> (its loader asks for it), and this tokenizer has "
            f"{known}; train with special_tokens='nanochat' (the default) to get nanochat's nine"
        )
    try:
        enc = tok.to_tiktoken(name=name)
    except ModuleNotFoundError as e:
        raise TokenforgeError(
            "save_nanochat writes a pickled tiktoken.Encoding, as nanochat does: install tiktoken "
            "(pip install tiktoken), which nanochat needs to read it too"
        ) from e
    pickled = pickle.dumps(enc)
    directory = Path(directory)
    torch: Any
    try:
        import torch
    except ModuleNotFoundError:
        torch = None
    tensor = None
    stale = directory / TOKEN_BYTES_FILE
    if torch is None:
        gone = f"; removed the old {TOKEN_BYTES_FILE}, which was another vocabulary's" if stale.exists() else ""
        warnings.warn(
            f"torch is not installed: wrote {PICKLE_FILE} without {TOKEN_BYTES_FILE}{gone} "
            "(pip install torch, then save again, for nanochat's get_token_bytes())",
            TokenforgeWarning,
            stacklevel=3,
        )
    else:
        buf = io.BytesIO()
        torch.save(torch.tensor(tok.token_bytes().tolist(), dtype=torch.int32), buf)
        tensor = buf.getvalue()
    items = [(directory / PICKLE_FILE, pickled)]
    if tensor is not None:
        items.append((directory / TOKEN_BYTES_FILE, tensor))
    # one save: both complete before either is renamed; the pickle (what loaders read) last
    atomic_write_all(items)
    if tensor is None and stale.exists():
        stale.unlink()  # it described the vocabulary this save replaced
    return [path for path, _ in items]


# ------------------------------------------------------------------ reading
def _pickle_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p / PICKLE_FILE if p.is_dir() else p


def sniff_nanochat(path: str | os.PathLike[str], head: bytes) -> bool:
    """A directory holding ``tokenizer.pkl``, a file of that name, or a pickle
    whose first bytes name tiktoken's ``Encoding`` class. (Claimed by name, a
    hostile ``tokenizer.pkl`` is refused by the reader, saying what it tried.)"""
    p = Path(path)
    if p.is_dir():
        return (p / PICKLE_FILE).is_file()
    return head[:1] == b"\x80" and (p.name == PICKLE_FILE or all(m in head[:256] for m in _SNIFF_MARKS))


def _refuse(what: str, path: str | os.PathLike[str], offset: int | None = None) -> UnsafePickleError:
    return UnsafePickleError(
        f"refused: {what}; a nanochat tokenizer.pkl holds a tiktoken.core.Encoding and its plain state only",
        path=path,
        offset=offset,
    )


def _decode_ops(raw: bytes, path: str | os.PathLike[str]) -> list[tuple[str, object, int, int]]:
    """(name, arg, start, end) of every opcode but ``FRAME`` (framing only says
    how the writer buffered; each opcode's own bytes are kept)."""
    from .seed003 import pickle_opcodes

    try:
        ops = [(op.name, arg, pos) for op, arg, pos in pickle_opcodes(raw)]
    except ValueError as e:  # truncated, or not a pickle
        raise FormatError(f"corrupt or truncated pickle: {str(e)[:200]}", path=path) from None
    if ops and ops[-1][2] + 1 != len(raw):
        end = ops[-1][2] + 1
        raise FormatError(f"{len(raw) - end} unexpected bytes after the pickle's end", path=path, offset=end)
    ends = [pos for _, _, pos in ops[1:]] + [len(raw)]
    return [(name, arg, pos, end) for (name, arg, pos), end in zip(ops, ends) if name != "FRAME"]


def _state_bytes(raw: bytes, path: str | os.PathLike[str]) -> bytes:
    """Check the ``Encoding`` envelope, then return the state between its
    ``NEWOBJ`` and ``BUILD`` as a pickle of its own (protocol 4, no frames).

    Any import other than tiktoken's ``Encoding``, or any other call, is
    refused. Protocol 4 numbers memo entries implicitly (``MEMOIZE``): as many
    placeholder entries as the envelope made come first, so the state's memo
    references keep their meaning (one into the envelope finds None, which the
    state's check refuses)."""
    if not raw:
        raise FormatError("empty file; expected a pickled tiktoken.Encoding", path=path, offset=0)
    ops = _decode_ops(raw, path)
    names = [o[0] for o in ops]
    if not names or names[0] != "PROTO" or not isinstance(ops[0][1], int) or ops[0][1] < 2:
        raise FormatError(
            "not a pickle of protocol 2 or later (nanochat's tokenizer.pkl is written by pickle.dump)", path=path
        )
    i = 1
    memo_made = 0

    def memo_store() -> None:
        nonlocal i, memo_made
        while i < len(ops) and names[i] in _MEMO_STORES:
            memo_made += names[i] == "MEMOIZE"
            i += 1

    # the class: GLOBAL 'tiktoken.core Encoding', or two strings and STACK_GLOBAL
    if i < len(ops) and names[i] == "GLOBAL":
        module, _, cls = str(ops[i][1]).partition(" ")
        if (module, cls) != _CLASS:
            raise _refuse(f"the pickle imports {module[:80]}.{cls[:80]}", path, ops[i][2])
        i += 1
    else:
        found = []
        for _ in range(2):
            if i >= len(ops) or names[i] not in _STRINGS:
                break
            found.append(str(ops[i][1]))
            i += 1
            memo_store()
        if len(found) != 2 or i >= len(ops) or names[i] != "STACK_GLOBAL":
            what = names[i] if i < len(ops) else "the end"
            raise _refuse(f"the pickle does not start by naming tiktoken.core.Encoding (found {what})", path)
        if tuple(found) != _CLASS:
            raise _refuse(f"the pickle imports {found[0][:80]}.{found[1][:80]}", path, ops[i][2])
        i += 1
    memo_store()
    if names[i : i + 2] != ["EMPTY_TUPLE", "NEWOBJ"]:
        what = " ".join(names[i : i + 2]) or "the end"
        raise _refuse(f"the Encoding must be created with EMPTY_TUPLE NEWOBJ (no arguments), found {what}", path)
    i += 2
    memo_store()
    if names[-2:] != ["BUILD", "STOP"] or len(ops) - 2 <= i:
        raise _refuse("the pickle must end by applying the Encoding's state (BUILD STOP)", path)
    body = bytearray(b"\x80\x04")
    body += b"N\x94" * memo_made + b"0" * memo_made  # NONE MEMOIZE each, then POP them all
    for _, _, start, end in ops[i:-2]:
        body += raw[start:end]
    body += b"."
    return bytes(body)


def _check_state(state: object, path: str | os.PathLike[str]) -> tuple[str, dict[bytes, int], dict[str, int]]:
    if isinstance(state, str):
        raise FormatError(
            f"this pickle refers to tiktoken's registered encoding {state[:40]!r} by name only; load that "
            "encoding's rank file with tokenforge.load(...) instead",
            path=path,
        )
    if not isinstance(state, dict):
        raise FormatError(f"the Encoding's state must be a dict, not {type(state).__name__}", path=path)
    keys = set(state)
    if keys != set(_STATE_KEYS):
        missing = [k for k in _STATE_KEYS if k not in keys]
        extra = sorted(repr(k)[:40] for k in keys if k not in _STATE_KEYS)
        raise FormatError(
            f"the Encoding's state must have exactly the keys {', '.join(_STATE_KEYS)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unexpected {', '.join(extra)}" if extra else ""),
            path=path,
        )
    pat, ranks, specials = state["pat_str"], state["mergeable_ranks"], state["special_tokens"]
    if not isinstance(state["name"], str):
        raise FormatError(f"the Encoding's name must be a str, not {type(state['name']).__name__}", path=path)
    if not isinstance(pat, str):
        raise FormatError(f"pat_str must be a str, not {type(pat).__name__}", path=path)
    if not isinstance(ranks, dict):
        raise FormatError(f"mergeable_ranks must be a dict, not {type(ranks).__name__}", path=path)
    if not isinstance(specials, dict):
        raise FormatError(f"special_tokens must be a dict, not {type(specials).__name__}", path=path)
    for text, i in specials.items():
        if not isinstance(text, str) or not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise FormatError(
                f"special_tokens must map str to a non-negative int; found {repr(text)[:60]}: {repr(i)[:40]}",
                path=path,
            )
    # mergeable_ranks' types and bounds are checked by data_from_ranks (naming the token)
    return pat, ranks, specials


def read_nanochat(path: str | os.PathLike[str]) -> BPEData:
    """Read nanochat's ``tokenizer.pkl`` (the file, or the directory holding it)."""
    from .seed003 import load_plain_pickle_bytes
    from .tiktoken_io import data_from_ranks

    p = _pickle_path(path)
    raw = p.read_bytes()
    # errors inside the state give offsets within the state's bytes (re-framed), not the file's
    state = load_plain_pickle_bytes(_state_bytes(raw, p), p)
    pat, ranks, specials = _check_state(state, p)
    try:
        return data_from_ranks(ranks, None if pat == WHOLE_TEXT_PATTERN else pat, specials)
    except FormatError as e:
        if e.path is None:
            raise FormatError(e.reason, path=p, line=e.line, offset=e.offset) from None
        raise
