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

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::value::RawValue;

use super::ranks::{first_lower_splits, id_limit};
use super::tfjson::members;

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

fn unique_members(raw: &str) -> Option<Vec<(String, &RawValue)>> {
    let m = members(raw)?.0;
    let mut seen = FxHashSet::default();
    m.iter().all(|(k, _)| seen.insert(k.as_str())).then_some(())?;
    Some(m)
}

fn merge_parts(raw: &RawValue) -> Option<(String, String)> {
    let (l, r) = if raw.get().starts_with('"') {
        let s: String = serde_json::from_str(raw.get()).ok()?;
        let mut it = s.split(' ');
        let (l, r) = (it.next()?.to_string(), it.next()?.to_string());
        if it.next().is_some() {
            return None;
        }
        (l, r)
    } else {
        serde_json::from_str::<(String, String)>(raw.get()).ok()?
    };
    (!l.is_empty() && !r.is_empty()).then_some((l, r))
}

/// Read a byte-level BPE `tokenizer.json`; None: let the Python reader do it.
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
    // the vocabulary
    let mut vocab: Vec<(String, u32)> = Vec::new();
    for (k, v) in unique_members(vocab_raw?.get())? {
        vocab.push((k, serde_json::from_str::<u32>(v.get()).ok()?));
    }
    let keys: FxHashSet<&str> = vocab.iter().map(|(k, _)| k.as_str()).collect();
    let entries = vocab.len() + specials.iter().filter(|(t, _)| !keys.contains(t.as_str())).count();
    let limit = id_limit(entries);
    let chars = byte_chars();
    let mut back: FxHashMap<char, u8> = FxHashMap::default();
    for (b, &c) in chars.iter().enumerate() {
        back.insert(c, b as u8);
    }
    let mut id_of: FxHashMap<&str, u32> = FxHashMap::default();
    let mut owners = FxHashSet::default();
    let mut tokens: Vec<(Vec<u8>, u32)> = Vec::with_capacity(vocab.len()); // the ordinary tokens
    for (key, id) in &vocab {
        if *id as u64 >= limit || !owners.insert(*id) {
            return None;
        }
        id_of.insert(key.as_str(), *id);
        match special_ids.get(key.as_str()) {
            Some(&s) if s != *id => return None,
            Some(_) => {}
            None => tokens.push((key.chars().map(|c| back.get(&c).copied()).collect::<Option<Vec<u8>>>()?, *id)),
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
        *slot = *id_of.get(&*chars[b].encode_utf8(&mut s))?;
    }
    // merges: the first merge producing each token, in increasing id order
    let mut merged: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
    let mut last: i64 = -1;
    let ordinary = |k: &str| if special_ids.contains_key(k) { None } else { id_of.get(k).copied() };
    for m in serde_json::from_str::<Vec<&RawValue>>(merges_raw?.get()).ok()? {
        let (l, r) = merge_parts(m)?;
        let (a, b) = (ordinary(&l)?, ordinary(&r)?);
        let new = *id_of.get(format!("{l}{r}").as_str())?;
        if merged.contains_key(&new) {
            continue;
        }
        if (new as i64) <= last {
            return None;
        }
        last = new as i64;
        merged.insert(new, (a, b));
    }
    // tokens with no merge, or one from a later token: the first split into two of lower id
    let mut reached: FxHashSet<u32> = byte_ids.iter().copied().collect();
    reached.extend(merged.keys().copied());
    reached.extend(specials.iter().map(|(_, i)| *i));
    let which: Vec<usize> = (0..tokens.len())
        .filter(|&k| {
            let id = tokens[k].1;
            !reached.contains(&id) || merged.get(&id).is_some_and(|&(a, b)| a.max(b) >= id)
        })
        .collect();
    if !which.is_empty() {
        let refs: Vec<(&[u8], u32)> = tokens.iter().map(|(t, i)| (&t[..], *i)).collect();
        for (k, split) in which.iter().zip(first_lower_splits(&refs, &which).ok()?) {
            merged.insert(tokens[*k].1, split?);
        }
    }
    let mut merges: Vec<(u32, u32, u32)> = merged.into_iter().map(|(z, (a, b))| (a, b, z)).collect();
    merges.sort_unstable_by_key(|m| m.2);
    Some(HfParts { byte_ids, merges, specials, top, model })
}
