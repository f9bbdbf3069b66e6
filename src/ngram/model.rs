//! The mixedgram vocabulary: encoding (greedy or optimal) and decoding.
//!
//! Lookup structure. The vocabulary has at most 3,840 n-gram keys. They live
//! in one open-addressing table of 8,192 slots (keys and ids in separate
//! arrays, 80 KiB in all, L2-resident) probed linearly; key 0 marks an empty
//! slot (no n-gram key is 0). A 64 Ki table indexed by the first two bytes of
//! a position gives the set of lengths n for which some vocabulary n-gram
//! starts with those two bytes (one bit per n), so the greedy parser probes
//! only lengths that can match, longest first, usually one or two probes per
//! token instead of seven.
//!
//! Not handled: NUL bytes in the text (callers strip them: a NUL inside a
//! window would alias a shorter key).

use super::{key_at, key_len, load_word, NgramError, Result, BYTE_TOKENS, MAX_N, MIN_N, NGRAM_SLOTS, VOCAB_SIZE};

const TABLE_BITS: u32 = 13;
const TABLE_SIZE: usize = 1 << TABLE_BITS;

/// How text is cut into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// At each position the longest vocabulary n-gram, else the byte.
    Greedy,
    /// The fewest tokens (dynamic programming); ties prefer the longer token
    /// at the earlier position.
    Optimal,
}

impl Parse {
    pub fn parse(s: &str) -> Result<Parse> {
        match s {
            "greedy" => Ok(Parse::Greedy),
            "optimal" => Ok(Parse::Optimal),
            _ => Err(NgramError::Invalid(format!("unknown parse {s:?}; expected \"greedy\" or \"optimal\""))),
        }
    }
}

/// What an id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unused,
    Byte,
    Ngram,
    Special,
}

pub struct Model {
    /// Slot i (id 256 + i): the n-gram key, 0 if unused or special.
    slots: Vec<u64>,
    table_keys: Vec<u64>,
    table_ids: Vec<u16>,
    /// By first two bytes: bit n - 2 set if a vocabulary n-gram starts so.
    first2: Vec<u8>,
    kind: Vec<Kind>,
    /// The bytes of every id (n-grams right-aligned keys turned back into bytes).
    tok: Vec<[u8; 8]>,
    tok_len: Vec<u8>,
    specials: Vec<(u16, Vec<u8>)>,
}

#[inline(always)]
fn hash(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize
}

impl Model {
    /// A vocabulary from its n-gram slots (`ngrams[i]` is id 256 + i; an empty
    /// entry is unused; at most 3,840) and special tokens (id, text) placed
    /// in unused slots.
    pub fn new(ngrams: &[Vec<u8>], specials: &[(u32, Vec<u8>)]) -> Result<Model> {
        if ngrams.len() > NGRAM_SLOTS {
            return Err(NgramError::Invalid(format!("{} n-grams given; a mixedgram vocabulary has {NGRAM_SLOTS} slots", ngrams.len())));
        }
        let mut slots = vec![0u64; NGRAM_SLOTS];
        for (i, g) in ngrams.iter().enumerate() {
            if g.is_empty() {
                continue;
            }
            if !(MIN_N..=MAX_N).contains(&g.len()) {
                return Err(NgramError::Invalid(format!(
                    "n-gram of id {} has {} bytes; n-grams have {MIN_N} to {MAX_N} bytes",
                    BYTE_TOKENS + i,
                    g.len()
                )));
            }
            if g.contains(&0) {
                return Err(NgramError::Invalid(format!("n-gram of id {} contains a NUL byte (NUL is reserved)", BYTE_TOKENS + i)));
            }
            slots[i] = super::key_of(g);
        }
        Self::from_keys(slots, specials)
    }

