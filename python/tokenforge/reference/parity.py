"""Slow, obviously-correct parity-aware BPE (Foroutan et al. 2025), used only by tests.

The rule, as :func:`train_parity_reference` states it step by step (the same
rule the Rust trainer runs incrementally; docs/algorithms.md):

1. the first ``global_merges`` merges are plain BPE's: the most frequent pair
   over all languages' training words (:func:`tokenforge.reference.bpe.train_reference`'s
   pick, same tie-breaks);
2. after that, the worst language is the one whose dev words take the most
   tokens per unit of dev text (``norms``: 1 for "tokens", the dev text's
   bytes or characters, or given sizes), compared exactly as fractions, the
   lower language index on a tie; the merge is the most frequent pair of
   *that language's training words*, same tie-breaks;
3. a language none of whose pairs reaches ``min_frequency`` is exhausted and
   skipped from then on; training ends when every language is;
4. with ``window`` > 0 (the moving-window variant), a language picked for more
   than ``alpha / L`` of the last ``window`` parity merges is skipped in step
   2, unless every language left is;
5. with ``tolerance`` > 0, a merge after the global ones is global (step 1's
   pick) while every language not exhausted costs at most ``1 + tolerance``
   times the cheapest one (``t_w * n_b <= (1 + tolerance) * t_b * n_w``, the
   products exact, the comparison in floats);
6. with ``shared`` >= 1, step 2's pair is, among the worst language's pairs
   whose count ``c`` has ``c * shared >= top`` (its top pair's count) and
   ``c >= min_frequency``, the one with the largest count over all languages'
   training words, the first in the language's own order (count, then
   tie-break) on a tie;
7. ``rule="levelup"``: step 5 measured against the ``reference`` language
   instead of the cheapest: global while every live language costs at most
   ``1 + tolerance`` times the reference (``t_w * n_r <= (1 + tolerance) *
   t_r * n_w``; tolerance 0 included); else step 2;
8. ``rule="excess"`` (after the global merges): ``excess_l`` is
   ``t_l n_r / (t_r n_l) - 1`` (each product rounded once to a float) for a
   language strictly dearer than the reference, else 0; the candidates are
   step 1's pick (training stops if it is below ``min_frequency``), then the
   top pair of each live language with ``excess_l > 0``, by index (one below
   ``min_frequency`` exhausts its language); each scores ``float(count over
   all languages)`` plus, language by language, ``gain * excess_l *
   float(count_l)``; the first candidate with the largest score is merged;
9. ``rule="group"``: the language as step 7 picks it; the pair, among the
   first 64 of step 6's candidates (``shared`` >= 1), the one with the
   largest ``sum_l w_l * float(count_l)`` (summed by language index; ``w_l``
   = ``1 + gain`` for a language strictly dearer than the reference, else 1),
   the first on a tie;
10. ``reference="median"`` (rules 7-9, 11, 13, 14): before each merge, the reference is
   the lower median language: the languages ordered by dev cost (exactly, as
   fractions), then by index, the ``(L - 1) // 2``-th;
11. ``rule="keep"``: at the first merge after the global ones, each
   language's floor is ``min(1.0, premium)``, where its premium is
   ``float(t_l n_r) / float(t_r n_l)``; from then on its excess is its
   premium (so computed) divided by its floor; a merge is global while every
   live language's excess is at most ``1 + tolerance``; else step 2 with the
   language of the largest excess (the lower index on a tie) in place of the
   worst;
12. ``rule="discount"``: the language as step 7 picks it; the pair as step 6
   picks it (``shared`` >= 1), but by the largest ``1024 * count over all
   languages - d * count in the reference language``, ``d = gain * 1024``
   rounded half away from zero (``gain`` in [0, 1]; ``reference`` a fixed index);
13. ``rule="lift"``: the language as step 7 picks it; the pair as step 6 picks
   it (``shared`` >= 1), but by the largest ``1024 * count over all languages
   + e * count in the language served``, ``e = gain * 1024`` rounded half away
   from zero (``gain`` >= 0);
14. ``rule="devlift"``: step 13 with the count over all languages' *dev* words
   in place of their training words'.

Not handled: pre-tokenization (give word counts, :func:`tokenforge.reference.bpe.count_words`),
special tokens, speed.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from .bpe import _count_pairs, _merge_word

__all__ = ["train_parity_reference", "norms_of", "GROUP_CANDIDATES", "DISCOUNT_ONE"]

#: the group rule's cap on its candidates (``src/bpe/parity.rs``: ``GROUP_CANDIDATES``)
GROUP_CANDIDATES = 64
#: the discount rule's fixed-point unit (``src/bpe/parity.rs``: ``DISCOUNT_ONE``)
DISCOUNT_ONE = 1024


def norms_of(dev_counts: list[dict[bytes, int]], measure: str) -> list[int]:
    """Each language's dev text size in the unit ``measure`` names ("tokens": 1)."""
    if measure == "tokens":
        return [1] * len(dev_counts)
    if measure == "bytes":
        return [sum(len(w) * c for w, c in d.items()) for d in dev_counts]
    if measure == "chars":
        return [sum(len(w.decode("utf-8")) * c for w, c in d.items()) for d in dev_counts]
    raise ValueError(f"unknown measure {measure!r}")


