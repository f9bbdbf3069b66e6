"""Importing this module registers every family's file readers with
:func:`tokenforge.load` (once). Families add their ``_register`` here.

Order matters: sniffers are tried in registration order, so the most specific
go first (the growing vocabulary's tokenizer.json has "next_merge_id" and may
also contain a key named "model", which Hugging Face's sniffer looks for;
mixedgram's and LZ78's sniffers look for their own markers).
"""

from . import bpe, growing, lz78, mixedgram

growing._register()
mixedgram._register()
lz78._register()
bpe._register()
