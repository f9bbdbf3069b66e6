#!/usr/bin/env python3
"""Train an LZ78 dictionary (seed flags: --strategy S --vocab_size N).

Same as `tokenforge lz78 train`; see `python scripts/lz78_tok_train.py --help`.
"""

import sys

from tokenforge.cli.lz78 import main_train

if __name__ == "__main__":
    sys.exit(main_train())
