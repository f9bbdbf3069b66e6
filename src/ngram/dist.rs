//! Distributed n-gram counting: [`top_ngrams`] over a text cut into pieces
//! that are counted apart (on the workers of a cluster) and combined here,
//! with exactly the single-machine result, statistics included.
//!
//! The single-machine rule (see [`super::count`]) is level-wise: at level n
//! the n-gram at position p is counted iff its (n-1)-prefix and (n-1)-suffix
//! are *frequent*, i.e. were counted at level n-1 with a count of at least c.
//! That filter depends on the n-gram's bytes only, so the counts of a level
//! split over pieces of the text:
//!
//! - a worker counts, in its piece ([`count_piece`]), the n-grams lying wholly
//!   inside the piece that pass the filter, given the frequent (n-1)-grams (at
//!   level 2 every pair is counted);
//! - the n-grams that cross a cut between pieces are counted by the driver
//!   ([`Selector`]) from the pieces' [`Edge`]s: the first and last `MAX_N - 1`
//!   bytes of each piece (a piece of at most `2 × (MAX_N - 1)` bytes is given
//!   whole). An n-gram of at most 8 bytes that crosses a cut has at most 7 bytes
//!   on either side of it, so it lies inside the edges (pieces shorter than 7
//!   bytes it spans are whole); an n-gram inside a piece is never seen twice;
//! - the sums ([`NgramCounts::merge`]) are the single-machine counts of the
//!   level, so the driver's threshold, next frequent set, best list and
//!   statistics (positions, distinct, min_count) are the single machine's, step
//!   by step.
//!
//! [`NgramCounts`] is what travels: one level's counts, sorted by key, in the
//! shared transport framing of `crate::transport` (magic `TFCT`, version,
//! kind 2 = n-gram counts, FNV-1a 64 checksum), read back strictly
//! ([`NgramCounts::from_bytes`]). The body:
//!
//! ```text
//! n          u8      2..8
//! positions  varint  the positions counted (= the sum of the counts)
//! entries    varint  how many follow
//! entry      varint key delta (the first key itself, then key - previous key >= 1),
//!            varint count (>= 1)
//! ```
//!
//! Not handled: texts with NUL bytes (strip them first, as for training);
//! memory of a level's merged counts is the single machine's (bounded by the
//! distinct n-grams counted at that level), not divided by the workers.

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::count::{merge_best, min_count, pool_merge, pool_sum, ranges, CountStats, Scored};
use super::{key_at, key_len, Error, Result, MAX_N, MIN_N};
use crate::transport::{Kind, Reader, Writer};

/// The bytes of a piece's edge on either side.
pub const EDGE: usize = MAX_N - 1;

/// One level's n-gram counts: (key, count) sorted by key, and the number of
/// positions counted (the sum of the counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NgramCounts {
    n: u8,
    positions: u64,
    entries: Vec<(u64, u64)>,
}

impl NgramCounts {
    /// No counts at level `n`.
    pub fn empty(n: usize) -> Result<Self> {
        check_n(n)?;
        Ok(NgramCounts { n: n as u8, positions: 0, entries: Vec::new() })
    }

    /// Counts from a map (sorted here).
    fn from_map(n: usize, map: FxHashMap<u64, u64>, positions: u64) -> Self {
        let mut entries: Vec<(u64, u64)> = map.into_iter().collect();
        entries.sort_unstable_by_key(|e| e.0);
        NgramCounts { n: n as u8, positions, entries }
    }

    pub fn n(&self) -> usize {
        self.n as usize
    }

    pub fn positions(&self) -> u64 {
        self.positions
    }

    /// (key, count), keys ascending.
    pub fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The sum of `parts` (all of the same level; at least one).
    pub fn merge(parts: &[&NgramCounts]) -> Result<NgramCounts> {
        let first = parts.first().ok_or_else(|| Error::invalid("nothing to merge"))?;
        let n = first.n;
        let mut positions = 0u64;
        for p in parts {
            if p.n != n {
                return Err(Error::Invalid(format!("cannot merge counts of {}-grams with counts of {n}-grams", p.n)));
            }
            positions = positions.checked_add(p.positions).ok_or_else(overflow)?;
        }
        if parts.len() == 1 {
            return Ok((*first).clone());
        }
        let mut all: Vec<(u64, u64)> = Vec::with_capacity(parts.iter().map(|p| p.entries.len()).sum());
        for p in parts {
            all.extend_from_slice(&p.entries);
        }
        all.sort_unstable_by_key(|e| e.0);
        let mut entries: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (k, c) in all {
            match entries.last_mut() {
                Some(last) if last.0 == k => last.1 = last.1.checked_add(c).ok_or_else(overflow)?,
                _ => entries.push((k, c)),
            }
        }
        Ok(NgramCounts { n, positions, entries })
    }

