//! Counting 2..8-grams and selecting the vocabulary.
//!
//! The rule (spec): every distinct 2..8-gram of the text, counted with
//! overlaps; score = n × count; sorted by score descending, then n descending,
//! then bytes ascending; the top `k` are kept.
//!
//! Counting every n-gram of a 100 MB text is ~700 M hash-map updates into maps
//! of tens of millions of keys: too slow and too big. We only need the top `k`,
//! so the counting is level-wise with an exact Apriori-style pruning:
//!
//! - `T` is the k-th best score among the n-grams counted so far (0 while
//!   fewer than k are known). It is a lower bound of the final k-th score, and
//!   it only grows.
//! - An n-gram can reach the final top k only if `n × count >= T`, hence
//!   `count >= T / n >= T / 8`. Let `c = ceil(T / 8)` (at least 1).
//! - Every sub-string of an n-gram occurs at least as often as the n-gram.
//!   So at level n we count only the n-grams whose (n-1)-prefix and
//!   (n-1)-suffix both occur at least `c` times. By induction, every n-gram
//!   occurring `c` times or more is counted, and its count is exact (the
//!   filter depends on the n-gram's bytes, not on where it occurs).
//! - `c` may grow between levels: "all n-grams with count >= c_old are known"
//!   implies the same for any larger c.
//!
//! The filter is kept as one bit per text position ("the (n-1)-gram here is
//! frequent"); the n-gram at `p` is counted iff bits `p` and `p + 1` are set.
//! Whole 64-position words of zero bits are skipped, so the later levels cost
//! little. Level 2 counts into a dense 64 Ki table; higher levels into one
//! small hash map per thread over a contiguous range of the text, merged.
//! Memory is the text, one bit per position, and the counted candidates:
//! bounded by the distinct n-grams (in practice by `len / c` per level),
//! never by the corpus size times anything.
//!
//! Deterministic: counts are sums and the final order is total, so the result
//! does not depend on the number of threads.

use std::cmp::Ordering;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::{key_at, MAX_N, MIN_N};

/// An n-gram with its exact count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scored {
    pub key: u64,
    pub n: u8,
    pub count: u64,
}

impl Scored {
    #[inline]
    pub fn score(&self) -> u64 {
        self.count * self.n as u64
    }
}

/// The vocabulary order: score descending, then n descending, then bytes
/// ascending (for equal n the key order is the byte order).
#[inline]
pub fn rank_order(a: &Scored, b: &Scored) -> Ordering {
    b.score().cmp(&a.score()).then(b.n.cmp(&a.n)).then(a.key.cmp(&b.key))
}

/// What the counter did, per n (index n; 0 and 1 unused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountStats {
    /// Positions whose n-gram was counted.
    pub positions: [u64; MAX_N + 1],
    /// Distinct n-grams counted (after pruning).
    pub distinct: [u64; MAX_N + 1],
    /// The count threshold `c` used to keep n-grams as extendable.
    pub min_count: [u64; MAX_N + 1],
}

/// Counting levels 3..8 in bounded memory: where the tables spill, and how
/// much they may hold (see [`top_ngrams_bounded`]).
#[derive(Debug, Clone)]
pub struct Spill {
    /// The directory under which each level's runs get a directory of their own.
    pub parent: std::path::PathBuf,
    /// Estimated bytes of the counting tables (all threads) before they spill.
    pub limit: u64,
    /// Estimated bytes the merged table of a level that spilled may keep (its
    /// n-grams counted at least `c` times); more is a "budget too small" error.
    pub keep: u64,
    /// The whole budget a caller gives per byte of `keep`, and the bytes it
    /// holds besides (the text, its bits): for the error's suggested budget.
    pub budget_per_keep: f64,
    pub fixed: u64,
}

/// Estimated bytes of one entry of a level's counting table: key and count
/// (16), the control byte, and the spare capacity of a table up to 7/8 full.
pub const LEVEL_ENTRY: u64 = 32;

/// The top `k` n-grams of `text` (2..8 bytes, no NUL in `text`) in vocabulary
/// order. Runs on the current rayon pool.
pub fn top_ngrams(text: &[u8], k: usize) -> (Vec<Scored>, CountStats) {
    let (top, stats, _) = top_ngrams_bounded(text, k, None).expect("counting in memory does not fail");
    (top, stats)
}

