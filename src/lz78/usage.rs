//! Dictionary-usage counts: what the pruning rounds of multi_round,
//! cost_adjusted, smart_prune and compressed measure over the corpus, as a
//! mergeable object, so that a cluster's workers count and the client prunes.
//!
//! A round asks: with the pool codes in a *mask* switched on as outputs (the
//! others pass-through prefixes), how often does greedy longest match over
//! the unique chunks emit each code, weighted by the chunk counts? The answer
//! is a [`UsageCounts`], one u64 per pool code (index 0, the root, is
//! always 0). Usage over a corpus is the sum of usage over its parts, so
//! counts of partitions [`UsageCounts::merge`] (element-wise sum) exactly,
//! in any order or grouping.
//!
//! Transport (`crate::transport`): kind `Usage` holds the codes (varint),
//! then one varint count per code; kind `Mask` holds a round's mask (codes as
//! a varint, then the bitset, bit `c % 8` of byte `c / 8` for code c, spare
//! bits zero). Equal values give equal bytes.
//!
//! [`PoolTrie`] is the pool's byte trie built once; a round only switches
//! outputs on and off (a code off in the mask has, in the pruning loops,
//! only descendants that are off too, or stays as a pass-through prefix:
//! either way the longest output match is the one a trie without it finds).
//!
//! Not handled: moving chunk counters (the caller keeps them where they were
//! counted) and the rules that pick a round's mask (`super::strategies`, which
//! uses this module's [`groups`], never the other way round).

use rayon::prelude::*;

use super::trie::{ByteTrie, NONE};
use super::Dictionary;
use crate::error::{Error, Result};
use crate::transport::{Kind, Reader, Writer};

