//! Incremental BPE training.
//!
//! Counting: [`WordCounter`] (`crate::wordcount`) keeps the unique pieces of
//! the corpus with u64 counts (memory bounded by the unique pieces, never by
//! the corpus). [`Trainer::from_counter`] is the one setup of a run: pieces
//! to ids, earlier merges applied, the token bytes for the tie-break.
//!
//! Merging: every unique piece is laid out in one arena of `u32` slots, each
//! piece followed by two separator slots that hold its count (30 bits each, so
//! the count is read from the cache line of the piece itself). A slot is a token id where a token starts; a token that covers
//! `s >= 2` slots (a merged one) stores `SPAN | s` in its second and its last
//! slot, so the next and the previous token are found in O(1) from either side
//! without `prev`/`next` links (4 bytes a slot instead of 16). Slots inside a
//! token never hold an id, so a stale position is recognised by its slot.
//!
//! Every adjacent pair keeps the arena positions where it occurs, in one shared
//! pool of `u32` (a pair's positions are all written when the pair is created:
//! a pair only gains occurrences at the merge that creates its newer token).
//! Merging a pair visits only its own positions: each merge is O(occurrences)
//! (reading an occurrence's count walks at most 64 tokens to the separators, or
//! binary-searches the few longer pieces), not O(pieces × length), so training
//! stays near-linear in the corpus even when whole documents are the pieces
//! (`pattern=None`). A pair whose count falls to zero leaves the index; the pool,
//! when full, is compacted in place if a quarter of it is stale, and the heap is
//! rebuilt when it holds more than twice the live pairs, so memory follows the
//! live structure, not the number of merges run.
//!
//! The pair index (`PairIndex`) is an open-addressing table of 4-byte entry
//! numbers over a vector of entries, so that its growth moves 4-byte buckets,
//! not whole entries. A merge of (a, b) into z changes only (x, a), (b, y) and
//! makes only (x, z), (z, y): the walk keeps them in arrays indexed by x or
//! y, and plain training applies the losses to the index once per distinct
//! neighbour.
//!
//! A merge over many positions (the first merges touch most pieces) runs on
//! every thread of the current rayon pool: its positions are cut at piece
//! boundaries, each thread rewrites its own pieces and keeps what the existing
//! pairs lose and the new pairs it makes, and the results are reduced so that
//! the pool, the index and the heap are exactly those of one thread (the new
//! positions of a pair in arena order). The setup's layout (the sorted pieces
//! cut into one run per thread, each written into its own range of the arena)
//! and its pair index (over ranges of whole pieces) are built the same way, as
//! are the checks of a pool compaction (chunks of positions).
//!
//! Pair counts change by deltas; a max-heap with lazy refresh picks the next
//! pair (a popped entry whose count is stale is pushed back with its current
//! count). The pair chosen at every step is the one with the largest count;
//! ties go to the smaller `(left_id, right_id)` (rustbpe's rule) or to the
//! lexicographically largest pair of byte strings (seed 003's rule; two pairs
//! with the same bytes, which merges along different paths can make, go to the
//! smaller ids). Since counts are exact and the order is total, the merges do
//! not depend on the thread count or on the order of the pieces.
//!
//! Not handled: a piece longer than 2^30 tokens, a piece counted 2^60 times or
//! more, or more than 2^32 - 2 slots in all (an error names the limit); ids
//! from 2^31 up; parity training's merges on more than one thread.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Instant;

use super::encode::{BpeModel, MergeRule};
use super::heap::Heap;
use super::pair::{pack, unpack};
use super::parity::{peek_current, Lose, Measure, Parity, Rule, Slots, GLOBAL};
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::wordcount::{SortedPart, WordCounter};

/// Slot tags: below `SPAN` a token id; `SPAN | s` the span marker of a token
/// covering `s` slots; `SEP | hi`, `SEP | lo` the two separators after a piece
/// (its count is `hi << 30 | lo`).
const SPAN: u32 = 0x8000_0000;
const SEP: u32 = 0xC000_0000;
const MASK: u32 = 0x3FFF_FFFF;
/// Pieces longer than this many slots are listed in `Trainer::long`, so that
/// finding the piece of a position never walks more than this many tokens.
/// (The unit tests use tiny thresholds so that every path runs on small input.)
#[cfg(not(test))]
const LONG: usize = 64;
#[cfg(test)]
const LONG: usize = 3;
/// The pool, when full, is compacted if it holds more stale entries than this
/// and more than a quarter of its length.
#[cfg(not(test))]
const COMPACT_MIN: usize = 1 << 16;
#[cfg(test)]
const COMPACT_MIN: usize = 4;
/// The heap is rebuilt when it holds more than twice the live pairs plus this.
#[cfg(not(test))]
const HEAP_SLACK: usize = 1 << 12;
#[cfg(test)]
const HEAP_SLACK: usize = 2;
const NO_POS: u32 = u32::MAX;
/// The language of an occurrence that changes no language's training count.
const NO_LANG: u32 = u32::MAX;
/// Parity training: a piece counted 2^30 times or more in one language is laid
/// out as copies (`Trainer::parity_from_counters`), at most this many.
const MAX_COPIES: u64 = 64;

/// Parity training: a laid-out piece's (training count, dev count), kept in
/// its two count slots.
#[inline(always)]
fn split_counts(c: u64) -> (u64, u64) {
    (c >> 30, c & MASK as u64)
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

/// A live pair: its weighted count and its positions `pool[off..off + len]`
/// (ascending), `live` of which are occurrences still (the others are stale).
#[derive(Clone, Copy, Default)]
struct PairInfo {
    count: i64,
    off: usize,
    len: u32,
    live: u32,
}

/// The pair index: every live pair's [`PairInfo`], found by its key.
///
/// The entries (key and info, 32 bytes) in a vector, a removed one's place
/// reused (marked by the key `FREE`), and an open-addressing table of 4-byte
/// entry numbers over them (linear probing, at most half full, backward-shift
/// removal): a lookup compares the key through the entry, which it reads
/// anyway. Memory at N live pairs: 32 N for the entries and 8-16 N for the
/// table; its doubling holds 12-24 N at once. The hash table of
/// (key, entry number) it replaces took 16 bytes a bucket at a load of
/// 7/16-7/8 (18-37 N besides 24-byte entries) and held both tables while it
/// doubled (2 GB: peak 2,137 MB against 1,997 for a table of whole entries).
/// A lookup costs one cache line of the table and the entry's own line; a
/// collision reads another entry (1.5 probes on average for a hit at load
/// 1/2).
struct PairIndex {
    /// Entry numbers, `EMPTY` where none; a power of two long.
    table: Vec<u32>,
    /// `64 - log2(table.len())`: a key's home bucket is the top bits of its
    /// Fibonacci hash.
    shift: u32,
    live: usize,
    entries: Vec<IndexEntry>,
    /// Entries of removed pairs, to reuse.
    free: Vec<u32>,
}

#[derive(Clone, Copy)]
struct IndexEntry {
    key: u64,
    info: PairInfo,
}

const EMPTY: u32 = u32::MAX;
/// The key of a free entry (a pair's key packs two ids below 2^31).
const FREE: u64 = u64::MAX;
const MIN_BUCKETS: usize = 16;
/// How many lookups ahead [`PairIndex::prefetch_ahead`] asks for an entry.
const INDEX_AHEAD: usize = 4;

impl Default for PairIndex {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl PairIndex {
    fn with_capacity(n: usize) -> Self {
        let buckets = (2 * n).next_power_of_two().max(MIN_BUCKETS);
        PairIndex {
            table: vec![EMPTY; buckets],
            shift: 64 - buckets.trailing_zeros(),
            live: 0,
            entries: Vec::with_capacity(n),
            free: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.live
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The bucket holding `key`'s entry number.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.table.len() - 1;
        let mut b = self.home(key);
        loop {
            let i = self.table[b];
            if i == EMPTY {
                return None;
            }
            if self.entries[i as usize].key == key {
                return Some(b);
            }
            b = (b + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, key: u64) -> Option<&PairInfo> {
        self.find(key).map(|b| &self.entries[self.table[b] as usize].info)
    }

    #[cfg(test)]
    fn get_mut(&mut self, key: u64) -> Option<&mut PairInfo> {
        self.slot_mut(key).map(|(_, info)| info)
    }

    /// `key`'s entry number (its slot: [`Slots`]) and info.
    #[inline]
    fn slot_mut(&mut self, key: u64) -> Option<(u32, &mut PairInfo)> {
        let i = self.table[self.find(key)?];
        Some((i, &mut self.entries[i as usize].info))
    }

    /// Put entry number `i` (whose key is `key`) in the first empty bucket
    /// from `key`'s home.
    #[inline]
    fn place(&mut self, key: u64, i: u32) {
        let mask = self.table.len() - 1;
        let mut b = self.home(key);
        while self.table[b] != EMPTY {
            b = (b + 1) & mask;
        }
        self.table[b] = i;
    }

    /// Add `key` (not in the index); its entry number.
    #[inline]
    fn insert(&mut self, key: u64, info: PairInfo) -> u32 {
        debug_assert!(key != FREE && self.find(key).is_none(), "a pair is added once");
        if 2 * (self.live + 1) > self.table.len() {
            self.grow();
        }
        let e = IndexEntry { key, info };
        let i = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = e;
                i
            }
            None => {
                self.entries.push(e);
                (self.entries.len() - 1) as u32
            }
        };
        self.live += 1;
        self.place(key, i);
        i
    }

    /// Twice the buckets, refilled from the entries in order (a sequential
    /// read of them, not one miss per bucket).
    #[cold]
    fn grow(&mut self) {
        let buckets = 2 * self.table.len();
        self.table = Vec::new();
        self.table = vec![EMPTY; buckets];
        self.shift = 64 - buckets.trailing_zeros();
        for i in 0..self.entries.len() {
            let key = self.entries[i].key;
            if key != FREE {
                self.place(key, i as u32);
            }
        }
    }

    #[inline]
    fn remove(&mut self, key: u64) {
        let Some(mut hole) = self.find(key) else { return };
        let i = self.table[hole];
        self.entries[i as usize].key = FREE;
        self.free.push(i);
        self.live -= 1;
        // backward shift: an entry after the hole, up to the next empty
        // bucket, moves into it when the hole lies between its home and it
        let mask = self.table.len() - 1;
        let mut j = (hole + 1) & mask;
        loop {
            let e = self.table[j];
            if e == EMPTY {
                break;
            }
            let home = self.home(self.entries[e as usize].key);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.table[hole] = e;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.table[hole] = EMPTY;
    }

    /// Hints for a loop over `ids` that looks up `key(ids[j])` at step `j`:
    /// the home bucket of the key `2 * INDEX_AHEAD` steps ahead, and the entry
    /// that bucket names `INDEX_AHEAD` steps ahead (its bucket asked for
    /// earlier). A late merge looks up a few hundred pairs scattered over an
    /// index of hundreds of MB, two dependent misses each. No effect on the
    /// result.
    #[inline(always)]
    fn prefetch_ahead(&self, ids: &[u32], j: usize, key: impl Fn(u32) -> u64) {
        if let Some(&far) = ids.get(j + 2 * INDEX_AHEAD) {
            prefetch(&self.table, self.home(key(far)));
        }
        if let Some(&near) = ids.get(j + INDEX_AHEAD) {
            let i = self.table[self.home(key(near))];
            if i != EMPTY {
                prefetch(&self.entries, i as usize);
            }
        }
    }

    /// A hint for an insert of `key` `2 * INDEX_AHEAD` inserts ahead: its
    /// home bucket, and the free entry it will likely take. No effect on the
    /// result.
    #[inline(always)]
    fn prefetch_insert(&self, key: u64) {
        prefetch(&self.table, self.home(key));
        if let Some(&i) = self.free.len().checked_sub(1 + 2 * INDEX_AHEAD).and_then(|k| self.free.get(k)) {
            prefetch(&self.entries, i as usize);
        }
    }

    /// Every pair, in entry order.
    fn iter(&self) -> impl Iterator<Item = (u64, &PairInfo)> + '_ {
        self.entries.iter().filter(|e| e.key != FREE).map(|e| (e.key, &e.info))
    }
}

/// A pair's entry number is its slot: it keeps it while it lives (growth
/// moves the table's buckets, not the entries).
impl Slots for PairIndex {
    #[inline(always)]
    fn slot(&self, key: u64) -> Option<u32> {
        self.find(key).map(|b| self.table[b])
    }

    #[inline(always)]
    fn global_at(&self, slot: u32) -> u64 {
        self.entries[slot as usize].info.count.max(0) as u64
    }

    fn slots(&self) -> usize {
        self.entries.len()
    }

    fn each_slot(&self, mut f: impl FnMut(u32, u64)) {
        for (i, e) in self.entries.iter().enumerate() {
            if e.key != FREE {
                f(i as u32, e.key);
            }
        }
    }
}

pub struct Trainer {
    /// The arena (see the module notes).
    slots: Vec<u32>,
    /// (first slot, count) of the pieces longer than `LONG` slots, ascending.
    long: Vec<(u32, u64)>,
    /// Every pair with a count above zero.
    pairs: PairIndex,
    pool: Vec<u32>,
    /// Pool entries that are stale or belong to no pair (what compaction frees).
    stale: usize,
    heap: Heap<(u64, u64)>,
    /// Bytes of every id (empty for special or unused ids).
    tokens: Vec<Vec<u8>>,
    next_id: u32,
    merges: Vec<(u32, u32, u32)>,
    tie: TieBreak,
    min_frequency: u64,
    remaining: usize,
    done: bool,
    // scratch of `merge`, kept between merges: parity training's one walk,
    // and plain training's walks (one per thread of a parallel merge)
    fresher: Fresher,
    scratch: (Vec<Fresher>, Vec<Lost>),
    /// Parity-aware training (`super::parity`): None for plain BPE.
    parity: Option<Box<Parity>>,
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
                x > y || (x == y && a.1 < b.1)
            }
        }
    }
}

