//! Where a trained BPE vocabulary puts its ids: the 256 byte tokens first,
//! then the merges and the special tokens in the order the layout names.
//!
//! - `Nanochat`: merges from 256, the specials after the last merge learned
//!   (so a run that learns fewer merges than asked still has no gap).
//! - `SpecialsFirst` (seed 003): the specials from 256, the merges after them.
//!
//! Not handled: vocabularies whose byte tokens are not ids 0..255 (imported
//! ones keep their own ids), and the growing vocabulary (it continues from its
//! own next id).

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Nanochat,
    SpecialsFirst,
}

impl Layout {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "nanochat" => Ok(Layout::Nanochat),
            "specials_first" => Ok(Layout::SpecialsFirst),
            other => Err(Error::Invalid(format!("unknown layout {other:?}; expected one of nanochat, specials_first"))),
        }
    }

    /// The first merge id and the number of merges for `vocab_size` ids with
    /// `specials` special tokens.
    pub fn plan(self, vocab_size: i64, specials: usize) -> Result<(u32, usize)> {
        let floor = 256 + specials as i64;
        if vocab_size < floor {
            return Err(Error::VocabSize(format!(
                "vocab_size {vocab_size} is too small: 256 byte tokens + {specials} special tokens need at least {floor}"
            )));
        }
        let num_merges = usize::try_from(vocab_size - floor)
            .map_err(|_| Error::VocabSize(format!("vocab_size {vocab_size} is too large")))?;
        let first = match self {
            Layout::Nanochat => 256,
            Layout::SpecialsFirst => floor,
        };
        let first =
            u32::try_from(first).map_err(|_| Error::VocabSize(format!("{specials} special tokens are too many")))?;
        Ok((first, num_merges))
    }

    /// The ids of the `specials` special tokens, in order, once `merges`
    /// merges were learned.
    pub fn special_ids(self, specials: usize, merges: usize) -> Vec<u64> {
        let first = match self {
            Layout::Nanochat => 256 + merges as u64,
            Layout::SpecialsFirst => 256,
        };
        (0..specials as u64).map(|i| first + i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts() {
        assert_eq!(Layout::Nanochat.plan(300, 2).unwrap(), (256, 42));
        assert_eq!(Layout::SpecialsFirst.plan(300, 2).unwrap(), (258, 42));
        assert_eq!(Layout::Nanochat.special_ids(2, 42), vec![298, 299]);
        assert_eq!(Layout::Nanochat.special_ids(2, 40), vec![296, 297]);
        assert_eq!(Layout::SpecialsFirst.special_ids(2, 40), vec![256, 257]);
        assert_eq!(Layout::Nanochat.plan(258, 2).unwrap(), (256, 0));
        assert!(matches!(Layout::Nanochat.plan(257, 2), Err(Error::VocabSize(_))));
        assert!(matches!(Layout::Nanochat.plan(-1, 0), Err(Error::VocabSize(_))));
        assert!(Layout::parse("other").is_err());
    }
}
