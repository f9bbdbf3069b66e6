//! Counting the unique pieces of a corpus: the first step of BPE training
//! and of the LZ78 strategies that rank whole chunks.
//!
//! Texts are split by the pre-tokenizer in parallel (contiguous groups of
//! texts of about equal bytes), counted in each thread's cache-sized table
//! ([`Held`]: kept from block to block of a pass, cut back to its most counted
//! pieces), and the pieces it lets go are added to the counter's table shard
//! by shard, shards in parallel ([`SHARDS`]); only unique pieces with u64 counts are kept: memory
//! is bounded by the unique pieces, never by the corpus. Sums do not depend
//! on the grouping, so the counts do not depend on the thread count.
//!
//! Counters made on different machines combine: `to_bytes`/`from_bytes` (the
//! `crate::transport` format, pieces sorted by bytes so equal counts give
//! equal bytes) and `merge`, so a cluster counts partitions of a corpus and
//! sums them in any order or grouping with the same result.
//!
//! Bounded mode, for huge corpora: `prune_below(m)` drops the pieces counted
//! fewer than `m` times *so far* (in one partition) and records how many
//! pieces and occurrences it dropped. It is not exact: a piece below `m` in
//! every partition can lose up to `partitions * (m - 1)` occurrences, and the
//! pairs inside it their counts. Exact by default (nothing is ever dropped
//! unless asked).
//!
//! Not handled: normalization (the caller's, before counting).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::pretok::{Pretokenizer, SCAN_CHUNK};
use crate::spill::SpillDir;
use crate::transport::{Kind, Reader, Writer};

/// A piece of at most 15 bytes packed in 16: its bytes, zero-padded, and its
/// length in the last byte. Most pieces are this short; as keys they hash
/// with one multiplication and compare as two words, where a boxed key is a
/// pointer to follow, a `memcmp` call and an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short([u8; 16]);

impl Short {
    #[inline]
    fn new(p: &[u8]) -> Option<Short> {
        if p.len() > 15 {
            return None;
        }
        let mut b = [0u8; 16];
        b[..p.len()].copy_from_slice(p);
        b[15] = p.len() as u8;
        Some(Short(b))
    }

    /// The piece `within[at..at + len]` (`len` at most 15), read as one
    /// 16-byte load when `within` has 16 bytes from `at`: copying a short
    /// piece byte by byte and then reading it back as words stalls the load
    /// (the stores cannot be forwarded to it), a sixth of counting's table
    /// work.
    #[inline(always)]
    fn within(within: &[u8], at: usize, len: usize) -> Short {
        debug_assert!(len <= 15);
        match within.get(at..at + 16) {
            Some(w) => {
                let x = u128::from_le_bytes(w.try_into().unwrap());
                let x = (x & ((1u128 << (8 * len)) - 1)) | ((len as u128) << 120);
                Short(x.to_le_bytes())
            }
            None => Short::new(&within[at..at + len]).expect("at most 15 bytes"),
        }
    }

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0[..self.0[15] as usize]
    }

    /// Its hash: the two words folded in one 64x64->128 multiplication.
    #[inline]
    fn hash(&self) -> u64 {
        let a = u64::from_le_bytes(self.0[..8].try_into().unwrap());
        let b = u64::from_le_bytes(self.0[8..].try_into().unwrap());
        fold(a ^ K0, b ^ K1)
    }

    /// A key whose order is the byte order of the pieces: the bytes compare
    /// first (zero padding sorts a prefix first), then the length, which
    /// breaks the tie of a piece and itself followed by zero bytes.
    #[inline]
    fn order(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

const K0: u64 = 0x243f_6a88_85a3_08d3;
const K1: u64 = 0x1319_8a2e_0370_7345;

/// The 128-bit product of `a` and `b`, its halves xor-ed (foldhash's and
/// wyhash's mixing step: every input bit reaches every output bit).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let m = (a as u128) * (b as u128);
    (m as u64) ^ ((m >> 64) as u64)
}

/// The hash of a piece longer than 15 bytes: 16 bytes at a time, folded, the
/// last 16 read where they end (overlapping the chunk before; the length is
/// in the seed). Read in place: a zero-padded copy of each chunk cost a
/// `memset` and a `memcpy` call a chunk, 7% of counting's CPU time at 2 GB
/// (every long piece is hashed when counted, scattered and added).
#[inline]
fn hash_long(p: &[u8]) -> u64 {
    let mut h = K1 ^ p.len() as u64;
    let word = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap());
    if p.len() < 16 {
        // (only a lookup of a short piece's bytes comes here)
        let mut b = [0u8; 16];
        b[..p.len()].copy_from_slice(p);
        let x = u64::from_le_bytes(b[..8].try_into().unwrap());
        let y = u64::from_le_bytes(b[8..].try_into().unwrap());
        return fold(x ^ K0 ^ h, y ^ K1);
    }
    let mut i = 0;
    while i + 16 <= p.len() {
        h = fold(word(i) ^ K0 ^ h, word(i + 8) ^ K1);
        i += 16;
    }
    if i < p.len() {
        let j = p.len() - 16;
        h = fold(word(j) ^ K0 ^ h, word(j + 8) ^ K1);
    }
    h
}

impl std::hash::Hash for Short {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(Short::hash(self));
    }
}

/// The hasher of the counting tables: a [`Short`] key gives its own hash
/// (`write_u64`), a longer key's bytes are hashed by [`hash_long`] (`write`);
/// the length prefix of a slice and the terminator of a str are ignored, so
/// `&str`, `&[u8]` and `Box<[u8]>` keys of the same bytes hash alike.
#[derive(Default, Clone, Copy)]
struct PieceHasher(u64);

impl std::hash::Hasher for PieceHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = hash_long(bytes);
    }
    #[inline]
    fn write_u8(&mut self, _: u8) {}
    #[inline]
    fn write_usize(&mut self, _: usize) {}
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

type PieceMap<K> = std::collections::HashMap<K, u64, std::hash::BuildHasherDefault<PieceHasher>>;

/// Packed pieces -> counts: open addressing, linear probing from the slot the
/// hash's low bits name; a count of 0 marks an empty slot (a present piece is
/// counted at least once). Its own table rather than a `HashMap` so that a
/// caller that knows the next keys ahead -- a chunk of the scanner's pieces,
/// a shard's share of a block -- can ask for their slots' cache lines first
/// ([`Self::prefetch`]): the probes are then no longer one cache miss after
/// another, which is what counting waited on most.
struct ShortTable {
    slots: Vec<(Short, u64)>,
    len: usize,
}

const EMPTY: (Short, u64) = (Short([0; 16]), 0);