/// [`top_ngrams`], with the tables of levels 3..8 spilled to sorted runs on
/// disk (`crate::spill`, keys as their 8 big-endian bytes) whenever they pass
/// `spill.limit`: a level that spilled merges its runs, keeping only the
/// n-grams counted at least `c` times (every one the next level's filter and
/// this level's candidates need), so the result -- statistics included -- is
/// exactly [`top_ngrams`]'s. Also returns the runs written. An error when the
/// kept n-grams of a level would pass `spill.keep` (it names a budget that
/// would do), or when a run cannot be written.
pub fn top_ngrams_bounded(
    text: &[u8],
    k: usize,
    spill: Option<&Spill>,
) -> crate::error::Result<(Vec<Scored>, CountStats, usize)> {
    debug_assert!(!text.contains(&0), "strip NUL bytes before counting");
    let mut stats = CountStats::default();
    let mut runs = 0usize;
    let len = text.len();
    if k == 0 || len < MIN_N {
        return Ok((Vec::new(), stats, runs));
    }
    let threads = rayon::current_num_threads().max(1);
    let mut best: Vec<Scored> = Vec::new();

    // ---- level 2: a dense table, then the bit of every position -------------
    let positions = len - 1;
    let counts2 = pool_sum(ranges(positions, threads), |r| {
        let mut c = vec![0u64; 1 << 16];
        for p in r {
            c[((text[p] as usize) << 8) | text[p + 1] as usize] += 1;
        }
        c
    });
    stats.positions[2] = positions as u64;
    let level: Vec<Scored> = counts2
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(key, &count)| Scored { key: key as u64, n: 2, count })
        .collect();
    stats.distinct[2] = level.len() as u64;
    let mut threshold = merge_best(&mut best, level, k, 0);
    let mut c = min_count(threshold);
    stats.min_count[2] = c;
    let frequent2: Vec<bool> = counts2.iter().map(|&x| x >= c).collect();
    drop(counts2);
    let words = len.div_ceil(64) + 1; // one spare zero word: bit p + 1 of the last word
    let mut alive = vec![0u64; words];
    alive[..words - 1].par_chunks_mut(1024).enumerate().for_each(|(ci, chunk)| {
        for (j, word) in chunk.iter_mut().enumerate() {
            let base = (ci * 1024 + j) * 64;
            let mut w = 0u64;
            for i in 0..64 {
                let p = base + i;
                if p + 1 < len && frequent2[((text[p] as usize) << 8) | text[p + 1] as usize] {
                    w |= 1 << i;
                }
            }
            *word = w;
        }
    });

    // ---- levels 3..8 ---------------------------------------------------------
    for n in MIN_N + 1..=MAX_N {
        let (map, seen, distinct, level_runs) = match spill {
            None => {
                let (map, seen) = pool_merge(ranges(words - 1, threads), |r| {
                    let mut m: FxHashMap<u64, u64> = FxHashMap::default();
                    let seen = count_range(text, &alive, r, n, &mut m, |_| Ok(())).expect("no spilling");
                    (m, seen)
                });
                let distinct = map.len() as u64;
                (map, seen, distinct, 0)
            }
            Some(sp) => count_level_spilled(text, &alive, words, threads, n, c, sp)?,
        };
        runs += level_runs;
        stats.positions[n] = seen;
        stats.distinct[n] = distinct;
        if map.is_empty() {
            break;
        }
        let level: Vec<Scored> = map
            .iter()
            .filter(|(_, &count)| count * n as u64 >= threshold)
            .map(|(&key, &count)| Scored { key, n: n as u8, count })
            .collect();
        threshold = merge_best(&mut best, level, k, threshold);
        c = c.max(min_count(threshold));
        stats.min_count[n] = c;
        if n == MAX_N {
            break;
        }
        // The next level's filter: n-grams here occurring at least c times.
        let mut next = vec![0u64; words];
        let any = next[..words - 1]
            .par_chunks_mut(1024)
            .enumerate()
            .map(|(ci, chunk)| {
                let mut any = false;
                for (j, word) in chunk.iter_mut().enumerate() {
                    let w = ci * 1024 + j;
                    let mut bits = candidates(&alive, w);
                    let mut out = 0u64;
                    while bits != 0 {
                        let i = bits.trailing_zeros();
                        bits &= bits - 1;
                        let p = w * 64 + i as usize;
                        if map.get(&key_at(text, p, n)).is_some_and(|&x| x >= c) {
                            out |= 1 << i;
                        }
                    }
                    *word = out;
                    any |= out != 0;
                }
                any
            })
            .reduce(|| false, |a, b| a | b);
        drop(map);
        alive = next;
        if !any {
            break;
        }
    }
    best.truncate(k);
    Ok((best, stats, runs))
}

