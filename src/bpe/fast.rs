//! The encoder's fast tables: what [`super::encode::BpeModel`] looks up for
//! every piece, built with a model read from a rank file (or on the first
//! encode of any other model) and never changed except the bounded caches.
//! In all, 22 MiB for cl100k and 34 MiB for o200k (figures below), and up
//! to 32 MiB more of [`SpillCache`] entries.
//!
//! - [`PieceTable`]: pieces of 1 to [`PIECE_MAX`] bytes -> their ids. The
//!   key is the bytes themselves packed into two words (with the length in
//!   the top byte), stored inline in 32-byte slots with up to [`TABLE_IDS`]
//!   ids, so a probe is one cache line and no pointer is followed (a
//!   `HashMap<Vec<u8>, u32>` hashes, then compares against a heap key: a
//!   second cache miss). For tiktoken's rule it is seeded with every token of
//!   those lengths (the cache "seeded from the vocabulary": on unseen text
//!   every piece that is one token, 70-90% of pieces of English or code, is
//!   answered here); pieces that are not tokens are added as they are met
//!   (under any rule), until the table is three quarters full, so on warm
//!   text every short piece is one prefetched probe; single bytes are there
//!   too, so that no piece needs a branch on its length. Shared by threads
//!   (inserts claim an empty slot with a compare-and-swap; nothing is ever
//!   overwritten). Memory: fixed, 32 bytes times the next power of two at
//!   or above twice the number of such tokens (8 MiB for cl100k, 16 MiB for
//!   o200k).
//! - [`PairTable`]: `(left, right) -> merged id` for the merge loop, one
//!   `u64` per slot (42 bits of key, 21 of value), open addressing; used when
//!   every id is below 2^21 - 1. Memory: 8 bytes times the next power of two
//!   at or above twice the number of pairs (cl100k: 233,378 pairs, 4 MiB;
//!   o200k: 446,189, 8 MiB). The first merge round (pairs of single bytes)
//!   reads a dense 256 x 256 table instead (256 KiB).
//! - [`PieceCache`]: piece (2 to [`CACHE_MAX`] bytes) -> its ids, for
//!   pieces longer than [`PIECE_MAX`] and short pieces the table has no
//!   room for; [`LongCache`] the same for pieces of 32 to
//!   [`LONG_CACHE_MAX`] bytes. Ids are packed with as many bits as the
//!   vocabulary's largest id needs (17 for cl100k, 18 for o200k: an entry
//!   holds up to 11 or 10 ids, 26 or 24 in the long cache). Shared by every thread
//!   encoding with the model (`encode_batch` on rayon): each 64-byte slot is
//!   guarded by a sequence number (a seqlock: a reader that sees the
//!   number change, or odd, treats the slot as a miss), so readers never
//!   block and never see a torn entry, and a writer that finds the slot
//!   busy skips the insert. Two-way set associative, a new entry replaces an
//!   empty way or else one of the two; nothing else is ever allocated, so
//!   its memory is fixed: [`CACHE_SLOTS`] slots of 64 bytes (8 MiB per
//!   model) and [`LONG_CACHE_SLOTS`] of 128 bytes (2 MiB).
//!   A cached entry is exactly what the merge loop returned for those bytes,
//!   so a hit can never change the ids, only skip the work.
//! - [`SpillCache`]: what those two cannot hold — pieces of up to
//!   [`SPILL_MAX`] bytes past the long cache, and results with more ids than
//!   an entry holds — in sharded, locked hash maps; at most 32 MiB of
//!   entries (a shard that would pass its share is emptied).
//!
//! Not handled: pieces longer than [`SPILL_MAX`] bytes (merged every
//! time, after the whole-piece lookup in the model's token index), vocabularies with ids of 2^21 - 1 or more
//! (no pair table: the model's hash map answers) or 2^24 or more (no cache).

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Types for which all-zero bytes are a valid value (plain integers, atomics).
///
/// # Safety
/// An implementor must be valid when every byte is zero.
pub unsafe trait ZeroValid {}
// SAFETY: integers and atomic integers are valid at zero.
unsafe impl ZeroValid for u64 {}
// SAFETY: as above.
unsafe impl ZeroValid for AtomicU64 {}

/// A zeroed array of `len` values, aligned to 2 MiB and advised to the
/// kernel as huge-page memory when it is that big. The tables are probed at
/// random: with 4 KiB pages every probe of an 8 MiB table also misses the
/// TLB (the profile showed the prefetches themselves stalling on the page
/// walk), with 2 MiB pages the whole table is a handful of TLB entries.
/// A big array is advised before it is zeroed, so zeroing faults it in as
/// huge pages (where the kernel allows them).
pub struct Zeroed<T: ZeroValid> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
}

const HUGE: usize = 2 << 20;

#[cfg(target_os = "linux")]
extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: std::ffi::c_int) -> std::ffi::c_int;
}

impl<T: ZeroValid> Zeroed<T> {
    /// `len` must be at least 1.
    pub fn new(len: usize) -> Self {
        let layout = Layout::array::<T>(len.max(1)).expect("table size");
        let layout = if layout.size() >= HUGE { layout.align_to(HUGE) } else { layout.align_to(64) };
        let layout = layout.expect("table layout");
        if layout.size() < HUGE {
            // SAFETY: the layout has a non-zero size (len >= 1, T sized and not zero-sized here).
            let raw = unsafe { alloc_zeroed(layout) };
            let Some(ptr) = NonNull::new(raw as *mut T) else { handle_alloc_error(layout) };
            return Zeroed { ptr, len, layout };
        }
        // Big: advise first, then zero, so the pages are faulted in as huge
        // pages (an aligned `alloc_zeroed` zeroes, and so faults 4 KiB pages,
        // before the advice could apply).
        // SAFETY: as above, a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw as *mut T) else { handle_alloc_error(layout) };
        #[cfg(target_os = "linux")]
        // SAFETY: the range is one live allocation of ours; MADV_HUGEPAGE (14)
        // only changes how its pages are backed, never their contents. A
        // kernel without transparent huge pages refuses, which is harmless.
        unsafe {
            madvise(raw as *mut std::ffi::c_void, layout.size(), 14)
        };
        // SAFETY: `raw` is valid for writes of `layout.size()` bytes; all-zero
        // bytes are valid values of T (ZeroValid), so the slice is initialised.
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Zeroed { ptr, len, layout }
    }
}