/// Lays pieces out in the arena (the first step of [`Trainer::new`]).
struct Layout {
    slots: Vec<u32>,
    long: Vec<(u32, u64)>,
    pieces: usize,
}

impl Layout {
    fn new(slots_hint: usize) -> Self {
        let mut slots = Vec::with_capacity(slots_hint + 1);
        slots.push(SEP | MASK);
        Layout { slots, long: Vec::new(), pieces: 0 }
    }

    fn push(&mut self, w: &[u32], c: u64, id_limit: u32) -> Result<()> {
        if w.len() < 2 || c == 0 {
            return Ok(());
        }
        check_piece(w, c, self.slots.len() + w.len() + 2, id_limit)?;
        let start = self.slots.len();
        if w.len() > LONG {
            self.long.push((start as u32, c));
        }
        self.slots.extend_from_slice(w);
        self.slots.extend_from_slice(&count_slots(c));
        self.pieces += 1;
        Ok(())
    }

    /// The pieces of `parts` (read one after the other, bytes mapped through
    /// `byte_ids`) laid out on every thread, as [`Self::push`] would lay them
    /// out one by one: each part's slots are summed, then each part is written
    /// into its own range of the arena. (One thread pushing 10.8 M pieces, 184 M
    /// slots, took ~2 s of the 2 GB setup: a stream of page faults and stores.)
    /// An arena of more slots than fit is left to `push`, which names the piece.
    fn of_parts(parts: &[SortedPart], byte_ids: &[u32; 256], id_limit: u32) -> Result<Self> {
        let kept = |(w, c): &(&[u8], u64)| w.len() >= 2 && *c != 0;
        let sizes: Vec<(usize, usize)> = parts
            .par_iter()
            .map(|p| p.iter().filter(kept).fold((0, 0), |(s, n), (w, _)| (s + w.len() + 2, n + 1)))
            .collect();
        let total = 1 + sizes.iter().map(|s| s.0).sum::<usize>();
        if total >= NO_POS as usize {
            let mut lay = Layout::new(0);
            let mut ids: Vec<u32> = Vec::new();
            for (w, c) in parts.iter().flat_map(|p| p.iter()) {
                ids.clear();
                ids.extend(w.iter().map(|&x| byte_ids[x as usize]));
                lay.push(&ids, c, id_limit)?;
            }
            unreachable!("{total} slots do not fit, so a push refused");
        }
        // zeroed pages are mapped, not written: each thread faults in its own
        let mut slots = vec![0u32; total];
        slots[0] = SEP | MASK;
        let mut outs: Vec<(usize, &mut [u32])> = Vec::with_capacity(parts.len());
        let mut rest = &mut slots[1..];
        let mut base = 1;
        for &(n, _) in &sizes {
            let (out, tail) = rest.split_at_mut(n);
            outs.push((base, out));
            rest = tail;
            base += n;
        }
        let longs: Vec<Result<Vec<(u32, u64)>>> = parts
            .par_iter()
            .zip(outs)
            .map(|(part, (base, out))| {
                let mut long = Vec::new();
                let mut at = 0;
                for (w, c) in part.iter().filter(kept) {
                    let n = w.len();
                    let dst = &mut out[at..at + n + 2];
                    for (d, &x) in dst.iter_mut().zip(w) {
                        *d = byte_ids[x as usize];
                    }
                    check_piece(&dst[..n], c, base + at + n + 2, id_limit)?;
                    dst[n..].copy_from_slice(&count_slots(c));
                    if n > LONG {
                        long.push(((base + at) as u32, c));
                    }
                    at += n + 2;
                }
                Ok(long)
            })
            .collect();
        let mut long = Vec::new();
        for l in longs {
            long.extend(l?);
        }
        Ok(Layout { slots, long, pieces: sizes.iter().map(|s| s.1).sum() })
    }
}

/// Why piece `w` (token ids) counted `c` cannot end just before slot `end`
/// of the arena, if it cannot.
fn check_piece(w: &[u32], c: u64, end: usize, id_limit: u32) -> Result<()> {
    if w.len() > MASK as usize || end >= NO_POS as usize {
        return Err(Error::Invalid(format!(
            "the unique pieces are too long for training (at most {} tokens a piece, {} slots in all, \
             two more a piece; use a split pattern)",
            MASK,
            NO_POS - 1
        )));
    }
    if c >> 60 != 0 {
        return Err(Error::Invalid(format!("a piece is counted {c} times; training supports fewer than 2^60")));
    }
    if let Some(&t) = w.iter().find(|&&t| t >= id_limit) {
        return Err(Error::Invalid(format!("token id {t} is not below the first new id {id_limit}")));
    }
    Ok(())
}