impl ShortTable {
    /// Room for `n` pieces before it grows (at most 3/4 full).
    fn with_capacity(n: usize) -> Self {
        let cap = (n + n / 3 + 1).next_power_of_two().max(16);
        ShortTable { slots: vec![EMPTY; cap], len: 0 }
    }

    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// A hint to load the slot where `hash`'s probe starts; no effect on the result.
    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let i = hash as usize & self.mask();
            // SAFETY: prefetching never faults and reads nothing; the index is masked in bounds anyway
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.slots.as_ptr().add(i) as *const i8) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Add `v` (above 0) to `k`'s count (`hash` = `k.hash()`); true if `k` is new.
    #[inline(always)]
    fn add(&mut self, k: Short, hash: u64, v: u64) -> bool {
        debug_assert!(v > 0);
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            let e = &mut self.slots[i];
            if e.1 == 0 {
                *e = (k, v);
                self.len += 1;
                return true;
            }
            if e.0 == k {
                e.1 += v;
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    fn get(&self, k: &Short) -> Option<u64> {
        let mask = self.mask();
        let mut i = k.hash() as usize & mask;
        loop {
            let e = &self.slots[i];
            if e.1 == 0 {
                return None;
            }
            if e.0 == *k {
                return Some(e.1);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let cap = 2 * self.slots.len();
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        self.len = 0;
        for (k, v) in old.into_iter().filter(|e| e.1 > 0) {
            self.add(k, k.hash(), v);
        }
    }

    /// Room for `n` more pieces.
    fn reserve(&mut self, n: usize) {
        while (self.len + n) * 4 > self.slots.len() * 3 {
            self.grow();
        }
    }

    fn iter(&self) -> impl Iterator<Item = &(Short, u64)> + Clone + '_ {
        self.slots.iter().filter(|e| e.1 > 0)
    }

    /// Keep at most `keep` entries, the most counted ones (those counted more
    /// than the `keep + 1`-th largest count), moving the others to `out`.
    /// The table is rebuilt in `spare` (a buffer of its capacity, or empty),
    /// and its old slots become the next spare: no allocation.
    fn evict(&mut self, keep: usize, spare: &mut Vec<(Short, u64)>, out: &mut Vec<(Short, u64)>) {
        if self.len <= keep {
            return;
        }
        // the counts in 256 buckets, four per power of two: the lowest bucket
        // whose counts and those above hold at most `keep` pieces is kept
        let mut hist = [0usize; 256];
        for e in self.iter() {
            hist[count_bucket(e.1)] += 1;
        }
        let (mut from, mut kept) = (256, 0);
        while from > 1 && kept + hist[from - 1] <= keep {
            from -= 1;
            kept += hist[from];
        }
        out.reserve(self.len);
        let cap = self.slots.len();
        spare.clear();
        spare.resize(cap, EMPTY);
        let old = std::mem::replace(&mut self.slots, std::mem::take(spare));
        self.len = 0;
        for &e in old.iter().filter(|e| e.1 > 0) {
            if count_bucket(e.1) >= from {
                self.add(e.0, e.0.hash(), e.1);
            } else {
                out.push(e);
            }
        }
        *spare = old;
    }

    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let kept: Vec<(Short, u64)> = self.iter().filter(|e| keep(e.1)).copied().collect();
        *self = ShortTable::with_capacity(kept.len());
        for (k, v) in kept {
            self.add(k, k.hash(), v);
        }
    }
}

/// A count's bucket, 0-255, in the order of the counts: the count itself
/// below 4, else four buckets per power of two.
#[inline]
fn count_bucket(c: u64) -> usize {
    if c < 4 {
        return c as usize;
    }
    let lz = 63 - c.leading_zeros() as usize;
    lz * 4 + ((c >> (lz - 2)) & 3) as usize
}

fn piece_map<K>(capacity: usize) -> PieceMap<K> {
    PieceMap::with_capacity_and_hasher(capacity, Default::default())
}

/// The counting table is cut into this many shards by 8 bits of a piece's
/// hash (bits 40-47: the packed pieces' tables index by the low bits, the
/// boxed pieces' maps by the low bits and the top 7). A block's per-thread
/// counts are scattered by shard, then
/// every shard takes its share from all of them on one thread, the threads
/// taking shards in parallel: each shard (1/256 of the table) stays in cache
/// while it is updated, and no thread waits for a serial merge. Each shard
/// grows on its own, so the table never holds two full copies of itself
/// while it grows.
const SHARDS: usize = 256;

#[inline(always)]
fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}

/// The counts of unique pieces: short ones packed ([`Short`]), longer ones
/// boxed, each in [`SHARDS`] shards.
struct Table {
    short: Vec<ShortTable>,
    long: Vec<PieceMap<Box<[u8]>>>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            short: (0..SHARDS).map(|_| ShortTable::with_capacity(0)).collect(),
            long: (0..SHARDS).map(|_| piece_map(0)).collect(),
        }
    }
}

impl Table {
    fn get(&self, k: &[u8]) -> u64 {
        match Short::new(k) {
            Some(s) => self.short[shard_of(s.hash())].get(&s),
            None => self.long[shard_of(hash_long(k))].get(k).copied(),
        }
        .unwrap_or(0)
    }

    /// Add `v` to `k`'s count; true if `k` is new. A count of 0 adds nothing.
    #[inline]
    fn add(&mut self, k: &[u8], v: u64) -> bool {
        if v == 0 {
            return false;
        }
        if let Some(s) = Short::new(k) {
            let h = s.hash();
            return self.short[shard_of(h)].add(s, h, v);
        }
        let long = &mut self.long[shard_of(hash_long(k))];
        match long.get_mut(k) {
            Some(c) => {
                *c += v;
                false
            }
            None => {
                long.insert(k.into(), v);
                true
            }
        }
    }

    /// Room for about `n` more pieces, spread over the shards.
    fn reserve(&mut self, n: usize) {
        for m in &mut self.short {
            m.reserve(n / SHARDS);
        }
    }

    fn len(&self) -> usize {
        self.short.iter().map(|m| m.len()).sum::<usize>() + self.long.iter().map(|m| m.len()).sum::<usize>()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        let short = self.short.iter().flat_map(|m| m.iter().map(|(k, v)| (k.bytes(), *v)));
        short.chain(self.long.iter().flat_map(|m| m.iter().map(|(k, &v)| (&k[..], v))))
    }

    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        for m in &mut self.short {
            m.retain(&mut keep);
        }
        for m in &mut self.long {
            m.retain(|_, c| keep(*c));
        }
    }

    /// Estimated bytes ([`TABLE_ENTRY`] + the piece's length per entry).
    fn mem(&self) -> u64 {
        self.iter().map(|(k, _)| TABLE_ENTRY + k.len() as u64).sum()
    }

    fn into_vec(self) -> Vec<(Box<[u8]>, u64)> {
        let mut v: Vec<(Box<[u8]>, u64)> = Vec::with_capacity(self.len());
        for m in self.short {
            v.extend(m.iter().map(|(k, c)| (k.bytes().into(), *c)));
        }
        for m in self.long {
            v.extend(m);
        }
        v
    }

    /// The pieces sorted by bytes, short ones still packed (no allocation
    /// per piece, and no `memcmp`: they sort as 128-bit integers). Each shard
    /// is freed as soon as it is copied out.
    fn into_sorted(self) -> SortedPieces {
        let mut short: Vec<(Short, u64)> = Vec::with_capacity(self.short.iter().map(|m| m.len()).sum());
        for m in self.short {
            short.extend(m.iter());
        }
        // Long pieces sort on their first 16 bytes read as one big-endian
        // integer, their whole bytes compared only on a tie: comparing the
        // boxes themselves read both pieces through their pointers and called
        // memcmp each time (a fifth of the 2 GB setup's CPU time).
        type Keyed = (u128, (Box<[u8]>, u64));
        let mut long: Vec<Keyed> = Vec::with_capacity(self.long.iter().map(|m| m.len()).sum());
        for m in self.long {
            long.extend(m.into_iter().map(|e| (head(&e.0), e)));
        }
        short.par_sort_unstable_by_key(|e| e.0.order());
        long.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1 .0.cmp(&b.1 .0)));
        SortedPieces { short, long: long.into_iter().map(|e| e.1).collect() }
    }
}