impl<T: ZeroValid> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` values were allocated, zeroed (valid by ZeroValid) and are owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> Drop for Zeroed<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the values need no drop (integers, atomics).
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, self.layout) }
    }
}

// SAFETY: Zeroed owns its values like a Box<[T]>.
unsafe impl<T: ZeroValid + Send> Send for Zeroed<T> {}
// SAFETY: as above; shared access is through &[T].
unsafe impl<T: ZeroValid + Sync> Sync for Zeroed<T> {}

/// Longest token kept in [`PieceTable`] (the key is two words minus the length byte).
pub const PIECE_MAX: usize = 15;
/// Longest piece kept in [`PieceCache`] (four words minus the length byte).
pub const CACHE_MAX: usize = 31;
/// Slots of the cache (two per set).
pub const CACHE_SLOTS: usize = 1 << 17;

const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const K3: u64 = 0x1656_67B1_9E37_79F9;
const K4: u64 = 0x27D4_EB2F_1656_67C5;

/// A piece of at most `8 * W - 1` bytes as `W` little-endian words,
/// zero-padded, the length in the top byte of the last word (so no two
/// pieces share a key and no key is all zero), and its hash.
#[derive(Clone, Copy)]
pub struct Key<const W: usize = 4> {
    pub w: [u64; W],
    pub hash: u64,
}

/// The key of a piece of up to [`CACHE_MAX`] bytes.
pub type ShortKey = Key<4>;
/// The key of a long piece (up to [`LONG_CACHE_MAX`] bytes).
pub type LongKey = Key<8>;

impl<const W: usize> Key<W> {
    /// `piece.len()` must be 1..`8 * W`.
    #[inline(always)]
    pub fn new(piece: &[u8]) -> Self {
        let n = piece.len();
        debug_assert!(n >= 1 && n < 8 * W);
        // word by word with (overlapping) loads: copying the piece into a
        // zeroed buffer and reading it back as words stalls on store forwarding
        let mut w = [0u64; W];
        let mut h = 0u64;
        for (i, x) in w.iter_mut().enumerate() {
            if 8 * i < n {
                *x = le(&piece[8 * i..n.min(8 * i + 8)]);
            }
            if i == W - 1 {
                *x |= (n as u64) << 56;
            }
            h ^= x.wrapping_mul(MULS[i % 4]).rotate_left(i as u32 * 7);
        }
        let hash = (h ^ (h >> 29)).wrapping_mul(K1);
        Key { w, hash }
    }

    /// The key of `buf[start..start + n]` (`n` in 1..`8 * W`): the same
    /// key as [`Self::new`] of those bytes. When `8 * W` bytes can be read
    /// from `start` (the piece is not at the very end of `buf`), the words
    /// are whole loads masked to the piece's length, with no branch on the
    /// length: a piece's length is different from the last one's most of the
    /// time, and `new`'s loads per length mispredicted about once a piece.
    #[inline(always)]
    pub fn new_in(buf: &[u8], start: usize, n: usize) -> Self {
        debug_assert!(n >= 1 && n < 8 * W && start + n <= buf.len());
        if start + 8 * W > buf.len() {
            return Self::new(&buf[start..start + n]);
        }
        // SAFETY: `start + 8 * W <= buf.len()` (checked above), so the eight
        // bytes from `start + 8 * i` (i < W) are in `buf`; the read is unaligned
        let load = |i: usize| u64::from_le(unsafe { (buf.as_ptr().add(start + 8 * i) as *const u64).read_unaligned() });
        let mut w = [0u64; W];
        if W >= 3 && n <= 16 {
            // nearly every piece: two words, the length in the last
            w[0] = load(0) & MASKS[n.min(8)];
            w[1] = load(1) & MASKS[n.saturating_sub(8)];
            w[W - 1] = (n as u64) << 56;
            let h = w[0].wrapping_mul(MULS[0])
                ^ w[1].wrapping_mul(MULS[1]).rotate_left(7)
                ^ w[W - 1].wrapping_mul(MULS[(W - 1) % 4]).rotate_left((W as u32 - 1) * 7);
            let hash = (h ^ (h >> 29)).wrapping_mul(K1);
            return Key { w, hash };
        }
        let mut h = 0u64;
        for (i, x) in w.iter_mut().enumerate() {
            let valid = n.saturating_sub(8 * i).min(8);
            *x = load(i) & MASKS[valid];
            if i == W - 1 {
                *x |= (n as u64) << 56;
            }
            h ^= x.wrapping_mul(MULS[i % 4]).rotate_left(i as u32 * 7);
        }
        let hash = (h ^ (h >> 29)).wrapping_mul(K1);
        Key { w, hash }
    }

    /// An unused key (all zero: never equal to a piece's).
    pub const EMPTY: Self = Key { w: [0; W], hash: 0 };
}

impl Key<4> {
    /// The two-word key of [`PieceTable`] (the piece is at most [`PIECE_MAX`] bytes).
    #[inline(always)]
    pub fn short(&self) -> (u64, u64) {
        (self.w[0], self.w[1] | (self.w[3] & (0xFF << 56)))
    }

    /// [`Self::short`] of the key of `buf[start..start + n]` (`n` in
    /// 1..=[`PIECE_MAX`]) without the key's own hash: two loads masked to the
    /// piece's length (one shift of a 128-bit mask, no branch on the length).
    #[inline(always)]
    pub fn short_in(buf: &[u8], start: usize, n: usize) -> (u64, u64) {
        debug_assert!((1..=PIECE_MAX).contains(&n) && start + n <= buf.len());
        if start + 16 > buf.len() {
            return Self::new(&buf[start..start + n]).short();
        }
        // SAFETY: `start + 16 <= buf.len()` (checked above): both eight-byte
        // reads are in `buf`; they are unaligned
        let (a, b) = unsafe {
            let p = buf.as_ptr().add(start) as *const u64;
            (u64::from_le(p.read_unaligned()), u64::from_le(p.add(1).read_unaligned()))
        };
        // the masks from a table: the shift of a 128-bit mask by the length
        // was a dozen instructions with two conditional moves
        let (ma, mb) = SHORT_MASKS[n & 15];
        (a & ma, (b & mb) | (n as u64) << 56)
    }
}

const MULS: [u64; 4] = [K1, K2, K3, K4];

/// `SHORT_MASKS[n]`: the low `n` bytes of two words (`n` in 0..16).
static SHORT_MASKS: [(u64, u64); 16] = {
    let mut m = [(0u64, 0u64); 16];
    let mut n = 0;
    while n < 16 {
        let all = if n == 0 { 0 } else { u128::MAX >> (128 - 8 * n) };
        m[n] = (all as u64, (all >> 64) as u64);
        n += 1;
    }
    m
};

/// `MASKS[v]`: the low `v` bytes of a word.
const MASKS: [u64; 9] = {
    let mut m = [0u64; 9];
    let mut v = 1;
    while v < 9 {
        m[v] = if v == 8 { u64::MAX } else { (1u64 << (8 * v)) - 1 };
        v += 1;
    }
    m
};

/// Ask for the cache line at `p` ahead of its use (a hint: no effect on
/// what is computed; nothing on other targets).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault,
    // whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Up to 8 bytes as a little-endian word, zero-padded.
#[inline(always)]
fn le(p: &[u8]) -> u64 {
    let n = p.len();
    let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]) as u64;
    let u32_at = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]) as u64;
    match n {
        8.. => u64::from_le_bytes(p[..8].try_into().unwrap()),
        4..=7 => u32_at(0) | u32_at(n - 4) << (8 * (n - 4)),
        2..=3 => u16_at(0) | u16_at(n - 2) << (8 * (n - 2)),
        1 => p[0] as u64,
        0 => 0,
    }
}

/// One slot of [`PieceTable`]: two per cache line. `lo`, `hi`: the key
/// ([`Key::short`]; `hi` 0 = empty, [`BUSY`] = being written); `v0`, `v1`:
/// the ids (see [`PieceTable`]). Inserts write `hi` last, with release
/// order, so a reader that sees a slot's key sees its ids.
#[derive(Default)]
#[repr(C, align(32))]
struct Slot {
    lo: AtomicU64,
    hi: AtomicU64,
    v0: AtomicU64,
    v1: AtomicU64,
}

// SAFETY: atomics only; all zero is the empty slot.
unsafe impl ZeroValid for Slot {}

/// `hi` of a slot being written: no key has it (a key's `hi` has the
/// piece's length, 1 or more, in its top byte).
const BUSY: u64 = 1;
/// Ids kept in one [`PieceTable`] entry.
pub const TABLE_IDS: usize = 4;
/// Ids below this fit [`PieceTable`] entries (the first one shares its
/// word with the count).
pub const TABLE_ID_LIMIT: u64 = 1 << 24;

/// Pieces of up to [`PIECE_MAX`] bytes -> their ids, open addressing with
/// linear probing from the first slot of the hash's 64-byte line (both
/// slots of a line are compared at once): every token of 2 or more of those
/// bytes (one id) and, with the byte ids given to [`Self::new`], every single byte, put
/// there when the table is built; then, as they are met, pieces that are not
/// tokens, with their ids (up to [`TABLE_IDS`]), until the table is three
/// quarters full (then such pieces go to the 2-way [`PieceCache`]). So on
/// warm text a short piece is one probe, whether it is a token or not, and
/// its line can be prefetched. Entries are never changed or removed: the
/// ids of a piece are its ids for good, and an insert only ever fills an
/// empty slot (claimed with a compare-and-swap; two threads inserting the
/// same piece at once may both succeed, which costs a slot, not
/// correctness). Memory: fixed, 32 bytes times the next power of two at or
/// above twice the number of such tokens (and bytes).
///
/// Ids are 32 bits each, two to a word (see `pack_ids`), the count in the
/// top byte of the first; a vocabulary with an id of 2^24 or more has no
/// table.
pub struct PieceTable {
    slots: Zeroed<Slot>,
    shift: u32,
    /// entries allowed (three quarters of the slots)
    cap: usize,
    len: std::sync::atomic::AtomicUsize,
}

/// [`PieceTable::view`]: the slots' address, the hash shift and the index
/// mask, borrowed from the table.
#[derive(Clone, Copy)]
pub struct TableView<'a> {
    slots: *const Slot,
    shift: u32,
    mask: usize,
    _t: PhantomData<&'a PieceTable>,
}

impl TableView<'_> {
    /// The first slot of the line a key with this [`PieceTable::hash`] is
    /// looked up from: an even index below the slot count.
    #[inline(always)]
    pub fn line(&self, hash: u64) -> usize {
        (hash >> self.shift) as usize & !1
    }

    /// Start loading the line from [`Self::line`]: the address only (a
    /// prefetch cannot fault), so no bounds check.
    #[inline(always)]
    pub fn prefetch(&self, line: usize) {
        prefetch(self.slots.wrapping_add(line));
    }

    /// [`PieceTable::lookup`] from the key's [`Self::line`]. The two slots
    /// of a line at once, compared without a branch each: which of the two
    /// has the piece (when one does) is a coin toss that a branch per slot
    /// mispredicted.
    #[inline(always)]
    pub fn lookup(&self, lo: u64, hi: u64, line: usize) -> Option<(u64, u64)> {
        // any index is kept below the slot count (the mask); a line from
        // `Self::line` already is, and even
        let mut i = line & self.mask & !1;
        loop {
            // SAFETY: `i` is even and at most `mask` (the slot count, a power
            // of two of at least 16, minus one), so `i + 1` is below the slot
            // count too, and `(i + 2) & mask` keeps it so; the view borrows
            // the table, so the slots are alive
            let (a, b) = unsafe { (&*self.slots.add(i), &*self.slots.add(i + 1)) };
            let (ha, hb) = (a.hi.load(Ordering::Acquire), b.hi.load(Ordering::Acquire));
            // zero where the slot holds the key; one test of the smaller
            // difference and a conditional move (written as `in_a | in_b`
            // and `if`, the compiler made it two branches again)
            let da = (ha ^ hi) | (a.lo.load(Ordering::Relaxed) ^ lo);
            let db = (hb ^ hi) | (b.lo.load(Ordering::Relaxed) ^ lo);
            if da.min(db) == 0 {
                let s = std::hint::select_unpredictable(da == 0, a, b);
                return Some((s.v0.load(Ordering::Relaxed), s.v1.load(Ordering::Relaxed)));
            }
            // slots are filled in probe order, so an empty second slot ends the run
            if hb == 0 {
                return None;
            }
            i = (i + 2) & self.mask;
        }
    }
}

/// Pack 1..=[`TABLE_IDS`] ids (each below [`TABLE_ID_LIMIT`]) as a
/// [`PieceTable`] value: two words of two 32-bit ids each (`first | second
/// << 32`; absent ones 0), the count in the top byte of the first id.
#[inline]
fn pack_ids(ids: &[u32]) -> (u64, u64) {
    let id = |j: usize| ids.get(j).map_or(0, |&x| x);
    let (a, b) = (id(0) | (ids.len() as u32) << 24, id(1));
    (a as u64 | (b as u64) << 32, id(2) as u64 | (id(3) as u64) << 32)
}