    /// As [`Model::new`], from keys (0 = unused), exactly 3,840 of them.
    pub fn from_keys(slots: Vec<u64>, specials: &[(u32, Vec<u8>)]) -> Result<Model> {
        assert_eq!(slots.len(), NGRAM_SLOTS);
        let mut table_keys = vec![0u64; TABLE_SIZE];
        let mut table_ids = vec![0u16; TABLE_SIZE];
        let mut first2 = vec![0u8; 1 << 16];
        let mut kind = vec![Kind::Unused; VOCAB_SIZE];
        let mut tok = vec![[0u8; 8]; VOCAB_SIZE];
        let mut tok_len = vec![0u8; VOCAB_SIZE];
        for b in 0..BYTE_TOKENS {
            kind[b] = Kind::Byte;
            tok[b][0] = b as u8;
            tok_len[b] = 1;
        }
        for (i, &key) in slots.iter().enumerate() {
            if key == 0 {
                continue;
            }
            let id = (BYTE_TOKENS + i) as u16;
            let n = key_len(key);
            let mut h = hash(key);
            loop {
                if table_keys[h] == 0 {
                    table_keys[h] = key;
                    table_ids[h] = id;
                    break;
                }
                if table_keys[h] == key {
                    return Err(NgramError::Invalid(format!(
                        "ids {} and {id} are the same n-gram {:?}",
                        table_ids[h],
                        String::from_utf8_lossy(&super::key_bytes(key))
                    )));
                }
                h = (h + 1) & (TABLE_SIZE - 1);
            }
            first2[(key >> (8 * (n - 2))) as usize] |= 1 << (n - 2);
            kind[id as usize] = Kind::Ngram;
            tok[id as usize][..n].copy_from_slice(&key.to_be_bytes()[8 - n..]);
            tok_len[id as usize] = n as u8;
        }
        let mut sp = Vec::with_capacity(specials.len());
        for (id, text) in specials {
            let i = *id as usize;
            if !(BYTE_TOKENS..VOCAB_SIZE).contains(&i) {
                return Err(NgramError::Invalid(format!("special token id {id} is outside the n-gram ids {BYTE_TOKENS}..{}", VOCAB_SIZE - 1)));
            }
            if kind[i] != Kind::Unused {
                return Err(NgramError::Invalid(format!("special token id {id} is already used by an n-gram or another special token")));
            }
            if text.is_empty() {
                return Err(NgramError::Invalid(format!("special token id {id} has empty text")));
            }
            kind[i] = Kind::Special;
            sp.push((*id as u16, text.clone()));
        }
        sp.sort();
        Ok(Model { slots, table_keys, table_ids, first2, kind, tok, tok_len, specials: sp })
    }

    /// Slot keys (id 256 + i), 0 for unused and special slots.
    pub fn slots(&self) -> &[u64] {
        &self.slots
    }

    pub fn specials(&self) -> &[(u16, Vec<u8>)] {
        &self.specials
    }

    /// Number of n-grams in the vocabulary.
    pub fn ngram_count(&self) -> usize {
        self.slots.iter().filter(|&&k| k != 0).count()
    }

    #[inline(always)]
    pub fn lookup(&self, key: u64) -> Option<u16> {
        let mut h = hash(key);
        loop {
            let k = self.table_keys[h];
            if k == key {
                return Some(self.table_ids[h]);
            }
            if k == 0 {
                return None;
            }
            h = (h + 1) & (TABLE_SIZE - 1);
        }
    }

    /// The bits (n - 2) of lengths worth probing at a position with word `w`
    /// and `rem` bytes left (rem >= 2).
    #[inline(always)]
    fn lengths(&self, w: u64, rem: usize) -> u32 {
        let m = self.first2[(w >> 48) as usize] as u32;
        if rem >= MAX_N {
            m
        } else {
            m & ((1u32 << (rem - 1)) - 1)
        }
    }

    /// The longest vocabulary token at a position: (id, length).
    #[inline(always)]
    fn longest(&self, w: u64, rem: usize) -> (u16, usize) {
        if rem >= 2 {
            let mut m = self.lengths(w, rem);
            while m != 0 {
                let b = 31 - m.leading_zeros();
                let n = b as usize + 2;
                if let Some(id) = self.lookup(w >> (64 - 8 * n)) {
                    return (id, n);
                }
                m &= !(1 << b);
            }
        }
        ((w >> 56) as u16, 1)
    }

    /// Greedy parse of `text` starting at `start`, emitting tokens while the
    /// position is before `stop`; returns where the next token starts (>= stop
    /// unless the text ended). A token only looks 8 bytes ahead, so encoding
    /// in consecutive ranges gives exactly the whole-text result.
    pub fn encode_greedy_range(&self, text: &[u8], start: usize, stop: usize, out: &mut Vec<u16>) -> usize {
        let len = text.len();
        let stop = stop.min(len);
        let mut p = start;
        out.reserve((stop.saturating_sub(start)) / 3 + 8);
        // Performance: the fast loop needs no bounds handling (8 bytes are
        // always readable); the last few positions take the padded path.
        while p < stop && p + 8 <= len {
            let w = u64::from_be_bytes(text[p..p + 8].try_into().unwrap());
            let (id, n) = self.longest(w, MAX_N);
            out.push(id);
            p += n;
        }
        while p < stop {
            let (id, n) = self.longest(load_word(text, p), len - p);
            out.push(id);
            p += n;
        }
        p
    }

    /// Greedy longest match over the whole text (no NUL in `text`).
    pub fn encode_greedy(&self, text: &[u8]) -> Vec<u16> {
        let mut out = Vec::with_capacity(text.len() / 3 + 8);
        self.encode_greedy_range(text, 0, text.len(), &mut out);
        out
    }

