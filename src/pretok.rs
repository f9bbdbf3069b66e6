//! Pre-tokenization: splitting text into the pieces BPE never merges across.
//!
//! The GPT-4 family of patterns (nanochat's `\p{N}{1,2}`, cl100k/rustbpe's
//! `\p{N}{1,3}`) and GPT-2's pattern are matched by hand-written scanners that
//! reproduce fancy-regex's leftmost-first, backtracking semantics exactly (a
//! property test checks them against fancy-regex on random text). They are
//! several times faster than the regex engine, which is most of what makes
//! encoding fast. Any other pattern goes through fancy-regex; `None` keeps a
//! whole document as one piece.
//!
//! Whatever the pattern, no text is lost: with a custom regex the text between
//! matches becomes pieces of its own (Hugging Face's `Split(pattern,
//! "isolated")`), so training counts it and encoding encodes it, and the
//! pieces of a text always concatenate back to it. Empty matches are skipped.
//!
//! Not handled: the regex engine's own cost. A custom pattern with
//! lookarounds or backreferences runs on fancy-regex's backtracking VM, which
//! can be super-linear on some inputs; fancy-regex's backtrack limit turns
//! catastrophic cases into an `Error::Pattern` rather than a hang.

use crate::error::{Error, Result};
use crate::unicode::{class, Cls};

/// nanochat's split pattern (GPT-4's with at most two digits per number).
pub const GPT4_PATTERN: &str =
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// GPT-4's (cl100k) split pattern, also rustbpe's default.
pub const CL100K_PATTERN: &str =
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// GPT-2's split pattern.
pub const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

#[derive(Clone, Debug)]
pub enum Pretokenizer {
    /// GPT-4-style pattern with numbers of 1..=digits digits.
    Gpt4 {
        digits: usize,
    },
    Gpt2,
    Regex(Box<fancy_regex::Regex>, String),
    /// No splitting: the whole text is one piece.
    Whole,
}

fn gpt4_digits(pattern: &str) -> Option<usize> {
    for d in 1..=9usize {
        let p = GPT4_PATTERN.replace(r"\p{N}{1,2}", &format!(r"\p{{N}}{{1,{d}}}"));
        if p == pattern {
            return Some(d);
        }
    }
    None
}

impl Pretokenizer {
    /// `None` → whole text; a known pattern → the fast scanner; anything else → fancy-regex.
    pub fn new(pattern: Option<&str>) -> Result<Self> {
        let Some(p) = pattern else { return Ok(Pretokenizer::Whole) };
        if let Some(d) = gpt4_digits(p) {
            return Ok(Pretokenizer::Gpt4 { digits: d });
        }
        if p == GPT2_PATTERN {
            return Ok(Pretokenizer::Gpt2);
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
            Pretokenizer::Gpt4 { digits } => {
                Some(GPT4_PATTERN.replace(r"\p{N}{1,2}", &format!(r"\p{{N}}{{1,{digits}}}")))
            }
            Pretokenizer::Gpt2 => Some(GPT2_PATTERN.to_string()),
            Pretokenizer::Regex(_, p) => Some(p.clone()),
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
            Pretokenizer::Gpt4 { digits } => {
                let mut i = 0;
                while i < text.len() {
                    let j = gpt4_next(text, i, *digits);
                    f(&text[i..j]);
                    i = j;
                }
            }
            Pretokenizer::Gpt2 => {
                let mut i = 0;
                while i < text.len() {
                    let j = gpt2_next(text, i);
                    f(&text[i..j]);
                    i = j;
                }
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
                    let m = m.map_err(|e| Error::Pattern(format!("split pattern failed on input: {e}")))?;
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

    pub fn split_vec<'a>(&self, text: &'a str) -> Result<Vec<&'a str>> {
        let mut v = Vec::new();
        self.split(text, |p| v.push(p))?;
        Ok(v)
    }
}

/// The char at byte offset `i` (which must be a char boundary) and its length.
#[inline(always)]
fn char_at(s: &str, i: usize) -> Option<(char, usize)> {
    let b = *s.as_bytes().get(i)?;
    if b < 0x80 {
        return Some((b as char, 1));
    }
    let c = s[i..].chars().next()?;
    Some((c, c.len_utf8()))
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

/// Whitespace alternatives shared by both patterns:
/// (GPT-4 only) `\s*[\r\n]`, then `\s+(?!\S)`, then `\s+`.
#[inline(always)]
fn whitespace(s: &str, i: usize, newline_rule: bool) -> usize {
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

/// End of the GPT-4-pattern match starting at byte `i`.
fn gpt4_next(s: &str, i: usize, digits: usize) -> usize {
    let (c0, l0) = char_at(s, i).unwrap();
    // 1. '(?i:[sdmt]|ll|ve|re)   (case-insensitive: `s` also matches U+017F ſ)
    if c0 == '\'' {
        if let Some((c1, l1)) = char_at(s, i + 1) {
            if matches!(c1, 's' | 'S' | 'd' | 'D' | 'm' | 'M' | 't' | 'T' | '\u{17F}') {
                return i + 1 + l1;
            }
            if let Some((c2, l2)) = char_at(s, i + 1 + l1) {
                if (is_ci(c1, 'l') && is_ci(c2, 'l'))
                    || (is_ci(c1, 'v') && is_ci(c2, 'e'))
                    || (is_ci(c1, 'r') && is_ci(c2, 'e'))
                {
                    return i + 1 + l1 + l2;
                }
            }
        }
    }
    let k0 = class(c0);
    match k0 {
        // 2. [^\r\n\p{L}\p{N}]?+\p{L}+   with the optional part empty
        Cls::Letter => return run_of(s, i, Cls::Letter),
        // 3. \p{N}{1,digits}
        Cls::Number => return run_of_max(s, i, Cls::Number, digits),
        _ => {}
    }
    // 2. with the optional part taken (possessive: no retry without it)
    if c0 != '\r' && c0 != '\n' && cls_at(s, i + l0) == Some(Cls::Letter) {
        return run_of(s, i + l0, Cls::Letter);
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
    whitespace(s, i, true)
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
    whitespace(s, i, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(p: &str, text: &str) {
        let fast = Pretokenizer::new(Some(p)).unwrap();
        assert!(!matches!(fast, Pretokenizer::Regex(..)));
        let slow = Pretokenizer::regex(p).unwrap();
        assert_eq!(fast.split_vec(text).unwrap(), slow.split_vec(text).unwrap(), "text {text:?}");
    }

    #[test]
    fn examples() {
        for p in [GPT4_PATTERN, CL100K_PATTERN, GPT2_PATTERN] {
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]
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
