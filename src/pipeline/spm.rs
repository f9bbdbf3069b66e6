//! A SentencePiece model's encoding, whole: the normalizer (`normalizer.cc`) and
//! the model, as `tokenforge.pipeline.spm` describes and (slowly) runs them.
//!
//! Normalizer: at each place the longest user-defined symbol is copied as it is,
//! else the precompiled charsmap's longest rule gives the replacement, else the
//! character is copied (a byte that starts no valid character is U+FFFD);
//! `remove_extra_whitespaces` drops leading, trailing and repeated spaces,
//! `escape_whitespaces` writes a space as U+2581, `add_dummy_prefix` starts the
//! text with one. The charsmap is a Darts-clone double array over UTF-8 bytes
//! whose values point into a blob of NUL-terminated strings; every index is
//! checked against its size, so a damaged map is a `Format` error naming the
//! unit, never a read outside it, and each walk is bounded by the text.
//!
//! Models: `unigram` ([`Unigram`] with [`super::Rule::SentencePiece`]), `word`
//! (a piece starts at the text's start and at every U+2581) and `char` (user
//! symbols whole, else characters); for the last two an unknown piece is the
//! unknown id (consecutive ones one id) or, with byte fallback, its bytes.
//!
//! Not handled: the `bpe` model's merges (the Python engine runs them on this
//! normalizer's output), a denormalizer,
//! `treat_whitespace_as_suffix` (refused at load by the Python reader).

use super::unigram::{utf8_len, Scratch, Unigram};
use crate::error::{Error, Result};
use crate::lz78::trie::{ByteTrie, NONE};

const SPACE: &str = "\u{2581}";

/// The precompiled charsmap.
pub struct Charsmap {
    units: Vec<u32>,
    strings: Vec<u8>,
    first: [bool; 256],
}

impl Charsmap {
    pub fn new(blob: &[u8]) -> Result<Self> {
        if blob.len() <= 4 {
            return Err(Error::format(
                0,
                format!("the precompiled charsmap has {} bytes; too short for its header", blob.len()),
            ));
        }
        let size = u32::from_le_bytes(blob[..4].try_into().unwrap()) as usize;
        if size > blob.len() - 4 || !size.is_multiple_of(4) || size == 0 {
            return Err(Error::format(
                0,
                format!("the charsmap's trie size {size} does not fit its {} bytes", blob.len()),
            ));
        }
        let units: Vec<u32> =
            blob[4..4 + size].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let strings = blob[4 + size..].to_vec();
        let mut first = [false; 256];
        let base = offset(units[0]);
        for (b, f) in first.iter_mut().enumerate() {
            let p = base ^ b;
            *f = p < units.len() && label(units[p]) == b as u32;
        }
        Ok(Charsmap { units, strings, first })
    }

    /// Whether byte `b` followed by an ASCII byte starts no rule: no rule is `b`
    /// alone and none continues `b` with an ASCII byte (nmt_nfkc's rules on a
    /// letter are the letter and a combining mark).
    fn ascii_run_safe(&self, b: u8) -> bool {
        let units = &self.units;
        let pos = offset(units[0]) ^ b as usize;
        let Some(&u) = units.get(pos) else { return true };
        if label(u) != b as u32 {
            return true;
        }
        if (u >> 8) & 1 == 1 {
            return false;
        }
        let next = pos ^ offset(u);
        (0..0x80usize).all(|c| units.get(next ^ c).is_none_or(|&v| label(v) != c as u32))
    }

    fn bad(&self, pos: usize) -> Error {
        Error::format(0, format!("the charsmap's trie points outside itself (unit {pos} of {})", self.units.len()))
    }

