"""What a file name's suffix says about its format, for ``save(path)``.

Every family's ``save`` writes its own format: a file with its own suffix
(``.json``; LZ78's ``.tsv``; mixedgram's ``.mxgram``) or else a directory.
A path whose suffix names another format (``x.tiktoken``, ``vocab.tsv`` given
to a BPE tokenizer, ``m.model``) is refused by :func:`check_save_suffix`,
naming the method that writes that format, instead of becoming a directory of
that name: nothing is written where the user did not ask.

Not handled: a directory whose name has a suffix of a format (``out.tsv/``)
must exist already to be saved into under that name.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import TokenforgeError

__all__ = ["FORMAT_SUFFIXES", "check_save_suffix"]

#: suffix -> (the format it names, what writes it)
FORMAT_SUFFIXES: dict[str, tuple[str, str]] = {
    ".json": ("a JSON tokenizer file", "the family's save (BPETokenizer.save_hf for Hugging Face's)"),
    ".tiktoken": ("a tiktoken rank file", "BPETokenizer.save_tiktoken"),
    ".tsv": ("an LZ78 dictionary", "LZ78Tokenizer.save or save_tsv"),
    ".mxgram": ("a mixedgram header", "Mixedgram.save"),
    ".model": ("a sentencepiece model", "sentencepiece itself (tokenforge does not write it)"),
    ".pkl": ("a seed 003 pickle", "BPETokenizer.export_seed003 (a directory)"),
    ".txt": ("a text file (a vocabulary view or seed special tokens)", "the family's save, which writes it beside"),
}


def check_save_suffix(path: str | os.PathLike[str], own: tuple[str, ...], who: str) -> None:
    """Refuse ``path`` when its suffix names a format other than ``own``'s
    (and it is not an existing directory)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in own or suffix not in FORMAT_SUFFIXES or p.is_dir():
        return
    what, writer = FORMAT_SUFFIXES[suffix]
    raise TokenforgeError(
        f"{who}: {p} names {what} ({suffix}), which this save does not write (it writes "
        f"{' or '.join(own)} files, or a directory); use {writer} for that format, or another path"
    )