/// Count the n-grams of the positions of words `r` into `m`, calling `full`
/// with `m` after each word (where a bounded count spills it). Returns the
/// positions counted.
#[inline]
fn count_range(
    text: &[u8],
    alive: &[u64],
    r: std::ops::Range<usize>,
    n: usize,
    m: &mut FxHashMap<u64, u64>,
    mut full: impl FnMut(&mut FxHashMap<u64, u64>) -> crate::error::Result<()>,
) -> crate::error::Result<u64> {
    let mut seen = 0u64;
    for w in r {
        let mut bits = candidates(alive, w);
        while bits != 0 {
            let p = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            *m.entry(key_at(text, p, n)).or_insert(0) += 1;
            seen += 1;
        }
        full(m)?;
    }
    Ok(seen)
}

/// One level counted under a [`Spill`]: each thread's table is written as a
/// sorted run whenever it passes its share of `sp.limit` (and once more at the
/// end if anything spilled); the runs are merged, counting every distinct
/// n-gram and keeping those counted at least `c` times -- a superset of what
/// the caller reads: the candidates scoring at least the threshold (count >=
/// threshold / n >= c) and the next filter (count >= the new c >= c).
/// Returns (the table, positions counted, distinct n-grams, runs written).
fn count_level_spilled(
    text: &[u8],
    alive: &[u64],
    words: usize,
    threads: usize,
    n: usize,
    c: u64,
    sp: &Spill,
) -> crate::error::Result<(FxHashMap<u64, u64>, u64, u64, usize)> {
    use crate::spill::SpillDir;
    let dir: std::sync::Mutex<Option<SpillDir>> = std::sync::Mutex::new(None);
    let rs = ranges(words - 1, threads);
    let per_thread = (sp.limit / LEVEL_ENTRY / rs.len() as u64).max(1) as usize;
    let write = |m: &mut FxHashMap<u64, u64>| -> crate::error::Result<()> {
        let mut items: Vec<([u8; 8], u64)> = m.drain().map(|(k, v)| (k.to_be_bytes(), v)).collect();
        items.sort_unstable_by_key(|a| a.0);
        let mut guard = dir.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(SpillDir::new(&sp.parent)?);
        }
        guard.as_mut().unwrap().write_run(items.iter().map(|(k, v)| (&k[..], *v)))
    };
    let parts: Vec<crate::error::Result<(FxHashMap<u64, u64>, u64)>> = rs
        .into_par_iter()
        .map(|r| {
            let mut m: FxHashMap<u64, u64> = FxHashMap::default();
            let seen =
                count_range(text, alive, r, n, &mut m, |m| if m.len() > per_thread { write(m) } else { Ok(()) })?;
            Ok((m, seen))
        })
        .collect();
    let mut parts = parts.into_iter().collect::<crate::error::Result<Vec<_>>>()?;
    let seen: u64 = parts.iter().map(|p| p.1).sum();
    let spilled = dir.lock().unwrap_or_else(|e| e.into_inner()).is_some();
    if !spilled {
        // nothing passed the limit: the tables merged as without a budget
        let (map, _) = parts
            .into_iter()
            .reduce(|(a, sa), (b, sb)| {
                let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
                for (k, v) in small {
                    *big.entry(k).or_insert(0) += v;
                }
                (big, sa + sb)
            })
            .unwrap_or_default();
        let distinct = map.len() as u64;
        return Ok((map, seen, distinct, 0));
    }
    for p in parts.iter_mut() {
        if !p.0.is_empty() {
            write(&mut p.0)?;
        }
    }
    drop(parts);
    let mut dir = dir.into_inner().unwrap_or_else(|e| e.into_inner()).expect("runs were written");
    let runs = dir.runs.len();
    dir.reduce()?;
    let mut merged = dir.merge()?;
    let (mut map, mut distinct, mut needed) = (FxHashMap::default(), 0u64, 0u64);
    let fits = (sp.keep / LEVEL_ENTRY) as usize;
    while let Some((key, count)) = merged.next()? {
        distinct += 1;
        if count >= c {
            needed += 1;
            if map.len() < fits {
                map.insert(u64::from_be_bytes(key[..].try_into().expect("8-byte keys")), count);
            }
        }
    }
    if needed > fits as u64 {
        return Err(too_small(sp, n, c, needed));
    }
    Ok((map, seen, distinct, runs))
}