/// The unique pieces of a counter in byte order ([`WordCounter::into_sorted_pieces`]):
/// the short ones packed, the longer ones boxed, two sorted lists read as one.
pub struct SortedPieces {
    short: Vec<(Short, u64)>,
    long: Vec<(Box<[u8]>, u64)>,
}

impl SortedPieces {
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (piece, count) in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        SortedPart { short: &self.short, long: &self.long }.iter()
    }

    /// The pieces cut into `n` parts (some may be empty) of about equal
    /// numbers of short pieces: read part after part, they are [`Self::iter`]
    /// (so that training lays them out on several threads at once).
    pub fn parts(&self, n: usize) -> Vec<SortedPart<'_>> {
        let n = n.max(1);
        // part k starts at the k-th n-quantile of the short pieces, and at
        // the first long piece above it (a short and a long piece differ)
        let mut cuts: Vec<(usize, usize)> = vec![(0, 0)];
        for k in 1..n {
            let s = (self.short.len() * k / n).max(cuts[k - 1].0);
            let l = match self.short.get(s) {
                Some(e) => self.long.partition_point(|x| &x.0[..] < e.0.bytes()),
                None => self.long.len(),
            };
            cuts.push((s, l.max(cuts[k - 1].1)));
        }
        cuts.push((self.short.len(), self.long.len()));
        cuts.windows(2)
            .map(|w| SortedPart { short: &self.short[w[0].0..w[1].0], long: &self.long[w[0].1..w[1].1] })
            .collect()
    }
}

/// A run of a [`SortedPieces`] in byte order ([`SortedPieces::parts`]).
#[derive(Clone, Copy)]
pub struct SortedPart<'a> {
    short: &'a [(Short, u64)],
    long: &'a [(Box<[u8]>, u64)],
}

impl<'a> SortedPart<'a> {
    /// Every (piece, count) of the run in byte order.
    pub fn iter(self) -> impl Iterator<Item = (&'a [u8], u64)> + 'a {
        let (mut s, mut l) = (self.short.iter().peekable(), self.long.iter().peekable());
        std::iter::from_fn(move || {
            let short_first = match (s.peek(), l.peek()) {
                // a short piece (zero-padded) comes before a long one if its bytes are not above
                // the long one's first 16 (two integers compared, not a memcmp call a piece)
                (Some(a), Some(b)) => a.0.order() & !0xFF <= head(&b.0),
                (a, _) => a.is_some(),
            };
            if short_first {
                s.next().map(|(k, c)| (k.bytes(), *c))
            } else {
                l.next().map(|(k, c)| (&k[..], *c))
            }
        })
    }
}

/// The first 16 bytes of a piece of at least 16 as one big-endian integer
/// (their order is the bytes' order).
#[inline(always)]
fn head(p: &[u8]) -> u128 {
    u128::from_be_bytes(p[..16].try_into().expect("a long piece has 16 bytes"))
}

/// One group's counts to add to the counter's table: short pieces packed
/// (those its thread's [`Held`] table let go), longer ones borrowed from its
/// texts, and how many pieces it had.
struct Local<'a> {
    short: Vec<(Short, u64)>,
    long: PieceMap<&'a str>,
    pieces: u64,
}

/// One group's counts scattered by shard: shard `s`'s entries are
/// `short[short_at[s]..short_at[s + 1]]` (and the same for `long`).
struct Scattered<'a> {
    short: Vec<(Short, u64)>,
    short_at: Vec<u32>,
    long: Vec<(&'a str, u64)>,
    long_at: Vec<u32>,
    pieces: u64,
}

/// `items` ordered by shard (a counting sort), and where each shard starts;
/// `fill` is a placeholder every slot is overwritten from.
fn scatter<K: Copy>(
    items: impl Iterator<Item = (K, u64)> + Clone,
    len: usize,
    fill: K,
    shard: impl Fn(&K) -> usize,
) -> (Vec<(K, u64)>, Vec<u32>) {
    let mut at = vec![0u32; SHARDS + 1];
    for (k, _) in items.clone() {
        at[shard(&k) + 1] += 1;
    }
    for s in 0..SHARDS {
        at[s + 1] += at[s];
    }
    let mut next = at.clone();
    let mut out: Vec<(K, u64)> = vec![(fill, 0); len];
    for (k, v) in items {
        let i = &mut next[shard(&k)];
        out[*i as usize] = (k, v);
        *i += 1;
    }
    (out, at)
}

impl<'a> Local<'a> {
    fn scatter(self) -> Scattered<'a> {
        let (short, short_at) =
            scatter(self.short.iter().copied(), self.short.len(), Short([0; 16]), |k| shard_of(k.hash()));
        drop(self.short);
        let (long, long_at) = scatter(self.long.iter().map(|(k, v)| (*k, *v)), self.long.len(), "", |k| {
            shard_of(hash_long(k.as_bytes()))
        });
        Scattered { short, short_at, long, long_at, pieces: self.pieces }
    }
}

/// Contiguous groups of `items` of about equal size (`size` each, `total` in
/// all): four per thread of the current rayon pool, so a slow group does not
/// hold the others up.
pub(crate) fn even_groups<T>(items: &[T], size: impl Fn(&T) -> usize, total: usize) -> Vec<&[T]> {
    let parts = (rayon::current_num_threads() * 4).max(1);
    crate::chunks::byte_groups(items, size, total / parts + 1)
}

/// A counting thread's own table of short pieces, held across the groups
/// and blocks it counts ([`WordCounter::add_jsonl_block`] with `hold`) and
/// cut back to the [`HELD_KEEP`] most counted pieces whenever it passes
/// [`HELD_MAX`]: only the pieces it lets go are added to the counter's table.
///
/// Why: adding a group's distinct pieces to the counter's table (hundreds of
/// MB at 2 GB) is a cache miss each, and with a fresh table per group a
/// frequent piece was added once per group -- most of the additions (2 GB:
/// 35.4 M additions for 10.8 M distinct pieces). Held, a frequent piece is
/// added once per thread, when the table is flushed.
struct Held {
    table: ShortTable,
    /// The buffer the table is rebuilt in when cut back (no allocation).
    spare: Vec<(Short, u64)>,
    /// Cut back to `keep` pieces past `max` ([`HELD_KEEP`], [`HELD_MAX`]).
    keep: usize,
    max: usize,
}

/// A held table is cut back to this many pieces ([`Held`])...
const HELD_KEEP: usize = 1 << 14;
/// ... once it holds more than this many (in 64 K slots of 24 bytes, 1.5 MB:
/// the core's L2 cache and a bit). 2 GB, 2 threads, load 8: additions to the
/// counter's table 41.8 M (a table per group) -> 29.4 M, counting 12.47-13.04
/// -> 11.86-12.48 CPU s. Keeping 32 K of 48 K cut the additions to 25.3 M but
/// cut back twice as often (12.23-13.43 CPU s); 64 K of 96 K (3 MB): 20.6 M,
/// no faster, the held table's own lookups missing the cache.
const HELD_MAX: usize = 48_000;

impl Held {
    fn new((keep, max): (usize, usize)) -> Self {
        Held { table: ShortTable::with_capacity(max), spare: Vec::new(), keep, max }
    }
}

