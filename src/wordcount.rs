//! Counting the unique pieces of a corpus: the first step of BPE training
//! and of the LZ78 strategies that rank whole chunks.
//!
//! Texts are split by the pre-tokenizer in parallel (contiguous groups of
//! texts of about equal bytes, one local map each, merged in order), and only
//! unique pieces with u64 counts are kept: memory is bounded by the unique
//! pieces, never by the corpus.
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
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::transport::{Kind, Reader, Writer};

/// Unique pieces of a corpus with their counts.
pub struct WordCounter {
    pretok: Pretokenizer,
    map: FxHashMap<Box<[u8]>, u64>,
    total_pieces: u64,
    total_bytes: u64,
    /// Bounded mode: unique pieces dropped (summed over merged counters).
    dropped_unique: u64,
    /// Bounded mode: occurrences of the dropped pieces.
    dropped_pieces: u64,
    /// Bounded mode: the largest `prune_below` threshold applied (0: exact).
    prune_min: u64,
}

impl WordCounter {
    pub fn new(pretok: Pretokenizer) -> Self {
        WordCounter {
            pretok,
            map: FxHashMap::default(),
            total_pieces: 0,
            total_bytes: 0,
            dropped_unique: 0,
            dropped_pieces: 0,
            prune_min: 0,
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
        self.map.get(w).copied().unwrap_or(0)
    }

    /// The counted pieces, in no particular order.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.map.iter().map(|(k, &v)| (&k[..], v))
    }

    pub fn unique(&self) -> usize {
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
        let parts = (rayon::current_num_threads() * 4).max(1);
        let target = bytes / parts + 1;
        // contiguous groups of texts with about `target` bytes each
        let mut groups: Vec<&[S]> = Vec::new();
        let mut start = 0;
        let mut acc = 0;
        for (i, t) in texts.iter().enumerate() {
            acc += t.as_ref().len();
            if acc >= target {
                groups.push(&texts[start..=i]);
                start = i + 1;
                acc = 0;
            }
        }
        if start < texts.len() {
            groups.push(&texts[start..]);
        }
        let pretok = &self.pretok;
        let locals: Vec<Result<(FxHashMap<&str, u64>, u64)>> = groups
            .par_iter()
            .map(|g| {
                let mut m: FxHashMap<&str, u64> = FxHashMap::default();
                let mut n = 0u64;
                for t in g.iter() {
                    pretok.split(t.as_ref(), |p| {
                        *m.entry(p).or_insert(0) += 1;
                        n += 1;
                    })?;
                }
                Ok((m, n))
            })
            .collect();
        for r in locals {
            let (m, n) = r?;
            self.total_pieces += n;
            for (k, v) in m {
                match self.map.get_mut(k.as_bytes()) {
                    Some(c) => *c += v,
                    None => {
                        self.map.insert(k.as_bytes().into(), v);
                    }
                }
            }
        }
        self.total_bytes += bytes as u64;
        Ok(())
    }

    /// Add one piece with a count, bypassing the pre-tokenizer.
    pub fn add_word(&mut self, w: &[u8], count: u64) {
        self.total_pieces += count;
        self.total_bytes += w.len() as u64 * count;
        match self.map.get_mut(w) {
            Some(c) => *c += count,
            None => {
                self.map.insert(w.into(), count);
            }
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
        self.map.reserve(other.map.len().saturating_sub(self.map.capacity() - self.map.len()));
        for (k, &v) in &other.map {
            match self.map.get_mut(k) {
                Some(c) => *c += v,
                None => {
                    self.map.insert(k.clone(), v);
                }
            }
        }
        self.total_pieces += other.total_pieces;
        self.total_bytes += other.total_bytes;
        self.dropped_unique += other.dropped_unique;
        self.dropped_pieces += other.dropped_pieces;
        self.prune_min = self.prune_min.max(other.prune_min);
        Ok(())
    }

    /// Bounded mode: drop the pieces counted fewer than `min_count` times;
    /// returns how many unique pieces were dropped. See the module notes.
    pub fn prune_below(&mut self, min_count: u64) -> usize {
        if min_count <= 1 {
            return 0;
        }
        let before = self.map.len();
        let mut mass = 0u64;
        self.map.retain(|_, c| {
            if *c < min_count {
                mass += *c;
                false
            } else {
                true
            }
        });
        let dropped = before - self.map.len();
        self.dropped_unique += dropped as u64;
        self.dropped_pieces += mass;
        self.prune_min = self.prune_min.max(min_count);
        dropped
    }

    /// The transport bytes (`crate::transport`, kind `Pieces`): flags (bit 0:
    /// a pattern follows), the pattern, the totals and bounded-mode figures,
    /// then every piece (length-prefixed bytes, count) in byte order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut items: Vec<(&[u8], u64)> = self.map.iter().map(|(k, &v)| (&k[..], v)).collect();
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
            wc.map.insert(k.into(), v);
            prev = Some(k);
        }
        r.end()?;
        Ok(wc)
    }

    /// The unique pieces sorted by bytes (a deterministic order).
    pub fn into_sorted(self) -> Vec<(Box<[u8]>, u64)> {
        let mut v: Vec<(Box<[u8]>, u64)> = self.map.into_iter().collect();
        v.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT4_PATTERN;

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
