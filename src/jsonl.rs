//! JSON-lines blocks for the pretokenizing pipeline.
//!
//! A block is whole lines of a `.jsonl` file. Each line's text field is found
//! and every document encoded on the current rayon pool, without a Python
//! string per document: parsing JSON under the GIL is what kept the Python
//! pipeline from scaling with the encoder (see bench/pretokenize.py).
//!
//! The fast path only answers for lines it reads exactly as Python's `json`
//! does: valid UTF-8, an object, the field a string or null. Any other line
//! (bad JSON, a missing field, a number where the text should be, NaN, lone
//! surrogates...) makes [`encode_block`] answer `None`, and the caller reads
//! that block with the Python reader, which raises the precise error or
//! accepts what only Python's `json` accepts.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use rayon::prelude::*;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{Error, Result};

/// What one line holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// Only ASCII whitespace: skipped, as the Python reader skips it.
    Blank,
    /// The field is `null`: skipped.
    Null,
    /// The field's string.
    Text(Cow<'a, str>),
}

/// A line as found, before unescaping: the field's JSON string literal.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum RawLine<'a> {
    Blank,
    Null,
    /// The literal, quotes included (valid JSON: serde checked it).
    Literal(&'a str),
}

/// The raw value of the wanted field in one object; the last occurrence wins,
/// as in Python's `json`. None: the object has no such field.
struct FieldSeed<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_field) = map.next_key_seed(KeyIs(self.0))? {
            if is_field {
                found = Some(map.next_value::<&RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A key, compared with the field name after unescaping.
struct KeyIs<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<bool, E> {
        Ok(v == self.0)
    }
}

fn raw_line<'a>(line: &'a [u8], field: &str, file_start: bool) -> Option<RawLine<'a>> {
    let mut s = std::str::from_utf8(line).ok()?;
    if file_start {
        s = s.trim_start_matches('\u{feff}');
    }
    if s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0b' | b'\x0c')) {
        return Some(RawLine::Blank);
    }
    let mut de = serde_json::Deserializer::from_str(s);
    let found = FieldSeed(field).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let raw = found?.get();
    match raw.as_bytes()[0] {
        b'"' => Some(RawLine::Literal(raw)),
        b'n' => Some(RawLine::Null),
        _ => None, // a number, an object, true...: Python's reader reports it
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// Append the text of a valid JSON string literal (quotes included) to `out`.
/// False for a lone surrogate, which is not text (Python's reader decides).
fn unescape(literal: &str, out: &mut String) -> bool {
    let b = &literal.as_bytes()[1..literal.len() - 1];
    let mut i = 0;
    while i < b.len() {
        let Some(k) = memchr::memchr(b'\\', &b[i..]) else {
            out.push_str(&literal[1 + i..literal.len() - 1]);
            return true;
        };
        out.push_str(&literal[1 + i..1 + i + k]);
        i += k + 1;
        let c = match b.get(i) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let Some(u) = hex4(&b[i + 1..]) else { return false };
                i += 4;
                let cp = if (0xD800..0xDC00).contains(&u) {
                    let low = match (b.get(i + 1..i + 3), hex4(b.get(i + 3..).unwrap_or(&[]))) {
                        (Some(br"\u"), Some(low)) if (0xDC00..0xE000).contains(&low) => low,
                        _ => return false,
                    };
                    i += 6;
                    0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    u
                };
                match char::from_u32(cp) {
                    Some(c) => c,
                    None => return false,
                }
            }
            _ => return false,
        };
        out.push(c);
        i += 1;
    }
    true
}

/// The text field of one line (without its `\n`), or None when only the
/// Python reader can say what the line is. `file_start`: the line is the
/// file's first, whose leading byte-order marks are dropped.
pub fn line_text<'a>(line: &'a [u8], field: &str, file_start: bool) -> Option<Line<'a>> {
    Some(match raw_line(line, field, file_start)? {
        RawLine::Blank => Line::Blank,
        RawLine::Null => Line::Null,
        RawLine::Literal(lit) if !lit.contains('\\') => Line::Text(Cow::Borrowed(&lit[1..lit.len() - 1])),
        RawLine::Literal(lit) => {
            let mut s = String::with_capacity(lit.len());
            if !unescape(lit, &mut s) {
                return None;
            }
            Line::Text(Cow::Owned(s))
        }
    })
}

/// The documents of a block, encoded.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Encoded<T> {
    /// The ids of the encoded documents, each preceded by `bos` if given.
    pub tokens: Vec<T>,
    /// Per document: its ids in `tokens` (with BOS; 0 for a skipped document).
    pub ntok: Vec<u64>,
    /// Per document: the bytes its ids decode to (0 for a skipped document).
    pub nbytes: Vec<u64>,
    /// Per document: its length in characters (code points), skipped ones too.
    pub nchars: Vec<u64>,
    /// Lines in the block (a last line without a newline counts).
    pub lines: usize,
}