/// The two separator slots after a piece counted `c` (below 2^60).
#[inline(always)]
fn count_slots(c: u64) -> [u32; 2] {
    [SEP | (c >> 30) as u32, SEP | (c as u32 & MASK)]
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
        check_ids(next_id, num_merges)?;
        let total: usize = words.iter().filter(|w| w.0.len() >= 2).map(|w| w.0.len() + 2).sum();
        let mut lay = Layout::new(total.min(NO_POS as usize));
        for (w, c) in &words {
            lay.push(w, *c, next_id)?;
        }
        drop(words);
        Ok(Trainer::from_layout(lay, tokens, next_id, num_merges, tie, min_frequency, None))
    }

    fn from_layout(
        lay: Layout,
        tokens: Vec<Vec<u8>>,
        next_id: u32,
        num_merges: usize,
        tie: TieBreak,
        min_frequency: u64,
        mut parity: Option<Box<Parity>>,
    ) -> Self {
        let Layout { mut slots, long, .. } = lay;
        slots.shrink_to_fit();
        // Pass 1: every adjacent pair's count and number of positions (with
        // parity: a dev occurrence weighs 0). Counted on every thread, each
        // over a range of whole pieces into a table of its own (pairs of bytes
        // at first: small); with parity a range is a language's segment, so
        // its table holds the language's counts (one pass, no probe per
        // position into a per-language map).
        let threads = rayon::current_num_threads();
        let ranges: Vec<(usize, usize)> = if let Some(par) = parity.as_deref() {
            par.seg_start.windows(2).map(|w| (w[0] as usize, w[1] as usize)).collect()
        } else {
            let arena = Arena::of(&mut slots);
            let len = arena.0.len();
            let mut cuts = vec![1];
            for k in 1..threads {
                let mut p = len * k / threads;
                while p < len && arena.get(p) >= SEP {
                    p += 1;
                }
                let c = if p < len { arena.piece_start(&long, p) } else { len };
                cuts.push(c.max(cuts[k - 1]));
            }
            cuts.push(len.max(1));
            cuts.windows(2).map(|c| (c[0], c[1])).collect()
        };
        let ids = next_id; // every id of the arena is below it (`Layout::push`)
                           // parity: each language's (pair, count, positions), its table freed
                           // at once (a table of byte pairs is 6 MB: one per language held at
                           // once set the run's peak), then one table of them all
        let mut lang_pairs: Vec<Vec<(u64, i64, u32)>> = Vec::new();
        let mut tables: Vec<PairTable> = if parity.is_some() {
            lang_pairs = ranges
                .par_iter()
                .map(|&r| {
                    // the training count weighs, the dev count does not
                    let mut t = count_pairs(&slots, r, ids, |_, _, c| split_counts(c).0 as i64);
                    let mut v = Vec::new();
                    t.each(|k, i| v.push((k, i.count, i.len)));
                    v
                })
                .collect();
            let mut all = PairTable::new(ids);
            for &(k, c, n) in lang_pairs.iter().flatten() {
                let g = all.entry(k);
                g.count += c;
                g.len += n;
            }
            vec![all]
        } else {
            ranges.par_iter().map(|&r| count_pairs(&slots, r, ids, |_, _, c| c as i64)).collect()
        };
        // Pass 2: the positions, pair after pair in the pool, ascending (a
        // range's positions of a pair after those of the ranges before it).
        let mut all = if tables.len() == 1 {
            tables.pop().expect("one table")
        } else {
            let mut all = PairTable::new(ids);
            for t in &mut tables {
                t.each(|k, i| {
                    let g = all.entry(k);
                    g.count += i.count;
                    g.len += i.len;
                });
            }
            all
        };
        let mut off = 0usize;
        all.each(|_, info| {
            info.off = off;
            off += info.len as usize;
            info.live = info.len;
        });
        let mut pool = vec![0u32; off];
        let to = Arena::of(&mut pool);
        if tables.is_empty() {
            // one range, or parity's languages: the whole arena
            let whole = (ranges[0].0, ranges[ranges.len() - 1].1);
            place_pairs(&slots, whole, &mut all, to);
        } else {
            // each range's cursor of a pair starts where the ranges before it end
            for t in tables.iter_mut() {
                t.each(|k, i| {
                    let g = all.entry(k);
                    i.off = g.off;
                    g.off += i.len as usize;
                });
            }
            ranges.par_iter().zip(tables.par_iter_mut()).for_each(|(&r, t)| place_pairs(&slots, r, t, to));
        }
        all.each(|_, info| info.off -= info.len as usize); // past its positions, by the cursors above
        drop(tables);
        let pairs = all.into_index();
        if let Some(par) = parity.as_deref_mut() {
            par.start_counts(&pairs);
            for (l, v) in lang_pairs.iter().enumerate() {
                for &(k, c, _) in v {
                    if c > 0 {
                        par.set_count(l, pairs.slot(k).expect("a counted pair is in the index"), c);
                    }
                }
            }
        }
        drop(lang_pairs);
        // every pair has a position; a pair only in dev text (count 0) is never picked
        let entries: Vec<(u64, u64)> =
            pairs.iter().filter(|(_, i)| i.count > 0).map(|(k, i)| (i.count as u64, k)).collect();
        let heap = Heap::from_vec(entries, &better(tie, &tokens));
        if let Some(par) = parity.as_deref_mut() {
            par.build_heaps(&pairs, &better(tie, &tokens));
        }
        Trainer {
            slots,
            long,
            pairs,
            pool,
            stale: 0,
            heap,
            tokens,
            next_id,
            merges: Vec::new(),
            tie,
            min_frequency: min_frequency.max(1),
            remaining: num_merges,
            done: num_merges == 0,
            fresher: Fresher::default(),
            scratch: Default::default(),
            parity,
        }
    }

    /// Parity-aware training only: per merge, the language it was picked for
    /// (`parity::GLOBAL` for the global merges).
    pub fn merge_languages(&self) -> Option<&[u32]> {
        self.parity.as_deref().map(|p| p.chosen())
    }

    /// Parity-aware training only: per language, (dev tokens before training,
    /// dev tokens now, merges picked for it).
    pub fn parity_summary(&self) -> Option<Vec<(u64, u64, u64)>> {
        self.parity.as_deref().map(|p| p.summary())
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
        self.pairs.len()
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
        if let Some(par) = self.parity.as_deref_mut() {
            let parity_phase = self.merges.len() >= par.global_merges;
            if parity_phase && matches!(par.rule, Rule::Excess { .. }) {
                let cmp = better(self.tie, &self.tokens);
                let pairs = &self.pairs;
                // peeked: it stays a candidate for later merges
                let current =
                    |e: &(u64, u64)| pairs.get(e.1).map(|i| i.count).filter(|&c| c > 0).map(|c| (c as u64, e.1));
                let (count, key) = peek_current(&mut self.heap, current, &cmp)?;
                if count < self.min_frequency {
                    return None;
                }
                return Some((par.pick_excess(&cmp, self.min_frequency, key, pairs), 0));
            }
            if parity_phase && !par.global_now() {
                let cmp = better(self.tie, &self.tokens);
                return par.pick(&cmp, self.min_frequency, &self.pairs).map(|k| (k, 0));
            }
            let got = Self::pick_global(&mut self.heap, &self.pairs, self.tie, &self.tokens, self.min_frequency);
            if got.is_some() {
                par.chosen.push(GLOBAL);
            }
            return got;
        }
        Self::pick_global(&mut self.heap, &self.pairs, self.tie, &self.tokens, self.min_frequency)
    }

    /// Plain BPE's pick: the pair with the largest count over the whole corpus.
    fn pick_global(
        heap: &mut Heap<(u64, u64)>,
        pairs: &PairIndex,
        tie: TieBreak,
        tokens: &[Vec<u8>],
        min_frequency: u64,
    ) -> Option<(u64, u64)> {
        let cmp = better(tie, tokens);
        loop {
            let top = heap.pop(&cmp)?;
            let Some(info) = pairs.get(top.1) else { continue };
            let cur = info.count;
            if cur <= 0 {
                continue;
            }
            if cur as u64 != top.0 {
                heap.push((cur as u64, top.1), &cmp);
                continue;
            }
            if (cur as u64) < min_frequency {
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

        let info = *self.pairs.get(pair).expect("the picked pair is in the index");
        let positions = &self.pool[info.off..info.off + info.len as usize];
        if let Some(mut par) = self.parity.take() {
            // Parity: one walk, which sums the losses per neighbour as plain
            // training's does, and beside them per language (`LangLost`); the
            // new pairs' per-language counts follow them into the index.
            let mut fr = std::mem::take(&mut self.fresher);
            let (frs, mut losts) = std::mem::take(&mut self.scratch);
            losts.resize_with(losts.len().max(1), Lost::default);
            let lost = &mut losts[0];
            fr.begin(z);
            lost.begin(z);
            par.begin_merge(z);
            let mut sink = LangLost { lost, par: &mut par, dev: 0 };
            walk(Arena::of(&mut self.slots), &self.long, positions, (a, b, z), pair, &mut sink, &mut fr);
            apply_lost(&mut self.pairs, &mut self.stale, lost, (a, b), Some(&mut par));
            let slots = self.place_fresh(std::slice::from_ref(&fr));
            let fresh = fr.fresh.iter().zip(&slots).map(|(f, &s)| (f.key, (f.live > 0).then_some(s as u32)));
            par.after_merge(fresh, &self.pairs, &better(self.tie, &self.tokens), HEAP_SLACK);
            fr.clear();
            self.fresher = fr;
            self.scratch = (frs, losts);
            self.parity = Some(par);
        } else {
            // A merge over many positions (the first merges touch most pieces)
            // runs on every thread: the positions cut at piece boundaries, each
            // share walked by one thread into counts of its own, then reduced.
            // The new pairs' positions come out in the order one thread would
            // write them, so the pool, the index and the heap are the same.
            let threads = rayon::current_num_threads();
            let n = if threads > 1 && positions.len() >= PAR_MIN { threads } else { 1 };
            let (mut frs, mut losts) = std::mem::take(&mut self.scratch);
            frs.resize_with(n.max(frs.len()), Fresher::default);
            losts.resize_with(n.max(losts.len()), Lost::default);
            for (fr, lost) in frs[..n].iter_mut().zip(&mut losts[..n]) {
                fr.begin(z);
                lost.begin(z);
            }
            let arena = Arena::of(&mut self.slots);
            let long = &self.long[..];
            if n == 1 {
                walk(arena, long, positions, (a, b, z), pair, &mut losts[0], &mut frs[0]);
            } else {
                let shares = arena.cut(long, positions, n);
                shares
                    .into_par_iter()
                    .zip(frs[..n].par_iter_mut())
                    .zip(losts[..n].par_iter_mut())
                    .for_each(|((share, fr), lost)| walk(arena, long, share, (a, b, z), pair, lost, fr));
            }
            let (first, rest) = losts.split_at_mut(1);
            for lost in &mut rest[..n - 1] {
                first[0].absorb(lost);
            }
            apply_lost(&mut self.pairs, &mut self.stale, &mut first[0], (a, b), None);
            self.place_fresh(&frs[..n]);
            for fr in &mut frs[..n] {
                fr.clear();
            }
            self.scratch = (frs, losts);
        }

        if self.heap.len() > 2 * self.pairs.len() + HEAP_SLACK {
            // the old heap goes first: it is rebuilt from the index, and
            // holding both (16 bytes an entry, up to twice the live pairs in
            // the old one) would set the run's peak
            self.heap = Heap::with_capacity(0);
            let entries: Vec<(u64, u64)> =
                self.pairs.iter().filter(|(_, i)| i.count > 0).map(|(k, i)| (i.count as u64, k)).collect();
            self.heap = Heap::from_vec(entries, &better(self.tie, &self.tokens));
        }
    }

    /// The pairs the merge under way created (`frs`: one list per walk, the
    /// walks in arena order): their positions into the pool (each pair's
    /// ascending, pairs in key order for a deterministic layout), then into
    /// the index and the heap. Returns each one's slot in the index (by its
    /// index in the list; `usize::MAX` for a pair with no occurrence left).
    fn place_fresh(&mut self, frs: &[Fresher]) -> Vec<usize> {
        // one list over every walk; `to[t][i]`: walk t's pair i in it
        let mut merged: Vec<Fresh> = Vec::new();
        let mut to: Vec<Vec<u32>> = Vec::new();
        if frs.len() > 1 {
            let mut index: FxHashMap<u64, u32> = FxHashMap::default();
            for fr in frs {
                let mut map = Vec::with_capacity(fr.fresh.len());
                for f in &fr.fresh {
                    let i = *index.entry(f.key).or_insert_with(|| {
                        merged.push(Fresh { key: f.key, count: 0, last: NO_POS, n: 0, live: 0 });
                        (merged.len() - 1) as u32
                    });
                    let m = &mut merged[i as usize];
                    m.count += f.count;
                    m.n += f.n;
                    m.live += f.live;
                    map.push(i);
                }
                to.push(map);
            }
        }
        let fresh: &[Fresh] = if frs.len() > 1 { &merged } else { &frs[0].fresh };
        let mut order: Vec<u32> = (0..fresh.len() as u32).filter(|&i| fresh[i as usize].live > 0).collect();
        order.sort_unstable_by_key(|&i| fresh[i as usize].key);
        let needed: usize = order.iter().map(|&i| fresh[i as usize].n as usize).sum();
        if self.stale > COMPACT_MIN && 4 * self.stale > 3 * self.pool.len() && self.stale > 8 * self.pairs.len() {
            // Mostly stale: compact now, not when full, and give the freed
            // tail back (a large block shrinks in place). The first merges
            // leave most of the setup's positions stale (at 2 GB 152 M of
            // 180 M by merge 4,000, 580 MB held until the pool filled near
            // merge 21,000, while the index and the heap grew: that set the
            // run's peak). Compacting at three quarters stale, and at eight
            // stale entries a live pair (a compaction lists and sorts the
            // live pairs), costs O(1) a stale entry. (Without the second
            // bound, 0.25 GB's late merges took 0.3 CPU s more: compactions
            // of a small pool, each sorting millions of pairs.)
            self.compact_pool();
            self.pool.shrink_to(self.pool.len() + self.pool.len() / 4 + needed);
        }
        if self.pool.len() + needed > self.pool.capacity() {
            // Full: compact if a quarter of the pool is stale (so compactions cost
            // O(1) a stale entry), else grow by a quarter, not double. (Compacting
            // earlier, at half stale, saves ~5 MB at 50 MB of text for ~30% more
            // merge time: the check of each position is a cache miss.)
            if self.stale > COMPACT_MIN && 4 * self.stale > self.pool.len() {
                self.compact_pool();
            }
            if self.pool.len() + needed > self.pool.capacity() {
                self.pool.reserve_exact(needed.max(self.pool.len() / 4));
            }
        }
        let mut start: Vec<usize> = vec![usize::MAX; fresh.len()];
        let mut off = self.pool.len();
        for &i in &order {
            start[i as usize] = off;
            off += fresh[i as usize].n as usize;
        }
        let base = self.pool.len();
        self.pool.resize(off, 0);
        if frs.len() > 1 {
            // each walk writes its positions from its own cursors (the walks
            // after it write after it), all at once
            let mut curs: Vec<Vec<usize>> = Vec::with_capacity(frs.len());
            for (fr, to) in frs.iter().zip(&to) {
                curs.push(
                    fr.fresh
                        .iter()
                        .zip(to)
                        .map(|(f, &i)| {
                            let c = start[i as usize];
                            if c != usize::MAX {
                                start[i as usize] += f.n as usize;
                            }
                            c
                        })
                        .collect(),
                );
            }
            let pool = Arena::of(&mut self.pool[base..]);
            frs.par_iter().zip(curs).for_each(|(fr, mut cur)| {
                for &(i, pos) in &fr.pos {
                    let c = &mut cur[i as usize];
                    if *c != usize::MAX {
                        pool.set(*c - base, pos);
                        *c += 1;
                    }
                }
            });
        } else {
            for &(i, pos) in &frs[0].pos {
                let c = &mut start[i as usize];
                if *c != usize::MAX {
                    self.pool[*c] = pos;
                    *c += 1;
                }
            }
        }
        let mut off = base;
        for (j, &i) in order.iter().enumerate() {
            if let Some(&far) = order.get(j + 2 * INDEX_AHEAD) {
                self.pairs.prefetch_insert(fresh[far as usize].key);
            }
            let f = &fresh[i as usize];
            off += f.n as usize;
            self.stale += (f.n - f.live) as usize;
            let info = PairInfo { count: f.count, off: off - f.n as usize, len: f.n, live: f.live };
            start[i as usize] = self.pairs.insert(f.key, info) as usize;
            if f.count > 0 {
                let cmp = better(self.tie, &self.tokens);
                self.heap.push((f.count as u64, f.key), &cmp);
            }
        }
        start
    }

    /// Drop the stale positions and the ranges of dead pairs from the pool, in
    /// place (live ranges move down in pool order). Checking a position reads
    /// its slot, a cache miss: only the ranges of which at least an eighth is
    /// stale are checked, slot by slot; the others move whole, stale entries
    /// and all (so what stays stale is at most an eighth of the pool, below the
    /// quarter that starts a compaction).
    ///
    /// The checked ranges, cut into chunks, are first compacted each within
    /// itself on every thread (a chunk's positions move down inside the
    /// chunk), then every range moves down in pool order on one thread (a
    /// `memmove`, no miss). The live pairs are listed by entry number, so
    /// their infos are read and written without a probe of the index (at 2 GB
    /// a late compaction lists 5.4 M pairs; four probes a pair, and the checks
    /// on one thread, made the compactions ~a quarter of the late merges' time
    /// and ~2 s of the first thousand's).
    fn compact_pool(&mut self) {
        let entries = &mut self.pairs.entries;
        let mut live: Vec<(usize, u32)> =
            entries.iter().enumerate().filter(|(_, e)| e.key != FREE).map(|(i, e)| (e.info.off, i as u32)).collect();
        live.sort_unstable();
        // the checked ranges' chunks: (first entry, length, pair), in pool order
        let mut chunks: Vec<(usize, u32, u64)> = Vec::new();
        for &(off, i) in &live {
            let e = &entries[i as usize];
            let len = e.info.len as usize;
            if 8 * (len - e.info.live as usize) >= len {
                for from in (off..off + len).step_by(COMPACT_CHUNK) {
                    chunks.push((from, (off + len - from).min(COMPACT_CHUNK) as u32, e.key));
                }
            }
        }
        let slots = &self.slots[..];
        let pool = Arena::of(&mut self.pool);
        // each chunk's positions that are still occurrences, to its front
        let keep = |&(from, n, key): &(usize, u32, u64)| -> u32 {
            let (a, b) = unpack(key);
            let end = from + n as usize;
            let mut w = from;
            for j in from..end {
                if j + COMPACT_PREFETCH < end {
                    prefetch(slots, pool.get(j + COMPACT_PREFETCH) as usize);
                }
                let p = pool.get(j) as usize;
                let valid = slots[p] == a && {
                    let x = slots[p + 1];
                    let q = if x >= SEP {
                        None
                    } else if x >= SPAN {
                        Some(p + (x & MASK) as usize).filter(|&q| slots[q] < SEP)
                    } else {
                        Some(p + 1)
                    };
                    q.is_some_and(|q| slots[q] == b)
                };
                if valid {
                    pool.set(w, p as u32);
                    w += 1;
                }
            }
            (w - from) as u32
        };
        let checked: usize = chunks.iter().map(|c| c.1 as usize).sum();
        let kept: Vec<u32> = if rayon::current_num_threads() > 1 && checked >= PAR_MIN {
            chunks.par_iter().map(keep).collect()
        } else {
            chunks.iter().map(keep).collect()
        };
        let mut w = 0usize;
        let mut stale = 0usize;
        let mut next = chunks.iter().zip(kept);
        for (off, i) in live {
            let info = &mut entries[i as usize].info;
            let len = info.len as usize;
            let dead = len - info.live as usize;
            let new_off = w;
            if 8 * dead < len {
                self.pool.copy_within(off..off + len, w);
                w += len;
                stale += dead;
            } else {
                let mut left = len;
                while left > 0 {
                    let (&(from, n, _), k) = next.next().expect("a chunk of each checked range");
                    self.pool.copy_within(from..from + k as usize, w);
                    w += k as usize;
                    left -= n as usize;
                }
            }
            info.off = new_off;
            info.len = (w - new_off) as u32;
            debug_assert!(info.len == info.live || 8 * dead < len);
        }
        self.pool.truncate(w);
        self.stale = stale;
    }
}

/// Compaction checks the positions of a range in chunks of at most this many
/// (the chunks of every range are spread over the threads).
#[cfg(not(test))]
const COMPACT_CHUNK: usize = 1 << 16;
#[cfg(test)]
const COMPACT_CHUNK: usize = 3;

/// How many positions ahead compaction prefetches (a stream of independent
/// misses: the further, the more of them in flight).
const COMPACT_PREFETCH: usize = 24;

/// How many positions ahead `merge` prefetches.
const PREFETCH: usize = 8;

/// A hint to load the cache line of `v[i]`; no effect on the result.
#[inline(always)]
pub(super) fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if i < v.len() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching never faults and reads nothing; the pointer is in bounds anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(v.as_ptr().add(i) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// Merges over at least this many positions run on every thread of the pool.
#[cfg(not(test))]
const PAR_MIN: usize = 1 << 15;
#[cfg(test)]
const PAR_MIN: usize = 2;

/// The arena seen through relaxed atomics, so that the threads of a parallel
/// merge can rewrite their own pieces of it at once: each thread writes only
/// token slots of the pieces it owns and reads only those and separators,
/// which no merge writes. (Relaxed loads and stores of a `u32` are plain moves
/// on x86 and ARM: the sequential merge pays nothing for the shared view.)
#[derive(Clone, Copy)]
struct Arena<'a>(&'a [AtomicU32]);

impl<'a> Arena<'a> {
    fn of(v: &'a mut [u32]) -> Self {
        // SAFETY: AtomicU32 has the size and alignment of u32 (documented), and
        // the exclusive borrow of `v` for 'a leaves no other access to it.
        Arena(unsafe { &*(v as *mut [u32] as *const [AtomicU32]) })
    }

    #[inline(always)]
    fn get(self, i: usize) -> u32 {
        self.0[i].load(Relaxed)
    }

    #[inline(always)]
    fn set(self, i: usize, v: u32) {
        self.0[i].store(v, Relaxed)
    }

    /// A hint to load the cache line of slot `i`; no effect on the result.
    #[inline(always)]
    fn prefetch(self, i: usize) {
        prefetch(self.0, i)
    }

    /// The start of the token after the one starting at `p`, if in the same piece.
    #[inline(always)]
    fn next_start(self, p: usize) -> Option<usize> {
        let x = self.get(p + 1);
        if x >= SEP {
            None
        } else if x >= SPAN {
            let q = p + (x & MASK) as usize;
            if self.get(q) >= SEP {
                None
            } else {
                Some(q)
            }
        } else {
            Some(p + 1)
        }
    }

    /// The start of the token before the one starting at `p`, if in the same piece.
    #[inline(always)]
    fn prev_start(self, p: usize) -> Option<usize> {
        let x = self.get(p - 1);
        if x >= SEP {
            None
        } else if x >= SPAN {
            Some(p - (x & MASK) as usize)
        } else {
            Some(p - 1)
        }
    }

    /// Slots covered by the token starting at `p`.
    #[inline(always)]
    fn span(self, p: usize) -> usize {
        let x = self.get(p + 1);
        if (SPAN..SEP).contains(&x) {
            (x & MASK) as usize
        } else {
            1
        }
    }

    /// The count of the piece holding the token that starts at `p`: walk to
    /// its separators (at most `LONG` tokens), else look it up among the long
    /// pieces.
    #[inline(always)]
    fn count_at(self, long: &[(u32, u64)], p: usize) -> u64 {
        let at = |e: usize| ((self.get(e) & MASK) as u64) << 30 | (self.get(e + 1) & MASK) as u64;
        let mut t = p;
        for _ in 0..=LONG {
            let x = self.get(t + 1);
            if x >= SEP {
                return at(t + 1);
            }
            t += if x >= SPAN { (x & MASK) as usize } else { 1 };
            if self.get(t) >= SEP {
                return at(t);
            }
        }
        let i = long.partition_point(|&(start, _)| start as usize <= p);
        long[i - 1].1
    }

    /// The first slot of the piece holding slot `p`.
    fn piece_start(self, long: &[(u32, u64)], p: usize) -> usize {
        // a piece of at most LONG slots starts within LONG slots back
        for k in 0..LONG.min(p) {
            if self.get(p - k - 1) >= SEP {
                return p - k;
            }
        }
        let i = long.partition_point(|&(start, _)| start as usize <= p);
        long[i - 1].0 as usize
    }

    /// `positions` (ascending) cut into `n` shares of about equal length, each
    /// cut moved to the start of a piece, so that no piece has positions in
    /// two shares.
    fn cut<'p>(self, long: &[(u32, u64)], positions: &'p [u32], n: usize) -> Vec<&'p [u32]> {
        let mut shares = Vec::with_capacity(n);
        let mut from = 0;
        for k in 1..n {
            let s = self.piece_start(long, positions[positions.len() * k / n] as usize);
            let to = from + positions[from..].partition_point(|&p| (p as usize) < s);
            shares.push(&positions[from..to]);
            from = to;
        }
        shares.push(&positions[from..]);
        shares
    }
}

