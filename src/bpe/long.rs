//! Long pieces (`"a" * 1_000_000`, a megabyte of letters without a space):
//! exact BPE encoded in short windows and stitched where the result provably
//! decomposes, with a general O(n log n) merge as the fallback.
//!
//! The merge process (repeatedly merge the leftmost pair of lowest rank) is
//! local: a merge depends only on two adjacent parts. Two facts follow, for
//! any rank function (tiktoken's ranks, learned pair merges, scrambled ranks):
//!
//! 1. *A final boundary splits the work.* If `enc(w) = t_1 .. t_m`, then for
//!    every `k` the encoding of the bytes of `t_1 .. t_k` alone is exactly
//!    `t_1 .. t_k`: no merge ever crossed that boundary, so the process on each
//!    side is the process on that side alone, interleaved.
//! 2. *A compatible junction glues.* Call tokens `a`, `b` compatible when the
//!    merge process on `bytes(a) ++ bytes(b)` ends in `[a, b]`. If `a` is the
//!    last token of `enc(u)` and `b` the first of `enc(v)` and they are
//!    compatible, then `enc(uv) = enc(u) ++ enc(v)`. (If some merge crossed the
//!    junction of `uv`, take the first one, of parts `x` ending `a`'s span and
//!    `y` starting `b`'s. Before it, the spans of `a` and `b` evolve exactly as
//!    `bytes(a)` and `bytes(b)` do alone, in the same relative order, so the
//!    process on `bytes(a) ++ bytes(b)` reaches the same pair of states, where
//!    the pair `(x, y)` is again the lowest: it crosses too, and `a`, `b` are
//!    not compatible.) Two tokens adjacent in any merge result are compatible.
//!
//! So the piece is cut into segments: a window of [`W0`] bytes is merged, all
//! its tokens but the last are kept (fact 1 makes them the exact encoding of
//! their bytes), and the next window starts after them. Every junction between
//! segments is checked (fact 2); the check is skipped when the new window
//! begins with the token the previous window ended with (adjacent, hence
//! compatible). A failed junction drops the last segment and merges a larger
//! window from its start. Identical windows (runs of one byte, short periods)
//! reuse the previous window's merge. Rank look-ups go through a small
//! direct-mapped memo, since a long piece repeats the same few pairs.
//!
//! Cost: the windows' bytes, the checks and the retries are counted; past
//! `BUDGET * n` bytes of work, or a window that must grow beyond [`W_MAX`] (a
//! token nearly that long), the piece is merged by [`merge_general`] instead,
//! so the total stays O(n log n) whatever the input.
//!
//! Not handled: tiktoken's whole-piece look-up (the caller does it before
//! coming here; inside the piece only the merge process counts).

use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::pair::pack;
use super::vocab::Tokens;

pub(crate) const NO_RANK: u32 = u32::MAX;
/// The first window's size; windows at most [`SCAN_MAX`] bytes use the scan.
const W0: usize = 96;
/// Tokens ending this close to a window's end are left to the next window.
const MARGIN: usize = 16;
/// Windows (and compatibility checks) up to this many bytes are merged by a
/// linear scan for the minimum (cache-resident, no allocation).
const SCAN_MAX: usize = 128;
/// A window never grows beyond this; a piece that needs more goes to [`merge_general`].
const W_MAX: usize = 4096;
/// Bytes of window work allowed per byte of the piece before falling back.
const BUDGET: usize = 4;

/// The windowed encoder's knobs (the tests shrink them to force every path).
#[derive(Clone, Copy)]
struct Params {
    w0: usize,
    margin: usize,
    budget: usize,
    slack: usize,
}

const PARAMS: Params = Params { w0: W0, margin: MARGIN, budget: BUDGET, slack: 4 * W_MAX };

/// A direct-mapped cache of `(a, b) -> rank` in front of the rank function.
struct Memo<R> {
    slots: Vec<(u64, u32)>,
    shift: u32,
    rank: R,
}

impl<R: Fn(u32, u32) -> u32> Memo<R> {
    fn new(bits: u32, rank: R) -> Self {
        Memo { slots: vec![(u64::MAX, 0); 1 << bits], shift: 64 - bits, rank }
    }

