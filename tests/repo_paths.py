"""Where the tests' shared files are, for test modules in any area folder.

Test files live one level down (``tests/bpe/``, ``tests/data/``, ...), so a
path computed from a test's own ``__file__`` would depend on its folder; they
import these instead. This module sits in ``tests/``, which pytest puts on
``sys.path`` (the directory of the root ``conftest.py``).

Not handled: a test run from an installed copy of the package without the
repository around it (README.md and scripts/ would then not exist).
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
ROOT = TESTS.parent
README = ROOT / "README.md"
SCRIPTS = ROOT / "scripts"