def _best(pairs: Counter, tie_break: str, id_bytes: dict[int, bytes]) -> tuple[tuple[int, int] | None, int]:
    best = max(pairs.values(), default=0)
    tied = [p for p, c in pairs.items() if c == best]
    if not tied:
        return None, 0
    if tie_break == "pair_ids":
        return min(tied), best
    return max(sorted(tied), key=lambda p: (id_bytes[p[0]], id_bytes[p[1]])), best


def _ordered(pairs: Counter, tie_break: str, id_bytes: dict[int, bytes]) -> list:
    """The pairs best first, as :func:`_best` ranks them."""
    ranked = sorted(pairs)  # equal byte strings: the smaller pair first
    if tie_break == "pair_ids":
        return sorted(ranked, key=lambda p: -pairs[p])
    return sorted(ranked, key=lambda p: (pairs[p], id_bytes[p[0]], id_bytes[p[1]]), reverse=True)


def _balanced(cost_parts: list[tuple[int, int]], live: list[int], tolerance: float) -> bool:
    """Every live language within ``1 + tolerance`` of the cheapest ((tokens, norm) each)."""
    if tolerance <= 0 or len(live) < 2:
        return False
    hi = max(live, key=lambda i: Fraction(*cost_parts[i]))
    lo = min(live, key=lambda i: Fraction(*cost_parts[i]))
    (th, nh), (tl, nl) = cost_parts[hi], cost_parts[lo]
    return float(th * nl) <= (1.0 + tolerance) * float(tl * nh)


def _all_pairs(train: list[tuple[list[list[int]], list[int]]]) -> Counter:
    """Every pair's count over all languages' training words."""
    pairs: Counter = Counter()
    for words, counts in train:
        pairs.update(_count_pairs(words, counts))
    return pairs


def _level(cost_parts: list[tuple[int, int]], live: list[int], reference: int, tolerance: float) -> bool:
    """Every live language within ``1 + tolerance`` of the reference language."""
    if not live:
        return True
    hi = max(live, key=lambda i: Fraction(*cost_parts[i]))
    (th, nh), (tr, nr) = cost_parts[hi], cost_parts[reference]
    return float(th * nr) <= (1.0 + tolerance) * float(tr * nh)


