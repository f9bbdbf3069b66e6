//! Vocabularies given by ranks (tiktoken's view): every way a token splits
//! into two tokens, the split tiktoken's merge loop builds a token from, and
//! the bound on ids read from a file.
//!
//! A token of L bytes has at most L - 1 two-token splits, and all of them are
//! found in O(L) by walking two tries, one over the tokens' bytes and one over
//! their reversed bytes: the first walk marks the cuts whose prefix is a token,
//! the second the cuts whose suffix is one. Testing each cut by hashing its
//! prefix and suffix would be O(L^2) per token: 10^10 byte hashes for one
//! 100 KB run of `=` that BPE training makes into a token.
//!
//! Not handled: vocabularies whose tokens hold 2^32 bytes or more in total
//! (the tries number their nodes with u32; building one is refused).

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

/// The first id a vocabulary of `entries` ids (bytes, merges and specials)
/// may not use: `entries` plus a slack of `max(1024, entries / 8)`.
///
/// Real vocabularies are dense or nearly so (tiktoken's cl100k_base leaves 16
/// ids unused among its specials); an id far beyond the number of entries is
/// a damaged or hostile file, and tables indexed by id are sized by the
/// largest id, so the bound keeps their size proportional to the file.
pub fn id_limit(entries: usize) -> u64 {
    entries as u64 + (entries as u64 / 8).max(1024)
}

/// An error for an id at or beyond [`id_limit`].
pub fn id_too_large(what: &str, id: u64, entries: usize) -> Error {
    Error::Invalid(format!(
        "{what} has id {id}, too large for a vocabulary of {entries} entries (ids must be below {}: \
         the number of entries plus a slack of {})",
        id_limit(entries),
        id_limit(entries) - entries as u64
    ))
}

const NO_NODE: u32 = u32::MAX;

/// A byte trie with one hash map of edges, `(byte << 32 | node) -> child`
/// (the node in the low bits: FxHash's bucket comes from the low bits, and
/// long runs of one byte would otherwise put every edge in a few buckets).
struct Trie {
    edges: FxHashMap<u64, u32>,
    /// token id ending at each node (NO_NODE: none)
    ends: Vec<u32>,
}

#[inline(always)]
fn edge(node: u32, b: u8) -> u64 {
    ((b as u64) << 32) | node as u64
}

impl Trie {
    fn new(capacity: usize) -> Self {
        let mut edges = FxHashMap::default();
        edges.reserve(capacity);
        let mut ends = Vec::with_capacity(capacity + 1);
        ends.push(NO_NODE);
        Trie { edges, ends }
    }

    fn insert(&mut self, bytes: impl Iterator<Item = u8>, id: u32) {
        let mut node = 0u32;
        for b in bytes {
            let next = self.ends.len() as u32;
            let child = *self.edges.entry(edge(node, b)).or_insert(next);
            if child == next {
                self.ends.push(NO_NODE);
            }
            node = child;
        }
        self.ends[node as usize] = id;
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> Option<u32> {
        self.edges.get(&edge(node, b)).copied()
    }
}

/// Every two-token split of every token of a vocabulary (see the module docs).
pub struct SplitIndex {
    forward: Trie,
    backward: Trie,
}

impl SplitIndex {
    /// Index `(bytes, id)` pairs; the bytes must be distinct and non-empty.
    pub fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)> + Clone) -> Result<Self> {
        let total: u64 = tokens.clone().map(|(t, _)| t.len() as u64).sum();
        if total >= (NO_NODE - 1) as u64 {
            return Err(Error::Invalid(format!("the tokens hold {total} bytes in all; at most {} are supported", NO_NODE - 2)));
        }
        let mut forward = Trie::new(total as usize);
        let mut backward = Trie::new(total as usize);
        for (t, id) in tokens {
            forward.insert(t.iter().copied(), id);
            backward.insert(t.iter().rev().copied(), id);
        }
        Ok(SplitIndex { forward, backward })
    }

    /// Call `f(cut, left id, right id)` for every cut `0 < cut < t.len()`
    /// where `t[..cut]` and `t[cut..]` are both tokens, in decreasing `cut`
    /// order. `scratch` is reused between calls. O(t.len()).
    pub fn splits(&self, t: &[u8], scratch: &mut Vec<u32>, mut f: impl FnMut(usize, u32, u32)) {
        let n = t.len();
        if n < 2 {
            return;
        }
        scratch.clear();
        scratch.resize(n, NO_NODE);
        let mut node = 0u32;
        for (k, &b) in t[..n - 1].iter().enumerate() {
            match self.forward.child(node, b) {
                Some(c) => node = c,
                None => break,
            }
            scratch[k + 1] = self.forward.ends[node as usize];
        }
        let mut node = 0u32;
        for j in 1..n {
            match self.backward.child(node, t[n - j]) {
                Some(c) => node = c,
                None => break,
            }
            let right = self.backward.ends[node as usize];
            let cut = n - j;
            if right != NO_NODE && scratch[cut] != NO_NODE {
                f(cut, scratch[cut], right);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(vocab: &FxHashMap<Vec<u8>, u32>, t: &[u8]) -> Vec<(usize, u32, u32)> {
        let mut v = vec![];
        for cut in (1..t.len()).rev() {
            if let (Some(&l), Some(&r)) = (vocab.get(&t[..cut]), vocab.get(&t[cut..])) {
                v.push((cut, l, r));
            }
        }
        v
    }

    #[test]
    fn limit_is_entries_plus_slack() {
        assert_eq!(id_limit(0), 1024);
        assert_eq!(id_limit(100_000), 112_500);
        // a 2^32 - 1 id never fits a vocabulary that could be read into memory
        assert!(id_limit(1 << 20) < u32::MAX as u64);
    }

    #[test]
    fn splits_of_a_doubling_chain_are_found_in_linear_time() {
        // a, aa, aaaa, ..., a^(2^16): testing every cut by hashing would hash 2^32 bytes
        let toks: Vec<Vec<u8>> = (0..=16).map(|k| vec![b'a'; 1 << k]).collect();
        let idx = SplitIndex::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32))).unwrap();
        let mut s = vec![];
        for (i, t) in toks.iter().enumerate().skip(1) {
            let mut got = vec![];
            idx.splits(t, &mut s, |c, l, r| got.push((c, l, r)));
            let h = i as u32 - 1;
            assert_eq!(got, vec![(t.len() / 2, h, h)]);
        }
    }

    proptest::proptest! {
        #[test]
        fn splits_match_naive(words in proptest::collection::hash_set("[ab]{1,12}", 1..40)) {
            let vocab: FxHashMap<Vec<u8>, u32> = words.iter().enumerate().map(|(i, w)| (w.as_bytes().to_vec(), i as u32)).collect();
            let idx = SplitIndex::new(vocab.iter().map(|(t, &i)| (&t[..], i))).unwrap();
            let mut s = vec![];
            for t in vocab.keys() {
                let mut got = vec![];
                idx.splits(t, &mut s, |c, l, r| got.push((c, l, r)));
                proptest::prop_assert_eq!(got, naive(&vocab, t));
            }
        }
    }
}
