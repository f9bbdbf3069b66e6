//! The `.mxgram` file: a 38,400-byte header of 3,840 entries of 10 bytes, in
//! id order, then the packed stream.
//!
//! Entry i (id 256 + i), at byte offset 10 i: the n-gram's latin1 bytes
//! right-aligned in 8 bytes with zero bytes on the left, then the id as a
//! big-endian 16-bit value. An unused slot (fewer than 3,840 n-grams, or a
//! special token's id) is 10 zero bytes. See docs/formats.md.

use super::model::{Model, Parse};
use super::pack::{pack_pair, walk_stream};
use super::{key_len, Error, Result, BYTE_TOKENS, ENTRY_BYTES, HEADER_BYTES, NGRAM_SLOTS};
use rustc_hash::FxHashMap;

/// The header of a vocabulary (special tokens' slots are written as unused).
pub fn write_header(model: &Model) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_BYTES];
    for (i, &key) in model.slots().iter().enumerate() {
        if key == 0 {
            continue;
        }
        let e = &mut out[i * ENTRY_BYTES..(i + 1) * ENTRY_BYTES];
        e[..8].copy_from_slice(&key.to_be_bytes());
        e[8..].copy_from_slice(&((BYTE_TOKENS + i) as u16).to_be_bytes());
    }
    out
}

/// The slot keys of a header (0 = unused), every entry validated. `data`
/// may hold more than the header (the stream is not looked at).
pub fn parse_header(data: &[u8]) -> Result<Vec<u64>> {
    if data.len() < HEADER_BYTES {
        let whole = data.len() / ENTRY_BYTES;
        return Err(Error::format(
            data.len(),
            format!(
                "the file ends after {} bytes, inside the {HEADER_BYTES}-byte vocabulary header \
                 ({whole} of {NGRAM_SLOTS} entries complete): truncated or not a .mxgram file",
                data.len()
            ),
        ));
    }
    let mut slots = vec![0u64; NGRAM_SLOTS];
    let mut seen: FxHashMap<u64, usize> = FxHashMap::default();
    for (i, e) in data[..HEADER_BYTES].chunks_exact(ENTRY_BYTES).enumerate() {
        let off = i * ENTRY_BYTES;
        let id = BYTE_TOKENS + i;
        let key = u64::from_be_bytes(e[..8].try_into().unwrap());
        let field = u16::from_be_bytes([e[8], e[9]]) as usize;
        if key == 0 && field == 0 {
            continue; // unused slot
        }
        if field != id {
            return Err(Error::format(
                off + 8,
                format!("header entry {i}: id field is {field} (0x{field:04x}), expected {id} (entries are in id order from 256)"),
            ));
        }
        let n = key_len(key);
        if n < 2 {
            return Err(Error::format(
                off,
                format!(
                    "header entry {i} (id {id}): the n-gram has {n} byte(s), expected 2..8 (or an all-zero unused entry)"
                ),
            ));
        }
        if let Some(z) = e[8 - n..8].iter().position(|&b| b == 0) {
            return Err(Error::format(
                off + 8 - n + z,
                format!(
                    "header entry {i} (id {id}): zero byte inside the n-gram; n-grams are right-aligned, \
                     zero-padded on the left only, and never contain NUL"
                ),
            ));
        }
        if let Some(j) = seen.insert(key, i) {
            return Err(Error::format(
                off,
                format!("header entry {i} (id {id}) repeats the n-gram of entry {j} (id {})", BYTE_TOKENS + j),
            ));
        }
        slots[i] = key;
    }
    Ok(slots)
}

/// Decode a chunk of a packed stream with `model` (built from the file's
/// header), appending text to `out`. `base` is the chunk's file offset.
pub fn decode_stream(model: &Model, data: &[u8], base: usize, is_last: bool, out: &mut Vec<u8>) -> Result<()> {
    out.reserve(data.len() / 3 * 2 * 4);
    walk_stream(data, base, is_last, |id| model.is_text(id), |id| model.push_text(id, out))
}

/// A whole `.mxgram` file: the model's header and the packed stream of `text`
/// (NUL-free).
pub fn compress(model: &Model, text: &[u8], parse: Parse) -> Vec<u8> {
    let ids = model.encode(text, parse);
    let mut out = write_header(model);
    append_packed(&ids, &mut out);
    out
}

/// Append the packing of `ids` (non-zero ids from an encoder).
pub fn append_packed(ids: &[u16], out: &mut Vec<u8>) {
    out.reserve(ids.len().div_ceil(2) * 3);
    let mut pairs = ids.chunks_exact(2);
    for p in &mut pairs {
        out.extend_from_slice(&pack_pair(p[0], p[1]));
    }
    if let [x] = pairs.remainder() {
        out.extend_from_slice(&pack_pair(*x, 0));
    }
}