/// A word of two ids (`first | second << 32`) as the word whose bytes in
/// memory are the two ids in order, in native byte order: itself on a
/// little-endian machine, halves swapped on a big-endian one.
#[inline(always)]
fn words_to_ne(w: u64) -> u64 {
    if cfg!(target_endian = "little") {
        w
    } else {
        w.rotate_left(32)
    }
}

impl PieceTable {
    /// From `(bytes, id)` of the tokens of 2..=[`PIECE_MAX`] bytes; tokens
    /// of other lengths are skipped, and of two equal byte strings the first
    /// given wins. None if such an id is [`TABLE_ID_LIMIT`] or more. With
    /// `seed` false, the table is sized for the tokens but starts empty (for
    /// a rule under which a piece that is a token is not always that token).
    /// With `bytes` (the id of each byte), every piece of one byte is put in
    /// too, seeded or not (a one-byte piece is its byte's id under any rule):
    /// then every piece of up to [`PIECE_MAX`] bytes takes the same path,
    /// with no branch on whether it is one byte. A byte whose id does not
    /// fit an entry is left out (its lookups miss).
    pub fn new<'a>(
        tokens: impl Iterator<Item = (&'a [u8], u32)>,
        seed: bool,
        bytes: Option<&[u32; 256]>,
    ) -> Option<PieceTable> {
        let mut items = Vec::new();
        for (t, id) in tokens {
            if !(2..=PIECE_MAX).contains(&t.len()) {
                continue;
            }
            if id as u64 >= TABLE_ID_LIMIT {
                return None;
            }
            let (lo, hi) = ShortKey::new(t).short();
            items.push((lo, hi, id));
        }
        let extra = if bytes.is_some() { 256 } else { 0 };
        let size = (2 * (items.len() + extra)).next_power_of_two().max(16);
        let shift = 64 - size.trailing_zeros();
        let table = PieceTable { slots: Zeroed::new(size), shift, cap: size / 4 * 3, len: Default::default() };
        for (b, &id) in bytes.into_iter().flatten().enumerate() {
            let (lo, hi) = ShortKey::new(&[b as u8]).short();
            table.insert(lo, hi, &[id]);
        }
        if seed {
            for (lo, hi, id) in items {
                table.insert(lo, hi, &[id]);
            }
        }
        Some(table)
    }

    /// The table's hash of a two-word key ([`Key::short`]): one multiply
    /// of the low word mixed with the high one (the length and bytes 8-15;
    /// for most pieces only the length), whose top bits pick the line
    /// (Fibonacci hashing). Cheaper than [`Key`]'s hash of four words, which
    /// the table does not need.
    #[inline(always)]
    pub fn hash(lo: u64, hi: u64) -> u64 {
        (lo ^ hi.wrapping_mul(K2).rotate_left(31)).wrapping_mul(K1)
    }

    /// The packed ids of the piece with this key ([`Key::short`]; the piece
    /// has 1..=[`PIECE_MAX`] bytes); write them with [`Self::push`].
    #[inline(always)]
    pub fn lookup(&self, lo: u64, hi: u64) -> Option<(u64, u64)> {
        let v = self.view();
        v.lookup(lo, hi, v.line(Self::hash(lo, hi)))
    }

