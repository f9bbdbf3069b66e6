//! Pre-tokenization: splitting text into the pieces BPE never merges across.
//!
//! The GPT family of patterns is matched by hand-written scanners that
//! reproduce fancy-regex's leftmost-first, backtracking semantics exactly:
//! the GPT-4 scanner (nanochat's `\p{N}{1,2}`, cl100k's `\p{N}{1,3}`, Qwen2's
//! `\p{N}`, with or without tiktoken's `\s++$`), the o200k scanner (GPT-4o's
//! case-aware pattern) and the GPT-2 scanner. A pattern is recognised from its
//! text: every spelling in [`KNOWN`] (ours, tiktoken's current and older
//! `pat_str`s, Hugging Face `tokenizer.json`s) maps to a scanner, each spelling
//! proven equal to the regex engine by property tests on random text. They
//! are several times faster than the regex engine, which is most of what
//! makes encoding fast; for the GPT-4 family and o200k, most boundaries are
//! found 64 bytes at a time from bit masks of character classes (`block.rs`),
//! the scalar scanner taking the rest. Any other pattern goes through
//! fancy-regex; `None` keeps a whole document as one piece.
//!
//! Whatever the pattern, no text is lost: with a custom regex the text between
//! matches becomes pieces of its own (Hugging Face's `Split(pattern,
//! "isolated")`), so training counts it and encoding encodes it, and the
//! pieces of a text always concatenate back to it. Empty matches are skipped.
//!
//! Not handled: the regex engine's own cost. A custom pattern with
//! lookarounds or backreferences runs on fancy-regex's backtracking VM, which
//! can be super-linear on some inputs; fancy-regex's backtrack limit turns
//! catastrophic cases into an `Error::Pattern` rather than a hang. A spelling
//! of a GPT-family pattern not in [`KNOWN`] (even an equivalent one) also runs
//! on the regex engine: only spellings proven equal are recognised.

use crate::error::{Error, Result};
use crate::unicode::{class, fine, Cls, Fine};

mod block;

/// Pieces the scanner finds per call of [`Pretokenizer::scan_chunks`].
pub const SCAN_CHUNK: usize = 256;

/// nanochat's split pattern (GPT-4's with at most two digits per number).
pub const GPT4_PATTERN: &str =
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// GPT-4's (cl100k) split pattern, also rustbpe's default.
pub const CL100K_PATTERN: &str =
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// GPT-2's split pattern.
pub const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// GPT-4o's (o200k) split pattern, exactly tiktoken's `o200k_base` `pat_str`.
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);

/// The hand-written scanners and their parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scanner {
    /// GPT-4-style: numbers of 1..=digits digits; `ws_end`: a whitespace run
    /// reaching the end of the text is one piece (tiktoken's `\s++$`).
    Gpt4 {
        digits: usize,
        ws_end: bool,
    },
    /// GPT-4o-style (o200k): numbers of 1..=digits digits.
    O200k {
        digits: usize,
    },
    Gpt2,
}

/// Where `<NUM>` stands in a template, the number alternative (see [`Digits`]).
const N: &str = "<NUM>";