    /// The transport bytes of the module docs (deterministic: entries in key order).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::Ngrams);
        w.u8(self.n);
        w.varint(self.positions);
        w.varint(self.entries.len() as u64);
        w.reserve(self.entries.len() * 4);
        let mut prev = 0u64;
        for &(k, c) in &self.entries {
            w.varint(k - prev);
            w.varint(c);
            prev = k;
        }
        w.finish()
    }

    /// Read [`NgramCounts::to_bytes`]' output, strictly: a `Format` error with
    /// the byte offset of the first thing wrong. Allocates only for entries
    /// the data can hold.
    pub fn from_bytes(data: &[u8]) -> Result<NgramCounts> {
        let mut r = Reader::new(data, Kind::Ngrams)?;
        let at = r.pos();
        let n = r.u8()? as usize;
        if !(MIN_N..=MAX_N).contains(&n) {
            return Err(Error::format(at, format!("n-gram counts: n = {n} is not in {MIN_N}..{MAX_N}")));
        }
        let at_positions = r.pos();
        let positions = r.varint()?;
        let entries = r.count(2, "n-gram entries")?;
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(entries);
        let mut sum = 0u64;
        let mut prev = 0u64;
        for i in 0..entries {
            let at = r.pos();
            let delta = r.varint()?;
            if i > 0 && delta == 0 {
                return Err(Error::format(at, format!("n-gram counts: entry {i} is out of key order")));
            }
            let key = prev
                .checked_add(delta)
                .ok_or_else(|| Error::format(at, format!("n-gram counts: entry {i}'s key overflows 64 bits")))?;
            if !valid_key(key, n) {
                return Err(Error::format(at, format!("n-gram counts: entry {i} is not a {n}-gram of non-zero bytes")));
            }
            let at_count = r.pos();
            let count = r.varint()?;
            if count == 0 {
                return Err(Error::format(at_count, format!("n-gram counts: entry {i} has a zero count")));
            }
            sum = sum
                .checked_add(count)
                .ok_or_else(|| Error::format(at_count, "n-gram counts: the counts overflow 64 bits"))?;
            out.push((key, count));
            prev = key;
        }
        r.end()?;
        if sum != positions {
            return Err(Error::format(
                at_positions,
                format!("n-gram counts: {positions} positions are recorded but the counts sum to {sum}"),
            ));
        }
        Ok(NgramCounts { n: n as u8, positions, entries: out })
    }
}

fn valid_key(key: u64, n: usize) -> bool {
    key_len(key) == n && key.to_be_bytes()[8 - n..].iter().all(|&b| b != 0)
}

fn overflow() -> Error {
    Error::invalid("n-gram counts overflow 64 bits")
}

fn check_n(n: usize) -> Result<()> {
    if (MIN_N..=MAX_N).contains(&n) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("n must be in {MIN_N}..{MAX_N}, not {n}")))
    }
}

/// The keys of a frequent set, with a table of their first two bytes that
/// rejects most positions before the hash lookup.
/// (For a short text the table costs more than it saves: it is left out.)
struct Filter {
    n: usize,
    first: Option<Vec<bool>>,
    keys: FxHashSet<u64>,
}

/// Texts shorter than this skip the first-pair table and count pairs by sorting.
const SMALL: usize = 1 << 14;

impl Filter {
    fn new(f: &NgramCounts, text_len: usize) -> Filter {
        let n = f.n();
        let first = (text_len >= SMALL).then(|| {
            let mut first = vec![false; 1 << 16];
            for &(k, _) in &f.entries {
                first[(k >> (8 * (n - 2))) as usize & 0xffff] = true;
            }
            first
        });
        Filter { n, first, keys: f.entries.iter().map(|e| e.0).collect() }
    }