/// A pair created by the merge under way.
struct Fresh {
    key: u64,
    count: i64,
    last: u32,
    n: u32,
    live: u32,
}

/// The pairs one walk creates, and their positions in the order it met them.
///
/// A merge of (a, b) into z makes only pairs (x, z) and (z, y), so they are
/// found by the other id in two arrays indexed by token id (one load each,
/// where a hash map probe hashes the key and compares it; ~2 of every 3
/// lookups of a merge's walk went to such maps). The arrays are sized to the
/// ids (4 bytes each, 2 x 131 kB at 32,768 ids), kept between merges and
/// cleared entry by entry through `fresh`, so a merge pays for what it touches.
#[derive(Default)]
struct Fresher {
    /// The new id of the merge under way.
    z: u32,
    /// `left[x]`: 1 + the index in `fresh` of (x, z); 0: not made yet.
    left: Vec<u32>,
    /// `right[y]`: 1 + the index in `fresh` of (z, y); 0: not made yet.
    right: Vec<u32>,
    fresh: Vec<Fresh>,
    /// (index in `fresh`, position)
    pos: Vec<(u32, u32)>,
}

impl Fresher {
    /// Ready for the merge that makes `z` (every id is at most `z`).
    fn begin(&mut self, z: u32) {
        debug_assert!(self.fresh.is_empty() && self.pos.is_empty());
        self.z = z;
        let n = z as usize + 1;
        if self.left.len() < n {
            self.left.resize(n, 0);
            self.right.resize(n, 0);
        }
    }

    /// (x, z) gains an occurrence of weight `w` at `pos`; its index in `fresh`.
    #[inline(always)]
    fn add_left(&mut self, x: u32, w: i64, pos: u32) -> u32 {
        let mut i = self.left[x as usize];
        if i == 0 {
            i = self.make(pack(x, self.z));
            self.left[x as usize] = i;
        }
        self.gain(i - 1, w, pos);
        i - 1
    }

    /// (z, y) gains an occurrence of weight `w` at `pos`; its index in `fresh`.
    #[inline(always)]
    fn add_right(&mut self, y: u32, w: i64, pos: u32) -> u32 {
        let mut i = self.right[y as usize];
        if i == 0 {
            i = self.make(pack(self.z, y));
            self.right[y as usize] = i;
        }
        self.gain(i - 1, w, pos);
        i - 1
    }

