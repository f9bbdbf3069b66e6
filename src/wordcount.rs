//! Counting the unique pieces of a corpus: the first step of BPE training
//! and of the LZ78 strategies that rank whole chunks.
//!
//! Texts are split by the pre-tokenizer in parallel (contiguous groups of
//! texts of about equal bytes, one local map each, merged in order), and only
//! unique pieces with u64 counts are kept: memory is bounded by the unique
//! pieces, never by the corpus.
//!
//! Counters made on different machines combine: `to_bytes`/`from_bytes` (the
//! `crate::transport` format, pieces sorted by bytes so equal counts give
//! equal bytes) and `merge`, so a cluster counts partitions of a corpus and
//! sums them in any order or grouping with the same result.
//!
//! Bounded mode, for huge corpora: `prune_below(m)` drops the pieces counted
//! fewer than `m` times *so far* (in one partition) and records how many
//! pieces and occurrences it dropped. It is not exact: a piece below `m` in
//! every partition can lose up to `partitions * (m - 1)` occurrences, and the
//! pairs inside it their counts. Exact by default (nothing is ever dropped
//! unless asked).
//!
//! Not handled: normalization (the caller's, before counting).

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::spill::SpillDir;
use crate::transport::{Kind, Reader, Writer};

/// A piece of at most 15 bytes packed in 16: its bytes, zero-padded, and its
/// length in the last byte. Most pieces are this short; as keys they hash as
/// two words and compare as two words, where a boxed key is a pointer to
/// follow, a `memcmp` call (a fifth of counting's time) and an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Short([u8; 16]);

impl Short {
    #[inline]
    fn new(p: &[u8]) -> Option<Short> {
        if p.len() > 15 {
            return None;
        }
        let mut b = [0u8; 16];
        b[..p.len()].copy_from_slice(p);
        b[15] = p.len() as u8;
        Some(Short(b))
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.0[..self.0[15] as usize]
    }
}

impl std::hash::Hash for Short {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(u64::from_le_bytes(self.0[..8].try_into().unwrap()));
        h.write_u64(u64::from_le_bytes(self.0[8..].try_into().unwrap()));
    }
}

/// The counts of unique pieces: short ones packed ([`Short`]), longer ones boxed.
#[derive(Default)]
struct Table {
    short: FxHashMap<Short, u64>,
    long: FxHashMap<Box<[u8]>, u64>,
}

impl Table {
    fn get(&self, k: &[u8]) -> u64 {
        match Short::new(k) {
            Some(s) => self.short.get(&s).copied(),
            None => self.long.get(k).copied(),
        }
        .unwrap_or(0)
    }

    /// Add `v` to `k`'s count; true if `k` is new.
    #[inline]
    fn add(&mut self, k: &[u8], v: u64) -> bool {
        if let Some(s) = Short::new(k) {
            let mut new = false;
            *self.short.entry(s).or_insert_with(|| {
                new = true;
                0
            }) += v;
            return new;
        }
        match self.long.get_mut(k) {
            Some(c) => {
                *c += v;
                false
            }
            None => {
                self.long.insert(k.into(), v);
                true
            }
        }
    }

    fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.short.iter().map(|(k, &v)| (k.bytes(), v)).chain(self.long.iter().map(|(k, &v)| (&k[..], v)))
    }

    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        self.short.retain(|_, c| keep(*c));
        self.long.retain(|_, c| keep(*c));
    }

    /// Estimated bytes ([`TABLE_ENTRY`] + the piece's length per entry).
    fn mem(&self) -> u64 {
        self.iter().map(|(k, _)| TABLE_ENTRY + k.len() as u64).sum()
    }

    fn into_vec(self) -> Vec<(Box<[u8]>, u64)> {
        let mut v: Vec<(Box<[u8]>, u64)> = Vec::with_capacity(self.len());
        v.extend(self.short.into_iter().map(|(k, c)| (k.bytes().into(), c)));
        v.extend(self.long);
        v
    }
}

/// One group's counts: short pieces packed, longer ones borrowed from its
/// texts, and how many pieces it had.
struct Local<'a> {
    short: FxHashMap<Short, u64>,
    long: FxHashMap<&'a str, u64>,
    pieces: u64,
}

