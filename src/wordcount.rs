//! Counting the unique pieces of a corpus: the first step of BPE training
//! and of the LZ78 strategies that rank whole chunks.
//!
//! Texts are split by the pre-tokenizer in parallel (contiguous groups of
//! texts of about equal bytes, one local map each, merged in order), and only
//! unique pieces with u64 counts are kept: memory is bounded by the unique
//! pieces, never by the corpus.
//!
//! Not handled: normalization (the caller's, before counting) and eviction
//! of rare pieces (every unique piece is kept).

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::pretok::Pretokenizer;

/// Unique pieces of a corpus with their counts.
pub struct WordCounter {
    pretok: Pretokenizer,
    map: FxHashMap<Box<[u8]>, u64>,
    total_pieces: u64,
    total_bytes: u64,
}

impl WordCounter {
    pub fn new(pretok: Pretokenizer) -> Self {
        WordCounter { pretok, map: FxHashMap::default(), total_pieces: 0, total_bytes: 0 }
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

    /// The unique pieces sorted by bytes (a deterministic order).
    pub fn into_sorted(self) -> Vec<(Box<[u8]>, u64)> {
        let mut v: Vec<(Box<[u8]>, u64)> = self.map.into_iter().collect();
        v.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }
}
