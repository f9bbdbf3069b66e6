"""The built wheel installs into a fresh virtualenv and works there (issue 35, item 1).

``make wheel`` (which ``make test`` runs first) builds ``dist/tokenforge-*-cp310-abi3-*.whl``:
one stable-ABI wheel for every CPython >= 3.10. This test installs it with pip,
offline and without dependencies, into a new venv in ``tmp_path`` (numpy, the one
dependency, is lent from the test's own environment through a ``.pth`` file, so
nothing is downloaded) and runs a short script there: train, encode, save,
load, pickle. The package must come from the venv, not from this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import numpy
import pytest
import tomllib

from repo_paths import ROOT

DIST = ROOT / "dist"

SCRIPT = r"""
import pickle, sys, tempfile, pathlib
import tokenforge
from tokenforge import BPETokenizer
assert pathlib.Path(tokenforge.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()), tokenforge.__file__
assert tokenforge._core.__file__.endswith(".abi3.so"), tokenforge._core.__file__
docs = ["the quick brown fox jumps over the lazy dog %d times. " % i * 3 for i in range(200)]
tok = BPETokenizer.train_from_iterator(docs, 400)
text = "the lazy dog, naïve café 中文 😀"
ids = tok.encode(text)
assert tok.decode(ids) == text
out = pathlib.Path(tempfile.mkdtemp()) / "tok"
tok.save(out)
back = tokenforge.load(out)
assert back.encode(text) == ids
assert pickle.loads(pickle.dumps(tok)).encode(text) == ids
assert tok.encode_batch([text] * 3, num_threads=2, as_numpy=True).ids.tolist() == ids * 3
print("ok", tokenforge.__version__, len(ids))
"""


def _wheel() -> Path:
    wheels = sorted(DIST.glob("tokenforge-*-abi3-*.whl"))
    if not wheels:
        pytest.fail("no abi3 wheel in dist/: run `make wheel` (make test does it first)")
    return wheels[-1]


def test_the_abi3_wheel_installs_and_runs_in_a_fresh_venv(tmp_path):
    wheel = _wheel()
    assert "-cp310-abi3-" in wheel.name, wheel.name
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # numpy from this environment, lent through a .pth file (no download)
    lend = tmp_path / "lent"
    lend.mkdir()
    np_dir = Path(numpy.__file__).parent
    for p in np_dir.parent.iterdir():
        if p.name == "numpy" or p.name.startswith("numpy.libs") or p.name.startswith("numpy-"):
            (lend / p.name).symlink_to(p)
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "lent.pth").write_text(str(lend) + "\n")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INPUT": "1"},
    )
    assert pip.returncode == 0, pip.stderr
    run = subprocess.run(
        [str(py), "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok ")


def test_the_all_extra_is_every_user_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    users = {"torch", "dask", "plot", "io", "serve", "export"}
    assert set(extras["all"]) == set().union(*(extras[e] for e in users))