/// Contiguous groups of `items` of about equal size (`size` each, `total` in
/// all): four per thread of the current rayon pool, so a slow group does not
/// hold the others up.
pub(crate) fn even_groups<T>(items: &[T], size: impl Fn(&T) -> usize, total: usize) -> Vec<&[T]> {
    let parts = (rayon::current_num_threads() * 4).max(1);
    crate::chunks::byte_groups(items, size, total / parts + 1)
}

/// The pieces of `docs` counted in one map (one thread's share of a batch).
fn count_docs<'a>(pretok: &Pretokenizer, docs: impl Iterator<Item = &'a str>, bytes: usize) -> Result<Local<'a>> {
    // sized for about one new piece per 32 bytes of text (web text: ~one per 80):
    // growing the table from empty, rehash after rehash, took 8% of counting
    let mut short: FxHashMap<Short, u64> = FxHashMap::with_capacity_and_hasher(bytes / 32, Default::default());
    let mut long: FxHashMap<&str, u64> = FxHashMap::with_capacity_and_hasher(bytes / 512, Default::default());
    let mut n = 0u64;
    for t in docs {
        pretok.split(t, |p| {
            match Short::new(p.as_bytes()) {
                Some(s) => *short.entry(s).or_insert(0) += 1,
                None => *long.entry(p).or_insert(0) += 1,
            }
            n += 1;
        })?;
    }
    Ok(Local { short, long, pieces: n })
}

/// Unique pieces of a corpus with their counts.
pub struct WordCounter {
    pretok: Pretokenizer,
    map: Table,
    total_pieces: u64,
    total_bytes: u64,
    /// Bounded mode: unique pieces dropped (summed over merged counters).
    dropped_unique: u64,
    /// Bounded mode: occurrences of the dropped pieces.
    dropped_pieces: u64,
    /// Bounded mode: the largest `prune_below` threshold applied (0: exact).
    prune_min: u64,
    /// Estimated bytes of `map` ([`TABLE_ENTRY`] + the piece's length per entry).
    mem: u64,
    /// Spilling (a memory budget): under which directory sorted runs go (their
    /// own directory, made at the first run), and the table's limit.
    spill: Option<Box<(std::path::PathBuf, Option<SpillDir>, u64)>>,
    /// A memory budget's drop: (unique pieces, occurrences, threshold: pieces
    /// counted fewer times were dropped; 0: nothing was).
    budget_drop: (u64, u64, u64),
}

/// Estimated bytes of one entry of the counting table besides the piece's
/// own bytes: the boxed key (16) and its allocation's header (16), the count
/// (8), and the hash table's control byte and spare capacity (~8).
pub const TABLE_ENTRY: u64 = 48;

/// Estimated bytes training holds for a unique piece of `len` bytes: its
/// slots in the merge loop's arena (4 bytes per token, two more per piece),
/// the pair index's positions (4 per pair), and the counter's sorted copy
/// that lives while the arena is laid out (24 + the boxed bytes + 16).
/// `docs/scale.md` turns it into pieces per budget.
pub fn train_cost(len: usize) -> u64 {
    let len = len as u64;
    64 + 9 * len
}

impl WordCounter {
    pub fn new(pretok: Pretokenizer) -> Self {
        WordCounter {
            pretok,
            map: Table::default(),
            total_pieces: 0,
            total_bytes: 0,
            dropped_unique: 0,
            dropped_pieces: 0,
            prune_min: 0,
            mem: 0,
            spill: None,
            budget_drop: (0, 0, 0),
        }
    }

    pub fn pretokenizer(&self) -> &Pretokenizer {
        &self.pretok
    }

    /// (unique pieces dropped, their occurrences, the largest threshold) by `prune_below`.
    pub fn dropped(&self) -> (u64, u64, u64) {
        (self.dropped_unique, self.dropped_pieces, self.prune_min)
    }

    /// The count of one piece (0 if absent).
    pub fn get(&self, w: &[u8]) -> u64 {
        self.map.get(w)
    }

