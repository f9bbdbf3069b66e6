"""The one small error hierarchy of tokenforge.

Every error a user can cause derives from :class:`TokenforgeError`, which is a
``ValueError`` so that code written against other tokenizers (which raise
``ValueError`` for bad input) keeps working.
"""

from __future__ import annotations

from types import FrameType

__all__ = [
    "TokenforgeError",
    "FormatError",
    "VersionError",
    "ChecksumError",
    "SpecialTokenError",
    "VocabSizeError",
    "CorpusError",
    "PatternError",
    "UnsafePickleError",
    "Latin1Error",
    "SyncError",
    "TokenforgeWarning",
    "warn_user",
]


class TokenforgeError(ValueError):
    """Base class of every error tokenforge raises for bad input or bad files."""


class FormatError(TokenforgeError):
    """A file is not what it claims to be: corrupt, truncated or malformed.

    ``path`` names the file, ``line`` (1-based) or ``offset`` (bytes) says where.
    """

    def __init__(
        self, message: str, *, path: object = None, line: int | None = None, offset: int | None = None
    ) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        full = f"{': '.join([', '.join(where), message]) if where else message}"
        super().__init__(full)
        self.path = None if path is None else str(path)
        self.line = line
        self.offset = offset
        self.reason = message


class VersionError(FormatError):
    """A file was written by a format version this tokenforge does not know."""


class ChecksumError(FormatError):
    """A file of tokenforge's own formats whose content does not match its checksum: it was altered
    after it was written (see :mod:`tokenforge.formats.checksum` for accepting a deliberate edit)."""


class SpecialTokenError(TokenforgeError):
    """Special-token text where it is not allowed, or an unknown special token name."""


class VocabSizeError(TokenforgeError):
    """A vocabulary size that cannot be honoured (e.g. below 256 + specials)."""


class CorpusError(TokenforgeError):
    """A corpus file or iterator that cannot be read as text."""

    # Set where the problem has a place (`tokenforge.data.corpus`).
    path: str | None
    line: int | None
    offset: int | None


class PatternError(TokenforgeError):
    """A pre-tokenization pattern that does not compile or is unknown."""


class UnsafePickleError(FormatError):
    """A pickle that tries to import or call something; refused, never executed."""


class Latin1Error(TokenforgeError):
    """Text with a character outside latin1 (U+0000..U+00FF) given to a latin1-only tokenizer."""

    def __init__(self, char: str, offset: int, message: str | None = None):
        msg = message or (
            f"character {char!r} (U+{ord(char):04X}) at offset {offset} is not latin1; "
            "mixedgram accepts only characters U+0000..U+00FF"
        )
        super().__init__(msg)
        self.char = char
        self.offset = offset


class SyncError(TokenforgeError):
    """A remote vocabulary could not be fetched or does not extend the local one."""


class TokenforgeWarning(UserWarning):
    """Something worked, but not as asked (e.g. training learned fewer merges than requested)."""


def warn_user(message: str, category: type[Warning] = TokenforgeWarning) -> None:
    """``warnings.warn`` pointing at the caller's own line: the first frame
    outside the tokenforge package, however deep inside it the warning arose."""
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level = 2  # stacklevel 2 is the frame that called warn_user
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)