    /// (length, value) of the longest rule at the start of `data`; (0, 0) if none.
    fn longest(&self, data: &[u8]) -> Result<(usize, usize)> {
        let units = &self.units;
        let mut pos = offset(units[0]);
        let (mut best_len, mut best_val) = (0, 0);
        for (i, &c) in data.iter().enumerate() {
            pos ^= c as usize;
            let u = *units.get(pos).ok_or_else(|| self.bad(pos))?;
            if label(u) != c as u32 {
                break;
            }
            pos ^= offset(u);
            if (u >> 8) & 1 == 1 {
                let v = *units.get(pos).ok_or_else(|| self.bad(pos))?;
                best_len = i + 1;
                best_val = (v & 0x7FFF_FFFF) as usize;
            }
        }
        Ok((best_len, best_val))
    }

    fn replacement(&self, value: usize) -> Result<&str> {
        let tail = self.strings.get(value..).filter(|t| !t.is_empty());
        let end = tail.and_then(|t| memchr::memchr(0, t));
        let (Some(tail), Some(end)) = (tail, end) else {
            return Err(Error::format(
                0,
                format!("a charsmap rule points at byte {value}, outside its replacement strings"),
            ));
        };
        std::str::from_utf8(&tail[..end])
            .map_err(|_| Error::format(0, format!("the charsmap replacement at byte {value} is not UTF-8")))
    }
}

#[inline(always)]
fn offset(u: u32) -> usize {
    ((u >> 10) << ((u & (1 << 9)) >> 6)) as usize
}

#[inline(always)]
fn label(u: u32) -> u32 {
    u & ((1 << 31) | 0xFF)
}

/// sentencepiece's `IsValidDecodeUTF8`: the length of the valid character at the
/// start of `data`, or 0 when its first byte starts none.
fn valid_utf8_len(data: &[u8]) -> usize {
    if data[0] < 0x80 {
        return 1;
    }
    (2..=4).find(|&n| n <= data.len() && std::str::from_utf8(&data[..n]).is_ok()).unwrap_or(0)
}

/// The normalizer's settings.
pub struct SpmNormalizer {
    charsmap: Option<Charsmap>,
    /// the user-defined symbols (ids unused: any non-NONE value)
    user: Option<ByteTrie>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    /// the ASCII bytes other than space that start no user symbol and, followed
    /// by an ASCII byte, no charsmap rule: such a byte is copied as it is
    plain: [bool; 256],
}

impl SpmNormalizer {
    pub fn new(
        charsmap: Option<Charsmap>,
        user: Option<ByteTrie>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
    ) -> Self {
        let mut plain = [false; 256];
        for (b, p) in plain.iter_mut().enumerate().take(0x80) {
            let byte = [b as u8];
            *p = b != b' ' as usize
                && charsmap.as_ref().is_none_or(|c| c.ascii_run_safe(b as u8))
                && !user.as_ref().is_some_and(|u| u.starts(&byte));
        }
        SpmNormalizer { charsmap, user, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, plain }
    }

    /// NormalizePrefix: (normalized text, bytes consumed) at the start of `data`.
    fn prefix<'a>(&'a self, data: &'a [u8]) -> Result<(&'a str, usize)> {
        if let Some((_, k)) = self.user.as_ref().and_then(|u| u.longest(data, NONE)) {
            // a user symbol is whole UTF-8 and so is its match
            return Ok((std::str::from_utf8(&data[..k]).unwrap_or("\u{fffd}"), k));
        }
        if let Some(cm) = &self.charsmap {
            if cm.first[data[0] as usize] {
                let (len, value) = cm.longest(data)?;
                if len > 0 {
                    return Ok((cm.replacement(value)?, len));
                }
            }
        }
        match valid_utf8_len(data) {
            0 => Ok(("\u{fffd}", 1)),
            k => Ok((std::str::from_utf8(&data[..k]).unwrap_or("\u{fffd}"), k)),
        }
    }

    /// The normalized text (U+2581 for spaces when escaping).
    pub fn normalize(&self, text: &str, out: &mut String) -> Result<()> {
        out.clear();
        let data = text.as_bytes();
        let n = data.len();
        let rm = self.remove_extra_whitespaces;
        let mut pos = 0;
        if rm {
            while pos < n {
                let (s, k) = self.prefix(&data[pos..])?;
                if s != " " {
                    break;
                }
                pos += k;
            }
        }
        if pos >= n {
            return Ok(());
        }
        let space = if self.escape_whitespaces { SPACE } else { " " };
        if self.add_dummy_prefix {
            out.push_str(space);
        }
        let mut prev_space = rm;
        while pos < n {
            // the common case: a run of ASCII that no rule touches, copied whole
            // (each byte plain and followed by ASCII or the end)
            let mut run = 0;
            while pos + run < n
                && self.plain[data[pos + run] as usize]
                && data.get(pos + run + 1).is_none_or(|&c| c < 0x80)
            {
                run += 1;
            }
            if run > 0 {
                out.push_str(&text[pos..pos + run]);
                prev_space = false;
                pos += run;
                continue;
            }
            let (mut s, k) = self.prefix(&data[pos..])?;
            if prev_space {
                s = s.trim_start_matches(' ');
            }
            if !s.is_empty() {
                if self.escape_whitespaces {
                    for (j, part) in s.split(' ').enumerate() {
                        if j > 0 {
                            out.push_str(SPACE);
                        }
                        out.push_str(part);
                    }
                } else {
                    out.push_str(s);
                }
                prev_space = s.ends_with(' ');
            }
            pos += k;
            if !rm {
                prev_space = false;
            }
        }
        if rm {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        Ok(())
    }
}

