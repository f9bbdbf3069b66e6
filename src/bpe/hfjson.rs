//! The fast path of the Hugging Face `tokenizer.json` reader for byte-level
//! BPE (`formats/hf_json.py`): the vocabulary, merges and added tokens are
//! read and checked here, by the same rules as the Python reader, without a
//! Python object per entry; the small members (pipeline settings) are left
//! as raw JSON for the Python reader to check with its own functions. For
//! anything unusual (a duplicate key, a non-special added token, a merge or
//! id the Python reader would refuse) this says no and the Python reader
//! reads the file and reports what is wrong where.
//!
//! Not handled: error messages (see above).

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

use super::ranks::{first_lower_splits, id_limit};
use super::tfjson::members;
use super::vocab::Tokens;

/// What the reader needs from a `tokenizer.json`.
pub struct HfParts {
    pub byte_ids: [u32; 256],
    /// `(left, right, new)` in id order
    pub merges: Vec<(u32, u32, u32)>,
    /// `(text, id)` of the added tokens, all special, in file order
    pub specials: Vec<(String, u32)>,
    /// raw JSON of the top-level members but `model`, and of `model`'s but `vocab` and `merges`
    pub top: Vec<(String, String)>,
    pub model: Vec<(String, String)>,
}

/// GPT-2's byte -> character table (see `bytes_to_unicode` in hf_json.py).
fn byte_chars() -> [char; 256] {
    let mut t = ['\0'; 256];
    let mut extra = 0u32;
    for (b, slot) in t.iter_mut().enumerate() {
        let printable = (0x21..0x7f).contains(&b) || (0xa1..0xad).contains(&b) || (0xae..0x100).contains(&b);
        *slot = if printable {
            char::from_u32(b as u32).unwrap_or('\0')
        } else {
            extra += 1;
            char::from_u32(0x100 + extra - 1).unwrap_or('\0')
        };
    }
    t
}

/// Every character of GPT-2's table is below U+0144.
const CHAR_END: usize = 0x144;

/// The inverse of [`byte_chars`], indexed by code point; `NO_BYTE` elsewhere.
fn char_bytes(chars: &[char; 256]) -> [u16; CHAR_END] {
    let mut back = [NO_BYTE; CHAR_END];
    for (b, &c) in chars.iter().enumerate() {
        back[c as usize] = b as u16;
    }
    back
}

const NO_BYTE: u16 = u16::MAX;

/// A key's bytes (its characters through [`char_bytes`]) onto `out`; false
/// if a character is outside GPT-2's table.
fn key_bytes(key: &str, back: &[u16; CHAR_END], out: &mut Vec<u8>) -> bool {
    for c in key.chars() {
        match back.get(c as usize) {
            Some(&b) if b != NO_BYTE => out.push(b as u8),
            _ => return false,
        }
    }
    true
}

fn unique_members(raw: &str) -> Option<Vec<(String, &RawValue)>> {
    let m = members(raw)?.0;
    let mut seen = FxHashSet::default();
    m.iter().all(|(k, _)| seen.insert(k.as_str())).then_some(())?;
    Some(m)
}

/// A JSON string, borrowed from the text when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// `model.vocab`: its entries in file order, keys borrowed where possible
/// (one pass, no Python-style dict; duplicates kept, the caller refuses them).
struct Vocab<'a>(Vec<(Cow<'a, str>, u32)>);

impl<'de> Deserialize<'de> for Vocab<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vocab<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key -> id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some((k, id)) = m.next_entry::<Text<'de>, u32>()? {
                    v.push((k.0, id));
                }
                Ok(Vocab(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// One merge, `"left right"` or `["left", "right"]`, by the Python reader's
/// rule (`_split_merge`: exactly two non-empty parts).
struct Merge<'a>(Cow<'a, str>, Cow<'a, str>);

fn split_merge<'a>(s: Cow<'a, str>) -> Option<Merge<'a>> {
    let sp = s.find(' ')?;
    let (l, r) = (&s[..sp], &s[sp + 1..]);
    if l.is_empty() || r.is_empty() || r.contains(' ') {
        return None;
    }
    Some(match s {
        Cow::Borrowed(b) => Merge(Cow::Borrowed(&b[..sp]), Cow::Borrowed(&b[sp + 1..])),
        Cow::Owned(_) => Merge(Cow::Owned(l.to_string()), Cow::Owned(r.to_string())),
    })
}