    /// The table's probing state as plain values, for a hot loop: the table
    /// holds atomics, so the compiler reloads its fields after every write
    /// the loop makes (to the output) unless they are copied out first.
    #[inline(always)]
    pub fn view(&self) -> TableView<'_> {
        TableView { slots: self.slots.as_ptr(), shift: self.shift, mask: self.slots.len() - 1, _t: PhantomData }
    }

    /// Write the ids of a [`Self::lookup`] at `dst` and say how many: the
    /// value's two words are the ids as they lie in memory (the count in
    /// the top byte of the first one cleared), stored whatever the count,
    /// with no branch on it and no shift per id.
    ///
    /// # Safety
    /// `dst` must be valid for writes of [`TABLE_IDS`] ids.
    #[inline(always)]
    pub unsafe fn write(v: (u64, u64), dst: *mut u32) -> usize {
        let (v0, v1) = v;
        let n = (v0 >> 24 & 7) as usize;
        debug_assert!((1..=TABLE_IDS).contains(&n));
        // SAFETY: room for TABLE_IDS (4) ids from `dst` (the caller's
        // contract); the stores are unaligned, of ids in native order
        unsafe {
            let d = dst as *mut u64;
            d.write_unaligned(words_to_ne(v0 & !(0xFF << 24)));
            d.add(1).write_unaligned(words_to_ne(v1));
        }
        n
    }

    /// Append the ids of a [`Self::lookup`] to `out`.
    #[inline(always)]
    pub fn push(v: (u64, u64), out: &mut Vec<u32>) {
        out.reserve(TABLE_IDS);
        // SAFETY: room for TABLE_IDS ids was just reserved; `write` wrote
        // the first `n` of them
        unsafe {
            let len = out.len();
            let n = Self::write(v, out.as_mut_ptr().add(len));
            out.set_len(len + n);
        }
    }

    /// Append the ids of the piece with `key` to `out`; false if the table
    /// does not have it.
    #[inline(always)]
    pub fn get_into(&self, key: &Key, out: &mut Vec<u32>) -> bool {
        let (lo, hi) = key.short();
        match self.lookup(lo, hi) {
            Some(v) => {
                Self::push(v, out);
                true
            }
            None => false,
        }
    }

    /// Remember `ids` for the piece with this key; false (nothing done) if
    /// the table is full or the ids do not fit an entry. Safe from many
    /// threads at once: a slot is claimed by compare-and-swap, and an
    /// insert that meets a slot being written waits for its key, so each
    /// piece has at most one slot.
    pub fn insert(&self, lo: u64, hi: u64, ids: &[u32]) -> bool {
        if ids.is_empty() || ids.len() > TABLE_IDS || ids.iter().any(|&x| x as u64 >= TABLE_ID_LIMIT) {
            return false;
        }
        if self.len.load(Ordering::Relaxed) >= self.cap {
            return false;
        }
        let (v0, v1) = pack_ids(ids);
        let mask = self.slots.len() - 1;
        // the probe order of `lookup`: from the first slot of the hash's line
        let mut i = self.view().line(Self::hash(lo, hi));
        loop {
            let s = &self.slots[i];
            let mut h = s.hi.load(Ordering::Acquire);
            if h == 0 {
                match s.hi.compare_exchange(0, BUSY, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        s.lo.store(lo, Ordering::Relaxed);
                        s.v0.store(v0, Ordering::Relaxed);
                        s.v1.store(v1, Ordering::Relaxed);
                        s.hi.store(hi, Ordering::Release);
                        self.len.fetch_add(1, Ordering::Relaxed);
                        return true;
                    }
                    Err(now) => h = now,
                }
            }
            // Another thread is writing this slot (its key is a few stores
            // away): wait for the key before passing the slot, so that a
            // piece put in by two threads at once gets one slot, not two (a
            // second copy would take room the 3/4 cap counts).
            let mut spins = 0u32;
            while h == BUSY {
                if spins < 64 {
                    std::hint::spin_loop();
                    spins += 1;
                } else {
                    std::thread::yield_now(); // the writer was preempted
                }
                h = s.hi.load(Ordering::Acquire);
            }
            if h == hi && s.lo.load(Ordering::Relaxed) == lo {
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Bytes held.
    pub fn memory(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }
}

/// Ids below this fit the pair table.
pub const PAIR_ID_LIMIT: u64 = (1 << 21) - 1;
const PAIR_EMPTY: u64 = u64::MAX;

/// `(left, right) -> merged id`, every id below [`PAIR_ID_LIMIT`]: a slot is
/// `left << 42 | right << 21 | merged`, all ones when empty (impossible for
/// a real entry, whose ids are below 2^21 - 1).
pub struct PairTable {
    slots: Zeroed<u64>,
    shift: u32,
}

impl PairTable {
    /// From `((left, right), merged)`; None if an id is too large.
    pub fn new(pairs: impl ExactSizeIterator<Item = ((u32, u32), u32)>) -> Option<PairTable> {
        let size = (2 * pairs.len()).next_power_of_two().max(16);
        let mut slots = Zeroed::new(size);
        slots.fill(PAIR_EMPTY);
        let mut table = PairTable { slots, shift: 64 - size.trailing_zeros() };
        let mut items = Vec::with_capacity(pairs.len());
        for ((a, b), z) in pairs {
            if [a, b, z].iter().any(|&x| x as u64 >= PAIR_ID_LIMIT) {
                return None;
            }
            let key = (a as u64) << 21 | b as u64;
            items.push((table.home(key), key << 21 | z as u64));
        }
        let mask = size - 1;
        for (home, entry) in items {
            let key = entry >> 21;
            let mut i = home;
            while table.slots[i] != PAIR_EMPTY {
                if table.slots[i] >> 21 == key {
                    break;
                }
                i = (i + 1) & mask;
            }
            if table.slots[i] == PAIR_EMPTY {
                table.slots[i] = entry;
            }
        }
        Some(table)
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(K1) >> self.shift) as usize
    }

    /// The merged id of `(a, b)`, or `none`.
    #[inline(always)]
    pub fn get(&self, a: u32, b: u32, none: u32) -> u32 {
        if a as u64 >= PAIR_ID_LIMIT || b as u64 >= PAIR_ID_LIMIT {
            return none;
        }
        let key = (a as u64) << 21 | b as u64;
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s >> 21 == key {
                return (s & ((1 << 21) - 1)) as u32;
            }
            if s == PAIR_EMPTY {
                return none;
            }
            i = (i + 1) & mask;
        }
    }

    /// Start loading the slot [`Self::get`] reads first for `(a, b)`.
    #[inline(always)]
    pub fn prefetch(&self, a: u32, b: u32) {
        prefetch(&self.slots[self.home((a as u64) << 21 | b as u64)]);
    }

    /// Bytes held.
    pub fn memory(&self) -> usize {
        self.slots.len() * 8
    }
}

/// Ids below this fit the caches.
pub const CACHE_ID_LIMIT: u64 = 1 << 24;

/// One slot of a [`Cache`]: `seq` (bit 8 up: a sequence number, odd while
/// written; low byte: the number of ids), the key words, the ids packed
/// `bits` each into the id words. All zero = empty (no key is all zero).
#[repr(C, align(64))]
struct CacheSlot<const KW: usize, const IW: usize> {
    seq: AtomicU64,
    key: [AtomicU64; KW],
    ids: [AtomicU64; IW],
}

// SAFETY: atomics only; all zero is the empty slot.
unsafe impl<const KW: usize, const IW: usize> ZeroValid for CacheSlot<KW, IW> {}

/// Piece -> ids, bounded, shared by threads (see the module docs): `KW` key
/// words (pieces of up to `8 * KW - 1` bytes), `IW` words of ids.
pub struct Cache<const KW: usize, const IW: usize> {
    slots: Zeroed<CacheSlot<KW, IW>>,
    shift: u32,
    /// bits per id: enough for the largest id of the vocabulary
    bits: u32,
    /// most ids of one entry: `64 * IW / bits`
    most: usize,
}

/// What [`Cache::lookup`] found for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// its ids, appended
    Ids,
    /// the mark of [`Cache::put_elsewhere`]: its ids are in the spill cache (if still there)
    Elsewhere,
    /// nothing: not cached (or pushed out, or being written)
    Missing,
}

/// Pieces of up to [`CACHE_MAX`] bytes, 64-byte slots.
pub type PieceCache = Cache<4, 3>;
/// Pieces of up to [`LONG_CACHE_MAX`] bytes, 128-byte slots.
pub type LongCache = Cache<8, 7>;

/// Longest piece kept in [`LongCache`].
pub const LONG_CACHE_MAX: usize = 63;
/// Slots of the long-piece cache.
pub const LONG_CACHE_SLOTS: usize = 1 << 14;