/// Contiguous groups of about equal bytes for the parallel passes.
pub fn groups<T: AsRef<[u8]>>(chunks: &[(T, u64)]) -> Vec<&[(T, u64)]> {
    let parts = (rayon::current_num_threads() * 4).max(1);
    let total: usize = chunks.iter().map(|c| c.0.as_ref().len()).sum();
    let target = total / parts + 1;
    let mut out = Vec::new();
    let (mut start, mut acc) = (0, 0);
    for (i, c) in chunks.iter().enumerate() {
        acc += c.0.as_ref().len();
        if acc >= target {
            out.push(&chunks[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < chunks.len() {
        out.push(&chunks[start..]);
    }
    out
}

/// How often each id is emitted by greedy longest match over the chunks
/// (weighted by their counts; in any order). `counts[id]`, length `n_ids`.
pub fn usage_counts<T: AsRef<[u8]> + Sync>(trie: &ByteTrie, chunks: &[(T, u64)], n_ids: usize) -> Vec<u64> {
    let parts: Vec<Vec<u64>> = groups(chunks)
        .par_iter()
        .map(|g| {
            let mut c = vec![0u64; n_ids];
            for (s, w) in g.iter() {
                trie.parse(s.as_ref(), NONE, |_, _, id| {
                    if id != NONE {
                        c[id as usize] += *w;
                    }
                });
            }
            c
        })
        .collect();
    let mut total = vec![0u64; n_ids];
    for p in parts {
        for (t, x) in total.iter_mut().zip(p) {
            *t += x;
        }
    }
    total
}

/// Greedy-parse usage per pool code; `merge` sums.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageCounts {
    counts: Vec<u64>,
}

impl UsageCounts {
    /// Zero counts for `codes` codes (0..codes).
    pub fn zeros(codes: usize) -> Self {
        UsageCounts { counts: vec![0; codes] }
    }

    pub fn from_vec(counts: Vec<u64>) -> Self {
        UsageCounts { counts }
    }

    pub fn as_slice(&self) -> &[u64] {
        &self.counts
    }

    pub fn into_vec(self) -> Vec<u64> {
        self.counts
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Add `other`'s counts, code by code. Both must count the same pool.
    pub fn merge(&mut self, other: &UsageCounts) -> Result<()> {
        if other.counts.len() != self.counts.len() {
            return Err(Error::Invalid(format!(
                "cannot merge usage counts of {} codes into counts of {} codes (not the same pool)",
                other.counts.len(),
                self.counts.len()
            )));
        }
        for (code, (a, &b)) in self.counts.iter_mut().zip(&other.counts).enumerate() {
            *a = a.checked_add(b).ok_or_else(|| Error::Invalid(format!("usage count of code {code} overflows u64")))?;
        }
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::Usage);
        w.reserve(self.counts.len() * 2 + 10);
        w.varint(self.counts.len() as u64);
        for &c in &self.counts {
            w.varint(c);
        }
        w.finish()
    }

    /// Strict: a damaged or cut blob is a `Format` error at its byte offset.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let mut r = Reader::new(data, Kind::Usage)?;
        let n = r.count(1, "usage counts")?; // a count takes at least one byte
        let mut counts = Vec::with_capacity(n);
        for _ in 0..n {
            counts.push(r.varint()?);
        }
        r.end()?;
        Ok(UsageCounts { counts })
    }
}

/// A round's mask (`mask[code]`: counted as an output) as transport bytes.
pub fn mask_to_bytes(mask: &[bool]) -> Vec<u8> {
    let mut bits = vec![0u8; mask.len().div_ceil(8)];
    for (c, _) in mask.iter().enumerate().filter(|(_, &on)| on) {
        bits[c / 8] |= 1 << (c % 8);
    }
    let mut w = Writer::new(Kind::Mask);
    w.varint(mask.len() as u64);
    w.bytes(&bits);
    w.finish()
}

/// The mask of [`mask_to_bytes`]; strict, bounded by the data.
pub fn mask_from_bytes(data: &[u8]) -> Result<Vec<bool>> {
    let mut r = Reader::new(data, Kind::Mask)?;
    let at = r.pos();
    let codes = r.varint()?;
    let at_bits = r.pos();
    let bits = r.bytes()?;
    if (bits.len() as u64) != codes.div_ceil(8) {
        return Err(Error::format(
            at,
            format!("a mask of {codes} codes needs {} bytes of bits, not {}", codes.div_ceil(8), bits.len()),
        ));
    }
    let codes = codes as usize; // bounded by the bits just read
    if !codes.is_multiple_of(8) && bits[codes / 8] >> (codes % 8) != 0 {
        return Err(Error::format(at_bits, "mask bits set beyond its last code"));
    }
    r.end()?;
    Ok((0..codes).map(|c| bits[c / 8] >> (c % 8) & 1 == 1).collect())
}

/// The pool's byte trie (code k + 1 for entry k), built once; rounds switch
/// outputs on and off.
#[derive(Clone, Debug)]
pub struct PoolTrie {
    trie: ByteTrie,
    /// pool entries + 1 (the mask length)
    codes: usize,
}

impl PoolTrie {
    pub fn new(pool: &Dictionary) -> Result<Self> {
        let trie = ByteTrie::build(pool.entries.iter().enumerate().map(|(i, e)| (e.pattern.as_bytes(), i as u32 + 1)))?;
        Ok(PoolTrie { trie, codes: pool.entries.len() + 1 })
    }

    /// The mask length of this pool's rounds.
    pub fn codes(&self) -> usize {
        self.codes
    }

    /// Switch the outputs to `mask` (its length must be [`Self::codes`]).
    pub fn set_mask(&mut self, mask: &[bool]) -> Result<()> {
        if mask.len() != self.codes {
            return Err(Error::Invalid(format!(
                "a usage round's mask has {} codes but the pool has {}",
                mask.len(),
                self.codes
            )));
        }
        for (c, &on) in mask.iter().enumerate().skip(1) {
            self.trie.set_output(c as u32, on);
        }
        Ok(())
    }

    /// Usage of the current outputs over `chunks` (the current rayon pool).
    pub fn usage<T: AsRef<[u8]> + Sync>(&self, chunks: &[(T, u64)]) -> UsageCounts {
        UsageCounts::from_vec(usage_counts(&self.trie, chunks, self.codes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_round_trip_merge_and_damage() {
        let a = UsageCounts::from_vec(vec![0, 1, 300, u64::MAX - 5]);
        let b = UsageCounts::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(a, b);
        let mut c = UsageCounts::from_vec(vec![0, 2, 3, 5]);
        c.merge(&a).unwrap();
        assert_eq!(c.as_slice(), &[0, 3, 303, u64::MAX]);
        assert!(c.merge(&a).is_err()); // overflow
        assert!(c.merge(&UsageCounts::zeros(3)).is_err());
        let blob = a.to_bytes();
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x21;
            assert!(matches!(UsageCounts::from_bytes(&bad), Err(Error::Format { .. })), "flip at {i}");
        }
        for cut in 0..blob.len() {
            assert!(UsageCounts::from_bytes(&blob[..cut]).is_err());
        }
        // a huge count with no bytes behind it is refused before allocating
        let mut w = Writer::new(Kind::Usage);
        w.varint(u64::MAX >> 1);
        assert!(matches!(UsageCounts::from_bytes(&w.finish()), Err(Error::Format { offset: 6, .. })));
    }

    #[test]
    fn mask_round_trip_and_damage() {
        for n in [0usize, 1, 7, 8, 9, 100] {
            let m: Vec<bool> = (0..n).map(|c| c % 3 != 0).collect();
            assert_eq!(mask_from_bytes(&mask_to_bytes(&m)).unwrap(), m);
        }
        let blob = mask_to_bytes(&[false, true, true]);
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x10;
            assert!(mask_from_bytes(&bad).is_err(), "flip at {i}");
        }
        let mut w = Writer::new(Kind::Mask);
        w.varint(3);
        w.bytes(&[0b1000]); // bit 3 of a 3-code mask
        assert!(matches!(mask_from_bytes(&w.finish()), Err(Error::Format { .. })));
        assert!(mask_from_bytes(&UsageCounts::zeros(2).to_bytes()).is_err()); // another kind
    }
}
