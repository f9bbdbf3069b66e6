//! WordPiece (`tokenizers`' `WordPiece::tokenize`): greedy longest match first;
//! after the first piece, pieces carry the continuing prefix (`##`); a word with
//! no full cover, or of more than `max_input_chars_per_word` characters, is the
//! unknown token alone.
//!
//! Two double-array byte tries (`lz78::ByteTrie`): the pieces, and the
//! continuation pieces without their prefix. The longest match at a place is one
//! walk, linear in the match (tokenizers shortens the candidate from the end and
//! looks each up: quadratic in a word's length).
//!
//! Not handled: a vocabulary without its unknown token is accepted, and a word
//! that needs it is an error then (as in tokenizers).

use crate::error::{Error, Result};
use crate::lz78::trie::{ByteTrie, NONE};

pub struct WordPiece {
    first: ByteTrie,
    rest: ByteTrie,
    unk: Option<u32>,
    unk_token: String,
    max_chars: usize,
}

impl WordPiece {
    /// `vocab`: (piece, id), pieces distinct; `unk_token` need not be in it.
    pub fn new(vocab: &[(String, u32)], unk_token: &str, prefix: &str, max_chars: usize) -> Result<Self> {
        let first = ByteTrie::build(vocab.iter().filter(|(p, _)| !p.is_empty()).map(|(p, i)| (p.as_bytes(), *i)))?;
        let rest = ByteTrie::build(vocab.iter().filter_map(|(p, i)| {
            let r = p.strip_prefix(prefix)?;
            (!r.is_empty()).then_some((r.as_bytes(), *i))
        }))?;
        if vocab.iter().any(|(_, i)| *i == NONE) {
            return Err(Error::invalid("WordPiece: id out of range"));
        }
        let unk = vocab.iter().find(|(p, _)| p == unk_token).map(|(_, i)| *i);
        Ok(WordPiece { first, rest, unk, unk_token: unk_token.to_string(), max_chars })
    }

    fn push_unk(&self, out: &mut Vec<u32>) -> Result<()> {
        match self.unk {
            Some(u) => {
                out.push(u);
                Ok(())
            }
            None => {
                Err(Error::format(0, format!("the WordPiece unk_token {:?} is not in the vocabulary", self.unk_token)))
            }
        }
    }

    /// Append the ids of one word to `out`.
    pub fn encode_into(&self, s: &str, out: &mut Vec<u32>) -> Result<()> {
        if s.len() > self.max_chars && s.chars().count() > self.max_chars {
            return self.push_unk(out);
        }
        let b = s.as_bytes();
        let mark = out.len();
        let mut start = 0;
        while start < b.len() {
            let trie = if start == 0 { &self.first } else { &self.rest };
            match trie.longest(&b[start..], NONE) {
                Some((id, len)) => {
                    out.push(id);
                    start += len;
                }
                None => {
                    out.truncate(mark);
                    return self.push_unk(out);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_longest_first_with_prefix() {
        let v: Vec<(String, u32)> = ["[UNK]", "un", "##aff", "##able", "a", "##a", "##ff"]
            .iter()
            .enumerate()
            .map(|(i, p)| (p.to_string(), i as u32))
            .collect();
        let w = WordPiece::new(&v, "[UNK]", "##", 5).unwrap();
        let enc = |s: &str| {
            let mut out = vec![99];
            w.encode_into(s, &mut out).unwrap();
            out
        };
        assert_eq!(enc("unaffable"[..5].as_ref()), vec![99, 1, 2]);
        assert_eq!(enc("aa"), vec![99, 4, 5]);
        assert_eq!(enc("ab"), vec![99, 0]);
        assert_eq!(enc("aaaaaa"), vec![99, 0]); // longer than 5 characters
        assert_eq!(enc("ééé"), vec![99, 0]);
        assert_eq!(enc(""), vec![99]);
    }
}