    /// A new entry of `fresh` for `key`: 1 + its index.
    #[inline(always)]
    fn make(&mut self, key: u64) -> u32 {
        self.fresh.push(Fresh { key, count: 0, last: NO_POS, n: 0, live: 0 });
        self.fresh.len() as u32
    }

    #[inline(always)]
    fn gain(&mut self, i: u32, w: i64, pos: u32) {
        let f = &mut self.fresh[i as usize];
        f.count += w;
        if f.last != pos {
            f.last = pos;
            f.n += 1;
            f.live += 1;
            self.pos.push((i, pos));
        }
    }

    /// The index in `fresh` of (z, y), made earlier in this walk.
    #[inline(always)]
    fn right_of(&self, y: u32) -> u32 {
        let i = self.right[y as usize];
        debug_assert!(i > 0, "(z, y) was made by the previous occurrence");
        i - 1
    }

    fn clear(&mut self) {
        let z = self.z;
        for f in &self.fresh {
            let (x, y) = unpack(f.key);
            if y == z {
                self.left[x as usize] = 0;
            }
            if x == z {
                self.right[y as usize] = 0;
            }
        }
        self.fresh.clear();
        self.pos.clear();
    }
}

/// What a walk does to the pairs that existed before the merge of (a, b):
/// the pair itself, (x, a) on the left and (b, y) on the right lose
/// occurrences.
trait Sink {
    /// The weight of an occurrence at `p` in a piece counted `c`, and its language.
    fn weigh(&mut self, p: usize, c: u64) -> (i64, u32);
    /// One occurrence of the merged pair `key`, of weight `w`, is gone.
    fn lose_pair(&mut self, key: u64, w: i64, lang: u32);
    /// One occurrence of `key` = (x, a) is gone.
    fn lose_left(&mut self, x: u32, key: u64, w: i64, lang: u32);
    /// One occurrence of `key` = (b, y) is gone.
    fn lose_right(&mut self, y: u32, key: u64, w: i64, lang: u32);
    /// Parity: the new pair at index `i` of the walk's list changes by `w`
    /// in `lang` (NO_LANG: no language's training count), gains the
    /// occurrence (`up`) or loses it (its dev count, which `w` may not show).
    fn fresh(&mut self, lang: u32, i: u32, w: i64, up: bool);
}

/// Parity training's walk: plain training's sums of what the existing pairs
/// lose ([`Lost`]), the same sums per language and the new pairs' gains per
/// language in the parity state ([`Parity::lose_left`] and the next ones),
/// and each occurrence's dev tokens off its language's count.
struct LangLost<'a> {
    lost: &'a mut Lost,
    par: &'a mut Parity,
    /// The devlift rule: the dev count of the occurrence the walk is at
    /// (set by its weighing; every pair it touches changes by it, whether or
    /// not the occurrence weighs in the training counts).
    dev: i64,
}

impl Sink for LangLost<'_> {
    #[inline(always)]
    fn weigh(&mut self, p: usize, c: u64) -> (i64, u32) {
        // the occurrence's weight in the training counts, and its language
        // (its training count weighs, its dev count shortens its language's
        // dev text; a piece only in dev text weighs 0)
        let l = self.par.lang_at(p);
        let (t, dev) = split_counts(c);
        self.par.dev_tokens[l] -= dev;
        self.dev = dev as i64;
        (t as i64, if t > 0 { l as u32 } else { NO_LANG })
    }

    #[inline(always)]
    fn lose_pair(&mut self, key: u64, w: i64, lang: u32) {
        // (the devlift rule: the merged pair's dev count is dropped whole)
        self.lost.lose_pair(key, w, lang);
        if lang != NO_LANG {
            self.par.lose_pair(lang, w);
        }
    }

    #[inline(always)]
    fn lose_left(&mut self, x: u32, key: u64, w: i64, lang: u32) {
        self.lost.lose_left(x, key, w, lang);
        if lang != NO_LANG {
            self.par.lose_left(x, lang, w);
        }
        if self.par.track_dev {
            self.par.dev_left(x, self.dev);
        }
    }

    #[inline(always)]
    fn lose_right(&mut self, y: u32, key: u64, w: i64, lang: u32) {
        self.lost.lose_right(y, key, w, lang);
        if lang != NO_LANG {
            self.par.lose_right(y, lang, w);
        }
        if self.par.track_dev {
            self.par.dev_right(y, self.dev);
        }
    }

    #[inline(always)]
    fn fresh(&mut self, lang: u32, i: u32, w: i64, up: bool) {
        if lang != NO_LANG {
            self.par.gain(i, lang, w);
        }
        if self.par.track_dev {
            self.par.dev_gain(i, if up { self.dev } else { -self.dev });
        }
    }
}

/// Plain training's merge (one walk per thread): what the existing pairs
/// lose, summed per pair -- (weight, occurrences) -- and applied to the index
/// once the walks are done ([`apply_lost`]). The pair index is a
/// hash table of millions of pairs, a cache miss a probe; summing first in
/// arrays indexed by the other id probes it once per distinct neighbour
/// instead of once per occurrence (a late merge's few thousand occurrences
/// have a few hundred distinct neighbours).
#[derive(Default)]
struct Lost {
    /// The merged pair itself.
    pair: (i64, u32),
    /// `left[x]`: what (x, a) lost; `right[y]`: what (b, y) lost.
    left: Vec<(i64, u32)>,
    right: Vec<(i64, u32)>,
    /// The ids whose entry is not (0, 0), each once.
    left_ids: Vec<u32>,
    right_ids: Vec<u32>,
}

impl Lost {
    /// Ready for the merge that makes `z` (every id is below it).
    fn begin(&mut self, z: u32) {
        let n = z as usize + 1;
        if self.left.len() < n {
            self.left.resize(n, (0, 0));
            self.right.resize(n, (0, 0));
        }
    }

    /// Add `other`'s losses to these (and clear `other`).
    fn absorb(&mut self, other: &mut Lost) {
        self.pair.0 += other.pair.0;
        self.pair.1 += other.pair.1;
        other.pair = (0, 0);
        for x in other.left_ids.drain(..) {
            let (w, n) = std::mem::take(&mut other.left[x as usize]);
            tally(&mut self.left, &mut self.left_ids, x, w, n);
        }
        for y in other.right_ids.drain(..) {
            let (w, n) = std::mem::take(&mut other.right[y as usize]);
            tally(&mut self.right, &mut self.right_ids, y, w, n);
        }
    }
}

/// `n` occurrences of weight `w` in all more at `v[i]` (`ids` lists the
/// entries in use).
#[inline(always)]
fn tally(v: &mut [(i64, u32)], ids: &mut Vec<u32>, i: u32, w: i64, n: u32) {
    let e = &mut v[i as usize];
    if e.1 == 0 {
        ids.push(i);
    }
    e.0 += w;
    e.1 += n;
}

impl Sink for Lost {
    #[inline(always)]
    fn weigh(&mut self, _p: usize, c: u64) -> (i64, u32) {
        (c as i64, NO_LANG)
    }

    #[inline(always)]
    fn lose_pair(&mut self, _key: u64, w: i64, _lang: u32) {
        self.pair.0 += w;
        self.pair.1 += 1;
    }

    #[inline(always)]
    fn lose_left(&mut self, x: u32, _key: u64, w: i64, _lang: u32) {
        tally(&mut self.left, &mut self.left_ids, x, w, 1);
    }

    #[inline(always)]
    fn lose_right(&mut self, y: u32, _key: u64, w: i64, _lang: u32) {
        tally(&mut self.right, &mut self.right_ids, y, w, 1);
    }

    #[inline(always)]
    fn fresh(&mut self, _lang: u32, _i: u32, _w: i64, _up: bool) {}
}

/// Merge `pair` = (a, b) into z at each of `positions` that is still an
/// occurrence of it: the slots are rewritten, the neighbours' pairs lose the
/// occurrence (`sink`) and the new pairs with z gain it (`fr`).
fn walk<S: Sink>(
    arena: Arena,
    long: &[(u32, u64)],
    positions: &[u32],
    (a, b, z): (u32, u32, u32),
    pair: u64,
    sink: &mut S,
    fr: &mut Fresher,
) {
    for (j, &p) in positions.iter().enumerate() {
        // The positions are scattered over the arena: ask for the slots of
        // one a few steps ahead (a cache miss each, else the loop's main cost).
        if let Some(&ahead) = positions.get(j + PREFETCH) {
            arena.prefetch(ahead as usize);
        }
        let p = p as usize;
        if arena.get(p) != a {
            continue;
        }
        let Some(q) = arena.next_start(p) else { continue };
        if arena.get(q) != b {
            continue;
        }
        let (w, lang) = sink.weigh(p, arena.count_at(long, p));
        let x = arena.prev_start(p);
        let r = arena.next_start(q);
        let s = (q - p + arena.span(q)) as u32;
        // the occurrence itself
        sink.lose_pair(pair, w, lang);
        if let Some(x) = x {
            let xi = arena.get(x);
            if xi == z {
                // (z, a) was made by the previous occurrence
                let i = fr.right_of(a);
                let f = &mut fr.fresh[i as usize];
                f.count -= w;
                f.live -= 1;
                sink.fresh(lang, i, -w, false);
            } else {
                sink.lose_left(xi, pack(xi, a), w, lang);
            }
            let i = fr.add_left(xi, w, x as u32);
            sink.fresh(lang, i, w, true);
        }
        if let Some(r) = r {
            let yi = arena.get(r);
            sink.lose_right(yi, pack(b, yi), w, lang);
            let i = fr.add_right(yi, w, p as u32);
            sink.fresh(lang, i, w, true);
        }
        arena.set(q, SPAN | s);
        arena.set(p, z);
        arena.set(p + 1, SPAN | s);
        arena.set(p + s as usize - 1, SPAN | s);
    }
}

/// What the walks of the merge of (a, b) took from the existing pairs, pair
/// by pair (a pair with no occurrence left leaves the index; with parity, its
/// row of language counts loses what the walk summed per language first);
/// `lost` is cleared.
fn apply_lost(
    pairs: &mut PairIndex,
    stale: &mut usize,
    lost: &mut Lost,
    (a, b): (u32, u32),
    mut parity: Option<&mut Parity>,
) {
    let mut take = |pairs: &mut PairIndex, key: u64, (w, dead): (i64, u32), at: Lose| {
        let (slot, info) = pairs.slot_mut(key).expect("a live occurrence's pair is counted");
        info.count -= w;
        info.live -= dead;
        *stale += dead as usize;
        let gone = info.live == 0;
        if let Some(par) = parity.as_deref_mut() {
            par.apply_loss(slot, at);
        }
        if gone {
            // every position of it is stale now, and counted so
            debug_assert_eq!(pairs.get(key).map(|i| i.count), Some(0));
            pairs.remove(key);
        }
    };
    // Each (x, a) and (b, y) at most once (they may be one pair, or the
    // merged pair itself: a pair's losses then come in parts, each of at
    // least one occurrence, so none of them leaves it without any).
    for left in [true, false] {
        let (ids, by) =
            if left { (&mut lost.left_ids, &mut lost.left) } else { (&mut lost.right_ids, &mut lost.right) };
        let key = |o: u32| if left { pack(o, a) } else { pack(b, o) };
        for (j, &o) in ids.iter().enumerate() {
            pairs.prefetch_ahead(ids, j, key);
            let at = if left { Lose::Left(o) } else { Lose::Right(o) };
            take(pairs, key(o), std::mem::take(&mut by[o as usize]), at);
        }
        ids.clear();
    }
    if lost.pair.1 > 0 {
        take(pairs, pack(a, b), std::mem::take(&mut lost.pair), Lose::Pair);
    }
}