    /// Is the (n-1)-gram at `q` frequent (`q + n <= text.len()`)?
    #[inline]
    fn at(&self, text: &[u8], q: usize) -> bool {
        if let Some(first) = &self.first {
            if !first[((text[q] as usize) << 8) | text[q + 1] as usize] {
                return false;
            }
        }
        self.keys.contains(&key_at(text, q, self.n))
    }
}

fn check_level(n: usize, frequent: Option<&NgramCounts>, text_len: usize) -> Result<Option<Filter>> {
    check_n(n)?;
    match (n, frequent) {
        (MIN_N, None) => Ok(None),
        (MIN_N, Some(_)) => Err(Error::invalid("level 2 counts every pair: give no frequent set")),
        (_, Some(f)) if f.n() == n - 1 => Ok(Some(Filter::new(f, text_len))),
        (_, Some(f)) => {
            Err(Error::Invalid(format!("level {n} needs the frequent {}-grams, not {}-grams", n - 1, f.n())))
        }
        (_, None) => Err(Error::Invalid(format!("level {n} needs the frequent {}-grams", n - 1))),
    }
}

/// The level-`n` counts of one piece of NUL-free text: every n-gram wholly
/// inside `text` whose (n-1)-prefix and (n-1)-suffix are in `frequent` (the
/// frequent (n-1)-grams; `None` at level 2, where every pair counts). Runs on
/// the current rayon pool; one hash lookup per position at most.
pub fn count_piece(text: &[u8], n: usize, frequent: Option<&NgramCounts>) -> Result<NgramCounts> {
    let filter = check_level(n, frequent, text.len())?;
    if text.contains(&0) {
        return Err(Error::invalid("the text of a piece must be NUL-free: strip NULs before counting"));
    }
    if text.len() < n {
        return NgramCounts::empty(n);
    }
    let starts = text.len() - n + 1;
    let threads = rayon::current_num_threads().max(1);
    let Some(filter) = filter else {
        if starts < SMALL {
            let mut keys: Vec<u64> = (0..starts).map(|p| key_at(text, p, 2)).collect();
            keys.sort_unstable();
            let mut entries: Vec<(u64, u64)> = Vec::new();
            for k in keys {
                match entries.last_mut() {
                    Some(last) if last.0 == k => last.1 += 1,
                    _ => entries.push((k, 1)),
                }
            }
            return Ok(NgramCounts { n: 2, positions: starts as u64, entries });
        }
        let dense = pool_sum(ranges(starts, threads), |r| {
            let mut c = vec![0u64; 1 << 16];
            for p in r {
                c[((text[p] as usize) << 8) | text[p + 1] as usize] += 1;
            }
            c
        });
        let entries: Vec<(u64, u64)> =
            dense.iter().enumerate().filter(|(_, &c)| c > 0).map(|(k, &c)| (k as u64, c)).collect();
        return Ok(NgramCounts { n: 2, positions: starts as u64, entries });
    };
    let (map, seen) = pool_merge(ranges(starts, threads), |r| {
        let mut m: FxHashMap<u64, u64> = FxHashMap::default();
        let mut seen = 0u64;
        let mut prev = filter.at(text, r.start);
        for p in r {
            let next = filter.at(text, p + 1);
            if prev && next {
                *m.entry(key_at(text, p, n)).or_insert(0) += 1;
                seen += 1;
            }
            prev = next;
        }
        (m, seen)
    });
    Ok(NgramCounts::from_map(n, map, seen))
}

/// What the driver needs of a piece: its length and its first and last
/// [`EDGE`] bytes; a piece of at most `2 × EDGE` bytes is `head` whole (and
/// `tail` is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub len: u64,
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Edge {
    pub fn of(text: &[u8]) -> Edge {
        if text.len() <= 2 * EDGE {
            Edge { len: text.len() as u64, head: text.to_vec(), tail: Vec::new() }
        } else {
            Edge { len: text.len() as u64, head: text[..EDGE].to_vec(), tail: text[text.len() - EDGE..].to_vec() }
        }
    }

    fn whole(&self) -> bool {
        self.len <= 2 * EDGE as u64
    }
}

/// A stretch of the text known to the driver, with the offsets (in it) where
/// a piece begins.
struct Run {
    bytes: Vec<u8>,
    cuts: Vec<usize>,
}

