//! Incremental BPE training.
//!
//! Counting: [`WordCounter`] (`crate::wordcount`) keeps the unique pieces of
//! the corpus with u64 counts (memory bounded by the unique pieces, never by
//! the corpus). [`Trainer::from_counter`] is the one setup of a run: pieces
//! to ids, earlier merges applied, the token bytes for the tie-break.
//!
//! Merging: every unique piece is laid out in one arena of token ids with
//! `prev`/`next` links, and every adjacent pair keeps the arena positions where
//! it occurs. Merging a pair visits only its own positions: each merge is
//! O(occurrences), not O(pieces × length), so training is near-linear in the
//! corpus even when whole documents are the pieces (`pattern=None`). Pair
//! counts change by deltas; a max-heap with lazy refresh picks the next pair
//! (a popped entry whose count is stale is pushed back with its current count).
//!
//! The pair chosen at every step is the one with the largest count; ties go to
//! the smaller `(left_id, right_id)` (rustbpe's rule) or to the lexicographically
//! largest pair of byte strings (seed 003's rule). Since counts are exact and
//! the order is total, the merges do not depend on the thread count.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::time::Instant;

use super::encode::{BpeModel, MergeRule};
use super::heap::Heap;
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::wordcount::WordCounter;

const NONE: u32 = u32::MAX;

#[inline(always)]
pub fn pack(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

#[inline(always)]
pub fn unpack(p: u64) -> (u32, u32) {
    ((p >> 32) as u32, p as u32)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// Largest count, then the smallest `(left_id, right_id)` (rustbpe).
    PairIds,
    /// Largest count, then the largest `(bytes(left), bytes(right))` (seed 003).
    Lexicographic,
}

impl TieBreak {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "pair_ids" => Ok(TieBreak::PairIds),
            "lexicographic" => Ok(TieBreak::Lexicographic),
            other => {
                Err(Error::Invalid(format!("unknown tie_break {other:?}; expected \"pair_ids\" or \"lexicographic\"")))
            }
        }
    }
}

struct PairInfo {
    count: i64,
    /// Arena positions of the pair's left token, ascending; may hold stale entries.
    pos: Vec<u32>,
}

pub struct Trainer {
    ids: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    wid: Vec<u32>,
    counts: Vec<u64>,
    pair_index: FxHashMap<u64, u32>,
    pairs: Vec<PairInfo>,
    heap: Heap<(u64, u64)>,
    /// Bytes of every id (empty for special or unused ids).
    tokens: Vec<Vec<u8>>,
    next_id: u32,
    merges: Vec<(u32, u32, u32)>,
    tie: TieBreak,
    min_frequency: u64,
    remaining: usize,
    done: bool,
}

fn better(tie: TieBreak, tokens: &[Vec<u8>]) -> impl Fn(&(u64, u64), &(u64, u64)) -> bool + '_ {
    move |a: &(u64, u64), b: &(u64, u64)| {
        if a.0 != b.0 {
            return a.0 > b.0;
        }
        match tie {
            TieBreak::PairIds => a.1 < b.1,
            TieBreak::Lexicographic => {
                let (al, ar) = unpack(a.1);
                let (bl, br) = unpack(b.1);
                let x = (&tokens[al as usize][..], &tokens[ar as usize][..]);
                let y = (&tokens[bl as usize][..], &tokens[br as usize][..]);
                x > y
            }
        }
    }
}

