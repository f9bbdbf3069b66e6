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

use super::train::pack;

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
        // SAFETY-free: `h < 1 << bits` by the shift
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
    tokens: &[Vec<u8>],
    rank: impl Fn(u32, u32) -> u32,
    out: &mut Vec<u32>,
) {
    let n = piece.len();
    let bits = (usize::BITS - (n / 4).leading_zeros()).clamp(8, 14);
    let mut memo = Memo::new(bits, rank);
    let base = out.len();
    if !windows(piece, byte_to_id, tokens, &mut memo, out) {
        out.truncate(base);
        merge_general(piece, byte_to_id, &mut |a, b| memo.get(a, b), out);
    }
}

/// Merge `piece` in any way that is exact: the scan when it is short.
fn merge_any(piece: &[u8], byte_to_id: &[u32; 256], rank: &mut impl FnMut(u32, u32) -> u32, out: &mut Vec<u32>) {
    if piece.len() <= SCAN_MAX {
        merge_scan(piece, byte_to_id, rank, out)
    } else {
        merge_general(piece, byte_to_id, rank, out)
    }
}

/// The windowed encoder; false if it gave up (budget or window size), with
/// `out` to be truncated by the caller.
fn windows<R: Fn(u32, u32) -> u32>(
    piece: &[u8],
    byte_to_id: &[u32; 256],
    tokens: &[Vec<u8>],
    memo: &mut Memo<R>,
    out: &mut Vec<u32>,
) -> bool {
    const NONE: u32 = u32::MAX;
    let n = piece.len();
    let base = out.len();
    let budget = BUDGET * n + 4 * W_MAX;
    let mut work = 0usize;
    let mut w = W0;
    let mut pos = 0usize;
    // committed segments: (start byte, out length before it, the token that followed it in its window)
    let mut segs: Vec<(usize, usize, u32)> = Vec::with_capacity(n / (W0 / 2) + 1);
    // the token after the last segment in its window: compatible with `out.last()`
    let mut follow = NONE;
    // the last window merged: its bytes' range and its tokens
    let mut win_at = (0usize, 0usize);
    let mut e: Vec<u32> = Vec::with_capacity(SCAN_MAX);
    // (a, b) -> compatible, for the junction checks
    let mut compat: [(u64, bool); 64] = [(u64::MAX, false); 64];
    let mut joined: Vec<u8> = Vec::with_capacity(2 * SCAN_MAX);
    let mut tmp: Vec<u32> = Vec::with_capacity(SCAN_MAX);
    let mut rank = |a: u32, b: u32| memo.get(a, b);
    while pos < n {
        let end = n.min(pos + w);
        let win = &piece[pos..end];
        if win_at.1 != win.len() || &piece[win_at.0..win_at.0 + win_at.1] != win {
            work += win.len();
            if work > budget {
                return false;
            }
            e.clear();
            merge_any(win, byte_to_id, &mut rank, &mut e);
            win_at = (pos, win.len());
        }
        // keep the tokens that end at least `MARGIN` bytes before the window's
        // end (the last ones depend on bytes the window does not see)
        let (take, bytes) = if end == n {
            (e.len(), win.len())
        } else {
            let mut take = 0;
            let mut bytes = 0;
            for &t in &e[..e.len() - 1] {
                let l = tokens[t as usize].len();
                if bytes + l + MARGIN > win.len() {
                    break;
                }
                bytes += l;
                take += 1;
            }
            if take == 0 {
                // one token fills the window: widen it
                if w >= W_MAX {
                    return false;
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
                    return false;
                }
                tmp.clear();
                merge_any(&joined, byte_to_id, &mut rank, &mut tmp);
                let ok = tmp.len() == 2 && tmp[0] == a && tmp[1] == b;
                *slot = (k, ok);
                ok
            };
            if !ok {
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
        w = W0;
    }
    true
}

/// The merge process by a linear scan for the lowest rank: `piece.len() <= SCAN_MAX`.
fn merge_scan(piece: &[u8], byte_to_id: &[u32; 256], rank: &mut impl FnMut(u32, u32) -> u32, out: &mut Vec<u32>) {
    let mut n = piece.len();
    debug_assert!(n <= SCAN_MAX);
    if n == 0 {
        return;
    }
    let mut parts = [0u32; SCAN_MAX];
    let mut ranks = [NO_RANK; SCAN_MAX];
    for (p, &b) in parts.iter_mut().zip(piece) {
        *p = byte_to_id[b as usize];
    }
    for i in 0..n - 1 {
        ranks[i] = rank(parts[i], parts[i + 1]);
    }
    while n > 1 {
        // the minimum, then its first position: two passes the compiler
        // vectorizes, faster than one pass carrying an index
        let live = &ranks[..n - 1];
        let best = live.iter().fold(NO_RANK, |m, &r| m.min(r));
        if best == NO_RANK {
            break;
        }
        let at = live.iter().position(|&r| r == best).unwrap_or(0);
        parts[at] = best;
        parts.copy_within(at + 2..n, at + 1);
        ranks.copy_within(at + 1..n - 1, at);
        n -= 1;
        if at + 1 < n {
            ranks[at] = rank(parts[at], parts[at + 1]);
        }
        if at > 0 {
            ranks[at - 1] = rank(parts[at - 1], parts[at]);
        }
    }
    out.extend_from_slice(&parts[..n]);
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
