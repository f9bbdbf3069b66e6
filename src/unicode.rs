//! Character classes of the GPT-2/GPT-4/o200k split patterns (`\p{L}`, `\p{N}`,
//! `\s`, and for o200k the case-aware letter classes and `\p{M}`).
//!
//! The tables are taken from `regex-syntax` itself, the crate that fancy-regex
//! (and so tiktoken and rustbpe) uses, so the hand-written splitters classify
//! every code point exactly as the regex engines do, whatever Unicode version
//! the Rust standard library carries.
//!
//! Lookup is a two-level table: 4,352 blocks of 256 code points, each block an
//! index into a deduplicated set of 256-byte class blocks (about 100 KiB in all).
//! Each byte holds the coarse class ([`Cls`], low two bits) and the fine one
//! ([`Fine`], the bits above), so both lookups are one load and a mask.
//!
//! Not handled: general categories beyond those the GPT-family patterns name;
//! a pattern using other classes runs on the regex engine.

use regex_syntax::hir::{Class, HirKind};
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cls {
    /// Anything else: punctuation, symbols, marks, controls that are not whitespace.
    Other = 0,
    /// `\p{L}`
    Letter = 1,
    /// `\p{N}`
    Number = 2,
    /// `\s` (Unicode White_Space)
    Space = 3,
}

/// The finer classes o200k's pattern needs. Every code point is in exactly
/// one: o200k's "upper" class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` is
/// Upper ∪ Both ∪ Mark, its "lower" class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]` is
/// Lower ∪ Both ∪ Mark; `\p{L}` is Upper ∪ Lower ∪ Both (marks are not letters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Fine {
    Other = 0,
    /// `\p{Lu}`, `\p{Lt}`
    Upper = 1,
    /// `\p{Ll}`
    Lower = 2,
    /// `\p{Lm}`, `\p{Lo}`
    Both = 3,
    /// `\p{M}`
    Mark = 4,
    /// `\p{N}`
    Number = 5,
    /// `\s`
    Space = 6,
}

impl Fine {
    /// In o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
    #[inline(always)]
    pub fn upper(self) -> bool {
        matches!(self, Fine::Upper | Fine::Both | Fine::Mark)
    }
    /// In o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
    #[inline(always)]
    pub fn lower(self) -> bool {
        matches!(self, Fine::Lower | Fine::Both | Fine::Mark)
    }
}

const FINE: [Fine; 7] = [Fine::Other, Fine::Upper, Fine::Lower, Fine::Both, Fine::Mark, Fine::Number, Fine::Space];

struct Tables {
    index: Vec<u16>,
    blocks: Vec<[u8; 256]>,
}

fn ranges(pattern: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::ParserBuilder::new().build().parse(pattern).expect("built-in class pattern parses");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect(),
        other => panic!("unexpected HIR for {pattern}: {other:?}"),
    }
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut flat = vec![Cls::Other as u8; 0x110000];
        for (cls, pat) in [(Cls::Letter, r"\p{L}"), (Cls::Number, r"\p{N}"), (Cls::Space, r"\s")] {
            for (a, b) in ranges(pat) {
                for c in a..=b {
                    flat[c as usize] = cls as u8;
                }
            }
        }
        // the fine class in the bits above the coarse one; the categories are
        // disjoint (a test checks every code point against regex-syntax)
        for (fine, pat) in [
            (Fine::Upper, r"[\p{Lu}\p{Lt}]"),
            (Fine::Lower, r"\p{Ll}"),
            (Fine::Both, r"[\p{Lm}\p{Lo}]"),
            (Fine::Mark, r"\p{M}"),
            (Fine::Number, r"\p{N}"),
            (Fine::Space, r"\s"),
        ] {
            for (a, b) in ranges(pat) {
                for c in a..=b {
                    flat[c as usize] |= (fine as u8) << 2;
                }
            }
        }
        let mut blocks: Vec<[u8; 256]> = Vec::new();
        let mut seen: std::collections::HashMap<[u8; 256], u16> = std::collections::HashMap::new();
        let mut index = Vec::with_capacity(0x1100);
        for chunk in flat.chunks(256) {
            let mut b = [0u8; 256];
            b.copy_from_slice(chunk);
            let id = *seen.entry(b).or_insert_with(|| {
                blocks.push(b);
                (blocks.len() - 1) as u16
            });
            index.push(id);
        }
        Tables { index, blocks }
    })
}

