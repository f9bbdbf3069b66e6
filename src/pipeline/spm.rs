//! A SentencePiece model's encoding, whole: the normalizer (`normalizer.cc`) and
//! the model, as `tokenforge.pipeline.spm` describes and (slowly) runs them.
//!
//! Normalizer: at each place the longest user-defined symbol is copied as it is,
//! else the precompiled charsmap's longest rule gives the replacement, else the
//! character is copied (a byte that starts no valid character is U+FFFD);
//! `remove_extra_whitespaces` drops leading, trailing and repeated spaces,
//! `escape_whitespaces` writes a space as U+2581, `add_dummy_prefix` starts the
//! text with one. The charsmap is a Darts-clone double array over UTF-8 bytes
//! whose values point into a blob of NUL-terminated strings; every node a
//! text can reach is checked at load (`Charsmap::check`), so a damaged map is a
//! `Format` error naming the unit, never a read outside it; walks still check
//! each index, and each is bounded by the text.
//!
//! Models: `unigram` ([`Unigram`] with [`super::Rule::SentencePiece`]), `bpe`
//! (`bpe_model.cc`: see [`bpe`]), `word` (a piece starts at the text's start and
//! at every U+2581) and `char` (user symbols whole, else characters); for the
//! last three an unknown piece is the unknown id (consecutive ones one id) or,
//! with byte fallback, its bytes.
//!
//! Not handled: a denormalizer,
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
        let map = Charsmap { units, strings, first };
        map.check()?;
        Ok(map)
    }

    /// Every walk a text can make stays inside the trie and every rule it can reach
    /// points at a NUL-terminated UTF-8 replacement: a damaged map fails its load,
    /// not a later encode. Each node is visited once (a set of the node positions
    /// seen), each with its 256 possible bytes: at most 256 steps per unit, however
    /// the units point at each other. (Darts-clone arrays are whole blocks of 256
    /// units, so a sound one never has a child position outside itself.)
    fn check(&self) -> Result<()> {
        let units = &self.units;
        let mut seen: rustc_hash::FxHashSet<usize> = Default::default();
        let mut values: rustc_hash::FxHashSet<usize> = Default::default();
        let mut todo = vec![offset(units[0])];
        seen.insert(todo[0]);
        while let Some(base) = todo.pop() {
            for c in 0..256usize {
                let child = base ^ c;
                let u = *units.get(child).ok_or_else(|| self.bad(child))?;
                if label(u) != c as u32 {
                    continue;
                }
                let next = child ^ offset(u);
                if (u >> 8) & 1 == 1 {
                    let v = (*units.get(next).ok_or_else(|| self.bad(next))? & 0x7FFF_FFFF) as usize;
                    if values.insert(v) {
                        self.replacement(v)?;
                    }
                }
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        Ok(())
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

    pub(super) fn bad(&self, pos: usize) -> Error {
        Error::format(0, format!("the charsmap's trie points outside itself (unit {pos} of {})", self.units.len()))
    }

    /// Walks the rules that start `data`, shortest first, handing each one's
    /// (length, value) to `hit` until it returns false; `stop_at_nul`: the walk
    /// ends at a NUL byte (tokenizers' walk does, sentencepiece's does not).
    fn walk(&self, data: &[u8], stop_at_nul: bool, mut hit: impl FnMut(usize, usize) -> bool) -> Result<()> {
        let units = &self.units;
        let mut pos = offset(units[0]);
        for (i, &c) in data.iter().enumerate() {
            if c == 0 && stop_at_nul {
                break;
            }
            pos ^= c as usize;
            let u = *units.get(pos).ok_or_else(|| self.bad(pos))?;
            if label(u) != c as u32 {
                break;
            }
            pos ^= offset(u);
            if (u >> 8) & 1 == 1 {
                let v = *units.get(pos).ok_or_else(|| self.bad(pos))?;
                if !hit(i + 1, (v & 0x7FFF_FFFF) as usize) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The value of the shortest rule at the start of `data`, the walk ending at
    /// a NUL byte (tokenizers' `Precompiled::transform` takes the first hit of a
    /// common-prefix search); None if no rule starts it.
    pub(super) fn shortest(&self, data: &[u8]) -> Result<Option<usize>> {
        let mut found = None;
        self.walk(data, true, |_, v| {
            found = Some(v);
            false
        })?;
        Ok(found)
    }

    /// (length, value) of the longest rule at the start of `data`; (0, 0) if none.
    fn longest(&self, data: &[u8]) -> Result<(usize, usize)> {
        let mut best = (0, 0);
        self.walk(data, false, |len, v| {
            best = (len, v);
            true
        })?;
        Ok(best)
    }

    pub(super) fn replacement(&self, value: usize) -> Result<&str> {
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

/// The pieces the word, char and bpe models look up.
pub struct SpmPieces {
    /// normal, user-defined and unused pieces
    pub normal: ByteTrie,
    /// unknown, control and byte pieces (looked up first, as `PieceToId` does)
    pub reserved: Option<ByteTrie>,
    /// the user-defined symbols (never split, never merged)
    pub user: Option<ByteTrie>,
    pub unk: u32,
    /// the 256 byte pieces' ids when unknown pieces fall back to bytes
    pub bytes: Option<Vec<u32>>,
    /// per id: its score and whether it is unused (bpe)
    pub scores: Vec<f32>,
    pub unused: Vec<bool>,
}

impl SpmPieces {
    fn id(&self, w: &[u8]) -> u32 {
        self.reserved.as_ref().and_then(|r| r.get(w)).or_else(|| self.normal.get(w)).unwrap_or(self.unk)
    }

    /// The length of the symbol at the start of `b`: a user symbol whole, else a character.
    fn symbol(&self, b: &[u8]) -> (usize, bool) {
        match self.user.as_ref().and_then(|u| u.longest(b, NONE)) {
            Some((_, k)) => (k, true),
            None => (utf8_len(b[0]).min(b.len()), false),
        }
    }
}

/// Unknown pieces as sentencepiece writes them out: the bytes' pieces with byte
/// fallback, else one unknown id per run of them.
struct Emit<'a> {
    pieces: &'a SpmPieces,
    prev_unk: bool,
}

impl Emit<'_> {
    fn piece(&mut self, w: &[u8], id: u32, out: &mut Vec<u32>) {
        let is_unk = id == self.pieces.unk;
        match &self.pieces.bytes {
            Some(ids) if is_unk => out.extend(w.iter().map(|&x| ids[x as usize])),
            _ if is_unk && self.prev_unk => {}
            _ => out.push(id),
        }
        self.prev_unk = is_unk;
    }
}

/// A candidate merge of `bpe_model.cc`: the highest score first, then the leftmost.
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Pair {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Pair {}
impl PartialOrd for Pair {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pair {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // a max-heap: the higher score, then the smaller left, right and size
        self.score
            .partial_cmp(&o.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(o.left.cmp(&self.left))
            .then(o.right.cmp(&self.right))
            .then(o.size.cmp(&self.size))
    }
}

/// sentencepiece's BPE over the normalized text `b`: adjacent symbols whose
/// joined text is a piece are merged, the highest score first (the leftmost on a
/// tie); user symbols are never merged; a merged piece that is unused is split
/// back into the two parts it was made of. A heap over a linked list of symbols
/// (a stale entry: one side empty or grown since it was pushed): O(n log n) for
/// n symbols.
fn bpe(p: &SpmPieces, b: &[u8], out: &mut Vec<u32>) {
    const NO: usize = usize::MAX;
    let (mut start, mut end, mut frozen) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        let (k, f) = p.symbol(&b[i..]);
        start.push(i);
        end.push(i + k);
        frozen.push(f);
        i += k;
    }
    let n = start.len();
    let mut nxt: Vec<usize> = (1..=n).collect();
    let mut prv: Vec<usize> = (0..n).map(|k| if k == 0 { NO } else { k - 1 }).collect();
    let mut heap = std::collections::BinaryHeap::new();
    let mut rev: rustc_hash::FxHashMap<&[u8], usize> = Default::default();
    let mut push =
        |l: usize, r: usize, start: &[usize], end: &[usize], heap: &mut std::collections::BinaryHeap<Pair>| {
            if l == NO || r >= n || frozen[l] || frozen[r] {
                return;
            }
            let joined = &b[start[l]..end[r]];
            let Some(id) = p.normal.get(joined) else { return };
            heap.push(Pair { score: p.scores[id as usize], left: l, right: r, size: joined.len() });
            if p.unused[id as usize] {
                rev.insert(joined, end[l] - start[l]);
            }
        };
    for k in 1..n {
        push(k - 1, k, &start, &end, &mut heap);
    }
    while let Some(Pair { left, right, size, .. }) = heap.pop() {
        let (ll, rl) = (end[left] - start[left], end[right] - start[right]);
        if ll == 0 || rl == 0 || ll + rl != size {
            continue;
        }
        end[left] = end[right];
        start[right] = end[right];
        nxt[left] = nxt[right];
        if nxt[right] < n {
            prv[nxt[right]] = left;
        }
        push(prv[left], left, &start, &end, &mut heap);
        push(left, nxt[left], &start, &end, &mut heap);
    }
    let mut emit = Emit { pieces: p, prev_unk: false };
    let mut stack: Vec<&[u8]> = Vec::new();
    for k in 0..n {
        if start[k] == end[k] {
            continue;
        }
        stack.push(&b[start[k]..end[k]]);
        while let Some(x) = stack.pop() {
            let id = p.id(x);
            match rev.get(x) {
                Some(&cut) if p.unused[id as usize] => {
                    stack.push(&x[cut..]);
                    stack.push(&x[..cut]);
                }
                _ => emit.piece(x, id, out),
            }
        }
    }
}

/// The model types this engine runs.
pub enum SpmModel {
    Unigram(Unigram),
    Word(SpmPieces),
    Char(SpmPieces),
    Bpe(SpmPieces),
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
        let b = norm.as_bytes();
        match &self.model {
            SpmModel::Unigram(u) => return u.encode_into(norm, &mut scratch.lattice, out),
            SpmModel::Bpe(p) => bpe(p, b, out),
            SpmModel::Word(p) => {
                // a word starts at the text's start and at every U+2581 (E2 96 81) after it
                let mut emit = Emit { pieces: p, prev_unk: false };
                let mut from = 0;
                for (i, _) in norm.char_indices().filter(|&(i, c)| i > 0 && c == '\u{2581}') {
                    emit.piece(&b[from..i], p.id(&b[from..i]), out);
                    from = i;
                }
                emit.piece(&b[from..], p.id(&b[from..]), out);
            }
            SpmModel::Char(p) => {
                let mut emit = Emit { pieces: p, prev_unk: false };
                let mut i = 0;
                while i < b.len() {
                    let (k, _) = p.symbol(&b[i..]);
                    emit.piece(&b[i..i + k], p.id(&b[i..i + k]), out);
                    i += k;
                }
            }
        }
        Ok(())
    }
}
