//! The piece starts of 64 bytes of text at once, as bit masks (ASCII, the
//! two-byte Latin-1 and Cyrillic letters, the CJK ideographs, and frequent
//! punctuation of two and three bytes).
//!
//! The scalar scanners (`gpt4_piece`, `o200k_piece`) decide one piece at a
//! time, and which kind of piece comes next (a word, a number, punctuation,
//! whitespace) is a branch the processor mispredicts about once a piece.
//! Here a window of 64 bytes that starts at a piece start is classified into
//! one 64-bit mask per character class (bit `j` = byte `j`), and the starts
//! of every piece in it follow from a few bit operations on those masks:
//! the pattern's alternatives, read as rules on a byte and its neighbours.
//! A regex match at a piece start depends only on the text from there on
//! (the GPT patterns have no lookbehind), so the window is scanned as if the
//! text began at its first byte.
//!
//! Only bytes below the window's *limit* are trusted: four bytes before the
//! first byte the window cannot read (non-ASCII, but for the chars of
//! [`Masks::add_multi`]) or the end of the window (a contraction looks
//! up to three bytes ahead), and no further than the start of a whitespace run
//! that reaches that point (where its last newline is, and whether it is
//! followed by a non-space, is not known yet). The caller emits the starts
//! below the limit and takes the next window from the last of them; a window
//! with no start below its limit (a long piece), and any text near a byte the
//! windows cannot read, go to the scalar scanner, one piece at a time.
//!
//! The rules, for a GPT-4-family pattern (`'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|
//! \p{N}{1,d}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`) on ASCII text, with
//! P the other characters (not a letter, digit or whitespace):
//! - a run of P starts a piece unless a space is before it (` ?` takes the
//!   space, which starts the piece); the newlines right after a run of P are
//!   its piece's (`[\r\n]*`);
//! - an apostrophe that starts a piece, followed by `s d m t` or `ll ve re`
//!   in any case, is a contraction; the byte after it starts a piece;
//! - a letter starts a piece unless a letter is before it, or a *prefix*: a
//!   whitespace byte other than `\r` `\n`, or a run of one P that starts a
//!   piece (and is not a contraction), is the first byte of the word after it;
//! - a digit starts a piece at the start of its run and every `d` digits on;
//! - a run of whitespace (after the newlines a run of P took) starts a
//!   piece; when it holds a newline, the byte after its last newline starts
//!   one (`\s*[\r\n]`); the run after the last newline, when two or more
//!   bytes long, leaves its last byte to start the next piece (`\s+(?!\S)`):
//!   that byte is a word's prefix, takes the punctuation after it, or is a
//!   piece of its own.
//!
//! The o200k pattern differs in its words: a word is uppercase letters then
//! lowercase letters (`P?U*L+|P?U+L*`), so an uppercase letter after a
//! lowercase one starts a piece; a contraction is not a piece of its own but
//! the end of the word before it (an apostrophe after a letter, followed by
//! `s d m t` or `ll ve re`); and after a run of P, its piece takes the run of
//! `\r`, `\n` and `/` that follows (`[\r\n/]*`). A contraction right after
//! another (`x's's`) alternates between the two readings; a window stops
//! before such an apostrophe and leaves it to the scalar scanner. A CJK
//! ideograph (`Lo`) is in both of o200k's letter classes: only an
//! uppercase-only letter after a lowercase-class one starts a piece, and one
//! right after an ideograph (`中A`: a piece of its own before a space, not
//! before `b`) stops the window there too.
//!
//! A prefix (`[^\r\n\p{L}\p{N}]?`) is one char: a run of P that is one
//! punctuation char of two or three bytes (`，` before `中`) is one too.
//!
//! Every rule is proven against the regex engine by the property tests in
//! `pretok.rs` (random text with long ASCII stretches, and real text).

/// Which pattern family the window is read with, and its longest number.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rule {
    Gpt4 { digits: usize },
    O200k { digits: usize },
}