impl<'de> Deserialize<'de> for Merge<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Merge<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"left right\" or [left, right]")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                split_merge(Cow::Borrowed(s)).ok_or_else(|| E::custom("not two parts"))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                split_merge(Cow::Owned(s.to_string())).ok_or_else(|| E::custom("not two parts"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let l = a.next_element::<Text<'de>>()?.ok_or_else(|| A::Error::custom("empty"))?;
                let r = a.next_element::<Text<'de>>()?.ok_or_else(|| A::Error::custom("one part"))?;
                if a.next_element::<serde::de::IgnoredAny>()?.is_some() || l.0.is_empty() || r.0.is_empty() {
                    return Err(A::Error::custom("not two parts"));
                }
                Ok(Merge(l.0, r.0))
            }
        }
        d.deserialize_any(V)
    }
}

/// Read a byte-level BPE `tokenizer.json`; None: let the Python reader do it.
/// Runs the merges' lookups on the current rayon pool.
pub fn read(text: &str) -> Option<HfParts> {
    let mut top = Vec::new();
    let (mut model_raw, mut added_raw) = (None, None);
    for (k, v) in unique_members(text)? {
        match k.as_str() {
            "model" => model_raw = Some(v),
            "added_tokens" => {
                added_raw = Some(v);
                top.push((k, v.get().to_string()));
            }
            _ => top.push((k, v.get().to_string())),
        }
    }
    let mut model = Vec::new();
    let (mut vocab_raw, mut merges_raw) = (None, None);
    for (k, v) in unique_members(model_raw?.get())? {
        match k.as_str() {
            "vocab" => vocab_raw = Some(v),
            "merges" => merges_raw = Some(v),
            _ => model.push((k, v.get().to_string())),
        }
    }
    // added tokens: all special (anything else: the Python reader)
    let mut specials = Vec::new();
    if let Some(a) = added_raw.filter(|a| a.get() != "null") {
        for t in serde_json::from_str::<Vec<&RawValue>>(a.get()).ok()? {
            let (mut id, mut content, mut special) = (None, None, false);
            for (k, v) in unique_members(t.get())? {
                match k.as_str() {
                    "id" => id = Some(serde_json::from_str::<u32>(v.get()).ok()?),
                    "content" => content = Some(serde_json::from_str::<String>(v.get()).ok()?),
                    "special" => special = serde_json::from_str::<bool>(v.get()).ok()?,
                    _ => {}
                }
            }
            if !special {
                return None;
            }
            specials.push((content?, id?));
        }
    }
    let special_ids: FxHashMap<&str, u32> = specials.iter().map(|(t, i)| (t.as_str(), *i)).collect();
    if special_ids.len() != specials.len() {
        return None; // the same text twice: the Python reader's dict keeps the last
    }
    // the vocabulary, in one pass (keys borrowed from the text unless escaped)
    let vocab = serde_json::from_str::<Vocab>(vocab_raw?.get()).ok()?.0;
    // key -> id through an index of the keys, each at its own id: a look-up
    // is one 16-byte slot (and a compare in the arena only for keys over 8
    // bytes) that gives the id itself, where a `HashMap<&str, u32>` hashes,
    // then follows the key's pointer and compares (three look-ups per merge,
    // 600,000 for o200k, were most of this reader's time). So every id must
    // be below the largest limit the file could have (the exact one, below,
    // counts only the specials that are not vocabulary keys) and no id twice
    // (the Python reader refuses both: checked again below).
    let upper = id_limit(vocab.len() + specials.len());
    let mut seen = vec![false; upper as usize];
    for (_, id) in &vocab {
        if *id as u64 >= upper || std::mem::replace(&mut seen[*id as usize], true) {
            return None;
        }
    }
    drop(seen);
    let mut keys = Tokens::new(upper as usize, vocab_raw?.get().len());
    for (key, id) in &vocab {
        keys.set(*id, key.as_bytes()).ok()?;
    }
    // a duplicate key: the Python reader's dict keeps the last
    keys.index(vocab.iter().map(|(_, id)| *id), |_, _| Err(crate::error::Error::invalid("duplicate key"))).ok()?;
    let id_of = |key: &str| keys.find(key.as_bytes());
    let entries = vocab.len() + specials.iter().filter(|(t, _)| id_of(t).is_none()).count();
    let limit = id_limit(entries);
    let chars = byte_chars();
    let back = char_bytes(&chars);
    // the ordinary tokens' bytes, one after another, and (start, end, id) of each
    let mut bytes: Vec<u8> = Vec::with_capacity(vocab_raw?.get().len() / 2);
    let mut tokens: Vec<(usize, usize, u32)> = Vec::with_capacity(vocab.len());
    let mut owned = vec![false; limit as usize];
    for (key, id) in &vocab {
        if *id as u64 >= limit || std::mem::replace(&mut owned[*id as usize], true) {
            return None;
        }
        match special_ids.get(&**key) {
            Some(&s) if s != *id => return None,
            Some(_) => {}
            None => {
                let start = bytes.len();
                if !key_bytes(key, &back, &mut bytes) {
                    return None;
                }
                tokens.push((start, bytes.len(), *id));
            }
        }
    }
    for (_, i) in &specials {
        if *i as u64 >= limit {
            return None;
        }
    }
    let mut byte_ids = [0u32; 256];
    for (b, slot) in byte_ids.iter_mut().enumerate() {
        let mut s = [0u8; 4];
        *slot = id_of(chars[b].encode_utf8(&mut s))?;
    }
    // merges: the first merge producing each token, in increasing id order.
    // The look-ups run on the current rayon pool, a chunk of merges a task
    // (the order is checked after). The two parts' slots are asked for one
    // merge ahead, so their cache misses overlap with the work on this one.
    // The merged key is first compared with the key of the id after the
    // previous merge's (merges listed in id order, as tiktoken's ranks and
    // our files are, hit every time): a compare in the arena, no hash, no
    // look-up; anything else is looked up. Same answer either way, the keys
    // being distinct.
    let mut special_id = vec![false; limit as usize];
    for (_, i) in &specials {
        special_id[*i as usize] = true;
    }
    let merge_list = serde_json::from_str::<Vec<Merge>>(merges_raw?.get()).ok()?;
    let hashes = |m: &Merge| (Tokens::hash(m.0.as_bytes()), Tokens::hash(m.1.as_bytes()));
    let found: Vec<Option<(u32, u32, u32)>> = merge_list
        .par_chunks(4096)
        .flat_map_iter(|chunk| {
            let mut out = Vec::with_capacity(chunk.len());
            let mut whole: Vec<u8> = Vec::new();
            let mut prev: Option<u32> = None;
            let mut next = chunk.first().map(hashes);
            for (j, m) in chunk.iter().enumerate() {
                let (hl, hr) = next.unwrap_or_default();
                next = chunk.get(j + 1).map(|m| {
                    let h = hashes(m);
                    keys.prefetch(h.0);
                    keys.prefetch(h.1);
                    h
                });
                let (l, r) = (m.0.as_bytes(), m.1.as_bytes());
                let merged = (|| {
                    let (a, b) = (keys.find_hashed(l, hl)?, keys.find_hashed(r, hr)?);
                    // (a special token's text is no ordinary token: its id says so, the vocabulary gave it the same)
                    if special_id[a as usize] || special_id[b as usize] {
                        return None;
                    }
                    let is_whole = |z: u32| {
                        let t = keys.bytes_of(z);
                        t.len() == l.len() + r.len() && t.starts_with(l) && t.ends_with(r)
                    };
                    let z = match prev.map(|p| p.wrapping_add(1)).filter(|&z| is_whole(z)) {
                        Some(z) => z,
                        None => {
                            whole.clear();
                            whole.extend_from_slice(l);
                            whole.extend_from_slice(r);
                            keys.find(&whole)?
                        }
                    };
                    Some((a, b, z))
                })();
                prev = merged.map(|(_, _, z)| z);
                out.push(merged);
            }
            out
        })
        .collect();
    const NONE: (u32, u32) = (u32::MAX, u32::MAX);
    let mut merged: Vec<(u32, u32)> = vec![NONE; limit as usize];
    let mut last: i64 = -1;
    for f in found {
        let (a, b, new) = f?;
        if merged[new as usize] != NONE {
            continue;
        }
        if (new as i64) <= last {
            return None;
        }
        last = new as i64;
        merged[new as usize] = (a, b);
    }
    // tokens with no merge, or one from a later token: the first split into two of lower id
    let mut reached = vec![false; limit as usize];
    for &i in byte_ids.iter().chain(specials.iter().map(|(_, i)| i)) {
        reached[i as usize] = true;
    }
    let which: Vec<usize> = (0..tokens.len())
        .filter(|&k| {
            let id = tokens[k].2;
            let (a, b) = merged[id as usize];
            !reached[id as usize] && (a == u32::MAX || a.max(b) >= id)
        })
        .collect();
    if !which.is_empty() {
        let refs: Vec<(&[u8], u32)> = tokens.iter().map(|&(s, e, i)| (&bytes[s..e], i)).collect();
        for (k, split) in which.iter().zip(first_lower_splits(&refs, &which).ok()?) {
            merged[tokens[*k].2 as usize] = split?;
        }
    }
    let merges: Vec<(u32, u32, u32)> =
        merged.iter().enumerate().filter(|(_, &m)| m != NONE).map(|(z, &(a, b))| (a, b, z as u32)).collect();
    Some(HfParts { byte_ids, merges, specials, top, model })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tokenizer.json of the 256 bytes, `ab` (256), `abc` (257) and one special (258).
    fn doc(merges: &str, extra_vocab: &str, added: &str) -> String {
        let chars = byte_chars();
        let mut vocab: Vec<String> =
            (0..256).map(|b| format!("{}: {b}", serde_json::to_string(&chars[b].to_string()).unwrap())).collect();
        vocab.push(r#""ab": 256, "abc": 257, "<|s|>": 258"#.to_string());
        format!(
            r#"{{"added_tokens": [{added}], "model": {{"type": "BPE", "vocab": {{{}{extra_vocab}}}, "merges": {merges}}}}}"#,
            vocab.join(", ")
        )
    }

    const ADDED: &str = r#"{"id": 258, "content": "<|s|>", "special": true}"#;

    #[test]
    fn reads_merges_as_strings_or_pairs_escaped_or_not() {
        for merges in [r#"["a b", "ab c"]"#, r#"[["a", "b"], ["ab", "c"]]"#, r#"["\u0061 b", ["a\u0062", "c"]]"#] {
            let p = read(&doc(merges, "", ADDED)).unwrap_or_else(|| panic!("{merges}"));
            assert_eq!(p.merges, vec![(97, 98, 256), (256, 99, 257)], "{merges}");
            assert_eq!(p.specials, vec![("<|s|>".to_string(), 258)]);
            assert_eq!(p.byte_ids[b'a' as usize], 97);
        }
        // a token with no merge: its first split into two tokens of lower id
        assert_eq!(read(&doc(r#"["a b"]"#, "", ADDED)).unwrap().merges, vec![(97, 98, 256), (256, 99, 257)]);
    }

    #[test]
    fn merges_that_skip_ids_are_looked_up() {
        // "x y" -> 259; "xy z" is not 260 (a token with no merge), so it is looked up (261); "x w" is 262
        let extra = r#", "xy": 259, "zz": 260, "xyz": 261, "xw": 262"#;
        let p = read(&doc(r#"["a b", "ab c", "x y", "xy z", "x w"]"#, extra, ADDED)).unwrap();
        let want =
            vec![(97, 98, 256), (256, 99, 257), (120, 121, 259), (122, 122, 260), (259, 122, 261), (120, 119, 262)];
        assert_eq!(p.merges, want);
        // the same merges, each the first in a list that starts elsewhere: the same answer
        let p = read(&doc(r#"["a b", "ab c", "x y", "x w"]"#, r#", "xy": 259, "xw": 260"#, ADDED)).unwrap();
        assert_eq!(p.merges, vec![(97, 98, 256), (256, 99, 257), (120, 121, 259), (120, 119, 260)]);
        // a merge whose next id has its length and its left part but not its right one
        let p = read(&doc(r#"["a b", "x y", "x z"]"#, r#", "xy": 259, "xq": 260, "xz": 261"#, ADDED)).unwrap();
        assert!(p.merges.contains(&(120, 122, 261)) && p.merges.contains(&(120, 113, 260)), "{:?}", p.merges);
        // a merge of a special token's text: declined whichever way it is found
        assert!(read(&doc(r#"["a b", "ab c", "<|s| >"]"#, "", ADDED)).is_none());
    }

    #[test]
    fn declines_what_the_python_reader_must_word() {
        for (merges, extra, added) in [
            (r#"["a b c"]"#, "", ADDED),                                                // three parts
            (r#"["a  b"]"#, "", ADDED),                                                 // an empty part
            (r#"[["a", "b", "c"]]"#, "", ADDED),                                        // three parts
            (r#"["ab c", "a b"]"#, "", ADDED),                                          // not in id order
            (r#"["a x"]"#, "", ADDED),                                                  // "ax" is no token
            (r#"["a b"]"#, r#", "a": 5"#, ADDED),                                       // a duplicate key
            (r#"["a b"]"#, r#", "日": 259"#, ADDED),                                    // not a byte-level key
            (r#"["a b"]"#, r#", "zz": 99999"#, ADDED),                                  // an id beyond the limit
            (r#"["a b"]"#, "", r#"{"id": 258, "content": "<|s|>", "special": false}"#), // not special
            (r#"["a b"]"#, "", r#"{"id": 257, "content": "<|s|>", "special": true}"#),  // another id
            (r#"["<|s|> a"]"#, "", ADDED),                                              // a special in a merge
        ] {
            assert!(read(&doc(merges, extra, added)).is_none(), "{merges} {extra} {added}");
        }
    }
}
