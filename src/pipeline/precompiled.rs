//! tokenizers' `Precompiled` normalizer: a SentencePiece charsmap applied the
//! way a `tokenizer.json` converted from a SentencePiece model (T5, ALBERT,
//! XLNet, mBART ...) applies it, which is not SentencePiece's own way
//! (`super::spm`'s longest match at every byte).
//!
//! The text is cut into extended grapheme clusters (UAX #29, by the
//! `unicode-segmentation` crate tokenizers itself uses, so both agree on the
//! Unicode version). A cluster shorter than 6 UTF-8 bytes is looked up whole:
//! if any rule starts it, the *shortest* such rule's replacement stands for
//! the whole cluster (bytes after the rule's key are dropped: tokenizers
//! takes the first hit of a common-prefix search). Otherwise, and for longer
//! clusters, each character is looked up alone the same way, and a character
//! no rule starts is copied. A walk stops at a NUL byte, as tokenizers' does.
//!
//! Performance: one trie walk per cluster (most end at the first unit), and one
//! per character only where the cluster had no rule; the output is built in
//! one `String`. Linear in the text.
//!
//! Not handled: alignments (tokenizers tracks them for offsets; tokenforge's
//! imported tokenizers give no offsets). A damaged charsmap is a `Format`
//! error at load (`Charsmap::new` walks every node a text can reach; tokenizers
//! would panic on the text that meets the damage).

use unicode_segmentation::UnicodeSegmentation;

use super::spm::Charsmap;
use crate::error::Result;

/// The `Precompiled` normalizer of a tokenizer.json.
pub struct Precompiled {
    map: Charsmap,
}

/// Clusters of at least this many bytes are looked up character by character.
const WHOLE_CLUSTER_BELOW: usize = 6;

impl Precompiled {
    pub fn new(blob: &[u8]) -> Result<Self> {
        Ok(Precompiled { map: Charsmap::new(blob)? })
    }

    /// The normalized `text` into `out` (cleared first).
    pub fn normalize(&self, text: &str, out: &mut String) -> Result<()> {
        out.clear();
        out.reserve(text.len());
        for cluster in text.graphemes(true) {
            if cluster.len() < WHOLE_CLUSTER_BELOW {
                if let Some(v) = self.map.shortest(cluster.as_bytes())? {
                    out.push_str(self.map.replacement(v)?);
                    continue;
                }
            }
            for (i, c) in cluster.char_indices() {
                let one = &cluster[i..i + c.len_utf8()];
                match self.map.shortest(one.as_bytes())? {
                    Some(v) => out.push_str(self.map.replacement(v)?),
                    None => out.push(c),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A charsmap of rules over single bytes below 0x80 (root offset 0: the
    /// child for byte c is unit c, and its value unit is c ^ 0x80).
    fn map(rules: &[(u8, &str)]) -> Vec<u8> {
        let mut units = vec![0u32; 256];
        let mut strings = Vec::new();
        for &(b, to) in rules {
            let c = b as usize;
            units[c] = b as u32 | 1 << 8 | 0x80 << 10;
            units[c ^ 0x80] = strings.len() as u32;
            strings.extend_from_slice(to.as_bytes());
            strings.push(0);
        }
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        for u in units {
            blob.extend_from_slice(&u.to_le_bytes());
        }
        blob.extend_from_slice(&strings);
        blob
    }

    fn norm(p: &Precompiled, s: &str) -> String {
        let mut out = String::new();
        p.normalize(s, &mut out).unwrap();
        out
    }

    #[test]
    fn a_cluster_takes_its_first_characters_rule_whole() {
        let p = Precompiled::new(&map(&[(b'a', "A"), (b'\t', " "), (b'z', "")])).unwrap();
        assert_eq!(norm(&p, "abc\tz"), "Abc ");
        // "a" + a combining acute is one cluster: the rule for "a" replaces all of it
        assert_eq!(norm(&p, "ba\u{301}c"), "bAc");
        // CR LF is one cluster with no rule for CR: each character alone
        assert_eq!(norm(&p, "\r\n"), "\r\n");
        assert_eq!(norm(&p, ""), "");
    }

    #[test]
    fn a_long_cluster_is_looked_up_character_by_character() {
        let p = Precompiled::new(&map(&[(b'a', "A")])).unwrap();
        // "a" and three combining marks: 7 bytes, so per character and the marks stay
        assert_eq!(norm(&p, "a\u{301}\u{302}\u{303}"), "A\u{301}\u{302}\u{303}");
    }

    #[test]
    fn a_damaged_map_is_a_format_error_not_a_panic() {
        let mut blob = map(&[(b'a', "A")]);
        // the value of "a" points past the strings: refused at load
        let at = 4 + 4 * (b'a' as usize ^ 0x80);
        blob[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(Precompiled::new(&blob).is_err());
        assert!(Precompiled::new(&[1, 0, 0]).is_err());
        // a child position outside the trie (the root's offset moved past it)
        let mut blob = map(&[(b'a', "A")]);
        blob[4..8].copy_from_slice(&(1u32 << 10 | 1 << 9).to_le_bytes());
        assert!(Precompiled::new(&blob).is_err());
        // units pointing at each other in a cycle: checked once each, no hang
        let mut units = vec![0u32; 256];
        units[b'a' as usize] = b'a' as u32; // offset 0: "a" leads back to the root's block
        let mut blob = 1024u32.to_le_bytes().to_vec();
        units.iter().for_each(|u| blob.extend_from_slice(&u.to_le_bytes()));
        let p = Precompiled::new(&blob).unwrap();
        assert_eq!(norm(&p, "aaab"), "aaab");
    }
}