/// The pieces of `docs` counted in `held` (one thread's share of a batch)
/// and the group's long pieces; what `held` let go and the long pieces are
/// returned for the counter's table.
/// `within`: a buffer that holds every text of `docs` (the short pieces are
/// read from it, past a text's end where it goes on), or None (each text alone).
fn count_docs<'a>(
    pretok: &Pretokenizer,
    within: Option<&'a str>,
    docs: impl Iterator<Item = &'a str>,
    bytes: usize,
    held: &mut Held,
) -> Result<Scattered<'a>> {
    let Held { table: short, spare, keep, max } = held;
    let mut out = Vec::new();
    let mut long: PieceMap<&str> = piece_map(bytes / 512);
    let mut n = 0u64;
    let mut keys = [(Short([0; 16]), 0u64); SCAN_CHUNK];
    for t in docs {
        let parent = within.unwrap_or(t).as_bytes();
        let base = parent.as_ptr() as usize;
        let at = t.as_ptr() as usize - base;
        // a chunk of the scanner's pieces at a time: the keys and their
        // hashes first, each slot's cache line asked for, then the counts
        let scanned = pretok.scan_chunks(t, |bounds| {
            let mut k = 0;
            for w in bounds.windows(2) {
                if w[1] - w[0] <= 15 {
                    let s = Short::within(parent, at + w[0], w[1] - w[0]);
                    let h = s.hash();
                    short.prefetch(h);
                    keys[k] = (s, h);
                    k += 1;
                } else {
                    *long.entry(&t[w[0]..w[1]]).or_insert(0) += 1;
                }
            }
            n += bounds.len() as u64 - 1;
            for &(s, h) in &keys[..k] {
                short.add(s, h, 1);
            }
        });
        if !scanned {
            pretok.split(t, |p| {
                if p.len() <= 15 {
                    let s = Short::within(parent, p.as_ptr() as usize - base, p.len());
                    short.add(s, s.hash(), 1);
                } else {
                    *long.entry(p).or_insert(0) += 1;
                }
                n += 1;
            })?;
        }
        if short.len() > *max {
            short.evict(*keep, &mut *spare, &mut out);
        }
    }
    Ok(Local { short: out, long, pieces: n }.scatter())
}

/// The current rayon thread's [`Held`] table, locked (only that thread takes
/// it: never contended).
fn held_of(held: &[std::sync::Mutex<Held>]) -> std::sync::MutexGuard<'_, Held> {
    let i = rayon::current_thread_index().unwrap_or(0) % held.len();
    held[i].lock().unwrap_or_else(|e| e.into_inner())
}

/// Give the memory the C allocator holds free back to the system (glibc's
/// `malloc_trim`; nothing elsewhere). The counting table's shards are
/// allocated and freed on the counting threads, whose allocator arenas keep
/// the freed pages; training's arena and pair index are then allocated on the
/// calling thread and cannot reuse them. Trimmed once the counter is
/// consumed: 62 MB less peak memory training 0.25 GB (2 M distinct pieces).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim takes a plain integer, touches only the
        // allocator's own free lists (under its locks), and is safe to call
        // from any thread at any time
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Unique pieces of a corpus with their counts.
pub struct WordCounter {
    pretok: Pretokenizer,
    map: Table,
    total_pieces: u64,
    total_bytes: u64,
    /// Bounded mode: unique pieces dropped (summed over merged counters).
    dropped_unique: u64,
    /// Bounded mode: occurrences of the dropped pieces.
    dropped_pieces: u64,
    /// Bounded mode: the largest `prune_below` threshold applied (0: exact).
    prune_min: u64,
    /// Estimated bytes of `map` ([`TABLE_ENTRY`] + the piece's length per entry).
    mem: u64,
    /// Spilling (a memory budget): under which directory sorted runs go (their
    /// own directory, made at the first run), and the table's limit.
    spill: Option<Box<(std::path::PathBuf, Option<SpillDir>, u64)>>,
    /// A memory budget's drop: (unique pieces, occurrences, threshold: pieces
    /// counted fewer times were dropped; 0: nothing was).
    budget_drop: (u64, u64, u64),
    /// The counting threads' [`Held`] tables (by rayon thread index): counts
    /// not yet in `map`, between the blocks of a pass ([`Self::flush`]);
    /// empty otherwise.
    held: Vec<std::sync::Mutex<Held>>,
    /// (keep, max) of new [`Held`] tables.
    held_limits: (usize, usize),
}

/// Estimated bytes of one entry of the counting table besides the piece's
/// own bytes: the boxed key (16) and its allocation's header (16), the count
/// (8), and the hash table's control byte and spare capacity (~8).
pub const TABLE_ENTRY: u64 = 48;

/// Estimated bytes training holds for a unique piece of `len` bytes: its
/// slots in the merge loop's arena (4 bytes per token, two more per piece),
/// the pair index's positions (4 per pair), and the counter's sorted copy
/// that lives while the arena is laid out (24 + the boxed bytes + 16).
/// `docs/scale.md` turns it into pieces per budget.
pub fn train_cost(len: usize) -> u64 {
    let len = len as u64;
    64 + 9 * len
}

impl WordCounter {
    pub fn new(pretok: Pretokenizer) -> Self {
        WordCounter {
            pretok,
            map: Table::default(),
            total_pieces: 0,
            total_bytes: 0,
            dropped_unique: 0,
            dropped_pieces: 0,
            prune_min: 0,
            mem: 0,
            spill: None,
            budget_drop: (0, 0, 0),
            held: Vec::new(),
            held_limits: (HELD_KEEP, HELD_MAX),
        }
    }

    pub fn pretokenizer(&self) -> &Pretokenizer {
        &self.pretok
    }

    /// (unique pieces dropped, their occurrences, the largest threshold) by `prune_below`.
    pub fn dropped(&self) -> (u64, u64, u64) {
        (self.dropped_unique, self.dropped_pieces, self.prune_min)
    }

    /// The count of one piece (0 if absent).
    pub fn get(&self, w: &[u8]) -> u64 {
        self.check_flushed();
        self.map.get(w)
    }