impl<const KW: usize, const IW: usize> Cache<KW, IW> {
    /// `slots` (a power of two, at least 2) for ids below `id_limit` (at
    /// most [`CACHE_ID_LIMIT`]).
    pub fn new(slots: usize, id_limit: u64) -> Self {
        debug_assert!(slots.is_power_of_two() && slots >= 2 && id_limit <= CACHE_ID_LIMIT);
        let slots_box = Zeroed::new(slots);
        let bits = (64 - id_limit.saturating_sub(1).leading_zeros()).max(1);
        let most = (64 * IW / bits as usize).min(255);
        // sets of two slots: the set index takes log2(slots) - 1 bits of the hash
        Cache { slots: slots_box, shift: 64 - (slots.trailing_zeros() - 1), bits, most }
    }

    #[inline(always)]
    fn set(&self, key: &Key<KW>) -> usize {
        ((key.hash >> self.shift) as usize) * 2
    }

    /// Start loading the set [`Self::lookup`] will look at.
    #[inline(always)]
    pub fn prefetch(&self, key: &Key<KW>) {
        let set = self.set(key);
        prefetch(&self.slots[set]);
        prefetch(&self.slots[set + 1]);
    }

    /// Append the cached ids of `key` to `out`; false on a miss (or a
    /// [`Self::put_elsewhere`] mark). (Tests: the encoder asks
    /// [`Self::lookup`], which tells the mark from a miss.)
    #[cfg(test)]
    pub fn get(&self, key: &Key<KW>, out: &mut Vec<u32>) -> bool {
        self.lookup(key, out) == Cached::Ids
    }

    /// Append the cached ids of `key` to `out` ([`Cached::Ids`]), or tell a
    /// miss from a [`Self::put_elsewhere`] mark.
    #[inline(always)]
    pub fn lookup(&self, key: &Key<KW>, out: &mut Vec<u32>) -> Cached {
        let set = self.set(key);
        for s in &self.slots[set..set + 2] {
            if s.key[0].load(Ordering::Relaxed) != key.w[0] || s.key[KW - 1].load(Ordering::Relaxed) != key.w[KW - 1] {
                continue;
            }
            let seq = s.seq.load(Ordering::Acquire);
            if seq & 0x100 != 0 {
                return Cached::Missing;
            }
            let k: [u64; KW] = std::array::from_fn(|i| s.key[i].load(Ordering::Relaxed));
            let ids: [u64; IW] = std::array::from_fn(|i| s.ids[i].load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if s.seq.load(Ordering::Relaxed) != seq {
                return Cached::Missing;
            }
            if k != key.w {
                continue;
            }
            let n = (seq & 0xFF) as usize;
            if n == 0 {
                return Cached::Elsewhere;
            }
            if n > self.most {
                return Cached::Missing;
            }
            // id j is bits `bits * j ..` of the little-endian number in `ids`
            let (bits, mask) = (self.bits as usize, (1u64 << self.bits) - 1);
            for j in 0..n {
                let at = bits * j;
                let (w, o) = (at / 64, at % 64);
                let mut v = ids[w] >> o;
                if o + bits > 64 {
                    v |= ids[w + 1] << (64 - o);
                }
                out.push((v & mask) as u32);
            }
            return Cached::Ids;
        }
        Cached::Missing
    }

    /// Remember `ids` for `key` (skipped if there are too many, an id is
    /// too large, or the slot is being written). `pick` chooses the way to
    /// replace when neither is empty.
    #[inline]
    pub fn put(&self, key: &Key<KW>, ids: &[u32], pick: usize) {
        if ids.is_empty() || ids.len() > self.most || ids.iter().any(|&i| i as u64 >> self.bits != 0) {
            return;
        }
        let bits = self.bits as usize;
        let mut packed = [0u64; IW];
        for (j, &id) in ids.iter().enumerate() {
            let at = bits * j;
            let (w, o) = (at / 64, at % 64);
            packed[w] |= (id as u64) << o;
            if o + bits > 64 {
                packed[w + 1] |= (id as u64) >> (64 - o);
            }
        }
        self.store(key, &packed, ids.len(), pick)
    }

    /// Mark `key` as kept elsewhere (its ids do not fit an entry): a
    /// [`Self::lookup`] then answers [`Cached::Elsewhere`], and the caller
    /// asks the spill cache, which a plain miss does not.
    #[inline]
    pub fn put_elsewhere(&self, key: &Key<KW>, pick: usize) {
        self.store(key, &[0; IW], 0, pick)
    }

    /// Write one slot of `key`'s set: `count` ids packed in `packed` (0: the
    /// mark of [`Self::put_elsewhere`]).
    #[inline]
    fn store(&self, key: &Key<KW>, packed: &[u64; IW], count: usize, pick: usize) {
        let set = self.set(key);
        let empty = |s: &CacheSlot<KW, IW>| s.key[KW - 1].load(Ordering::Relaxed) == 0;
        let way = if empty(&self.slots[set]) {
            0
        } else if empty(&self.slots[set + 1]) {
            1
        } else {
            pick & 1
        };
        let s = &self.slots[set + way];
        let seq = s.seq.load(Ordering::Relaxed);
        if seq & 0x100 != 0 {
            return;
        }
        let busy = (seq | 0xFF) + 1; // the sequence number + 1: odd
        if s.seq.compare_exchange(seq, busy, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return;
        }
        fence(Ordering::Release);
        for (slot, &w) in s.key.iter().zip(&key.w) {
            slot.store(w, Ordering::Relaxed);
        }
        for (slot, &w) in s.ids.iter().zip(packed) {
            slot.store(w, Ordering::Relaxed);
        }
        // the next even sequence number, and the count
        s.seq.store(((busy >> 8) + 1) << 8 | count as u64, Ordering::Release);
    }

    /// Most ids of one entry.
    pub fn most(&self) -> usize {
        self.most
    }

    /// Bytes held (fixed).
    pub fn memory(&self) -> usize {
        self.slots.len() * std::mem::size_of::<CacheSlot<KW, IW>>()
    }
}

/// Longest piece kept in [`SpillCache`].
pub const SPILL_MAX: usize = 4096;
/// Shards of [`SpillCache`] (a power of two).
const SPILL_SHARDS: usize = 16;
/// Bytes of entries one shard may hold (keys, ids and a fixed cost per
/// entry) before it is emptied: 1 MiB. Its arenas grow by doubling, so a
/// shard allocates at most about twice that: 32 MiB for the whole cache.
pub const SPILL_SHARD_BYTES: usize = 1 << 20;
/// What one entry costs beyond its key and ids: its record in the ids arena
/// (four words) and its slot in the index (16 bytes, at a load of one half
/// or more: up to 32).
const SPILL_ENTRY_COST: usize = 48;
/// No entry: the end of a chain in a [`SpillShard`].
const SPILL_NONE: u32 = u32::MAX;

/// Piece -> ids for what the fixed caches cannot hold: pieces of
/// [`CACHE_MAX`] + 1 to [`SPILL_MAX`] bytes that [`LongCache`] does not take,
/// and results with more ids than an entry of the fixed caches holds (a
/// Cyrillic word of 30 bytes is 12 or more cl100k tokens; a line of Chinese
/// with no space is one piece of hundreds of bytes). Without it such a piece
/// is merged again every time it is seen, which on warm multilingual text
/// was a fifth of the encoder's time. A piece of up to [`LONG_CACHE_MAX`]
/// bytes is looked up here only when its fixed cache's entry marks it as
/// kept here ([`Cache::put_elsewhere`]): a piece whose ids fit an entry is
/// never kept here, so a miss there needs no lock.
///
/// Shared by threads: [`SPILL_SHARDS`] shards, each a mutex around an index
/// and two arenas, chosen by the piece's hash, so two threads rarely wait on
/// each other (the lock is taken only for these pieces, each of which would
/// otherwise cost a merge of hundreds of nanoseconds). Memory is bounded: a
/// shard that would pass [`SPILL_SHARD_BYTES`] is emptied first (counted as
/// key bytes + 4 bytes per id + [`SPILL_ENTRY_COST`]). A cached entry is
/// exactly what the merge loop returned for those bytes: a hit can never
/// change the ids.
///
/// Performance: an entry is no allocation of its own. A shard keeps every
/// key's bytes in one byte arena and every entry's record and ids in one
/// word arena, and indexes them by the piece's 64-bit hash (pieces of equal
/// hash chained, compared by bytes); emptying a shard clears the three and
/// keeps their capacity. (A map of boxed keys and boxed ids cost two
/// allocations an entry and a free storm at every emptying: 12% of
/// pretokenizing an open-vocabulary corpus, where most long pieces are seen
/// once; perf, 2026-11-28.)
pub struct SpillCache {
    shards: Vec<std::sync::Mutex<SpillShard>>,
}

#[derive(Default)]
struct SpillShard {
    /// hash -> the record of the last entry put with that hash
    index: std::collections::HashMap<u64, u32, std::hash::BuildHasherDefault<IdHasher>>,
    /// the keys' bytes, back to back
    keys: Vec<u8>,
    /// per entry: the previous entry of the same hash (or [`SPILL_NONE`]),
    /// its key's offset in `keys`, its key's length, its id count; then its ids
    words: Vec<u32>,
    /// bytes of entries, as counted against the bound
    bytes: usize,
}

impl SpillShard {
    /// The ids of `piece` (whose hash is `hash`), if kept.
    #[inline]
    fn find(&self, piece: &[u8], hash: u64) -> Option<&[u32]> {
        let mut at = *self.index.get(&hash)?;
        while at != SPILL_NONE {
            let r = at as usize;
            let (prev, off, len, n) = (self.words[r], self.words[r + 1], self.words[r + 2], self.words[r + 3]);
            let (off, len, n) = (off as usize, len as usize, n as usize);
            if self.keys[off..off + len] == *piece {
                return Some(&self.words[r + 4..r + 4 + n]);
            }
            at = prev;
        }
        None
    }
}

/// The identity hasher of [`SpillShard`]'s index, whose keys are already hashes.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // (only u64 keys are hashed; any other input is folded in, never lost)
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

impl Default for SpillCache {
    fn default() -> Self {
        SpillCache { shards: (0..SPILL_SHARDS).map(|_| Default::default()).collect() }
    }
}

impl SpillCache {
    #[inline(always)]
    fn shard(&self, hash: u64) -> &std::sync::Mutex<SpillShard> {
        &self.shards[(hash >> 59) as usize & (SPILL_SHARDS - 1)]
    }