/// The known spellings: (template, scanner family, how `<NUM>` is spelled).
/// Each instance is checked against fancy-regex by the property tests below.
/// Why the spellings within a family agree (the tests are the proof; this is
/// the argument): a possessive `++`/`?+`/`*+` at the end of an alternative, or
/// before a part that cannot fail, never gives back anything another try
/// would use; `[^\r\n\p{L}\p{N}]?\p{L}+` retried without its optional char
/// must start `\p{L}+` on that (non-letter) char and fails; `\s*[\r\n]+` ends
/// at the last newline of the run like `\s*[\r\n]`, since no newline follows
/// it inside the run; the last `\s` after `\s+(?!\S)` is reached only for a
/// one-char run, where `\s+` takes that one char; the contraction lists are
/// prefix-free, so their order is irrelevant.
const KNOWN: &[(&str, Family, Digits)] = &[
    // ours (nanochat, rustbpe); GPT4_PATTERN and CL100K_PATTERN are its {1,2} and {1,3}
    (
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|<NUM>| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        Family::Gpt4,
        Digits::Plain,
    ),
    // tiktoken's older cl100k pat_str, and Hugging Face tokenizer.json files:
    // Llama-3 (`\p{N}{1,3}`), Qwen2 / Qwen2.5 / Qwen3 (`\p{N}`)
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|<NUM>| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        Family::Gpt4,
        Digits::Plain,
    ),
    // tiktoken's current cl100k_base pat_str (tiktoken_ext/openai_public.py): possessive, `\s++$`
    (
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|<NUM>| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
        Family::Gpt4End,
        Digits::Possessive,
    ),
    // GPT-2: ours (Hugging Face ByteLevel's)
    (GPT2_PATTERN, Family::Gpt2, Digits::None),
    // GPT-2: tiktoken's original gpt2 pat_str (the comment in openai_public.py)
    (r"'s|'t|'re|'ve|'m|'ll|'d| ?[\p{L}]+| ?[\p{N}]+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", Family::Gpt2, Digits::None),
    // GPT-2: tiktoken's current r50k/p50k pat_str
    (r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s", Family::Gpt2, Digits::None),
    // o200k: tiktoken's o200k_base/o200k_harmony pat_str, also GPT-4o's and
    // Llama-4's tokenizer.json
    (
        concat!(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|<NUM>| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        ),
        Family::O200k,
        Digits::Plain,
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Gpt4,
    Gpt4End,
    O200k,
    Gpt2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Digits {
    /// `\p{N}{1,d}` (d = 1..=9) or `\p{N}` (d = 1)
    Plain,
    /// `\p{N}{1,d}+` (d = 1..=9)
    Possessive,
    /// the template has no `<NUM>`
    None,
}

/// The digit count a template's `<NUM>` was spelled with, if `pattern` is an instance.
fn instance(template: &str, digits: Digits, pattern: &str) -> Option<usize> {
    if digits == Digits::None {
        return (template == pattern).then_some(0);
    }
    let at = template.find(N)?;
    let (pre, post) = (&template[..at], &template[at + N.len()..]);
    let mid = pattern.strip_prefix(pre)?.strip_suffix(post)?;
    if digits == Digits::Plain && mid == r"\p{N}" {
        return Some(1);
    }
    let rest = mid.strip_prefix(r"\p{N}{1,")?;
    let rest = if digits == Digits::Possessive { rest.strip_suffix("}+")? } else { rest.strip_suffix('}')? };
    match rest.as_bytes() {
        [d @ b'1'..=b'9'] => Some((d - b'0') as usize),
        _ => None,
    }
}

/// The scanner for a known spelling of a GPT-family pattern.
pub fn recognise(pattern: &str) -> Option<Scanner> {
    for &(template, family, digits) in KNOWN {
        if let Some(d) = instance(template, digits, pattern) {
            return Some(match family {
                Family::Gpt4 => Scanner::Gpt4 { digits: d, ws_end: false },
                Family::Gpt4End => Scanner::Gpt4 { digits: d, ws_end: true },
                Family::O200k => Scanner::O200k { digits: d },
                Family::Gpt2 => Scanner::Gpt2,
            });
        }
    }
    None
}

#[derive(Clone, Debug)]
pub enum Pretokenizer {
    /// A GPT-family pattern matched by a hand-written scanner (and its text).
    Scan(Scanner, String),
    Regex(Box<fancy_regex::Regex>, String),
    /// No splitting: the whole text is one piece.
    Whole,
}

impl Pretokenizer {
    /// `None` → whole text; a known pattern → the fast scanner; anything else → fancy-regex.
    pub fn new(pattern: Option<&str>) -> Result<Self> {
        let Some(p) = pattern else { return Ok(Pretokenizer::Whole) };
        if let Some(sc) = recognise(p) {
            return Ok(Pretokenizer::Scan(sc, p.to_string()));
        }
        Self::regex(p)
    }

    /// Always the regex engine (used to test the scanners against it).
    pub fn regex(p: &str) -> Result<Self> {
        if p.is_empty() {
            return Err(Error::Pattern("the split pattern is empty; pass None to keep whole documents".into()));
        }
        let re =
            fancy_regex::Regex::new(p).map_err(|e| Error::Pattern(format!("split pattern does not compile: {e}")))?;
        Ok(Pretokenizer::Regex(Box::new(re), p.to_string()))
    }

    /// The pattern text (`None` for whole-text mode).
    pub fn pattern(&self) -> Option<String> {
        match self {
            Pretokenizer::Scan(_, p) | Pretokenizer::Regex(_, p) => Some(p.clone()),
            Pretokenizer::Whole => None,
        }
    }

    /// Call `f` on every piece of `text`, in order. The pieces are never empty
    /// and always concatenate to `text`: with a custom regex, the text between
    /// two matches (or before the first, or after the last) is a piece of its
    /// own, as Hugging Face's `Split(pattern, "isolated")` does, and empty
    /// matches are skipped. (`re.findall` would drop that text.)
    #[inline]
    pub fn split<'a>(&self, text: &'a str, mut f: impl FnMut(&'a str)) -> Result<()> {
        match self {
            // The scanners: the piece ends a chunk at a time (64-byte windows
            // where the text allows, see `fill_ends`), then the pieces.
            Pretokenizer::Scan(..) => {
                self.scan_chunks(text, |bounds| {
                    for w in bounds.windows(2) {
                        f(&text[w[0]..w[1]]);
                    }
                });
            }
            Pretokenizer::Regex(re, _) => {
                // One pass over the matches, remembering where the last one
                // ended: the text before a match (a gap) is a piece of its own,
                // then the match, and the tail after the last match. Empty
                // matches are skipped (they cut nothing), so the pieces always
                // concatenate to `text`. `find_iter` resumes after each match
                // (one char further after an empty one), so the scan is linear
                // in the text apart from the regex engine's own backtracking.
                let mut done = 0;
                for m in re.find_iter(text) {
                    let m = m.map_err(|e| {
                        Error::Pattern(format!("split pattern failed on the text, searching from byte {done}: {e}"))
                    })?;
                    if m.start() == m.end() {
                        continue;
                    }
                    if m.start() > done {
                        f(&text[done..m.start()]);
                    }
                    f(m.as_str());
                    done = m.end();
                }
                if done < text.len() {
                    f(&text[done..]);
                }
            }
            Pretokenizer::Whole => {
                if !text.is_empty() {
                    f(text)
                }
            }
        }
        Ok(())
    }

    /// With a scanner: the pieces of `text` a chunk at a time -- the
    /// scanner fills the ends of up to [`SCAN_CHUNK`] pieces ([`Self::fill_ends`]),
    /// and `chunk` gets the bounds (`bounds[0]` where the chunk starts,
    /// `bounds[i + 1]` where its piece `i` ends: at most `SCAN_CHUNK + 1` of
    /// them, at least 2). False, with nothing done, if the pattern has no
    /// scanner. The one chunk loop of `split` and the encoder's hot loops.
    #[inline(always)]
    pub fn scan_chunks(&self, text: &str, mut chunk: impl FnMut(&[usize])) -> bool {
        let mut bounds = [0usize; SCAN_CHUNK + 1];
        loop {
            let from = bounds[0];
            let Some(k) = self.fill_ends(text, from, &mut bounds[1..]) else { return false };
            // (k is at most the chunk: said here, the indexing after needs no checks)
            let k = k.min(SCAN_CHUNK);
            if k == 0 {
                return true;
            }
            chunk(&bounds[..=k]);
            if k < SCAN_CHUNK {
                return true;
            }
            bounds[0] = bounds[k];
        }
    }

    /// With a scanner (a recognised GPT-family pattern): the ends of the
    /// pieces of `text` that start at byte `from` (0, or the end of a piece),
    /// written to `ends` in order, as many as fit (fewer only when the text
    /// ends), and how many were written; the same pieces as [`Self::split`].
    /// None for patterns without a scanner (a regex, the whole text), which
    /// must be split with [`Self::split`].
    ///
    /// For the encoder's hot loop: the scanner runs in a loop of its own,
    /// its state in registers, and the caller handles a chunk of pieces at
    /// a time (a callback per piece was too big to be inlined into the scan).
    ///
    /// On x86-64 CPUs with AVX2 and BMI1/2 (x86-64-v3), the same code built
    /// for them ([`Self::fill_ends_v3`]): its 128-bit operations take three
    /// operands (no register copy before each compare) and bit scans are
    /// single instructions: 21% fewer instructions on warm English. Three
    /// A/Bs of 3-4 interleaved process rounds: warm encoding +0-7% on
    /// English and code, +0-12% on multilingual text (o200k most); unseen
    /// text unchanged.
    #[inline]
    pub fn fill_ends(&self, text: &str, from: usize, ends: &mut [usize]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if x86_64_v3() {
            // SAFETY: the CPU has every feature `fill_ends_v3` is built for
            return unsafe { self.fill_ends_v3(text, from, ends) };
        }
        self.fill_ends_with(text, from, ends)
    }

    /// [`Self::fill_ends_with`] built for x86-64-v3.
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT ([`x86_64_v3`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn fill_ends_v3(&self, text: &str, from: usize, ends: &mut [usize]) -> Option<usize> {
        self.fill_ends_with(text, from, ends)
    }

    /// [`Self::fill_ends`] for any CPU of the target (the portable build).
    #[inline(always)]
    fn fill_ends_with(&self, text: &str, from: usize, ends: &mut [usize]) -> Option<usize> {
        let mut i = from;
        let mut k = 0;
        match self {
            &Pretokenizer::Scan(Scanner::Gpt4 { digits, ws_end }, _) => {
                // ASCII text 64 bytes at a time, then the scalar scanner for the rest
                let scalar = |t: &str, j: usize| gpt4_piece(t, j, digits, ws_end);
                (i, k) = block::fill(text, i, ends, k, block::Rule::Gpt4 { digits }, scalar);
                while k < ends.len() && i < text.len() {
                    i = gpt4_piece(text, i, digits, ws_end);
                    ends[k] = i;
                    k += 1;
                }
            }
            &Pretokenizer::Scan(Scanner::O200k { digits }, _) => {
                let scalar = |t: &str, j: usize| o200k_piece(t, j, digits);
                (i, k) = block::fill(text, i, ends, k, block::Rule::O200k { digits }, scalar);
                while k < ends.len() && i < text.len() {
                    i = o200k_piece(text, i, digits);
                    ends[k] = i;
                    k += 1;
                }
            }
            Pretokenizer::Scan(Scanner::Gpt2, _) => {
                while k < ends.len() && i < text.len() {
                    i = gpt2_next(text, i);
                    ends[k] = i;
                    k += 1;
                }
            }
            Pretokenizer::Regex(..) | Pretokenizer::Whole => return None,
        }
        Some(k)
    }

    pub fn split_vec<'a>(&self, text: &'a str) -> Result<Vec<&'a str>> {
        let mut v = Vec::new();
        self.split(text, |p| v.push(p))?;
        Ok(v)
    }
}

/// Whether the CPU has every feature [`Pretokenizer::fill_ends_v3`] is
/// built for (std keeps the CPU's answer: a few loads a call).
#[cfg(target_arch = "x86_64")]
#[inline]
fn x86_64_v3() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("lzcnt")
        && std::is_x86_feature_detected!("popcnt")
}

/// The char at byte offset `i` (which must be a char boundary) and its length.
#[inline(always)]
fn char_at(s: &str, i: usize) -> Option<(char, usize)> {
    let b = *s.as_bytes().get(i)?;
    if b < 0x80 {
        return Some((b as char, 1));
    }
    Some(decode_at(s.as_bytes(), i, b))
}

/// The non-ASCII char whose lead byte `b` is at `i` of `bytes`, which are
/// a `&str`'s (valid UTF-8, `i` a char boundary), and its length: decoded
/// from the lead byte's length bits without validating again.
#[inline(always)]
fn decode_at(bytes: &[u8], i: usize, b: u8) -> (char, usize) {
    let cont = |k: usize| (bytes[i + k] & 0x3f) as u32;
    let (u, l) = if b < 0xe0 {
        (((b & 0x1f) as u32) << 6 | cont(1), 2)
    } else if b < 0xf0 {
        (((b & 0x0f) as u32) << 12 | cont(1) << 6 | cont(2), 3)
    } else {
        (((b & 0x07) as u32) << 18 | cont(1) << 12 | cont(2) << 6 | cont(3), 4)
    };
    // valid UTF-8 decodes to a scalar value; `from_u32` only re-checks it
    (char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER), l)
}