def _median(cost_parts: list[tuple[int, int]]) -> int:
    """The lower median language by dev cost (ties: the lower index)."""
    order = sorted(range(len(cost_parts)), key=lambda i: (Fraction(*cost_parts[i]), i))
    return order[(len(order) - 1) // 2]


def _excess(cost_parts: list[tuple[int, int]], reference: int) -> list[float]:
    tr, nr = cost_parts[reference]
    return [float(t * nr) / float(tr * n) - 1.0 if t * nr > tr * n else 0.0 for t, n in cost_parts]


def _premium(cost_parts: list[tuple[int, int]], i: int, reference: int) -> float:
    (t, n), (tr, nr) = cost_parts[i], cost_parts[reference]
    return float(t * nr) / float(tr * n)


def _fixed(gain: float) -> int:
    """``gain`` in units of 1/:data:`DISCOUNT_ONE`, rounded half away from zero as Rust's ``f64::round``."""
    scaled = gain * DISCOUNT_ONE
    return int(scaled) + (scaled - int(scaled) >= 0.5)


def train_parity_reference(
    train_counts: list[dict[bytes, int]],
    dev_counts: list[dict[bytes, int]],
    num_merges: int,
    *,
    norms: list[int],
    tie_break: str = "pair_ids",
    global_merges: int = 0,
    min_frequency: int = 1,
    first_merge_id: int = 256,
    window: int = 0,
    alpha: float = 2.0,
    tolerance: float = 0.0,
    shared: float = 0.0,
    rule: str = "foroutan2025",
    reference: int | str | None = None,
    gain: float = 0.0,
) -> tuple[list[tuple[int, int, int]], list[int | None]]:
    """(merges, the language each was picked for: None for a global merge);
    ``reference``: a language index, or "median"."""
    threshold = max(1, min_frequency)
    id_bytes = {b: bytes([b]) for b in range(256)}
    train = [([list(w) for w in d], list(d.values())) for d in train_counts]
    dev = [([list(w) for w in d], list(d.values())) for d in dev_counts]
    exhausted = [False] * len(train)
    merges: list[tuple[int, int, int]] = []
    chosen: list[int | None] = []
    floors: list[float] = []  # the keep rule's, set when the parity phase starts
    for k in range(num_merges):
        lang: int | None = None
        cost_parts = [
            (sum(len(w) * c for w, c in zip(words, counts)), norms[i]) for i, (words, counts) in enumerate(dev)
        ]
        live_now = [i for i in range(len(train)) if not exhausted[i]]
        ref = _median(cost_parts) if reference == "median" else reference
        if rule in ("levelup", "group", "discount", "lift", "devlift"):
            assert isinstance(ref, int)
            global_now = _level(cost_parts, live_now, ref, tolerance)
        elif rule == "keep":
            assert isinstance(ref, int)
            if k >= global_merges and not floors:
                floors = [min(1.0, _premium(cost_parts, i, ref)) for i in range(len(train))]
            over = [_premium(cost_parts, i, ref) / floors[i] for i in range(len(train))] if floors else []
            global_now = not floors or all(over[i] <= 1.0 + tolerance for i in live_now)
        else:
            global_now = rule == "foroutan2025" and _balanced(cost_parts, live_now, tolerance)
        pair: tuple[int, int] | None
        if k >= global_merges and rule == "excess":
            assert isinstance(ref, int)
            allp = _all_pairs(train)
            gpair, gcount = _best(allp, tie_break, id_bytes)
            if gpair is None or gcount < threshold:
                break
            excess = _excess(cost_parts, ref)
            mine_all = [_count_pairs(*t) for t in train]
            options: list[tuple[int | None, tuple[int, int]]] = [(None, gpair)]
            for i in range(len(train)):
                if excess[i] > 0 and not exhausted[i]:
                    p, c = _best(mine_all[i], tie_break, id_bytes)
                    if p is None or c < threshold:
                        exhausted[i] = True
                    else:
                        options.append((i, p))

            def score(p: tuple[int, int]) -> float:
                s = float(allp[p])
                for m, e in enumerate(excess):
                    if e > 0:
                        s += gain * e * float(mine_all[m][p])
                return s

            lang, pair = max(options, key=lambda c: score(c[1]))  # max keeps the first of equals
        elif k < global_merges or global_now:
            pair, count = _best(_all_pairs(train), tie_break, id_bytes)
            if pair is None or count < threshold:
                break
        else:
            pair = None
            while True:
                cost = [
                    Fraction(sum(len(w) * c for w, c in zip(words, counts)), norms[i])
                    for i, (words, counts) in enumerate(dev)
                ]
                live = [i for i in range(len(train)) if not exhausted[i]]
                if not live:
                    break
                recent = [c for c in chosen if c is not None][-window:] if window else []
                under = [i for i in live if recent.count(i) / window <= alpha / len(train)] if window else live
                live = under or live
                if rule == "keep":
                    lang = max(live, key=lambda i: (over[i], -i))
                else:
                    lang = max(live, key=lambda i: (cost[i], -i))
                mine = _count_pairs(*train[lang])
                pair, count = _best(mine, tie_break, id_bytes)
                if pair is not None and count >= threshold:
                    if rule == "group":
                        assert isinstance(ref, int)
                        tr, nr = cost_parts[ref]
                        weights = [1.0 + gain if t * nr > tr * n else 1.0 for t, n in cost_parts]
                        per_lang = [_count_pairs(*t) for t in train]
                        band = [
                            p
                            for p in _ordered(mine, tie_break, id_bytes)
                            if mine[p] * shared >= count and mine[p] >= threshold
                        ][:GROUP_CANDIDATES]

                        def weighted(p: tuple[int, int]) -> float:
                            s = 0.0
                            for w, c in zip(weights, per_lang):
                                s += w * float(c[p])
                            return s

                        pair = max(band, key=weighted)  # max keeps the first of equals
                    elif shared:
                        everyone = _all_pairs(train)
                        cands = [
                            p
                            for p in _ordered(mine, tie_break, id_bytes)
                            if mine[p] * shared >= count and mine[p] >= threshold
                        ]
                        if rule == "discount":
                            assert isinstance(ref, int)
                            d = _fixed(gain)
                            at_ref = _count_pairs(*train[ref])
                            pair = max(cands, key=lambda p: DISCOUNT_ONE * everyone[p] - d * at_ref[p])
                        elif rule in ("lift", "devlift"):
                            e = _fixed(gain)
                            on = _all_pairs(dev) if rule == "devlift" else everyone
                            pair = max(cands, key=lambda p: DISCOUNT_ONE * on[p] + e * mine[p])
                        else:
                            pair = max(cands, key=lambda p: everyone[p])  # max keeps the first of equals
                    break
                exhausted[lang] = True
                pair = None
            if pair is None:
                break
        assert pair is not None  # each branch above breaks out when it finds none
        new_id = first_merge_id + k
        id_bytes[new_id] = id_bytes[pair[0]] + id_bytes[pair[1]]
        for words, _ in train + dev:
            words[:] = [_merge_word(w, pair, new_id) for w in words]
        merges.append((pair[0], pair[1], new_id))
        chosen.append(lang)
    return merges, chosen