/// Setup's table of pairs (their counts, then their cursors into the pool).
/// While the ids are few (training from bytes: 256) it is an array indexed
/// by the pair -- one load per slot of the arena, where a hash table hashes,
/// probes and compares (setup's two passes were ~2/3 hash-table work);
/// otherwise a hash table.
enum PairTable {
    /// `v[a * ids + b]`: the pair (a, b) (`len` 0: absent).
    Dense {
        ids: usize,
        v: Vec<PairInfo>,
    },
    Hash(FxHashMap<u64, PairInfo>),
}

/// The dense table's largest number of ids (512: 262,144 pairs, 6 MB).
const DENSE_IDS: u32 = 512;

impl PairTable {
    fn new(ids: u32) -> Self {
        if ids <= DENSE_IDS {
            let ids = ids as usize;
            PairTable::Dense { ids, v: vec![PairInfo::default(); ids * ids] }
        } else {
            PairTable::Hash(FxHashMap::default())
        }
    }

    #[inline(always)]
    fn entry(&mut self, key: u64) -> &mut PairInfo {
        match self {
            PairTable::Dense { ids, v } => {
                let (a, b) = unpack(key);
                &mut v[a as usize * *ids + b as usize]
            }
            PairTable::Hash(m) => m.entry(key).or_default(),
        }
    }

    /// Every pair in it.
    fn each(&mut self, mut f: impl FnMut(u64, &mut PairInfo)) {
        match self {
            PairTable::Dense { ids, v } => {
                for (i, info) in v.iter_mut().enumerate() {
                    if info.len > 0 {
                        f(pack((i / *ids) as u32, (i % *ids) as u32), info);
                    }
                }
            }
            PairTable::Hash(m) => m.iter_mut().for_each(|(&k, i)| f(k, i)),
        }
    }

    fn into_index(self) -> PairIndex {
        match self {
            PairTable::Dense { ids, v } => {
                let mut m = PairIndex::with_capacity(v.iter().filter(|i| i.len > 0).count());
                for (i, info) in v.into_iter().enumerate() {
                    if info.len > 0 {
                        m.insert(pack((i / ids) as u32, (i % ids) as u32), info);
                    }
                }
                m
            }
            PairTable::Hash(t) => {
                let mut m = PairIndex::with_capacity(t.len());
                for (k, info) in t {
                    m.insert(k, info);
                }
                m
            }
        }
    }
}

/// Setup's pass 1 over the whole pieces of `slots[from..to]` (ids below
/// `ids`): every adjacent pair's weighted count and number of positions;
/// `weigh(p, key, count)` is the weight of the occurrence at `p` of `key` in
/// a piece counted `count`.
fn count_pairs(
    slots: &[u32],
    (from, to): (usize, usize),
    ids: u32,
    mut weigh: impl FnMut(usize, u64, u64) -> i64,
) -> PairTable {
    let mut pairs = PairTable::new(ids);
    let mut p = from;
    let mut c = 0u64;
    while p < to {
        if p == from || slots[p - 1] >= SEP {
            // a piece starts: its count is after its end
            let mut e = p;
            while slots[e] < SEP {
                e += 1;
            }
            c = ((slots[e] & MASK) as u64) << 30 | (slots[e + 1] & MASK) as u64;
        }
        let x = slots[p + 1];
        if x >= SEP {
            p += 3;
            continue;
        }
        let key = pack(slots[p], x);
        let w = weigh(p, key, c);
        let info = pairs.entry(key);
        info.count += w;
        info.len += 1;
        p += 1;
    }
    pairs
}

/// Setup's pass 2 over the same range: each pair's positions into `pool` from
/// its cursor (`off`, advanced past them).
fn place_pairs(slots: &[u32], (from, to): (usize, usize), cursors: &mut PairTable, pool: Arena) {
    let mut p = from;
    while p < to {
        let x = slots[p + 1];
        if x >= SEP {
            p += 3;
            continue;
        }
        let info = cursors.entry(pack(slots[p], x));
        debug_assert!(info.len > 0, "counted in pass 1");
        pool.set(info.off, p as u32);
        info.off += 1;
        p += 1;
    }
}

fn check_ids(next_id: u32, num_merges: usize) -> Result<()> {
    if next_id as u64 + num_merges as u64 > SPAN as u64 {
        return Err(Error::Invalid(format!(
            "training supports ids below {SPAN}; {next_id} + {num_merges} merges go beyond"
        )));
    }
    Ok(())
}

impl Trainer {
    /// The one setup of a training run, whoever asks (the Python trainer,
    /// [`train_texts`], the growing vocabulary): the counted pieces of
    /// `counter` become ids through `byte_ids`, then the earlier `merges` are
    /// applied to them (pairs rule, lowest id first); the bytes of every id
    /// below `next_id` seed the tie-break table, and `num_merges` new merges
    /// will get ids from `next_id`. The counter is consumed; its pieces are
    /// laid out in byte order (pieces that share a prefix sit together, so a
    /// pair's positions are less scattered: ~20% faster merges than hash order).
    /// Runs on the current rayon pool.
    pub fn from_counter(
        counter: WordCounter,
        byte_ids: &[u32; 256],
        merges: &[(u32, u32, u32)],
        next_id: u32,
        num_merges: usize,
        tie: TieBreak,
        min_frequency: u64,
    ) -> Result<Self> {
        check_ids(next_id, num_merges)?;
        let model = BpeModel::new(byte_ids, merges, vec![], Pretokenizer::Whole, MergeRule::Pairs)?;
        let tokens: Vec<Vec<u8>> =
            (0..next_id).map(|i| model.id_bytes(i).map(|x| x.to_vec()).unwrap_or_default()).collect();
        let lay = if merges.is_empty() {
            let sorted = counter.into_sorted_pieces();
            let lay = Layout::of_parts(&sorted.parts(rayon::current_num_threads()), byte_ids, next_id)?;
            drop(sorted);
            lay
        } else {
            let slots_hint: usize = counter.pieces().filter(|(w, _)| w.len() >= 2).map(|(w, _)| w.len() + 2).sum();
            let sorted = counter.into_sorted_pieces();
            let mut lay = Layout::new(slots_hint.min(NO_POS as usize));
            // earlier merges applied in parallel, a batch of pieces at a time
            const BATCH: usize = 1 << 14;
            let mut it = sorted.iter();
            loop {
                let batch: Vec<(&[u8], u64)> = it.by_ref().take(BATCH).collect();
                if batch.is_empty() {
                    break;
                }
                let encoded: Vec<(Vec<u32>, u64)> = batch
                    .par_iter()
                    .map(|(w, c)| {
                        let mut out = Vec::with_capacity(w.len());
                        model.encode_piece(w, &mut out);
                        (out, *c)
                    })
                    .collect();
                drop(batch);
                for (w, c) in &encoded {
                    lay.push(w, *c, next_id)?;
                }
            }
            lay
        };
        crate::wordcount::release_free_memory();
        Ok(Trainer::from_layout(lay, tokens, next_id, num_merges, tie, min_frequency, None))
    }

    /// Parity-aware training (`super::parity`): `train[l]` and `dev[l]` count
    /// language `l`'s training and dev text (same split pattern; consumed);
    /// bytes become ids through `byte_ids`; `num_merges` merges get ids from
    /// `next_id`, the first `global_merges` of them picked by the plain rule;
    /// `measure` says how dev compression is compared across languages, or
    /// `norms` gives each language's dev text size in any unit common to all
    /// (e.g. the bytes of the same content in a reference language);
    /// `window` = (length, alpha) turns on the moving-window variant (length 0: off). Every
    /// language needs training text with a pair in it and dev text. Runs on
    /// the current rayon pool; the merges do not depend on its size.
    #[allow(clippy::too_many_arguments)]
    pub fn parity_from_counters(
        train: Vec<WordCounter>,
        dev: Vec<WordCounter>,
        byte_ids: &[u32; 256],
        next_id: u32,
        num_merges: usize,
        tie: TieBreak,
        min_frequency: u64,
        global_merges: usize,
        measure: Measure,
        norms: Option<Vec<u64>>,
        window: (usize, f64),
    ) -> Result<Self> {
        check_ids(next_id, num_merges)?;
        if window.0 > 0 && !(window.1.is_finite() && window.1 > 0.0) {
            return Err(Error::Invalid(format!("the parity window's alpha must be above 0, not {}", window.1)));
        }
        if train.is_empty() || train.len() != dev.len() {
            return Err(Error::Invalid(format!(
                "parity training needs one training and one dev counter per language (got {} and {})",
                train.len(),
                dev.len()
            )));
        }
        for (l, (t, d)) in train.iter().zip(&dev).enumerate() {
            if !t.pieces().any(|(w, _)| w.len() >= 2) {
                return Err(Error::Invalid(format!(
                    "language {l} has no training text with two bytes in one piece (nothing to merge)"
                )));
            }
            if d.unique() == 0 {
                return Err(Error::Invalid(format!("language {l} has no dev text")));
            }
        }
        let norms: Vec<u64> = match norms {
            None => dev.iter().map(|d| measure.norm(d.pieces())).collect(),
            Some(n) if n.len() == dev.len() && n.iter().all(|&x| x > 0) => n,
            Some(n) => {
                return Err(Error::Invalid(format!(
                    "parity norms: expected {} numbers above zero, one per language, not {n:?}",
                    dev.len()
                )))
            }
        };
        let dev_tokens: Vec<u64> = dev.iter().map(|d| d.pieces().map(|(w, c)| w.len() as u64 * c).sum()).collect();
        let tokens: Vec<Vec<u8>> = (0..next_id)
            .map(|i| byte_ids.iter().position(|&b| b == i).map(|b| vec![b as u8]).unwrap_or_default())
            .collect();
        let slots_hint: usize = train
            .iter()
            .chain(&dev)
            .map(|c| c.pieces().filter(|(w, _)| w.len() >= 2).map(|(w, _)| w.len() + 2).sum::<usize>())
            .sum();
        let mut lay = Layout::new(slots_hint.min(NO_POS as usize));
        let mut seg_start = Vec::with_capacity(train.len() + 1);
        let mut ids: Vec<u32> = Vec::new();
        for (tc, dc) in train.into_iter().zip(dev) {
            seg_start.push(lay.slots.len() as u32);
            // the language's pieces, training and dev, each once with both counts
            // (both lists sorted by bytes: one merge-join; read in place, not
            // copied out piece by piece as boxes, which cost more than the sorts)
            let (tw, dw) = (tc.into_sorted_pieces(), dc.into_sorted_pieces());
            let (mut ti, mut di) = (tw.iter().peekable(), dw.iter().peekable());
            loop {
                let (w, t, d) = match (ti.peek(), di.peek()) {
                    (Some(&a), Some(&b)) if a.0 == b.0 => {
                        ti.next();
                        di.next();
                        (a.0, a.1, b.1)
                    }
                    (Some(&a), Some(&b)) if a.0 < b.0 => {
                        ti.next();
                        (a.0, a.1, 0)
                    }
                    (Some(&a), None) => {
                        ti.next();
                        (a.0, a.1, 0)
                    }
                    (_, Some(&b)) => {
                        di.next();
                        (b.0, 0, b.1)
                    }
                    (None, None) => break,
                };
                ids.clear();
                ids.extend(w.iter().map(|&x| byte_ids[x as usize]));
                // each count below 2^30 in its slot: a piece counted more is laid out
                // as copies (BPE merges them alike; their counts add up)
                let part = MASK as u64;
                let copies = t.div_ceil(part).max(d.div_ceil(part));
                if copies > MAX_COPIES {
                    return Err(Error::Invalid(format!(
                        "a piece is counted {} times in one language's text; parity training supports fewer than {}",
                        t.max(d),
                        MAX_COPIES * part + 1
                    )));
                }
                for k in 0..copies {
                    let tk = t.saturating_sub(k * part).min(part);
                    let dk = d.saturating_sub(k * part).min(part);
                    lay.push(&ids, tk << 30 | dk, next_id)?;
                }
            }
        }
        seg_start.push(lay.slots.len() as u32);
        let mut parity = Parity::new(seg_start, dev_tokens, norms, global_merges);
        parity.set_window(window.0, window.1);
        Ok(Trainer::from_layout(lay, tokens, next_id, num_merges, tie, min_frequency, Some(Box::new(parity))))
    }