/// One mask per class of the 64 bytes of a window (bit `j` = byte `j`); bits
/// at and after the first non-ASCII byte are clear in every mask.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Masks {
    upper: u64,
    lower: u64,
    digit: u64,
    /// `\s`: `\t \n \v \f \r` and space
    ws: u64,
    /// `\r` and `\n`
    nl: u64,
    space: u64,
    apos: u64,
    slash: u64,
    /// the first bytes of the two- and three-byte punctuation and symbols
    /// the window reads (their bytes are in no class: they read as P)
    lead2p: u64,
    lead3p: u64,
    /// the offset of the first byte the window does not read: a non-ASCII
    /// byte not in a char it knows (64: none)
    end: u32,
}

/// SSE2 compares of the 16 bytes of `v` (SSE2 is part of every x86_64).
#[cfg(target_arch = "x86_64")]
mod sse {
    use std::arch::x86_64::*;

    /// The bytes of `v` in `lo..=hi` (a range below 0x80 or within
    /// 0x80..=0xFF): v + (0x80 - lo) puts the range at the bottom of the
    /// signed bytes, one signed compare.
    #[inline(always)]
    pub(super) fn range(v: __m128i, lo: u8, hi: u8) -> __m128i {
        // SAFETY: SSE2 is part of the x86_64 baseline; register operations only
        unsafe {
            let x = _mm_add_epi8(v, _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8));
            _mm_cmplt_epi8(x, _mm_set1_epi8((0x80u8.wrapping_add(hi - lo) + 1) as i8))
        }
    }

    /// The bytes of `v` equal to `b`.
    #[inline(always)]
    pub(super) fn eq(v: __m128i, b: u8) -> __m128i {
        // SAFETY: as above
        unsafe { _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8)) }
    }

    /// The top bits of the bytes of `x`, as bits `16 * k..16 * k + 16` of a mask.
    #[inline(always)]
    pub(super) fn bits(x: __m128i, k: usize) -> u64 {
        // SAFETY: as above
        (unsafe { _mm_movemask_epi8(x) } as u32 as u64) << (16 * k)
    }

    /// The 16 bytes of `w` from `16 * k`.
    #[inline(always)]
    pub(super) fn load(w: &[u8], k: usize) -> __m128i {
        assert!(w.len() >= 16 * k + 16);
        // SAFETY: the 16 bytes are in `w` (asserted); the load is unaligned
        unsafe { _mm_loadu_si128(w.as_ptr().add(16 * k) as *const __m128i) }
    }
}

