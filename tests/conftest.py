"""Shared test settings and fixtures: hypothesis keeps no example database
(tests write only under tmp_path) and runs deterministically in CI; the tiny
committed corpus (tests/tiny_corpus.py) and a BPE tokenizer trained on it;
Hugging Face's libraries kept offline.

Test files live in area folders (tests/bpe/, tests/data/, ...); pytest puts
this directory on sys.path, so the helper modules here import by bare name.

Not handled: fixtures used by one file only stay in that file."""

import os
import warnings

import pytest
from hypothesis import settings

from tiny_corpus import TINY_CORPUS_PATH, TINY_DOCS

# transformers and huggingface_hub never reach for the network in tests (they read local directories only)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

settings.register_profile("tokenforge", database=None, derandomize=bool(os.environ.get("CI")), print_blob=True)
settings.load_profile("tokenforge")


@pytest.fixture(scope="session")
def tiny_corpus_path():
    """``tests/fixtures/tiny_corpus.txt``; read it, never write it."""
    return TINY_CORPUS_PATH


@pytest.fixture(scope="session")
def tiny_docs():
    """The tiny corpus's documents (a fresh list each session; do not mutate)."""
    return list(TINY_DOCS)


@pytest.fixture(scope="session")
def tiny_bpe():
    """A BPE tokenizer (nanochat settings, vocab 400) trained once on the tiny corpus; read-only."""
    import tokenforge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tokenforge.TokenforgeWarning)  # a tiny corpus may run out of pairs
        return tokenforge.BPETokenizer.train_from_iterator(TINY_DOCS, 400, special_tokens="nanochat", progress=False)


@pytest.fixture(scope="session")
def dask_client():
    """A real Dask cluster for the distributed tests: 2 worker processes of one
    thread each on loopback, shared by the session (starting one takes ~1 s)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
