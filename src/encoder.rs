//! The encoder seam: what every family that turns `str` into ids through a
//! pre-tokenizer and a vocabulary of byte strings offers (BPE and LZ78 today).
//! The bindings are written once against this trait (`py::encoder`), so a
//! family gets `encode`, the batches, the `.jsonl` pipeline and decoding by
//! implementing it.
//!
//! A family implements six methods (its size, pre-tokenizer, special tokens,
//! the encoding of ordinary text into a buffer, the bytes and lengths of its
//! ids) with [`impl_encoder!`] beside its model (`bpe/encode.rs`,
//! `lz78/model.rs`); everything built on them (encoding to a new list, special
//! tokens, decoding, the batches) is a default method here, written once. This
//! module imports no family.
//!
//! Performance: callers are generic over `E: Encoder` (never `dyn Encoder`),
//! so each family's encoder is monomorphized into the batch loops and the
//! inner loops are the family's own code, exactly as when called directly.
//!
//! Not handled: latin1-only families (mixedgram takes bytes, not `str`, and has
//! no pre-tokenizer), and anything per family beyond encoding and decoding
//! (construction, training, a family's own inspection methods).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::specials::Specials;

pub trait Encoder: Send + Sync {
    /// One past the largest id.
    fn vocab_size(&self) -> usize;

    /// How text is split before the vocabulary is applied.
    fn pretokenizer(&self) -> &Pretokenizer;

    /// The special tokens (their texts and ids, and the matcher that finds them).
    fn specials(&self) -> &Specials;

    /// The bytes of one id (a special's text), None if the id is unused.
    fn id_bytes(&self, id: u32) -> Option<&[u8]>;

    /// The byte length of every id (0 for specials and unused ids).
    fn token_lengths(&self) -> Vec<i32>;

    /// Append the ids of `text` to `out`; special-token text is ordinary text.
    fn encode_ordinary_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()>;

    /// Ids of `text`; special-token text is ordinary text.
    #[inline]
    fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>> {
        // About 3 bytes or more per id for a trained vocabulary: one allocation for most texts.
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_ordinary_into(text, &mut out)?;
        Ok(out)
    }

    /// Ids of `text`, the text of the specials whose ids are in `allowed`
    /// (all specials if None) turned into their ids; the longest special wins
    /// at a position.
    fn encode_with_specials(&self, text: &str, allowed: Option<&[u32]>) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.specials().encode_with(text, allowed, &mut out, |t, out| self.encode_ordinary_into(t, out))?;
        Ok(out)
    }

    /// The first special token whose text occurs in `text`, and its byte offset.
    fn find_special(&self, text: &str) -> Option<(String, usize)> {
        self.specials().find(text)
    }

    /// The bytes of `ids`, concatenated; an id outside the vocabulary is an error.
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for (i, &id) in ids.iter().enumerate() {
            match self.id_bytes(id) {
                Some(b) => out.extend_from_slice(b),
                None => {
                    return Err(Error::Invalid(format!(
                        "token id {id} (at position {i}) is not in the vocabulary of {} ids",
                        self.vocab_size()
                    )))
                }
            }
        }
        Ok(out)
    }

    /// `encode_with_specials` if `specials`, else `encode_ordinary`.
    #[inline]
    fn encode_as(&self, text: &str, specials: bool, allowed: Option<&[u32]>) -> Result<Vec<u32>> {
        if specials {
            self.encode_with_specials(text, allowed)
        } else {
            self.encode_ordinary(text)
        }
    }

    /// [`Self::encode_as`], appending to `out` (no allocation per text when
    /// `out` has room).
    #[inline]
    fn encode_as_into(&self, text: &str, specials: bool, allowed: Option<&[u32]>, out: &mut Vec<u32>) -> Result<()> {
        if specials {
            out.extend_from_slice(&self.encode_with_specials(text, allowed)?);
            Ok(())
        } else {
            self.encode_ordinary_into(text, out)
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
        texts
            .par_iter()
            .enumerate()
            .with_min_len(1)
            .map(|(i, t)| self.encode_as(t.as_ref(), specials, allowed).map_err(|e| e.in_text(i)))
            .collect()
    }

    /// Many texts on the current rayon pool as one flat id array and the
    /// offsets (`len(texts) + 1`, i64, numpy's and torch's index type) of
    /// each text's ids in it. See [`encode_flat`] for how the work is split.
    fn encode_batch_flat<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        specials: bool,
        allowed: Option<&[u32]>,
    ) -> Result<(Vec<u32>, Vec<i64>)>
    where
        Self: Sized,
    {
        encode_flat(texts, |t, out| self.encode_as_into(t, specials, allowed, out))
    }
}

/// Chunks of consecutive texts of about `target` bytes each: the bounds
/// `[0, .., texts.len()]` (a text is never cut; a long one is a chunk alone).
pub fn chunk_bounds<S: AsRef<str>>(texts: &[S], target: usize) -> Vec<usize> {
    crate::chunks::byte_bounds(texts, |t| t.as_ref().len(), target)
}

