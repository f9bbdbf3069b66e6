//! 12-bit packing: two ids X, Y in three bytes, most significant bits first:
//! `b0 = X >> 4`, `b1 = (X & 0xF) << 4 | Y >> 8`, `b2 = Y & 0xFF`.
//!
//! The *stream* grammar on top: an odd number of ids is completed with Y = 0,
//! and since id 0 (NUL) never stands for text, a 0 as the very last id is
//! padding and is dropped; a 0 anywhere else is an error. The raw functions
//! ([`pack12`], [`unpack12`]) have no such rule and carry any 12-bit values.

use super::{Error, Result, VOCAB_SIZE};

/// Three bytes from two 12-bit values.
#[inline(always)]
pub fn pack_pair(x: u16, y: u16) -> [u8; 3] {
    [(x >> 4) as u8, (((x & 0xF) << 4) | (y >> 8)) as u8, (y & 0xFF) as u8]
}

/// Two 12-bit values from three bytes.
#[inline(always)]
pub fn unpack_pair(b: [u8; 3]) -> (u16, u16) {
    (((b[0] as u16) << 4) | (b[1] as u16 >> 4), (((b[1] & 0xF) as u16) << 8) | b[2] as u16)
}

fn check_ids(ids: &[u16], allow_zero: bool) -> Result<()> {
    for (i, &id) in ids.iter().enumerate() {
        if id as usize >= VOCAB_SIZE {
            return Err(Error::Invalid(format!("id {id} at position {i} does not fit in 12 bits (ids are 0..4095)")));
        }
        if id == 0 && !allow_zero {
            return Err(Error::Invalid(format!(
                "id 0 at position {i}: id 0 (NUL) is reserved as the stream's padding and never stands for text"
            )));
        }
    }
    Ok(())
}

/// Raw packing of any 12-bit values; an odd count is completed with 0.
pub fn pack12(ids: &[u16]) -> Result<Vec<u8>> {
    check_ids(ids, true)?;
    Ok(pack_unchecked(ids))
}

fn pack_unchecked(ids: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len().div_ceil(2) * 3);
    let mut pairs = ids.chunks_exact(2);
    for p in &mut pairs {
        out.extend_from_slice(&pack_pair(p[0], p[1]));
    }
    if let [x] = pairs.remainder() {
        out.extend_from_slice(&pack_pair(*x, 0));
    }
    out
}

/// Raw unpacking: two values per triple (an even count, padding kept).
pub fn unpack12(data: &[u8]) -> Result<Vec<u16>> {
    check_length(data.len(), 0)?;
    let mut out = Vec::with_capacity(data.len() / 3 * 2);
    for t in data.chunks_exact(3) {
        let (x, y) = unpack_pair([t[0], t[1], t[2]]);
        out.push(x);
        out.push(y);
    }
    Ok(out)
}

/// Pack a token stream: ids 1..4095 (0 is refused: it could not be told from padding).
pub fn pack_stream(ids: &[u16]) -> Result<Vec<u8>> {
    check_ids(ids, false)?;
    Ok(pack_unchecked(ids))
}

/// A stream's length must be whole triples. `base` is the offset of the
/// stream in its file, for the message.
pub fn check_length(len: usize, base: usize) -> Result<()> {
    if !len.is_multiple_of(3) {
        let whole = len - len % 3;
        return Err(Error::format(
            base + whole,
            format!(
                "the packed stream is {len} bytes, not a multiple of 3 (every 3 bytes hold 2 ids): \
                 {} stray byte(s) from here, the file is truncated or has extra bytes",
                len % 3
            ),
        ));
    }
    Ok(())
}

/// Walk a stream, calling `emit` for every id (padding dropped), checking each
/// with `valid`. `base` is the stream's offset in its file; `is_last` says
/// whether the stream ends with this chunk (only then may its last id be 0).
/// An error names the offset of the triple holding the bad id.
pub fn walk_stream(
    data: &[u8],
    base: usize,
    is_last: bool,
    valid: impl Fn(u16) -> bool,
    mut emit: impl FnMut(u16),
) -> Result<()> {
    check_length(data.len(), base)?;
    let triples = data.len() / 3;
    let bad = |t: usize, which: &str, id: u16| -> Error {
        let off = base + 3 * t;
        if id == 0 {
            Error::format(
                off,
                format!("the {which} id of the triple is 0, which is padding and may only end the stream"),
            )
        } else {
            Error::format(
                off,
                format!(
                    "the {which} id of the triple is {id}, which is out of range for this vocabulary (unused entry)"
                ),
            )
        }
    };
    for (t, c) in data.chunks_exact(3).enumerate() {
        let (x, y) = unpack_pair([c[0], c[1], c[2]]);
        if x == 0 || !valid(x) {
            return Err(bad(t, "first", x));
        }
        emit(x);
        if y == 0 && is_last && t + 1 == triples {
            break;
        }
        if y == 0 || !valid(y) {
            return Err(bad(t, "second", y));
        }
        emit(y);
    }
    Ok(())
}

/// Unpack a token stream (drops the final padding id; refuses 0 elsewhere).
pub fn unpack_stream(data: &[u8]) -> Result<Vec<u16>> {
    let mut out = Vec::with_capacity(data.len() / 3 * 2);
    walk_stream(data, 0, true, |_| true, |id| out.push(id))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_in_both_positions() {
        for v in 0..4096u16 {
            for other in [0u16, 1, 0x800, 0xFFF, v ^ 0xA5A] {
                assert_eq!(unpack_pair(pack_pair(v, other)), (v, other));
                assert_eq!(unpack_pair(pack_pair(other, v)), (other, v));
            }
        }
    }

    #[test]
    fn layout_is_msb_first() {
        assert_eq!(pack_pair(0xABC, 0xDEF), [0xAB, 0xCD, 0xEF]);
        assert_eq!(pack12(&[0x123]).unwrap(), vec![0x12, 0x30, 0x00]);
    }

    #[test]
    fn streams_drop_only_final_padding() {
        assert_eq!(unpack_stream(&pack_stream(&[5]).unwrap()).unwrap(), vec![5]);
        assert_eq!(unpack_stream(&pack_stream(&[5, 6]).unwrap()).unwrap(), vec![5, 6]);
        assert_eq!(unpack_stream(&[]).unwrap(), Vec::<u16>::new());
        assert!(pack_stream(&[0]).is_err());
        assert!(pack_stream(&[4096]).is_err());
        assert!(pack12(&[4096]).is_err());
        // a 0 in the middle
        let e = unpack_stream(&[0, 0x10, 0x00, 0x00, 0x10, 0x01]).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 0, .. }), "{e:?}");
        let e = unpack_stream(&[0x00, 0x50, 0x00, 0x00, 0x10, 0x01]).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 0, .. }), "{e:?}");
        let e = unpack_stream(&[0x00, 0x10, 0x01, 0x00]).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 3, .. }), "{e:?}");
        assert_eq!(unpack12(&[0, 0, 0]).unwrap(), vec![0, 0]);
    }
}