    /// The counted pieces, in no particular order.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.map.iter()
    }

    pub fn unique(&self) -> usize {
        self.map.len()
    }

    pub fn total_pieces(&self) -> u64 {
        self.total_pieces
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Count the pieces of `texts`; runs on the current rayon pool.
    pub fn add_texts<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        if texts.is_empty() {
            return Ok(());
        }
        let bytes: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        let groups = even_groups(texts, |t| t.as_ref().len(), bytes);
        let pretok = &self.pretok;
        let locals: Vec<Result<Local<'_>>> =
            groups.par_iter().map(|g| count_docs(pretok, g.iter().map(|t| t.as_ref()), bytes / groups.len())).collect();
        self.absorb(locals)?;
        self.total_bytes += bytes as u64;
        Ok(())
    }

    /// Count the documents of a block of whole JSON lines (`head` followed by
    /// `body`, as `crate::jsonl::block_lines` takes them): each line's `field`
    /// string, found and unescaped in Rust, split and counted on the current
    /// rayon pool, without a Python string per document. Returns the number of
    /// lines, or None -- with nothing counted -- when some line needs the
    /// Python reader (`crate::jsonl`: bad JSON or UTF-8, a missing field, lone
    /// surrogates...), which then reads the whole block. `file_start`: the
    /// block starts the file (its byte-order marks are dropped).
    pub fn add_jsonl_block(
        &mut self,
        head: &[u8],
        body: &[u8],
        field: &str,
        file_start: bool,
    ) -> Result<Option<usize>> {
        let mut joined = Vec::new();
        let lines = crate::jsonl::block_lines(head, body, &mut joined);
        let nlines = lines.len();
        let numbered: Vec<(usize, &[u8])> = lines.into_iter().enumerate().collect();
        let groups = even_groups(&numbered, |l| l.1.len() + 1, head.len() + body.len());
        // 1. each group's documents, unescaped, back to back in one buffer of the
        //    group's (about its share of the block): the pieces counted in step 2
        //    borrow from it, so a piece is copied only when it is new to the counter
        let texts: Option<Vec<(String, Vec<usize>)>> = groups
            .par_iter()
            .map(|g| {
                let mut buf = String::with_capacity(g.iter().map(|l| l.1.len()).sum());
                let mut ends = Vec::with_capacity(g.len());
                for &(i, l) in g.iter() {
                    if crate::jsonl::scan_line(l, field, file_start && i == 0, &mut buf)? == crate::jsonl::Found::Text {
                        ends.push(buf.len());
                    } else {
                        buf.truncate(ends.last().copied().unwrap_or(0));
                    }
                }
                Some((buf, ends))
            })
            .collect();
        let Some(texts) = texts else { return Ok(None) };
        // 2. split and count
        let pretok = &self.pretok;
        let locals: Vec<Result<Local<'_>>> = texts
            .par_iter()
            .map(|(buf, ends)| {
                let starts = std::iter::once(0).chain(ends.iter().copied());
                count_docs(pretok, starts.zip(ends.iter().copied()).map(|(a, b)| &buf[a..b]), buf.len())
            })
            .collect();
        self.absorb(locals)?;
        self.total_bytes += texts.iter().map(|t| t.0.len() as u64).sum::<u64>();
        Ok(Some(nlines))
    }

    /// Add the per-group counts of `add_texts` / `add_jsonl_block`, in order
    /// (the first error wins).
    fn absorb(&mut self, locals: Vec<Result<Local<'_>>>) -> Result<()> {
        for r in locals {
            let local = r?;
            self.total_pieces += local.pieces;
            self.map.short.reserve(local.short.len() / 4);
            for (k, v) in local.short {
                let mut new = false;
                *self.map.short.entry(k).or_insert_with(|| {
                    new = true;
                    0
                }) += v;
                self.mem += new as u64 * (TABLE_ENTRY + k.0[15] as u64);
            }
            for (k, v) in local.long {
                if self.map.add(k.as_bytes(), v) {
                    self.mem += TABLE_ENTRY + k.len() as u64;
                }
            }
        }
        self.maybe_spill()
    }

    /// Spill sorted runs of the table to a new directory under `parent`
    /// whenever it holds more than `limit` estimated bytes (`crate::spill`).
    pub fn spill_to(&mut self, parent: &std::path::Path, limit: u64) -> Result<()> {
        if !parent.is_dir() {
            return Err(Error::invalid(format!("the temporary directory {} does not exist", parent.display())));
        }
        self.spill = Some(Box::new((parent.to_path_buf(), None, limit)));
        self.maybe_spill()
    }

    /// Runs written so far (0 without spilling).
    pub fn runs(&self) -> usize {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).map_or(0, |d| d.runs.len())
    }

    /// The spill directory, while there is one.
    pub fn spill_dir(&self) -> Option<&std::path::Path> {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).map(|d| d.path())
    }

    /// Counts partly on disk: `settle` first, then read them.
    fn check_settled(&self) -> Result<()> {
        if self.runs() > 0 {
            return Err(Error::invalid("the counts are partly spilled to disk: call settle() first"));
        }
        Ok(())
    }

    fn maybe_spill(&mut self) -> Result<()> {
        let Some(sp) = &mut self.spill else { return Ok(()) };
        let (parent, dir, limit) = &mut **sp;
        if self.mem <= *limit || self.map.is_empty() {
            return Ok(());
        }
        if dir.is_none() {
            *dir = Some(SpillDir::new(parent)?);
        }
        let dir = dir.as_mut().unwrap();
        let map = std::mem::take(&mut self.map);
        let mut items = map.into_vec();
        items.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        dir.write_run(items.iter().map(|(k, v)| (&k[..], *v)))?;
        self.mem = 0;
        Ok(())
    }

    /// The end of counting under a memory budget: the runs on disk and the
    /// table merged into exact counts, keeping the most frequent pieces whose
    /// training cost ([`train_cost`]) fits `keep` bytes -- every piece counted
    /// at least some threshold T times, T as low as fits; pieces counted
    /// fewer times are dropped and recorded ([`Self::budget_dropped`]). Nothing
    /// is dropped when everything fits: the counts are then exactly the
    /// unbounded ones. An error, with nothing changed, when what fits covers
    /// less than `min_coverage` of the piece occurrences: it says what budget
    /// would. The spill directory is removed.
    /// `budget_per_keep`: the whole budget a caller gives per byte of `keep`
    /// (for the message).
    pub fn settle(&mut self, keep: u64, min_coverage: f64, budget_per_keep: f64) -> Result<(u64, u64, u64)> {
        let spilled = self.runs() > 0;
        if spilled {
            self.maybe_spill_all()?;
        }
        // pass 1: per count, how many pieces and their cost
        let mut hist: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
        let mut add = |k: &[u8], c: u64| {
            let e = hist.entry(c).or_insert((0, 0));
            e.0 += 1;
            e.1 += train_cost(k.len());
        };
        if spilled {
            let mut m = self.spill_runs().merge()?;
            while let Some((k, c)) = m.next()? {
                add(&k, c);
            }
        } else {
            for (k, c) in self.map.iter() {
                add(k, c);
            }
        }
        let unique: u64 = hist.values().map(|e| e.0).sum();
        let occurrences: u64 = hist.iter().map(|(c, e)| c * e.0).sum();
        // the lowest threshold whose pieces fit
        let (mut fit, mut threshold, mut kept_occ, mut kept) = (0u64, u64::MAX, 0u64, 0u64);
        for (&c, &(n, cost)) in hist.iter().rev() {
            if fit + cost > keep {
                break;
            }
            fit += cost;
            threshold = c;
            kept_occ += c * n;
            kept += n;
        }
        if hist.is_empty() || kept == unique {
            threshold = 0;
        }
        if (kept_occ as f64) < min_coverage * occurrences as f64 {
            let (mut need, mut occ) = (0u64, 0u64);
            for (&c, &(n, cost)) in hist.iter().rev() {
                if occ as f64 >= min_coverage * occurrences as f64 {
                    break;
                }
                need += cost;
                occ += c * n;
            }
            return Err(Error::invalid(format!(
                "the memory budget is too small: its {keep} bytes for training hold the {kept} most frequent of \
                 {unique} distinct pieces, {:.1}% of the corpus's {occurrences} piece occurrences; keeping the \
                 pieces that make up {:.0}% of them takes about {need} bytes: a budget of at least {} bytes",
                100.0 * kept_occ as f64 / occurrences.max(1) as f64,
                100.0 * min_coverage,
                (need as f64 * budget_per_keep).ceil() as u64,
            )));
        }
        // pass 2: keep what fits
        if spilled {
            let mut m = self.spill_runs().merge()?;
            let mut map = Table::default();
            map.short.reserve(kept as usize);
            while let Some((k, c)) = m.next()? {
                if c >= threshold {
                    map.add(&k, c);
                }
            }
            self.map = map;
        } else if threshold > 0 {
            self.map.retain(|c| c >= threshold);
        }
        self.mem = self.map.mem();
        self.spill = None;
        self.budget_drop = (unique - kept, occurrences - kept_occ, threshold);
        Ok(self.budget_drop)
    }

    /// The table written as one more run (every count is then on disk), and
    /// the runs reduced to what one merge opens.
    fn maybe_spill_all(&mut self) -> Result<()> {
        if let Some(sp) = &mut self.spill {
            sp.2 = 0;
        }
        self.maybe_spill()?;
        match self.spill.as_mut().and_then(|sp| sp.1.as_mut()) {
            Some(dir) => dir.reduce(),
            None => Ok(()),
        }
    }

    /// The runs (only called when there are some).
    fn spill_runs(&self) -> &SpillDir {
        self.spill.as_ref().and_then(|s| s.1.as_ref()).expect("runs were written")
    }

    /// A memory budget's drop ([`Self::settle`]): (unique pieces, their
    /// occurrences, the threshold; 0: nothing dropped).
    pub fn budget_dropped(&self) -> (u64, u64, u64) {
        self.budget_drop
    }

    /// Add one piece with a count, bypassing the pre-tokenizer.
    pub fn add_word(&mut self, w: &[u8], count: u64) {
        self.total_pieces += count;
        self.total_bytes += w.len() as u64 * count;
        if self.map.add(w, count) {
            self.mem += TABLE_ENTRY + w.len() as u64;
        }
    }

    /// Add `other`'s pieces, counts and totals to this counter. Both must
    /// split text the same way (the same pattern).
    pub fn merge(&mut self, other: &WordCounter) -> Result<()> {
        if self.pretok.pattern() != other.pretok.pattern() {
            return Err(Error::invalid(format!(
                "cannot merge piece counts made with different split patterns ({:?} and {:?})",
                self.pretok.pattern(),
                other.pretok.pattern()
            )));
        }
        other.check_settled()?;
        self.map.short.reserve(other.map.short.len());
        for (k, v) in other.map.iter() {
            if self.map.add(k, v) {
                self.mem += TABLE_ENTRY + k.len() as u64;
            }
        }
        self.total_pieces += other.total_pieces;
        self.total_bytes += other.total_bytes;
        self.dropped_unique += other.dropped_unique;
        self.dropped_pieces += other.dropped_pieces;
        self.prune_min = self.prune_min.max(other.prune_min);
        self.maybe_spill()
    }

    /// Bounded mode: drop the pieces counted fewer than `min_count` times;
    /// returns how many unique pieces were dropped. See the module notes.
    pub fn prune_below(&mut self, min_count: u64) -> usize {
        if min_count <= 1 {
            return 0;
        }
        let before = self.map.len();
        let mut mass = 0u64;
        self.map.retain(|c| {
            if c < min_count {
                mass += c;
                false
            } else {
                true
            }
        });
        let dropped = before - self.map.len();
        self.mem = self.map.mem();
        self.dropped_unique += dropped as u64;
        self.dropped_pieces += mass;
        self.prune_min = self.prune_min.max(min_count);
        dropped
    }

    /// The transport bytes (`crate::transport`, kind `Pieces`): flags (bit 0:
    /// a pattern follows), the pattern, the totals and bounded-mode figures,
    /// then every piece (length-prefixed bytes, count) in byte order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut items: Vec<(&[u8], u64)> = self.map.iter().collect();
        items.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut w = Writer::new(Kind::Pieces);
        let pattern = self.pretok.pattern();
        w.u8(pattern.is_some() as u8);
        if let Some(p) = &pattern {
            w.bytes(p.as_bytes());
        }
        for v in [self.total_pieces, self.total_bytes, self.dropped_unique, self.dropped_pieces, self.prune_min] {
            w.varint(v);
        }
        w.reserve(items.iter().map(|(k, _)| k.len() + 4).sum());
        w.varint(items.len() as u64);
        for (k, v) in items {
            w.bytes(k);
            w.varint(v);
        }
        w.finish()
    }

    /// [`Self::to_bytes`], refused while counts are spilled to disk.
    pub fn to_bytes_checked(&self) -> Result<Vec<u8>> {
        self.check_settled()?;
        Ok(self.to_bytes())
    }

    /// Read `to_bytes`' output (strict: pieces in increasing byte order, counts
    /// above zero, nothing after them; `Format` errors name the byte offset).
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let mut r = Reader::new(data, Kind::Pieces)?;
        let at = r.pos();
        let flags = r.u8()?;
        if flags > 1 {
            return Err(Error::format(at, format!("unknown flags {flags:#x}")));
        }
        let pattern = if flags & 1 == 1 {
            let at = r.pos();
            let p = r.bytes()?;
            Some(std::str::from_utf8(p).map_err(|_| Error::format(at, "the split pattern is not UTF-8"))?.to_string())
        } else {
            None
        };
        let pretok = Pretokenizer::new(pattern.as_deref())?;
        let mut wc = WordCounter::new(pretok);
        wc.total_pieces = r.varint()?;
        wc.total_bytes = r.varint()?;
        wc.dropped_unique = r.varint()?;
        wc.dropped_pieces = r.varint()?;
        wc.prune_min = r.varint()?;
        let n = r.count(2, "pieces")?;
        wc.map.short.reserve(n);
        let mut prev: Option<&[u8]> = None;
        for _ in 0..n {
            let at = r.pos();
            let k = r.bytes()?;
            if prev.is_some_and(|p| p >= k) {
                return Err(Error::format(at, "pieces are not in strictly increasing byte order"));
            }
            let at_count = r.pos();
            let v = r.varint()?;
            if v == 0 {
                return Err(Error::format(at_count, "a piece with count 0"));
            }
            wc.map.add(k, v);
            prev = Some(k);
        }
        r.end()?;
        wc.mem = wc.map.mem();
        Ok(wc)
    }

    /// The unique pieces sorted by bytes (a deterministic order).
    pub fn into_sorted(self) -> Vec<(Box<[u8]>, u64)> {
        let mut v = self.map.into_vec();
        v.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT4_PATTERN;

    fn counted(texts: &[&str]) -> WordCounter {
        let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
        wc.add_texts(texts).unwrap();
        wc
    }

    #[test]
    fn merged_parts_equal_the_whole() {
        let texts = ["hello world", "hello there, world!", "  spaces\n\nand lines", "été 2024 ünïcode"];
        let whole = counted(&texts);
        for cut in 0..=texts.len() {
            let mut a = counted(&texts[..cut]);
            let b = counted(&texts[cut..]);
            a.merge(&b).unwrap();
            assert_eq!(a.to_bytes(), whole.to_bytes(), "cut at {cut}");
        }
    }

    #[test]
    fn bytes_round_trip_and_refuse_damage() {
        let wc = counted(&["a b c a b a", "x\u{0}y"]);
        let blob = wc.to_bytes();
        let back = WordCounter::from_bytes(&blob).unwrap();
        assert_eq!(back.to_bytes(), blob);
        assert_eq!(back.get(b" b"), 2);
        let whole = WordCounter::new(Pretokenizer::Whole);
        let b2 = whole.to_bytes();
        assert_eq!(WordCounter::from_bytes(&b2).unwrap().pretok.pattern(), None);
        assert!(WordCounter::from_bytes(&blob[..blob.len() - 1]).is_err());
        let mut other = WordCounter::new(Pretokenizer::Whole);
        assert!(other.merge(&wc).is_err());
    }

    #[test]
    fn jsonl_blocks_count_as_their_texts() {
        let texts = ["hello world", "x\ny \"q\" é", "", "  spaces\n\nand lines 12345", "😀 ünï"];
        let mut block = String::from("\u{feff}");
        for (i, t) in texts.iter().enumerate() {
            block += &format!("{{\"id\": {i}, \"text\": {}}}\n", serde_json::to_string(t).unwrap());
            if i == 1 {
                block += "\n{\"text\": null}\n";
            }
        }
        let whole = counted(&texts);
        let b = block.as_bytes();
        for cut in [0, 1, 5, 20, 40] {
            let head = &b[..cut];
            if head.contains(&b'\n') {
                continue;
            }
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
                let lines = pool.install(|| wc.add_jsonl_block(head, &b[cut..], "text", true)).unwrap();
                assert_eq!(lines, Some(texts.len() + 2));
                assert_eq!(wc.to_bytes(), whole.to_bytes(), "cut {cut}, {threads} threads");
            }
        }
        // a line for the Python reader: nothing counted
        let mut wc = counted(&["a"]);
        let before = wc.to_bytes();
        let bad = b"{\"text\": \"ok\"}\n{\"text\": 5}\n";
        assert_eq!(wc.add_jsonl_block(b"", bad, "text", true).unwrap(), None);
        assert_eq!(wc.to_bytes(), before);
    }

    #[test]
    fn spilled_counts_equal_in_memory_counts() {
        // a small random corpus, counted in many batches
        let mut seed = 7u64;
        let mut rnd = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let words = ["the", "cat", "été", "x1", "日本", "zz", "ab", "q", "12345", "!!"];
        let texts: Vec<String> = (0..300)
            .map(|_| {
                (0..rnd(30)).map(|_| words[rnd(10) as usize].repeat(1 + rnd(3) as usize)).collect::<Vec<_>>().join(" ")
            })
            .collect();
        let whole = counted(&texts.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        for limit in [0, 100, 1000] {
            let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
            wc.spill_to(&std::env::temp_dir(), limit).unwrap();
            assert!(wc.spill_dir().is_none()); // made at the first run
            for chunk in texts.chunks(7) {
                wc.add_texts(chunk).unwrap();
            }
            let dir = wc.spill_dir().unwrap().to_path_buf();
            assert!(wc.runs() > 5, "limit {limit}: {} runs", wc.runs());
            assert!(wc.to_bytes_checked().is_err());
            assert_eq!(wc.settle(u64::MAX, 0.5, 1.0).unwrap(), (0, 0, 0));
            assert!(!dir.exists());
            assert_eq!(wc.to_bytes(), whole.to_bytes(), "limit {limit}");
        }
        // a budget that drops: exactly the pieces below the threshold
        let all: Vec<(Box<[u8]>, u64)> = whole.into_sorted();
        let occurrences: u64 = all.iter().map(|x| x.1).sum();
        let cost: u64 = all.iter().map(|x| train_cost(x.0.len())).sum();
        let mut wc = WordCounter::new(Pretokenizer::new(Some(GPT4_PATTERN)).unwrap());
        wc.spill_to(&std::env::temp_dir(), 200).unwrap();
        for chunk in texts.chunks(7) {
            wc.add_texts(chunk).unwrap();
        }
        let (du, dp, t) = wc.settle(cost / 2, 0.5, 1.0).unwrap();
        assert!(t > 1);
        let dropped: Vec<_> = all.iter().filter(|x| x.1 < t).collect();
        assert_eq!(du, dropped.len() as u64);
        assert_eq!(dp, dropped.iter().map(|x| x.1).sum::<u64>());
        let kept: Vec<_> = all.iter().filter(|x| x.1 >= t).cloned().collect();
        assert!(kept.iter().map(|x| train_cost(x.0.len())).sum::<u64>() <= cost / 2);
        assert_eq!(wc.into_sorted(), kept);
        // too small: an error naming a budget that would do
        let mut wc = counted(&texts.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        let err = wc.settle(10, 0.9, 2.0).unwrap_err().to_string();
        assert!(err.contains("too small") && err.contains("a budget of at least"), "{err}");
        assert_eq!(wc.unique(), all.len());
        let _ = occurrences;
    }

    #[test]
    fn prune_records_what_it_dropped() {
        // pieces: "a" 1, " a" 3, " b" 2, " c" 1
        let mut wc = counted(&["a a a a b b c"]);
        assert_eq!(wc.prune_below(3), 3);
        assert_eq!(wc.dropped(), (3, 4, 3));
        assert_eq!(wc.get(b" a"), 3);
        assert_eq!(wc.unique(), 1);
        let back = WordCounter::from_bytes(&wc.to_bytes()).unwrap();
        assert_eq!(back.dropped(), wc.dropped());
    }
}
