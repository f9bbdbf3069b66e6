"""Bounded memory for real, shared by the memory-budget tests of the families:
a corpus of many distinct pieces, and a child process under an address-space
limit (RLIMIT_AS) that a child script sets on itself after warming up.

Not handled: other platforms than Linux (the child reads /proc/self/status).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

#: the child's prologue: its address space now plus this margin is its limit
MARGIN = 80 << 20
LIMIT_AFTER_WARM_UP = f"""
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
limit = vm + {MARGIN}
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""


def identifier_corpus(path: Path, words: list[str]) -> Path:
    """~1.2M distinct identifiers (seen once each, one GPT-4 piece each: no digits)
    among frequent `words`, as JSON lines: unbounded, counting them needs well
    over the child's margin."""
    rng = random.Random(9)
    letters = str.maketrans("0123456789", "ghijklmnop")
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(6000):
            line = [
                f"q{rng.getrandbits(44):x}".translate(letters) if rng.random() < 0.33 else rng.choice(words)
                for _ in range(600)
            ]
            f.write(json.dumps({"text": " ".join(line)}) + "\n")
    return path


def run_limited(child: str, *args: str) -> subprocess.CompletedProcess:
    """Run the script `child` (which applies LIMIT_AFTER_WARM_UP) with `args`."""
    env = {"MALLOC_ARENA_MAX": "2", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", child, *args], capture_output=True, text=True, env=env, timeout=600)


def check_bounded(child: str, path: Path, tmp_path: Path, warnings: int = 1) -> None:
    """The child (it prints the distinct pieces dropped and the budget warnings)
    under the limit: with a budget of 48 MB it trains, drops the identifiers,
    warns (once per counter settled) and leaves no spill directory; without one
    it runs out of memory."""
    bounded = run_limited(child, str(path), "48MB", str(tmp_path))
    assert bounded.returncode == 0, bounded.stderr[-2000:]
    dropped, warned = map(int, bounded.stdout.split())
    assert dropped > 1_000_000 and warned == warnings
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tokenforge-spill")] == []
    unbounded = run_limited(child, str(path), "1TB", str(tmp_path))
    assert unbounded.returncode != 0  # the same limit without a budget: out of memory


def check_dropped(items: list[tuple[bytes, int]], training: dict, unique_key: str, share: float = 0.6) -> int:
    """A training section's budget_dropped_* against the exact counts `items`:
    every piece counted fewer than the threshold times dropped, their number and
    occurrences recorded, `unique_key` the pieces kept, and the kept pieces'
    cost (`_core.train_cost`) the most that fits `share` of all pieces' cost.
    Returns the threshold."""
    from tokenforge import _core

    cost = sum(_core.train_cost(len(k)) for k, _ in items)
    below = training["budget_dropped_below"]
    dropped = [(k, c) for k, c in items if c < below]
    assert below > 1 and dropped
    assert training["budget_dropped_unique"] == len(dropped)
    assert training["budget_dropped_pieces"] == sum(c for _, c in dropped)
    assert training[unique_key] == len(items) - len(dropped)
    kept_cost = sum(_core.train_cost(len(k)) for k, c in items if c >= below)
    next_cost = sum(_core.train_cost(len(k)) for k, c in items if c == below - 1)
    assert kept_cost <= cost * share < kept_cost + next_cost
    return below