impl Trainer {
    /// `words`: unique sequences of token ids with counts (already mapped from
    /// bytes, and already merged by any earlier merges). `tokens`: bytes of
    /// every existing id. New ids start at `next_id`.
    pub fn new(
        words: Vec<(Vec<u32>, u64)>,
        tokens: Vec<Vec<u8>>,
        next_id: u32,
        num_merges: usize,
        tie: TieBreak,
        min_frequency: u64,
    ) -> Result<Self> {
        let total: usize = words.iter().filter(|w| w.0.len() >= 2).map(|w| w.0.len()).sum();
        if total >= NONE as usize {
            return Err(Error::Invalid(format!(
                "the unique pieces hold {total} tokens; training supports at most {} (use a split pattern)",
                NONE - 1
            )));
        }
        let mut ids = Vec::with_capacity(total);
        let mut next = Vec::with_capacity(total);
        let mut prev = Vec::with_capacity(total);
        let mut wid = Vec::with_capacity(total);
        let mut counts = Vec::new();
        for (w, c) in words {
            if w.len() < 2 || c == 0 {
                continue;
            }
            let k = counts.len() as u32;
            counts.push(c);
            let base = ids.len() as u32;
            let n = w.len() as u32;
            for (j, &t) in w.iter().enumerate() {
                let j = j as u32;
                ids.push(t);
                prev.push(if j == 0 { NONE } else { base + j - 1 });
                next.push(if j + 1 == n { NONE } else { base + j + 1 });
                wid.push(k);
            }
        }
        let mut pair_index: FxHashMap<u64, u32> = FxHashMap::default();
        let mut pairs: Vec<PairInfo> = Vec::new();
        for p in 0..ids.len() {
            let q = next[p];
            if q == NONE {
                continue;
            }
            let key = pack(ids[p], ids[q as usize]);
            let w = counts[wid[p] as usize] as i64;
            let idx = *pair_index.entry(key).or_insert_with(|| {
                pairs.push(PairInfo { count: 0, pos: Vec::new() });
                (pairs.len() - 1) as u32
            });
            let info = &mut pairs[idx as usize];
            info.count += w;
            info.pos.push(p as u32);
        }
        let entries: Vec<(u64, u64)> =
            pair_index.iter().map(|(&k, &i)| (pairs[i as usize].count as u64, k)).filter(|e| e.0 > 0).collect();
        let heap = Heap::from_vec(entries, &better(tie, &tokens));
        Ok(Trainer {
            ids,
            next,
            prev,
            wid,
            counts,
            pair_index,
            pairs,
            heap,
            tokens,
            next_id,
            merges: Vec::new(),
            tie,
            min_frequency: min_frequency.max(1),
            remaining: num_merges,
            done: num_merges == 0,
        })
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn merges(&self) -> &[(u32, u32, u32)] {
        &self.merges
    }

    pub fn tokens(&self) -> &[Vec<u8>] {
        &self.tokens
    }

    /// The count of the pair merged last (for progress display).
    pub fn distinct_pairs(&self) -> usize {
        self.heap.len()
    }

    /// Run up to `max_merges` merges, or until `deadline`. Returns how many ran.
    pub fn run(&mut self, max_merges: usize, deadline: Option<Instant>) -> usize {
        let mut done_here = 0;
        while !self.done && done_here < max_merges {
            if done_here % 64 == 63 {
                if let Some(d) = deadline {
                    if Instant::now() >= d {
                        break;
                    }
                }
            }
            match self.pick() {
                Some((pair, _count)) => {
                    self.merge(pair);
                    done_here += 1;
                    self.remaining -= 1;
                    if self.remaining == 0 {
                        self.done = true;
                    }
                }
                None => self.done = true,
            }
        }
        done_here
    }

    fn pick(&mut self) -> Option<(u64, u64)> {
        loop {
            let top = {
                let cmp = better(self.tie, &self.tokens);
                self.heap.pop(&cmp)?
            };
            let idx = self.pair_index[&top.1] as usize;
            let cur = self.pairs[idx].count;
            if cur <= 0 {
                continue;
            }
            if cur as u64 != top.0 {
                let cmp = better(self.tie, &self.tokens);
                self.heap.push((cur as u64, top.1), &cmp);
                continue;
            }
            if (cur as u64) < self.min_frequency {
                return None;
            }
            return Some((top.1, top.0));
        }
    }

    fn merge(&mut self, pair: u64) {
        let (a, b) = unpack(pair);
        let z = self.next_id;
        self.next_id += 1;
        self.merges.push((a, b, z));
        let mut tok = self.tokens[a as usize].clone();
        tok.extend_from_slice(&self.tokens[b as usize]);
        if self.tokens.len() <= z as usize {
            self.tokens.resize(z as usize + 1, Vec::new());
        }
        self.tokens[z as usize] = tok;

        let idx = self.pair_index[&pair] as usize;
        let positions = std::mem::take(&mut self.pairs[idx].pos);
        // New pairs (those holding z) collect here: count and ascending positions.
        let mut fresh: FxHashMap<u64, (i64, Vec<u32>)> = FxHashMap::default();
        let pair_index = &self.pair_index;
        let pairs = &mut self.pairs;
        let mut sub = |key: u64, d: i64| {
            let i = pair_index[&key] as usize;
            pairs[i].count -= d;
        };
        for &p in &positions {
            let p = p as usize;
            if self.ids[p] != a {
                continue;
            }
            let q = self.next[p];
            if q == NONE || self.ids[q as usize] != b {
                continue;
            }
            let q = q as usize;
            let w = self.counts[self.wid[p] as usize] as i64;
            let x = self.prev[p];
            let r = self.next[q];
            // the occurrence itself
            sub(pair, w);
            if x != NONE {
                let xi = self.ids[x as usize];
                let old = pack(xi, a);
                if xi == z {
                    fresh.get_mut(&old).expect("(z, a) was created by the previous occurrence").0 -= w;
                } else {
                    sub(old, w);
                }
                let e = fresh.entry(pack(xi, z)).or_insert((0, Vec::new()));
                e.0 += w;
                if e.1.last() != Some(&x) {
                    e.1.push(x);
                }
            }
            if r != NONE {
                let yi = self.ids[r as usize];
                sub(pack(b, yi), w);
                let e = fresh.entry(pack(z, yi)).or_insert((0, Vec::new()));
                e.0 += w;
                if e.1.last() != Some(&(p as u32)) {
                    e.1.push(p as u32);
                }
            }
            self.ids[p] = z;
            self.ids[q] = NONE;
            self.next[p] = r;
            if r != NONE {
                self.prev[r as usize] = p as u32;
            }
        }
        let mut fresh: Vec<(u64, (i64, Vec<u32>))> = fresh.into_iter().filter(|e| e.1 .0 > 0).collect();
        // deterministic push order (the heap order is total anyway)
        fresh.sort_unstable_by_key(|e| e.0);
        let cmp = better(self.tie, &self.tokens);
        for (key, (count, pos)) in fresh {
            self.pairs.push(PairInfo { count, pos });
            self.pair_index.insert(key, (self.pairs.len() - 1) as u32);
            self.heap.push((count as u64, key), &cmp);
        }
    }
}

impl Trainer {
    /// The one setup of a training run, whoever asks (the Python trainer,
    /// [`train_texts`], the growing vocabulary): the counted pieces of
    /// `counter`, in byte order, become ids through `byte_ids`, then the
    /// earlier `merges` are applied to them (pairs rule, lowest id first); the
    /// bytes of every id below `next_id` seed the tie-break table, and
    /// `num_merges` new merges will get ids from `next_id`. Runs on the
    /// current rayon pool.
    pub fn from_counter(
        counter: WordCounter,
        byte_ids: &[u32; 256],
        merges: &[(u32, u32, u32)],
        next_id: u32,
        num_merges: usize,
        tie: TieBreak,
        min_frequency: u64,
    ) -> Result<Self> {
        let model = BpeModel::new(byte_ids, merges, vec![], Pretokenizer::Whole, MergeRule::Pairs)?;
        let tokens: Vec<Vec<u8>> =
            (0..next_id).map(|i| model.id_bytes(i).map(|x| x.to_vec()).unwrap_or_default()).collect();
        let sorted = counter.into_sorted();
        let words: Vec<(Vec<u32>, u64)> = sorted
            .par_iter()
            .map(|(w, c)| {
                let mut ids = Vec::with_capacity(w.len());
                if merges.is_empty() {
                    ids.extend(w.iter().map(|&x| byte_ids[x as usize]));
                } else {
                    model.encode_piece(w, &mut ids);
                }
                (ids, *c)
            })
            .collect();
        drop(sorted);
        Trainer::new(words, tokens, next_id, num_merges, tie, min_frequency)
    }
}

/// The whole training in one call (for tests and Rust users): count `texts`,
/// map bytes through `byte_ids`, and learn `num_merges` merges from `first_id`.
pub fn train_texts(
    texts: &[&str],
    pretok: Pretokenizer,
    byte_ids: &[u32; 256],
    first_id: u32,
    num_merges: usize,
    tie: TieBreak,
    min_frequency: u64,
) -> Result<Vec<(u32, u32, u32)>> {
    let mut wc = WordCounter::new(pretok);
    wc.add_texts(texts)?;
    let mut t = Trainer::from_counter(wc, byte_ids, &[], first_id, num_merges, tie, min_frequency)?;
    t.run(usize::MAX, None);
    Ok(t.merges().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT4_PATTERN;

    fn ident() -> [u32; 256] {
        let mut b = [0u32; 256];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u32;
        }
        b
    }

    /// Naive BPE: recount every pair every step.
    fn naive(
        words: &[(Vec<u32>, u64)],
        tokens0: &[Vec<u8>],
        first: u32,
        n: usize,
        tie: TieBreak,
    ) -> Vec<(u32, u32, u32)> {
        let mut words: Vec<(Vec<u32>, u64)> = words.to_vec();
        let mut tokens = tokens0.to_vec();
        let mut out = vec![];
        for k in 0..n {
            let mut counts: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
            for (w, c) in &words {
                for x in w.windows(2) {
                    *counts.entry((x[0], x[1])).or_default() += c;
                }
            }
            let best = counts.iter().max_by(|x, y| {
                x.1.cmp(y.1).then_with(|| match tie {
                    TieBreak::PairIds => y.0.cmp(x.0),
                    TieBreak::Lexicographic => (&tokens[x.0 .0 as usize], &tokens[x.0 .1 as usize])
                        .cmp(&(&tokens[y.0 .0 as usize], &tokens[y.0 .1 as usize])),
                })
            });
            let Some((&(a, b), _)) = best else { break };
            let z = first + k as u32;
            out.push((a, b, z));
            let mut t = tokens[a as usize].clone();
            t.extend_from_slice(&tokens[b as usize]);
            tokens.push(t);
            for (w, _) in words.iter_mut() {
                let mut o = vec![];
                let mut i = 0;
                while i < w.len() {
                    if i + 1 < w.len() && w[i] == a && w[i + 1] == b {
                        o.push(z);
                        i += 2;
                    } else {
                        o.push(w[i]);
                        i += 1;
                    }
                }
                *w = o;
            }
        }
        out
    }

    fn check(texts: &[&str], pattern: Option<&str>, n: usize, tie: TieBreak) {
        let pt = Pretokenizer::new(pattern).unwrap();
        let fast = train_texts(texts, pt.clone(), &ident(), 256, n, tie, 1).unwrap();
        let mut wc = WordCounter::new(pt);
        wc.add_texts(texts).unwrap();
        let words: Vec<(Vec<u32>, u64)> =
            wc.into_sorted().into_iter().map(|(w, c)| (w.iter().map(|&b| b as u32).collect(), c)).collect();
        let tokens: Vec<Vec<u8>> = (0..256).map(|b| vec![b as u8]).collect();
        let slow = naive(&words, &tokens, 256, n, tie);
        assert_eq!(fast, slow);
    }

    #[test]
    fn seed_example() {
        let text = "hello hello hello world world";
        let m = train_texts(&[text], Pretokenizer::Whole, &ident(), 256, 3, TieBreak::PairIds, 1).unwrap();
        assert_eq!(m.len(), 3);
        check(&[text], None, 20, TieBreak::PairIds);
        check(&[text], Some(GPT4_PATTERN), 20, TieBreak::Lexicographic);
    }

    #[test]
    fn overlapping_runs() {
        for t in ["aaaaaaa", "abababab a", "aaaa aaa aa a", "zzzz\nzzzz"] {
            check(&[t], None, 10, TieBreak::PairIds);
            check(&[t], Some(GPT4_PATTERN), 10, TieBreak::Lexicographic);
        }
    }

    #[test]
    fn min_frequency_stops() {
        // "ab ab cd": (a,b) twice, then ("ab", " ") twice, then every pair once.
        let m = train_texts(&["ab ab cd"], Pretokenizer::Whole, &ident(), 256, 10, TieBreak::PairIds, 2).unwrap();
        assert_eq!(m, vec![(97, 98, 256), (256, 32, 257)]);
    }

    use proptest::prelude::*;
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn matches_naive(texts in prop::collection::vec("[ab c\n.é]{0,30}", 1..6), n in 0usize..40, lex in any::<bool>(), whole in any::<bool>()) {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            check(&refs, if whole { None } else { Some(GPT4_PATTERN) }, n, tie);
        }
    }
}