/// The classes of `w[..64]`, 16 bytes at a time with SSE2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify(w: &[u8]) -> Masks {
    use sse::{bits, eq, load, range};
    use std::arch::x86_64::*;
    assert!(w.len() >= 64);
    let mut m = Masks::default();
    let mut high = 0u64;
    for k in 0..4 {
        let v = load(w, k);
        let bits = |x| bits(x, k);
        let (range, eq) = (|lo, hi| range(v, lo, hi), |b| eq(v, b));
        // SAFETY: SSE2 (the x86_64 baseline); register operations only
        unsafe {
            let sp = eq(b' ');
            m.upper |= bits(range(b'A', b'Z'));
            m.lower |= bits(range(b'a', b'z'));
            m.digit |= bits(range(b'0', b'9'));
            m.ws |= bits(_mm_or_si128(range(9, 13), sp));
            m.nl |= bits(_mm_or_si128(eq(b'\n'), eq(b'\r')));
            m.space |= bits(sp);
            m.apos |= bits(eq(b'\''));
            m.slash |= bits(eq(b'/'));
            high |= bits(v);
        }
    }
    if high != 0 {
        let mut c = Multi::default();
        let mut lead3 = 0;
        for k in 0..4 {
            let v = load(w, k);
            let bits = |x| bits(x, k);
            let (range, eq) = (|lo, hi| range(v, lo, hi), |b| eq(v, b));
            c.c3 |= bits(eq(0xC3));
            c.d0 |= bits(eq(0xD0));
            c.d1 |= bits(eq(0xD1));
            c.r80_9e |= bits(range(0x80, 0x9E));
            c.r9f_bf |= bits(range(0x9F, 0xBF));
            c.r80_af |= bits(range(0x80, 0xAF));
            c.rb0_bf |= bits(range(0xB0, 0xBF));
            c.r80_9f |= bits(range(0x80, 0x9F));
            c.ra0_bf |= bits(range(0xA0, 0xBF));
            c.c2 |= bits(eq(0xC2));
            lead3 |= bits(range(0xE0, 0xEF));
            // SAFETY: SSE2 (the x86_64 baseline); register operations only
            unsafe {
                // the low bit of every byte moved to its top (a 16-bit shift:
                // the bits crossing into the high byte are not the ones read)
                c.odd |= bits(_mm_slli_epi16::<7>(v));
                c.x97_b7 |= bits(_mm_or_si128(eq(0x97), eq(0xB7)));
                let p2 = _mm_or_si128(range(0xA1, 0xA9), range(0xAB, 0xB1));
                let p2 = _mm_or_si128(p2, _mm_or_si128(range(0xB6, 0xB8), _mm_or_si128(eq(0xBB), eq(0xBF))));
                c.p2 |= bits(p2);
            }
        }
        if lead3 != 0 {
            for k in 0..4 {
                let v = load(w, k);
                let bits = |x| bits(x, k);
                let (range, eq) = (|lo, hi| range(v, lo, hi), |b| eq(v, b));
                c.e2 |= bits(eq(0xE2));
                c.e3 |= bits(eq(0xE3));
                c.e4 |= bits(eq(0xE4));
                c.e5_e9 |= bits(range(0xE5, 0xE9));
                c.ef |= bits(eq(0xEF));
                c.x80 |= bits(eq(0x80));
                c.x94_95 |= bits(range(0x94, 0x95));
                c.xbc |= bits(eq(0xBC));
                c.xbd |= bits(eq(0xBD));
                c.rb8_bf |= bits(range(0xB8, 0xBF));
                // SAFETY: SSE2 (the x86_64 baseline); register operations only
                unsafe {
                    c.t_e280 |= bits(_mm_or_si128(range(0x90, 0xA7), range(0xB0, 0xBE)));
                    c.t_e380 |= bits(_mm_or_si128(range(0x81, 0x84), range(0x88, 0xA0)));
                    let t = _mm_or_si128(range(0x81, 0x8F), range(0x9A, 0xA0));
                    c.t_efbc |= bits(_mm_or_si128(t, range(0xBB, 0xBF)));
                    c.t_efbd |= bits(_mm_or_si128(eq(0x80), range(0x9B, 0xA5)));
                }
            }
        }
        m.add_multi(high, &c);
    } else {
        m.end = 64;
    }
    m
}

