"""Importing this module registers every family's file readers with
:func:`tokenforge.load` (once). Families add their ``_register`` here."""

from . import bpe, lz78

bpe._register()
lz78._register()
