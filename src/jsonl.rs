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

use rayon::prelude::*;
use serde::de::IgnoredAny;

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

/// What the scanner found on one line; a document's text is in the buffer passed in.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Found {
    Blank,
    Null,
    Text,
}

/// JSON's whitespace (Python's `json` allows exactly these between tokens).
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The first position at or after `i` holding `"`, `\` or a control character.
fn next_special(b: &[u8], mut i: usize) -> usize {
    const W: usize = 16;
    while i + W <= b.len() {
        let chunk: &[u8; W] = b[i..i + W].try_into().unwrap();
        // no early exit inside the chunk, so this compiles to vector compares
        if chunk.iter().fold(false, |acc, &c| acc | (c == b'"') | (c == b'\\') | (c < 0x20)) {
            break;
        }
        i += W;
    }
    while i < b.len() && !(b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20) {
        i += 1;
    }
    i
}

fn hex4(b: &[u8]) -> Option<u32> {
    let h = b.get(..4)?;
    if !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
}

/// Scan the JSON string starting at `s[i] == '"'`, appending its text to
/// `out` (None: validate only). Returns the position after the closing quote,
/// or None for anything that is not a valid JSON string of text (a control
/// character, a bad escape, a lone surrogate: Python's reader decides).
fn scan_string(s: &str, mut i: usize, mut out: Option<&mut String>) -> Option<usize> {
    let b = s.as_bytes();
    i += 1;
    loop {
        let j = next_special(b, i);
        if let Some(o) = out.as_deref_mut() {
            o.push_str(s.get(i..j)?);
        }
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => {
                let c = match *b.get(j + 1)? {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let u = hex4(&b[j + 2..])?;
                        let cp = if (0xD800..0xDC00).contains(&u) {
                            if b.get(j + 6..j + 8)? != br"\u" {
                                return None;
                            }
                            let low = hex4(&b[j + 8..])?;
                            if !(0xDC00..0xE000).contains(&low) {
                                return None;
                            }
                            i = j + 12;
                            0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            i = j + 6;
                            u
                        };
                        if let Some(o) = out.as_deref_mut() {
                            o.push(char::from_u32(cp)?); // None for a lone low surrogate
                        } else {
                            char::from_u32(cp)?;
                        }
                        continue;
                    }
                    _ => return None,
                };
                if let Some(o) = out.as_deref_mut() {
                    o.push(c);
                }
                i = j + 2;
            }
            _ => return None, // a raw control character: not JSON
        }
    }
}

/// Skip one JSON value that is not a string (a number, a literal, an array,
/// an object) with serde_json, which checks it; the position after it.
fn skip_value(s: &str, i: usize) -> Option<usize> {
    let mut it = serde_json::Deserializer::from_str(s.get(i..)?).into_iter::<IgnoredAny>();
    it.next()?.ok()?;
    Some(i + it.byte_offset())
}

/// Read one line (without its `\n`): the field's text is appended to `text`
/// (what `text` held before stays; a later duplicate field replaces only this
/// line's text). None when only the Python reader can say what the line is.
/// `file_start`: the file's first line, whose leading byte-order marks are dropped.
pub(crate) fn scan_line(line: &[u8], field: &str, file_start: bool, text: &mut String) -> Option<Found> {
    let mut s = std::str::from_utf8(line).ok()?;
    if file_start {
        s = s.trim_start_matches('\u{feff}');
    }
    let b = s.as_bytes();
    if b.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b'\x0b' | b'\x0c')) {
        return Some(Found::Blank);
    }
    let base = text.len();
    let mut found = None;
    let mut key = String::new();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return None; // no fields: Python's reader names the missing one
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        key.clear();
        i = scan_string(s, i, Some(&mut key))?;
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let is_field = key == field;
        match (b.get(i)?, is_field) {
            (b'"', true) => {
                text.truncate(base); // a later duplicate wins, as in Python
                i = scan_string(s, i, Some(text))?;
                found = Some(Found::Text);
            }
            (b'"', false) => i = scan_string(s, i, None)?,
            (_, true) => {
                let end = skip_value(s, i)?;
                if s[i..end].trim_end() != "null" {
                    return None; // a number, an object...: Python's reader reports it
                }
                found = Some(Found::Null);
                i = end;
            }
            (_, false) => i = skip_value(s, i)?,
        }
        i = skip_ws(b, i);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() {
        return None;
    }
    found
}

/// The text field of one line (without its `\n`), or None when only the
/// Python reader can say what the line is. `file_start`: the line is the
/// file's first, whose leading byte-order marks are dropped.
pub fn line_text(line: &[u8], field: &str, file_start: bool) -> Option<Line<'static>> {
    let mut text = String::new();
    Some(match scan_line(line, field, file_start, &mut text)? {
        Found::Blank => Line::Blank,
        Found::Null => Line::Null,
        Found::Text => Line::Text(Cow::Owned(text)),
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

/// One line's outcome.
enum Doc {
    /// Not a document (blank, or the field is null).
    None,
    /// Counted only (resuming): its characters.
    Skipped(u64),
    /// Ids, bytes, characters.
    Encoded(Vec<u32>, u64, u64),
}

thread_local! {
    /// Text of the document being encoded, reused across documents.
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Run `f` with this thread's text buffer, empty (a fresh one if it is in use).
fn with_buffer<R>(f: impl FnOnce(&mut String) -> R) -> R {
    TEXT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            let r = f(&mut buf);
            if buf.capacity() > 1 << 24 {
                *buf = String::new(); // one huge document does not pin its size per thread
            }
            r
        }
        Err(_) => f(&mut String::new()),
    })
}

/// The lines (without their `\n`) of a block of whole lines, `head` followed
/// by `body` (`head` is the start of the first line, carried over from the
/// previous read; it holds no newline): the first line is joined into
/// `joined`, the others are slices of `body`. A last line without a newline
/// counts.
pub(crate) fn block_lines<'a>(head: &[u8], body: &'a [u8], joined: &'a mut Vec<u8>) -> Vec<&'a [u8]> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut first = None;
    if !head.is_empty() {
        let end = memchr::memchr(b'\n', body).unwrap_or(body.len());
        joined.clear();
        joined.extend_from_slice(head);
        joined.extend_from_slice(&body[..end]);
        first = Some(());
        start = (end + 1).min(body.len());
    }
    let base = start;
    let mut rest = Vec::new();
    for nl in memchr::memchr_iter(b'\n', &body[base..]) {
        rest.push(&body[start..base + nl]);
        start = base + nl + 1;
    }
    if start < body.len() {
        rest.push(&body[start..]);
    }
    if first.is_some() {
        lines.push(&joined[..]);
    }
    lines.extend(rest);
    lines
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
    let mut joined = Vec::new();
    let lines = block_lines(head, body, &mut joined);

    // When resuming, which lines are the first `skip` documents.
    let mut skipped_lines = 0;
    if skip > 0 {
        let kinds: Option<Vec<Found>> = lines
            .par_iter()
            .enumerate()
            .with_min_len(8)
            .map(|(i, l)| with_buffer(|buf| scan_line(l, field, file_start && i == 0, buf)))
            .collect();
        let Some(kinds) = kinds else { return Ok(None) };
        let mut docs = 0;
        while skipped_lines < kinds.len() && docs < skip {
            docs += (kinds[skipped_lines] == Found::Text) as usize;
            skipped_lines += 1;
        }
    }

    // Read each line's text into a per-thread buffer and encode it, in one pass.
    let docs: Result<Option<Vec<Doc>>> = lines
        .par_iter()
        .enumerate()
        .with_min_len(1)
        .map(|(i, l)| {
            with_buffer(|buf| {
                match scan_line(l, field, file_start && i == 0, buf) {
                    None => return Ok(None),
                    Some(Found::Blank | Found::Null) => return Ok(Some(Doc::None)),
                    Some(Found::Text) => {}
                }
                let t = buf.as_str();
                let chars = t.chars().count() as u64;
                if i < skipped_lines {
                    return Ok(Some(Doc::Skipped(chars)));
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
                Ok(Some(Doc::Encoded(ids, bytes, chars)))
            })
        })
        .collect::<Result<Option<Vec<Doc>>>>();
    let Some(docs) = docs? else { return Ok(None) };

    // Lay the ids out back to back, each document after its BOS, in parallel.
    let extra = bos.is_some() as u64;
    let mut out = Encoded { lines: lines.len(), ..Default::default() };
    let docs: Vec<Doc> = docs.into_iter().filter(|d| !matches!(d, Doc::None)).collect();
    for d in &docs {
        let (n, bytes, chars) = match d {
            Doc::None => continue,
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
    let conv =
        |id: u32| T::try_from(id).map_err(|_| Error::Invalid(format!("id {id} does not fit the shard's id type")));
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
        assert_eq!(
            text(r#"{"text": "\"\\\/\b\f\n\r\t\ud83d\ude00 \u2028"}"#, "text"),
            Some(Line::Text("\"\\/\u{8}\u{c}\n\r\t😀 \u{2028}".into()))
        );
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
            let e =
                encode_block(&block[..cut], &block[cut..], "text", true, 0, Some(299), &lens, enc).unwrap().unwrap();
            assert_eq!(e, whole, "cut {cut}");
        }
        let e = encode_block::<u32, _>(b"{\"text\": \"z\"}", b"", "text", false, 0, None, &lens, enc).unwrap().unwrap();
        assert_eq!((e.tokens, e.lines), (vec![122], 1));
    }
}