    /// The fewest tokens (no NUL in `text`). Memory: one byte per position
    /// for the chosen lengths, plus the output.
    pub fn encode_optimal(&self, text: &[u8]) -> Vec<u16> {
        let len = text.len();
        // choice[i]: length of the token starting at i on the best path of text[i..].
        let mut choice = vec![1u8; len];
        // cost[i & 15]: tokens needed for text[i..]; only i..i+8 are alive.
        let mut cost = [0u32; 16];
        for i in (0..len).rev() {
            let rem = len - i;
            let w = load_word(text, i);
            let mut best = u32::MAX;
            let mut best_n = 1u8;
            if rem >= 2 {
                let mut m = self.lengths(w, rem);
                while m != 0 {
                    let b = 31 - m.leading_zeros();
                    let n = b as usize + 2;
                    m &= !(1 << b);
                    // Longest first and strictly better only: ties keep the longer token.
                    let c = cost[(i + n) & 15] + 1;
                    if c < best && self.lookup(w >> (64 - 8 * n)).is_some() {
                        best = c;
                        best_n = n as u8;
                    }
                }
            }
            let c = cost[(i + 1) & 15] + 1;
            if c < best {
                best = c;
                best_n = 1;
            }
            cost[i & 15] = best;
            choice[i] = best_n;
        }
        let mut out = Vec::with_capacity(if len == 0 { 0 } else { cost[0] as usize });
        let mut p = 0;
        while p < len {
            let n = choice[p] as usize;
            out.push(if n == 1 { text[p] as u16 } else { self.lookup(key_at(text, p, n)).expect("chosen n-gram is in the vocabulary") });
            p += n;
        }
        out
    }

    pub fn encode(&self, text: &[u8], parse: Parse) -> Vec<u16> {
        match parse {
            Parse::Greedy => self.encode_greedy(text),
            Parse::Optimal => self.encode_optimal(text),
        }
    }

    /// Is `id` something decode can turn into bytes?
    #[inline]
    pub fn is_valid(&self, id: u16) -> bool {
        (id as usize) < VOCAB_SIZE && self.kind[id as usize] != Kind::Unused
    }

    /// Is `id` an n-gram or a byte (what a packed stream may hold)?
    #[inline]
    pub fn is_text(&self, id: u16) -> bool {
        (id as usize) < VOCAB_SIZE && matches!(self.kind[id as usize], Kind::Byte | Kind::Ngram)
    }

    /// Append the bytes of `id` (an n-gram or a byte; see [`Model::is_text`]).
    #[inline(always)]
    pub fn push_text(&self, id: u16, out: &mut Vec<u8>) {
        let i = id as usize;
        out.extend_from_slice(&self.tok[i][..self.tok_len[i] as usize]);
    }