/// The error for a budget whose kept table of level `n` (`needed` n-grams) does not fit.
fn too_small(sp: &Spill, n: usize, c: u64, needed: u64) -> crate::error::Error {
    let need = needed * LEVEL_ENTRY;
    crate::error::Error::invalid(format!(
        "the memory budget is too small: the {needed} distinct {n}-grams counted at least {c} times (the \
         ones the selection needs) take about {need} bytes, more than its {} bytes for them; a budget of at \
         least {} bytes",
        sp.keep,
        sp.fixed + (need as f64 * sp.budget_per_keep).ceil() as u64,
    ))
}

/// The positions of word `w` whose n-gram is counted: bits p and p + 1 set.
#[inline(always)]
fn candidates(alive: &[u64], w: usize) -> u64 {
    let a = alive[w];
    if a == 0 {
        return 0;
    }
    a & ((a >> 1) | (alive[w + 1] << 63))
}

/// `ceil(threshold / MAX_N)`, at least 1.
pub(crate) fn min_count(threshold: u64) -> u64 {
    threshold.div_ceil(MAX_N as u64).max(1)
}

/// Add `level` to `best`, keep the top `k`, and return the new threshold: the
/// k-th best score (0 while fewer than k are known). Only entries scoring at
/// least `threshold` need to be given.
pub(crate) fn merge_best(best: &mut Vec<Scored>, level: Vec<Scored>, k: usize, threshold: u64) -> u64 {
    best.extend(level.into_iter().filter(|s| s.score() >= threshold));
    best.sort_unstable_by(rank_order);
    best.truncate(k);
    if best.len() == k {
        best[k - 1].score()
    } else {
        0
    }
}

/// `0..total` cut into at most `parts` contiguous ranges.
pub(crate) fn ranges(total: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, total.max(1));
    let step = total.div_ceil(parts).max(1);
    (0..total).step_by(step).map(|s| s..(s + step).min(total)).collect()
}

/// Dense tables computed per range, summed.
pub(crate) fn pool_sum(
    rs: Vec<std::ops::Range<usize>>,
    f: impl Fn(std::ops::Range<usize>) -> Vec<u64> + Sync + Send,
) -> Vec<u64> {
    rs.into_par_iter()
        .map(f)
        .reduce_with(|mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            a
        })
        .unwrap_or_else(|| vec![0u64; 1 << 16])
}

/// Hash maps computed per range, merged into the largest.
pub(crate) fn pool_merge(
    rs: Vec<std::ops::Range<usize>>,
    f: impl Fn(std::ops::Range<usize>) -> (FxHashMap<u64, u64>, u64) + Sync + Send,
) -> (FxHashMap<u64, u64>, u64) {
    rs.into_par_iter()
        .map(f)
        .reduce_with(|(a, sa), (b, sb)| {
            let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
            for (k, v) in small {
                *big.entry(k).or_insert(0) += v;
            }
            (big, sa + sb)
        })
        .unwrap_or_default()
}

