//! Unigram segmentation: the Viterbi path over the vocabulary's log-probabilities,
//! with either library's rules ([`Rule`]).
//!
//! * [`Rule::SentencePiece`] (`unigram_model.cc`, the optimized Viterbi): scores
//!   and path sums in float32; a user-defined piece scores `bytes * max_score - 0.1`
//!   (that candidate computed in double, then stored as float); unused pieces are
//!   not in the lattice; an unknown character scores `min_score - 10` (min and max
//!   over the normal pieces). Unknown pieces afterwards: with byte fallback the ids
//!   of their bytes, else one unknown id per run.
//! * [`Rule::Tokenizers`] (`tokenizers`' `encode_optimized`): float64 sums, every
//!   piece in the lattice, unknown score `min - 10` over all pieces; consecutive
//!   unknown nodes are fused into one string, which is then looked up as a piece,
//!   or turned into byte pieces (`<0x41>`) if all exist, or the unknown id.
//!
//! Both: a better candidate must score strictly more (the first, shorter, one
//! found wins ties); a character with no single-character piece gets the unknown
//! node. The pieces are a double-array byte trie (`lz78::ByteTrie`): from each
//! character one walk finds every piece starting there, shortest first, and stops
//! at the first byte no piece continues with, so a text of n bytes costs O(n times
//! the longest piece) and nothing is quadratic in a word's length.
//!
//! Not handled: sampling and n-best (encoding is the best path only).

use crate::error::{Error, Result};
use crate::lz78::trie::{ByteTrie, NONE};

/// Whose rules the lattice follows (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    SentencePiece,
    Tokenizers,
}

/// A piece's part in the SentencePiece lattice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Normal,
    UserDefined,
    /// In the trie (so it shadows nothing) but never a node.
    Unused,
    /// Not in the trie (unknown, control, byte pieces).
    Reserved,
}

#[derive(Clone, Copy)]
struct Node {
    score: f64,
    start: usize,
    id: u32,
}

const NO_START: usize = usize::MAX;

/// Buffers reused across the texts one thread encodes.
#[derive(Default)]
pub struct Scratch {
    best: Vec<Node>,
    path: Vec<(usize, usize, u32)>,
}

/// A Unigram model (see the module documentation).
pub struct Unigram {
    rule: Rule,
    trie: ByteTrie,
    scores: Vec<f64>,
    kinds: Vec<Kind>,
    unk: Option<u32>,
    unk_score: f64,
    max_score: f32,
    byte_fallback: bool,
    /// the id of `<0xHH>` per byte, NONE where there is none
    bytes: Vec<u32>,
}