/// The classes of `w[..64]`, a byte at a time (targets without SSE2).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn classify(w: &[u8]) -> Masks {
    classify_bytes(w)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytes(w: &[u8]) -> Masks {
    let mut m = Masks::default();
    let mut high = 0;
    let mut c = Multi::default();
    for (j, &b) in w[..64].iter().enumerate() {
        let bit = 1u64 << j;
        let set = |x: &mut u64, on: bool| *x |= if on { bit } else { 0 };
        let is = |lo: u8, hi: u8| (lo..=hi).contains(&b);
        set(&mut high, b >= 0x80);
        set(&mut c.c3, b == 0xC3);
        set(&mut c.d0, b == 0xD0);
        set(&mut c.d1, b == 0xD1);
        set(&mut c.r80_9e, is(0x80, 0x9E));
        set(&mut c.r9f_bf, is(0x9F, 0xBF));
        set(&mut c.r80_af, is(0x80, 0xAF));
        set(&mut c.rb0_bf, is(0xB0, 0xBF));
        set(&mut c.r80_9f, is(0x80, 0x9F));
        set(&mut c.ra0_bf, is(0xA0, 0xBF));
        set(&mut c.odd, b & 1 == 1);
        set(&mut c.x97_b7, b == 0x97 || b == 0xB7);
        set(&mut c.c2, b == 0xC2);
        set(&mut c.p2, is(0xA1, 0xA9) || is(0xAB, 0xB1) || is(0xB6, 0xB8) || b == 0xBB || b == 0xBF);
        set(&mut c.e2, b == 0xE2);
        set(&mut c.e3, b == 0xE3);
        set(&mut c.e4, b == 0xE4);
        set(&mut c.e5_e9, is(0xE5, 0xE9));
        set(&mut c.ef, b == 0xEF);
        set(&mut c.x80, b == 0x80);
        set(&mut c.x94_95, is(0x94, 0x95));
        set(&mut c.xbc, b == 0xBC);
        set(&mut c.xbd, b == 0xBD);
        set(&mut c.rb8_bf, is(0xB8, 0xBF));
        set(&mut c.t_e280, is(0x90, 0xA7) || is(0xB0, 0xBE));
        set(&mut c.t_e380, is(0x81, 0x84) || is(0x88, 0xA0));
        set(&mut c.t_efbc, is(0x81, 0x8F) || is(0x9A, 0xA0) || is(0xBB, 0xBF));
        set(&mut c.t_efbd, b == 0x80 || is(0x9B, 0xA5));
    }
    for (j, &b) in w[..64].iter().enumerate() {
        let bit = 1u64 << j;
        let set = |x: &mut u64, on: bool| *x |= if on { bit } else { 0 };
        set(&mut m.upper, b.is_ascii_uppercase());
        set(&mut m.lower, b.is_ascii_lowercase());
        set(&mut m.digit, b.is_ascii_digit());
        set(&mut m.ws, b == b' ' || (9..=13).contains(&b));
        set(&mut m.nl, b == b'\n' || b == b'\r');
        set(&mut m.space, b == b' ');
        set(&mut m.apos, b == b'\'');
        set(&mut m.slash, b == b'/');
    }
    if high != 0 {
        m.add_multi(high, &c);
    } else {
        m.end = 64;
    }
    m
}

/// Lead bytes and continuation-byte ranges of a window with non-ASCII
/// bytes, for [`Masks::add_multi`] (the three-byte ones are left clear when
/// the window has no lead byte of a three-byte char).
#[derive(Default)]
struct Multi {
    c3: u64,
    d0: u64,
    d1: u64,
    r80_9e: u64,
    r9f_bf: u64,
    r80_af: u64,
    rb0_bf: u64,
    r80_9f: u64,
    ra0_bf: u64,
    /// bytes with the low bit set
    odd: u64,
    /// `×` and `÷` after C3
    x97_b7: u64,
    c2: u64,
    /// the second bytes of the punctuation and symbols after C2 it reads
    p2: u64,
    e2: u64,
    e3: u64,
    e4: u64,
    e5_e9: u64,
    ef: u64,
    x80: u64,
    x94_95: u64,
    xbc: u64,
    xbd: u64,
    rb8_bf: u64,
    /// the third bytes read after E2 80, E3 80, EF BC and EF BD
    t_e280: u64,
    t_e380: u64,
    t_efbc: u64,
    t_efbd: u64,
}