    /// Parity training's tolerance and shared-pair variants
    /// (`super::parity`; 0 leaves each off): `tolerance` >= 0, `shared` 0 or
    /// >= 1. Call before the first merge; plain training refuses.
    pub fn set_parity_rule(&mut self, tolerance: f64, shared: f64, rule: Rule) -> Result<()> {
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(Error::Invalid(format!(
                "the parity tolerance must be a number >= 0 (0: off), not {tolerance}"
            )));
        }
        if !(shared.is_finite() && (shared == 0.0 || shared >= 1.0)) {
            return Err(Error::Invalid(format!(
                "the parity shared factor must be 0 (off) or a number >= 1, not {shared}"
            )));
        }
        match self.parity.as_deref_mut() {
            Some(par) if self.merges.is_empty() => {
                if matches!(rule, Rule::Excess { .. }) && (tolerance > 0.0 || shared > 0.0 || par.window > 0) {
                    return Err(Error::Invalid(
                        "the excess rule takes no tolerance, shared factor or window (its knob is the gain)".into(),
                    ));
                }
                let banded = match rule {
                    Rule::Discount { .. } => Some("discount"),
                    Rule::Lift { dev: false, .. } => Some("lift"),
                    Rule::Lift { dev: true, .. } => Some("devlift"),
                    _ => None,
                };
                if let Some(name) = banded.filter(|_| shared < 1.0) {
                    return Err(Error::Invalid(format!(
                        "the {name} rule needs a shared factor >= 1 (the band it picks from), not {shared}"
                    )));
                }
                if matches!(rule, Rule::Lift { dev: true, .. }) {
                    // devlift: every pair's dev count, from the arena as laid out
                    // (no merge yet), as the setup counted the training counts
                    let whole = (1, self.slots.len().max(1));
                    let mut dev = count_pairs(&self.slots, whole, self.next_id, |_, _, c| split_counts(c).1 as i64);
                    let mut dev_pairs: Vec<(u64, i64)> = Vec::new();
                    dev.each(|key, i| {
                        if i.count > 0 {
                            dev_pairs.push((key, i.count));
                        }
                    });
                    drop(dev);
                    par.set_dev_counts(&self.pairs, dev_pairs.into_iter());
                }
                if matches!(rule, Rule::Group { .. }) && shared < 1.0 {
                    return Err(Error::Invalid(format!(
                        "the group rule needs a shared factor >= 1 (its candidates' band), not {shared}"
                    )));
                }
                par.set_rule(tolerance, shared, rule);
                Ok(())
            }
            Some(_) => Err(Error::Invalid("the parity rule cannot change after training started".into())),
            None => Err(Error::Invalid("set_parity_rule needs a parity trainer".into())),
        }
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
    use crate::pretok::{GPT4_PATTERN, O200K_PATTERN};

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
                    // equal bytes (two merge paths to one string): the smaller ids
                    TieBreak::Lexicographic => (&tokens[x.0 .0 as usize], &tokens[x.0 .1 as usize])
                        .cmp(&(&tokens[y.0 .0 as usize], &tokens[y.0 .1 as usize]))
                        .then_with(|| y.0.cmp(x.0)),
                })
            });
            let Some((&(a, b), _)) = best else { break };
            let z = first + k as u32;
            out.push((a, b, z));
            let mut t = tokens[a as usize].clone();
            t.extend_from_slice(&tokens[b as usize]);
            tokens.push(t);
            apply(&mut words, a, b, z);
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

    /// Setup's pair table is a hash table when the ids are many (here 700:
    /// above `DENSE_IDS`, as after earlier merges), on 1 to 3 threads.
    #[test]
    fn many_ids_setup() {
        let texts = ["hello hello world, aaaa abab", "the cat sat on the mat"];
        let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
        wc.add_texts(&texts).unwrap();
        let words: Vec<(Vec<u32>, u64)> =
            wc.into_sorted().into_iter().map(|(w, c)| (w.iter().map(|&b| b as u32).collect(), c)).collect();
        let mut tokens: Vec<Vec<u8>> = (0..256).map(|b| vec![b as u8]).collect();
        tokens.resize(700, Vec::new());
        let want = naive(&words, &tokens, 700, 25, TieBreak::PairIds);
        assert_eq!(want.len(), 25);
        for threads in 1..=3 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| {
                let mut t = Trainer::new(words.clone(), tokens.clone(), 700, 25, TieBreak::PairIds, 1).unwrap();
                assert!(matches!(PairTable::new(700), PairTable::Hash(_)));
                t.run(usize::MAX, None);
                t.merges().to_vec()
            });
            assert_eq!(got, want);
        }
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

    type Words = Vec<(Vec<u32>, u64)>;

    fn apply(words: &mut Words, a: u32, b: u32, z: u32) {
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

    fn best_pair(words: &[&Words], tokens: &[Vec<u8>], tie: TieBreak) -> Option<((u32, u32), u64)> {
        let mut counts: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
        for ws in words {
            for (w, c) in ws.iter() {
                for x in w.windows(2) {
                    *counts.entry((x[0], x[1])).or_default() += c;
                }
            }
        }
        counts.into_iter().max_by(|x, y| {
            x.1.cmp(&y.1).then_with(|| match tie {
                TieBreak::PairIds => y.0.cmp(&x.0),
                TieBreak::Lexicographic => (&tokens[x.0 .0 as usize], &tokens[x.0 .1 as usize])
                    .cmp(&(&tokens[y.0 .0 as usize], &tokens[y.0 .1 as usize]))
                    .then_with(|| y.0.cmp(&x.0)),
            })
        })
    }

    /// Naive parity-aware BPE: recount every pair of every language at every step.
    #[allow(clippy::too_many_arguments)]
    fn naive_parity(
        mut train: Vec<Words>,
        mut dev: Vec<Words>,
        norms: &[u64],
        n: usize,
        tie: TieBreak,
        global: usize,
        min_frequency: u64,
        window: (usize, f64),
    ) -> (Vec<(u32, u32, u32)>, Vec<u32>) {
        let mut tokens: Vec<Vec<u8>> = (0..256).map(|b| vec![b as u8]).collect();
        let (mut out, mut chosen) = (vec![], vec![]);
        let mut exhausted = vec![false; train.len()];
        let nl = train.len();
        // over the window: picked for more than alpha / L of the last `window` parity merges
        let over = |chosen: &[u32], l: usize| {
            let recent: Vec<u32> = chosen.iter().copied().filter(|&c| c != GLOBAL).collect();
            let last = &recent[recent.len().saturating_sub(window.0)..];
            window.0 > 0
                && last.iter().filter(|&&c| c == l as u32).count() as f64 / window.0 as f64 > window.1 / nl as f64
        };
        for k in 0..n {
            let pick = if k < global {
                let all: Vec<&Words> = train.iter().collect();
                match best_pair(&all, &tokens, tie) {
                    Some((p, c)) if c >= min_frequency => Some((p, GLOBAL)),
                    _ => None,
                }
            } else {
                let mut got = None;
                loop {
                    let dt: Vec<u64> = dev.iter().map(|d| d.iter().map(|(w, c)| w.len() as u64 * c).sum()).collect();
                    let mut worst: Option<usize> = None;
                    let any_under = (0..nl).any(|l| !exhausted[l] && !over(&chosen, l));
                    for l in 0..train.len() {
                        if exhausted[l] || (any_under && over(&chosen, l)) {
                            continue;
                        }
                        if worst.is_none_or(|b| dt[l] as u128 * norms[b] as u128 > dt[b] as u128 * norms[l] as u128) {
                            worst = Some(l);
                        }
                    }
                    let Some(l) = worst else { break };
                    match best_pair(&[&train[l]], &tokens, tie) {
                        Some((p, c)) if c >= min_frequency => {
                            got = Some((p, l as u32));
                            break;
                        }
                        _ => exhausted[l] = true,
                    }
                }
                got
            };
            let Some(((a, b), l)) = pick else { break };
            let z = 256 + k as u32;
            out.push((a, b, z));
            chosen.push(l);
            let mut t = tokens[a as usize].clone();
            t.extend_from_slice(&tokens[b as usize]);
            tokens.push(t);
            for ws in train.iter_mut().chain(dev.iter_mut()) {
                apply(ws, a, b, z);
            }
        }
        (out, chosen)
    }

    fn counters(texts: &[Vec<&str>], pt: &Pretokenizer) -> Vec<WordCounter> {
        texts
            .iter()
            .map(|t| {
                let mut wc = WordCounter::new(pt.clone());
                wc.add_texts(t).unwrap();
                wc
            })
            .collect()
    }

    fn words_of(wc: WordCounter) -> Words {
        wc.into_sorted().into_iter().map(|(w, c)| (w.iter().map(|&b| b as u32).collect(), c)).collect()
    }

    /// The trained `t` made the naive trainer's merges for the same languages
    /// (and picked the same language for each), and the dev token counts it
    /// kept equal the dev text under its merges; returns the merges.
    #[allow(clippy::too_many_arguments)]
    fn same_as_naive(
        t: &Trainer,
        tw: Vec<Words>,
        dw: Vec<Words>,
        norms: &[u64],
        n: usize,
        tie: TieBreak,
        global: usize,
        min_frequency: u64,
        window: (usize, f64),
    ) -> Vec<(u32, u32, u32)> {
        let (slow, chosen) = naive_parity(tw, dw.clone(), norms, n, tie, global, min_frequency, window);
        assert_eq!(t.merges(), &slow[..]);
        assert_eq!(t.merge_languages().unwrap(), &chosen[..]);
        let mut dw = dw;
        for &(a, b, z) in t.merges() {
            for ws in dw.iter_mut() {
                apply(ws, a, b, z);
            }
        }
        let summary = t.parity_summary().unwrap();
        for (l, ws) in dw.iter().enumerate() {
            assert_eq!(summary[l].1, ws.iter().map(|(w, c)| w.len() as u64 * c).sum::<u64>());
        }
        slow
    }

    #[allow(clippy::too_many_arguments)]
    fn check_parity(
        train: &[Vec<&str>],
        dev: &[Vec<&str>],
        pattern: Option<&str>,
        n: usize,
        tie: TieBreak,
        global: usize,
        min_frequency: u64,
        measure: Measure,
        window: (usize, f64),
    ) -> Vec<(u32, u32, u32)> {
        let pt = Pretokenizer::new(pattern).unwrap();
        let mut t = Trainer::parity_from_counters(
            counters(train, &pt),
            counters(dev, &pt),
            &ident(),
            256,
            n,
            tie,
            min_frequency,
            global,
            measure,
            None,
            window,
        )
        .unwrap();
        t.run(usize::MAX, None);
        let norms: Vec<u64> = counters(dev, &pt).iter().map(|d| measure.norm(d.pieces())).collect();
        let tw: Vec<Words> = counters(train, &pt).into_iter().map(words_of).collect();
        let dw: Vec<Words> = counters(dev, &pt).into_iter().map(words_of).collect();
        let slow = same_as_naive(&t, tw, dw, &norms, n, tie, global, min_frequency, window);
        // per-language counts sum to the global ones
        let par = t.parity.as_deref().unwrap();
        let mut sum: FxHashMap<u64, i64> = FxHashMap::default();
        for l in 0..par.langs {
            for (c, k) in par.counts(&t.pairs, l) {
                *sum.entry(k).or_default() += c as i64;
            }
        }
        for (k, info) in t.pairs.iter() {
            assert_eq!(info.count, sum.get(&k).copied().unwrap_or(0));
        }
        slow
    }

    #[test]
    fn parity_one_language_is_plain_bpe() {
        let text = "the cat sat on the mat, the cat ate the rat; aaaa abab";
        for tie in [TieBreak::PairIds, TieBreak::Lexicographic] {
            let plain = train_texts(&[text], Pretokenizer::new(Some(GPT4_PATTERN)).unwrap(), &ident(), 256, 30, tie, 1)
                .unwrap();
            let par = check_parity(
                &[vec![text]],
                &[vec!["the dog"]],
                Some(GPT4_PATTERN),
                30,
                tie,
                0,
                1,
                Measure::Tokens,
                (0, 0.0),
            );
            assert_eq!(plain, par);
        }
    }

    #[test]
    fn parity_serves_the_worst_language() {
        // language 1's dev text is long and its own pairs differ from language 0's
        let train = [vec!["aaaa aaaa aaaa aaaa aaaa aaaa"], vec!["xyxy zwzw xyxy"]];
        let dev = [vec!["aaaa"], vec!["xyxyzwzw"]];
        let m = check_parity(&train, &dev, None, 4, TieBreak::PairIds, 0, 1, Measure::Tokens, (0, 0.0));
        // plain BPE would merge (a, a) first; parity serves language 1 first
        assert_eq!(m[0], (b'x' as u32, b'y' as u32, 256));
        for measure in [Measure::Tokens, Measure::Bytes, Measure::Chars] {
            for global in [0, 1, 3] {
                let lex = TieBreak::Lexicographic;
                check_parity(&train, &dev, Some(GPT4_PATTERN), 12, lex, global, 1, measure, (0, 0.0));
                check_parity(&train, &dev, None, 12, TieBreak::PairIds, global, 2, measure, (3, 0.5));
                check_parity(&train, &dev, None, 12, TieBreak::PairIds, global, 1, measure, (4, 1.0));
            }
        }
    }

    #[test]
    fn parity_lays_out_huge_counts_as_copies() {
        let mk = |ws: &[(&str, u64)]| {
            let mut wc = WordCounter::new(Pretokenizer::Whole);
            for (w, c) in ws {
                wc.add_word(w.as_bytes(), *c);
            }
            wc
        };
        let g = 1u64 << 30;
        // training and dev counts past one slot's 2^30, a piece in both, pieces in one only
        let train = || vec![mk(&[("abab", 2 * g + 5), ("xyz", 3)]), mk(&[("xyxy", 7), ("ab", g + 2), ("zz", g - 1)])];
        let dev = || vec![mk(&[("abab", 3 * g), ("qq", 1)]), mk(&[("xyz", 2), ("zz", 2 * g)])];
        for tie in [TieBreak::PairIds, TieBreak::Lexicographic] {
            let mut t = Trainer::parity_from_counters(
                train(),
                dev(),
                &ident(),
                256,
                8,
                tie,
                1,
                0,
                Measure::Tokens,
                None,
                (0, 0.0),
            )
            .unwrap();
            t.run(usize::MAX, None);
            let tw: Vec<Words> = train().into_iter().map(words_of).collect();
            let dw: Vec<Words> = dev().into_iter().map(words_of).collect();
            same_as_naive(&t, tw, dw, &[1, 1], 8, tie, 0, 1, (0, 0.0));
        }
        let e = refusal(vec![mk(&[("ab", 1 << 40)])], vec![mk(&[("ab", 1)])]);
        assert!(e.contains("parity training supports fewer than"));
    }

    /// Why parity training refuses these counters.
    fn refusal(train: Vec<WordCounter>, dev: Vec<WordCounter>) -> String {
        let t = Trainer::parity_from_counters(
            train,
            dev,
            &ident(),
            256,
            5,
            TieBreak::PairIds,
            1,
            0,
            Measure::Tokens,
            None,
            (0, 0.0),
        );
        t.err().expect("refused").to_string()
    }

    #[test]
    fn parity_refuses_a_language_without_text() {
        let pt = Pretokenizer::Whole;
        let e = refusal(counters(&[vec!["ab"], vec!["a"]], &pt), counters(&[vec!["ab"], vec!["cd"]], &pt));
        assert!(e.contains("language 1 has no training text"));
        let e = refusal(counters(&[vec!["ab"], vec!["cd"]], &pt), counters(&[vec!["ab"], vec![]], &pt));
        assert!(e.contains("language 1 has no dev text"));
    }

    use proptest::prelude::*;
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]
        #[test]
        fn parity_matches_naive(
            train in prop::collection::vec(prop::collection::vec("(ab|a|b| |c|é|xy){0,40}", 1..3), 1..4),
            dev in prop::collection::vec(prop::collection::vec("(ab|a|b| |c|é|y){0,20}", 1..3), 4),
            n in 0usize..60, lex in any::<bool>(), global in 0usize..4, minf in 1u64..3, m in 0usize..3, pat in any::<bool>(),
            w in 0usize..6, alpha in prop::sample::select(vec![0.5, 1.0, 1.5, 2.0]),
        ) {
            // every language needs a pair in its training text and some dev text
            let train: Vec<Vec<String>> = train.into_iter().map(|mut t| { t.push("ab".into()); t }).collect();
            let dev: Vec<Vec<String>> = dev.into_iter().take(train.len()).map(|mut t| { t.push("b".into()); t }).collect();
            let tr: Vec<Vec<&str>> = train.iter().map(|t| t.iter().map(|s| s.as_str()).collect()).collect();
            let dv: Vec<Vec<&str>> = dev.iter().map(|t| t.iter().map(|s| s.as_str()).collect()).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            let measure = [Measure::Tokens, Measure::Bytes, Measure::Chars][m];
            let pattern = if pat { Some(GPT4_PATTERN) } else { None };
            check_parity(&tr, &dv, pattern, n, tie, global, minf, measure, (w, alpha));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(60))]
        /// The shared-pair variant's banded pick (in tests it asserts equality
        /// with the scan of every candidate at each merge) on counts large
        /// enough for the 1/32-wide buckets and their boundaries; the group
        /// rule's walk and the discount rule's keys likewise.
        #[test]
        fn shared_pick_matches_the_scan(
            words in prop::collection::vec(prop::collection::vec(("(ab|a|b|c|é|xy){1,8}", 1u64..3000), 1..14), 1..4),
            dev in prop::collection::vec("(ab|a|b|c|é|xy){1,8}", 4),
            n in 1usize..90, lex in any::<bool>(), shared in prop::sample::select(vec![1.0, 1.3, 2.0, 3.5]),
            minf in 1u64..60, global in 0usize..3, rule in 0usize..9,
        ) {
            let counter = |ws: &[(String, u64)]| {
                let mut wc = WordCounter::new(Pretokenizer::Whole);
                wc.add_word(b"ab", 1);
                for (w, c) in ws {
                    wc.add_word(w.as_bytes(), *c);
                }
                wc
            };
            let train: Vec<WordCounter> = words.iter().map(|ws| counter(ws)).collect();
            let dv: Vec<WordCounter> = dev.iter().take(words.len()).map(|w| counter(&[(w.clone(), 1)])).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            let mut t = Trainer::parity_from_counters(
                train, dv, &ident(), 256, n, tie, minf, global, Measure::Bytes, None, (0, 0.0),
            ).unwrap();
            // the group rule: in tests its walk asserts equality with taking the candidates out
            // the discount rule: its band keys (global less a share of language 0's count) likewise
            // the lift rule: its band keys (global plus a multiple of the band language's count) likewise
            let rule = [
                Rule::Foroutan,
                Rule::LevelUp { reference: 0 },
                Rule::Group { reference: 0, gain: 1.0 },
                Rule::Discount { reference: 0, gain: 1.0 },
                Rule::Discount { reference: 0, gain: 0.37 },
                Rule::Lift { reference: 0, gain: 1.0, dev: false },
                Rule::Lift { reference: 0, gain: 3.7, dev: false },
                Rule::Lift { reference: 0, gain: 0.0, dev: true },
                Rule::Lift { reference: 0, gain: 2.5, dev: true },
            ][rule];
            t.set_parity_rule(0.0, shared, rule).unwrap();
            t.run(usize::MAX, None);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// The same merges on any number of threads: in tests every merge and
        /// the setup run on each thread of the pool (`PAR_MIN` is 2), the
        /// positions cut at piece boundaries, inside long pieces too (`LONG` is 3).
        #[test]
        fn matches_naive_on_any_thread_count(
            texts in prop::collection::vec("(ab|a|b| |c|xy){0,60}", 1..6), n in 0usize..80, lex in any::<bool>(),
            threads in 1usize..6, pat in any::<bool>(),
        ) {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| check(&refs, if pat { Some(GPT4_PATTERN) } else { None }, n, tie));
        }
    }

    proptest! {
        /// The pair index against a map: inserts, updates and removals of
        /// few keys, so that probes collide, wrap around the table's end and
        /// shift back over removed buckets, and the table grows.
        #[test]
        fn pair_index_is_a_map(ops in prop::collection::vec((0u32..3, 0u32..9, 0u32..9, any::<i32>()), 0..400)) {
            let mut ix = PairIndex::default();
            let mut map: std::collections::BTreeMap<u64, i64> = Default::default();
            for (op, a, b, c) in ops {
                let key = pack(a, b);
                match (op, map.contains_key(&key)) {
                    (0, false) => {
                        ix.insert(key, PairInfo { count: c as i64, ..Default::default() });
                        map.insert(key, c as i64);
                    }
                    (0, true) | (1, _) => {
                        ix.remove(key);
                        map.remove(&key);
                    }
                    _ => {
                        if let Some(i) = ix.get_mut(key) {
                            i.count += 1;
                        }
                        if let Some(v) = map.get_mut(&key) {
                            *v += 1;
                        }
                    }
                }
                prop_assert_eq!(ix.len(), map.len());
                for a in 0..9 {
                    for b in 0..9 {
                        let k = pack(a, b);
                        prop_assert_eq!(ix.get(k).map(|i| i.count), map.get(&k).copied());
                    }
                }
            }
            let mut listed: Vec<(u64, i64)> = ix.iter().map(|(k, i)| (k, i.count)).collect();
            listed.sort_unstable();
            prop_assert_eq!(listed, map.into_iter().collect::<Vec<_>>());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn matches_naive(texts in prop::collection::vec("[ab c\n.éA'ŝD1]{0,30}", 1..6), n in 0usize..40, lex in any::<bool>(), pat in 0usize..3) {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            check(&refs, [None, Some(GPT4_PATTERN), Some(O200K_PATTERN)][pat], n, tie);
        }

        /// Long pieces (whole documents), repetitive ones, and many merges.
        #[test]
        fn matches_naive_long(texts in prop::collection::vec("(ab|a|b| |c){0,80}", 1..4), n in 0usize..120, lex in any::<bool>()) {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            let tie = if lex { TieBreak::Lexicographic } else { TieBreak::PairIds };
            check(&refs, None, n, tie);
            check(&refs, Some(GPT4_PATTERN), n, tie);
            check(&refs, Some(O200K_PATTERN), n, tie);
        }
    }
}