    /// The bytes of `ids`; special tokens give their text. Unused ids are an error.
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for (pos, &id) in ids.iter().enumerate() {
            if id as usize >= VOCAB_SIZE {
                return Err(NgramError::Invalid(format!("token id {id} at position {pos} is out of range (mixedgram ids are 0..4095)")));
            }
            let i = id as usize;
            match self.kind[i] {
                Kind::Byte | Kind::Ngram => out.extend_from_slice(&self.tok[i][..self.tok_len[i] as usize]),
                Kind::Special => {
                    let s = self.specials.binary_search_by_key(&(id as u16), |x| x.0).expect("special is listed");
                    out.extend_from_slice(&self.specials[s].1);
                }
                Kind::Unused => {
                    return Err(NgramError::Invalid(format!("token id {id} at position {pos} is not used by this vocabulary")))
                }
            }
        }
        Ok(out)
    }

    /// The bytes of one id (None if unused).
    pub fn id_bytes(&self, id: u32) -> Option<Vec<u8>> {
        self.decode(&[id]).ok()
    }

    /// Byte length of every id: 1 for bytes, n for n-grams, 0 for special and unused ids.
    pub fn token_lengths(&self) -> Vec<i32> {
        (0..VOCAB_SIZE).map(|i| if self.kind[i] == Kind::Special { 0 } else { self.tok_len[i] as i32 }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::{key_bytes, key_of};
    use proptest::prelude::*;

    fn model(grams: &[&[u8]]) -> Model {
        Model::new(&grams.iter().map(|g| g.to_vec()).collect::<Vec<_>>(), &[]).unwrap()
    }

    /// Reference greedy: try every vocabulary n-gram at every position.
    fn slow_greedy(m: &Model, text: &[u8]) -> Vec<u16> {
        let grams: Vec<(Vec<u8>, u16)> = m
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, &k)| k != 0)
            .map(|(i, &k)| (key_bytes(k), (BYTE_TOKENS + i) as u16))
            .collect();
        let mut out = Vec::new();
        let mut p = 0;
        while p < text.len() {
            let best = grams.iter().filter(|(g, _)| text[p..].starts_with(g)).max_by_key(|(g, _)| g.len());
            match best {
                Some((g, id)) => {
                    out.push(*id);
                    p += g.len();
                }
                None => {
                    out.push(text[p] as u16);
                    p += 1;
                }
            }
        }
        out
    }

    /// Reference optimal token count: shortest path by brute DP.
    fn slow_min_tokens(m: &Model, text: &[u8]) -> usize {
        let mut best = vec![usize::MAX; text.len() + 1];
        best[text.len()] = 0;
        for i in (0..text.len()).rev() {
            best[i] = best[i + 1] + 1;
            for n in 2..=8.min(text.len() - i) {
                if m.lookup(key_of(&text[i..i + n])).is_some() {
                    best[i] = best[i].min(best[i + n] + 1);
                }
            }
        }
        best[0]
    }

    #[test]
    fn two_eight_grams_make_two_tokens() {
        let m = model(&[b"abcdefgh", b"ijklmnop", b"ab", b"cd"]);
        let ids = m.encode_greedy(b"abcdefghijklmnop");
        assert_eq!(ids, vec![256, 257]);
        assert_eq!(m.decode(&[256, 257]).unwrap(), b"abcdefghijklmnop");
    }

    #[test]
    fn greedy_can_lose_to_optimal() {
        // greedy: "abc" + "d" + "e" = 3 tokens; optimal: "ab" + "cde" = 2
        let m = model(&[b"abc", b"ab", b"cde"]);
        assert_eq!(m.encode_greedy(b"abcde"), vec![256, b'd' as u16, b'e' as u16]);
        assert_eq!(m.encode_optimal(b"abcde"), vec![257, 258]);
    }

    #[test]
    fn optimal_ties_prefer_the_longer_first_token() {
        // "abcd" = ab+cd or abc+d: both 2 tokens; the longer first token wins.
        let m = model(&[b"ab", b"cd", b"abc"]);
        assert_eq!(m.encode_optimal(b"abcd"), vec![258, b'd' as u16]);
    }

    #[test]
    fn ranges_give_the_whole_text_result() {
        let m = model(&[b"the ", b"he", b" t", b"cat", b"at ", b"the cat "]);
        let text = b"the cat sat on the mat the cat ".repeat(50);
        let whole = m.encode_greedy(&text);
        for step in [1usize, 3, 7, 8, 64] {
            let mut out = Vec::new();
            let mut p = 0;
            while p < text.len() {
                p = m.encode_greedy_range(&text, p, p + step, &mut out);
            }
            assert_eq!(out, whole, "step {step}");
        }
    }

    #[test]
    fn bad_vocabularies_are_refused() {
        assert!(Model::new(&[b"a".to_vec()], &[]).is_err());
        assert!(Model::new(&[b"abcdefghi".to_vec()], &[]).is_err());
        assert!(Model::new(&[b"a\0".to_vec()], &[]).is_err());
        assert!(Model::new(&[b"ab".to_vec(), b"ab".to_vec()], &[]).is_err());
        assert!(Model::new(&[b"ab".to_vec()], &[(256, b"<s>".to_vec())]).is_err());
        assert!(Model::new(&[b"ab".to_vec()], &[(255, b"<s>".to_vec())]).is_err());
        let m = Model::new(&[b"ab".to_vec()], &[(4095, b"<s>".to_vec())]).unwrap();
        assert_eq!(m.decode(&[256, 4095, 97]).unwrap(), b"ab<s>a");
        assert!(m.decode(&[300]).is_err());
        assert!(m.decode(&[4096]).is_err());
        assert_eq!(m.token_lengths()[4095], 0);
        assert_eq!(m.token_lengths()[256], 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn greedy_matches_reference_and_optimal_is_minimal(
            grams in proptest::collection::vec(proptest::collection::vec(1u8..4, 2..=8), 0..40),
            text in proptest::collection::vec(1u8..4, 0..200),
        ) {
            let mut uniq: Vec<Vec<u8>> = Vec::new();
            for g in grams { if !uniq.contains(&g) { uniq.push(g); } }
            let m = Model::new(&uniq, &[]).unwrap();
            let g = m.encode_greedy(&text);
            prop_assert_eq!(&g, &slow_greedy(&m, &text));
            let o = m.encode_optimal(&text);
            prop_assert_eq!(o.len(), slow_min_tokens(&m, &text));
            prop_assert!(o.len() <= g.len());
            let ids32: Vec<u32> = o.iter().map(|&x| x as u32).collect();
            prop_assert_eq!(m.decode(&ids32).unwrap(), text.clone());
            let ids32: Vec<u32> = g.iter().map(|&x| x as u32).collect();
            prop_assert_eq!(m.decode(&ids32).unwrap(), text);
        }
    }
}