/// The driver of a distributed [`top_ngrams`](super::top_ngrams): give it the
/// pieces' edges, then for each [`level`](Selector::level) the merged counts
/// of the pieces ([`count_piece`] with [`frequent`](Selector::frequent)); at
/// the end [`finish`](Selector::finish) is `top_ngrams(whole text, k)`.
pub struct Selector {
    k: usize,
    len: u64,
    runs: Vec<Run>,
    best: Vec<Scored>,
    threshold: u64,
    c: u64,
    stats: CountStats,
    next: Option<usize>,
    frequent: Option<NgramCounts>,
}

impl Selector {
    /// The driver for the top `k` n-grams of the text whose pieces, in order,
    /// have these edges.
    pub fn new(k: usize, edges: &[Edge]) -> Result<Selector> {
        let mut len = 0u64;
        let mut runs = Vec::new();
        let mut cur = Run { bytes: Vec::new(), cuts: Vec::new() };
        for (i, e) in edges.iter().enumerate() {
            let ok = if e.whole() {
                e.head.len() as u64 == e.len && e.tail.is_empty()
            } else {
                e.head.len() == EDGE && e.tail.len() == EDGE
            };
            if !ok || e.head.contains(&0) || e.tail.contains(&0) {
                return Err(Error::Invalid(format!("edge {i} is not the edge of a NUL-free piece of {} bytes", e.len)));
            }
            len = len.checked_add(e.len).ok_or_else(overflow)?;
            if e.len == 0 {
                continue;
            }
            if !cur.bytes.is_empty() {
                cur.cuts.push(cur.bytes.len());
            }
            cur.bytes.extend_from_slice(&e.head);
            if !e.whole() {
                runs.push(std::mem::replace(&mut cur, Run { bytes: e.tail.clone(), cuts: Vec::new() }));
            }
        }
        runs.push(cur);
        runs.retain(|r| !r.cuts.is_empty());
        let next = if k == 0 || len < MIN_N as u64 { None } else { Some(MIN_N) };
        Ok(Selector {
            k,
            len,
            runs,
            best: Vec::new(),
            threshold: 0,
            c: 1,
            stats: CountStats::default(),
            next,
            frequent: None,
        })
    }

    /// The level to count next, or None when done.
    pub fn level(&self) -> Option<usize> {
        self.next
    }

    /// The frequent (n-1)-grams the pieces' level-n counting needs (None at level 2).
    pub fn frequent(&self) -> Option<&NgramCounts> {
        self.frequent.as_ref()
    }

    /// The text's length (the sum of the pieces').
    pub fn text_len(&self) -> u64 {
        self.len
    }

    /// The n-grams of level `n` that cross a cut, counted with the filter.
    fn crossing(&self, n: usize) -> Result<NgramCounts> {
        let filter = check_level(n, self.frequent.as_ref(), self.runs.iter().map(|r| r.bytes.len()).sum())?;
        let mut m: FxHashMap<u64, u64> = FxHashMap::default();
        let mut seen = 0u64;
        for run in &self.runs {
            let t = &run.bytes;
            if t.len() < n {
                continue;
            }
            let mut cut = 0; // index of the first cut after p
            for p in 0..=t.len() - n {
                while cut < run.cuts.len() && run.cuts[cut] <= p {
                    cut += 1;
                }
                if cut == run.cuts.len() {
                    break;
                }
                if run.cuts[cut] > p + n - 1 {
                    continue;
                }
                if filter.as_ref().is_none_or(|f| f.at(t, p) && f.at(t, p + 1)) {
                    *m.entry(key_at(t, p, n)).or_insert(0) += 1;
                    seen += 1;
                }
            }
        }
        Ok(NgramCounts::from_map(n, m, seen))
    }