impl Masks {
    /// The non-ASCII chars the window reads (every other non-ASCII byte
    /// ends what it knows). Letters: U+00C0-U+00FF but `×` and `÷` (lead
    /// byte C3: German, French, Spanish, ... letters), Cyrillic U+0400-U+047F
    /// (D0, D1), and the CJK ideographs U+4E00-U+9FFF. Every byte of such a
    /// letter is set in `upper` or `lower`, its case (an ideograph, `Lo`, is
    /// in both: o200k's two letter classes both hold it), so a run of
    /// letters, its start and a lowercase-to-uppercase change read as with
    /// ASCII letters. U+00C0-U+00DE are uppercase, U+00DF-U+00FF lowercase;
    /// U+0400-U+042F uppercase, U+0430-U+045F lowercase, and U+0460-U+047F
    /// pairs of an uppercase then a lowercase letter. Punctuation and symbols
    /// (in no class, so they read as P): U+00A1-U+00A9, U+00AB-U+00B1,
    /// U+00B6-U+00B8, `»`, `¿`; U+2010-U+2027 and U+2030-U+203E (dashes,
    /// quotes, `…`); the box drawing U+2500-U+257F; U+3001-U+3004 and
    /// U+3008-U+3020 (`、` `。` and CJK brackets); the fullwidth U+FF01-U+FF0F,
    /// U+FF1A-U+FF20, U+FF3B-U+FF40 and U+FF5B-U+FF65; their first bytes go
    /// to `lead2p` / `lead3p`, as a prefix is one char, not one byte. (A
    /// unit test checks every char of up to three bytes against the Unicode
    /// tables.) `end` becomes the first other non-ASCII byte, and the class
    /// bits from there are cleared.
    #[inline(always)]
    fn add_multi(&mut self, high: u64, c: &Multi) {
        // continuation bytes (bit j) after their lead byte (bit j - 1); a
        // lead byte at bit 63 has its continuation outside: not read
        let (c3, d0, d1) = (c.c3 << 1 & !c.x97_b7, c.d0 << 1, c.d1 << 1);
        let up = (c3 & c.r80_9e) | (d0 & c.r80_af) | (d1 & c.ra0_bf & !c.odd);
        let low = (c3 & c.r9f_bf) | (d0 & c.rb0_bf) | (d1 & (c.r80_9f | (c.ra0_bf & c.odd)));
        self.upper |= up | up >> 1;
        self.lower |= low | low >> 1;
        // two-byte punctuation, at its second byte
        let p2 = c.c2 << 1 & c.p2;
        // three-byte chars, at their third byte (one whose lead byte is at
        // bit 62 or 63 has bytes outside: not read); the bytes after a lead
        // byte of valid UTF-8 are continuation bytes, so only the ranges
        // that matter are tested
        let (e2, e3, ef) = (c.e2 << 1, c.e3 << 1, c.ef << 1);
        let han = ((c.e4 << 1 & c.rb8_bf) << 1) | c.e5_e9 << 2;
        let p3 = ((e2 & c.x80) << 1 & c.t_e280)
            | (e2 & c.x94_95) << 1
            | ((e3 & c.x80) << 1 & c.t_e380)
            | ((ef & c.xbc) << 1 & c.t_efbc)
            | ((ef & c.xbd) << 1 & c.t_efbd);
        let han = han | han >> 1 | han >> 2;
        self.upper |= han;
        self.lower |= han;
        self.lead2p = p2 >> 1;
        self.lead3p = p3 >> 2;
        let read = self.upper | self.lower | p2 | p2 >> 1 | p3 | p3 >> 1 | p3 >> 2;
        self.end = (high & !read).trailing_zeros();
        self.clear_from(self.end);
    }

    /// Clear every class bit at and after `e`.
    #[inline(always)]
    fn clear_from(&mut self, e: u32) {
        let keep = below(e);
        for x in [
            &mut self.upper,
            &mut self.lower,
            &mut self.digit,
            &mut self.ws,
            &mut self.nl,
            &mut self.space,
            &mut self.apos,
            &mut self.slash,
            &mut self.lead2p,
            &mut self.lead3p,
        ] {
            *x &= keep;
        }
    }
}

/// The bits below `e` (0..=64).
#[inline(always)]
fn below(e: u32) -> u64 {
    if e >= 64 {
        u64::MAX
    } else {
        (1u64 << e) - 1
    }
}

/// The bits of `m` reachable from a seed (a bit of `seeds & m`) going up
/// through consecutive bits of `m`: adding a seed carries through the rest
/// of its run, clearing it.
#[inline(always)]
fn fill_up(m: u64, seeds: u64) -> u64 {
    let s = seeds & m;
    (m & !m.wrapping_add(s)) | s
}

/// The bits of `m` from which a seed is reachable going up through `m`
/// (the bits of each run of `m` up to its last seed).
#[inline(always)]
fn fill_down(m: u64, seeds: u64) -> u64 {
    fill_up(m.reverse_bits(), seeds.reverse_bits()).reverse_bits()
}

