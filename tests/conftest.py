"""Shared test settings: hypothesis keeps no example database (tests write
only under tmp_path), and runs deterministically in CI."""

import os

from hypothesis import settings

settings.register_profile("tokenforge", database=None, derandomize=bool(os.environ.get("CI")), print_blob=True)
settings.load_profile("tokenforge")
