//! The mixedgram vocabulary: encoding (greedy or optimal) and decoding.
//!
//! Lookup structure. The vocabulary has at most 3,840 n-gram keys. They live
//! in one open-addressing table where every key sits within `WINDOW` slots
//! of its home slot (the hash multiplier, and if need be the size, is chosen
//! at build time so that this holds), so a lookup reads one fixed window and
//! selects without branches. In front of it sits a filter: one bit set per
//! length n — exact for n = 2 (a 64 Ki-bit set of 2-grams), a one-hash Bloom
//! filter of 32 Ki bits for each n >= 3 — 32 KiB in all, L1-resident.
//!
//! Performance: at each position the filter is asked about all seven lengths
//! without branches (seven independent L1 loads), and the table is probed
//! only for lengths that pass, longest first. About one probe per token
//! remains, and the only data-dependent branch is "is there any candidate".
//! Probing the table for every length the 2-byte prefix allowed, longest
//! first with an early exit, took ~2.7 probes and one mispredicted exit per
//! token (~100 MB/s of CPU on English text); probing all seven lengths
//! branch-free was slower still (~65 MB/s).
//!
//! Not handled: NUL bytes in the text (callers strip them: a NUL inside a
//! window would alias a shorter key).

use super::{key_at, key_len, load_word, Error, Result, BYTE_TOKENS, MAX_N, MIN_N, NGRAM_SLOTS, VOCAB_SIZE};

/// Every key is found within this many slots of its home slot.
const WINDOW: usize = 4;

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
    pub fn from_name(s: &str) -> Result<Parse> {
        match s {
            "greedy" => Ok(Parse::Greedy),
            "optimal" => Ok(Parse::Optimal),
            _ => Err(Error::Invalid(format!("unknown parse {s:?}; expected \"greedy\" or \"optimal\""))),
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
    table: Table,
    filter: Filter,
    kind: Vec<Kind>,
    /// The bytes of every id (n-grams right-aligned keys turned back into bytes).
    tok: Vec<[u8; 8]>,
    tok_len: Vec<u8>,
    specials: Vec<(u16, Vec<u8>)>,
}

/// Per length n, "may a key of length n be in the vocabulary?" (no false negatives).
struct Filter {
    /// Words 0..1024: the exact 2-gram bit set; then 512 words per n = 3..8.
    words: Vec<u64>,
}

const FILTER_BITS: u32 = 15;
const FILTER_WORDS: usize = 1 << (FILTER_BITS - 6);
const TWO_GRAM_WORDS: usize = 1 << (16 - 6);

impl Filter {
    fn new() -> Filter {
        Filter { words: vec![0; TWO_GRAM_WORDS + (MAX_N - MIN_N) * FILTER_WORDS] }
    }

    /// Bit index of a key of length n (n >= 3) inside its length's block.
    #[inline(always)]
    fn slot(key: u64, n: usize) -> usize {
        TWO_GRAM_WORDS * 64
            + (n - 3) * FILTER_WORDS * 64
            + (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS)) as usize
    }

    fn insert(&mut self, key: u64, n: usize) {
        let bit = if n == 2 { key as usize } else { Self::slot(key, n) };
        self.words[bit >> 6] |= 1 << (bit & 63);
    }

    #[inline(always)]
    fn test(&self, bit: usize) -> u32 {
        ((self.words[bit >> 6] >> (bit & 63)) & 1) as u32
    }

    /// Bit n - 2 set if the n-byte key at the top of `w` may be in the vocabulary.
    #[inline(always)]
    fn hits(&self, w: u64) -> u32 {
        let mut m = self.test((w >> 48) as usize);
        for n in 3..=MAX_N {
            m |= self.test(Self::slot(w >> (64 - 8 * n), n)) << (n - 2);
        }
        m
    }
}

/// Key -> id, each key within `WINDOW` slots of `hash(key)`; id 0 = absent.
struct Table {
    mul: u64,
    shift: u32,
    keys: Vec<u64>,
    ids: Vec<u16>,
}

impl Table {
    fn build(entries: &[(u64, u16)]) -> Table {
        // splitmix64 of the attempt number: odd multipliers, fixed sequence,
        // so the same vocabulary always gives the same table.
        let mul_of = |a: u64| {
            let mut z = a.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) | 1
        };
        for bits in 13u32..=24 {
            let size = 1usize << bits;
            'attempt: for a in 0..32u64 {
                let mul = mul_of(a);
                let mut t =
                    Table { mul, shift: 64 - bits, keys: vec![0; size + WINDOW - 1], ids: vec![0; size + WINDOW - 1] };
                for &(key, id) in entries {
                    let h = t.home(key);
                    match (h..h + WINDOW).find(|&j| t.keys[j] == 0) {
                        Some(j) => {
                            t.keys[j] = key;
                            t.ids[j] = id;
                        }
                        None => continue 'attempt,
                    }
                }
                return t;
            }
        }
        unreachable!("4096 keys always fit a 16 Mi-slot table");
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(self.mul) >> self.shift) as usize
    }

    /// The id of `key`, or 0.
    #[inline(always)]
    fn probe(&self, key: u64) -> u16 {
        let h = self.home(key);
        let keys = &self.keys[h..h + WINDOW];
        let ids = &self.ids[h..h + WINDOW];
        let mut id = 0;
        for j in 0..WINDOW {
            if keys[j] == key {
                id = ids[j];
            }
        }
        id
    }
}

