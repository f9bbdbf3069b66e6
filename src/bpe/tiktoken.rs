//! The `.tiktoken` rank file, read in one pass: `base64(token) SP rank LF`
//! per line, in any order. Only files in the exact shape tiktoken and
//! tokenforge write are accepted here (canonical base64 with its padding,
//! decimal ranks of at most 10 digits that fit in 32 bits, an optional CR
//! before each LF, a final LF); for anything else the parser says no and the
//! Python reader (`formats/tiktoken_io.py`) reads the file line by line and
//! names the line that is wrong. So this is the fast path for good files,
//! never a second definition of the format's errors.
//!
//! Not handled: error messages (see above); duplicate tokens or ranks are
//! the model's to refuse.

/// The tokens of a rank file: their bytes, one after another, and for each
/// `(start, end, rank)` in file order.
pub struct RankFile {
    pub bytes: Vec<u8>,
    pub entries: Vec<(usize, usize, u32)>,
}

impl RankFile {
    /// `(token bytes, rank)` in file order.
    pub fn ranks(&self) -> Vec<(&[u8], u32)> {
        self.entries.iter().map(|&(s, e, r)| (&self.bytes[s..e], r)).collect()
    }
}

const BAD: u8 = 0xff;

const fn table() -> [u8; 256] {
    let mut t = [BAD; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
}

static DECODE: [u8; 256] = table();

/// Decode canonical standard base64 (length a multiple of 4, `=` padding
/// only at the end, unused bits zero) onto `out`; false for anything else.
fn decode_base64(s: &[u8], out: &mut Vec<u8>) -> bool {
    if s.is_empty() || !s.len().is_multiple_of(4) {
        return false;
    }
    let pad = s.iter().rev().take(2).take_while(|&&c| c == b'=').count();
    let body = &s[..s.len() - pad];
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &c in body {
        let v = DECODE[c as usize];
        if v == BAD {
            return false;
        }
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // leftover bits must be zero (otherwise two spellings decode alike)
    acc == 0
}

/// Parse a whole rank file; None if any line is not in the canonical shape.
pub fn parse(raw: &[u8]) -> Option<RankFile> {
    if raw.last() != Some(&b'\n') {
        return None;
    }
    let mut bytes = Vec::with_capacity(raw.len() * 3 / 4);
    let mut entries = Vec::with_capacity(raw.len() / 8);
    for line in raw[..raw.len() - 1].split(|&c| c == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let sp = memchr::memchr(b' ', line)?;
        let (b64, digits) = (&line[..sp], &line[sp + 1..]);
        if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let rank = digits.iter().fold(0u64, |a, &d| a * 10 + (d - b'0') as u64);
        let rank = u32::try_from(rank).ok()?;
        let start = bytes.len();
        if !decode_base64(b64, &mut bytes) {
            return None;
        }
        entries.push((start, bytes.len(), rank));
    }
    Some(RankFile { bytes, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_lines_only() {
        let f = parse(b"IQ== 0\r\nIg== 1\naGVsbG8= 2\n").unwrap();
        let r = f.ranks();
        assert_eq!(r, vec![(&b"!"[..], 0), (&b"\""[..], 1), (&b"hello"[..], 2)]);
        for bad in [
            &b"IQ== 0"[..],
            b"IQ 0\n",
            b"IR== 0\n",
            b"IQ== x\n",
            b"IQ==  0\n",
            b"\n",
            b"IQ== 4294967296\n",
            b"I=Q= 0\n",
            b"IQ== 0\n\n",
        ] {
            assert!(parse(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse(b"IQ== 4294967295\n").is_some());
    }
}
