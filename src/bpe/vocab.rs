//! A vocabulary's token bytes, indexed by id, in one arena, and the index
//! from bytes back to id that tiktoken's rule needs (a piece that is a token
//! is emitted whole; the pair table is found from every token's cuts).
//!
//! Why not a `Vec<Vec<u8>>` and a `HashMap<Vec<u8>, u32>`: that is two heap
//! allocations per token (400,000 for o200k, and as many frees when the
//! model is dropped), and every look-up hashes the piece, then follows a
//! pointer to the key to compare it. Here the bytes are one `Vec<u8>` with a
//! `(start, end)` per id, and the index is an open-addressed table of
//! 16-byte slots holding a token of up to 8 bytes itself (most of a real
//! vocabulary's tokens, and most of their prefixes and suffixes), a longer
//! one's full hash: a probe reads one slot, and the arena only for a long
//! token whose hash matches.
//!
//! The hash is polynomial, `H(s) = sum (s[i] + 1) * K^(n-1-i)` (mod 2^64),
//! then mixed: the hashes of all prefixes and of all suffixes of a token of
//! L bytes are found in O(L) together ([`CutHashes`]), so looking up the
//! L - 1 cuts of every token (building the pair table) hashes each byte
//! twice instead of L times.
//!
//! Not handled: a hash that resists crafted collisions (as with the FxHash
//! maps this replaced, a file made to collide loads slowly, never wrongly);
//! token bytes adding up to 4 GiB or more (refused: offsets are 32-bit).

use crate::error::{Error, Result};

/// The multiplier of the polynomial hash (odd).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// One slot of the index: a token of up to 8 bytes is its own key (the
/// bytes, zero-padded, with the length beside them), so a probe that finds
/// it reads nothing else; a longer token's key is its 64-bit hash, and the
/// bytes are compared in the arena only when key and length match.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// the bytes as a little-endian word (up to 8), else the mixed hash
    key: u64,
    /// `length << 32 | id`; all ones when free (no token is 4 GiB long)
    meta: u64,
}

impl Slot {
    const EMPTY: Slot = Slot { key: 0, meta: u64::MAX };

    /// The key of bytes `t` whose mixed hash is `h`.
    #[inline(always)]
    fn key(t: &[u8], h: u64) -> u64 {
        if t.len() <= 8 {
            let mut w = [0u8; 8];
            w[..t.len()].copy_from_slice(t);
            u64::from_le_bytes(w)
        } else {
            h
        }
    }
}

/// The polynomial hash of `s` (see the module docs), before mixing. Four
/// bytes a step, so the chain of dependent multiplies is a quarter as long.
#[inline]
fn poly(s: &[u8]) -> u64 {
    const K2: u64 = K.wrapping_mul(K);
    const K3: u64 = K2.wrapping_mul(K);
    const K4: u64 = K3.wrapping_mul(K);
    let mut h = 0u64;
    let mut c = s.chunks_exact(4);
    for q in &mut c {
        let v = (q[0] as u64 + 1)
            .wrapping_mul(K3)
            .wrapping_add((q[1] as u64 + 1).wrapping_mul(K2))
            .wrapping_add((q[2] as u64 + 1).wrapping_mul(K))
            .wrapping_add(q[3] as u64 + 1);
        h = h.wrapping_mul(K4).wrapping_add(v);
    }
    for &b in c.remainder() {
        h = h.wrapping_mul(K).wrapping_add(b as u64 + 1);
    }
    h
}

/// A bijective mix of the polynomial hash (murmur3's finaliser): the slot
/// is taken from the top bits.
#[inline(always)]
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// The (mixed) hashes of every prefix and every suffix of one token.
#[derive(Default)]
pub struct CutHashes {
    /// `pre[k]`: the hash of `t[..k]`
    pre: Vec<u64>,
    /// `suf[k]`: the hash of `t[k..]`
    suf: Vec<u64>,
}

impl CutHashes {
    /// Compute them for `t` (O(t.len()), reusing the buffers).
    pub fn of(&mut self, t: &[u8]) {
        let n = t.len();
        self.pre.clear();
        self.suf.clear();
        self.suf.resize(n + 1, 0);
        let mut h = 0u64;
        self.pre.push(mix(0));
        for &b in t {
            h = h.wrapping_mul(K).wrapping_add(b as u64 + 1);
            self.pre.push(mix(h));
        }
        let (mut h, mut p) = (0u64, 1u64);
        self.suf[n] = mix(0);
        for k in (0..n).rev() {
            h = h.wrapping_add((t[k] as u64 + 1).wrapping_mul(p));
            p = p.wrapping_mul(K);
            self.suf[k] = mix(h);
        }
    }