    /// Take the merged counts of every piece at [`level`](Selector::level),
    /// add the crossing n-grams, and take the step `top_ngrams` takes.
    pub fn add(&mut self, pieces: &NgramCounts) -> Result<()> {
        let Some(n) = self.next else {
            return Err(Error::invalid("the selection is complete: no level is being counted"));
        };
        if pieces.n() != n {
            return Err(Error::Invalid(format!("counts of {}-grams given; level {n} is being counted", pieces.n())));
        }
        let all = NgramCounts::merge(&[pieces, &self.crossing(n)?])?;
        self.stats.positions[n] = all.positions;
        self.stats.distinct[n] = all.entries.len() as u64;
        self.next = None;
        if n == MIN_N && all.positions != self.len - 1 {
            return Err(Error::Invalid(format!(
                "the pieces' pairs number {} but a text of {} bytes has {}: counts and edges are not of the same pieces",
                all.positions,
                self.len,
                self.len - 1
            )));
        }
        if all.entries.is_empty() {
            return Ok(());
        }
        let t = self.threshold;
        let level: Vec<Scored> = all
            .entries
            .iter()
            .filter(|&&(_, count)| count * n as u64 >= t)
            .map(|&(key, count)| Scored { key, n: n as u8, count })
            .collect();
        self.threshold = merge_best(&mut self.best, level, self.k, t);
        self.c = if n == MIN_N { min_count(self.threshold) } else { self.c.max(min_count(self.threshold)) };
        self.stats.min_count[n] = self.c;
        if n == MAX_N {
            return Ok(());
        }
        let c = self.c;
        let entries: Vec<(u64, u64)> = all.entries.into_iter().filter(|e| e.1 >= c).collect();
        if entries.is_empty() {
            return Ok(());
        }
        let positions = entries.iter().map(|e| e.1).sum();
        self.frequent = Some(NgramCounts { n: n as u8, positions, entries });
        self.next = Some(n + 1);
        Ok(())
    }

    /// The top `k` n-grams and the counting statistics, as `top_ngrams`.
    pub fn finish(&self) -> Result<(Vec<Scored>, CountStats)> {
        if let Some(n) = self.next {
            return Err(Error::Invalid(format!("the selection is not complete: level {n} is still to count")));
        }
        let mut best = self.best.clone();
        best.truncate(self.k);
        Ok((best, self.stats.clone()))
    }
}