    /// Append the cached ids of `piece` (whose [`spill_hash`] is `hash`) to
    /// `out`; false on a miss.
    #[inline]
    pub fn get(&self, piece: &[u8], hash: u64, out: &mut Vec<u32>) -> bool {
        // a poisoned shard (a panic while held) is still a valid cache
        let s = self.shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        match s.find(piece, hash) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    /// Remember `ids` for `piece` (skipped for pieces longer than [`SPILL_MAX`]).
    pub fn put(&self, piece: &[u8], hash: u64, ids: &[u32]) {
        if piece.len() > SPILL_MAX || ids.is_empty() {
            return;
        }
        let cost = piece.len() + 4 * ids.len() + SPILL_ENTRY_COST;
        let mut s = self.shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        if s.find(piece, hash).is_some() {
            return;
        }
        if s.bytes + cost > SPILL_SHARD_BYTES {
            // emptied, capacity kept: no allocation until it next fills
            s.index.clear();
            s.keys.clear();
            s.words.clear();
            s.bytes = 0;
        }
        // (offsets fit u32: a shard holds at most SPILL_SHARD_BYTES of entries)
        let (off, at) = (s.keys.len() as u32, s.words.len() as u32);
        let prev = s.index.insert(hash, at).unwrap_or(SPILL_NONE);
        s.keys.extend_from_slice(piece);
        s.words.extend_from_slice(&[prev, off, piece.len() as u32, ids.len() as u32]);
        s.words.extend_from_slice(ids);
        s.bytes += cost;
    }

    /// Bytes held now: what the shards have allocated.
    pub fn memory(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.keys.capacity() + 4 * s.words.capacity() + 16 * s.index.capacity()
            })
            .sum()
    }
}

/// Bits of [`Seen`] (a power of two): 512 KiB.
const SEEN_BITS: usize = 1 << 22;
/// [`Seen`] counts the bits it sets in a sample of one in this many ...
const SEEN_SAMPLE: usize = 16;
/// ... those at positions 0, 16, 32 and 48 of their word.
const SEEN_SAMPLE_MASK: u64 = 0x0001_0001_0001_0001;

/// Which pieces the encoder has merged before: one bit per hash value, set
/// when a piece is merged, all cleared once half of them are set. A piece
/// is kept in the caches only when its bit was already set, that is from
/// the second time it is merged on ([`super::encode::BpeModel`]'s
/// `remember`).
///
/// Performance: on an open vocabulary most distinct pieces occur once (1.6
/// M of the 2.06 M of 0.25 GB of web-like text); kept at once, each of them
/// took a slot of the short-piece table for good or pushed a piece that
/// recurs out of the 2-way cache, and those longer than an entry holds ids
/// cost a locked insert in the spill cache. Costs: a piece seen twice is
/// merged twice (instead of once); a piece that is cached is merged once
/// more after each clearing at most. A false "seen" (two pieces on one
/// bit: at most half the bits are set) only caches a piece early. The
/// answers never change: a cache only ever holds what the merge returned.
///
/// Shared by threads (atomic bits; a clearing racing a marking loses the
/// mark, which costs a merge). Memory: fixed, [`SEEN_BITS`] / 8 bytes.
pub struct Seen {
    words: Zeroed<AtomicU64>,
    /// bits set since the last clearing
    set: std::sync::atomic::AtomicUsize,
}

impl Default for Seen {
    fn default() -> Self {
        Seen { words: Zeroed::new(SEEN_BITS / 64), set: Default::default() }
    }
}

impl Seen {
    #[inline(always)]
    fn bit(hash: u64) -> (usize, u64) {
        // the top bits: the caches index by them too, but only to pick a
        // slot; here they pick a bit of a table 32 times the cache's slots
        let b = (hash.wrapping_mul(K3) >> (64 - SEEN_BITS.trailing_zeros())) as usize;
        (b / 64, 1 << (b % 64))
    }

    /// Whether a piece of this hash was marked (since the last clearing).
    #[inline(always)]
    pub fn has(&self, hash: u64) -> bool {
        let (w, m) = Self::bit(hash);
        self.words[w].load(Ordering::Relaxed) & m != 0
    }

    /// Start loading the word [`Self::has`] reads for this hash (a hint).
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        prefetch(self.words.as_ptr().wrapping_add(Self::bit(hash).0));
    }

    /// Mark a piece of this hash; whether it was marked already.
    #[inline]
    pub fn mark(&self, hash: u64) -> bool {
        let (w, m) = Self::bit(hash);
        if self.words[w].load(Ordering::Relaxed) & m != 0 {
            return true;
        }
        if self.words[w].fetch_or(m, Ordering::Relaxed) & m != 0 {
            return true;
        }
        // The bits set are counted in a sample: one in SEEN_SAMPLE of them
        // (by bit position, a fair sample of random hashes) adds
        // SEEN_SAMPLE. One shared counter written at every new piece was a
        // cache line bounced between the encoding threads.
        if m & SEEN_SAMPLE_MASK != 0
            && self.set.fetch_add(SEEN_SAMPLE, Ordering::Relaxed) + SEEN_SAMPLE >= SEEN_BITS / 2
        {
            self.set.store(0, Ordering::Relaxed);
            for w in self.words.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        false
    }

    /// Bytes held (fixed).
    pub fn memory(&self) -> usize {
        SEEN_BITS / 8
    }
}

