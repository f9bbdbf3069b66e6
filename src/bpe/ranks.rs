//! Vocabularies given by ranks (tiktoken's view): every way a token splits
//! into two tokens, the split tiktoken's merge loop builds a token from, and
//! the bound on ids read from a file.
//!
//! A token of L bytes has at most L - 1 two-token splits, and all of them are
//! found in O(L) by walking two compacted tries, one over the tokens' bytes
//! and one over their reversed bytes: the first walk marks the cuts whose
//! prefix is a token, the second the cuts whose suffix is one. Testing each
//! cut by hashing its prefix and suffix would be O(L^2) per token: 10^10
//! byte hashes for one 100 KB run of `=` that BPE training makes into a token.
//!
//! Not handled: vocabularies of 2^31 tokens or more (refused).

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

/// The engine's hard cap on the total bytes of a vocabulary's tokens (1 GiB).
///
/// Ids do not bound this: merges that each join a token with itself double
/// its length, so 30 merges of a file under 2 KB describe a 1 GiB token. The
/// total is computed from the merge table before anything is built
/// ([`token_bytes_total`], lengths only), and a model past the cap is refused;
/// the readers hold files to a tighter limit relative to their size
/// (`tokenforge.formats.bpe_data.token_bytes_limit`).
pub const MAX_TOKEN_BYTES: u64 = 1 << 30;

/// The total bytes of the tokens `byte_ids` and `merges` define (each merge's
/// token is its parents' bytes), in one linear pass over lengths only;
/// saturating, so a hostile table cannot overflow it. An id used before it is
/// defined counts 0 (the builder reports it).
pub fn token_bytes_total(byte_ids: &[u32; 256], merges: &[(u32, u32, u32)]) -> u64 {
    let mut len: FxHashMap<u32, u64> = FxHashMap::default();
    len.reserve(256 + merges.len());
    for &id in byte_ids {
        len.insert(id, 1);
    }
    let mut total = 256u64;
    for &(a, b, z) in merges {
        let n = len.get(&a).copied().unwrap_or(0).saturating_add(len.get(&b).copied().unwrap_or(0));
        len.insert(z, n);
        total = total.saturating_add(n);
    }
    total
}

