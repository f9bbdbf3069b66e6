//! Compact bytes for statistics that travel between processes (a cluster's
//! workers and its client): a header naming what they are, LEB128 varints,
//! and an FNV-1a 64 checksum of everything before it.
//!
//! ```text
//! magic   b"TFCT"
//! version u8          (1)
//! kind    u8          what follows (see `Kind`)
//! ...     kind-specific fields (varints, length-prefixed byte strings)
//! check   u64 LE      FNV-1a 64 of every byte before it
//! ```
//!
//! The reader is strict and bounded: every length and count is checked
//! against the bytes that are left before anything is allocated, and every
//! problem is a `Format` error at its byte offset.
//!
//! Not handled: compression (the values are varints; a cluster's transport may
//! compress), and versions other than 1 (refused).

use crate::error::{Error, Result};

pub const MAGIC: &[u8; 4] = b"TFCT";
pub const VERSION: u8 = 1;

/// What a transport blob holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Pre-token (piece / chunk) counts: `crate::wordcount::WordCounter`.
    Pieces = 1,
    /// n-gram counts of one level (mixedgram).
    Ngrams = 2,
    /// LZ78 dictionary-usage counts, one per pool code (`crate::lz78::usage`).
    Usage = 3,
    /// An LZ78 pruning round's mask of pool codes (`crate::lz78::usage`).
    Mask = 4,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pieces => "piece counts",
            Kind::Ngrams => "n-gram counts",
            Kind::Usage => "dictionary-usage counts",
            Kind::Mask => "pruning-round mask",
        }
    }
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Builds one blob: `Writer::new(kind)`, the fields, then `finish()`.
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new(kind: Kind) -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(MAGIC);
        buf.push(VERSION);
        buf.push(kind as u8);
        Writer { buf }
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn reserve(&mut self, n: usize) {
        self.buf.reserve(n);
    }

    pub fn finish(mut self) -> Vec<u8> {
        let h = fnv1a64(&self.buf);
        self.buf.extend_from_slice(&h.to_le_bytes());
        self.buf
    }
}

/// Reads one blob; `Reader::new` checks the header and the checksum.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8], kind: Kind) -> Result<Self> {
        if data.len() < 4 || &data[..4] != MAGIC {
            return Err(Error::format(0, format!("not tokenforge {} (no {:?} header)", kind.name(), "TFCT")));
        }
        if data.len() < 6 + 8 {
            return Err(Error::format(
                data.len(),
                format!("tokenforge {} cut short: {} bytes", kind.name(), data.len()),
            ));
        }
        if data[4] != VERSION {
            return Err(Error::format(
                4,
                format!("unknown transport version {} (this tokenforge reads {VERSION})", data[4]),
            ));
        }
        if data[5] != kind as u8 {
            return Err(Error::format(5, format!("holds kind {}, not {} (kind {})", data[5], kind.name(), kind as u8)));
        }
        let body = data.len() - 8;
        let want = u64::from_le_bytes(data[body..].try_into().expect("8 bytes"));
        if fnv1a64(&data[..body]) != want {
            return Err(Error::format(
                body,
                format!("tokenforge {}: checksum mismatch (damaged in transit?)", kind.name()),
            ));
        }
        Ok(Reader { data: &data[..body], pos: 6 })
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left before the checksum.
    pub fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn u8(&mut self) -> Result<u8> {
        let b = *self.data.get(self.pos).ok_or_else(|| Error::format(self.pos, "unexpected end of data"))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn varint(&mut self) -> Result<u64> {
        let start = self.pos;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = (b & 0x7f) as u64;
            if shift == 63 && bits > 1 {
                return Err(Error::format(start, "varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::format(start, "varint longer than 10 bytes"))
    }

    /// A count read from the data, checked against what is left: each item
    /// takes at least `min_item_bytes`.
    pub fn count(&mut self, min_item_bytes: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.varint()?;
        let most = (self.left() / min_item_bytes.max(1)) as u64;
        if n > most {
            return Err(Error::format(at, format!("{n} {what} cannot fit in the {} bytes left", self.left())));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let at = self.pos;
        let n = self.varint()?;
        if n > self.left() as u64 {
            return Err(Error::format(
                at,
                format!("a string of {n} bytes cannot fit in the {} bytes left", self.left()),
            ));
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Error unless every byte was read.
    pub fn end(&self) -> Result<()> {
        if self.pos != self.data.len() {
            return Err(Error::format(self.pos, format!("{} unexpected bytes after the data", self.left())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut w = Writer::new(Kind::Pieces);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            w.varint(v);
        }
        w.bytes(b"hello");
        let blob = w.finish();
        let mut r = Reader::new(&blob, Kind::Pieces).unwrap();
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint().unwrap(), v);
        }
        assert_eq!(r.bytes().unwrap(), b"hello");
        r.end().unwrap();
        assert!(Reader::new(&blob, Kind::Ngrams).is_err());
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x40;
            assert!(matches!(Reader::new(&bad, Kind::Pieces), Err(Error::Format { .. })), "flip at {i}");
        }
        for cut in 0..blob.len() {
            assert!(Reader::new(&blob[..cut], Kind::Pieces).is_err());
        }
    }
}