/// The shard hash of a piece for [`SpillCache`] (any piece length).
#[inline]
pub fn spill_hash(piece: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(piece).wrapping_mul(K2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_a_buffer_equal_keys_of_the_piece() {
        let buf: Vec<u8> = (0..100u32).map(|b| (b * 37 + 11) as u8).collect();
        for start in 0..buf.len() {
            for n in 1..=CACHE_MAX.min(buf.len() - start) {
                let (a, b) = (ShortKey::new_in(&buf, start, n), ShortKey::new(&buf[start..start + n]));
                assert_eq!((a.w, a.hash), (b.w, b.hash), "{start} {n}");
            }
            for n in 1..=LONG_CACHE_MAX.min(buf.len() - start) {
                let (a, b) = (LongKey::new_in(&buf, start, n), LongKey::new(&buf[start..start + n]));
                assert_eq!((a.w, a.hash), (b.w, b.hash), "{start} {n}");
            }
        }
    }

    #[test]
    fn words_are_the_bytes_zero_padded() {
        let bytes: Vec<u8> = (1..=40u8).map(|b| b.wrapping_mul(37)).collect();
        for n in 1..=CACHE_MAX {
            let mut buf = [0u8; 32];
            buf[..n].copy_from_slice(&bytes[..n]);
            let want: Vec<u64> = buf.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            let k = Key::<4>::new(&bytes[..n]);
            assert_eq!(&k.w[..3], &want[..3], "{n}");
            assert_eq!(k.w[3], want[3] | (n as u64) << 56, "{n}");
        }
    }

    #[test]
    fn keys_differ_by_length_and_bytes() {
        let a = Key::<4>::new(b"ab");
        let b = Key::<4>::new(b"ab\0");
        assert_ne!(a.w, b.w);
        assert_ne!(Key::<4>::new(&[0u8; 31]).w, Key::<4>::new(&[0u8; 30]).w);
        assert_ne!(Key::<4>::new(&[0u8; 15]).short(), Key::<4>::new(&[0u8; 14]).short());
    }

    #[test]
    fn short_in_is_the_short_key_at_every_length_and_place() {
        let buf: Vec<u8> = (0..40u8).map(|x| x.wrapping_mul(37) | 1).collect();
        for start in 0..buf.len() {
            for n in 1..=PIECE_MAX.min(buf.len() - start) {
                let want = Key::<4>::new(&buf[start..start + n]).short();
                assert_eq!(ShortKey::short_in(&buf, start, n), want, "start {start}, n {n}");
            }
        }
    }

    fn table_ids(t: &PieceTable, piece: &[u8]) -> Option<Vec<u32>> {
        let mut out = vec![];
        t.get_into(&ShortKey::new(piece), &mut out).then_some(out)
    }

    #[test]
    fn piece_table_finds_every_token_and_nothing_else() {
        let toks: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("t{i}").into_bytes()).collect();
        let t = PieceTable::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32)), true, None).unwrap();
        for (i, tok) in toks.iter().enumerate() {
            assert_eq!(table_ids(&t, tok), Some(vec![i as u32]));
        }
        assert_eq!(table_ids(&t, b"x1"), None);
        assert_eq!(table_ids(&t, b"t1\0"), None);
        // not seeded: sized the same, empty
        let e = PieceTable::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32)), false, None).unwrap();
        assert_eq!(e.memory(), t.memory());
        assert_eq!(table_ids(&e, b"t1"), None);
        // an id that does not fit 24 bits: no table
        assert!(PieceTable::new([(&b"ab"[..], 1u32 << 24)].into_iter(), true, None).is_none());
    }

    #[test]
    fn piece_table_with_bytes_has_every_byte_seeded_or_not() {
        let toks: Vec<Vec<u8>> = (0..300u32).map(|i| format!("t{i}").into_bytes()).collect();
        let mut bytes = [0u32; 256];
        for (b, x) in bytes.iter_mut().enumerate() {
            *x = 1000 + (b as u32 * 7) % 256;
        }
        for seed in [true, false] {
            let t =
                PieceTable::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32)), seed, Some(&bytes)).unwrap();
            // sized for the tokens and the bytes: (300 + 256) * 2 -> 2048 slots
            assert_eq!(t.memory(), 2048 * 32);
            for b in 0..=255u8 {
                assert_eq!(table_ids(&t, &[b]), Some(vec![bytes[b as usize]]), "byte {b}, seeded {seed}");
            }
            for (i, tok) in toks.iter().enumerate() {
                assert_eq!(table_ids(&t, tok), seed.then(|| vec![i as u32]));
            }
        }
        // a byte id too large for an entry is left out; the others are there
        bytes[7] = 1 << 24;
        let t = PieceTable::new(std::iter::empty(), true, Some(&bytes)).unwrap();
        assert_eq!(table_ids(&t, &[7]), None);
        assert_eq!(table_ids(&t, &[8]), Some(vec![bytes[8]]));
    }

    #[test]
    fn piece_table_keeps_inserted_ids_until_three_quarters_full() {
        // 6 tokens: 16 slots, room for 12 entries
        let toks: Vec<Vec<u8>> = (0..6u32).map(|i| format!("t{i}").into_bytes()).collect();
        let t = PieceTable::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32)), true, None).unwrap();
        assert_eq!(t.memory(), 16 * 32);
        let ins = |p: &[u8], ids: &[u32]| {
            let k = ShortKey::new(p);
            let (lo, hi) = k.short();
            t.insert(lo, hi, ids)
        };
        // a piece already there: kept as it was
        assert!(ins(b"t3", &[9]));
        assert_eq!(table_ids(&t, b"t3"), Some(vec![3]));
        // every count of ids, the largest id that fits; too many ids or too large an id: refused
        let big = (1u32 << 24) - 1;
        for n in 1..=TABLE_IDS {
            let ids: Vec<u32> = (0..n as u32).map(|j| big - j).collect();
            assert!(ins(format!("piece{n}").as_bytes(), &ids));
            assert_eq!(table_ids(&t, format!("piece{n}").as_bytes()), Some(ids));
        }
        assert!(!ins(b"five", &[1, 2, 3, 4, 5]));
        assert!(!ins(b"large", &[1 << 24]));
        assert!(!ins(b"empty", &[]));
        // 6 + TABLE_IDS entries so far; fill up to 12: full, nothing more goes in
        for f in TABLE_IDS..6 {
            assert!(ins(format!("fill{f}").as_bytes(), &[1]));
        }
        assert!(!ins(b"more", &[1]));
        assert_eq!(table_ids(&t, b"more"), None);
        for (i, tok) in toks.iter().enumerate() {
            assert_eq!(table_ids(&t, tok), Some(vec![i as u32]));
        }
    }

    #[test]
    fn piece_table_inserts_from_threads_agree() {
        let toks: Vec<Vec<u8>> = (0..4000u32).map(|i| format!("t{i}").into_bytes()).collect();
        let t = PieceTable::new(toks.iter().enumerate().map(|(i, t)| (&t[..], i as u32)), true, None).unwrap();
        let ids_of = |i: u32| -> Vec<u32> { (0..1 + i % TABLE_IDS as u32).map(|j| (i * 7 + j) % 1000).collect() };
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for i in 0..2000u32 {
                        let p = format!("p{i}");
                        let k = ShortKey::new(p.as_bytes());
                        let (lo, hi) = k.short();
                        t.insert(lo, hi, &ids_of(i));
                        if let Some(got) = table_ids(&t, p.as_bytes()) {
                            assert_eq!(got, ids_of(i));
                        }
                    }
                });
            }
        });
        for i in 0..2000u32 {
            assert_eq!(table_ids(&t, format!("p{i}").as_bytes()), Some(ids_of(i)));
        }
        // one slot per piece: the 4,000 seeded tokens and the 2,000 pieces
        // the four threads all put in (a second copy would count here)
        assert_eq!(t.len.load(Ordering::Relaxed), 6000);
    }

    #[test]
    fn pair_table() {
        let pairs: Vec<((u32, u32), u32)> = (0..3000u32).map(|i| ((i, i * 7 % 1000), 5000 + i)).collect();
        let t = PairTable::new(pairs.iter().copied()).unwrap();
        for &((a, b), z) in &pairs {
            assert_eq!(t.get(a, b, u32::MAX), z);
        }
        assert_eq!(t.get(1, 2, u32::MAX), u32::MAX);
        assert_eq!(t.get(u32::MAX, 2, 7), 7);
        assert!(PairTable::new([((1u32 << 21, 0u32), 3u32)].into_iter()).is_none());
    }

    #[test]
    fn cache_round_trip_and_bounds() {
        let c = PieceCache::new(CACHE_SLOTS, CACHE_ID_LIMIT);
        assert_eq!(c.most(), 8); // 24-bit ids
        let mut out = vec![];
        let k = ShortKey::new(b"hello world");
        assert!(!c.get(&k, &mut out));
        let ids = [1, 0xFF_FFFF, 3, 4, 5, 6, 7, 0xAB_CDEF];
        c.put(&k, &ids, 0);
        assert!(c.get(&k, &mut out));
        assert_eq!(out, ids);
        // too many ids or too large an id: not kept
        let k2 = ShortKey::new(b"other");
        c.put(&k2, &[1; 9], 0);
        c.put(&k2, &[1 << 24], 0);
        assert!(!c.get(&k2, &mut out));
        // many keys: the cache never grows, and what it answers is right
        for i in 0..200_000u32 {
            let p = format!("p{i}");
            c.put(&ShortKey::new(p.as_bytes()), &[i, i + 1], i as usize);
        }
        let mut hits = 0;
        for i in 0..200_000u32 {
            let p = format!("p{i}");
            out.clear();
            if c.get(&ShortKey::new(p.as_bytes()), &mut out) {
                assert_eq!(out, [i, i + 1]);
                hits += 1;
            }
        }
        assert!(hits > 0 && hits <= CACHE_SLOTS);
        assert_eq!(c.memory(), CACHE_SLOTS * 64);
    }

    #[test]
    fn a_mark_says_elsewhere() {
        let c = PieceCache::new(1 << 8, 50_000);
        let l = LongCache::new(1 << 8, 50_000);
        let (k, lk) = (ShortKey::new(b"a long piece"), LongKey::new(&[9u8; 40]));
        let mut out = vec![];
        assert_eq!(c.lookup(&k, &mut out), Cached::Missing);
        c.put_elsewhere(&k, 0);
        l.put_elsewhere(&lk, 0);
        assert_eq!(c.lookup(&k, &mut out), Cached::Elsewhere);
        assert_eq!(l.lookup(&lk, &mut out), Cached::Elsewhere);
        assert!(!c.get(&k, &mut out) && !l.get(&lk, &mut out) && out.is_empty());
        // another key of the same set is not marked
        assert_eq!(c.lookup(&ShortKey::new(b"a long piecf"), &mut out), Cached::Missing);
    }

    #[test]
    fn narrow_ids_fit_more_and_long_keys() {
        // ids below 2^17: 11 ids of 17 bits in three words
        let c = PieceCache::new(1 << 8, 100_256);
        assert_eq!(c.most(), 11);
        let ids: Vec<u32> = (0..11).map(|j| 100_255 - j * 9_000).collect();
        let k = ShortKey::new(b"abcdefghijklmnopqrstuvwxyz01234");
        c.put(&k, &ids, 0);
        let mut out = vec![];
        assert!(c.get(&k, &mut out));
        assert_eq!(out, ids);
        c.put(&ShortKey::new(b"x"), &[1 << 17], 0);
        assert!(!c.get(&ShortKey::new(b"x"), &mut out));
        let l = LongCache::new(1 << 8, 200_019);
        assert_eq!(l.most(), 24); // 18-bit ids
        assert_eq!(l.memory(), 256 * 128);
        let piece = [7u8; 63];
        let ids: Vec<u32> = (0..24).map(|j| 200_018 - j).collect();
        l.put(&LongKey::new(&piece), &ids, 1);
        out.clear();
        assert!(l.get(&LongKey::new(&piece), &mut out));
        assert_eq!(out, ids);
        assert!(!l.get(&LongKey::new(&piece[..62]), &mut out));
    }

    #[test]
    fn spill_cache_chains_equal_hashes_and_empties_a_full_shard() {
        let c = SpillCache::default();
        let mut out = vec![];
        // two pieces given the same hash: both kept, each with its own ids
        c.put(b"first piece", 42, &[1, 2, 3]);
        c.put(b"second", 42, &[7]);
        c.put(b"second", 42, &[8]); // a piece already there is kept as it was
        assert!(c.get(b"first piece", 42, &mut out));
        assert!(c.get(b"second", 42, &mut out));
        assert_eq!(out, [1, 2, 3, 7]);
        assert!(!c.get(b"third", 42, &mut out));
        assert!(!c.get(b"second", 43, &mut out));
        // too long or no ids: not kept
        c.put(&[b'x'; SPILL_MAX + 1], 5, &[1]);
        c.put(b"none", 5, &[]);
        assert!(!c.get(&[b'x'; SPILL_MAX + 1], 5, &mut out) && !c.get(b"none", 5, &mut out));
        // one shard filled far past its share: what it answers is right, its memory bounded
        let hash = |i: u64| (i.wrapping_mul(K1) >> 5) | 3 << 59; // all in shard 3
        let ids = |i: u64| -> Vec<u32> { (0..1 + i % 20).map(|j| (i * 31 + j) as u32).collect() };
        for i in 0..100_000u64 {
            c.put(format!("piece {i}").as_bytes(), hash(i), &ids(i));
        }
        let mut hits = 0;
        for i in 0..100_000u64 {
            out.clear();
            if c.get(format!("piece {i}").as_bytes(), hash(i), &mut out) {
                assert_eq!(out, ids(i));
                hits += 1;
            }
        }
        assert!(hits > 1000 && hits < 100_000, "{hits}");
        assert!(c.memory() <= 3 * SPILL_SHARD_BYTES, "{}", c.memory());
    }

    #[test]
    fn seen_marks_once_and_clears_when_half_full() {
        let s = Seen::default();
        assert!(!s.has(12345));
        assert!(!s.mark(12345));
        assert!(s.has(12345) && s.mark(12345));
        // every other bit value: distinct hashes mostly land on distinct bits;
        // once half the bits are set, all are cleared
        let mut first = 0;
        for i in 0..SEEN_BITS as u64 {
            first += !s.mark(i.wrapping_mul(K2)) as usize;
        }
        assert!(first >= SEEN_BITS / 3, "{first}");
        assert!(s.set.load(Ordering::Relaxed) < SEEN_BITS / 2);
        // about half the bits at most: the count is a sample, its error small
        let ones: u32 = s.words.iter().map(|w| w.load(Ordering::Relaxed).count_ones()).sum();
        assert!((ones as usize) < SEEN_BITS * 5 / 8, "{ones}");
        assert_eq!(s.memory(), SEEN_BITS / 8);
    }

    #[test]
    fn cache_under_threads_never_tears() {
        use rayon::prelude::*;
        let c = PieceCache::new(1 << 10, 1 << 17);
        // few keys, many writers: readers must see each key's own ids or miss
        (0..400_000u32).into_par_iter().for_each(|i| {
            let k = i % 97;
            let p = format!("key{k}");
            let key = ShortKey::new(p.as_bytes());
            let mut out = vec![];
            if c.get(&key, &mut out) {
                assert_eq!(out, [k, k * 3, k * 5 + 1]);
            } else {
                c.put(&key, &[k, k * 3, k * 5 + 1], i as usize);
            }
        });
    }
}
