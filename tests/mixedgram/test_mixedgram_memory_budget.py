"""Mixedgram's n-gram counting under a memory budget (issue 34): the level tables
spill sorted runs and the result is byte-identical to unbounded training; nothing
is ever dropped (a budget that cannot hold what the selection needs is a typed
error naming one that would); bounded for real under an address-space limit."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from memory_limit import LIMIT_AFTER_WARM_UP, run_limited
from tokenforge import Mixedgram, _core, counting
from tokenforge.errors import TokenforgeError


def sample_text(n: int = 60_000, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"etaoinshrdlu") for _ in range(rng.randint(2, 9))) for _ in range(300)]
    words += [b"\xe9t\xe9", b"na\xefve", b"1234", b"\n"]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + (b" " if rng.random() < 0.9 else b", ")
        if rng.random() < 0.05:
            out += bytes(rng.randrange(1, 256) for _ in range(rng.randint(3, 12)))  # noise: many distinct n-grams
    return bytes(out)


@pytest.fixture
def runs(monkeypatch):
    """The runs the core wrote in each training (counting really spilled)."""
    seen: list[int] = []
    train = _core.mixedgram_train

    def spy(*args):
        top, stats = train(*args)
        seen.append(stats["runs"])
        return top, stats

    monkeypatch.setattr(_core, "mixedgram_train", spy)
    return seen


def files_of(tok: Mixedgram, text: bytes, tmp_path, name: str) -> bytes:
    tok.save(tmp_path / f"{name}.json")
    tok.compress(text, tmp_path / f"{name}.mxgram", train=False)
    return (tmp_path / f"{name}.json").read_bytes() + (tmp_path / f"{name}.mxgram").read_bytes()


@pytest.mark.parametrize("threads", [1, 2])
def test_spilled_counting_is_byte_identical(tmp_path, monkeypatch, runs, threads):
    text = sample_text()
    want = files_of(Mixedgram.train(text, num_threads=threads, max_memory="1TB"), text, tmp_path, "a")
    assert runs == [0]
    monkeypatch.setattr(counting, "SPILL_SHARE", 12_000 / (64e6 - 100_000))  # tables of ~370 n-grams
    spills = tmp_path / "spills"
    spills.mkdir()
    got = files_of(Mixedgram.train(text, num_threads=threads, max_memory="64MB", tmp_dir=spills), text, tmp_path, "b")
    assert runs[1] > 64  # more runs than one merge opens: merged in rounds
    assert got == want
    assert list(spills.iterdir()) == []  # each level's runs are gone
    # compress (which trains) and train_from_iterator take the same budget
    stats = Mixedgram.compress(text, tmp_path / "c.mxgram", max_memory="64MB", tmp_dir=spills, num_threads=threads)
    assert runs[2] > 64 and (tmp_path / "c.mxgram").read_bytes() == (tmp_path / "a.mxgram").read_bytes()
    assert stats.trained
    latin = text.decode("latin-1")
    a = Mixedgram.train_from_iterator([latin, latin[:500]], max_memory="1TB")
    b = Mixedgram.train_from_iterator([latin, latin[:500]], max_memory="64MB", tmp_dir=spills)
    assert a.ngrams == b.ngrams and a.counts == b.counts and a.training == b.training


def test_a_budget_too_small_says_what_would_do(tmp_path, monkeypatch):
    text = sample_text()
    want = Mixedgram.train(text, max_memory="1TB")
    monkeypatch.setattr(counting, "SPILL_SHARE", 1e-7)
    monkeypatch.setattr(counting, "KEEP_SHARE", 1e-6)
    budget = 64 << 20
    for _ in range(7):  # each level's message names the budget its needed n-grams take
        try:
            got = Mixedgram.train(text, max_memory=budget, tmp_dir=tmp_path)
            break
        except TokenforgeError as e:
            assert re.search(r"the \d+ distinct \d-grams counted at least \d+ times", str(e)), str(e)
            budget = int(re.search(r"a budget of at least (\d+) bytes", str(e)).group(1))
    else:
        pytest.fail("no budget named would do")
    assert budget > 64 << 20
    assert (got.ngrams, got.counts, got.training) == (want.ngrams, want.counts, want.training)
    assert list(tmp_path.iterdir()) == []
    # the text itself is held whole: a budget it passes is refused before counting
    with pytest.raises(TokenforgeError, match=r"the text and its position bits take \d+ bytes"):
        Mixedgram.train(b"x" * (20 << 20), max_memory="24MiB")
    with pytest.raises(TokenforgeError, match="client"):
        Mixedgram.train(text, max_memory="1GB", client="tcp://127.0.0.1:1")


def test_cli_compress_takes_the_budget(tmp_path, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_bytes(sample_text(20_000))
    spills = tmp_path / "spills"
    spills.mkdir()
    base = [sys.executable, "-m", "tokenforge", "mixedgram", "compress", str(src), "-q"]
    a = subprocess.run([*base, "-o", str(tmp_path / "a.mxgram")], capture_output=True, text=True)
    b = subprocess.run(
        [*base, "-o", str(tmp_path / "b.mxgram"), "--max-memory", "64MB", "--tmp-dir", str(spills)],
        capture_output=True,
        text=True,
    )
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a.mxgram").read_bytes() == (tmp_path / "b.mxgram").read_bytes()
    bad = subprocess.run(
        [*base, "-o", str(tmp_path / "c.mxgram"), "--max-memory", "16MiB"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "too small" in bad.stderr and not (tmp_path / "c.mxgram").exists()


CHILD = textwrap.dedent(
    """
    import resource, sys
    from tokenforge import Mixedgram
    path, budget, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    data = open(path, "rb").read()
    Mixedgram.train(b"warm up, warm up: " * 200, num_threads=2)  # threads and their arenas, before the limit
    """
)
CHILD += LIMIT_AFTER_WARM_UP + textwrap.dedent(
    """
    tok = Mixedgram.train(data, num_threads=2, max_memory=int(budget), tmp_dir=tmp)
    print(tok.training["distinct_counted"]["3"])
    """
)


def test_bounded_memory_under_an_address_space_limit(tmp_path):
    # 24 MB over 200 byte values: every 2-gram is frequent, so level 3 counts ~7.5 M
    # distinct 3-grams, a table of several hundred MB unbounded
    text = np.random.default_rng(1).integers(1, 201, size=24 << 20, dtype=np.uint8).tobytes()
    path = tmp_path / "noise.bin"
    path.write_bytes(text)
    budget = len(text) * 5 // 4 + (64 << 20)  # the text and its bits, and 64 MB for the tables
    bounded = run_limited(CHILD, str(path), str(budget), str(tmp_path))
    assert bounded.returncode == 0, bounded.stderr[-2000:]
    assert int(bounded.stdout) > 7_000_000
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tokenforge-spill")] == []
    unbounded = run_limited(CHILD, str(path), str(1 << 40), str(tmp_path))
    assert unbounded.returncode != 0  # the same limit without a budget: out of memory
