//! The fast path of the tokenforge-bpe JSON reader: the top-level object cut
//! into raw values (serde_json checks the syntax), and the large integer
//! arrays (`byte_ids`, `merges`, `merge_ids`) read straight into `u32`s with
//! their canonical JSON text (for the checksum, `formats/checksum.py`:
//! `[[1,2],[3,4]]`), so no Python object is made per merge. Only plain
//! non-negative integers that fit in 32 bits are taken; for anything else
//! (a sign, a fraction, an exponent, a duplicate key) the caller falls back to
//! the Python reader, which reports what is wrong and where.
//!
//! Not handled: error messages (see above).

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The members of a JSON object in order, values raw (duplicates kept).
pub struct Members<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some((k, raw)) = m.next_entry::<String, &'de RawValue>()? {
                    v.push((k, raw));
                }
                Ok(Members(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// The members of the object `text`, or None (not an object, bad syntax).
pub fn members(text: &str) -> Option<Members<'_>> {
    serde_json::from_str(text).ok()
}

/// A scanner over JSON text already checked by serde_json.
struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    /// A plain integer 0..=u32::MAX, its digits appended to `canon`.
    fn int(&mut self, canon: &mut Vec<u8>) -> Option<u32> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let d = &self.s[start..self.i];
        if d.is_empty() || d.len() > 10 || (d.len() > 1 && d[0] == b'0') {
            return None;
        }
        if matches!(self.s.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        canon.extend_from_slice(d);
        u32::try_from(d.iter().fold(0u64, |a, &c| a * 10 + (c - b'0') as u64)).ok()
    }
    fn end(&mut self) -> bool {
        self.ws();
        self.i == self.s.len()
    }
}

/// `[1, 2, 3]` -> the ints and `[1,2,3]`.
pub fn int_array(raw: &str) -> Option<(Vec<u32>, Vec<u8>)> {
    let mut sc = Scan { s: raw.as_bytes(), i: 0 };
    let mut canon = vec![b'['];
    let mut out = Vec::new();
    if !sc.eat(b'[') {
        return None;
    }
    if !sc.eat(b']') {
        loop {
            out.push(sc.int(&mut canon)?);
            if sc.eat(b',') {
                canon.push(b',');
                continue;
            }
            if !sc.eat(b']') {
                return None;
            }
            break;
        }
    }
    canon.push(b']');
    sc.end().then_some((out, canon))
}

/// Pairs of ids and the canonical text of the array they came from.
pub type PairsAndText = (Vec<(u32, u32)>, Vec<u8>);

/// `[[1, 2], [3, 4]]` -> the pairs and `[[1,2],[3,4]]`.
pub fn pair_array(raw: &str) -> Option<PairsAndText> {
    let mut sc = Scan { s: raw.as_bytes(), i: 0 };
    let mut canon = Vec::with_capacity(raw.len());
    canon.push(b'[');
    let mut out = Vec::with_capacity(raw.len() / 12);
    if !sc.eat(b'[') {
        return None;
    }
    if !sc.eat(b']') {
        loop {
            if !sc.eat(b'[') {
                return None;
            }
            canon.push(b'[');
            let a = sc.int(&mut canon)?;
            if !sc.eat(b',') {
                return None;
            }
            canon.push(b',');
            let b = sc.int(&mut canon)?;
            if !sc.eat(b']') {
                return None;
            }
            canon.push(b']');
            out.push((a, b));
            if sc.eat(b',') {
                canon.push(b',');
                continue;
            }
            if !sc.eat(b']') {
                return None;
            }
            break;
        }
    }
    canon.push(b']');
    sc.end().then_some((out, canon))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_their_canonical_text() {
        assert_eq!(int_array(" [1, 22 ,0]").unwrap(), (vec![1, 22, 0], b"[1,22,0]".to_vec()));
        assert_eq!(int_array("[]").unwrap().1, b"[]".to_vec());
        assert_eq!(pair_array("[\n [1, 2],\n [3, 4]\n]").unwrap(), (vec![(1, 2), (3, 4)], b"[[1,2],[3,4]]".to_vec()));
        for bad in ["[1.0]", "[-1]", "[1e3]", "[4294967296]", "[true]", "[1,]", "[01]", "[1] x"] {
            assert!(int_array(bad).is_none(), "{bad}");
        }
        for bad in ["[[1]]", "[[1,2,3]]", "[1,2]", "[[1,2.5]]"] {
            assert!(pair_array(bad).is_none(), "{bad}");
        }
        let m = members(r#"{"a": [1], "b": {"x": 1}, "a": 2}"#).unwrap();
        assert_eq!(m.0.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b", "a"]);
        assert!(members("[1]").is_none());
    }
}
