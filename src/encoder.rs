//! The encoder seam: what every family that turns `str` into ids through a
//! pre-tokenizer and a vocabulary of byte strings offers (BPE and LZ78 today).
//! The bindings are written once against this trait (`py::encoder`), so a
//! family gets `encode`, the batches, the `.jsonl` pipeline and decoding by
//! implementing it.
//!
//! Performance: callers are generic over `E: Encoder` (never `dyn Encoder`),
//! so each family's encoder is monomorphized into the batch loops and the
//! inner loops are the family's own code, exactly as when called directly.
//!
//! Not handled: latin1-only families (mixedgram takes bytes, not `str`, and has
//! no pre-tokenizer), and anything per family beyond encoding and decoding
//! (construction, training, a family's own inspection methods).

use rayon::prelude::*;

use crate::bpe::encode::BpeModel;
use crate::error::Result;
use crate::lz78::Lz78Model;
use crate::pretok::Pretokenizer;

pub trait Encoder: Send + Sync {
    /// One past the largest id.
    fn vocab_size(&self) -> usize;

    /// How text is split before the vocabulary is applied.
    fn pretokenizer(&self) -> &Pretokenizer;

    /// Ids of `text`; special-token text is ordinary text.
    fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>>;

    /// Ids of `text`, the text of the specials whose ids are in `allowed`
    /// (all specials if None) turned into their ids.
    fn encode_with_specials(&self, text: &str, allowed: Option<&[u32]>) -> Result<Vec<u32>>;

    /// The bytes of `ids`, concatenated; an id outside the vocabulary is an error.
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>>;

    /// The bytes of one id (a special's text), None if the id is unused.
    fn id_bytes(&self, id: u32) -> Option<&[u8]>;

    /// The byte length of every id (0 for specials and unused ids).
    fn token_lengths(&self) -> Vec<i32>;

    /// The first special token whose text occurs in `text`, and its byte offset.
    fn find_special(&self, text: &str) -> Option<(String, usize)>;

    /// `encode_with_specials` if `specials`, else `encode_ordinary`.
    #[inline]
    fn encode_as(&self, text: &str, specials: bool, allowed: Option<&[u32]>) -> Result<Vec<u32>> {
        if specials {
            self.encode_with_specials(text, allowed)
        } else {
            self.encode_ordinary(text)
        }
    }

    /// Many texts on the current rayon pool, one id list per text, in order.
    fn encode_batch<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        specials: bool,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<Vec<u32>>>
    where
        Self: Sized,
    {
        texts.par_iter().with_min_len(1).map(|t| self.encode_as(t.as_ref(), specials, allowed)).collect()
    }

    /// Many texts on the current rayon pool as one flat id array and the
    /// offsets (`len(texts) + 1`, u64) of each text's ids in it.
    fn encode_batch_flat<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        specials: bool,
        allowed: Option<&[u32]>,
    ) -> Result<(Vec<u32>, Vec<u64>)>
    where
        Self: Sized,
    {
        Ok(flatten(&self.encode_batch(texts, specials, allowed)?))
    }
}

/// One flat array of `parts` and the offsets where each part starts (plus the end).
pub fn flatten<T: Copy>(parts: &[Vec<T>]) -> (Vec<T>, Vec<u64>) {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut flat = Vec::with_capacity(total);
    let mut offsets = Vec::with_capacity(parts.len() + 1);
    offsets.push(0u64);
    for p in parts {
        flat.extend_from_slice(p);
        offsets.push(flat.len() as u64);
    }
    (flat, offsets)
}

/// Each family's inherent methods are the implementation (they stay callable
/// without importing the trait); the trait forwards to them.
macro_rules! forward_encoder {
    ($model:ty) => {
        impl Encoder for $model {
            #[inline]
            fn vocab_size(&self) -> usize {
                <$model>::vocab_size(self)
            }
            #[inline]
            fn pretokenizer(&self) -> &Pretokenizer {
                <$model>::pretokenizer(self)
            }
            #[inline]
            fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>> {
                <$model>::encode_ordinary(self, text)
            }
            #[inline]
            fn encode_with_specials(&self, text: &str, allowed: Option<&[u32]>) -> Result<Vec<u32>> {
                <$model>::encode_with_specials(self, text, allowed)
            }
            #[inline]
            fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
                <$model>::decode_bytes(self, ids)
            }
            #[inline]
            fn id_bytes(&self, id: u32) -> Option<&[u8]> {
                <$model>::id_bytes(self, id)
            }
            #[inline]
            fn token_lengths(&self) -> Vec<i32> {
                <$model>::token_lengths(self)
            }
            #[inline]
            fn find_special(&self, text: &str) -> Option<(String, usize)> {
                <$model>::find_special(self, text)
            }
        }
    };
}

forward_encoder!(BpeModel);
forward_encoder!(Lz78Model);

#[cfg(test)]
mod tests {
    use super::*;

    fn ident() -> [u32; 256] {
        std::array::from_fn(|i| i as u32)
    }

    /// The same checks for every family: batches equal one-by-one encoding,
    /// flat batches equal the lists, and decoding inverts encoding.
    fn check<E: Encoder>(m: &E, special: &str, special_id: u32) {
        let texts = ["hello world", "", "a<|x|>b", "héllo\nwörld  ", "abcabcabc"];
        let one: Vec<Vec<u32>> = texts.iter().map(|t| m.encode_ordinary(t).unwrap()).collect();
        assert_eq!(m.encode_batch(&texts, false, None).unwrap(), one);
        let (flat, offsets) = m.encode_batch_flat(&texts, false, None).unwrap();
        assert_eq!(offsets.len(), texts.len() + 1);
        for (i, ids) in one.iter().enumerate() {
            assert_eq!(&flat[offsets[i] as usize..offsets[i + 1] as usize], &ids[..]);
            assert_eq!(m.decode_bytes(ids).unwrap(), texts[i].as_bytes());
        }
        let with = m.encode_as("a<|x|>b", true, None).unwrap();
        assert!(with.contains(&special_id));
        assert!(!m.encode_as("a<|x|>b", true, Some(&[])).unwrap().contains(&special_id));
        assert_eq!(m.id_bytes(special_id), Some(special.as_bytes()));
        assert_eq!(m.token_lengths().len(), m.vocab_size());
        assert_eq!(m.token_lengths()[special_id as usize], 0);
        assert!(m.decode_bytes(&[m.vocab_size() as u32]).is_err());
        assert_eq!(m.find_special("ab<|x|>"), Some((special.to_string(), 2)));
    }

    #[test]
    fn bpe_and_lz78_meet_the_seam() {
        let merges = [(104, 101, 256), (108, 108, 257), (256, 257, 258)];
        let bpe = BpeModel::new(
            &ident(),
            &merges,
            vec![("<|x|>".into(), 259)],
            Pretokenizer::Whole,
            crate::bpe::encode::MergeRule::Pairs,
        )
        .unwrap();
        check(&bpe, "<|x|>", 259);
        let outputs: Vec<String> = ["he", "ll", "o", "abc"].iter().map(|s| s.to_string()).collect();
        let lz = Lz78Model::new(&outputs, vec![("<|x|>".into(), 4 + 257)], Pretokenizer::Whole).unwrap();
        check(&lz, "<|x|>", 4 + 257);
    }
}