impl Model {
    /// A vocabulary from its n-gram slots (`ngrams[i]` is id 256 + i; an empty
    /// entry is unused; at most 3,840) and special tokens (id, text) placed
    /// in unused slots.
    pub fn new(ngrams: &[Vec<u8>], specials: &[(u32, Vec<u8>)]) -> Result<Model> {
        if ngrams.len() > NGRAM_SLOTS {
            return Err(Error::Invalid(format!(
                "{} n-grams given; a mixedgram vocabulary has {NGRAM_SLOTS} slots",
                ngrams.len()
            )));
        }
        let mut slots = vec![0u64; NGRAM_SLOTS];
        for (i, g) in ngrams.iter().enumerate() {
            if g.is_empty() {
                continue;
            }
            if !(MIN_N..=MAX_N).contains(&g.len()) {
                return Err(Error::Invalid(format!(
                    "n-gram of id {} has {} bytes; n-grams have {MIN_N} to {MAX_N} bytes",
                    BYTE_TOKENS + i,
                    g.len()
                )));
            }
            if g.contains(&0) {
                return Err(Error::Invalid(format!(
                    "n-gram of id {} contains a NUL byte (NUL is reserved)",
                    BYTE_TOKENS + i
                )));
            }
            slots[i] = super::key_of(g);
        }
        Self::from_keys(slots, specials)
    }

    /// As [`Model::new`], from keys (0 = unused), exactly 3,840 of them.
    pub fn from_keys(slots: Vec<u64>, specials: &[(u32, Vec<u8>)]) -> Result<Model> {
        assert_eq!(slots.len(), NGRAM_SLOTS);
        let mut filter = Filter::new();
        let mut kind = vec![Kind::Unused; VOCAB_SIZE];
        let mut tok = vec![[0u8; 8]; VOCAB_SIZE];
        let mut tok_len = vec![0u8; VOCAB_SIZE];
        for b in 0..BYTE_TOKENS {
            kind[b] = Kind::Byte;
            tok[b][0] = b as u8;
            tok_len[b] = 1;
        }
        let mut entries: Vec<(u64, u16)> = Vec::with_capacity(NGRAM_SLOTS);
        let mut seen: rustc_hash::FxHashMap<u64, u16> = rustc_hash::FxHashMap::default();
        for (i, &key) in slots.iter().enumerate() {
            if key == 0 {
                continue;
            }
            let id = (BYTE_TOKENS + i) as u16;
            let n = key_len(key);
            if !(MIN_N..=MAX_N).contains(&n) || key.to_be_bytes()[8 - n..].contains(&0) {
                return Err(Error::Invalid(format!("id {id}: not an n-gram of {MIN_N}..{MAX_N} non-zero bytes")));
            }
            if let Some(other) = seen.insert(key, id) {
                return Err(Error::Invalid(format!(
                    "ids {other} and {id} are the same n-gram {:?}",
                    String::from_utf8_lossy(&super::key_bytes(key))
                )));
            }
            entries.push((key, id));
            filter.insert(key, n);
            kind[id as usize] = Kind::Ngram;
            tok[id as usize][..n].copy_from_slice(&key.to_be_bytes()[8 - n..]);
            tok_len[id as usize] = n as u8;
        }
        let table = Table::build(&entries);
        let mut sp = Vec::with_capacity(specials.len());
        for (id, text) in specials {
            let i = *id as usize;
            if !(BYTE_TOKENS..VOCAB_SIZE).contains(&i) {
                return Err(Error::SpecialToken(format!(
                    "special token id {id} is outside the n-gram ids {BYTE_TOKENS}..{}",
                    VOCAB_SIZE - 1
                )));
            }
            if kind[i] != Kind::Unused {
                return Err(Error::SpecialToken(format!(
                    "special token id {id} is already used by an n-gram or another special token"
                )));
            }
            if text.is_empty() {
                return Err(Error::SpecialToken(format!("special token id {id} has empty text")));
            }
            kind[i] = Kind::Special;
            sp.push((*id as u16, text.clone()));
        }
        sp.sort();
        Ok(Model { slots, table, filter, kind, tok, tok_len, specials: sp })
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
        match self.table.probe(key) {
            0 => None,
            id => Some(id),
        }
    }