    #[inline(always)]
    fn get(&mut self, a: u32, b: u32) -> u32 {
        let k = pack(a, b);
        let h = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        // (`h < 1 << bits`: the shift keeps the top `bits` bits)
        let s = &mut self.slots[h];
        if s.0 == k {
            return s.1;
        }
        let r = (self.rank)(a, b);
        *s = (k, r);
        r
    }
}

/// The exact merge result of a long piece (see the module's comment).
pub(crate) fn merge_long(
    piece: &[u8],
    byte_to_id: &[u32; 256],
    tokens: &Tokens,
    rank: impl Fn(u32, u32) -> u32,
    out: &mut Vec<u32>,
) {
    let n = piece.len();
    let bits = (usize::BITS - (n / 4).leading_zeros()).clamp(8, 14);
    let mut memo = Memo::new(bits, rank);
    let base = out.len();
    if windows(piece, byte_to_id, tokens, &mut memo, PARAMS, out).is_none() {
        out.truncate(base);
        merge_general(piece, byte_to_id, &mut |a, b| memo.get(a, b), out);
    }
}

/// Merge `piece` in any way that is exact: the scan when it is short.
fn merge_any(piece: &[u8], byte_to_id: &[u32; 256], rank: &mut impl FnMut(u32, u32) -> u32, out: &mut Vec<u32>) {
    if piece.len() <= SCAN_MAX {
        merge_scan(piece, byte_to_id, rank, out, None)
    } else {
        merge_general(piece, byte_to_id, rank, out)
    }
}