/// The chunk size of a batch of `total` bytes on `threads` threads: about
/// 16 chunks per thread, so the thread that finishes last waits on at most
/// one small chunk (the tail), and at least 64 KiB, so a chunk's fixed costs
/// (a task, an output buffer) stay well under 1% of its encoding.
pub fn chunk_target(total: usize, threads: usize) -> usize {
    (total / (16 * threads.max(1))).max(1 << 16)
}

/// Encode `texts` with `encode` (which appends one text's ids) on the current
/// rayon pool into one flat buffer plus i64 offsets (`len(texts) + 1`).
///
/// Performance: on one thread (or a batch of one chunk) every text is
/// appended to the single output buffer, which is returned as is (numpy wraps
/// it without a copy). On more threads, chunks of consecutive texts
/// ([`chunk_target`]) are taken by whichever thread is free; each chunk
/// appends to its own buffer (no allocation per text, no shared state between
/// threads), and the buffers are copied into the output once, in parallel --
/// a memcpy of 4 bytes per id, about 1% of encoding them.
pub fn encode_flat<S, F>(texts: &[S], encode: F) -> Result<(Vec<u32>, Vec<i64>)>
where
    S: AsRef<str> + Sync,
    F: Fn(&str, &mut Vec<u32>) -> Result<()> + Sync,
{
    let threads = rayon::current_num_threads();
    let total: usize = texts.iter().map(|t| t.as_ref().len()).sum();
    let bounds = if threads < 2 { vec![0, texts.len()] } else { chunk_bounds(texts, chunk_target(total, threads)) };
    let run = |lo: usize, hi: usize| -> Result<(Vec<u32>, Vec<i64>)> {
        let bytes: usize = texts[lo..hi].iter().map(|t| t.as_ref().len()).sum();
        // About 4 bytes per id for a trained vocabulary; the buffer grows if not.
        let mut ids = Vec::with_capacity(bytes / 4 + 16);
        let mut ends = Vec::with_capacity(hi - lo);
        for (i, t) in texts[lo..hi].iter().enumerate() {
            encode(t.as_ref(), &mut ids).map_err(|e| e.in_text(lo + i))?;
            ends.push(ids.len() as i64);
        }
        Ok((ids, ends))
    };
    if bounds.len() <= 2 {
        let (ids, ends) = run(0, texts.len())?;
        let mut offsets = Vec::with_capacity(texts.len() + 1);
        offsets.push(0);
        offsets.extend(ends);
        return Ok((ids, offsets));
    }
    let parts: Vec<(Vec<u32>, Vec<i64>)> =
        bounds.par_windows(2).with_min_len(1).map(|w| run(w[0], w[1])).collect::<Result<_>>()?;
    let n: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0i64);
    let mut base = 0i64;
    for (ids, ends) in &parts {
        offsets.extend(ends.iter().map(|e| base + e));
        base += ids.len() as i64;
    }
    // One output buffer, cut into the chunks' disjoint slices, filled in parallel.
    let mut flat = vec![0u32; n];
    let mut slots: Vec<&mut [u32]> = Vec::with_capacity(parts.len());
    let mut rest = &mut flat[..];
    for (ids, _) in &parts {
        let (head, tail) = rest.split_at_mut(ids.len());
        slots.push(head);
        rest = tail;
    }
    slots.into_par_iter().zip(parts.par_iter()).for_each(|(dst, (ids, _))| dst.copy_from_slice(ids));
    Ok((flat, offsets))
}

/// `impl_encoder!(Model)` beside a family's model: the trait's required
/// methods are the model's inherent ones of the same names (which stay
/// callable without importing the trait), and a field `specials: Specials`
/// holds its special tokens.
macro_rules! impl_encoder {
    ($model:ty) => {
        impl $crate::encoder::Encoder for $model {
            #[inline]
            fn vocab_size(&self) -> usize {
                <$model>::vocab_size(self)
            }
            #[inline]
            fn pretokenizer(&self) -> &$crate::pretok::Pretokenizer {
                <$model>::pretokenizer(self)
            }
            #[inline]
            fn specials(&self) -> &$crate::specials::Specials {
                &self.specials
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
            fn encode_ordinary_into(&self, text: &str, out: &mut Vec<u32>) -> $crate::error::Result<()> {
                <$model>::encode_ordinary_into(self, text, out)
            }
        }
    };
}
pub(crate) use impl_encoder;

/// The checks every family's encoder passes, run by each family's tests
/// beside its model: batches equal one-by-one encoding, flat batches equal
/// the lists, decoding inverts encoding, and `special` (with id `special_id`)
/// is found and turned into its id only when allowed.
#[cfg(test)]
pub(crate) fn check_encoder<E: Encoder>(m: &E, special: &str, special_id: u32) {
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