    /// The bits (n - 2) of lengths worth probing at a position with word `w`
    /// and `rem` bytes left.
    #[inline(always)]
    fn lengths(&self, w: u64, rem: usize) -> u32 {
        let m = self.filter.hits(w);
        if rem >= MAX_N {
            m
        } else if rem < MIN_N {
            0
        } else {
            m & ((1u32 << (rem - 1)) - 1)
        }
    }

    /// The longest vocabulary token at a position: (id, length).
    #[inline(always)]
    fn longest(&self, w: u64, rem: usize) -> (u16, usize) {
        let mut m = self.lengths(w, rem);
        while m != 0 {
            let b = 31 - m.leading_zeros();
            let n = b as usize + 2;
            let id = self.table.probe(w >> (64 - 8 * n));
            if id != 0 {
                return (id, n);
            }
            m &= !(1 << b);
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
            {
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
            out.push(if n == 1 {
                text[p] as u16
            } else {
                self.lookup(key_at(text, p, n)).expect("chosen n-gram is in the vocabulary")
            });
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
                return Err(Error::Invalid(format!(
                    "token id {id} at position {pos} is out of range (mixedgram ids are 0..4095)"
                )));
            }
            let i = id as usize;
            match self.kind[i] {
                Kind::Byte | Kind::Ngram => out.extend_from_slice(&self.tok[i][..self.tok_len[i] as usize]),
                Kind::Special => {
                    let s = self.specials.binary_search_by_key(&(id as u16), |x| x.0).expect("special is listed");
                    out.extend_from_slice(&self.specials[s].1);
                }
                Kind::Unused => {
                    return Err(Error::Invalid(format!(
                        "token id {id} at position {pos} is not used by this vocabulary"
                    )))
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

#[cfg(test)]
mod bench {
    use super::*;

    /// Nanoseconds this thread has run on a CPU (the machine is shared, so
    /// wall time says little).
    fn cpu_ns() -> f64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
            .unwrap_or(0.0)
    }

    /// `MX_BENCH_FILE=path cargo test --release --lib ngram::model::bench -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn encode_speed() {
        let Ok(path) = std::env::var("MX_BENCH_FILE") else { return };
        let text = std::fs::read(path).unwrap();
        let text = crate::ngram::strip_nul(&text).0.into_owned();
        let t = std::time::Instant::now();
        let (top, _) = crate::ngram::top_ngrams(&text, NGRAM_SLOTS);
        eprintln!("train {:?}", t.elapsed());
        let grams: Vec<Vec<u8>> = top.iter().map(|s| crate::ngram::key_bytes(s.key)).collect();
        let m = Model::new(&grams, &[]).unwrap();
        let mut probes = 0u64;
        let mut masked = 0u64;
        let mut p = 0;
        let mut toks = 0u64;
        while p < text.len() {
            let w = load_word(&text, p);
            let rem = text.len() - p;
            let mut n_found = 1;
            if rem >= 2 {
                let mut mm = m.lengths(w, rem);
                masked += mm.count_ones() as u64;
                while mm != 0 {
                    let b = 31 - mm.leading_zeros();
                    let n = b as usize + 2;
                    probes += 1;
                    if m.lookup(w >> (64 - 8 * n)).is_some() {
                        n_found = n;
                        break;
                    }
                    mm &= !(1 << b);
                }
            }
            p += n_found;
            toks += 1;
        }
        eprintln!(
            "tokens {toks} probes/token {:.2} mask bits/token {:.2}",
            probes as f64 / toks as f64,
            masked as f64 / toks as f64
        );
        for _ in 0..3 {
            let (t, c) = (std::time::Instant::now(), cpu_ns());
            let ids = m.encode_greedy(&text);
            let (dt, dc) = (t.elapsed().as_secs_f64(), (cpu_ns() - c) / 1e9);
            eprintln!(
                "greedy {:.1} MB/s wall, {:.1} MB/s cpu ({} ids)",
                text.len() as f64 / dt / 1e6,
                text.len() as f64 / dc / 1e6,
                ids.len()
            );
        }
        let (t, c) = (std::time::Instant::now(), cpu_ns());
        let ids = m.encode_optimal(&text);
        let (dt, dc) = (t.elapsed().as_secs_f64(), (cpu_ns() - c) / 1e9);
        eprintln!(
            "optimal {:.1} MB/s wall, {:.1} MB/s cpu ({} ids)",
            text.len() as f64 / dt / 1e6,
            text.len() as f64 / dc / 1e6,
            ids.len()
        );
    }
}