    /// The hash of `t[..k]`.
    #[inline(always)]
    pub fn prefix(&self, k: usize) -> u64 {
        self.pre[k]
    }

    /// The hash of `t[k..]`.
    #[inline(always)]
    pub fn suffix(&self, k: usize) -> u64 {
        self.suf[k]
    }
}

/// The bytes of every id, and (once [`Tokens::index`] ran) the index from
/// bytes to id.
#[derive(Clone, Default)]
pub struct Tokens {
    bytes: Vec<u8>,
    /// per id, its bytes' `(start, end)` in `bytes`; `(0, 0)`: unused
    span: Vec<(u32, u32)>,
    /// the index (see [`Slot`]); empty when not built
    slots: Vec<Slot>,
    shift: u32,
    /// the longest indexed token's length
    longest: usize,
}

/// An error for token bytes past the 32-bit offsets.
fn too_big(what: &str) -> Error {
    Error::Invalid(format!("{what}: the tokens' bytes would add up to 4 GiB or more"))
}

impl Tokens {
    /// `ids` unused ids; room for `bytes` bytes of tokens.
    pub fn new(ids: usize, bytes: usize) -> Self {
        Tokens { bytes: Vec::with_capacity(bytes), span: vec![(0, 0); ids], slots: Vec::new(), shift: 64, longest: 0 }
    }

    /// The arena's end after `more` bytes, if the offsets still fit.
    #[inline]
    fn end_after(&self, more: usize, what: impl FnOnce() -> String) -> Result<u32> {
        u32::try_from(self.bytes.len() + more).map_err(|_| too_big(&what()))
    }

    /// Give (unused) `id` the bytes `t`.
    pub fn set(&mut self, id: u32, t: &[u8]) -> Result<()> {
        let start = self.bytes.len() as u32;
        let end = self.end_after(t.len(), || format!("token {id}"))?;
        self.bytes.extend_from_slice(t);
        self.span[id as usize] = (start, end);
        Ok(())
    }

    /// Give (unused) `id` the bytes of `a` followed by those of `b`.
    pub fn set_concat(&mut self, id: u32, a: u32, b: u32) -> Result<()> {
        let (sa, ea) = self.span[a as usize];
        let (sb, eb) = self.span[b as usize];
        let start = self.bytes.len() as u32;
        let end = self.end_after((ea - sa) as usize + (eb - sb) as usize, || format!("id {id}"))?;
        self.bytes.extend_from_within(sa as usize..ea as usize);
        self.bytes.extend_from_within(sb as usize..eb as usize);
        self.span[id as usize] = (start, end);
        Ok(())
    }

    /// The number of ids (used or not).
    #[inline]
    pub fn len(&self) -> usize {
        self.span.len()
    }

    /// True if there are no ids.
    pub fn is_empty(&self) -> bool {
        self.span.is_empty()
    }

    /// Grow (or shrink) to `ids` ids; new ones unused.
    pub fn resize(&mut self, ids: usize) {
        self.span.resize(ids, (0, 0));
    }

    /// The bytes of `id` (empty if unused or out of range).
    #[inline(always)]
    pub fn bytes_of(&self, id: u32) -> &[u8] {
        match self.span.get(id as usize) {
            Some(&(s, e)) => &self.bytes[s as usize..e as usize],
            None => &[],
        }
    }

    /// The length of `id`'s bytes (0 if unused or out of range).
    #[inline(always)]
    pub fn len_of(&self, id: u32) -> usize {
        self.span.get(id as usize).map_or(0, |&(s, e)| (e - s) as usize)
    }