    /// The counted pieces, in no particular order.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.check_flushed();
        self.map.iter()
    }

    pub fn unique(&self) -> usize {
        self.check_flushed();
        self.map.len()
    }

    pub fn total_pieces(&self) -> u64 {
        self.total_pieces
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Count the pieces of `texts`; runs on the current rayon pool.
    pub fn add_texts<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        if texts.is_empty() {
            return Ok(());
        }
        let bytes: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        let groups = even_groups(texts, |t| t.as_ref().len(), bytes);
        let fresh = !self.holds();
        self.make_held();
        let (pretok, held) = (&self.pretok, &self.held);
        let locals: Vec<Result<Scattered<'_>>> = groups
            .par_iter()
            .map(|g| count_docs(pretok, None, g.iter().map(|t| t.as_ref()), bytes / groups.len(), &mut held_of(held)))
            .collect();
        self.absorb(locals, false, fresh)?;
        self.total_bytes += bytes as u64;
        Ok(())
    }

    /// Count the documents of a block of whole JSON lines (`head` followed by
    /// `body`, as `crate::jsonl::block_lines` takes them): each line's `field`
    /// string, found and unescaped in Rust, split and counted on the current
    /// rayon pool, without a Python string per document. Returns the number of
    /// lines, or None -- with nothing counted -- when some line needs the
    /// Python reader (`crate::jsonl`: bad JSON or UTF-8, a missing field, lone
    /// surrogates...), which then reads the whole block. `file_start`: the
    /// block starts the file (its byte-order marks are dropped). `hold`: the
    /// counting threads keep their most counted pieces to themselves for the
    /// next block ([`Held`]); [`Self::flush`] adds them to the table (every
    /// other method that reads or changes the counts flushes first).
    pub fn add_jsonl_block(
        &mut self,
        head: &[u8],
        body: &[u8],
        field: &str,
        file_start: bool,
        hold: bool,
    ) -> Result<Option<usize>> {
        let mut joined = Vec::new();
        let lines = crate::jsonl::block_lines(head, body, &mut joined);
        let nlines = lines.len();
        let numbered: Vec<(usize, &[u8])> = lines.into_iter().enumerate().collect();
        let groups = even_groups(&numbered, |l| l.1.len() + 1, head.len() + body.len());
        // 1. each group's documents, unescaped, back to back in one buffer of the
        //    group's (about its share of the block): the pieces counted in step 2
        //    borrow from it, so a piece is copied only when it is new to the counter
        let texts: Option<Vec<(String, Vec<usize>)>> = groups
            .par_iter()
            .map(|g| {
                let mut buf = String::with_capacity(g.iter().map(|l| l.1.len()).sum());
                let mut ends = Vec::with_capacity(g.len());
                for &(i, l) in g.iter() {
                    if crate::jsonl::scan_line(l, field, file_start && i == 0, &mut buf)? == crate::jsonl::Found::Text {
                        ends.push(buf.len());
                    } else {
                        buf.truncate(ends.last().copied().unwrap_or(0));
                    }
                }
                Some((buf, ends))
            })
            .collect();
        let Some(texts) = texts else { return Ok(None) };
        // 2. split and count
        let fresh = !self.holds();
        self.make_held();
        let (pretok, held) = (&self.pretok, &self.held);
        let locals: Vec<Result<Scattered<'_>>> = texts
            .par_iter()
            .map(|(buf, ends)| {
                let starts = std::iter::once(0).chain(ends.iter().copied());
                let docs = starts.zip(ends.iter().copied()).map(|(a, b)| &buf[a..b]);
                count_docs(pretok, Some(buf), docs, buf.len(), &mut held_of(held))
            })
            .collect();
        self.absorb(locals, hold, fresh)?;
        self.total_bytes += texts.iter().map(|t| t.0.len() as u64).sum::<u64>();
        Ok(Some(nlines))
    }

    /// A [`Held`] table for every thread of the current rayon pool.
    fn make_held(&mut self) {
        while self.held.len() < rayon::current_num_threads() {
            self.held.push(std::sync::Mutex::new(Held::new(self.held_limits)));
        }
    }

    /// Add the counting threads' held counts ([`Held`]) to the table, and
    /// free their tables. Every count is then in the table.
    pub fn flush(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let locals: Vec<Scattered<'static>> = std::mem::take(&mut self.held)
            .into_par_iter()
            .map(|h| {
                let h = h.into_inner().unwrap_or_else(|e| e.into_inner());
                let short: Vec<(Short, u64)> = h.table.iter().copied().collect();
                drop(h);
                Local { short, long: piece_map(0), pieces: 0 }.scatter()
            })
            .collect();
        self.add_scattered(locals);
    }

    /// True while counts are held by the counting threads ([`Self::flush`]).
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Pieces held by the counting threads ([`Held`]), not yet in the table.
    fn held_len(&self) -> usize {
        self.held.iter().map(|h| h.lock().unwrap_or_else(|e| e.into_inner()).table.len()).sum()
    }

    /// Panics if counts are held back ([`Self::flush`] not called after a
    /// pass with `hold`): a reader that cannot flush would miss them.
    fn check_flushed(&self) {
        assert!(self.held.is_empty(), "WordCounter read before flush() after counting with hold");
    }

    /// Add the per-group counts of `add_texts` / `add_jsonl_block`, and flush
    /// the held ones unless `hold`. The first error wins. A failed call adds
    /// nothing when it started with nothing held (`fresh`: its held tables,
    /// made for it, are dropped with its groups' counts -- so `add_texts`
    /// never leaves part of a failed call counted); after earlier calls with
    /// `hold` the held tables mix their counts with the failed call's and are
    /// flushed, keeping the earlier counts and part of the failed call's
    /// (the file reader that holds stops at the first error).
    fn absorb(&mut self, locals: Vec<Result<Scattered<'_>>>, hold: bool, fresh: bool) -> Result<()> {
        let locals: Vec<Scattered<'_>> = match locals.into_iter().collect::<Result<_>>() {
            Ok(l) => l,
            Err(e) => {
                if fresh {
                    self.held.clear();
                } else {
                    self.flush();
                }
                return Err(e);
            }
        };
        self.add_scattered(locals);
        if !hold {
            self.flush();
        }
        self.maybe_spill()
    }

    /// Every shard of the table takes its entries from all groups, shards in
    /// parallel on the current rayon pool.
    fn add_scattered(&mut self, locals: Vec<Scattered<'_>>) {
        self.total_pieces += locals.iter().map(|l| l.pieces).sum::<u64>();
        let Table { short, long } = &mut self.map;
        let added: u64 = short
            .par_iter_mut()
            .zip(long.par_iter_mut())
            .enumerate()
            .map(|(s, (short, long))| {
                let mut added = 0u64;
                for l in &locals {
                    let items = &l.short[l.short_at[s] as usize..l.short_at[s + 1] as usize];
                    for (i, &(k, v)) in items.iter().enumerate() {
                        // the slot of an entry a few ahead asked for (a cache miss each, else)
                        if let Some(e) = items.get(i + 8) {
                            short.prefetch(e.0.hash());
                        }
                        if short.add(k, k.hash(), v) {
                            added += TABLE_ENTRY + k.0[15] as u64;
                        }
                    }
                    for &(k, v) in &l.long[l.long_at[s] as usize..l.long_at[s + 1] as usize] {
                        match long.get_mut(k.as_bytes()) {
                            Some(c) => *c += v,
                            None => {
                                long.insert(k.as_bytes().into(), v);
                                added += TABLE_ENTRY + k.len() as u64;
                            }
                        }
                    }
                }
                added
            })
            .sum();
        self.mem += added;
    }

    /// Spill sorted runs of the table to a new directory under `parent`
    /// whenever it holds more than `limit` estimated bytes (`crate::spill`).
    pub fn spill_to(&mut self, parent: &std::path::Path, limit: u64) -> Result<()> {
        if !parent.is_dir() {
            return Err(Error::invalid(format!("the temporary directory {} does not exist", parent.display())));
        }
        self.spill = Some(Box::new((parent.to_path_buf(), None, limit)));
        self.maybe_spill()
    }

    /// Runs written so far (0 without spilling).
    pub fn runs(&self) -> usize {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).map_or(0, |d| d.runs.len())
    }

    /// The spill directory, while there is one.
    pub fn spill_dir(&self) -> Option<&std::path::Path> {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).map(|d| d.path())
    }

    /// Counts partly on disk: `settle` first, then read them.
    fn check_settled(&self) -> Result<()> {
        if !self.held.is_empty() {
            return Err(Error::invalid("some counts are held by the counting threads: call flush() first"));
        }
        if self.runs() > 0 {
            return Err(Error::invalid("the counts are partly spilled to disk: call settle() first"));
        }
        Ok(())
    }

    fn maybe_spill(&mut self) -> Result<()> {
        let Some(sp) = &self.spill else { return Ok(()) };
        // the held tables count against the limit (at most 15 bytes a piece)
        if self.mem + self.held_len() as u64 * (TABLE_ENTRY + 15) <= sp.2 {
            return Ok(());
        }
        self.flush();
        let Some(sp) = &mut self.spill else { return Ok(()) };
        let (parent, dir, limit) = &mut **sp;
        if self.mem <= *limit || self.map.is_empty() {
            return Ok(());
        }
        if dir.is_none() {
            *dir = Some(SpillDir::new(parent)?);
        }
        let dir = dir.as_mut().unwrap();
        let map = std::mem::take(&mut self.map);
        let mut items = map.into_vec();
        items.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        dir.write_run(items.iter().map(|(k, v)| (&k[..], *v)))?;
        self.mem = 0;
        Ok(())
    }

    /// The end of counting under a memory budget: the runs on disk and the
    /// table merged into exact counts, keeping the most frequent pieces whose
    /// training cost ([`train_cost`]) fits `keep` bytes -- every piece counted
    /// at least some threshold T times, T as low as fits; pieces counted
    /// fewer times are dropped and recorded ([`Self::budget_dropped`]). Nothing
    /// is dropped when everything fits: the counts are then exactly the
    /// unbounded ones. An error, with nothing changed, when what fits covers
    /// less than `min_coverage` of the piece occurrences: it says what budget
    /// would. The spill directory is removed.
    /// `budget_per_keep`: the whole budget a caller gives per byte of `keep`
    /// (for the message).
    pub fn settle(&mut self, keep: u64, min_coverage: f64, budget_per_keep: f64) -> Result<(u64, u64, u64)> {
        self.flush();
        let spilled = self.runs() > 0;
        // pass 1: per count, how many pieces and their cost
        let hist = self.cost_histogram()?;
        let unique: u64 = hist.values().map(|e| e.0).sum();
        let occurrences: u64 = hist.iter().map(|(c, e)| c * e.0).sum();
        // the lowest threshold whose pieces fit
        let (mut fit, mut threshold, mut kept_occ, mut kept) = (0u64, u64::MAX, 0u64, 0u64);
        for (&c, &(n, cost)) in hist.iter().rev() {
            if fit + cost > keep {
                break;
            }
            fit += cost;
            threshold = c;
            kept_occ += c * n;
            kept += n;
        }
        if hist.is_empty() || kept == unique {
            threshold = 0;
        }
        if (kept_occ as f64) < min_coverage * occurrences as f64 {
            let (mut need, mut occ) = (0u64, 0u64);
            for (&c, &(n, cost)) in hist.iter().rev() {
                if occ as f64 >= min_coverage * occurrences as f64 {
                    break;
                }
                need += cost;
                occ += c * n;
            }
            return Err(Error::invalid(format!(
                "the memory budget is too small: its {keep} bytes for training hold the {kept} most frequent of \
                 {unique} distinct pieces, {:.1}% of the corpus's {occurrences} piece occurrences; keeping the \
                 pieces that make up {:.0}% of them takes about {need} bytes: a budget of at least {} bytes",
                100.0 * kept_occ as f64 / occurrences.max(1) as f64,
                100.0 * min_coverage,
                (need as f64 * budget_per_keep).ceil() as u64,
            )));
        }
        // pass 2: keep what fits
        if spilled {
            let mut m = self.spill_runs().merge()?;
            let mut map = Table::default();
            map.reserve(kept as usize);
            while let Some((k, c)) = m.next()? {
                if c >= threshold {
                    map.add(&k, c);
                }
            }
            self.map = map;
            self.mem = self.map.mem();
        } else if threshold > 0 {
            self.map.retain(|c| c >= threshold);
            self.mem = self.map.mem();
        }
        self.spill = None;
        self.budget_drop = (unique - kept, occurrences - kept_occ, threshold);
        Ok(self.budget_drop)
    }

    /// Per count, (distinct pieces, their training cost): the runs merged
    /// when counting spilled (the table is then written as one more run).
    fn cost_histogram(&mut self) -> Result<std::collections::BTreeMap<u64, (u64, u64)>> {
        self.flush();
        let spilled = self.runs() > 0;
        if spilled {
            self.maybe_spill_all()?;
        }
        // the counts below 4096 (nearly all pieces) in an array: a tree lookup
        // per piece took ~0.2 s at 2 GB
        let mut low = vec![(0u64, 0u64); 4096];
        let mut hist: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
        let mut add = |k: &[u8], c: u64| {
            let e = match low.get_mut(c as usize) {
                Some(e) => e,
                None => hist.entry(c).or_insert((0, 0)),
            };
            e.0 += 1;
            e.1 += train_cost(k.len());
        };
        if spilled {
            let mut m = self.spill_runs().merge()?;
            while let Some((k, c)) = m.next()? {
                add(&k, c);
            }
        } else {
            for (k, c) in self.map.iter() {
                add(k, c);
            }
        }
        hist.extend(low.into_iter().enumerate().filter(|e| e.1 .0 > 0).map(|(c, e)| (c as u64, e)));
        Ok(hist)
    }

    /// The training cost ([`train_cost`]) of every distinct piece counted, on
    /// disk or not: what [`Self::settle`] must fit for nothing to be dropped
    /// (parity training shares one budget among its languages by it).
    pub fn train_cost_total(&mut self) -> Result<u64> {
        Ok(self.cost_histogram()?.values().map(|e| e.1).sum())
    }

    /// The table written as one more run (every count is then on disk), and
    /// the runs reduced to what one merge opens.
    fn maybe_spill_all(&mut self) -> Result<()> {
        if let Some(sp) = &mut self.spill {
            sp.2 = 0;
        }
        self.maybe_spill()?;
        match self.spill.as_mut().and_then(|sp| sp.1.as_mut()) {
            Some(dir) => dir.reduce(),
            None => Ok(()),
        }
    }

    /// The runs (only called when there are some).
    fn spill_runs(&self) -> &SpillDir {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).expect("runs were written")
    }

    /// A memory budget's drop ([`Self::settle`]): (unique pieces, their
    /// occurrences, the threshold; 0: nothing dropped).
    pub fn budget_dropped(&self) -> (u64, u64, u64) {
        self.budget_drop
    }

    /// Add one piece with a count, bypassing the pre-tokenizer.
    pub fn add_word(&mut self, w: &[u8], count: u64) {
        self.total_pieces += count;
        self.total_bytes += w.len() as u64 * count;
        if self.map.add(w, count) {
            self.mem += TABLE_ENTRY + w.len() as u64;
        }
    }

    /// Add `other`'s pieces, counts and totals to this counter. Both must
    /// split text the same way (the same pattern).
    pub fn merge(&mut self, other: &WordCounter) -> Result<()> {
        if self.pretok.pattern() != other.pretok.pattern() {
            return Err(Error::invalid(format!(
                "cannot merge piece counts made with different split patterns ({:?} and {:?})",
                self.pretok.pattern(),
                other.pretok.pattern()
            )));
        }
        other.check_settled()?;
        self.map.reserve(other.map.len());
        for (k, v) in other.map.iter() {
            if self.map.add(k, v) {
                self.mem += TABLE_ENTRY + k.len() as u64;
            }
        }
        self.total_pieces += other.total_pieces;
        self.total_bytes += other.total_bytes;
        self.dropped_unique += other.dropped_unique;
        self.dropped_pieces += other.dropped_pieces;
        self.prune_min = self.prune_min.max(other.prune_min);
        self.maybe_spill()
    }

    /// Bounded mode: drop the pieces counted fewer than `min_count` times;
    /// returns how many unique pieces were dropped. See the module notes.
    pub fn prune_below(&mut self, min_count: u64) -> usize {
        if min_count <= 1 {
            return 0;
        }
        self.flush();
        let before = self.map.len();
        let mut mass = 0u64;
        self.map.retain(|c| {
            if c < min_count {
                mass += c;
                false
            } else {
                true
            }
        });
        let dropped = before - self.map.len();
        self.mem = self.map.mem();
        self.dropped_unique += dropped as u64;
        self.dropped_pieces += mass;
        self.prune_min = self.prune_min.max(min_count);
        dropped
    }

    /// The transport bytes (`crate::transport`, kind `Pieces`): flags (bit 0:
    /// a pattern follows), the pattern, the totals and bounded-mode figures,
    /// then every piece (length-prefixed bytes, count) in byte order.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.check_flushed();
        let mut items: Vec<(&[u8], u64)> = self.map.iter().collect();
        items.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut w = Writer::new(Kind::Pieces);
        let pattern = self.pretok.pattern();
        w.u8(pattern.is_some() as u8);
        if let Some(p) = &pattern {
            w.bytes(p.as_bytes());
        }
        for v in [self.total_pieces, self.total_bytes, self.dropped_unique, self.dropped_pieces, self.prune_min] {
            w.varint(v);
        }
        w.reserve(items.iter().map(|(k, _)| k.len() + 4).sum());
        w.varint(items.len() as u64);
        for (k, v) in items {
            w.bytes(k);
            w.varint(v);
        }
        w.finish()
    }

    /// [`Self::to_bytes`], refused while counts are spilled to disk.
    pub fn to_bytes_checked(&self) -> Result<Vec<u8>> {
        self.check_settled()?;
        Ok(self.to_bytes())
    }

    /// Read `to_bytes`' output (strict: pieces in increasing byte order, counts
    /// above zero, nothing after them; `Format` errors name the byte offset).
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let mut r = Reader::new(data, Kind::Pieces)?;
        let at = r.pos();
        let flags = r.u8()?;
        if flags > 1 {
            return Err(Error::format(at, format!("unknown flags {flags:#x}")));
        }
        let pattern = if flags & 1 == 1 {
            let at = r.pos();
            let p = r.bytes()?;
            Some(std::str::from_utf8(p).map_err(|_| Error::format(at, "the split pattern is not UTF-8"))?.to_string())
        } else {
            None
        };
        let pretok = Pretokenizer::new(pattern.as_deref())?;
        let mut wc = WordCounter::new(pretok);
        wc.total_pieces = r.varint()?;
        wc.total_bytes = r.varint()?;
        wc.dropped_unique = r.varint()?;
        wc.dropped_pieces = r.varint()?;
        wc.prune_min = r.varint()?;
        let n = r.count(2, "pieces")?;
        wc.map.reserve(n);
        let mut prev: Option<&[u8]> = None;
        for _ in 0..n {
            let at = r.pos();
            let k = r.bytes()?;
            if prev.is_some_and(|p| p >= k) {
                return Err(Error::format(at, "pieces are not in strictly increasing byte order"));
            }
            let at_count = r.pos();
            let v = r.varint()?;
            if v == 0 {
                return Err(Error::format(at_count, "a piece with count 0"));
            }
            wc.map.add(k, v);
            prev = Some(k);
        }
        r.end()?;
        wc.mem = wc.map.mem();
        Ok(wc)
    }

    /// The unique pieces sorted by bytes (a deterministic order).
    pub fn into_sorted(mut self) -> Vec<(Box<[u8]>, u64)> {
        self.flush();
        let mut v = self.map.into_vec();
        v.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The unique pieces sorted by bytes, without a boxed copy of each
    /// (training's layout reads them once, in this order).
    pub fn into_sorted_pieces(mut self) -> SortedPieces {
        self.flush();
        self.map.into_sorted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT4_PATTERN;

    /// A small deterministic generator: `rnd(n)` is below `n`.
    fn lcg(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        }
    }

    fn counted(texts: &[&str]) -> WordCounter {
        let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
        wc.add_texts(texts).unwrap();
        wc
    }

    #[test]
    fn merged_parts_equal_the_whole() {
        let texts = ["hello world", "hello there, world!", "  spaces\n\nand lines", "été 2024 ünïcode"];
        let whole = counted(&texts);
        for cut in 0..=texts.len() {
            let mut a = counted(&texts[..cut]);
            let b = counted(&texts[cut..]);
            a.merge(&b).unwrap();
            assert_eq!(a.to_bytes(), whole.to_bytes(), "cut at {cut}");
        }
    }

    #[test]
    fn bytes_round_trip_and_refuse_damage() {
        let wc = counted(&["a b c a b a", "x\u{0}y"]);
        let blob = wc.to_bytes();
        let back = WordCounter::from_bytes(&blob).unwrap();
        assert_eq!(back.to_bytes(), blob);
        assert_eq!(back.get(b" b"), 2);
        let whole = WordCounter::new(Pretokenizer::Whole);
        let b2 = whole.to_bytes();
        assert_eq!(WordCounter::from_bytes(&b2).unwrap().pretok.pattern(), None);
        assert!(WordCounter::from_bytes(&blob[..blob.len() - 1]).is_err());
        let mut other = WordCounter::new(Pretokenizer::Whole);
        assert!(other.merge(&wc).is_err());
    }

    #[test]
    fn jsonl_blocks_count_as_their_texts() {
        let texts = ["hello world", "x\ny \"q\" é", "", "  spaces\n\nand lines 12345", "😀 ünï"];
        let mut block = String::from("\u{feff}");
        for (i, t) in texts.iter().enumerate() {
            block += &format!("{{\"id\": {i}, \"text\": {}}}\n", serde_json::to_string(t).unwrap());
            if i == 1 {
                block += "\n{\"text\": null}\n";
            }
        }
        let whole = counted(&texts);
        let b = block.as_bytes();
        for cut in [0, 1, 5, 20, 40] {
            let head = &b[..cut];
            if head.contains(&b'\n') {
                continue;
            }
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
                let lines = pool.install(|| wc.add_jsonl_block(head, &b[cut..], "text", true, false)).unwrap();
                assert_eq!(lines, Some(texts.len() + 2));
                assert_eq!(wc.to_bytes(), whole.to_bytes(), "cut {cut}, {threads} threads");
            }
        }
        // a line for the Python reader: nothing counted
        let mut wc = counted(&["a"]);
        let before = wc.to_bytes();
        let bad = b"{\"text\": \"ok\"}\n{\"text\": 5}\n";
        assert_eq!(wc.add_jsonl_block(b"", bad, "text", true, false).unwrap(), None);
        assert_eq!(wc.to_bytes(), before);
    }

    #[test]
    fn spilled_counts_equal_in_memory_counts() {
        // a small random corpus, counted in many batches
        let mut rnd = lcg(7);
        let words = ["the", "cat", "été", "x1", "日本", "zz", "ab", "q", "12345", "!!"];
        let texts: Vec<String> = (0..300)
            .map(|_| {
                (0..rnd(30)).map(|_| words[rnd(10) as usize].repeat(1 + rnd(3) as usize)).collect::<Vec<_>>().join(" ")
            })
            .collect();
        let whole = counted(&texts.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        for limit in [0, 100, 1000] {
            let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
            wc.spill_to(&std::env::temp_dir(), limit).unwrap();
            assert!(wc.spill_dir().is_none()); // made at the first run
            for chunk in texts.chunks(7) {
                wc.add_texts(chunk).unwrap();
            }
            let dir = wc.spill_dir().unwrap().to_path_buf();
            assert!(wc.runs() > 5, "limit {limit}: {} runs", wc.runs());
            assert!(wc.to_bytes_checked().is_err());
            assert_eq!(wc.settle(u64::MAX, 0.5, 1.0).unwrap(), (0, 0, 0));
            assert!(!dir.exists());
            assert_eq!(wc.to_bytes(), whole.to_bytes(), "limit {limit}");
        }
        // a budget that drops: exactly the pieces below the threshold
        let all: Vec<(Box<[u8]>, u64)> = whole.into_sorted();
        let occurrences: u64 = all.iter().map(|x| x.1).sum();
        let cost: u64 = all.iter().map(|x| train_cost(x.0.len())).sum();
        let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
        wc.spill_to(&std::env::temp_dir(), 200).unwrap();
        for chunk in texts.chunks(7) {
            wc.add_texts(chunk).unwrap();
        }
        let (du, dp, t) = wc.settle(cost / 2, 0.5, 1.0).unwrap();
        assert!(t > 1);
        let dropped: Vec<_> = all.iter().filter(|x| x.1 < t).collect();
        assert_eq!(du, dropped.len() as u64);
        assert_eq!(dp, dropped.iter().map(|x| x.1).sum::<u64>());
        let kept: Vec<_> = all.iter().filter(|x| x.1 >= t).cloned().collect();
        assert!(kept.iter().map(|x| train_cost(x.0.len())).sum::<u64>() <= cost / 2);
        assert_eq!(wc.into_sorted(), kept);
        // too small: an error naming a budget that would do
        let mut wc = counted(&texts.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        let err = wc.settle(10, 0.9, 2.0).unwrap_err().to_string();
        assert!(err.contains("too small") && err.contains("a budget of at least"), "{err}");
        assert_eq!(wc.unique(), all.len());
        let _ = occurrences;
    }

    #[test]
    fn held_counts_across_blocks_equal_the_whole() {
        // a random corpus as JSON lines, counted block by block, each thread
        // holding its most counted pieces from block to block; tiny held
        // tables are cut back after nearly every document
        let mut rnd = lcg(11);
        let words = ["the", "cat", "été", "x1", "日本語の", "zz", "ab", "q", "12345", "!!", "Ελληνικάκάκά"];
        let texts: Vec<String> = (0..400)
            .map(|_| {
                (0..rnd(40)).map(|_| words[rnd(11) as usize].repeat(1 + rnd(4) as usize)).collect::<Vec<_>>().join(" ")
            })
            .collect();
        let whole = counted(&texts.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        let lines: Vec<String> =
            texts.iter().map(|t| format!("{{\"text\": {}}}\n", serde_json::to_string(t).unwrap())).collect();
        let count = |wc: &mut WordCounter, pool: &rayon::ThreadPool| {
            for (i, chunk) in lines.chunks(37).enumerate() {
                let body = chunk.concat();
                let got = pool.install(|| wc.add_jsonl_block(b"", body.as_bytes(), "text", i == 0, true)).unwrap();
                assert_eq!(got, Some(chunk.len()));
            }
        };
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for limits in [(0, 0), (2, 5), (30, 60), (HELD_KEEP, HELD_MAX)] {
                let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
                wc.held_limits = limits;
                count(&mut wc, &pool);
                assert!(wc.holds());
                assert!(wc.to_bytes_checked().is_err()); // held counts are not in the table yet
                wc.flush();
                assert!(!wc.holds());
                assert_eq!(wc.to_bytes(), whole.to_bytes(), "{threads} threads, held {limits:?}");
            }
            // under a spill limit the held pieces count against it, and the runs merge to the same counts
            let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
            wc.held_limits = (2, 5);
            wc.spill_to(&std::env::temp_dir(), 300).unwrap();
            count(&mut wc, &pool);
            assert!(wc.runs() > 3, "{} runs", wc.runs());
            assert_eq!(wc.settle(u64::MAX, 0.5, 1.0).unwrap(), (0, 0, 0));
            assert!(!wc.holds());
            assert_eq!(wc.to_bytes(), whole.to_bytes(), "{threads} threads, spilled");
        }
    }

    #[test]
    fn cutting_back_keeps_the_most_counted() {
        let mut t = ShortTable::with_capacity(64);
        let key = |i: u64| Short::new(format!("p{i}").as_bytes()).unwrap();
        // piece i counted i times (1..=200), and 100 more pieces counted 7 times
        for i in 1..=300u64 {
            let c = if i <= 200 { i } else { 7 };
            t.add(key(i), key(i).hash(), c);
        }
        let (mut spare, mut out) = (Vec::new(), Vec::new());
        t.evict(50, &mut spare, &mut out);
        assert!(t.len() <= 50 && t.len() >= 40, "{} kept", t.len());
        assert_eq!(t.len() + out.len(), 300);
        let least_kept = t.iter().map(|e| e.1).min().unwrap();
        assert!(out.iter().all(|e| e.1 < least_kept));
        for &(k, c) in &out {
            assert_eq!(t.get(&k), None);
            let i: u64 = std::str::from_utf8(&k.bytes()[1..]).unwrap().parse().unwrap();
            assert_eq!(c, if i <= 200 { i } else { 7 });
        }
        t.evict(0, &mut spare, &mut out);
        assert_eq!((t.len(), out.len()), (0, 300));
        assert_eq!(out.iter().map(|e| e.1).sum::<u64>(), (1..=200).sum::<u64>() + 700);
    }

    #[test]
    fn sorted_pieces_are_in_byte_order() {
        // short and long pieces, zero bytes, prefixes, the 15/16-byte edge
        let mut rnd = lcg(3);
        let mut wc = WordCounter::new(Pretokenizer::Whole);
        let mut want: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        for _ in 0..5000 {
            let len = [0, 1, 2, 7, 8, 14, 15, 16, 17, 40][rnd(10) as usize];
            let w: Vec<u8> = (0..len).map(|_| [0u8, 1, b'a', b'b', 0xff][rnd(5) as usize]).collect();
            let c = 1 + rnd(9);
            wc.add_word(&w, c);
            *want.entry(w).or_insert(0) += c;
        }
        let sorted = wc.into_sorted_pieces();
        let got: Vec<(Vec<u8>, u64)> = sorted.iter().map(|(k, c)| (k.to_vec(), c)).collect();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        // cut into parts, read one after the other: the same list
        for n in [1, 2, 3, 7, 5000, 9000] {
            let parts = sorted.parts(n);
            assert_eq!(parts.len(), n);
            let again: Vec<(Vec<u8>, u64)> =
                parts.iter().flat_map(|p| p.iter()).map(|(k, c)| (k.to_vec(), c)).collect();
            assert_eq!(again, got, "{n} parts");
        }
    }

    #[test]
    fn prune_records_what_it_dropped() {
        // pieces: "a" 1, " a" 3, " b" 2, " c" 1
        let mut wc = counted(&["a a a a b b c"]);
        assert_eq!(wc.prune_below(3), 3);
        assert_eq!(wc.dropped(), (3, 4, 3));
        assert_eq!(wc.get(b" a"), 3);
        assert_eq!(wc.unique(), 1);
        let back = WordCounter::from_bytes(&wc.to_bytes()).unwrap();
        assert_eq!(back.dropped(), wc.dropped());
    }
}
