"""The one tiny committed corpus (``fixtures/tiny_corpus.txt``) that tests share.

A few KB written for these tests: prose, Python and Rust code, digits and
dates, accented Latin, Cyrillic, Greek, CJK, Hangul, emoji (ZWJ and flag
sequences included), tabs and runs of spaces. Documents are separated by one
blank line; a document keeps its own single newlines (the code blocks).
``conftest.py`` hands the same things out as fixtures (``tiny_corpus_path``,
``tiny_docs``, ``tiny_bpe``); module-level constants import them from here.

Not handled: anything large or adversarial (surrogates, invalid UTF-8, huge
lines); tests that need those build their own inputs.
"""

from repo_paths import FIXTURES

TINY_CORPUS_PATH = FIXTURES / "tiny_corpus.txt"
TINY_CORPUS = TINY_CORPUS_PATH.read_text(encoding="utf-8")
#: the corpus's documents, in file order (blank-line separated)
TINY_DOCS: list[str] = TINY_CORPUS.rstrip("\n").split("\n\n")