/// The error for tokens past `limit` bytes in all.
pub fn token_bytes_error(total: u64, limit: u64) -> Error {
    Error::Invalid(format!(
        "the merges define tokens of {} bytes in all, more than the limit of {limit} bytes \
         (merges that repeatedly join a token with itself double its length); refused before \
         anything is built",
        if total == u64::MAX { "2^64 or more".to_string() } else { total.to_string() }
    ))
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

/// A compacted trie (radix tree) of byte strings held in one arena. A node
/// is reached by an edge labelled with a slice of the arena; chains of
/// single-child nodes are one edge, so there are at most two nodes per
/// string and a walk compares bytes sequentially instead of doing a hash
/// look-up per byte (a long run of `=` is one edge, not 100,000 nodes).
struct Radix {
    arena: Vec<u8>,
    /// per node: the label's start in `arena`, its length, the id of the
    /// string ending here (NO_NODE: none)
    start: Vec<usize>,
    len: Vec<u32>,
    ends: Vec<u32>,
    /// `(first byte of the label << 32 | parent) -> child`
    edges: FxHashMap<u64, u32>,
}

#[inline(always)]
fn edge(node: u32, b: u8) -> u64 {
    ((b as u64) << 32) | node as u64
}

impl Radix {
    fn new(total: usize, strings: usize) -> Self {
        let mut edges = FxHashMap::default();
        edges.reserve(2 * strings);
        Radix { arena: Vec::with_capacity(total), start: vec![0], len: vec![0], ends: vec![NO_NODE], edges }
    }

    fn node(&mut self, start: usize, len: usize, end: u32) -> u32 {
        self.start.push(start);
        self.len.push(len as u32);
        self.ends.push(end);
        (self.ends.len() - 1) as u32
    }

    /// Add a string (already appended to the arena at `from..`) with its id.
    fn insert(&mut self, from: usize, id: u32) {
        let n = self.arena.len();
        let (mut node, mut pos) = (0u32, from);
        loop {
            if pos == n {
                self.ends[node as usize] = id;
                return;
            }
            let Some(&child) = self.edges.get(&edge(node, self.arena[pos])) else {
                let leaf = self.node(pos, n - pos, id);
                self.edges.insert(edge(node, self.arena[pos]), leaf);
                return;
            };
            let (cs, cl) = (self.start[child as usize], self.len[child as usize] as usize);
            let m = common(&self.arena[cs..cs + cl], &self.arena[pos..n]);
            if m == cl {
                node = child;
                pos += m;
                continue;
            }
            // split the edge after m bytes: node -> mid -> child
            let mid = self.node(cs, m, NO_NODE);
            self.edges.insert(edge(node, self.arena[pos]), mid);
            self.start[child as usize] = cs + m;
            self.len[child as usize] = (cl - m) as u32;
            self.edges.insert(edge(mid, self.arena[cs + m]), child);
            node = mid;
            pos += m;
        }
    }

    /// Call `f(k, id)` for every stored string that is `key[..k]`, `0 < k < key.len()`.
    fn prefixes(&self, key: &[u8], mut f: impl FnMut(usize, u32)) {
        let (mut node, mut pos) = (0u32, 0usize);
        while pos < key.len() {
            let Some(&child) = self.edges.get(&edge(node, key[pos])) else { return };
            let (cs, cl) = (self.start[child as usize], self.len[child as usize] as usize);
            if pos + cl >= key.len() || self.arena[cs..cs + cl] != key[pos..pos + cl] {
                return;
            }
            node = child;
            pos += cl;
            if self.ends[node as usize] != NO_NODE {
                f(pos, self.ends[node as usize]);
            }
        }
    }
}

/// The length of the common prefix of `a` and `b`.
fn common(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    // 8 bytes at a time, then the rest
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Every two-token split of every token of a vocabulary (see the module docs).
pub struct SplitIndex {
    forward: Radix,
    backward: Radix,
}

impl SplitIndex {
    /// Index `(bytes, id)` pairs; the bytes must be distinct and non-empty.
    pub fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)> + Clone) -> Result<Self> {
        let (total, count) = tokens.clone().fold((0usize, 0usize), |(t, c), (b, _)| (t + b.len(), c + 1));
        if count >= (NO_NODE / 2 - 1) as usize {
            return Err(Error::Invalid(format!("{count} tokens are more than the {} supported", NO_NODE / 2 - 2)));
        }
        let mut forward = Radix::new(total, count);
        let mut backward = Radix::new(total, count);
        for (t, id) in tokens {
            let from = forward.arena.len();
            forward.arena.extend_from_slice(t);
            forward.insert(from, id);
            backward.arena.extend(t.iter().rev());
            backward.insert(from, id);
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
        self.forward.prefixes(t, |k, id| scratch[k] = id);
        let reversed: Vec<u8> = t.iter().rev().copied().collect();
        self.backward.prefixes(&reversed, |j, right| {
            let cut = n - j;
            if scratch[cut] != NO_NODE {
                f(cut, scratch[cut], right);
            }
        });
    }
}

/// For each token `which[k]` of `tokens` (`(bytes, id)`, bytes distinct):
/// its first cut into two tokens that both have smaller ids, as (left id,
/// right id), or None. O(total bytes).
pub fn first_lower_splits(tokens: &[(&[u8], u32)], which: &[usize]) -> Result<Vec<Option<(u32, u32)>>> {
    let index = SplitIndex::new(tokens.iter().map(|&(t, id)| (t, id)))?;
    let mut scratch = Vec::new();
    let mut out = Vec::with_capacity(which.len());
    for &k in which {
        let (t, id) = *tokens.get(k).ok_or_else(|| Error::Invalid(format!("no token {k}")))?;
        let mut best = None;
        // cuts come in decreasing order: the last one kept is the first cut
        index.splits(t, &mut scratch, |_, l, r| {
            if l < id && r < id {
                best = Some((l, r));
            }
        });
        out.push(best);
    }
    Ok(out)
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
        // a, aa, aaaa, ..., a^(2^20): testing every cut by hashing would hash 2^40 bytes
        let toks: Vec<Vec<u8>> = (0..=20).map(|k| vec![b'a'; 1 << k]).collect();
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
