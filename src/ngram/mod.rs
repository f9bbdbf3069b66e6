//! Mixedgram: a latin1 tokenizer whose vocabulary is the 256 bytes plus the
//! 3,840 best 2..8-grams of a text, with ids packed two per three bytes.
//!
//! - [`count`]: counting every 2..8-gram (with overlaps) and selecting the top
//!   n-grams by `n × count` (ties: longer first, then byte order ascending).
//! - [`model`]: the vocabulary, greedy-longest-match and optimal (fewest
//!   tokens) parsing, decoding.
//! - [`pack`]: the 12-bit packing of ids and the stream grammar.
//! - [`file`]: the `.mxgram` layout (38,400-byte header, then the stream).
//!
//! Every text handed to the core is raw latin1 bytes; the Python layer turns
//! `str` into latin1 (raising `Latin1Error`). NUL bytes are removed before
//! training and encoding ([`strip_nul`]): id 0 is the stream's padding.
//!
//! An n-gram of at most 8 bytes with no zero byte is stored as a `u64` *key*:
//! its bytes big-endian, right-aligned, zero on the left — exactly the first 8
//! bytes of its `.mxgram` header entry. Because no n-gram byte is zero, the
//! length is implied by the key, so one key space holds every n.

use std::borrow::Cow;

pub mod count;
pub mod dist;
pub mod file;
pub mod model;
pub mod pack;

pub use count::{top_ngrams, CountStats, Scored};
pub use model::{Model, Parse};

/// Ids of a mixedgram vocabulary: 12 bits.
pub const VOCAB_SIZE: usize = 4096;
/// Ids 0..255 are the latin1 bytes.
pub const BYTE_TOKENS: usize = 256;
/// Ids 256..4095 are n-grams (or, optionally, special tokens).
pub const NGRAM_SLOTS: usize = VOCAB_SIZE - BYTE_TOKENS;
pub const MIN_N: usize = 2;
pub const MAX_N: usize = 8;
/// One header entry: 8 bytes of n-gram, 2 bytes of big-endian id.
pub const ENTRY_BYTES: usize = 10;
pub const HEADER_BYTES: usize = NGRAM_SLOTS * ENTRY_BYTES;

// Errors: the crate's one `Error` (`Format` with the byte offset for a
// malformed file or stream, `SpecialToken` for a bad special, `Invalid` for
// other arguments that cannot be honoured).
pub(crate) use crate::error::{Error, Result};

/// The key of an n-gram of 1..=8 bytes (see the module docs).
#[inline]
pub fn key_of(bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len() <= 8);
    bytes.iter().fold(0u64, |k, &b| (k << 8) | b as u64)
}

/// The number of bytes of a key (its n), given that no n-gram byte is zero.
#[inline]
pub fn key_len(key: u64) -> usize {
    (64 - key.leading_zeros() as usize).div_ceil(8)
}

/// The bytes of a key.
pub fn key_bytes(key: u64) -> Vec<u8> {
    let n = key_len(key);
    key.to_be_bytes()[8 - n..].to_vec()
}

/// The 8 bytes at `p` as a big-endian word (the byte at `p` on top), zero
/// padded past the end of `text`.
#[inline(always)]
pub(crate) fn load_word(text: &[u8], p: usize) -> u64 {
    if let Some(w) = text.get(p..p + 8) {
        u64::from_be_bytes(w.try_into().unwrap())
    } else {
        let mut buf = [0u8; 8];
        let rest = &text[p.min(text.len())..];
        buf[..rest.len()].copy_from_slice(rest);
        u64::from_be_bytes(buf)
    }
}

/// The key of the `n` bytes at `p` (the caller guarantees `p + n <= len`).
#[inline(always)]
pub(crate) fn key_at(text: &[u8], p: usize, n: usize) -> u64 {
    load_word(text, p) >> (64 - 8 * n)
}

/// `text` without its NUL bytes (borrowed when it has none), and how many
/// were removed. NUL is reserved: id 0 pads the packed stream.
pub fn strip_nul(text: &[u8]) -> (Cow<'_, [u8]>, u64) {
    if !text.contains(&0) {
        return (Cow::Borrowed(text), 0);
    }
    let out: Vec<u8> = text.iter().copied().filter(|&b| b != 0).collect();
    let removed = (text.len() - out.len()) as u64;
    (Cow::Owned(out), removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_imply_length() {
        for s in [&b"ab"[..], b"abc", b"\xff\x01", b"actually", b"\x01\x01\x01\x01\x01\x01\x01\x01"] {
            let k = key_of(s);
            assert_eq!(key_len(k), s.len());
            assert_eq!(key_bytes(k), s);
        }
        assert_eq!(key_of(b"ab"), 0x6162);
        assert_eq!(key_of(b"actually").to_be_bytes(), *b"actually");
    }

    #[test]
    fn words_are_padded_at_the_end() {
        let t = b"abcdefghij";
        assert_eq!(load_word(t, 0), u64::from_be_bytes(*b"abcdefgh"));
        assert_eq!(load_word(t, 8), u64::from_be_bytes(*b"ij\0\0\0\0\0\0"));
        assert_eq!(load_word(t, 10), 0);
        assert_eq!(key_at(t, 8, 2), key_of(b"ij"));
        assert_eq!(key_at(t, 3, 5), key_of(b"defgh"));
    }

    #[test]
    fn nul_is_stripped() {
        let (t, r) = strip_nul(b"a\0b\0\0c");
        assert_eq!(&*t, b"abc");
        assert_eq!(r, 3);
        let (t, r) = strip_nul(b"abc");
        assert!(matches!(t, Cow::Borrowed(_)));
        assert_eq!(r, 0);
    }
}
