"""Slow, obviously-correct versions of the LZ78 family's rules, used only by tests.

Each function states one strategy's rule (docs/algorithms.md) as the plainest
loop: usage is recounted by brute-force greedy matching, leave-one-out
removes each entry and re-encodes everything, cost-adjusted selection
rescans every candidate at every step with exact fractions. The Rust engine
must produce identical dictionaries on small corpora.

A dictionary is a list of ``(parent_code, char, pattern, output)``, code =
position + 1, output entries first. Chunking uses the GPT-4 pattern through
the third-party ``regex`` module (the Rust scanner is tested against the regex
engine elsewhere).

Not handled: anything about speed or memory.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any, Iterable, Sequence

#: a dictionary as the strategies give it: (parent code, char, pattern, output) per code
Entries = list[tuple[int, str, str, bool]]

__all__ = [
    "split_chunks",
    "greedy",
    "online",
    "standard",
    "frequency_gated",
    "multi_round",
    "cost_adjusted",
    "smart_prune",
    "compressed",
    "flat_prune",
    "train",
    "patricia",
]

GPT4_PATTERN = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
)


def split_chunks(texts: Sequence[str], chunking: bool) -> list[str]:
    """The chunks of the texts in order (each text is one chunk without chunking)."""
    if not chunking:
        return [t for t in texts if t]
    import regex

    out: list[str] = []
    for t in texts:
        out.extend(m for m in regex.findall(GPT4_PATTERN, t) if m)
    return out


def greedy(outputs: dict[bytes, int], s: bytes) -> list[int | None]:
    """Greedy longest match; None for a byte fallback."""
    longest = max((len(p) for p in outputs), default=0)
    out: list[int | None] = []
    i = 0
    while i < len(s):
        for length in range(min(longest, len(s) - i), 0, -1):
            idx = outputs.get(s[i : i + length])
            if idx is not None:
                out.append(idx)
                i += length
                break
        else:
            out.append(None)
            i += 1
    return out


def _usage(patterns: dict[int, str], counts: Counter) -> Counter:
    """How often each code is emitted over the unique chunks (weighted)."""
    table = {p.encode(): c for c, p in patterns.items()}
    use: Counter = Counter()
    for chunk, w in counts.items():
        for idx in greedy(table, chunk.encode()):
            if idx is not None:
                use[idx] += w
    return use


# ---------------------------------------------------------------------------
# online: standard and frequency_gated
# ---------------------------------------------------------------------------
def online(
    chunks: Iterable[str],
    capacity: int,
    gated: bool,
    evict_interval: int = 0,
    evict_fraction: float = 0.1,
    evict_threshold: int = 0,
    decay: float = 1.0,
) -> Entries:
    """Online LZ78 with a capacity (and eviction when ``gated``)."""
    interval = evict_interval or capacity
    child: dict[tuple[int, str], int] = {}  # (parent seq, char) -> seq; seq 0 = root
    node: dict[int, dict] = {}  # seq -> {parent, ch, refs, children}
    seq = 0
    full_phrases = 0
    done = capacity == 0
    last_victims: list[tuple[int, str, int, int]] = []  # (parent, ch, refs, seq)

    def add(parent: int, c: str) -> None:
        nonlocal seq
        seq += 1
        node[seq] = {"parent": parent, "ch": c, "refs": 0, "children": 0}
        child[(parent, c)] = seq
        if parent:
            node[parent]["children"] += 1

    def evict() -> None:
        leaves = [s for s, v in node.items() if v["children"] == 0]
        if evict_threshold > 0:
            victims = [s for s in leaves if node[s]["refs"] < evict_threshold]
        else:
            k = min(max(1, int(math.floor(len(leaves) * evict_fraction))), len(leaves))
            victims = sorted(leaves, key=lambda s: (node[s]["refs"], s))[:k]
        last_victims.clear()
        for s in victims:
            v = node.pop(s)
            last_victims.append((v["parent"], v["ch"], v["refs"], s))
            del child[(v["parent"], v["ch"])]
            if v["parent"]:
                node[v["parent"]]["children"] -= 1
        if decay < 1.0:
            for v in node.values():
                v["refs"] = int(math.floor(v["refs"] * decay))

    def reference(cur: int) -> None:
        nonlocal full_phrases
        if cur:
            node[cur]["refs"] += 1
        full_phrases += 1
        if full_phrases >= interval:
            evict()
            full_phrases = 0

    for chunk in chunks:
        if done:
            break
        cur = 0
        for c in chunk:
            if (cur, c) in child:
                cur = child[(cur, c)]
                continue
            if len(node) < capacity:
                add(cur, c)
                if not gated and len(node) >= capacity:
                    done = True
                    break
            else:
                reference(cur)
            cur = 0
        else:
            if cur and gated and len(node) >= capacity:
                reference(cur)
    # the corpus ended before the last eviction's slots refilled: put its victims back
    for parent, c, _, s in sorted(last_victims, key=lambda v: (-v[2], -v[3])):
        if len(node) >= capacity:
            break
        if (parent, c) not in child:
            node[s] = {"parent": parent, "ch": c, "refs": 0, "children": 0}
            child[(parent, c)] = s
            if parent:
                node[parent]["children"] += 1
    order = sorted(node)
    code = {s: k + 1 for k, s in enumerate(order)}
    out = []
    pats: dict[int, str] = {0: ""}
    for s in order:
        v = node[s]
        pats[s] = pats[v["parent"]] + v["ch"]
        out.append((code.get(v["parent"], 0), v["ch"], pats[s], True))
    return out


def standard(chunks: Iterable[str], n: int) -> Entries:
    return online(chunks, n, False)


def frequency_gated(chunks: Iterable[str], n: int, **kw: Any) -> Entries:
    return online(chunks, n, True, **kw)


# ---------------------------------------------------------------------------
# tree pruning
# ---------------------------------------------------------------------------
def _target(pool: int, n: int, r: int, rounds: int) -> int:
    return n + (pool - n) * (rounds - r) // rounds


def _restrict(pool: Entries, keep: set, output: set) -> Entries:
    order = [c for c in range(1, len(pool) + 1) if c in keep and c in output]
    order += [c for c in range(1, len(pool) + 1) if c in keep and c not in output]
    code = {c: k + 1 for k, c in enumerate(order)}
    return [(code.get(pool[c - 1][0], 0), pool[c - 1][1], pool[c - 1][2], c in output) for c in order]


def _path(pool: Entries, c: int, kept: set) -> list[int]:
    need = []
    while c and c not in kept:
        need.append(c)
        c = pool[c - 1][0]
    return need


def _prune_tree(pool: Entries, counts: Counter, n: int, rounds: int, cost: bool) -> Entries:
    P = len(pool)
    if P <= n:
        return pool
    alive = set(range(1, P + 1))
    for r in range(1, rounds + 1):
        target = _target(P, n, r, rounds)
        use = _usage({c: pool[c - 1][2] for c in alive}, counts)
        kept: set = set()
        if not cost:
            for c in sorted(alive, key=lambda c: (-use[c], c)):
                if len(kept) >= target:
                    break
                if c in kept:
                    continue
                need = _path(pool, c, kept)
                if len(kept) + len(need) <= target:
                    kept.update(need)
        else:
            while len(kept) < target:
                best = None
                for c in sorted(alive - kept):
                    k = len(_path(pool, c, kept))
                    if len(kept) + k > target:
                        continue
                    key = (Fraction(use[c], k), -c)
                    if best is None or key > best[0]:
                        best = (key, c)
                if best is None:
                    break
                kept.update(_path(pool, best[1], kept))
        alive = kept
    return _restrict(pool, alive, alive)


def multi_round(pool: Entries, counts: Counter, n: int, rounds: int = 3) -> Entries:
    return _prune_tree(pool, counts, n, rounds, cost=False)


def cost_adjusted(pool: Entries, counts: Counter, n: int, rounds: int = 3) -> Entries:
    return _prune_tree(pool, counts, n, rounds, cost=True)


def smart_prune(pool: Entries, counts: Counter, n: int, rounds: int = 6) -> Entries:
    P = len(pool)
    output = set(range(1, P + 1))
    if P > n:
        for r in range(1, rounds + 1):
            target = _target(P, n, r, rounds)
            use = _usage({c: pool[c - 1][2] for c in output}, counts)
            output = set(sorted(output, key=lambda c: (-use[c], c))[:target])
    keep = set(output)
    for c in output:
        keep.update(_path(pool, pool[c - 1][0], set()))
    return _restrict(pool, keep, output)


def compressed(pool: Entries, counts: Counter, n: int, rounds: int = 3) -> Entries:
    """The dictionary the Patricia trie is built from (see :func:`patricia`)."""
    return smart_prune(pool, counts, n, rounds)


# ---------------------------------------------------------------------------
# flat_prune
# ---------------------------------------------------------------------------
def _total_tokens(strings: list[bytes], counts: Counter) -> int:
    table = {s: k for k, s in enumerate(strings)}
    return sum(len(greedy(table, c.encode())) * w for c, w in counts.items())


def flat_prune(
    counts: Counter, n: int, pool_factor: float = 8.0, max_chars: int = 16, drop_fraction: float = 0.1
) -> Entries:
    score: Counter = Counter()
    for chunk, w in counts.items():
        for i in range(len(chunk)):
            for j in range(i + 1, min(i + max_chars, len(chunk)) + 1):
                b = chunk[i:j].encode()
                if len(b) == 1:
                    continue
                score[b] += w * (len(b) - 1)
    m = int(math.floor(n * pool_factor))
    cands = sorted(score, key=lambda b: (-score[b], b))[:m]
    alive = list(range(len(cands)))
    while len(alive) > n:
        base = _total_tokens([cands[i] for i in alive], counts)
        delta = {i: _total_tokens([cands[j] for j in alive if j != i], counts) - base for i in alive}
        k = min(len(alive) - n, max(1, int(math.floor(len(alive) * drop_fraction))))
        drop = set(sorted(alive, key=lambda i: (delta[i], -i))[:k])
        alive = [i for i in alive if i not in drop]
    return [(0, cands[i].decode()[-1], cands[i].decode(), True) for i in alive]


# ---------------------------------------------------------------------------
# one entry point, as LZ78Tokenizer.train calls the engine
# ---------------------------------------------------------------------------
def train(texts: Sequence[str], strategy: str, n: int, chunking: bool = True, **params: Any) -> Entries:
    """The dictionary a strategy builds from ``texts`` (in order)."""
    chunks = split_chunks(texts, chunking)
    counts = Counter(chunks)
    if strategy == "standard":
        return standard(chunks, n)
    online_keys = ("evict_interval", "evict_fraction", "evict_threshold", "decay")
    okw = {k: params[k] for k in online_keys if k in params}
    if strategy == "frequency_gated":
        return frequency_gated(chunks, n, **okw)
    if strategy == "flat_prune":
        fkw = {k: params[k] for k in ("pool_factor", "max_chars", "drop_fraction") if k in params}
        return flat_prune(counts, n, **fkw)
    default_factor = {"compressed": 2.0, "smart_prune": 8.0}.get(strategy, 4.0)
    factor = params.get("pool_factor", default_factor)
    cap = max(n, int(math.floor(n * factor)))
    gated = params.get("pool", "frequency_gated") == "frequency_gated"
    pool = online(chunks, cap, gated, **okw)
    rounds = params.get("rounds", 6 if strategy == "smart_prune" else 3)
    fn = {
        "multi_round": multi_round,
        "cost_adjusted": cost_adjusted,
        "smart_prune": smart_prune,
        "compressed": compressed,
    }[strategy]
    return fn(pool, counts, n, rounds)


# ---------------------------------------------------------------------------
# Patricia
# ---------------------------------------------------------------------------
def patricia(items: Iterable[tuple[str, int]]) -> list[tuple[int, str, int, str]]:
    """Rows ``(parent, label, output or -1, pattern)`` for nodes 1.., depth first,
    children in character order: chains of non-output single-child nodes collapse."""
    trie: dict[str, dict] = {"": {}}
    out: dict[str, int] = {}
    for pat, o in items:
        for k in range(1, len(pat) + 1):
            trie.setdefault(pat[:k], {})
            trie[pat[: k - 1]][pat[k - 1]] = pat[:k]
        if o is not None and o >= 0:
            out[pat] = o
    rows: list[tuple[int, str, int, str]] = []

    def visit(node: str, parent_idx: int, parent_pat: str) -> None:
        for c in sorted(trie[node]):
            s = trie[node][c]
            while s not in out and len(trie[s]) == 1:
                s = next(iter(trie[s].values()))
            rows.append((parent_idx, s[len(parent_pat) :], out.get(s, -1), s))
            visit(s, len(rows), s)

    visit("", 0, "")
    return rows