/// The windowed encoder: the number of junctions that failed their check,
/// or None if it gave up (budget or window size), with `out` to be truncated
/// by the caller.
fn windows<R: Fn(u32, u32) -> u32>(
    piece: &[u8],
    byte_to_id: &[u32; 256],
    tokens: &Tokens,
    memo: &mut Memo<R>,
    p: Params,
    out: &mut Vec<u32>,
) -> Option<usize> {
    const NONE: u32 = u32::MAX;
    let n = piece.len();
    let base = out.len();
    let budget = p.budget * n + p.slack;
    // (every pass either merges a window, which the budget counts, or moves
    // `pos` or `w`; the bound on passes is insurance)
    let mut passes = 0usize;
    let mut failed = 0;
    let mut work = 0usize;
    let mut w = p.w0;
    let mut pos = 0usize;
    // committed segments: (start byte, out length before it, the token that followed it in its window)
    let mut segs: Vec<(usize, usize, u32)> = Vec::with_capacity(n / (p.w0 / 2).max(1) + 1);
    // the token after the last segment in its window: compatible with `out.last()`
    let mut follow = NONE;
    // the last window merged: its bytes' range and its tokens
    let mut win_at = (0usize, 0usize);
    let mut e: Vec<u32> = Vec::with_capacity(SCAN_MAX);
    // where each token of `e` ends in the window (read from the merge, not
    // from `tokens`, whose entries are scattered over the vocabulary)
    let mut ends: Vec<u32> = Vec::with_capacity(SCAN_MAX);
    // (a, b) -> compatible, for the junction checks
    let mut compat: [(u64, bool); 64] = [(u64::MAX, false); 64];
    let mut joined: Vec<u8> = Vec::with_capacity(2 * SCAN_MAX);
    let mut tmp: Vec<u32> = Vec::with_capacity(SCAN_MAX);
    let mut rank = |a: u32, b: u32| memo.get(a, b);
    while pos < n {
        passes += 1;
        if passes > 2 * budget {
            return None;
        }
        let end = n.min(pos + w);
        let win = &piece[pos..end];
        if win_at.1 != win.len() || &piece[win_at.0..win_at.0 + win_at.1] != win {
            work += win.len();
            if work > budget {
                return None;
            }
            e.clear();
            ends.clear();
            if win.len() <= SCAN_MAX {
                merge_scan(win, byte_to_id, &mut rank, &mut e, Some(&mut ends));
            } else {
                merge_general(win, byte_to_id, &mut rank, &mut e);
                let mut at = 0;
                ends.extend(e.iter().map(|&t| {
                    at += tokens[t as usize].len() as u32;
                    at
                }));
            }
            win_at = (pos, win.len());
        }
        // keep the tokens that end at least `MARGIN` bytes before the window's
        // end (the last ones depend on bytes the window does not see)
        let (take, bytes) = if end == n {
            (e.len(), win.len())
        } else {
            // the tokens but the last that end `margin` bytes before the window's end
            let limit = win.len().saturating_sub(p.margin) as u32;
            let take = ends[..e.len() - 1].partition_point(|&x| x <= limit);
            let bytes = if take > 0 { ends[take - 1] as usize } else { 0 };
            if take == 0 {
                // one token fills the window: widen it
                if w >= W_MAX {
                    return None;
                }
                w *= 2;
                continue;
            }
            (take, bytes)
        };
        if out.len() > base && e[0] != follow {
            let (a, b) = (*out.last().unwrap(), e[0]);
            let k = pack(a, b);
            let slot = &mut compat[(k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize];
            let ok = if slot.0 == k {
                slot.1
            } else {
                joined.clear();
                joined.extend_from_slice(&tokens[a as usize]);
                joined.extend_from_slice(&tokens[b as usize]);
                work += joined.len();
                if work > budget {
                    return None;
                }
                tmp.clear();
                merge_any(&joined, byte_to_id, &mut rank, &mut tmp);
                let ok = tmp.len() == 2 && tmp[0] == a && tmp[1] == b;
                *slot = (k, ok);
                ok
            };
            if !ok {
                failed += 1;
                // drop the last segment; merge a wider window from its start
                let (s, o, _) = segs.pop().expect("a segment precedes a junction");
                pos = s;
                out.truncate(o);
                follow = segs.last().map_or(NONE, |x| x.2);
                if w < W_MAX {
                    w *= 2;
                }
                continue;
            }
        }
        let before = out.len();
        out.extend_from_slice(&e[..take]);
        follow = e.get(take).copied().unwrap_or(NONE);
        segs.push((pos, before, follow));
        pos += bytes;
        w = p.w0;
    }
    Some(failed)
}

/// The merge process on a window: `piece.len() <= SCAN_MAX`. With `ends`,
/// also where each token ends in `piece`.
///
/// Parts stay at the byte position where they start (a linked list skips
/// the merged-away ones), and a tournament tree over the positions holds,
/// for each pair, `rank << 8 | position`: its root is the leftmost pair of
/// lowest rank. A merge changes three pairs, each an update of `log2(n)`
/// nodes, where scanning the window for its minimum and shifting the parts
/// down cost O(n) per merge -- a window of random letters makes about 60
/// merges, and the scan was most of the time spent on such text.
fn merge_scan(
    piece: &[u8],
    byte_to_id: &[u32; 256],
    rank: &mut impl FnMut(u32, u32) -> u32,
    out: &mut Vec<u32>,
    ends: Option<&mut Vec<u32>>,
) {
    const NONE: u64 = u64::MAX;
    let n = piece.len();
    debug_assert!(n <= SCAN_MAX && SCAN_MAX <= 256);
    if n == 0 {
        return;
    }
    let mut parts = [0u32; SCAN_MAX];
    // next[p]: where the part after the one at p starts (n after the last); prev likewise
    let mut next = [0u8; SCAN_MAX + 1];
    let mut prev = [0u8; SCAN_MAX];
    // leaves at m..2m, node k's children 2k and 2k + 1
    let m = n.next_power_of_two();
    let mut tree = [NONE; 2 * SCAN_MAX];
    let key = |r: u32, p: usize| if r == NO_RANK { NONE } else { (r as u64) << 8 | p as u64 };
    for (p, &b) in piece.iter().enumerate() {
        parts[p] = byte_to_id[b as usize];
        next[p] = (p + 1) as u8;
        prev[p] = p.wrapping_sub(1) as u8;
    }
    for p in 0..n - 1 {
        tree[m + p] = key(rank(parts[p], parts[p + 1]), p);
    }
    for k in (1..m).rev() {
        tree[k] = tree[2 * k].min(tree[2 * k + 1]);
    }
    let set = |tree: &mut [u64; 2 * SCAN_MAX], p: usize, v: u64| {
        let mut k = m + p;
        tree[k] = v;
        while k > 1 {
            k /= 2;
            tree[k] = tree[2 * k].min(tree[2 * k + 1]);
        }
    };
    loop {
        let top = tree[1];
        if top == NONE {
            break;
        }
        let (p, r) = ((top & 0xFF) as usize, (top >> 8) as u32);
        let q = next[p] as usize;
        let after = next[q] as usize;
        parts[p] = r;
        next[p] = after as u8;
        if after < n {
            prev[after] = p as u8;
        }
        set(&mut tree, q, NONE);
        let right = if after < n { key(rank(r, parts[after]), p) } else { NONE };
        set(&mut tree, p, right);
        // the leftmost part (position 0) is never merged away, so p > 0 has a part before it
        if p > 0 {
            let a = prev[p] as usize;
            set(&mut tree, a, key(rank(parts[a], r), a));
        }
    }
    let mut p = 0;
    while p < n {
        out.push(parts[p]);
        p = next[p] as usize;
    }
    if let Some(ends) = ends {
        let mut p = 0;
        while p < n {
            p = next[p] as usize;
            ends.push(p as u32);
        }
    }
}

/// Any length: pairs are kept in buckets by rank and the lowest rank is
/// processed left to right in one pass, which is what repeatedly merging the
/// leftmost lowest-rank pair does, because a merge never creates a pair of the
/// rank being processed (the merged pair is a longer byte string). If a merge
/// creates a pair of a *lower* rank (possible with arbitrary ranks), the pass
/// stops there and resumes after that rank. O(n) bucket operations plus
/// O(distinct ranks · log).
pub(crate) fn merge_general(
    piece: &[u8],
    byte_to_id: &[u32; 256],
    rank: &mut impl FnMut(u32, u32) -> u32,
    out: &mut Vec<u32>,
) {
    const END: u32 = u32::MAX;
    let n = piece.len();
    if n == 0 {
        return;
    }
    let mut ids: Vec<u32> = piece.iter().map(|&b| byte_to_id[b as usize]).collect();
    let mut next: Vec<u32> = (1..=n as u32).collect();
    next[n - 1] = END;
    let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
    prev[0] = END;
    let mut buckets: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut pending: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    for i in 0..n - 1 {
        let r = rank(ids[i], ids[i + 1]);
        if r != NO_RANK {
            buckets.entry(r).or_default().push(i as u32);
        }
    }
    pending.extend(buckets.keys().map(|&r| Reverse(r)));
    fn add(buckets: &mut FxHashMap<u32, Vec<u32>>, pending: &mut BinaryHeap<Reverse<u32>>, r: u32, at: u32) {
        match buckets.entry(r) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().push(at),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(vec![at]);
                pending.push(Reverse(r));
            }
        }
    }
    while let Some(Reverse(r)) = pending.pop() {
        let Some(mut list) = buckets.remove(&r) else { continue };
        if !list.is_sorted() {
            list.sort_unstable();
        }
        let mut k = 0;
        while k < list.len() {
            let i = list[k] as usize;
            k += 1;
            let j = next[i];
            if ids[i] == END || j == END || rank(ids[i], ids[j as usize]) != r {
                continue;
            }
            let j = j as usize;
            ids[i] = r;
            ids[j] = END;
            let nx = next[j];
            next[i] = nx;
            let mut lower = false;
            if nx != END {
                prev[nx as usize] = i as u32;
                let r2 = rank(r, ids[nx as usize]);
                if r2 != NO_RANK {
                    add(&mut buckets, &mut pending, r2, i as u32);
                    lower |= r2 < r;
                }
            }
            let p = prev[i];
            if p != END {
                let r2 = rank(ids[p as usize], r);
                if r2 != NO_RANK {
                    add(&mut buckets, &mut pending, r2, p);
                    lower |= r2 < r;
                }
            }
            if lower && k < list.len() {
                // a lower rank appeared: finish it first, then come back
                let rest = list.split_off(k);
                for at in rest {
                    add(&mut buckets, &mut pending, r, at);
                }
                break;
            }
        }
    }
    let mut i = 0u32;
    while i != END {
        out.push(ids[i as usize]);
        i = next[i as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    /// A vocabulary over a few letters: `tokens[id]`, ids 0..256 the bytes.
    struct Vocab {
        tokens: Vec<Vec<u8>>,
        byte_to_id: [u32; 256],
        pairs: FxHashMap<u64, u32>,
    }

    fn ident() -> [u32; 256] {
        std::array::from_fn(|i| i as u32)
    }

    /// Tiktoken's rule (`bytes_rule`: every split of a token into two
    /// tokens has the token's rank) or learned pairs only; `ops` picks the
    /// parents, `order` scrambles the ranks (a permutation of the new ids).
    fn vocab(ops: &[(usize, usize)], order: &[u32], bytes_rule: bool) -> Vocab {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.resize(256 + ops.len(), Vec::new());
        let mut known: Vec<u32> = b"abc".iter().map(|&b| b as u32).collect();
        let mut by_bytes: FxHashMap<Vec<u8>, u32> = (0..256u32).map(|b| (vec![b as u8], b)).collect();
        let mut pairs = FxHashMap::default();
        for (k, &(x, y)) in ops.iter().enumerate() {
            let (a, b) = (known[x % known.len()], known[y % known.len()]);
            let mut t = tokens[a as usize].clone();
            t.extend_from_slice(&tokens[b as usize]);
            if by_bytes.contains_key(&t) {
                continue;
            }
            let z = 256 + order[k];
            by_bytes.insert(t.clone(), z);
            tokens[z as usize] = t;
            known.push(z);
            if !bytes_rule {
                pairs.insert(pack(a, b), z);
            }
        }
        if bytes_rule {
            for (t, &z) in &by_bytes {
                for cut in 1..t.len() {
                    if let (Some(&l), Some(&r)) = (by_bytes.get(&t[..cut]), by_bytes.get(&t[cut..])) {
                        pairs.insert(pack(l, r), z);
                    }
                }
            }
        }
        Vocab { tokens, byte_to_id: ident(), pairs }
    }

    impl Vocab {
        fn rank(&self) -> impl Fn(u32, u32) -> u32 + '_ {
            |a, b| *self.pairs.get(&pack(a, b)).unwrap_or(&NO_RANK)
        }
    }

    /// The reference: repeatedly merge the leftmost pair of lowest rank.
    fn slow(piece: &[u8], byte_to_id: &[u32; 256], rank: impl Fn(u32, u32) -> u32) -> Vec<u32> {
        let mut parts: Vec<u32> = piece.iter().map(|&b| byte_to_id[b as usize]).collect();
        loop {
            let best = (0..parts.len().saturating_sub(1))
                .map(|i| (rank(parts[i], parts[i + 1]), i))
                .filter(|&(r, _)| r != NO_RANK)
                .min();
            let Some((r, i)) = best else { return parts };
            parts[i] = r;
            parts.remove(i + 1);
        }
    }

    fn permutation(len: usize, seed: u64) -> Vec<u32> {
        let mut p: Vec<u32> = (0..len as u32).collect();
        let mut x = seed | 1;
        for i in (1..p.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p.swap(i, (x % (i as u64 + 1)) as usize);
        }
        p
    }

    /// A piece over `abc` with long runs and repeats: chunks copied, runs of one letter.
    fn piece_from(chunks: &[(u8, usize)]) -> Vec<u8> {
        let mut v = Vec::new();
        for &(c, len) in chunks {
            match c % 4 {
                0 if !v.is_empty() => {
                    let from = (len * 7919) % v.len();
                    let take = (len % 64).min(v.len() - from);
                    v.extend_from_within(from..from + take);
                }
                _ => v.extend(std::iter::repeat_n(b"abc"[c as usize % 3], len % 24 + 1)),
            }
        }
        v
    }

    fn check(v: &Vocab, piece: &[u8], p: Params) -> Option<usize> {
        let want = slow(piece, &v.byte_to_id, v.rank());
        let mut memo = Memo::new(6, v.rank());
        let mut out = vec![7];
        let failed = windows(piece, &v.byte_to_id, &Tokens::from_vecs(&v.tokens), &mut memo, p, &mut out);
        if failed.is_some() {
            assert_eq!(&out[1..], &want[..], "windows {:?}", std::str::from_utf8(piece));
        }
        let mut g = vec![];
        merge_general(piece, &v.byte_to_id, &mut v.rank(), &mut g);
        assert_eq!(g, want, "general");
        let mut l = vec![];
        merge_long(piece, &v.byte_to_id, &Tokens::from_vecs(&v.tokens), v.rank(), &mut l);
        assert_eq!(l, want, "merge_long");
        failed
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn windows_equal_the_reference(
            ops in prop::collection::vec((0usize..60, 0usize..60), 1..60),
            seed in any::<u64>(),
            scramble in any::<bool>(),
            bytes_rule in any::<bool>(),
            chunks in prop::collection::vec((any::<u8>(), 0usize..200), 1..80),
            w0 in 2usize..40,
            margin in 0usize..10,
        ) {
            let order = if scramble { permutation(ops.len(), seed) } else { (0..ops.len() as u32).collect() };
            let v = vocab(&ops, &order, bytes_rule);
            let piece = piece_from(&chunks);
            check(&v, &piece, Params { w0, margin, budget: 64, slack: 0 });
            check(&v, &piece, PARAMS);
            // a budget too small for the windows: the general merge answers
            check(&v, &piece, Params { w0, margin, budget: 0, slack: 0 });
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn window_merge_equals_the_reference(
            ops in prop::collection::vec((0usize..60, 0usize..60), 1..60),
            seed in any::<u64>(),
            bytes_rule in any::<bool>(),
            chunks in prop::collection::vec((any::<u8>(), 0usize..40), 1..12),
        ) {
            let v = vocab(&ops, &permutation(ops.len(), seed), bytes_rule);
            let mut piece = piece_from(&chunks);
            piece.truncate(SCAN_MAX);
            let want = slow(&piece, &v.byte_to_id, v.rank());
            let (mut got, mut ends) = (vec![5], vec![]);
            merge_scan(&piece, &v.byte_to_id, &mut v.rank(), &mut got, Some(&mut ends));
            prop_assert_eq!(&got[1..], &want[..]);
            let mut at = 0;
            let want_ends: Vec<u32> = want.iter().map(|&t| { at += v.tokens[t as usize].len() as u32; at }).collect();
            prop_assert_eq!(ends, want_ends);
        }
    }

    #[test]
    fn failed_junctions_are_retried_and_exact() {
        // many small windows without a margin cut where the result does not
        // decompose; count that the retries really happen
        let mut failed = 0;
        for seed in 0..300u64 {
            let ops: Vec<(usize, usize)> =
                (0..40).map(|k| ((seed as usize * 31 + k * 17) % 50, (seed as usize * 7 + k * 13) % 45)).collect();
            let v = vocab(&ops, &permutation(ops.len(), seed), seed % 2 == 0);
            let chunks: Vec<(u8, usize)> = (0..60)
                .map(|k| (((seed + k) as u8).wrapping_mul(37), (seed as usize + k as usize * 11) % 150))
                .collect();
            let piece = piece_from(&chunks);
            failed += check(&v, &piece, Params { w0: 4, margin: 0, budget: 64, slack: 0 }).unwrap_or(0);
        }
        assert!(failed > 100, "{failed}");
    }

    #[test]
    fn runs_and_periods_of_a_doubling_vocabulary() {
        // a, aa, aaaa, ... and ab, abab, ...: every window of a run is the same
        let mut ops = vec![(0, 0)];
        for k in 0..6 {
            ops.push((3 + k, 3 + k));
        }
        let v = vocab(&ops, &(0..ops.len() as u32).collect::<Vec<_>>(), true);
        for len in [96, 97, 200, 1000, 4099, 100_000] {
            let piece = vec![b'a'; len];
            let mut out = vec![];
            merge_long(&piece, &v.byte_to_id, &Tokens::from_vecs(&v.tokens), v.rank(), &mut out);
            assert_eq!(out.iter().map(|&t| v.tokens[t as usize].len()).sum::<usize>(), len);
            if len < 5000 {
                assert_eq!(out, slow(&piece, &v.byte_to_id, v.rank()));
            }
            // 64-byte tokens, then the binary digits of the rest
            assert!(out.len() <= len / 64 + 7, "{len}: {}", out.len());
        }
    }
}
