//! A pair of token ids as one `u64` key: the left id in the high half, the
//! right id in the low half. The trainer's pair counts and the encoder's merge
//! and pair tables all key on it, so it lives below both.
//!
//! Not handled: ids wider than 32 bits (every id of this crate is a `u32`).

/// `(a, b)` as one key; the order of keys is the order of `(a, b)`.
#[inline(always)]
pub fn pack(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

/// The pair a key of [`pack`] holds.
#[inline(always)]
pub fn unpack(p: u64) -> (u32, u32) {
    ((p >> 32) as u32, p as u32)
}