/// The model types this engine runs.
pub enum SpmModel {
    Unigram(Unigram),
    /// `bpe`: the normalizer alone runs here (the Python engine merges)
    NormalizeOnly,
    /// `word` or `char`: the pieces by text (user-defined symbols included) and
    /// the reserved pieces (looked up first, as `PieceToId` does)
    Lookup {
        word: bool,
        normal: ByteTrie,
        reserved: Option<ByteTrie>,
        user: Option<ByteTrie>,
        unk: u32,
        bytes: Option<Vec<u32>>,
    },
}

/// Normalizer then model.
pub struct SpmEncoder {
    pub normalizer: SpmNormalizer,
    pub model: SpmModel,
}

#[derive(Default)]
pub struct SpmScratch {
    norm: String,
    lattice: Scratch,
}

impl SpmEncoder {
    pub fn encode_into(&self, text: &str, scratch: &mut SpmScratch, out: &mut Vec<u32>) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.normalizer.normalize(text, &mut scratch.norm)?;
        let norm = scratch.norm.as_str();
        if norm.is_empty() {
            return Ok(());
        }
        match &self.model {
            SpmModel::Unigram(u) => u.encode_into(norm, &mut scratch.lattice, out),
            SpmModel::NormalizeOnly => Err(Error::invalid("this SentencePiece model type is encoded in Python")),
            SpmModel::Lookup { word, normal, reserved, user, unk, bytes } => {
                let lookup =
                    |w: &[u8]| reserved.as_ref().and_then(|r| r.get(w)).or_else(|| normal.get(w)).unwrap_or(*unk);
                let b = norm.as_bytes();
                let mut prev_unk = false;
                let mut emit = |w: &[u8], out: &mut Vec<u32>| {
                    let id = lookup(w);
                    let is_unk = id == *unk;
                    match bytes {
                        Some(ids) if is_unk => out.extend(w.iter().map(|&x| ids[x as usize])),
                        _ if is_unk && prev_unk => {}
                        _ => out.push(id),
                    }
                    prev_unk = is_unk;
                };
                let mut start = 0;
                let mut i = 0;
                while i < b.len() {
                    if *word {
                        // a word starts at every U+2581 (E2 96 81) but the text's first character
                        if i > 0 && b[i..].starts_with(SPACE.as_bytes()) {
                            emit(&b[start..i], out);
                            start = i;
                        }
                        i += utf8_len(b[i]);
                    } else {
                        let k = user.as_ref().and_then(|u| u.longest(&b[i..], NONE)).map_or(utf8_len(b[i]), |x| x.1);
                        emit(&b[i..i + k], out);
                        i += k;
                    }
                }
                if *word && start < b.len() {
                    emit(&b[start..], out);
                }
                Ok(())
            }
        }
    }
}