/// One document's outcome.
enum Doc {
    /// Counted only (resuming): its characters.
    Skipped(u64),
    /// Ids, bytes, characters.
    Encoded(Vec<u32>, u64, u64),
}

thread_local! {
    /// Unescaped text of the document being encoded, reused across documents.
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Run `f` on the text of a string literal: borrowed when it has no escapes,
/// else unescaped into this thread's buffer. None for a lone surrogate.
fn with_text<R>(lit: &str, f: impl FnOnce(&str) -> R) -> Option<R> {
    if !lit.contains('\\') {
        return Some(f(&lit[1..lit.len() - 1]));
    }
    TEXT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            if !unescape(lit, &mut buf) {
                return None;
            }
            let r = f(&buf);
            if buf.capacity() > 1 << 24 {
                *buf = String::new(); // one huge document does not pin its size per thread
            }
            Some(r)
        }
        Err(_) => {
            let mut own = String::with_capacity(lit.len());
            unescape(lit, &mut own).then(|| f(&own))
        }
    })
}

/// Parse and encode the documents of a block of whole lines, `head` followed
/// by `body` (`head` is the start of the block's first line, carried over
/// from the previous read; it holds no newline), on the current rayon pool.
/// The first `skip` documents are only counted (resuming). `token_len[id]` is
/// the byte length of id; ids become `T` (an id that does not fit is an
/// error). Returns None when some line needs the Python reader (module doc).
#[allow(clippy::too_many_arguments)]
pub fn encode_block<T, F>(
    head: &[u8],
    body: &[u8],
    field: &str,
    file_start: bool,
    skip: usize,
    bos: Option<u32>,
    token_len: &[i32],
    encode: F,
) -> Result<Option<Encoded<T>>>
where
    T: TryFrom<u32> + Copy + Default + Send + Sync,
    F: Fn(&str) -> Result<Vec<u32>> + Sync,
{
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let joined: Vec<u8>;
    if !head.is_empty() {
        let end = memchr::memchr(b'\n', body).unwrap_or(body.len());
        joined = [head, &body[..end]].concat();
        lines.push(&joined);
        start = (end + 1).min(body.len());
    }
    let base = start;
    for nl in memchr::memchr_iter(b'\n', &body[base..]) {
        lines.push(&body[start..base + nl]);
        start = base + nl + 1;
    }
    if start < body.len() {
        lines.push(&body[start..]);
    }

    // 1. Find each line's literal (borrowed: no copy of the text).
    let raw: Option<Vec<RawLine>> =
        lines.par_iter().enumerate().with_min_len(8).map(|(i, l)| raw_line(l, field, file_start && i == 0)).collect();
    let Some(raw) = raw else { return Ok(None) };
    let literals: Vec<&str> = raw
        .iter()
        .filter_map(|l| match l {
            RawLine::Literal(s) => Some(*s),
            _ => None,
        })
        .collect();

    // 2. Unescape (into a per-thread buffer) and encode each document.
    let docs: Result<Option<Vec<Doc>>> = literals
        .par_iter()
        .enumerate()
        .with_min_len(1)
        .map(|(k, lit)| {
            let done = with_text(lit, |t| {
                let chars = t.chars().count() as u64;
                if k < skip {
                    return Ok(Doc::Skipped(chars));
                }
                let ids = encode(t)?;
                let mut bytes = 0u64;
                for &id in &ids {
                    match token_len.get(id as usize) {
                        Some(&n) => bytes += n.max(0) as u64,
                        None => {
                            return Err(Error::Invalid(format!(
                                "the tokenizer produced id {id}, beyond its {} ids",
                                token_len.len()
                            )))
                        }
                    }
                }
                Ok(Doc::Encoded(ids, bytes, chars))
            });
            done.transpose()
        })
        .collect::<Result<Option<Vec<Doc>>>>();
    let Some(docs) = docs? else { return Ok(None) };

    // 3. Lay the ids out back to back, each document after its BOS, in parallel.
    let extra = bos.is_some() as u64;
    let mut out = Encoded { lines: lines.len(), ..Default::default() };
    for d in &docs {
        let (n, bytes, chars) = match d {
            Doc::Skipped(c) => (0, 0, *c),
            Doc::Encoded(ids, b, c) => (ids.len() as u64 + extra, *b, *c),
        };
        out.ntok.push(n);
        out.nbytes.push(bytes);
        out.nchars.push(chars);
    }
    let total: u64 = out.ntok.iter().sum();
    let mut tokens = vec![T::default(); total as usize];
    let mut rest: &mut [T] = &mut tokens;
    let mut parts = Vec::with_capacity(docs.len());
    for (d, &n) in docs.iter().zip(&out.ntok) {
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(n as usize);
        if let Doc::Encoded(ids, _, _) = d {
            parts.push((part, ids));
        }
        rest = tail;
    }
    let conv = |id: u32| T::try_from(id).map_err(|_| Error::Invalid(format!("id {id} does not fit the shard's id type")));
    parts.into_par_iter().try_for_each(|(part, ids)| -> Result<()> {
        let (first, rest) = part.split_at_mut(extra as usize);
        if let Some(b) = bos {
            first[0] = conv(b)?;
        }
        for (slot, &id) in rest.iter_mut().zip(ids.iter()) {
            *slot = conv(id)?;
        }
        Ok(())
    })?;
    out.tokens = tokens;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(l: &'a str, field: &str) -> Option<Line<'a>> {
        line_text(l.as_bytes(), field, false)
    }

    #[test]
    fn reads_the_field() {
        assert_eq!(text(r#"{"text": "abc", "n": [1, {"x": null}]}"#, "text"), Some(Line::Text("abc".into())));
        assert_eq!(text(r#"{"a": 1, "text": "x\ny\u00e9"}"#, "text"), Some(Line::Text("x\nyé".into())));
        assert_eq!(text(r#"{"text": "\"\\\/\b\f\n\r\t\ud83d\ude00 \u2028"}"#, "text"), Some(Line::Text("\"\\/\u{8}\u{c}\n\r\t😀 \u{2028}".into())));
        assert_eq!(text(r#"{"text": "first", "text": "last"}"#, "text"), Some(Line::Text("last".into())));
        assert_eq!(text(r#"{"te\u0078t": "escaped key"}"#, "text"), Some(Line::Text("escaped key".into())));
        assert_eq!(text(r#" {"text": null} "#, "text"), Some(Line::Null));
        assert_eq!(text(" \t\r", "text"), Some(Line::Blank));
        assert_eq!(text(r#"{"body": "b"}"#, "body"), Some(Line::Text("b".into())));
        assert_eq!(line_text("\u{feff}{\"text\": \"t\"}".as_bytes(), "text", true), Some(Line::Text("t".into())));
    }

    #[test]
    fn leaves_the_rest_to_python() {
        for l in [
            r#"{"text": 5}"#,
            r#"{"text": true}"#,
            r#"{"text": {"a": "b"}}"#,
            r#"{"other": "x"}"#,
            r#"["text"]"#,
            r#"{"text": "a"} x"#,
            r#"{"text": NaN}"#,
            r#"{"text": "\ud800"}"#,
            r#"{"text": "\udc00 low first"}"#,
            r#"{"text": "\ud800\u0041"}"#,
            "{\"text\": \"a\tb\"}",
            "not json",
            "\u{1c}",
        ] {
            assert_eq!(text(l, "text"), None, "{l}");
        }
        assert_eq!(line_text(b"{\"text\": \"\xff\"}", "text", false), None);
        assert_eq!(line_text("\u{feff}{\"text\": \"t\"}".as_bytes(), "text", false), None);
    }

    #[test]
    fn encodes_a_block() {
        let block = b"{\"text\": \"ab\"}\n\n{\"text\": null}\n{\"text\": \"\xc3\xa9c\"}\n{\"text\": \"d\\n\"}";
        let lens = [1i32; 300];
        let enc = |t: &str| Ok(t.bytes().map(|b| b as u32).collect());
        let e = encode_block::<u32, _>(b"", block, "text", true, 0, Some(299), &lens, enc).unwrap().unwrap();
        assert_eq!(e.tokens, vec![299, 97, 98, 299, 0xc3, 0xa9, 99, 299, 100, 10]);
        assert_eq!(e.ntok, vec![3, 4, 3]);
        assert_eq!(e.nbytes, vec![2, 3, 2]);
        assert_eq!(e.nchars, vec![2, 2, 2]);
        assert_eq!(e.lines, 5);
        let e = encode_block::<u16, _>(b"", block, "text", true, 2, None, &lens, enc).unwrap().unwrap();
        assert_eq!(e.tokens, vec![100u16, 10]);
        assert_eq!((e.ntok, e.nbytes, e.nchars), (vec![0, 0, 2], vec![0, 0, 2], vec![2, 2, 2]));
        assert_eq!(encode_block::<u32, _>(b"", b"{\"text\": 1}\n", "text", true, 0, None, &lens, enc).unwrap(), None);
        let short = [1i32; 50];
        assert!(encode_block::<u32, _>(b"", block, "text", true, 0, None, &short, enc).is_err());
        // ids that do not fit the output type
        assert!(encode_block::<u16, _>(b"", block, "text", true, 0, Some(70000), &lens, enc).is_err());
        // the same block split anywhere into a carried-over head and a body
        let whole = encode_block::<u32, _>(b"", block, "text", true, 0, Some(299), &lens, enc).unwrap().unwrap();
        for cut in 1..10 {
            let e = encode_block(&block[..cut], &block[cut..], "text", true, 0, Some(299), &lens, enc).unwrap().unwrap();
            assert_eq!(e, whole, "cut {cut}");
        }
        let e = encode_block::<u32, _>(b"{\"text\": \"z\"}", b"", "text", false, 0, None, &lens, enc).unwrap().unwrap();
        assert_eq!((e.tokens, e.lines), (vec![122], 1));
    }
}