/// The contractions that start at the apostrophes `cands` (each followed by
/// an ASCII letter, below bit 61): those followed by `s d m t` (two bytes)
/// and by `ll ve re` (three bytes), in any case.
#[inline(always)]
fn contractions(w: &[u8], mut cands: u64) -> (u64, u64) {
    let (mut c2, mut c3) = (0, 0);
    while cands != 0 {
        let j = cands.trailing_zeros() as usize;
        cands &= cands - 1;
        // the byte after is an ASCII letter, so `| 0x20` is its lowercase;
        // for the one after that, only a letter can give `l` or `e`
        let (a, b) = (w[j + 1] | 0x20, w[j + 2] | 0x20);
        if matches!(a, b's' | b'd' | b'm' | b't') {
            c2 |= 1 << j;
        } else if matches!((a, b), (b'l', b'l') | (b'v', b'e') | (b'r', b'e')) {
            c3 |= 1 << j;
        }
    }
    (c2, c3)
}

/// The runs of P (bytes of `p`) that start a piece (`pstart`) and hold one
/// char, at their last byte: such a char before a letter is the word's
/// prefix (`[^\r\n\p{L}\p{N}]?` is one char, of one to three bytes here).
#[inline(always)]
fn one_char(m: &Masks, pstart: u64, p: u64) -> u64 {
    let pend = p & !(p >> 1);
    (pstart & pend) | ((pstart & m.lead2p) << 1 & pend) | ((pstart & m.lead3p) << 2 & pend)
}

/// The piece starts in the 64 bytes `w` (a piece starts at `w[0]`), as a
/// mask; the limit below which they are exact (see the module's notes); and
/// the offset of the first byte the window could not read (64: none).
#[inline(always)]
pub(super) fn window(w: &[u8], rule: Rule) -> (u64, u32, u32) {
    let m = classify(w);
    let e = m.end;
    let letter = m.upper | m.lower;
    let ws1 = m.ws & !m.nl;
    let valid = below(e);
    let punct = valid & !(letter | m.digit | m.ws);
    let mut limit = e.saturating_sub(4);
    // contraction candidates lie below 61, so their two bytes after are in `w`
    let near = below(61);

    let (starts_letter, starts_punct, absorbed, digits) = match rule {
        Rule::Gpt4 { digits } => {
            // a run of P starts a piece unless a space is before it
            let pstart = punct & !(punct << 1) & !(m.space << 1);
            let (c2, c3) = contractions(w, m.apos & pstart & (letter >> 1) & near);
            let cc = c2 | c3;
            let inside = cc << 1 | c3 << 2;
            let after = (c2 << 2 | c3 << 3) & letter;
            let prefix = (one_char(&m, pstart, punct) | ws1) & (letter >> 1) & !cc;
            let lstart = (letter & !(letter << 1) & !(prefix << 1) & !inside) | after;
            // the newlines a run of P takes
            let absorbed = fill_up(m.nl, m.nl & (punct << 1));
            (lstart, pstart, absorbed, digits)
        }
        Rule::O200k { digits } => {
            // the run of \r \n / after a run of P is its piece's
            let chain = m.nl | m.slash;
            let absorbed = fill_up(chain, m.nl & (punct << 1));
            let p = punct & !absorbed;
            // a contraction after a contraction (`x's's`): left to the scalar scanner
            let cands = m.apos & (letter << 1) & (letter >> 1) & near;
            let twice = cands & (m.apos << 2 | m.apos << 3);
            if twice != 0 {
                limit = limit.min(twice.trailing_zeros());
            }
            let (c2, c3) = contractions(w, cands & !twice);
            let cc = c2 | c3;
            let inside = cc << 1 | c3 << 2;
            let after = (c2 << 2 | c3 << 3) & letter;
            let pstart = p & !(p << 1) & !(m.space << 1) & !cc;
            let prefix = (one_char(&m, pstart, p) | ws1) & (letter >> 1);
            // an uppercase-only letter (not Lo, which is in both masks) after
            // a letter of the lowercase class starts a piece ...
            let only_up = m.upper & !m.lower;
            let camel = only_up & (m.lower << 1);
            // ... but after a letter of both classes, whether it does depends
            // on what follows the run (`中A` + `b` is one piece, `中A` + ` `
            // two): left to the scalar scanner
            let both_up = only_up & ((m.upper & m.lower) << 1);
            if both_up != 0 {
                limit = limit.min(both_up.trailing_zeros());
            }
            let lstart = (((letter & !(letter << 1) & !(prefix << 1)) | camel) & !inside) | after;
            (lstart, pstart, absorbed, digits)
        }
    };

    // numbers: at the start of a run of digits and every `digits` digits on
    let mut dstart = m.digit & !(m.digit << 1);
    let mut run = m.digit;
    for k in 1..digits.min(64) {
        run &= m.digit << k;
    }
    let mut cur = dstart;
    loop {
        cur = if digits < 64 { (cur << digits) & run } else { 0 };
        if cur == 0 {
            break;
        }
        dstart |= cur;
    }

    // whitespace: what is left of each run after the newlines a run of P took
    let r = m.ws & !absorbed;
    let rstart = r & !(r << 1);
    let later_nl = fill_down(r, m.nl);
    // the part of each run after its last newline
    let t = r & !later_nl;
    let tstart = t & !(t << 1);
    let tlast = t & !(t >> 1) & (t << 1);
    // a run reaching the limit's end: only its start is known
    if e > 0 && (r >> (e - 1)) & 1 == 1 {
        let top = 63 - (rstart & valid).leading_zeros();
        limit = limit.min(top + 1);
    }

    let starts = 1 | starts_letter | starts_punct | dstart | rstart | tstart | tlast;
    (starts, limit, e)
}