const ASCII_FINE: [Fine; 128] = {
    let mut t = [Fine::Other; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        t[i] = if c.is_ascii_uppercase() {
            Fine::Upper
        } else if c.is_ascii_lowercase() {
            Fine::Lower
        } else if c.is_ascii_digit() {
            Fine::Number
        } else if c == b' ' || (c >= 9 && c <= 13) {
            Fine::Space
        } else {
            Fine::Other
        };
        i += 1;
    }
    t
};

/// The fine class of one character (for o200k's pattern).
#[inline(always)]
pub fn fine(c: char) -> Fine {
    let u = c as u32;
    if u < 128 {
        return ASCII_FINE[u as usize];
    }
    fine_slow(u)
}

#[inline(never)]
fn fine_slow(u: u32) -> Fine {
    let t = tables();
    let b = t.index[(u >> 8) as usize] as usize;
    FINE[(t.blocks[b][(u & 0xff) as usize] >> 2) as usize]
}

const ASCII: [Cls; 128] = {
    let mut t = [Cls::Other; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        t[i] = if c.is_ascii_alphabetic() {
            Cls::Letter
        } else if c.is_ascii_digit() {
            Cls::Number
        } else if c == b' ' || (c >= 9 && c <= 13) {
            Cls::Space
        } else {
            Cls::Other
        };
        i += 1;
    }
    t
};

/// The class of one character.
#[inline(always)]
pub fn class(c: char) -> Cls {
    let u = c as u32;
    if u < 128 {
        return ASCII[u as usize];
    }
    class_slow(u)
}

#[inline(never)]
fn class_slow(u: u32) -> Cls {
    let t = tables();
    let b = t.index[(u >> 8) as usize] as usize;
    match t.blocks[b][(u & 0xff) as usize] & 3 {
        1 => Cls::Letter,
        2 => Cls::Number,
        3 => Cls::Space,
        _ => Cls::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_table_agrees_with_regex_syntax() {
        for u in 0u32..128 {
            let c = char::from_u32(u).unwrap();
            assert_eq!(class(c), class_slow(u), "U+{u:04X}");
        }
    }

    fn set(pat: &str) -> Vec<bool> {
        let mut v = vec![false; 0x110000];
        for (a, b) in ranges(pat) {
            for c in a..=b {
                v[c as usize] = true;
            }
        }
        v
    }

    #[test]
    fn fine_classes_agree_with_regex_syntax_everywhere() {
        let l = set(r"\p{L}");
        let n = set(r"\p{N}");
        let sp = set(r"\s");
        let up = set(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]");
        let lo = set(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]");
        for u in 0u32..0x110000 {
            let Some(c) = char::from_u32(u) else { continue };
            let f = fine(c);
            assert_eq!(f, fine_slow(u), "U+{u:04X}");
            let i = u as usize;
            assert_eq!(f.upper(), up[i], "U+{u:04X}");
            assert_eq!(f.lower(), lo[i], "U+{u:04X}");
            assert_eq!(matches!(f, Fine::Upper | Fine::Lower | Fine::Both), l[i], "U+{u:04X}");
            assert_eq!(f == Fine::Number, n[i], "U+{u:04X}");
            assert_eq!(f == Fine::Space, sp[i], "U+{u:04X}");
            let coarse = match f {
                Fine::Upper | Fine::Lower | Fine::Both => Cls::Letter,
                Fine::Number => Cls::Number,
                Fine::Space => Cls::Space,
                Fine::Other | Fine::Mark => Cls::Other,
            };
            assert_eq!(class(c), coarse, "U+{u:04X}");
        }
    }

    #[test]
    fn some_classes() {
        assert_eq!(class('é'), Cls::Letter);
        assert_eq!(class('中'), Cls::Letter);
        assert_eq!(class('٣'), Cls::Number);
        assert_eq!(class('Ⅻ'), Cls::Number);
        assert_eq!(class('\u{3000}'), Cls::Space);
        assert_eq!(class('\u{85}'), Cls::Space);
        assert_eq!(class('\u{200b}'), Cls::Other);
        assert_eq!(class('😀'), Cls::Other);
        assert_eq!(class('\u{301}'), Cls::Other);
    }
}