#[inline(always)]
fn cls_at(s: &str, i: usize) -> Option<Cls> {
    let b = *s.as_bytes().get(i)?;
    if b < 0x80 {
        return Some(class(b as char));
    }
    char_at(s, i).map(|(c, _)| class(c))
}

/// End of the run of characters of class `k` starting at `i`.
#[inline(always)]
fn run_of(s: &str, mut i: usize, k: Cls) -> usize {
    let bytes = s.as_bytes();
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if class(b as char) != k {
                break;
            }
            i += 1;
        } else {
            let (c, l) = char_at(s, i).unwrap();
            if class(c) != k {
                break;
            }
            i += l;
        }
    }
    i
}

/// Eight bytes of `b` from `j` (which must have eight bytes) as a little-endian word.
#[inline(always)]
fn word_at(b: &[u8], j: usize) -> u64 {
    u64::from_le_bytes(b[j..j + 8].try_into().unwrap())
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `w` that is *not* in `lo..=hi` (ASCII
/// bounds, `lo >= 1`); bytes of 0x80 and up are never in the range. Each
/// byte is first given its high bit, so the subtractions never borrow from
/// the next byte.
#[inline(always)]
fn outside(w: u64, lo: u8, hi: u8) -> u64 {
    let y = w | HIGH;
    let ge = y.wrapping_sub(ONES * lo as u64) & HIGH; // byte & 0x7f >= lo
    let le = !y.wrapping_sub(ONES * (hi as u64 + 1)) & HIGH; // byte & 0x7f <= hi
    !(ge & le & !w) & HIGH
}

/// End of the run of ASCII bytes in `lo..=hi` (letters: case folded first
/// when `fold`) from `i`, eight bytes at a time. English words are a few
/// letters: one word-sized test and a count of trailing zeros replace a loop
/// whose exit branch was mispredicted once a word.
#[inline(always)]
fn ascii_run(b: &[u8], mut j: usize, lo: u8, hi: u8, fold: bool) -> usize {
    let f = if fold { ONES * 0x20 } else { 0 };
    while j + 8 <= b.len() {
        let w = word_at(b, j);
        let m = outside(w | f, lo, hi) | (w & HIGH);
        if m != 0 {
            return j + (m.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < b.len() && b[j] < 0x80 && ((b[j] | (f as u8)) >= lo && (b[j] | (f as u8)) <= hi) {
        j += 1;
    }
    j
}

/// End of the run of `\p{L}` from `i` (a char boundary): ASCII letters a
/// word at a time, then (if the run reaches a non-ASCII byte) char by char.
#[inline(always)]
fn letters_end(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    let j = ascii_run(b, i, b'a', b'z', true);
    // every byte before `j` from `i` is ASCII, so `j` is a char boundary
    if j < b.len() && b[j] >= 0x80 {
        return run_of(s, j, Cls::Letter);
    }
    j
}

/// At most `max` characters of class `k` from `i`.
#[inline(always)]
fn run_of_max(s: &str, mut i: usize, k: Cls, max: usize) -> usize {
    let mut n = 0;
    while n < max {
        match char_at(s, i) {
            Some((c, l)) if class(c) == k => {
                i += l;
                n += 1;
            }
            _ => break,
        }
    }
    i
}

/// Whitespace alternatives shared by the patterns: (tiktoken's cl100k only,
/// `ws_end`) `\s++$`, then (GPT-4 and o200k only) `\s*[\r\n]`, then
/// `\s+(?!\S)`, then `\s+`.
#[inline(always)]
fn whitespace(s: &str, i: usize, newline_rule: bool, ws_end: bool) -> usize {
    let bytes = s.as_bytes();
    // the whole run of whitespace, remembering the last \r or \n and the start of the last char
    let mut j = i;
    let mut last_nl = usize::MAX;
    let mut last_start = i;
    while j < bytes.len() {
        let b = bytes[j];
        if b < 0x80 {
            if class(b as char) != Cls::Space {
                break;
            }
            if b == b'\r' || b == b'\n' {
                last_nl = j;
            }
            last_start = j;
            j += 1;
        } else {
            let (c, l) = char_at(s, j).unwrap();
            if class(c) != Cls::Space {
                break;
            }
            last_start = j;
            j += l;
        }
    }
    if ws_end && j == bytes.len() {
        return j;
    }
    if newline_rule && last_nl != usize::MAX {
        return last_nl + 1;
    }
    if j == bytes.len() || last_start == i {
        // `\s+(?!\S)` matches the whole run at the end of text; otherwise a
        // one-char run falls through to `\s+`, which is the same one char.
        return j;
    }
    last_start
}

#[inline(always)]
fn is_ci(c: char, lower: char) -> bool {
    c == lower || c == lower.to_ascii_uppercase()
}

/// End of a case-insensitive contraction `'(?i:[sdmt]|ll|ve|re)` at byte
/// `i` (case-insensitive: `s` also matches U+017F ſ; a test checks the case
/// folds against regex-syntax), if there is one.
#[inline(always)]
fn contraction(s: &str, i: usize) -> Option<usize> {
    if s.as_bytes().get(i) != Some(&b'\'') {
        return None;
    }
    let (c1, l1) = char_at(s, i + 1)?;
    if matches!(c1, 's' | 'S' | 'd' | 'D' | 'm' | 'M' | 't' | 'T' | '\u{17F}') {
        return Some(i + 1 + l1);
    }
    let (c2, l2) = char_at(s, i + 1 + l1)?;
    if (is_ci(c1, 'l') && is_ci(c2, 'l')) || (is_ci(c1, 'v') && is_ci(c2, 'e')) || (is_ci(c1, 'r') && is_ci(c2, 'e')) {
        return Some(i + 1 + l1 + l2);
    }
    None
}

/// The GPT-4-pattern piece at byte `i` when it is a word,
/// `[^\r\n\p{L}\p{N}]?+\p{L}++`: a letter, or one character that may
/// prefix letters (not a letter, digit, `\r`, `\n` or `'`, which may start a
/// contraction) and a letter; then the run of letters (ASCII a word at a
/// time). Words of any script take this path: for a non-ASCII first or
/// second character only its class is looked up. None for any other piece.
#[inline(always)]
fn gpt4_word(s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes();
    let c = b[i];
    let p = if c.is_ascii_alphabetic() {
        i
    } else if c < 0x80 {
        if c.is_ascii_digit() || matches!(c, b'\r' | b'\n' | b'\'') {
            return None;
        }
        let n = *b.get(i + 1)?;
        if !(n.is_ascii_alphabetic() || (n >= 0x80 && cls_at(s, i + 1) == Some(Cls::Letter))) {
            return None;
        }
        i + 1
    } else {
        let (ch, l) = decode_at(b, i, c);
        match class(ch) {
            Cls::Letter => i,
            Cls::Number => return None,
            // a prefix (no non-ASCII char is \r or \n) if a letter follows
            _ if cls_at(s, i + l) == Some(Cls::Letter) => i + l,
            _ => return None,
        }
    };
    Some(letters_end(s, p))
}

/// The o200k-pattern piece at byte `i` when it is an ASCII word: an ASCII
/// letter, or an ASCII prefix (not a letter, digit, `\r` or `\n`) and an
/// ASCII letter. With ASCII letters only, both letter alternatives end where
/// the run of uppercase then the run of lowercase letters ends (`U*L+` if
/// there are lowercase letters, else `U+L*`), with or without the prefix,
/// then the optional contraction. None (the general path) when a run
/// reaches a non-ASCII byte (a letter of either class, or a mark), or the
/// piece is anything else.
#[inline(always)]
fn o200k_word(s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes();
    let c = b[i];
    let p = if c.is_ascii_alphabetic() {
        i
    } else if c < 0x80
        && !c.is_ascii_digit()
        && c != b'\r'
        && c != b'\n'
        && b.get(i + 1).is_some_and(|x| x.is_ascii_alphabetic())
    {
        i + 1
    } else {
        return None;
    };
    let q = ascii_run(b, p, b'A', b'Z', false);
    let e = ascii_run(b, q, b'a', b'z', false);
    if b.get(q).is_none_or(|&x| x < 0x80) && b.get(e).is_none_or(|&x| x < 0x80) {
        return Some(contraction(s, e).unwrap_or(e));
    }
    None
}

/// End of the GPT-4-pattern piece at byte `i`: the ASCII fast paths, then
/// the general scanner (one definition for `split` and `fill_ends`).
#[inline(always)]
fn gpt4_piece(text: &str, i: usize, digits: usize, ws_end: bool) -> usize {
    // `if let`s, not `Option::or_else`: with the fast paths in its closure,
    // `or_else` was too big to inline and cost a call for every piece
    if let Some(e) = gpt4_word(text, i) {
        return e;
    }
    if let Some(e) = ascii_other(text.as_bytes(), i, digits, false, false) {
        return e;
    }
    gpt4_next(text, i, digits, ws_end)
}

/// End of the o200k-pattern piece at byte `i`, as [`gpt4_piece`].
#[inline(always)]
fn o200k_piece(text: &str, i: usize, digits: usize) -> usize {
    if let Some(e) = o200k_word(text, i) {
        return e;
    }
    if let Some(e) = ascii_other(text.as_bytes(), i, digits, true, true) {
        return e;
    }
    o200k_next(text, i, digits)
}

/// The piece at byte `i` in the common ASCII cases the word paths leave to
/// the general scanners (`gpt4_next`, `o200k_next`), which it must agree
/// with: a run of ASCII digits (at most `digits`); a run of ASCII
/// punctuation, with one space before it or not, and the newlines (o200k:
/// and slashes, `slash`) after it; a run of newlines before an ASCII
/// character that is not whitespace, or at the end; a space before a digit.
/// None when a non-ASCII byte could change the piece, for an apostrophe
/// (the GPT-4 pattern's contractions; `apostrophe` false), and for anything
/// else.
#[inline(always)]
fn ascii_other(b: &[u8], i: usize, digits: usize, slash: bool, apostrophe: bool) -> Option<usize> {
    let ascii_cls = |j: usize| b.get(j).map(|&x| if x < 0x80 { Some(class(x as char)) } else { None });
    // ends a run of punctuation (from `j`), then its newlines
    let punct = |mut j: usize| {
        while let Some(Some(Cls::Other)) = ascii_cls(j) {
            j += 1;
        }
        if b.get(j).is_some_and(|&x| x >= 0x80) {
            return None; // may be more punctuation
        }
        while b.get(j).is_some_and(|&x| x == b'\r' || x == b'\n' || (slash && x == b'/')) {
            j += 1;
        }
        Some(j)
    };
    let c = b[i];
    if c >= 0x80 || (c == b'\'' && !apostrophe) {
        return None;
    }
    match class(c as char) {
        Cls::Number => {
            let mut j = i + 1;
            while j < i + digits && b.get(j).is_some_and(|x| x.is_ascii_digit()) {
                j += 1;
            }
            // a run cut short by a non-ASCII byte may go on (another script's digit)
            (j == i + digits || b.get(j).is_none_or(|&x| x < 0x80)).then_some(j)
        }
        // before a letter it is the letters' prefix (only o200k's word path
        // declines such a word, when its letters run into non-ASCII)
        Cls::Other if ascii_cls(i + 1) == Some(Some(Cls::Letter)) => None,
        Cls::Other => punct(i),
        Cls::Space if c == b' ' => match ascii_cls(i + 1) {
            Some(Some(Cls::Other)) if b[i + 1] != b'\'' || apostrophe => punct(i + 1),
            Some(Some(Cls::Number)) => Some(i + 1),
            _ => None,
        },
        Cls::Space if c == b'\r' || c == b'\n' => {
            let mut j = i + 1;
            while b.get(j).is_some_and(|&x| x == b'\r' || x == b'\n') {
                j += 1;
            }
            match ascii_cls(j) {
                None => Some(j),
                Some(Some(k)) if k != Cls::Space => Some(j),
                _ => None,
            }
        }
        _ => None,
    }
}

/// End of the GPT-4-pattern match starting at byte `i`.
fn gpt4_next(s: &str, i: usize, digits: usize, ws_end: bool) -> usize {
    let (c0, l0) = char_at(s, i).unwrap();
    // 1. '(?i:[sdmt]|ll|ve|re)
    if c0 == '\'' {
        if let Some(e) = contraction(s, i) {
            return e;
        }
    }
    let k0 = class(c0);
    match k0 {
        // 2. [^\r\n\p{L}\p{N}]?+\p{L}+   with the optional part empty
        Cls::Letter => return letters_end(s, i),
        // 3. \p{N}{1,digits}
        Cls::Number => return run_of_max(s, i, Cls::Number, digits),
        _ => {}
    }
    // 2. with the optional part taken (possessive: no retry without it)
    if c0 != '\r' && c0 != '\n' && cls_at(s, i + l0) == Some(Cls::Letter) {
        return letters_end(s, i + l0);
    }
    // 4. ` ?[^\s\p{L}\p{N}]++[\r\n]*`
    let start = if c0 == ' ' && cls_at(s, i + 1) == Some(Cls::Other) {
        Some(i + 1)
    } else if k0 == Cls::Other {
        Some(i)
    } else {
        None
    };
    if let Some(st) = start {
        let mut j = run_of(s, st, Cls::Other);
        let bytes = s.as_bytes();
        while j < bytes.len() && (bytes[j] == b'\r' || bytes[j] == b'\n') {
            j += 1;
        }
        return j;
    }
    // 5-7. whitespace
    whitespace(s, i, true, ws_end)
}

#[inline(always)]
fn fine_at(s: &str, i: usize) -> Option<(Fine, usize)> {
    let b = *s.as_bytes().get(i)?;
    if b < 0x80 {
        return Some((fine(b as char), 1));
    }
    char_at(s, i).map(|(c, l)| (fine(c), l))
}

/// o200k's two letter alternatives at byte `p`, without the optional prefix:
/// (end of `U*L+`, end of `U+L*`), where U = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`
/// and L = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`. Backtracking `U*L+`: `U*` takes the
/// whole U-run p..q; if L+ can start at q it runs to the end of the L-run;
/// otherwise `U*` gives back chars until one is also in L (Lm, Lo, M), and
/// `L+` takes just that char (the chars after it in the run are upper-only).
/// `U+L*` is the U-run then the L-run after it.
#[inline(always)]
fn o200k_letters(s: &str, p: usize) -> (Option<usize>, Option<usize>) {
    let bytes = s.as_bytes();
    let mut q = p;
    let mut last_both = None;
    // fast path for ASCII: uppercase letters are U only
    q = ascii_run(bytes, q, b'A', b'Z', false);
    while let Some((f, l)) = fine_at(s, q) {
        if !f.upper() {
            break;
        }
        if f.lower() {
            last_both = Some(q + l);
        }
        q += l;
    }
    let mut e = q;
    e = ascii_run(bytes, e, b'a', b'z', false);
    while let Some((f, l)) = fine_at(s, e) {
        if !f.lower() {
            break;
        }
        e += l;
    }
    let x1 = if e > q { Some(e) } else { last_both };
    let x2 = if q > p { Some(e) } else { None };
    (x1, x2)
}

/// End of the o200k-pattern match starting at byte `i`:
/// `P?U*L+C?|P?U+L*C?|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// with P = `[^\r\n\p{L}\p{N}]` and C the contractions.
fn o200k_next(s: &str, i: usize, digits: usize) -> usize {
    let (c0, l0) = char_at(s, i).unwrap();
    let f0 = fine(c0);
    let with_suffix = |e: usize| contraction(s, e).unwrap_or(e);
    // 1-2. the letter alternatives; P? is greedy, so each alternative is
    // tried first with c0 as the prefix (when it can be one), then without.
    let prefix = c0 != '\r' && c0 != '\n' && matches!(f0, Fine::Other | Fine::Mark | Fine::Space);
    let (a1, a2) = if prefix { o200k_letters(s, i + l0) } else { (None, None) };
    if let Some(e) = a1 {
        return with_suffix(e);
    }
    let (b1, b2) = o200k_letters(s, i);
    if let Some(e) = b1.or(a2).or(b2) {
        return with_suffix(e);
    }
    let k0 = class(c0);
    // 3. \p{N}{1,digits}
    if k0 == Cls::Number {
        return run_of_max(s, i, Cls::Number, digits);
    }
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let start = if c0 == ' ' && cls_at(s, i + 1) == Some(Cls::Other) {
        Some(i + 1)
    } else if k0 == Cls::Other {
        Some(i)
    } else {
        None
    };
    if let Some(st) = start {
        let mut j = run_of(s, st, Cls::Other);
        let bytes = s.as_bytes();
        while j < bytes.len() && matches!(bytes[j], b'\r' | b'\n' | b'/') {
            j += 1;
        }
        return j;
    }
    // 5-7. whitespace (`\s*[\r\n]+` ends where `\s*[\r\n]` does: no newline
    // follows the last newline of the run inside the run)
    whitespace(s, i, true, false)
}

/// End of the GPT-2-pattern match starting at byte `i`.
fn gpt2_next(s: &str, i: usize) -> usize {
    let bytes = s.as_bytes();
    let (c0, l0) = char_at(s, i).unwrap();
    if c0 == '\'' {
        let rest = &bytes[i + 1..];
        for suffix in [&b"s"[..], b"t", b"re", b"ve", b"m", b"ll", b"d"] {
            if rest.starts_with(suffix) {
                return i + 1 + suffix.len();
            }
        }
    }
    let k0 = class(c0);
    if k0 != Cls::Space {
        return run_of(s, i, k0);
    }
    if c0 == ' ' {
        if let Some(k1) = cls_at(s, i + l0) {
            if k1 != Cls::Space {
                return run_of(s, i + 1, k1);
            }
        }
    }
    whitespace(s, i, false, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(p: &str, text: &str) {
        let fast = Pretokenizer::new(Some(p)).unwrap();
        assert!(matches!(fast, Pretokenizer::Scan(..)), "{p} is not recognised");
        let slow = Pretokenizer::regex(p).unwrap();
        assert_eq!(fast.split_vec(text).unwrap(), slow.split_vec(text).unwrap(), "text {text:?}");
        assert_eq!(filled(&fast, text, 2), slow.split_vec(text).unwrap(), "text {text:?}");
        assert!(slow.fill_ends(text, 0, &mut [0; 4]).is_none());
    }

    /// Every recognised spelling: each template with each digit spelling.
    fn known_instances() -> Vec<String> {
        let mut v = Vec::new();
        for &(t, _, digits) in KNOWN {
            match digits {
                Digits::None => v.push(t.to_string()),
                Digits::Plain => {
                    v.push(t.replace(N, r"\p{N}"));
                    for d in 1..=9 {
                        v.push(t.replace(N, &format!(r"\p{{N}}{{1,{d}}}")));
                    }
                }
                Digits::Possessive => {
                    for d in 1..=9 {
                        v.push(t.replace(N, &format!(r"\p{{N}}{{1,{d}}}+")));
                    }
                }
            }
        }
        v
    }

    /// (scanner, regex engine) for every known spelling, compiled once.
    fn pairs() -> &'static [(String, Pretokenizer, Pretokenizer)] {
        static P: std::sync::OnceLock<Vec<(String, Pretokenizer, Pretokenizer)>> = std::sync::OnceLock::new();
        P.get_or_init(|| {
            known_instances()
                .into_iter()
                .map(|p| {
                    let fast = Pretokenizer::new(Some(&p)).unwrap();
                    assert!(matches!(fast, Pretokenizer::Scan(..)), "{p} is not recognised");
                    let slow = Pretokenizer::regex(&p).unwrap();
                    (p, fast, slow)
                })
                .collect()
        })
    }

    fn check_all(text: &str) {
        for (p, fast, slow) in pairs() {
            let want = slow.split_vec(text).unwrap();
            assert_eq!(fast.split_vec(text).unwrap(), want, "pattern {p}\ntext {text:?}");
            // the chunked form gives the same pieces, whatever the chunk
            for chunk in [1, 3, 256] {
                assert_eq!(filled(fast, text, chunk), want, "pattern {p}, chunks of {chunk}\ntext {text:?}");
            }
        }
    }

    /// The pieces of `text` by [`Pretokenizer::fill_ends`], `chunk` ends at a
    /// time; checked equal to those of the portable build
    /// (`fill_ends_with`), which `fill_ends` does not run on a CPU it has a
    /// build for (x86-64-v3).
    fn filled<'a>(pre: &Pretokenizer, text: &'a str, chunk: usize) -> Vec<&'a str> {
        let v = filled_by(text, chunk, |from, ends| pre.fill_ends(text, from, ends).unwrap());
        let portable = filled_by(text, chunk, |from, ends| pre.fill_ends_with(text, from, ends).unwrap());
        assert_eq!(v, portable, "fill_ends and its portable build differ, chunks of {chunk}\ntext {text:?}");
        v
    }

    fn filled_by(text: &str, chunk: usize, fill: impl Fn(usize, &mut [usize]) -> usize) -> Vec<&str> {
        let (mut v, mut ends, mut from) = (vec![], vec![0; chunk], 0);
        loop {
            let k = fill(from, &mut ends);
            for &e in &ends[..k] {
                v.push(&text[from..e]);
                from = e;
            }
            if k < chunk {
                return v;
            }
        }
    }

    #[test]
    fn recognised_spellings() {
        let tiktoken_cl100k = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
        let hf_cl100k = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        let qwen2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        let r50k = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
        assert_eq!(recognise(GPT4_PATTERN), Some(Scanner::Gpt4 { digits: 2, ws_end: false }));
        assert_eq!(recognise(CL100K_PATTERN), Some(Scanner::Gpt4 { digits: 3, ws_end: false }));
        assert_eq!(recognise(tiktoken_cl100k), Some(Scanner::Gpt4 { digits: 3, ws_end: true }));
        assert_eq!(recognise(hf_cl100k), Some(Scanner::Gpt4 { digits: 3, ws_end: false }));
        assert_eq!(recognise(qwen2), Some(Scanner::Gpt4 { digits: 1, ws_end: false }));
        assert_eq!(recognise(O200K_PATTERN), Some(Scanner::O200k { digits: 3 }));
        assert_eq!(recognise(GPT2_PATTERN), Some(Scanner::Gpt2));
        assert_eq!(recognise(r50k), Some(Scanner::Gpt2));
        // near misses are not recognised
        for p in [
            &CL100K_PATTERN.replace("{1,3}", "{1,10}")[..],
            &CL100K_PATTERN.replace("{1,3}", "{0,3}"),
            &CL100K_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}+"),
            &tiktoken_cl100k.replace("{1,3}+", "{1,3}"),
            &O200K_PATTERN.replace("[\\r\\n/]", "[\\r\\n]"),
            &GPT2_PATTERN[1..],
            "",
        ] {
            assert_eq!(recognise(p), None, "{p}");
        }
        assert_eq!(Pretokenizer::new(Some(tiktoken_cl100k)).unwrap().pattern().as_deref(), Some(tiktoken_cl100k));
    }

    #[test]
    fn contraction_case_folds_agree_with_regex_syntax() {
        // every char the regex engine matches for `(?i:[sdmtlvre])`: the scanners know these
        let hir = regex_syntax::ParserBuilder::new().build().parse("(?i:[sdmtlvre])").unwrap();
        let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c)) = hir.kind() else { panic!() };
        let mut got: Vec<char> = c.ranges().iter().flat_map(|r| r.start()..=r.end()).collect();
        got.sort();
        let mut want: Vec<char> = "sdmtlvreSDMTLVRE\u{17F}".chars().collect();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn o200k_examples() {
        let o = Pretokenizer::new(Some(O200K_PATTERN)).unwrap();
        assert_eq!(o.split_vec("Hello WORLD don't").unwrap(), ["Hello", " WORLD", " don't"]);
        assert_eq!(o.split_vec("HTMLParser").unwrap(), ["HTMLParser"]);
        assert_eq!(o.split_vec("中A a/b\n/").unwrap(), ["中", "A", " a", "/b", "\n", "/"]);
        for t in [
            "\u{301}abc \u{301} x\u{301}Y\u{2b0}Z",
            "ǅungla ǅ ʰA ʰ",
            "path/to//file\r\n/x",
            "I'M SHE'LL they'Re ſ'ſ 's",
            "  \n \r\n\t end  ",
            "12345 ٣٤٥٦ ½①",
        ] {
            check_all(t);
        }
    }

    #[test]
    fn whitespace_at_the_end() {
        // tiktoken's `\s++$`: a run of whitespace reaching the end is one piece
        let t = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
        assert_eq!(Pretokenizer::new(Some(t)).unwrap().split_vec("x \n ").unwrap(), ["x", " \n "]);
        assert_eq!(Pretokenizer::new(Some(CL100K_PATTERN)).unwrap().split_vec("x \n ").unwrap(), ["x", " \n", " "]);
        check_all("x \n ");
    }

    /// Real text: the repository's own fixtures, docs and sources (prose, code, tables).
    #[test]
    fn real_text_matches_regex() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut n = 0;
        for dir in ["tests/fixtures", "docs", "src", "src/bpe"] {
            let Ok(rd) = std::fs::read_dir(root.join(dir)) else { continue };
            for e in rd.flatten() {
                let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
                // in slices of a few KiB, so a mismatch names a short text
                let mut at = 0;
                while at < text.len() {
                    let mut end = (at + 4096).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    check_all(&text[at..end]);
                    n += 1;
                    at = end;
                }
            }
        }
        assert!(n > 10, "only {n} slices of real text");
    }

    #[test]
    fn examples() {
        for (p, _, _) in pairs() {
            for t in [
                "Hello, world!",
                "don't you'LL we've I'M it'ſ",
                "  \n\n  x  y\t\tz \r\n",
                "12345 67 8",
                "(hello) [world]!!\n\n",
                "a  ",
                " ",
                "\u{3000}中文 テスト",
                "x\u{85}\u{85}y",
                "'''''",
                "' s",
                "?!\r\n\r\nfoo",
                "x  \n\n  ",
                "HELLO World ǅx \u{301}\u{301}",
            ] {
                check(p, t);
            }
        }
        let gpt4 = Pretokenizer::new(Some(GPT4_PATTERN)).unwrap();
        assert_eq!(gpt4.split_vec("Hello, world!").unwrap(), vec!["Hello", ",", " world", "!"]);
        assert_eq!(gpt4.split_vec("12345").unwrap(), vec!["12", "34", "5"]);
    }

    fn pieces(p: &str, text: &str) -> Vec<String> {
        let pt = Pretokenizer::new(Some(p)).unwrap();
        pt.split_vec(text).unwrap().into_iter().map(String::from).collect()
    }

    #[test]
    fn gaps_between_matches_are_pieces() {
        assert_eq!(pieces(r"\w+", "hello, world!"), ["hello", ", ", "world", "!"]);
        assert_eq!(pieces(r"\w+", ", hi"), [", ", "hi"]);
        // nothing matches: the whole text is one piece
        assert_eq!(pieces("xyz", "hello world"), ["hello world"]);
        assert_eq!(pieces(r"\d+", "\u{1F600}\u{0}\r\n"), ["\u{1F600}\u{0}\r\n"]);
        // a match at the very end, and at the very start
        assert_eq!(pieces("d", "abcd"), ["abc", "d"]);
        assert_eq!(pieces("a", "abcd"), ["a", "bcd"]);
        assert_eq!(pieces("a", "aaa"), ["a", "a", "a"]);
        assert!(pieces(r"\w+", "").is_empty());
    }

    #[test]
    fn empty_matches_are_skipped() {
        assert_eq!(pieces("a*", "baac"), ["b", "aa", "c"]);
        assert_eq!(pieces("x?", "abc"), ["abc"]);
        assert_eq!(pieces(r"\b", "ab cd"), ["ab cd"]);
        assert_eq!(pieces("(?=b)", "abab"), ["abab"]);
        assert!(pieces("a*", "").is_empty());
    }

    #[test]
    fn lookarounds_and_the_fancy_vm() {
        // `(?!\S)` needs fancy-regex's VM: a space before a letter is left
        // to the gap that runs up to the next match
        assert_eq!(pieces(r"\s+(?!\S)", "a  b "), ["a", " ", " b", " "]);
        assert_eq!(pieces(r"(?<=a)b", "abcab"), ["a", "b", "ca", "b"]);
        assert_eq!(pieces(r"(\w)\1", "xaabb!"), ["x", "aa", "bb", "!"]);
    }

    #[test]
    fn long_gap_is_one_piece() {
        // one pass: a megabyte without a match is one gap
        let text = "=".repeat(1 << 20);
        let v = Pretokenizer::new(Some(r"\p{L}+")).unwrap().split_vec(&text).unwrap();
        assert_eq!(v, [text.as_str()]);
        let text = format!("{}x", " ".repeat(1 << 16));
        let v = Pretokenizer::new(Some(r"\s+(?!\S)|x")).unwrap().split_vec(&text).unwrap();
        assert_eq!(v.concat(), text);
    }

    fn patterns() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            r"\w+",
            r"\d",
            r"\s+(?!\S)",
            r"[a-z]{2,3}",
            "a*",
            "x?|ab",
            r"\p{L}+|\p{N}",
            r"(?<=a)\S",
            r"\b\w",
            r"'s|\s+",
            r"(?i)ab+",
            r"[^\s]+?",
            r"$",
            r"^\w",
            r"(\w)\1",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn pieces_cover_the_text(p in patterns(), s in "\\PC{0,30}") {
            let v = Pretokenizer::new(Some(p)).unwrap().split_vec(&s).unwrap();
            prop_assert!(v.iter().all(|x| !x.is_empty()));
            prop_assert_eq!(v.concat(), s);
        }
        #[test]
        fn pieces_cover_the_text_alphabet(p in patterns(), s in alphabet()) {
            let v = Pretokenizer::new(Some(p)).unwrap().split_vec(&s).unwrap();
            prop_assert!(v.iter().all(|x| !x.is_empty()));
            prop_assert_eq!(v.concat(), s);
        }
    }

    /// Runs of ASCII letters of any length (the scanners read them eight
    /// bytes at a time) in both cases, ending at anything a run can end at:
    /// a non-ASCII letter of every o200k class (Ll, Lu, Lt, Lm, Lo), a mark,
    /// a contraction, a digit, punctuation, whitespace, the end of the text.
    fn words() -> impl Strategy<Value = String> {
        let run = ("[a-zA-Z]{0,20}", "[a-z]{0,20}", "[A-Z]{0,12}").prop_map(|(a, b, c)| format!("{c}{b}{a}"));
        let sep = prop::sample::select(vec![
            " ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "'", "1", "123", ".", ", ", "é", "É", "ǅ", "ʰ", "中",
            "\u{301}", "\u{a0}", "ß", "-", "_", "ﬁ",
        ]);
        prop::collection::vec((run, sep), 0..6)
            .prop_map(|v| v.into_iter().flat_map(|(r, s)| [r, s.to_string()]).collect())
    }

    fn alphabet() -> impl Strategy<Value = String> {
        let chars = prop::sample::select(vec![
            'a',
            'b',
            'Z',
            's',
            'S',
            'l',
            'L',
            'v',
            'e',
            'r',
            'E',
            't',
            'd',
            'm',
            '\'',
            ' ',
            ' ',
            '\t',
            '\n',
            '\r',
            '1',
            '2',
            '٣',
            '!',
            '.',
            ',',
            '(',
            'é',
            '中',
            '😀',
            '\u{3000}',
            '\u{85}',
            '\u{17F}',
            '\u{301}',
            '\u{a0}',
            '\u{0}',
            '_',
            '-',
            'Ⅻ',
            '\u{200b}',
            '\u{1F1E6}',
            '\u{FFFD}',
        ]);
        prop::collection::vec(chars, 0..40).prop_map(|v| v.into_iter().collect())
    }

    /// Random Unicode: every plane (any char), mixed scripts and cases,
    /// titlecase and modifier letters, combining marks, digits and numbers of
    /// many scripts, CR/LF runs, apostrophes, slashes, spaces of every kind.
    fn unicode_text() -> impl Strategy<Value = String> {
        let special = prop::sample::select(vec![
            'a',
            'z',
            'A',
            'Z',
            's',
            'S',
            't',
            'T',
            'l',
            'L',
            'v',
            'V',
            'e',
            'E',
            'r',
            'R',
            'd',
            'D',
            'm',
            'M',
            '\u{17F}',
            '\u{212A}',
            'ß',
            'é',
            'É',
            'ǅ',
            'ǈ',
            'ʰ',
            'ˆ',
            'ー',
            '中',
            'א',
            'ع',
            'Ж',
            'ж',
            'Ω',
            'ω',
            'ก',
            'क',
            '\u{301}',
            '\u{308}',
            '\u{903}',
            '\u{20DD}',
            '\u{E0100}',
            '\u{93F}',
            '\u{E33}',
            '0',
            '1',
            '9',
            '٣',
            '५',
            '௫',
            '\u{1D7D8}',
            'Ⅻ',
            '½',
            '①',
            '²',
            '\'',
            '\'',
            '\u{2019}',
            '/',
            '/',
            '\r',
            '\n',
            '\n',
            ' ',
            ' ',
            ' ',
            '\t',
            '\u{b}',
            '\u{c}',
            '\u{85}',
            '\u{a0}',
            '\u{1680}',
            '\u{2000}',
            '\u{2009}',
            '\u{200a}',
            '\u{2028}',
            '\u{2029}',
            '\u{202f}',
            '\u{205f}',
            '\u{3000}',
            '\u{200b}',
            '\u{feff}',
            '!',
            '.',
            ',',
            '(',
            '-',
            '_',
            '$',
            '😀',
            '\u{1F1E6}',
            '\u{FFFD}',
            '\u{0}',
            '\u{10FFFF}',
        ]);
        let any = any::<char>();
        let ch = prop_oneof![4 => special, 1 => any];
        prop::collection::vec(ch, 0..48).prop_map(|v| v.into_iter().collect())
    }

    /// Long mostly-ASCII text (the 64-byte windows of `block` read it):
    /// runs of the pieces every rule turns on — words in both cases,
    /// contractions (twice in a row too), numbers, punctuation with and
    /// without a space, slashes after newlines, whitespace runs with and
    /// without newlines — the non-ASCII letters and punctuation the windows
    /// read too (Latin, Cyrillic, CJK; next to uppercase ASCII), and the
    /// chars just outside what they read.
    fn ascii_text() -> impl Strategy<Value = String> {
        let part = prop::sample::select(vec![
            "a",
            "the",
            "Word",
            "HTML",
            "fooBar",
            "xY",
            "e",
            "s",
            "ll",
            "'",
            "'s",
            "'S",
            "'ll",
            "'Re",
            "'ve",
            "'t",
            "'d",
            "'m",
            "'x",
            "''",
            "'s's",
            "'ll's",
            "1",
            "12",
            "1234567",
            " ",
            " ",
            " ",
            "  ",
            "   ",
            "\t",
            "\n",
            "\n",
            "\r\n",
            " \n",
            "\n ",
            "\n  ",
            " \n \n  ",
            "\n\n",
            ".",
            ",",
            "(",
            ")",
            "-",
            "_",
            "/",
            "//",
            ".\n/",
            "\n/",
            "/\n",
            "!?",
            "\u{b}",
            "\u{c}",
            "\u{0}",
            "\u{7f}",
            "é",
            "É",
            "中",
            "\u{a0}",
            "\u{301}",
            "٣",
            "\u{2019}",
            "ſ",
            "Über",
            "straße",
            "ÀÉÎõü",
            "×",
            "÷",
            "Жж",
            "Привет",
            "мир",
            "ѠѡѾѿ",
            "Ѐ",
            "ѐ",
            "ÿ",
            "Ω",
            "ā",
            "«",
            "\u{85}",
            "—",
            // what the windows read of CJK text, and its neighbours they do not
            "中",
            "中文",
            "東京都",
            "一",
            "\u{9fff}",
            "\u{4dff}",
            "\u{4dbf}",
            "\u{a000}",
            "中A",
            "中Ab",
            "A中",
            "用GPT模型",
            "ÀЖ中",
            "中'S",
            "，",
            "。",
            "、",
            "：",
            "（",
            "）",
            "“",
            "”",
            "…",
            "–",
            "»",
            "«»",
            "©",
            "°",
            "·",
            "¿",
            "\u{ad}",
            "ª",
            "²",
            "µ",
            "─",
            "│",
            "\u{3000}",
            "\u{3005}",
            "\u{3007}",
            "\u{2028}",
            "\u{2000}",
            "\u{200b}",
            "\u{203f}",
            "\u{ff10}",
            "\u{ff21}",
            "\u{ff41}",
            "ぁ",
        ]);
        prop::collection::vec(part, 20..200).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn every_known_spelling_matches_regex_long_ascii(s in ascii_text()) { check_all(&s); }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]
        #[test]
        fn every_known_spelling_matches_regex(s in unicode_text()) { check_all(&s); }
        #[test]
        fn every_known_spelling_matches_regex_alphabet(s in alphabet()) { check_all(&s); }
        #[test]
        fn every_known_spelling_matches_regex_any(s in "\\PC{0,40}") { check_all(&s); }
        #[test]
        fn every_known_spelling_matches_regex_words(s in words()) { check_all(&s); }
        #[test]
        fn o200k_matches_regex(s in unicode_text()) { check(O200K_PATTERN, &s); }
        #[test]
        fn gpt4_matches_regex(s in alphabet()) { check(GPT4_PATTERN, &s); }
        #[test]
        fn cl100k_matches_regex(s in alphabet()) { check(CL100K_PATTERN, &s); }
        #[test]
        fn gpt2_matches_regex(s in alphabet()) { check(GPT2_PATTERN, &s); }
        #[test]
        fn gpt4_matches_regex_any(s in "\\PC{0,30}") { check(GPT4_PATTERN, &s); }
    }
}
