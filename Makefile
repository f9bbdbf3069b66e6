# The README's commands. Each target installs what it needs by itself:
# a virtualenv in .venv, the Rust extension (built by maturin), and the extras.
#   make demo    train on the built-in corpus and show the result
#   make test    cargo test + the whole pytest suite
#   make bench   build the benchmark corpus if needed, then run bench/bpe.py
#   make bench-peers  pip-install the exact-encoder and trainer peers, then run bench/peers.py
#   make wheel   the abi3 wheel users install (dist/), also built by make test
#   make lint    ruff (lint, format check), cargo fmt --check, clippy (warnings are errors),
#                mypy on the package, and stubtest of _core.pyi against the built extension

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
RUST_SRC := $(shell find src -name '*.rs') Cargo.toml Cargo.lock pyproject.toml
BUILT := $(VENV)/.built
DEV := $(VENV)/.dev

.PHONY: demo test test-rust test-python chromium wheel bench bench-peers lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The extension, built in release mode into python/tokenforge (editable install).
# Any extension of an earlier build is removed first: a per-version
# `_core.cpython-*.so` is imported before `_core.abi3.so`, so a stale one would win.
$(BUILT): $(PY) $(RUST_SRC)
	$(PIP) install -q "maturin>=1.5,<2"
	rm -f python/tokenforge/_core*.so
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q
	touch $@

# The wheel users install (`make wheel`): one stable-ABI (abi3) wheel for every CPython >= 3.10,
# release build, in dist/. `make test` builds it first: a test installs it into a fresh venv.
WHEEL := dist/.wheel
$(WHEEL): $(BUILT)
	rm -f dist/tokenforge-*.whl
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin build --release -q -o dist
	touch $@

wheel: $(WHEEL)
	@ls dist/tokenforge-*.whl

# Test and benchmark peers (tiktoken, tokenizers, sentencepiece, rustbpe, ...),
# and the torch and plot extras, so that no test is skipped. torch from PyPI is a
# large wheel: pip's cache serves it after the first install.
$(DEV): $(PY) pyproject.toml
	$(PY) -c "import tomllib, subprocess, sys; x = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; deps = x['dev'] + x['torch'] + x['plot'] + x['dask'] + x['serve']; subprocess.check_call([sys.executable, '-m', 'pip', 'install', '-q', *deps])"
	touch $@

# The demo's report plots need matplotlib; its bits-per-byte part runs when torch is installed.
PLOT := $(VENV)/.plot
$(PLOT): $(PY)
	$(PIP) install -q "matplotlib>=3.6"
	touch $@

demo: $(BUILT) $(PLOT)
	$(VENV)/bin/tokenforge demo || $(PY) -m tokenforge demo

test-rust:
	cargo test --lib

# The playground's browser tests drive Debian's chromium (Playwright's own browser
# download is not used); installed once, with sudo unless we are root.
chromium:
	@command -v chromium >/dev/null || { S=$$([ "$$(id -u)" = 0 ] || echo sudo); $$S apt-get update -q && $$S apt-get install -y -q chromium; }

test-python: $(BUILT) $(DEV) chromium $(WHEEL)
	$(PY) -m pytest -q

test: test-rust test-python

bench: $(BUILT) $(DEV)
	$(PY) bench/build_corpus.py
	$(PY) bench/bpe.py
	$(PY) bench/mixedgram.py
	$(PY) bench/growing.py

# bench/peers.py's peers (issue 14), installed into the project venv with pip. bpe-openai's
# wheel also carries the cl100k and o200k rank files every encoder reads (nothing is
# downloaded at run time). The text classes (German/Russian/Chinese man pages: apt, as root)
# are built once into bench/data/classes.
PEERS_PIP := tiktoken gigatoken toktok-rs quicktok-v1 fastokens riptoken bpe-openai tokie ffbpe rustbpe tokenizers sentencepiece

bench-peers: $(BUILT)
	$(PIP) install -q $(PEERS_PIP)
	$(PY) bench/build_corpus.py
	$(PY) bench/build_corpus.py --classes bench/data/classes
	mkdir -p bench/results
	$(PY) bench/peers.py --json bench/results/peers_latest.json

# ruff and mypy come with the dev extra; stubtest imports the extension $(BUILT) installed.
lint: $(BUILT) $(DEV)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	cargo fmt --check
	cargo clippy --all-targets --features abi3 -q -- -D warnings
	cargo clippy --all-targets --features python -q -- -D warnings
	$(PY) -m mypy python/tokenforge
	$(PY) -m mypy.stubtest tokenforge._core

clean:
	rm -rf $(VENV) target dist python/tokenforge/_core*.so
