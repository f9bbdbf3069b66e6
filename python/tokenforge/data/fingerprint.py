"""A tokenizer's fingerprint: one hash that changes whenever its ids could.

Pretokenized shards record the fingerprint of the tokenizer that made them, so
a shard set is never read (or resumed) with a different tokenizer. The hash
covers the class, what ``save`` writes (every file, by relative path; or the
defining files a family names, see ``_saved_files_digest``), the
vocabulary size, the special tokens, the byte length of every id, and the ids
of a fixed probe text (which catches encode-time options a file might not
record). Saving goes to a temporary directory (inside ``scratch_dir`` when
given) that is removed afterwards.

:func:`texts_digest` is the same kind of key for the texts a result was computed on.

Not handled: two classes that name the same family and save the same files are
told apart only by their class name, which is hashed too; a tokenizer whose
encoding depends on state neither its files nor the probe reach.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

__all__ = ["tokenizer_fingerprint", "texts_digest"]

_PROBE = (
    "The quick brown fox jumps over the lazy dog. 0123456789 \n\n"
    "def f(x):\n\treturn x ** 2  # squares\n"
    "Ünïcödé — “quotes”, 日本語, emoji 🙂, tabs\tand  spaces.\n"
)


def _saved_files_digest(tok: Any, h: Any, scratch_dir: str | os.PathLike[str] | None = None) -> bool:
    """Feed the files ``tok.save`` writes into ``h``; False when saving is impossible.

    A family may instead answer the hook ``fingerprint_files()`` (declared on
    :class:`~tokenforge.base.Tokenizer`): ``{name: bytes}`` of the files that
    define it (without views derived from them), which spares writing to disk."""
    files = tok.fingerprint_files()
    if files is not None:
        for name, data in sorted(files.items()):
            h.update(name.encode() + b"\0")
            h.update(hashlib.sha256(data).digest())
        return True
    # A copy, because some families remember where they were last saved
    # (the growing vocabulary syncs to that path); the original must not move.
    clone = copy.copy(tok)
    if scratch_dir is not None:
        Path(scratch_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tokenforge-fp-", dir=scratch_dir) as tmp:
        target = Path(tmp) / "tokenizer"
        try:
            clone.save(target)
        except Exception:  # a tokenizer that cannot be saved is still fingerprinted below
            return False
        root = Path(tmp)
        for p in sorted(root.rglob("*")):
            if p.is_file():
                h.update(p.relative_to(root).as_posix().encode() + b"\0")
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return True


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 (hex) of a sequence of texts: each one's UTF-8 length (8 bytes,
    little-endian) then its bytes, so no two different sequences share a digest
    by moving text from one document to the next. What ``compare`` keys its
    cached tokenizers and bits-per-byte results by."""
    h = hashlib.sha256()
    for d in texts:
        b = d.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def tokenizer_fingerprint(tok: Any, scratch_dir: str | os.PathLike[str] | None = None) -> str:
    """``"sha256:<hex>"`` identifying the tokenizer's behaviour (see the module docstring).

    ``scratch_dir``: where the temporary copy is saved (default: the system's
    temporary directory); it is removed afterwards.
    """
    h = hashlib.sha256()
    h.update(f"{type(tok).__module__}.{type(tok).__qualname__}\0".encode())
    # the family's name, as the tokenizer states it (registered or not: this module
    # reads no registry, so it cannot tell; a class outside it hashes its own name)
    h.update(f"family:{tok.family}\0".encode())
    h.update(b"saved:" + (b"1" if _saved_files_digest(tok, h, scratch_dir) else b"0"))
    h.update(
        json.dumps({"vocab_size": int(tok.vocab_size), "special_tokens": tok.special_tokens}, sort_keys=True).encode()
    )
    h.update(np.ascontiguousarray(tok.token_bytes(), dtype=np.int64).tobytes())
    try:
        probe = tok.encode_ordinary(_PROBE)
    except Exception:  # e.g. a latin1-only tokenizer: probe with ASCII only
        probe = tok.encode_ordinary(_PROBE.encode("ascii", "ignore").decode())
    h.update(np.asarray(probe, dtype=np.int64).tobytes())
    return "sha256:" + h.hexdigest()