/// The whole protocol in one process (tests, and the reference of the
/// Python driver): `top_ngrams` of the concatenation of `pieces`.
pub fn top_ngrams_of_pieces(pieces: &[&[u8]], k: usize) -> Result<(Vec<Scored>, CountStats)> {
    let edges: Vec<Edge> = pieces.iter().map(|p| Edge::of(p)).collect();
    let mut sel = Selector::new(k, &edges)?;
    while let Some(n) = sel.level() {
        let counts = pieces.par_iter().map(|p| count_piece(p, n, sel.frequent())).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&NgramCounts> = counts.iter().collect();
        let merged = if refs.is_empty() { NgramCounts::empty(n)? } else { NgramCounts::merge(&refs)? };
        sel.add(&merged)?;
    }
    sel.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::{key_of, top_ngrams};
    use proptest::prelude::*;

    fn cut<'a>(text: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut at: Vec<usize> = cuts.iter().map(|&c| c % (text.len() + 1)).collect();
        at.sort_unstable();
        let mut out = Vec::new();
        let mut s = 0;
        for c in at {
            out.push(&text[s..c]);
            s = c;
        }
        out.push(&text[s..]);
        out
    }

    fn same(text: &[u8], cuts: &[usize], k: usize) -> std::result::Result<(), TestCaseError> {
        let pieces = cut(text, cuts);
        let want = top_ngrams(text, k);
        let got = top_ngrams_of_pieces(&pieces, k).unwrap();
        prop_assert_eq!(&got.0, &want.0);
        prop_assert_eq!(&got.1, &want.1);
        Ok(())
    }

    #[test]
    fn bytes_round_trip_and_are_sorted() {
        let c = count_piece(b"abcabcab", 2, None).unwrap();
        assert_eq!(c.entries(), &[(key_of(b"ab"), 3), (key_of(b"bc"), 2), (key_of(b"ca"), 2)]);
        assert_eq!(c.positions(), 7);
        let b = c.to_bytes();
        assert_eq!(&b[..7], b"TFCT\x01\x02\x02");
        assert_eq!(NgramCounts::from_bytes(&b).unwrap(), c);
    }

    /// Reseal a body with the transport checksum (to build damaged-but-sealed data).
    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut v = body.to_vec();
        v.extend_from_slice(&crate::transport::fnv1a64(body).to_le_bytes());
        v
    }

    #[test]
    fn hostile_bytes_are_format_errors() {
        let good = count_piece(b"abcabcab", 2, None).unwrap().to_bytes();
        let offset = |d: &[u8]| match NgramCounts::from_bytes(d) {
            Err(Error::Format { offset, .. }) => offset,
            other => panic!("{other:?}"),
        };
        for cut in 0..good.len() {
            offset(&good[..cut]);
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            offset(&bad); // the checksum (or the header) catches any flip
        }
        let body = &good[..good.len() - 8];
        // header: magic(4) version kind, then n at 6, positions at 7
        let mut b = body.to_vec();
        b[6] = 9;
        assert_eq!(offset(&sealed(&b)), 6);
        // ab=2, bc=2, ca=2 -> positions 6, 3 entries; a zero delta puts keys out of order
        let mut b = body[..7].to_vec();
        b.extend_from_slice(&[6, 2, 0xe2, 0xc2, 0x01, 3, 0, 3]);
        assert_eq!(offset(&sealed(&b)), 13);
        let mut b = body[..7].to_vec();
        b.extend_from_slice(&[6, 0x7f]); // 127 entries cannot fit in what is left
        assert_eq!(offset(&sealed(&b)), 8);
        let mut b = body[..7].to_vec();
        b.extend_from_slice(&[7, 1, 0xe2, 0xc2, 0x01, 6]); // positions 7, counts sum to 6
        assert_eq!(offset(&sealed(&b)), 7);
        let mut b = body[..7].to_vec();
        b.extend_from_slice(&[0, 1, 0x61, 1]); // the key 0x61 is not a 2-gram
        assert_eq!(offset(&sealed(&b)), 9);
        let mut b = body.to_vec();
        b.push(0);
        assert_eq!(offset(&sealed(&b)), body.len() as u64);
    }

    #[test]
    fn merge_sums() {
        let a = count_piece(b"abab", 2, None).unwrap();
        let b = count_piece(b"abc", 2, None).unwrap();
        let m = NgramCounts::merge(&[&a, &b]).unwrap();
        assert_eq!(m.entries(), &[(key_of(b"ab"), 3), (key_of(b"ba"), 1), (key_of(b"bc"), 1)]);
        assert_eq!(m.positions(), 5);
        assert!(NgramCounts::merge(&[&a, &count_piece(b"abc", 3, Some(&a)).unwrap()]).is_err());
    }

    #[test]
    fn tiny_and_empty_pieces() {
        let text = b"the cat sat on the mat; the cat sat on the hat";
        let cuts: Vec<usize> = (0..text.len()).collect();
        same(text, &cuts, 50).unwrap();
        same(text, &[3, 3, 3, 20, 21, 22], 7).unwrap();
        assert_eq!(top_ngrams_of_pieces(&[], 5).unwrap(), top_ngrams(b"", 5));
        assert_eq!(top_ngrams_of_pieces(&[b"", b"a", b""], 5).unwrap(), top_ngrams(b"a", 5));
    }

    #[test]
    fn large_pieces_use_the_tables() {
        // Pieces above SMALL take the dense pair table and the first-pair filter.
        let mut x = 12345u64;
        let text: Vec<u8> = (0..120_000)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if i % 97 < 40 {
                    b"the cat sat on the mat "[i % 23]
                } else {
                    1 + (x >> 60) as u8
                }
            })
            .collect();
        for k in [1, 50, 3840] {
            same(&text, &[17, 40_000, 40_001, 90_000], k).unwrap();
            same(&text, &[], k).unwrap();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn pieces_equal_whole_small_alphabet(
            text in proptest::collection::vec(1u8..4, 0..400),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
            k in 1usize..60,
        ) {
            same(&text, &cuts, k)?;
        }

        #[test]
        fn pieces_equal_whole_any_bytes(
            text in proptest::collection::vec(any::<u8>().prop_map(|b| b.max(1)), 0..300),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
            k in 1usize..40,
        ) {
            same(&text, &cuts, k)?;
        }

        #[test]
        fn many_tiny_pieces(
            text in proptest::collection::vec(1u8..3, 0..200),
            step in 1usize..9,
            k in 1usize..30,
        ) {
            let cuts: Vec<usize> = (0..text.len()).step_by(step).collect();
            same(&text, &cuts, k)?;
        }

        #[test]
        fn hostile_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = NgramCounts::from_bytes(&data);
            let mut body = b"TFCT\x01\x02\x03".to_vec();
            body.extend_from_slice(&data);
            let _ = NgramCounts::from_bytes(&sealed(&body)); // past the checksum: the body's own checks
        }
    }
}