/// The length of the UTF-8 sequence a lead byte starts (1 for a stray byte).
#[inline(always)]
pub(crate) fn utf8_len(b0: u8) -> usize {
    match b0 {
        0..=0xBF => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

impl Unigram {
    /// A SentencePiece model: the pieces with their float32 scores and
    /// [`Kind`]s, the unknown id, and whether unknown pieces become bytes
    /// (then the 256 byte ids, `<0xHH>` by byte).
    pub fn sentencepiece(
        pieces: &[String],
        scores: &[f32],
        kinds: &[Kind],
        unk: u32,
        byte_ids: Option<Vec<u32>>,
    ) -> Result<Self> {
        if pieces.len() != scores.len() || pieces.len() != kinds.len() || unk as usize >= pieces.len() {
            return Err(Error::invalid("Unigram: pieces, scores and kinds differ in length, or unk is outside them"));
        }
        let trie = ByteTrie::build(
            pieces
                .iter()
                .zip(kinds)
                .enumerate()
                .filter(|(_, (_, k))| **k != Kind::Reserved)
                .map(|(i, (p, _))| (p.as_bytes(), i as u32)),
        )?;
        let normal = || scores.iter().zip(kinds).filter(|(_, k)| **k == Kind::Normal).map(|(s, _)| *s);
        let min = normal().fold(f32::MAX, f32::min);
        let max = normal().fold(f32::MIN_POSITIVE, f32::max);
        let byte_fallback = byte_ids.is_some();
        let bytes = byte_ids.unwrap_or_else(|| vec![NONE; 256]);
        if bytes.len() != 256 {
            return Err(Error::invalid("Unigram: byte fallback needs 256 byte ids"));
        }
        Ok(Unigram {
            rule: Rule::SentencePiece,
            trie,
            scores: scores.iter().map(|&s| s as f64).collect(),
            kinds: kinds.to_vec(),
            unk: Some(unk),
            unk_score: (min - 10.0) as f64,
            max_score: max,
            byte_fallback,
            bytes,
        })
    }

    /// A `tokenizers` model: the pieces (a piece given twice is its last id, as
    /// there) and their scores, the unknown id if any, byte fallback.
    pub fn tokenizers(pieces: &[String], scores: &[f64], unk: Option<u32>, byte_fallback: bool) -> Result<Self> {
        if pieces.len() != scores.len() || pieces.is_empty() || unk.is_some_and(|u| u as usize >= pieces.len()) {
            return Err(Error::invalid("Unigram: pieces and scores differ in length, or unk_id is outside them"));
        }
        let mut last: rustc_hash::FxHashMap<&str, u32> = Default::default();
        for (i, p) in pieces.iter().enumerate() {
            if p.is_empty() {
                return Err(Error::invalid(format!("Unigram: piece {i} is empty")));
            }
            last.insert(p.as_str(), i as u32);
        }
        let trie = ByteTrie::build(last.iter().map(|(p, &i)| (p.as_bytes(), i)))?;
        let bytes = (0..=255u8).map(|b| trie.get(format!("<0x{b:02X}>").as_bytes()).unwrap_or(NONE)).collect();
        let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
        Ok(Unigram {
            rule: Rule::Tokenizers,
            trie,
            scores: scores.to_vec(),
            kinds: vec![Kind::Normal; pieces.len()],
            unk,
            unk_score: min - 10.0,
            max_score: 0.0,
            byte_fallback,
            bytes,
        })
    }

    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// Append the ids of `s` (one normalized, pre-tokenized piece) to `out`.
    pub fn encode_into(&self, s: &str, scratch: &mut Scratch, out: &mut Vec<u32>) -> Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        match self.rule {
            Rule::SentencePiece => self.lattice::<true>(s, scratch)?,
            Rule::Tokenizers => self.lattice::<false>(s, scratch)?,
        }
        let path = &scratch.path;
        let b = s.as_bytes();
        let unk = self.unk.unwrap_or(NONE);
        match self.rule {
            Rule::SentencePiece => {
                let mut prev_unk = false;
                for &(a, e, id) in path.iter().rev() {
                    let is_unk = id == unk;
                    if is_unk && self.byte_fallback {
                        out.extend(b[a..e].iter().map(|&x| self.bytes[x as usize]));
                    } else if !(is_unk && prev_unk) {
                        out.push(id);
                    }
                    prev_unk = is_unk;
                }
            }
            Rule::Tokenizers => {
                // runs of unknown nodes are one string; only such a string can fail
                // to be a piece (a node's own string is its piece)
                let mut k = path.len();
                while k > 0 {
                    let (a, mut e, id) = path[k - 1];
                    k -= 1;
                    if id != unk {
                        out.push(id);
                        continue;
                    }
                    while k > 0 && path[k - 1].2 == unk {
                        e = path[k - 1].1;
                        k -= 1;
                    }
                    let w = &b[a..e];
                    if let Some(i) = self.trie.get(w) {
                        out.push(i);
                    } else if self.byte_fallback && w.iter().all(|&x| self.bytes[x as usize] != NONE) {
                        out.extend(w.iter().map(|&x| self.bytes[x as usize]));
                    } else {
                        out.push(unk);
                    }
                }
            }
        }
        Ok(())
    }

    /// Fill `scratch.path` with the best path's nodes `(start, end, id)`, last first.
    fn lattice<const SPM: bool>(&self, s: &str, scratch: &mut Scratch) -> Result<()> {
        let b = s.as_bytes();
        let n = b.len();
        let best = &mut scratch.best;
        best.clear();
        best.resize(n + 1, Node { score: 0.0, start: NO_START, id: 0 });
        let (scores, kinds, max_score) = (&self.scores[..], &self.kinds[..], self.max_score);
        let mut i = 0;
        while i < n {
            let here = best[i].score;
            let mblen = utf8_len(b[i]).min(n - i);
            let mut single = false;
            let (done, rest) = best.split_at_mut(i + 1);
            let _ = done;
            self.trie.prefixes(&b[i..], |len, id| {
                let cand = if SPM {
                    match kinds[id as usize] {
                        Kind::Normal => (scores[id as usize] as f32 + here as f32) as f64,
                        Kind::UserDefined => ((len as f32) * max_score) as f64 - 0.1 + here,
                        _ => return,
                    }
                } else {
                    scores[id as usize] + here
                };
                let t = &mut rest[len - 1];
                if t.start == NO_START || cand > t.score {
                    *t = Node { score: if SPM { cand as f32 as f64 } else { cand }, start: i, id };
                }
                if len == mblen {
                    single = true;
                }
            });
            if !single {
                let Some(unk) = self.unk else {
                    let c = s[i..].chars().next().unwrap_or('\u{fffd}');
                    return Err(Error::format(
                        i,
                        format!(
                            "the Unigram model has no unk_id, so a character it has no piece for cannot be encoded: {c:?}"
                        ),
                    ));
                };
                let cand = if SPM { (self.unk_score as f32 + here as f32) as f64 } else { self.unk_score + here };
                let t = &mut rest[mblen - 1];
                if t.start == NO_START || cand > t.score {
                    *t = Node { score: cand, start: i, id: unk };
                }
            }
            i += mblen;
        }
        let path = &mut scratch.path;
        path.clear();
        let mut e = n;
        while e > 0 {
            let node = best[e];
            path.push((node.start, e, node.id));
            e = node.start;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hf(pieces: &[(&str, f64)], unk: Option<u32>, bf: bool) -> Unigram {
        let p: Vec<String> = pieces.iter().map(|x| x.0.to_string()).collect();
        let s: Vec<f64> = pieces.iter().map(|x| x.1).collect();
        Unigram::tokenizers(&p, &s, unk, bf).unwrap()
    }

    fn enc(u: &Unigram, s: &str) -> Vec<u32> {
        let mut out = Vec::new();
        u.encode_into(s, &mut Scratch::default(), &mut out).unwrap();
        out
    }

    #[test]
    fn best_path_and_ties() {
        let u =
            hf(&[("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -1.5), ("abc", -5.0), ("c", -1.0)], Some(0), false);
        assert_eq!(enc(&u, "ab"), vec![3]);
        assert_eq!(enc(&u, "abc"), vec![3, 5]);
        // a tie keeps the candidate found first ("ab" from 0 before "b" from 1)
        let t = hf(&[("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -2.0)], Some(0), false);
        assert_eq!(enc(&t, "ab"), vec![3]);
    }

    #[test]
    fn unknown_runs_fuse_or_become_bytes() {
        let u = hf(&[("<unk>", 0.0), ("a", -1.0)], Some(0), false);
        assert_eq!(enc(&u, "xéa"), vec![0, 1]);
        let mut pieces: Vec<(String, f64)> = vec![("<unk>".into(), 0.0), ("a".into(), -1.0)];
        pieces.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), -20.0)));
        let refs: Vec<(&str, f64)> = pieces.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        let u = hf(&refs, Some(0), true);
        assert_eq!(enc(&u, "é"), vec![2 + 0xC3, 2 + 0xA9]);
        let none = hf(&[("a", -1.0)], None, false);
        let mut out = Vec::new();
        assert!(none.encode_into("b", &mut Scratch::default(), &mut out).is_err());
    }

    #[test]
    fn sentencepiece_rules() {
        let p: Vec<String> = ["<unk>", "a", "b", "ab", "xy"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0f32, -1.0, -1.0, -3.0, 0.0];
        let kinds = [Kind::Reserved, Kind::Normal, Kind::Normal, Kind::Unused, Kind::UserDefined];
        let u = Unigram::sentencepiece(&p, &scores, &kinds, 0, None).unwrap();
        // the unused "ab" is never a node; unknown runs are one id
        assert_eq!(enc(&u, "ab"), vec![1, 2]);
        assert_eq!(enc(&u, "qqa"), vec![0, 1]);
        assert_eq!(enc(&u, "xya"), vec![4, 1]);
    }
}