/// Every 2..8-gram with its count, by brute force (tests and the reference).
pub fn count_all(text: &[u8]) -> Vec<Scored> {
    let mut m: FxHashMap<u64, u64> = FxHashMap::default();
    for n in MIN_N..=MAX_N {
        for p in 0..text.len().saturating_sub(n - 1) {
            *m.entry(key_at(text, p, n)).or_insert(0) += 1;
        }
    }
    let mut v: Vec<Scored> =
        m.into_iter().map(|(key, count)| Scored { key, n: super::key_len(key) as u8, count }).collect();
    v.sort_unstable_by(rank_order);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::key_of;
    use proptest::prelude::*;

    fn brute(text: &[u8], k: usize) -> Vec<Scored> {
        let mut v = count_all(text);
        v.truncate(k);
        v
    }

    #[test]
    fn scores_and_ties() {
        // "abab": ab×2 (4), ba×1 (2), aba×1 (3), bab×1 (3), abab×1 (4)
        let (top, _) = top_ngrams(b"abab", 10);
        let got: Vec<(Vec<u8>, u64)> = top.iter().map(|s| (crate::ngram::key_bytes(s.key), s.count)).collect();
        let want: Vec<(Vec<u8>, u64)> = vec![
            (b"abab".to_vec(), 1), // score 4, longer first
            (b"ab".to_vec(), 2),   // score 4
            (b"aba".to_vec(), 1),  // score 3, bytes ascending
            (b"bab".to_vec(), 1),
            (b"ba".to_vec(), 1),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn short_texts() {
        assert!(top_ngrams(b"", 5).0.is_empty());
        assert!(top_ngrams(b"a", 5).0.is_empty());
        assert_eq!(top_ngrams(b"ab", 5).0, vec![Scored { key: key_of(b"ab"), n: 2, count: 1 }]);
        assert!(top_ngrams(b"abc", 0).0.is_empty());
    }

    #[test]
    fn eight_grams_are_counted_with_overlaps() {
        // 10 a's: n-gram a^n occurs 11 - n times; scores 18 24 28 30 30 28 24 for n = 2..8.
        let (top, _) = top_ngrams(b"aaaaaaaaaa", 7);
        let got: Vec<(u8, u64)> = top.iter().map(|s| (s.n, s.count)).collect();
        assert_eq!(got, vec![(6, 5), (5, 6), (7, 4), (4, 7), (8, 3), (3, 8), (2, 9)]);
    }

    #[test]
    fn same_result_for_any_thread_count() {
        let text: Vec<u8> = (0..200_000u32).map(|i| b"the cat sat on the mat; "[(i * 7 % 24) as usize % 24]).collect();
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| top_ngrams(&text, 300));
        let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap().install(|| top_ngrams(&text, 300));
        assert_eq!(one.0, three.0);
        assert_eq!(one.0, brute(&text, 300));
    }

    fn tiny_spill(dir: &std::path::Path, limit: u64, keep: u64) -> Spill {
        Spill { parent: dir.to_path_buf(), limit, keep, budget_per_keep: 2.0, fixed: 100 }
    }

    #[test]
    fn spilled_levels_give_the_same_selection_and_statistics() {
        let dir = std::env::temp_dir().join(format!("tf-ngram-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text: Vec<u8> = (0..60_000u32).map(|i| b"abcdefgh ijk"[((i * 7919) % 97 % 12) as usize]).collect();
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let want = pool.install(|| top_ngrams(&text, 200));
            let (top, stats, runs) =
                pool.install(|| top_ngrams_bounded(&text, 200, Some(&tiny_spill(&dir, 64, 1 << 30)))).unwrap();
            assert!(runs > 2 * crate::spill::FAN_IN, "{runs} runs: merged in rounds");
            assert_eq!((top, stats), want);
            // a limit nothing passes: no runs, the same result
            let (top, stats, runs) =
                pool.install(|| top_ngrams_bounded(&text, 200, Some(&tiny_spill(&dir, 1 << 40, 1 << 30)))).unwrap();
            assert_eq!(((top, stats), runs), (want, 0));
        }
        // too small a table for what the selection needs: a typed error, no runs left behind
        let err = top_ngrams_bounded(&text, 200, Some(&tiny_spill(&dir, 64, 64))).unwrap_err().to_string();
        assert!(err.contains("memory budget is too small") && err.contains("a budget of at least"), "{err}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        // Small alphabets make long repeats, so pruning is exercised at every k.
        #[test]
        fn pruned_equals_brute_force(text in proptest::collection::vec(1u8..5, 0..400), k in 1usize..60) {
            let (top, _) = top_ngrams(&text, k);
            prop_assert_eq!(top, brute(&text, k));
        }

        #[test]
        fn pruned_equals_brute_force_wide(text in proptest::collection::vec(any::<u8>().prop_map(|b| b.max(1)), 0..300), k in 1usize..40) {
            let (top, _) = top_ngrams(&text, k);
            prop_assert_eq!(top, brute(&text, k));
        }
    }
}