/// Fill `ends` from `ends[k..]` with the ends of the pieces from byte `i`
/// (a piece start) of `text`, windows of 64 bytes at a time where the text
/// allows, else by `scalar` (the end of the piece at a byte); stops when
/// `ends` is full or fewer than 64 bytes are left. Returns (the byte reached,
/// ends written in all).
#[inline(always)]
pub(super) fn fill(
    text: &str,
    mut i: usize,
    ends: &mut [usize],
    mut k: usize,
    rule: Rule,
    scalar: impl Fn(&str, usize) -> usize,
) -> (usize, usize) {
    let b = text.as_bytes();
    while k < ends.len() && i + 64 <= b.len() {
        let (starts, limit, e) = window(&b[i..i + 64], rule);
        let mut s = starts & below(limit) & !1;
        if e < 16 || s == 0 {
            // a byte the window cannot read (a char of another script, a
            // symbol) near: the scalar scanner up to past it; or the piece
            // reaches past what the window knows: the scalar scanner for it
            let past = if e < 16 { i + e as usize } else { i };
            while k < ends.len() && i <= past {
                i = scalar(text, i);
                ends[k] = i;
                k += 1;
            }
            continue;
        }
        let base = i;
        while s != 0 && k < ends.len() {
            i = base + s.trailing_zeros() as usize;
            ends[k] = i;
            k += 1;
            s &= s - 1;
        }
    }
    (i, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::{class, Cls};

    #[test]
    fn classes_agree_with_the_unicode_tables() {
        // every ASCII byte at every offset of a window, and a non-ASCII byte cutting it
        for shift in 0..64 {
            let mut w = [0u8; 64];
            for (j, x) in w.iter_mut().enumerate() {
                *x = ((j * 7 + shift) % 128) as u8;
            }
            let m = classify(&w);
            assert_eq!(m, classify_bytes(&w));
            for (j, &x) in w.iter().enumerate() {
                let bit = |mask: u64| (mask >> j) & 1 == 1;
                let c = class(x as char);
                assert_eq!(bit(m.upper | m.lower), c == Cls::Letter, "{x}");
                assert_eq!(bit(m.digit), c == Cls::Number, "{x}");
                assert_eq!(bit(m.ws), c == Cls::Space, "{x}");
            }
            w[shift] = 0xC3;
            let m = classify(&w);
            assert_eq!(m.end, shift as u32);
            assert_eq!(m, classify_bytes(&w));
            assert_eq!((m.upper | m.lower | m.digit | m.ws | m.apos | m.slash) >> shift, 0);
        }
    }

    /// The non-ASCII chars the windows read, as documented in
    /// [`Masks::add_multi`]: letters, and P (punctuation and symbols).
    fn documented(u: u32) -> (bool, bool) {
        let letter = matches!(u, 0xC0..=0xFF | 0x400..=0x47F | 0x4E00..=0x9FFF) && u != 0xD7 && u != 0xF7;
        let p = matches!(
            u,
            0xA1..=0xA9
                | 0xAB..=0xB1
                | 0xB6..=0xB8
                | 0xBB
                | 0xBF
                | 0x2010..=0x2027
                | 0x2030..=0x203E
                | 0x2500..=0x257F
                | 0x3001..=0x3004
                | 0x3008..=0x3020
                | 0xFF01..=0xFF0F
                | 0xFF1A..=0xFF20
                | 0xFF3B..=0xFF40
                | 0xFF5B..=0xFF65
        );
        (letter, p)
    }

    /// Every char of two and three bytes, at several offsets of a window
    /// between ASCII letters: the window reads exactly the documented ones
    /// -- letters with their classes from the Unicode tables in every byte,
    /// punctuation in no class with its first byte marked -- and stops at
    /// any other.
    #[test]
    fn multibyte_chars_agree_with_the_unicode_tables() {
        use crate::unicode::{fine, Fine};
        for u in 0x80u32..0x10000 {
            let Some(ch) = char::from_u32(u) else { continue };
            let (letter, p) = documented(u);
            let mut enc = [0u8; 4];
            let bytes = ch.encode_utf8(&mut enc).as_bytes();
            let n = bytes.len();
            for at in [0usize, 1, 17, 31, 60, 61, 62, 63] {
                let mut w = [b'a'; 64];
                let fits = (64 - at).min(n);
                w[at..at + fits].copy_from_slice(&bytes[..fits]);
                let m = classify(&w);
                assert_eq!(m, classify_bytes(&w), "U+{u:04X} at {at}");
                let mask = ((1u64 << n) - 1) << at;
                if !(letter || p) || at + n > 64 {
                    assert_eq!(m.end, at as u32, "U+{u:04X} at {at}");
                    continue;
                }
                assert_eq!(m.end, 64, "U+{u:04X} at {at}");
                let f = fine(ch);
                let (up, low) = (m.upper & mask, m.lower & mask);
                if letter {
                    assert!(matches!(f, Fine::Upper | Fine::Lower | Fine::Both), "U+{u:04X} is {f:?}");
                    assert_eq!((up != 0, low != 0), (f.upper(), f.lower()), "U+{u:04X} at {at}");
                    assert!(up == 0 || up == mask, "U+{u:04X} at {at}");
                    assert!(low == 0 || low == mask, "U+{u:04X} at {at}");
                } else {
                    assert_eq!(f, Fine::Other, "U+{u:04X}");
                    assert_eq!(class(ch), Cls::Other, "U+{u:04X}");
                    assert_eq!(up | low | m.digit | m.ws | m.apos | m.slash, 0, "U+{u:04X} at {at}");
                    let lead = if n == 2 { m.lead2p } else { m.lead3p };
                    assert_eq!(lead, 1 << at, "U+{u:04X} at {at}");
                }
            }
        }
    }

    #[test]
    fn fills() {
        assert_eq!(fill_up(0b1111, 0b0010), 0b1110);
        assert_eq!(fill_up(0b1111, 0b1010), 0b1110);
        assert_eq!(fill_up(0b11011, 0b01000), 0b11000);
        assert_eq!(fill_up(0b11011, 0b00100), 0);
        assert_eq!(fill_up(u64::MAX, 1), u64::MAX);
        assert_eq!(fill_down(0b1111, 0b0100), 0b0111);
        assert_eq!(fill_down(0b11011, 0b00010), 0b00011);
        assert_eq!(fill_down(u64::MAX, 1 << 63), u64::MAX);
    }
}