    /// `(id, bytes)` of every used id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.span
            .iter()
            .enumerate()
            .filter(|(_, &(s, e))| e > s)
            .map(|(i, &(s, e))| (i as u32, &self.bytes[s as usize..e as usize]))
    }

    /// Build the index over `ids` (used ids, in the order given): the first
    /// of two ids with the same bytes is kept, and `dup(kept, other)` is
    /// called for the other; stop at the first error `dup` returns.
    pub fn index(
        &mut self,
        ids: impl ExactSizeIterator<Item = u32>,
        mut dup: impl FnMut(u32, u32) -> Result<()>,
    ) -> Result<()> {
        let size = (2 * ids.len()).next_power_of_two().max(16);
        self.shift = 64 - size.trailing_zeros();
        self.slots = vec![Slot::EMPTY; size];
        let mask = size - 1;
        let mut longest = 0;
        for id in ids {
            let t = self.bytes_of(id);
            longest = longest.max(t.len());
            let h = mix(poly(t));
            let (key, len) = (Slot::key(t, h), t.len() as u64);
            let mut i = (h >> self.shift) as usize;
            loop {
                let s = self.slots[i];
                if s.meta == Slot::EMPTY.meta {
                    self.slots[i] = Slot { key, meta: len << 32 | id as u64 };
                    break;
                }
                if s.key == key && s.meta >> 32 == len && (len <= 8 || self.bytes_of(s.meta as u32) == t) {
                    dup(s.meta as u32, id)?;
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        self.longest = longest;
        Ok(())
    }

    /// The hash [`Tokens::find_hashed`] and [`Tokens::prefetch`] take for
    /// `piece` (for a caller that asks for the slot before it looks up).
    #[inline]
    pub fn hash(piece: &[u8]) -> u64 {
        mix(poly(piece))
    }

    /// The id whose bytes are `piece` (through the index; None if it was
    /// not built). A piece longer than every token is not hashed (the
    /// encoder asks this of every long piece: `"a" * 1_000_000` is one).
    #[inline]
    pub fn find(&self, piece: &[u8]) -> Option<u32> {
        if self.slots.is_empty() || piece.len() > self.longest {
            return None;
        }
        self.find_hashed(piece, mix(poly(piece)))
    }

    /// [`Self::find`] with the piece's mixed hash (from [`CutHashes`]).
    #[inline(always)]
    pub fn find_hashed(&self, piece: &[u8], h: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let (key, len) = (Slot::key(piece, h), piece.len() as u64);
        let mut i = (h >> self.shift) as usize;
        loop {
            let s = self.slots[i];
            if s.key == key && s.meta >> 32 == len && (len <= 8 || self.bytes_of(s.meta as u32) == piece) {
                return Some(s.meta as u32);
            }
            if s.meta == Slot::EMPTY.meta {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Start loading the slot a look-up of the mixed hash `h` reads first
    /// (a hint: nothing is computed differently).
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        if let Some(s) = self.slots.get((h >> self.shift) as usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch reads nothing architecturally and cannot
            // fault; SSE is part of the x86_64 baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(s as *const Slot as *const i8)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = s;
        }
    }

    /// `(bytes, id)` of every indexed id (one per distinct bytes), in no order.
    pub fn indexed(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        self.slots.iter().filter(|s| s.meta != Slot::EMPTY.meta).map(|s| (self.bytes_of(s.meta as u32), s.meta as u32))
    }

    /// The number of indexed ids.
    pub fn indexed_len(&self) -> usize {
        self.slots.iter().filter(|s| s.meta != Slot::EMPTY.meta).count()
    }

    /// Total bytes of the used ids.
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
impl Tokens {
    /// From `tokens[id]` (empty: unused), not indexed.
    pub fn from_vecs(tokens: &[Vec<u8>]) -> Self {
        let mut t = Tokens::new(tokens.len(), 0);
        for (i, b) in tokens.iter().enumerate() {
            t.set(i as u32, b).expect("small");
        }
        t
    }
}

impl std::ops::Index<usize> for Tokens {
    type Output = [u8];
    #[inline(always)]
    fn index(&self, id: usize) -> &[u8] {
        let (s, e) = self.span[id];
        &self.bytes[s as usize..e as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_at_a_time_equals_byte_by_byte_and_cut_hashes() {
        let t: Vec<u8> = (0..41u32).map(|i| (i * 37 % 256) as u8).collect();
        let mut c = CutHashes::default();
        c.of(&t);
        for k in 0..=t.len() {
            assert_eq!(c.prefix(k), mix(poly(&t[..k])), "prefix {k}");
            assert_eq!(c.suffix(k), mix(poly(&t[k..])), "suffix {k}");
        }
        // a zero byte counts (no collision with the shorter string)
        assert_ne!(poly(b"\0a"), poly(b"a"));
    }

    #[test]
    fn index_finds_every_token_and_keeps_the_first_of_equal_bytes() {
        let words: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("w{i}").into_bytes()).collect();
        let mut t = Tokens::new(words.len() + 1, 0);
        for (i, w) in words.iter().enumerate() {
            t.set(i as u32, w).unwrap();
        }
        t.set(words.len() as u32, b"w7").unwrap();
        let mut dups = vec![];
        t.index(0..words.len() as u32 + 1, |a, b| {
            dups.push((a, b));
            Ok(())
        })
        .unwrap();
        assert_eq!(dups, vec![(7, words.len() as u32)]);
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.find(w), Some(i as u32));
        }
        assert_eq!(t.find(b"x"), None);
        assert_eq!(t.find(&b"w1".repeat(1000)), None);
        assert_eq!(t.find(b""), None);
        assert_eq!(t.indexed_len(), words.len());
        t.set_concat(0, 1, 2).ok(); // (id 0 re-pointed: the arena grows, old bytes stay)
        assert_eq!(&t[0], b"w1w2");
    }
}
