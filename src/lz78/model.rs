//! Encoding and decoding with a fixed dictionary.
//!
//! Encoding is greedy longest match over the output entries in a
//! double-array byte trie ([`ByteTrie`]); a byte that starts no match is its
//! fallback id `N + 1 + b`, even inside a multi-byte character. With
//! chunking, the text is first split by the pre-tokenizer and each chunk is
//! matched on its own (a match never crosses a chunk boundary).

use std::sync::Arc;

use super::trie::ByteTrie;
#[cfg(test)]
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::specials::Specials;

#[derive(Clone)]
pub struct Lz78Model {
    trie: Arc<ByteTrie>,
    /// bytes of every id (empty: id 0 and unused ids)
    tokens: Arc<Vec<Box<[u8]>>>,
    n: u32,
    pretok: Pretokenizer,
    specials: Specials,
}

impl Lz78Model {
    /// `outputs[k]` is the pattern of id `k + 1`. `specials` are `(text, id)`
    /// with ids at or above `N + 257`.
    pub fn new(outputs: &[String], specials: Vec<(String, u32)>, pretok: Pretokenizer) -> Result<Self> {
        let n = outputs.len() as u32;
        let trie = ByteTrie::build(outputs.iter().enumerate().map(|(i, p)| (p.as_bytes(), i as u32 + 1)))?;
        let mut max_id = n + 256;
        let specials = Specials::new(specials)?;
        // the id table is sized by the largest id: bound it by the entries
        let entries = n as usize + 257 + specials.list().len();
        for (s, id) in specials.list() {
            if *id <= n + 256 {
                return Err(Error::SpecialToken(format!("special token {s:?} has id {id}, which a code or byte uses")));
            }
            if *id as u64 >= crate::bpe::ranks::id_limit(entries) {
                return Err(crate::bpe::ranks::id_too_large(&format!("special token {s:?}"), *id as u64, entries));
            }
            max_id = max_id.max(*id);
        }
        let mut tokens: Vec<Box<[u8]>> = vec![Box::from(&b""[..]); max_id as usize + 1];
        for (i, p) in outputs.iter().enumerate() {
            tokens[i + 1] = p.as_bytes().into();
        }
        for b in 0..256u32 {
            tokens[(n + 1 + b) as usize] = vec![b as u8].into();
        }
        for (s, id) in specials.list() {
            if !tokens[*id as usize].is_empty() {
                return Err(Error::SpecialToken(format!("special token id {id} is used twice")));
            }
            tokens[*id as usize] = s.as_bytes().into();
        }
        Ok(Lz78Model { trie: Arc::new(trie), tokens: Arc::new(tokens), n, pretok, specials })
    }

    /// The same dictionary with another chunking.
    pub fn with_pretokenizer(&self, pretok: Pretokenizer) -> Self {
        let mut m = self.clone();
        m.pretok = pretok;
        m
    }

    pub fn pretokenizer(&self) -> &Pretokenizer {
        &self.pretok
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    pub fn trie(&self) -> &ByteTrie {
        &self.trie
    }

    /// Greedy longest match of one chunk.
    #[inline]
    pub fn encode_chunk(&self, chunk: &[u8], out: &mut Vec<u32>) {
        self.trie.encode_into(chunk, self.n + 1, out);
    }

    pub fn encode_ordinary_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        match self.pretok {
            Pretokenizer::Whole => {
                self.encode_chunk(text.as_bytes(), out);
                Ok(())
            }
            _ => self.pretok.split(text, |c| self.encode_chunk(c.as_bytes(), out)),
        }
    }

    pub fn id_bytes(&self, id: u32) -> Option<&[u8]> {
        if id == 0 {
            return Some(&[]);
        }
        self.tokens.get(id as usize).map(|b| &b[..]).filter(|b| !b.is_empty())
    }

    /// Byte length of every id (0 for id 0 and the specials).
    pub fn token_lengths(&self) -> Vec<i32> {
        let first_special = self.n as usize + 257;
        self.tokens.iter().enumerate().map(|(i, t)| if i >= first_special { 0 } else { t.len() as i32 }).collect()
    }
}

// encode_ordinary, encode_with_specials (the longest special wins at a
// position), find_special, decode_bytes (id 0, padding, decodes to nothing:
// its bytes are empty) and the batches: the encoder seam's default methods
// (crate::encoder), over the above.
crate::encoder::impl_encoder!(Lz78Model);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn meets_the_encoder_seam() {
        let outputs: Vec<String> = ["he", "ll", "o", "abc"].iter().map(|s| s.to_string()).collect();
        let lz = Lz78Model::new(&outputs, vec![("<|x|>".into(), 4 + 257)], Pretokenizer::Whole).unwrap();
        crate::encoder::check_encoder(&lz, "<|x|>", 4 + 257);
    }

    fn seed() -> Lz78Model {
        let outs: Vec<String> = ["h", "e", "he", "hel", "hell", "hello"].iter().map(|s| s.to_string()).collect();
        let sp = vec![("<|bos|>".to_string(), 263), ("<|eos|>".to_string(), 264), ("<|pad|>".to_string(), 265)];
        Lz78Model::new(&outs, sp, Pretokenizer::new(Some(crate::pretok::GPT4_PATTERN)).unwrap()).unwrap()
    }

    #[test]
    fn seed_example() {
        let m = seed();
        assert_eq!(m.encode_ordinary("hello").unwrap(), vec![6]);
        assert_eq!(m.encode_ordinary("hex").unwrap(), vec![3, 127]);
        assert_eq!(m.decode_bytes(&[3, 127]).unwrap(), b"hex");
        assert_eq!(m.vocab_size(), 266);
        assert_eq!(m.encode_with_specials("<|bos|>hello", None).unwrap(), vec![263, 6]);
    }

    #[test]
    fn a_special_id_far_beyond_the_entries_is_refused_not_allocated() {
        let outs = vec!["a".to_string()];
        let pt = || Pretokenizer::Whole;
        for id in [u32::MAX - 1, 20_000_000, 258 + 1 + 1024] {
            let e = Lz78Model::new(&outs, vec![("<|x|>".into(), id)], pt()).err().expect("refused");
            assert!(e.to_string().contains(&format!("id {id}, too large")), "{e}");
        }
        assert_eq!(Lz78Model::new(&outs, vec![("<|x|>".into(), 258 + 1023)], pt()).unwrap().vocab_size(), 258 + 1024);
    }

    proptest! {
        #[test]
        fn roundtrip(s in "\\PC{0,80}") {
            let m = seed();
            let ids = m.encode_ordinary(&s).unwrap();
            prop_assert_eq!(m.decode_bytes(&ids).unwrap(), s.as_bytes());
        }
    }
}
