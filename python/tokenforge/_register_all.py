"""Importing this module registers every family's file readers with
:func:`tokenforge.load` (once). Families add their ``_register`` here."""

from . import bpe

bpe._register()

from . import mixedgram  # noqa: E402

mixedgram._register()
