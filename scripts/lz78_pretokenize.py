#!/usr/bin/env python3
"""Pre-tokenize a corpus into token shards with an index file (BOS per document, parallel, resumable).

Same as `tokenforge lz78 pretokenize`; see `python scripts/lz78_pretokenize.py --help`.
"""

import sys

from tokenforge.cli.lz78 import main_pretokenize

if __name__ == "__main__":
    sys.exit(main_pretokenize())
