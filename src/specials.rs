//! Special tokens: their texts and ids, and splitting text at them. Shared by
//! the families whose encoders turn allowed special-token text into ids.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::error::{Error, Result};

/// The special tokens of a vocabulary, with a matcher over their texts.
#[derive(Clone, Debug)]
pub struct Specials {
    list: Vec<(String, u32)>,
    ac: Option<AhoCorasick>,
}

/// A leftmost-longest matcher over `texts`; None when there are none.
fn matcher<'a>(texts: impl Iterator<Item = &'a str>) -> Result<Option<AhoCorasick>> {
    let texts: Vec<&str> = texts.collect();
    if texts.is_empty() {
        return Ok(None);
    }
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&texts)
        .map(Some)
        .map_err(|e| Error::SpecialToken(format!("cannot index the special tokens: {e}")))
}

impl Specials {
    /// `(text, id)` pairs. The families check the ids against their own layout.
    pub fn new(list: Vec<(String, u32)>) -> Result<Self> {
        if list.iter().any(|(s, _)| s.is_empty()) {
            return Err(Error::SpecialToken("a special token is the empty string".into()));
        }
        let ac = matcher(list.iter().map(|(s, _)| s.as_str()))?;
        Ok(Specials { list, ac })
    }

    pub fn list(&self) -> &[(String, u32)] {
        &self.list
    }

    /// The first special token whose text occurs in `text`, and where.
    pub fn find(&self, text: &str) -> Option<(String, usize)> {
        let m = self.ac.as_ref()?.find(text)?;
        Some((text[m.start()..m.end()].to_string(), m.start()))
    }

    /// Encode `text` into `out`, turning the text of the specials whose ids
    /// are in `allowed` (all if None) into their ids, the longest at a
    /// position winning; `ordinary` encodes the text between them.
    pub fn encode_with(
        &self,
        text: &str,
        allowed: Option<&[u32]>,
        out: &mut Vec<u32>,
        mut ordinary: impl FnMut(&str, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        let subset;
        let ac = match allowed {
            Some(ids) if !self.list.iter().all(|(_, id)| ids.contains(id)) => {
                subset = matcher(self.list.iter().filter(|(_, id)| ids.contains(id)).map(|(s, _)| s.as_str()))?;
                subset.as_ref()
            }
            _ => self.ac.as_ref(),
        };
        let Some(ac) = ac else { return ordinary(text, out) };
        let mut last = 0;
        for m in ac.find_iter(text) {
            ordinary(&text[last..m.start()], out)?;
            let s = &text[m.start()..m.end()];
            out.push(self.list.iter().find(|(t, _)| t == s).map(|(_, id)| *id).expect("matched a special"));
            last = m.end();
        }
        ordinary(&text[last..], out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str, out: &mut Vec<u32>) -> Result<()> {
        out.extend(text.bytes().map(|b| b as u32));
        Ok(())
    }

    #[test]
    fn splits_at_allowed_specials_longest_first() {
        let s = Specials::new(vec![("<a>".into(), 300), ("<a>b".into(), 301), ("<c>".into(), 302)]).unwrap();
        let enc = |t: &str, allowed: Option<&[u32]>| {
            let mut out = Vec::new();
            s.encode_with(t, allowed, &mut out, words).unwrap();
            out
        };
        assert_eq!(enc("x<a>by<c>", None), vec![120, 301, 121, 302]);
        assert_eq!(enc("x<a>by<c>", Some(&[300, 302])), vec![120, 300, 98, 121, 302]);
        assert_eq!(enc("<c>", Some(&[])), vec![60, 99, 62]);
        assert_eq!(enc("<c>", Some(&[300, 301, 302])), vec![302]);
        assert_eq!(s.find("ab<c><a>"), Some(("<c>".to_string(), 2)));
        assert!(Specials::new(vec![(String::new(), 1)]).is_err());
        assert_eq!(Specials::new(vec![]).unwrap().find("<a>"), None);
    }
}