/// The text of a whole `.mxgram` file.
pub fn decompress(data: &[u8]) -> Result<Vec<u8>> {
    let model = Model::from_keys(parse_header(data)?, &[])?;
    let mut out = Vec::new();
    decode_stream(&model, &data[HEADER_BYTES..], HEADER_BYTES, true, &mut out)?;
    Ok(out)
}

/// How often each id occurs in a packed stream (padding not counted).
pub fn histogram(model: &Model, data: &[u8], base: usize, is_last: bool) -> Result<Vec<u64>> {
    let mut h = vec![0u64; super::VOCAB_SIZE];
    walk_stream(data, base, is_last, |id| model.is_text(id), |id| h[id as usize] += 1)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::key_of;

    fn entry(g: &[u8], id: u16) -> [u8; 10] {
        let mut e = [0u8; 10];
        e[8 - g.len()..8].copy_from_slice(g);
        e[8..].copy_from_slice(&id.to_be_bytes());
        e
    }

    #[test]
    fn header_layout_by_hand() {
        let m = Model::new(&[b"abcdefgh".to_vec(), b"ijklmnop".to_vec(), b"xy".to_vec()], &[]).unwrap();
        let h = write_header(&m);
        assert_eq!(h.len(), 38_400);
        assert_eq!(&h[0..10], &entry(b"abcdefgh", 256));
        assert_eq!(&h[10..20], &entry(b"ijklmnop", 257));
        assert_eq!(&h[20..30], &[0, 0, 0, 0, 0, 0, b'x', b'y', 0x01, 0x02]);
        assert!(h[30..].iter().all(|&b| b == 0));
        assert_eq!(parse_header(&h).unwrap()[..3], [key_of(b"abcdefgh"), key_of(b"ijklmnop"), key_of(b"xy")]);
    }

    #[test]
    fn sixteen_bytes_in_three() {
        let m = Model::new(&[b"abcdefgh".to_vec(), b"ijklmnop".to_vec()], &[]).unwrap();
        let f = compress(&m, b"abcdefghijklmnop", Parse::Greedy);
        assert_eq!(f.len(), HEADER_BYTES + 3);
        assert_eq!(&f[HEADER_BYTES..], &[0x10, 0x01, 0x01]);
        assert_eq!(decompress(&f).unwrap(), b"abcdefghijklmnop");
    }

    fn fmt_offset(r: Result<impl std::fmt::Debug>) -> u64 {
        match r {
            Err(Error::Format { offset, .. }) => offset,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn bad_files_name_the_offset() {
        let m = Model::new(&[b"ab".to_vec(), b"cd".to_vec()], &[]).unwrap();
        let good = compress(&m, b"abcdabcdx", Parse::Greedy);
        assert_eq!(decompress(&good).unwrap(), b"abcdabcdx");
        // truncated header
        assert_eq!(fmt_offset(decompress(&good[..1000])), 1000);
        // stream not whole triples
        assert_eq!(fmt_offset(decompress(&good[..good.len() - 1])), (good.len() - 3) as u64);
        let mut longer = good.clone();
        longer.push(7);
        assert_eq!(fmt_offset(decompress(&longer)), good.len() as u64);
        // wrong id field in entry 1
        let mut bad = good.clone();
        bad[19] = 0x03;
        assert_eq!(fmt_offset(decompress(&bad)), 18);
        // zero byte inside an n-gram of entry 0: "a\0b" right-aligned
        let mut bad = good.clone();
        bad[5] = b'a';
        bad[6] = 0;
        bad[7] = b'b';
        assert_eq!(fmt_offset(decompress(&bad)), 6);
        // a 1-byte n-gram
        let mut bad = good.clone();
        bad[6] = 0;
        assert_eq!(fmt_offset(decompress(&bad)), 0);
        // duplicate n-gram
        let mut bad = good.clone();
        bad[16] = b'a';
        bad[17] = b'b';
        assert_eq!(fmt_offset(decompress(&bad)), 10);
        // an id pointing at an unused entry
        let mut bad = good.clone();
        bad[HEADER_BYTES..HEADER_BYTES + 3].copy_from_slice(&pack_pair(300, 256));
        assert_eq!(fmt_offset(decompress(&bad)), HEADER_BYTES as u64);
        let mut bad = good.clone();
        bad[HEADER_BYTES + 3..HEADER_BYTES + 6].copy_from_slice(&pack_pair(256, 4000));
        assert_eq!(fmt_offset(decompress(&bad)), (HEADER_BYTES + 3) as u64);
    }
}
