#!/usr/bin/env python3
"""Build a tokenizer directory from an LZ78 TSV (seed flags: --tsv_path P --tsv_format lz78|compressed).

Same as `tokenforge lz78 setup`; see `python scripts/lz78_setup_tokenizer.py --help`.
"""

import sys

from tokenforge.cli.lz78 import main_setup

if __name__ == "__main__":
    sys.exit(main_setup())
