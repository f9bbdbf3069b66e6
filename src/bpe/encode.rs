//! Rank-based BPE encoding.
//!
//! A piece is split into bytes and the adjacent pair with the lowest rank is
//! merged until no pair has a rank; the leftmost pair wins a tie. With
//! [`MergeRule::Bytes`] a pair's rank is the rank of its concatenated bytes
//! (tiktoken's rule) and a piece that is itself a token is emitted whole; with
//! [`MergeRule::Pairs`] only learned merges apply (the growing vocabulary's
//! rule). Both are answered by one table from a pair of ids to the merged id,
//! and the merged id is the rank.
//!
//! Encoding a text goes through the tables of `fast.rs`, built on the first
//! encode: a piece of up to 15 bytes is found in the short-piece table
//! (seeded with the tokens, and the other pieces added as they are met),
//! a longer one of up to 63 bytes in a bounded cache shared by threads (10
//! MiB per model, fixed), and only what they miss is merged. With a scanner
//! pattern the text is split a chunk of pieces at a time, and each piece's
//! line is prefetched some pieces before it is looked up; the pieces that
//! miss (up to 95 bytes) wait, up to 32 different ones, and are merged side
//! by side so that their pair-table misses overlap (`Lane`). In a text of 1
//! KB or more they wait until 32 do or the text ends, and the caches are
//! asked for all of them together (their lines asked for when each was
//! met); in a shorter text the caches are asked at once and what they miss
//! waits until the chunk of pieces ends (`Pending::ask_later`).
//! The fast path gives exactly the ids of the rule (tests: `old_path` below,
//! tests/bpe/test_encode_fast.py against tiktoken and the reference).
//!
//! Short pieces use a linear scan for the minimum (fast, cache-resident).
//! Long pieces (`"a" * 1_000_000`, text without whitespace, whole documents)
//! go to `long.rs` (windows stitched exactly, O(n log n) at worst), so no
//! input is quadratic.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::fast::{
    spill_hash, Cached, LongCache, LongKey, PairTable, PieceCache, PieceTable, Seen, ShortKey, SpillCache,
    CACHE_ID_LIMIT, CACHE_MAX, CACHE_SLOTS, LONG_CACHE_MAX, LONG_CACHE_SLOTS, PIECE_MAX, SPILL_MAX, TABLE_IDS,
};
use super::pair::{pack, unpack};
use super::ranks::{id_limit, id_too_large, token_bytes_error, token_bytes_total, SplitIndex, MAX_TOKEN_BYTES};
use super::vocab::{CutHashes, Tokens};
#[cfg(test)]
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::pretok::{Pretokenizer, SCAN_CHUNK};
use crate::specials::Specials;

/// Pieces at least this long use the heap merge.
const LONG_PIECE: usize = 96;
const NO_RANK: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRule {
    /// tiktoken: the rank of the concatenated bytes; whole-piece lookup first.
    Bytes,
    /// Only the learned (left, right) merges, lowest merge id first.
    Pairs,
}

/// Which pair ranks [`BpeModel::token_parts`] may merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitRule {
    /// Ranks below the token's own (recovering merges from tiktoken ranks).
    BelowOwnRank,
    /// Every rank but the token's own (its "effective split", the one
    /// tiktoken's loop builds it from inside any longer piece).
    AllButOwn,
}

/// Tiktoken's pair table: `(left, right) -> id` for every way every token
/// `ids` (indexed in `tokens`, distinct bytes) splits into two tokens (so
/// the rank of a pair is the rank of its concatenated bytes). Each cut of a
/// token is tested by looking up its prefix and suffix in the index, whose
/// hashes of all cuts of a token of L bytes come in O(L) (`vocab.rs`); a
/// look-up that finds a token compares its bytes: O(L^2) bytes for a token
/// of L bytes at worst, which for real vocabularies (cl100k, o200k: tokens
/// of at most 128 bytes, sum of L^2 about 10x their bytes) is the fastest
/// way. When the long tokens would make that quadratic term large against
/// the vocabulary's size (one 100 KB run of `=` that training made into a
/// token), the cuts of tokens over `DIRECT_MAX` bytes are found by walking
/// two tries instead, linear in the tokens' bytes (see `ranks.rs`); building
/// the tries costs far more than hashing, so they are built only then.
fn bytes_pair_map(tokens: &Tokens, ids: &[u32]) -> Result<FxHashMap<u64, u32>> {
    const DIRECT_MAX: usize = 32;
    let mut pair_map: FxHashMap<u64, u32> = FxHashMap::default();
    let (total, quad) = ids.iter().fold((0u64, 0u64), |(t, q), &id| {
        let l = tokens.len_of(id) as u64;
        (t + l, if l as usize > DIRECT_MAX { q.saturating_add(l * l) } else { q })
    });
    // hashing the cuts of the long tokens may cost up to 16x the vocabulary's bytes (+ 4 MB)
    let index = if quad > 16 * total + (4 << 20) {
        Some(SplitIndex::new(ids.iter().map(|&id| (tokens.bytes_of(id), id)))?)
    } else {
        None
    };
    // The cuts are found on the current rayon pool (lookups only), then inserted here.
    let direct = |t: &[u8]| t.len() >= 2 && (index.is_none() || t.len() <= DIRECT_MAX);
    let found: Vec<Vec<(u64, u32)>> = ids
        .par_chunks(4096)
        .map_init(
            || (Vec::new(), CutHashes::default(), CutHashes::default()),
            |(scratch, cur, next), chunk| {
                let mut v = Vec::with_capacity(chunk.len() * 2);
                // The slots of all cuts of the next token are asked for
                // before the cuts of this one are looked up: the look-ups
                // are random reads of a table of MiBs (16 bytes x 2^19
                // slots, 8 MiB, for o200k), and this way their misses
                // overlap with work instead of coming one by one.
                let ask = |h: &mut CutHashes, t: &[u8]| {
                    h.of(t);
                    for k in 1..t.len() {
                        tokens.prefetch(h.prefix(k));
                        tokens.prefetch(h.suffix(k));
                    }
                };
                if let Some(&first) = chunk.first().filter(|&&id| direct(tokens.bytes_of(id))) {
                    ask(next, tokens.bytes_of(first));
                }
                for (j, &id) in chunk.iter().enumerate() {
                    let t = tokens.bytes_of(id);
                    std::mem::swap(cur, next);
                    if let Some(&after) = chunk.get(j + 1).filter(|&&id| direct(tokens.bytes_of(id))) {
                        ask(next, tokens.bytes_of(after));
                    }
                    if !direct(t) {
                        if let (Some(index), true) = (&index, t.len() >= 2) {
                            index.splits(t, scratch, |_, l, r| v.push((pack(l, r), id)));
                        }
                        continue;
                    }
                    for k in 1..t.len() {
                        // (the suffix is looked up only when the prefix is a token)
                        if let Some(l) = tokens.find_hashed(&t[..k], cur.prefix(k)) {
                            if let Some(r) = tokens.find_hashed(&t[k..], cur.suffix(k)) {
                                v.push((pack(l, r), id));
                            }
                        }
                    }
                }
                v
            },
        )
        .collect();
    pair_map.reserve(found.iter().map(Vec::len).sum::<usize>());
    // two tokens never give the same pair (its bytes are one token's), so order does not matter
    for v in found {
        pair_map.extend(v);
    }
    Ok(pair_map)
}

#[derive(Clone)]
pub struct BpeModel {
    /// the bytes of every id; for tiktoken's rule, indexed by bytes too
    /// (the whole-piece look-up)
    tokens: Tokens,
    byte_to_id: [u32; 256],
    pair_map: FxHashMap<u64, u32>,
    pretok: Pretokenizer,
    specials: Specials,
    special_text: FxHashMap<u32, Vec<u8>>,
    vocab_size: usize,
    rule: MergeRule,
    /// `(left, right, new)` in order: the merges given to [`BpeModel::new`],
    /// or those [`BpeModel::from_rank_file`] recovered.
    merges: Vec<(u32, u32, u32)>,
    /// The encoder's tables, built on the first encode (see `fast.rs`).
    fast: FastCell,
}

/// The tables of `fast.rs` for one model: the vocabulary's short tokens
/// (tiktoken's rule only), the pair table, the bounded piece cache.
struct Fast {
    pieces: Option<PieceTable>,
    pairs: Option<PairTable>,
    /// the rank of each pair of single bytes, `first << 8 | second` (256 KiB)
    byte_pairs: Vec<u32>,
    /// None if an id is 2^24 or more
    cache: Option<(PieceCache, LongCache)>,
    /// what the fixed caches cannot hold (used only with them)
    spill: SpillCache,
    /// the pieces merged before: only those are cached (see `Seen`)
    seen: Seen,
}

/// Built once, on the first encode, by whichever thread gets there first. A
/// clone of the model starts empty (the tables are derived, and the cache's
/// atomics are not clonable).
#[derive(Default)]
struct FastCell(std::sync::OnceLock<Box<Fast>>);

impl Clone for FastCell {
    fn clone(&self) -> Self {
        FastCell::default()
    }
}

/// One piece of up to `LONG_PIECE - 1` bytes merged side by side with
/// others: the merge loop of [`BpeModel::merge_short_loop`] cut into rounds.
/// [`Lane::step`] merges the lowest pair and prefetches the slots of the
/// pairs it made; [`Lane::reread`] reads them, after every other lane has
/// asked for its own, so that the pair-table misses of all lanes overlap
/// where one piece alone waits for one miss a merge.
#[derive(Clone)]
struct Lane {
    n: usize,
    at: usize,
    /// its ids came from a cache ([`BpeModel::flush`]), not from a merge
    cached: bool,
    parts: [u32; MERGE_ROOM],
    ranks: [u32; MERGE_ROOM],
}

/// The parts and ranks arrays of a short merge: a piece of up to
/// `LONG_PIECE - 1` bytes and [`GAP_STEP`] slots of room past it, which
/// [`close_gap`]'s fixed-size copies may read and write.
const MERGE_ROOM: usize = LONG_PIECE + GAP_STEP;
const GAP_STEP: usize = 8;

/// The lowest rank among `ranks` (a short merge's live pairs) and where the
/// first one is; `(NO_RANK, 0)` when no pair has a rank. (A vector minimum
/// then a search for it measured the same: 0.88-0.89 CPU s for both on
/// 64 MB of web-like text, 2026-11-28.)
#[inline(always)]
fn lowest(ranks: &[u32]) -> (u32, usize) {
    let (mut best, mut at) = (NO_RANK, 0);
    for (i, &r) in ranks.iter().enumerate() {
        if r < best {
            best = r;
            at = i;
        }
    }
    (best, at)
}

/// After the pair at `at` of `n` parts merged into `parts[at]`: parts
/// `at + 2..n` move one place left, and ranks `at + 1..n - 1`.
///
/// Performance: with fixed-size copies of [`GAP_STEP`] values (one vector
/// load and store each; a piece is 13 bytes on average on web text), where
/// `copy_within` of a length known only at run time called `memmove`, twice
/// a merge: 5% of pretokenizing web text (perf, 2026-11-28).
#[inline(always)]
fn close_gap(parts: &mut [u32; MERGE_ROOM], ranks: &mut [u32; MERGE_ROOM], at: usize, n: usize) {
    let mut i = at + 1;
    while i + 1 < n {
        // (i + 1 + GAP_STEP <= n + GAP_STEP <= MERGE_ROOM: n < LONG_PIECE)
        let p: [u32; GAP_STEP] = parts[i + 1..i + 1 + GAP_STEP].try_into().unwrap();
        parts[i..i + GAP_STEP].copy_from_slice(&p);
        let r: [u32; GAP_STEP] = ranks[i..i + GAP_STEP].try_into().unwrap();
        ranks[i - 1..i - 1 + GAP_STEP].copy_from_slice(&r);
        i += GAP_STEP;
    }
}

impl Lane {
    const EMPTY: Lane = Lane { n: 0, at: 0, cached: false, parts: [0; MERGE_ROOM], ranks: [NO_RANK; MERGE_ROOM] };

    /// Done already: `ids` (at most `MERGE_ROOM`), found in a cache if
    /// `cached` (else a whole token, to be remembered as a merge's ids are).
    #[inline(always)]
    fn found(&mut self, ids: &[u32], cached: bool) {
        self.n = ids.len();
        self.parts[..ids.len()].copy_from_slice(ids);
        self.cached = cached;
    }

    /// Start on `piece` (2..`LONG_PIECE` bytes): its bytes' ids and the
    /// ranks of the first round, each through `keep` (NO_RANK if refused).
    #[inline(always)]
    fn start(&mut self, piece: &[u8], byte_to_id: &[u32; 256], byte_pairs: &[u32], keep: impl Fn(u32) -> u32) {
        self.n = piece.len();
        self.cached = false;
        for (i, &b) in piece.iter().enumerate() {
            self.parts[i] = byte_to_id[b as usize];
        }
        for i in 0..piece.len() - 1 {
            self.ranks[i] = keep(byte_pairs[(piece[i] as usize) << 8 | piece[i + 1] as usize]);
        }
    }

    /// Merge the lowest-ranked pair (the leftmost of equals) and prefetch
    /// the slots of the pairs it made; false, with nothing merged, when no
    /// pair has a rank, or after the merge if one part is left: done.
    #[inline(always)]
    fn step(&mut self, pairs: &PairTable) -> bool {
        let n = self.n;
        let (best, at) = lowest(&self.ranks[..n - 1]);
        if best == NO_RANK {
            return false;
        }
        self.parts[at] = best;
        close_gap(&mut self.parts, &mut self.ranks, at, n);
        self.n = n - 1;
        self.at = at;
        if self.n == 1 {
            return false;
        }
        if at + 1 < self.n {
            pairs.prefetch(self.parts[at], self.parts[at + 1]);
        }
        if at > 0 {
            pairs.prefetch(self.parts[at - 1], self.parts[at]);
        }
        true
    }

    /// The ranks of the pairs the last [`Lane::step`] made, through `keep`.
    #[inline(always)]
    fn reread(&mut self, pairs: &PairTable, keep: impl Fn(u32) -> u32) {
        let at = self.at;
        if at + 1 < self.n {
            self.ranks[at] = keep(pairs.get(self.parts[at], self.parts[at + 1], NO_RANK));
        }
        if at > 0 {
            self.ranks[at - 1] = keep(pairs.get(self.parts[at - 1], self.parts[at], NO_RANK));
        }
    }

    fn ids(&self) -> &[u32] {
        &self.parts[..self.n]
    }
}

/// Lanes of [`BpeModel::encode_scanned`]: pieces that missed every table and
/// cache wait here, up to this many different ones, then merge side by side.
const LANES: usize = 32;

/// A piece of [`BpeModel::encode_scanned`] whose merge is put off: its bytes
/// `s..e` of the text, where its ids go in the output (`pos`, before the
/// ids of the pieces put off ahead of it), its lane (shared by equal
/// pieces) and its hash in `Seen` (its [`ShortKey`]'s up to `CACHE_MAX`
/// bytes, else its spill hash).
struct Deferred {
    s: usize,
    e: usize,
    pos: usize,
    lane: usize,
    first: bool,
    seen: u64,
}

/// Texts of at least this many bytes put off the pieces the short-piece
/// table misses before asking the caches (see [`Pending::ask_later`]).
///
/// Performance: asking later costs a pass over the put-off pieces and a move
/// of the ids written after them at every [`BpeModel::flush`], and a flush
/// comes at the latest when the text ends. On short texts (a line of English,
/// 39 bytes on average: `encode_batch` of `train_50mb.txt`'s lines) most of
/// those pieces are in the caches and one flush per text made the batch
/// 10-20% slower; on documents of a few KB of web-like text (pretokenizing,
/// 2.2 KB on average) the caches' misses waited for one by one cost more
/// (pretokenizing 15-20% more CPU time). 1 KB is about 200 pieces, a flush's
/// fixed cost spread over them.
const ASK_LATER_TEXT: usize = 1024;

/// The pieces put off so far in one call, and their lanes (made as pieces
/// miss: text met before never needs them).
#[derive(Default)]
struct Pending {
    items: Vec<Deferred>,
    lanes: Vec<Lane>,
    live: Vec<usize>,
    /// lanes in use, and the bytes `s..e` of each one's piece and its hash
    /// in `Seen` (compared first: with the caches asked later, most pieces
    /// put off are different)
    used: usize,
    heads: [(usize, usize); LANES],
    hashes: [u64; LANES],
    /// a cache's answer, on its way to a lane
    found: Vec<u32>,
    /// The caches are asked in [`BpeModel::flush`] (a text of at least
    /// [`ASK_LATER_TEXT`] bytes): a piece the short-piece table misses is put
    /// off at once with the lines of `Seen` and its cache asked for, and the
    /// put-off pieces wait for `LANES` lanes or the text's end. Otherwise
    /// the caches are asked when the piece is met and the put-off pieces
    /// (those no cache has) are merged at the end of each chunk of pieces.
    ask_later: bool,
}

impl BpeModel {
    /// Build from the byte ids, the merges `(left, right, new)` in order and
    /// the special tokens. Every id must be below
    /// [`id_limit`]`(256 + merges + specials)`: the tables indexed by id are
    /// sized by the largest id, and the ids come from files.
    pub fn new(
        byte_ids: &[u32; 256],
        merges: &[(u32, u32, u32)],
        specials: Vec<(String, u32)>,
        pretok: Pretokenizer,
        rule: MergeRule,
    ) -> Result<Self> {
        let entries = 256 + merges.len() + specials.len();
        let limit = id_limit(entries);
        let mut max_id = 0u32;
        for (b, &id) in byte_ids.iter().enumerate() {
            if id as u64 >= limit {
                return Err(id_too_large(&format!("byte {b}"), id as u64, entries));
            }
            max_id = max_id.max(id);
        }
        for (k, &(_, _, z)) in merges.iter().enumerate() {
            if z as u64 >= limit {
                return Err(id_too_large(&format!("merge {k}"), z as u64, entries));
            }
            max_id = max_id.max(z);
        }
        for (s, id) in &specials {
            if *id as u64 >= limit {
                return Err(id_too_large(&format!("special token {s:?}"), *id as u64, entries));
            }
            max_id = max_id.max(*id);
        }
        // the tokens' total length first, from lengths alone (linear in the
        // merges): merges that double a token make it 2^k bytes, which no id
        // bound limits, so it is refused here before any of it is allocated
        let total = token_bytes_total(byte_ids, merges);
        if total > MAX_TOKEN_BYTES {
            return Err(token_bytes_error(total, MAX_TOKEN_BYTES));
        }
        // all bytes in one arena, allocated once at its exact size (a token's
        // bytes are copied from its parents' there: O(total bytes of the
        // tokens), no allocation per token)
        let mut tokens = Tokens::new(max_id as usize + 1, total as usize);
        let defined = |tokens: &Tokens, id: u32| -> Result<()> {
            if tokens.len_of(id) != 0 {
                return Err(Error::Invalid(format!("id {id} is defined twice")));
            }
            Ok(())
        };
        for (b, &id) in byte_ids.iter().enumerate() {
            defined(&tokens, id)?;
            tokens.set(id, &[b as u8])?;
        }
        let mut pair_map = FxHashMap::default();
        for (k, &(a, b, z)) in merges.iter().enumerate() {
            if tokens.len_of(a) == 0 || tokens.len_of(b) == 0 {
                return Err(Error::Invalid(format!("merge {k} ({a}, {b}) -> {z} uses an id not defined before it")));
            }
            defined(&tokens, z)?;
            tokens.set_concat(z, a, b)?;
            if rule == MergeRule::Pairs {
                pair_map.entry(pack(a, b)).or_insert(z);
            }
        }
        if rule == MergeRule::Bytes {
            // the smallest id wins if two ids have the same bytes
            let used: Vec<u32> = tokens.iter().map(|(id, _)| id).collect();
            let mut other = vec![];
            tokens.index(used.iter().copied(), |_, id| {
                other.push(id);
                Ok(())
            })?;
            let ids: Vec<u32> = if other.is_empty() {
                used
            } else {
                let other: rustc_hash::FxHashSet<u32> = other.into_iter().collect();
                used.into_iter().filter(|id| !other.contains(id)).collect()
            };
            pair_map = bytes_pair_map(&tokens, &ids)?;
        }
        let mut special_text = FxHashMap::default();
        let specials = Specials::new(specials)?;
        for (s, id) in specials.list() {
            if tokens.len_of(*id) != 0 {
                return Err(Error::SpecialToken(format!(
                    "special token {s:?} has id {id}, which a byte or merge already uses"
                )));
            }
            if special_text.insert(*id, s.as_bytes().to_vec()).is_some() {
                return Err(Error::SpecialToken(format!("special token id {id} is used twice")));
            }
        }
        Ok(BpeModel {
            tokens,
            byte_to_id: *byte_ids,
            pair_map,
            pretok,
            specials,
            special_text,
            vocab_size: max_id as usize + 1,
            rule,
            merges: merges.to_vec(),
            fast: FastCell::default(),
        })
    }

    /// A model with tiktoken's rule from ranks alone: `(token bytes, rank)`,
    /// the 256 single bytes among them, bytes and ranks distinct. No
    /// pre-tokenizer, no specials (for [`BpeModel::token_parts`]).
    pub fn from_ranks(ranks: &[(&[u8], u32)]) -> Result<Self> {
        Self::from_ranks_limited(ranks, ranks.len())
    }

    /// [`BpeModel::from_ranks`] with ids bounded by [`id_limit`]`(entries)`.
    fn from_ranks_limited(ranks: &[(&[u8], u32)], entries: usize) -> Result<Self> {
        let (mut max_id, mut total) = (0u32, 0usize);
        for (t, r) in ranks {
            total += t.len();
            if t.is_empty() {
                return Err(Error::Invalid(format!("rank {r} is given to empty bytes")));
            }
            if *r as u64 >= id_limit(entries) {
                return Err(id_too_large(&format!("token {:?}", String::from_utf8_lossy(t)), *r as u64, entries));
            }
            max_id = max_id.max(*r);
        }
        // One arena for all bytes, then the index (no allocation per token).
        // The errors are those of checking each rank in file order, first
        // whether it was given before, then whether its bytes were.
        let mut tokens = Tokens::new(max_id as usize + 1, total);
        let mut twice = None;
        for (k, (t, r)) in ranks.iter().enumerate() {
            if tokens.len_of(*r) != 0 {
                twice = Some(k);
                break;
            }
            tokens.set(*r, t)?;
        }
        let upto = twice.unwrap_or(ranks.len());
        tokens.index(ranks[..upto].iter().map(|&(_, r)| r), |other, r| {
            Err(Error::Invalid(format!("ranks {other} and {r} have the same bytes")))
        })?;
        if let Some(k) = twice {
            return Err(Error::Invalid(format!("rank {} is given twice", ranks[k].1)));
        }
        let mut byte_to_id = [0u32; 256];
        for (b, slot) in byte_to_id.iter_mut().enumerate() {
            *slot = tokens.find(&[b as u8]).ok_or_else(|| Error::Invalid(format!("byte 0x{b:02x} has no rank")))?;
        }
        let ids: Vec<u32> = tokens.iter().map(|(id, _)| id).collect();
        let pair_map = bytes_pair_map(&tokens, &ids)?;
        Ok(BpeModel {
            tokens,
            byte_to_id,
            pair_map,
            pretok: Pretokenizer::Whole,
            specials: Specials::new(vec![])?,
            special_text: FxHashMap::default(),
            vocab_size: max_id as usize + 1,
            rule: MergeRule::Bytes,
            merges: Vec::new(),
            fast: FastCell::default(),
        })
    }

    /// A model with tiktoken's rule from a rank file's `(token bytes, rank)`
    /// (see [`BpeModel::from_ranks`]), the pre-tokenizer and the special
    /// tokens, with the merge of every longer token recovered: tiktoken's
    /// loop on the token's own bytes with only lower ranks must end in two
    /// parts of lower rank, its parents. Ids are bounded by [`id_limit`] of
    /// the ranks and specials together. An error names the first token (by
    /// rank) that breaks a rule; the Python reader words it for the user.
    pub fn from_rank_file(ranks: &[(&[u8], u32)], specials: Vec<(String, u32)>, pretok: Pretokenizer) -> Result<Self> {
        let entries = ranks.len() + specials.len();
        let mut m = BpeModel::from_ranks_limited(ranks, entries)?;
        let specials = Specials::new(specials)?;
        let mut max_id = m.vocab_size as u64 - 1;
        for (s, id) in specials.list() {
            if *id as u64 >= id_limit(entries) {
                return Err(id_too_large(&format!("special token {s:?}"), *id as u64, entries));
            }
            if m.tokens.len_of(*id) != 0 {
                return Err(Error::SpecialToken(format!(
                    "special token {s:?} has id {id}, which a byte or merge already uses"
                )));
            }
            if m.special_text.insert(*id, s.as_bytes().to_vec()).is_some() {
                return Err(Error::SpecialToken(format!("special token id {id} is used twice")));
            }
            max_id = max_id.max(*id as u64);
        }
        m.vocab_size = max_id as usize + 1;
        m.tokens.resize(m.vocab_size);
        m.specials = specials;
        m.pretok = pretok;
        // The encoder's tables with the model (15-25 ms for cl100k/o200k), as
        // tiktoken builds its maps at load, so the first text is not charged;
        // built before the merges are recovered, which they make faster.
        let fast = m.fast();
        // merges in rank order; the tokens are independent, so they are split on the current rayon pool
        let ids: Vec<u32> = m.tokens.iter().filter(|(_, t)| t.len() >= 2).map(|(id, _)| id).collect();
        let found: Vec<Vec<Option<(u32, u32, u32)>>> = ids
            .par_chunks(2048)
            .map(|chunk| {
                let mut v = Vec::with_capacity(chunk.len());
                m.recover_merges(fast, chunk, &mut v);
                v
            })
            .collect();
        let mut merges = Vec::with_capacity(ids.len());
        for (f, id) in found.into_iter().flatten().zip(ids) {
            merges.push(f.ok_or_else(|| {
                Error::Invalid(format!("token of rank {id} cannot be built from two lower-ranked tokens"))
            })?);
        }
        m.merges = merges;
        Ok(m)
    }

    /// The merges `(left, right, new)`, in order (empty for [`BpeModel::from_ranks`]).
    pub fn merges(&self) -> &[(u32, u32, u32)] {
        &self.merges
    }

    /// The id of each single byte.
    pub fn byte_ids(&self) -> &[u32; 256] {
        &self.byte_to_id
    }

    /// The parts tiktoken's merge loop ends with on the bytes of token `id`
    /// alone (never the whole-piece lookup), using only the pair ranks that
    /// `rule` allows. Two parts are the split the token is built from.
    /// O(n log n) in the token's length.
    pub fn token_parts(&self, id: u32, rule: SplitRule, out: &mut Vec<u32>) {
        out.clear();
        let t = self.tokens.bytes_of(id);
        if t.is_empty() {
            return;
        }
        if t.len() == 1 {
            out.push(self.byte_to_id[t[0] as usize]);
            return;
        }
        let allowed = |r: u32| match rule {
            SplitRule::BelowOwnRank => r < id,
            SplitRule::AllButOwn => r != id,
        };
        let rank = |a, b| {
            let r = self.rank(a, b);
            if r != NO_RANK && allowed(r) {
                r
            } else {
                NO_RANK
            }
        };
        if t.len() < LONG_PIECE {
            self.merge_short_with(t, rank, out)
        } else {
            self.merge_long_with(t, rank, out)
        }
    }

    /// The merge of each token `ids[k]` that [`Self::token_parts`] with
    /// [`SplitRule::BelowOwnRank`] recovers (`(left, right, id)`, or None if
    /// it does not end in two parts of lower rank), with the ranks from the
    /// fast tables: the first round's from the dense byte-pair table (256
    /// KiB, cache-resident), the rest from the pair table.
    ///
    /// Performance: a rank file's recovery is a merge loop per token
    /// (200,000 for o200k), and each round of a loop waits for one or two
    /// random reads of the pair table (8 MiB for o200k): one token after the
    /// other, that is a cache miss at a time, most of the load. So `LANES`
    /// tokens are merged side by side: each round finds every lane's
    /// lowest pair and merges it (the loop of [`Self::merge_short_loop`],
    /// step for step), prefetches the slots of the new pairs, and only
    /// then reads them, so the misses of all lanes overlap. Same parts.
    fn recover_merges(&self, fast: &Fast, ids: &[u32], out: &mut Vec<Option<(u32, u32, u32)>>) {
        const LANES: usize = 16;
        let two = |parts: &[u32], id: u32| {
            (parts.len() == 2 && parts[0] < id && parts[1] < id).then(|| (parts[0], parts[1], id))
        };
        let mut scratch = Vec::new();
        let Some(pairs) = &fast.pairs else {
            for &id in ids {
                self.token_parts(id, SplitRule::BelowOwnRank, &mut scratch);
                out.push(two(&scratch, id));
            }
            return;
        };
        let mut lanes = vec![Lane::EMPTY; LANES];
        let mut lane_ids = [0u32; LANES];
        let mut live: Vec<usize> = Vec::with_capacity(LANES);
        for chunk in ids.chunks(LANES) {
            let base = out.len();
            out.resize(base + chunk.len(), None);
            live.clear();
            for (j, &id) in chunk.iter().enumerate() {
                let t = self.tokens.bytes_of(id);
                if !(2..LONG_PIECE).contains(&t.len()) {
                    self.token_parts(id, SplitRule::BelowOwnRank, &mut scratch);
                    out[base + j] = two(&scratch, id);
                    continue;
                }
                // (NO_RANK is above every id: `r < id` also says the pair has a rank)
                lanes[j].start(t, &self.byte_to_id, &fast.byte_pairs, |r| if r < id { r } else { NO_RANK });
                lane_ids[j] = id;
                live.push(j);
            }
            while !live.is_empty() {
                // one round of every live lane: merge its lowest pair, ask for the new pairs' slots
                live.retain(|&j| {
                    if lanes[j].step(pairs) {
                        return true;
                    }
                    out[base + j] = two(lanes[j].ids(), lane_ids[j]);
                    false
                });
                // then read them
                for &j in &live {
                    let id = lane_ids[j];
                    lanes[j].reread(pairs, |r| if r < id { r } else { NO_RANK });
                }
            }
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    pub fn rule(&self) -> MergeRule {
        self.rule
    }

    pub fn pretokenizer(&self) -> &Pretokenizer {
        &self.pretok
    }

    /// Bytes of an id (a special token's text), or None if the id is unused.
    pub fn id_bytes(&self, id: u32) -> Option<&[u8]> {
        let t = self.tokens.bytes_of(id);
        if !t.is_empty() {
            return Some(t);
        }
        self.special_text.get(&id).map(|v| v.as_slice())
    }

    /// Raw byte length of every id; 0 for special and unused ids.
    pub fn token_lengths(&self) -> Vec<i32> {
        let mut v = vec![0i32; self.vocab_size];
        for (i, t) in self.tokens.iter() {
            v[i as usize] = t.len() as i32;
        }
        v
    }

    /// The fast tables, built on first use.
    #[inline]
    fn fast(&self) -> &Fast {
        self.fast.0.get_or_init(|| {
            // in id order (the arena's order, not the index's random one);
            // of two ids with the same bytes the table keeps the first, the smaller
            // tiktoken's rule: seeded with the tokens; another rule: only
            // the pieces met (a piece that is a token may merge otherwise)
            let pieces = PieceTable::new(
                self.tokens.iter().map(|(id, t)| (t, id)),
                self.rule == MergeRule::Bytes,
                Some(&self.byte_to_id),
            );
            let pairs = PairTable::new(self.pair_map.iter().map(|(&p, &z)| ((unpack(p).0, unpack(p).1), z)));
            let ids = self.vocab_size as u64;
            let cache = (ids <= CACHE_ID_LIMIT)
                .then(|| (PieceCache::new(CACHE_SLOTS, ids), LongCache::new(LONG_CACHE_SLOTS, ids)));
            let byte_pairs =
                (0..1usize << 16).map(|ab| self.rank(self.byte_to_id[ab >> 8], self.byte_to_id[ab & 0xFF])).collect();
            Box::new(Fast { pieces, pairs, byte_pairs, cache, spill: SpillCache::default(), seen: Seen::default() })
        })
    }

    /// Bytes held by the encoder's tables (0 before the first encode): the
    /// short-token table, the pair table and the fixed-size piece cache.
    pub fn fast_memory(&self) -> usize {
        self.fast.0.get().map_or(0, |f| {
            f.pieces.as_ref().map_or(0, |p| p.memory())
                + f.pairs.as_ref().map_or(0, |p| p.memory())
                + f.cache.as_ref().map_or(0, |(c, l)| c.memory() + l.memory())
                + f.spill.memory()
                + f.seen.memory()
                + f.byte_pairs.len() * 4
        })
    }

    /// Encode one piece (already split) and append its ids.
    #[inline]
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        self.encode_piece_with(self.fast(), piece, out)
    }

    /// [`Self::encode_piece`] with the tables.
    #[inline(always)]
    fn encode_piece_with(&self, fast: &Fast, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        if !(2..=CACHE_MAX).contains(&n) {
            return self.encode_piece_cold(fast, piece, out);
        }
        self.encode_keyed(fast, piece, &ShortKey::new(piece), out)
    }

    /// A piece of 2..=`CACHE_MAX` bytes and its key: if it has at most
    /// `PIECE_MAX` bytes and is a token, the short-token table has it; any
    /// other piece may be in the cache; what the cache misses is encoded by
    /// the rule (and then cached).
    #[inline(always)]
    fn encode_keyed(&self, fast: &Fast, piece: &[u8], key: &ShortKey, out: &mut Vec<u32>) {
        let n = piece.len();
        if n <= PIECE_MAX {
            if let Some(t) = &fast.pieces {
                if t.get_into(key, out) {
                    return;
                }
            }
        }
        self.encode_cached(fast, piece, key, out)
    }

    /// [`Self::encode_keyed`] once the short-token table has said no (or
    /// has nothing for this length): the caches, then the rule.
    #[inline(always)]
    fn encode_cached(&self, fast: &Fast, piece: &[u8], key: &ShortKey, out: &mut Vec<u32>) {
        let n = piece.len();
        let Some((cache, _)) = &fast.cache else {
            return self.encode_piece_slow(fast, piece, out);
        };
        if self.probe_short(fast, cache, piece, key, out) {
            return;
        }
        let start = out.len();
        if let (true, Some(_)) = (n <= PIECE_MAX, &fast.pieces) {
            // not in the table (under tiktoken's rule the table has every
            // token of these lengths, so this is no token): the merge
            self.merge_short_fast(fast, piece, out);
        } else {
            self.encode_piece_slow(fast, piece, out);
        }
        self.remember(fast, piece, key, &out[start..]);
    }

    /// The ids of a piece of 2..=`CACHE_MAX` bytes (`key` its key) from the
    /// cache, or from the spill cache if the cache marks it as kept there
    /// ([`Self::remember`]); false if neither has it.
    #[inline(always)]
    fn probe_short(&self, fast: &Fast, cache: &PieceCache, piece: &[u8], key: &ShortKey, out: &mut Vec<u32>) -> bool {
        match cache.lookup(key, out) {
            Cached::Ids => true,
            Cached::Elsewhere => fast.spill.get(piece, spill_hash(piece), out),
            Cached::Missing => false,
        }
    }

    /// The ids of a piece of `CACHE_MAX + 1..=SPILL_MAX` bytes (`h` its
    /// spill hash) from the long-piece cache (up to `LONG_CACHE_MAX` bytes;
    /// or the spill cache if it marks the piece as kept there), or from the
    /// spill cache if longer and merged before; false if none has it.
    #[inline(always)]
    fn probe_long(&self, fast: &Fast, long: &LongCache, piece: &[u8], h: u64, out: &mut Vec<u32>) -> bool {
        if piece.len() > LONG_CACHE_MAX {
            // (a piece never merged before is in no cache: no lock taken)
            return fast.seen.has(h) && fast.spill.get(piece, h, out);
        }
        match long.lookup(&LongKey::new(piece), out) {
            Cached::Ids => true,
            Cached::Elsewhere => fast.spill.get(piece, h, out),
            Cached::Missing => false,
        }
    }

    /// Keep the ids of a piece of 2..=`CACHE_MAX` bytes that
    /// [`Self::encode_cached`] merged, if it was merged before (`Seen`;
    /// the first time it is only marked): in the short-piece table while it
    /// has room (pieces of up to `PIECE_MAX` bytes), else in the cache if
    /// they fit an entry, else in the spill cache, with the cache's entry
    /// marking it as kept there.
    ///
    /// Performance: only the pieces with more ids than an entry holds go to
    /// the spill cache (a lock, a hash map). When every piece longer than
    /// an entry holds ids (13 bytes for 32,768 ids) went there as well, the
    /// spill cache's look-ups and insertions were 10% of pretokenizing
    /// web-like text (its identifiers are 13 bytes with their space), most
    /// of them for pieces the 2-way cache had or that were merged once; a
    /// piece pushed out of the 2-way cache is now merged again instead
    /// (perf, 64 MB, 2026-11-28).
    #[inline]
    fn remember(&self, fast: &Fast, piece: &[u8], key: &ShortKey, ids: &[u32]) {
        let Some((cache, _)) = &fast.cache else { return };
        if !fast.seen.mark(key.hash) {
            return;
        }
        if let (true, Some(t)) = (piece.len() <= PIECE_MAX, &fast.pieces) {
            let (lo, hi) = key.short();
            if t.insert(lo, hi, ids) {
                return;
            }
        }
        let pick = piece.as_ptr() as usize >> 4;
        if ids.len() <= cache.most() {
            cache.put(key, ids, pick);
        } else {
            fast.spill.put(piece, spill_hash(piece), ids);
            cache.put_elsewhere(key, pick);
        }
    }

    /// [`Self::encode_cached`] in [`Self::encode_scanned`], for a piece
    /// `bytes[s..e]` of 2..=`CACHE_MAX` bytes the short-piece table does not
    /// have: from the caches if there, else put off (see [`Pending`]) --
    /// nothing is written for it until [`Self::flush`]. A piece that is a
    /// token is written at once (tiktoken's rule). Put-off pieces are merged
    /// when `LANES` different ones wait.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn encode_or_defer(
        &self,
        fast: &Fast,
        pairs: &PairTable,
        bytes: &[u8],
        (s, e): (usize, usize),
        key: &ShortKey,
        pend: &mut Pending,
        out: &mut Vec<u32>,
    ) {
        let Some((cache, _)) = &fast.cache else { return };
        if pend.ask_later {
            // The caches are asked in `flush`, for all the pieces put off at
            // once, their lines asked for here: only a piece merged before
            // (its `Seen` bit set) can be in a cache (`remember`), so `Seen`
            // (512 KiB) is read first, then the cache (8 MiB) if the bit is
            // set. Asked here, one piece at a time, each was a miss waited
            // for: the cache's probe 10% of pretokenizing web-like text, then
            // `Seen`'s 5% when it was asked first (perf, 64 MB, 2026-11-28).
            fast.seen.prefetch(key.hash);
            cache.prefetch(key);
        } else if self.probe_short(fast, cache, &bytes[s..e], key, out) {
            return;
        }
        self.defer(fast, pairs, bytes, (s, e), key.hash, pend, out)
    }

    /// [`Self::encode_or_defer`] for a piece of `CACHE_MAX + 1..LONG_PIECE`
    /// bytes (what [`Self::encode_piece_cold`] merges with the short loop):
    /// the long-piece cache, the spill cache, then put off.
    #[inline(always)]
    fn encode_long_or_defer(
        &self,
        fast: &Fast,
        pairs: &PairTable,
        bytes: &[u8],
        (s, e): (usize, usize),
        pend: &mut Pending,
        out: &mut Vec<u32>,
    ) {
        let Some((_, long)) = &fast.cache else { return };
        let piece = &bytes[s..e];
        let h = spill_hash(piece);
        if pend.ask_later {
            // (the caches are asked in `flush`, as for `encode_or_defer`)
            fast.seen.prefetch(h);
            if piece.len() <= LONG_CACHE_MAX {
                long.prefetch(&LongKey::new(piece));
            }
        } else if self.probe_long(fast, long, piece, h, out) {
            return;
        }
        self.defer(fast, pairs, bytes, (s, e), h, pend, out)
    }

    /// The miss path of [`Self::encode_or_defer`], out of line: `seen` is
    /// the piece's hash in `Seen` (its [`ShortKey`]'s up to `CACHE_MAX`
    /// bytes, else its spill hash).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn defer(
        &self,
        fast: &Fast,
        pairs: &PairTable,
        bytes: &[u8],
        (s, e): (usize, usize),
        seen: u64,
        pend: &mut Pending,
        out: &mut Vec<u32>,
    ) {
        let piece = &bytes[s..e];
        // (asking later, `flush` looks, after the caches)
        if !pend.ask_later {
            if let Some(id) = self.whole_token(piece) {
                out.push(id);
                self.remember_any(fast, piece, seen, &[id]);
                return;
            }
        }
        // an equal piece already waiting shares its lane
        let used = pend.used;
        let same = (0..used).find(|&l| pend.hashes[l] == seen && bytes[pend.heads[l].0..pend.heads[l].1] == *piece);
        let (lane, first) = match same {
            Some(l) => (l, false),
            None => {
                if pend.used == pend.lanes.len() {
                    pend.lanes.reserve_exact(LANES - pend.used);
                    pend.lanes.push(Lane::EMPTY);
                }
                pend.heads[pend.used] = (s, e);
                pend.hashes[pend.used] = seen;
                pend.used += 1;
                (pend.used - 1, true)
            }
        };
        pend.items.push(Deferred { s, e, pos: out.len(), lane, first, seen });
        if pend.used == LANES {
            self.flush(fast, pairs, bytes, pend, out);
        }
    }

    /// A put-off piece that is itself a token, under tiktoken's rule (the
    /// tokens of up to `PIECE_MAX` bytes are all in the short-piece table,
    /// which the piece missed).
    #[inline]
    fn whole_token(&self, piece: &[u8]) -> Option<u32> {
        if piece.len() > PIECE_MAX && self.rule == MergeRule::Bytes {
            self.tokens.find(piece)
        } else {
            None
        }
    }

    /// [`Self::remember`] or [`Self::remember_long`] by the piece's length
    /// (`seen` as in [`Deferred`]: for a piece of more than `CACHE_MAX`
    /// bytes, its spill hash.)
    #[inline]
    fn remember_any(&self, fast: &Fast, piece: &[u8], seen: u64, ids: &[u32]) {
        if piece.len() <= CACHE_MAX {
            self.remember(fast, piece, &ShortKey::new(piece), ids);
        } else {
            self.remember_long(fast, piece, seen, ids);
        }
    }

    /// Merge the pieces put off (side by side, [`Lane`]; asking later, those
    /// no cache has), write their ids in their places in `out` (moving the
    /// ids written after each one along) and remember the merged ones as
    /// [`Self::encode_cached`] does.
    #[inline(never)]
    fn flush(&self, fast: &Fast, pairs: &PairTable, bytes: &[u8], pend: &mut Pending, out: &mut Vec<u32>) {
        if pend.items.is_empty() {
            return;
        }
        let Pending { items, lanes, live, used, found, ask_later, .. } = pend;
        live.clear();
        for d in items.iter().filter(|d| d.first) {
            let piece = &bytes[d.s..d.e];
            if *ask_later {
                found.clear();
                if fast.seen.has(d.seen) && self.cached(fast, piece, d.seen, found) {
                    lanes[d.lane].found(found, true);
                    continue;
                }
                if let Some(id) = self.whole_token(piece) {
                    lanes[d.lane].found(&[id], false);
                    continue;
                }
            }
            lanes[d.lane].start(piece, &self.byte_to_id, &fast.byte_pairs, |r| r);
            live.push(d.lane);
        }
        while !live.is_empty() {
            live.retain(|&l| lanes[l].step(pairs));
            for &l in live.iter() {
                lanes[l].reread(pairs, |r| r);
            }
        }
        // one pass from the end: each put-off piece's ids go in after the ids
        // of every piece before it
        let total: usize = items.iter().map(|d| lanes[d.lane].n).sum();
        let mut end = out.len();
        out.resize(end + total, 0);
        let mut shift = total;
        for d in items.iter().rev() {
            let ids = lanes[d.lane].ids();
            out.copy_within(d.pos..end, d.pos + shift);
            shift -= ids.len();
            out[d.pos + shift..d.pos + shift + ids.len()].copy_from_slice(ids);
            end = d.pos;
        }
        for d in items.iter().filter(|d| d.first && !lanes[d.lane].cached) {
            self.remember_any(fast, &bytes[d.s..d.e], d.seen, lanes[d.lane].ids());
        }
        items.clear();
        *used = 0;
    }

    /// The ids of a piece put off (2..`LONG_PIECE` bytes, `seen` as in
    /// [`Deferred`]) from the cache that keeps it, appended to `out`; false
    /// if no cache has it.
    #[inline(always)]
    fn cached(&self, fast: &Fast, piece: &[u8], seen: u64, out: &mut Vec<u32>) -> bool {
        let Some((cache, long)) = &fast.cache else { return false };
        if piece.len() <= CACHE_MAX {
            self.probe_short(fast, cache, piece, &ShortKey::new(piece), out)
        } else {
            self.probe_long(fast, long, piece, seen, out)
        }
    }

    /// A piece of 1 or more than `CACHE_MAX` bytes: the long-piece cache
    /// (up to `LONG_CACHE_MAX` bytes) or the spill cache (up to
    /// `SPILL_MAX`), then the rule.
    #[inline]
    fn encode_piece_cold(&self, fast: &Fast, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        match &fast.cache {
            Some((_, long)) if n > CACHE_MAX && n <= SPILL_MAX => {
                let h = spill_hash(piece);
                if self.probe_long(fast, long, piece, h, out) {
                    return;
                }
                let start = out.len();
                self.encode_piece_slow(fast, piece, out);
                self.remember_long(fast, piece, h, &out[start..]);
            }
            _ => self.encode_piece_slow(fast, piece, out),
        }
    }

    /// Keep the ids of a piece of `CACHE_MAX + 1..=SPILL_MAX` bytes (`h` its
    /// spill hash), only if it was merged before, as in [`Self::remember`]:
    /// a piece of at most `LONG_CACHE_MAX` bytes in the long-piece cache if
    /// they fit an entry, else in the spill cache with the long-piece
    /// cache's entry marking it as kept there; a longer one in the spill
    /// cache.
    fn remember_long(&self, fast: &Fast, piece: &[u8], h: u64, ids: &[u32]) {
        let Some((_, long)) = &fast.cache else { return };
        if !fast.seen.mark(h) {
            return;
        }
        if piece.len() <= LONG_CACHE_MAX {
            let (key, pick) = (LongKey::new(piece), piece.as_ptr() as usize >> 4);
            if ids.len() <= long.most() {
                return long.put(&key, ids, pick);
            }
            long.put_elsewhere(&key, pick);
        }
        fast.spill.put(piece, h, ids);
    }

    /// The rule itself, without the cache: whole-piece lookup (tiktoken's
    /// rule), then the merge loop.
    #[inline]
    fn encode_piece_slow(&self, fast: &Fast, piece: &[u8], out: &mut Vec<u32>) {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_to_id[piece[0] as usize]),
            n => {
                if self.rule == MergeRule::Bytes {
                    if let Some(id) = self.tokens.find(piece) {
                        out.push(id);
                        return;
                    }
                }
                if n < LONG_PIECE {
                    self.merge_short_fast(fast, piece, out)
                } else if let Some(p) = &fast.pairs {
                    // the pair table: one cache line a lookup, where the hash map's probe reads two
                    self.merge_long_with(piece, |a, b| p.get(a, b, NO_RANK), out)
                } else {
                    self.merge_long(piece, out)
                }
            }
        }
    }

    /// [`Self::merge_short`] with the fast tables: the ranks of the first
    /// round (pairs of single bytes) from the dense byte-pair table, the
    /// rest from the pair table when there is one. Same loop, same ids.
    #[inline(always)]
    fn merge_short_fast(&self, fast: &Fast, piece: &[u8], out: &mut Vec<u32>) {
        let Some(p) = &fast.pairs else { return self.merge_short(piece, out) };
        self.merge_short_loop(
            piece,
            |i| fast.byte_pairs[(piece[i] as usize) << 8 | piece[i + 1] as usize],
            |a, b| p.get(a, b, NO_RANK),
            |a, b| p.prefetch(a, b),
            out,
        )
    }

    #[inline(always)]
    fn rank(&self, a: u32, b: u32) -> u32 {
        *self.pair_map.get(&pack(a, b)).unwrap_or(&NO_RANK)
    }

    fn merge_short(&self, piece: &[u8], out: &mut Vec<u32>) {
        self.merge_short_with(piece, |a, b| self.rank(a, b), out)
    }

    /// [`Self::merge_short`] with the rank of a pair given by `rank`.
    #[inline(always)]
    fn merge_short_with(&self, piece: &[u8], rank: impl Fn(u32, u32) -> u32, out: &mut Vec<u32>) {
        let first = |i: usize| rank(self.byte_to_id[piece[i] as usize], self.byte_to_id[piece[i + 1] as usize]);
        self.merge_short_loop(piece, first, &rank, |_, _| {}, out)
    }

    /// The merge loop of short pieces: `first(i)` is the rank of the pair of
    /// bytes `i, i + 1` (the first round), `rank` that of any later pair;
    /// `ahead(a, b)` starts loading what `rank(a, b)` will read.
    ///
    /// Performance: on text not seen before, each merge waits for the one or
    /// two pair-table reads of the merge before it (4 MiB for o200k, past the
    /// L2 cache), one miss after another. So whenever a pair gets a rank, the
    /// two pairs its merge would make with its neighbours are prefetched:
    /// the first round starts the misses of every merge that may come first,
    /// side by side, and each later merge those of the pairs it made. A
    /// prefetch changes no result; one whose pair never forms is wasted.
    #[inline(always)]
    fn merge_short_loop(
        &self,
        piece: &[u8],
        first: impl Fn(usize) -> u32,
        rank: impl Fn(u32, u32) -> u32,
        ahead: impl Fn(u32, u32),
        out: &mut Vec<u32>,
    ) {
        let mut parts: [u32; MERGE_ROOM] = [0; MERGE_ROOM];
        let mut ranks: [u32; MERGE_ROOM] = [NO_RANK; MERGE_ROOM];
        let mut n = piece.len();
        for (i, &b) in piece.iter().enumerate() {
            parts[i] = self.byte_to_id[b as usize];
        }
        for (i, r) in ranks[..n - 1].iter_mut().enumerate() {
            *r = first(i);
        }
        // for each ranked pair in `is`, the pairs its merge would make with its neighbours
        let fan_out = |parts: &[u32], ranks: &[u32], n: usize, is: std::ops::Range<usize>| {
            for i in is {
                let r = ranks[i];
                if r != NO_RANK {
                    if i > 0 {
                        ahead(parts[i - 1], r);
                    }
                    if i + 2 < n {
                        ahead(r, parts[i + 2]);
                    }
                }
            }
        };
        fan_out(&parts, &ranks, n, 0..n - 1);
        loop {
            let (best, at) = lowest(&ranks[..n - 1]);
            if best == NO_RANK {
                break;
            }
            parts[at] = best;
            close_gap(&mut parts, &mut ranks, at, n);
            n -= 1;
            if at + 1 < n {
                ranks[at] = rank(parts[at], parts[at + 1]);
            }
            if at > 0 {
                ranks[at - 1] = rank(parts[at - 1], parts[at]);
            }
            if n == 1 {
                break;
            }
            // the two new pairs
            fan_out(&parts, &ranks, n, at.saturating_sub(1)..(at + 1).min(n - 1));
        }
        out.extend_from_slice(&parts[..n]);
    }

    /// Long pieces: windows stitched where the result provably decomposes,
    /// O(n log n) at worst (see `long.rs`).
    fn merge_long(&self, piece: &[u8], out: &mut Vec<u32>) {
        self.merge_long_with(piece, |a, b| self.rank(a, b), out)
    }

    /// [`Self::merge_long`] with the rank of a pair given by `rank`.
    #[inline(always)]
    fn merge_long_with(&self, piece: &[u8], rank: impl Fn(u32, u32) -> u32, out: &mut Vec<u32>) {
        super::long::merge_long(piece, &self.byte_to_id, &self.tokens, rank, out)
    }

    /// Encode text; special-token text is ordinary text.
    pub fn encode_ordinary_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let fast = self.fast();
        if self.encode_scanned(fast, text, out) {
            return Ok(());
        }
        // a pattern without a scanner: the regex engine's time dominates
        self.pretok.split(text, |p| self.encode_piece_with(fast, p.as_bytes(), out))
    }

    /// [`Self::encode_ordinary_into`] when the pattern has a scanner and the
    /// model has the cache (ids below 2^24: every real vocabulary); false,
    /// with nothing done, otherwise. The scanner fills the ends of a chunk of
    /// pieces in a loop of its own; then the key of every piece of the chunk
    /// is computed and the line it will be looked up in is asked for; then
    /// the pieces are looked up in order, each run of pieces the table has
    /// in a tight loop that writes their ids through a cursor kept in a
    /// register. (The loop that did both, 16 pieces apart, with a 128-bit
    /// mask shift per key and 20-bit packed ids, kept its state on the
    /// stack: 127 instructions a piece on warm English against 84 now, by
    /// callgrind, and 15-22% slower.) A piece of up to `LONG_PIECE - 1`
    /// bytes that no table or cache has is put off ([`Self::defer`]) and
    /// written, in its place, when `LANES` wait or the chunk ends; in a text
    /// of [`ASK_LATER_TEXT`] bytes or more, every piece the short-piece table
    /// misses is put off, the caches asked in [`Self::flush`], and the chunk's
    /// end does not flush ([`Pending::ask_later`]).
    #[inline(never)]
    fn encode_scanned(&self, fast: &Fast, text: &str, out: &mut Vec<u32>) -> bool {
        let Some((cache, _)) = &fast.cache else { return false };
        let Some(table) = fast.pieces.as_ref() else { return self.encode_scanned_cached(fast, text, out) };
        let Some(pairs) = fast.pairs.as_ref() else { return self.encode_scanned_cached(fast, text, out) };
        let view = table.view();
        let bytes = text.as_bytes();
        // per piece of 1..=PIECE_MAX bytes: the table's key words and line;
        // (0, 0, 0) for a longer piece (no key of the table has `hi` 0)
        let mut keys = [(0u64, 0u64, 0usize); SCAN_CHUNK];
        let mut pend = Pending { ask_later: bytes.len() >= ASK_LATER_TEXT, ..Pending::default() };
        self.pretok.scan_chunks(text, |bounds| {
            let k = bounds.len() - 1;
            let keys = &mut keys[..k];
            // every piece's key and line first, each line asked for as soon
            // as it is known: the lookups below find them arrived
            for (i, key) in keys.iter_mut().enumerate() {
                let (s, n) = (bounds[i], bounds[i + 1] - bounds[i]);
                // the table has every one-byte piece too: no branch on the length
                if n <= PIECE_MAX {
                    let (lo, hi) = ShortKey::short_in(bytes, s, n);
                    let line = view.line(PieceTable::hash(lo, hi));
                    *key = (lo, hi, line);
                    view.prefetch(line);
                } else {
                    *key = (0, 0, 0);
                    if n <= CACHE_MAX {
                        cache.prefetch(&ShortKey::new_in(bytes, s, n));
                    }
                }
            }
            let mut j = 0;
            while j < k {
                // the run of pieces the table has, written through a cursor
                // kept in a register (room for TABLE_IDS ids each)
                out.reserve((k - j) * TABLE_IDS);
                // SAFETY: the reservation leaves TABLE_IDS ids of room for
                // each of the pieces j..k; `len` counts the ids written
                unsafe {
                    let base = out.as_mut_ptr();
                    let mut len = out.len();
                    while let Some(&(lo, hi, line)) = keys.get(j) {
                        if hi == 0 {
                            break;
                        }
                        let Some(v) = view.lookup(lo, hi, line) else { break };
                        len += PieceTable::write(v, base.add(len));
                        j += 1;
                    }
                    out.set_len(len);
                }
                if j == k {
                    break;
                }
                let (s, e) = (bounds[j], bounds[j + 1]);
                let n = e - s;
                if n == 1 {
                    // (a byte whose id does not fit the table)
                    out.push(self.byte_to_id[bytes[s] as usize]);
                } else if n <= CACHE_MAX {
                    let key = ShortKey::new_in(bytes, s, n);
                    self.encode_or_defer(fast, pairs, bytes, (s, e), &key, &mut pend, out);
                } else if n < LONG_PIECE {
                    self.encode_long_or_defer(fast, pairs, bytes, (s, e), &mut pend, out);
                } else {
                    self.encode_piece_cold(fast, &bytes[s..e], out)
                }
                j += 1;
            }
            if !pend.ask_later {
                self.flush(fast, pairs, bytes, &mut pend, out);
            }
        }) && {
            // Asking later, the put-off pieces are merged when LANES
            // different ones wait or the text ends, not at the end of each
            // chunk of pieces: on web-like text about one piece in twenty is
            // put off, so a chunk filled a third of the lanes, and the lanes'
            // pair-table lookups overlapped that much less.
            self.flush(fast, pairs, bytes, &mut pend, out);
            true
        }
    }

    /// [`Self::encode_scanned`] for a model without a piece table (an id of
    /// 2^24 or more) or without a pair table (an id of 2^21 - 1 or more):
    /// the cache only.
    #[inline(never)]
    fn encode_scanned_cached(&self, fast: &Fast, text: &str, out: &mut Vec<u32>) -> bool {
        const AHEAD: usize = 16;
        let Some((cache, _)) = &fast.cache else { return false };
        let bytes = text.as_bytes();
        self.pretok.scan_chunks(text, |bounds| {
            let k = bounds.len() - 1;
            for i in 0..k + AHEAD {
                if i < k {
                    let (s, n) = (bounds[i], bounds[i + 1] - bounds[i]);
                    if (2..=CACHE_MAX).contains(&n) {
                        cache.prefetch(&ShortKey::new_in(bytes, s, n))
                    }
                }
                if i >= AHEAD {
                    let j = i - AHEAD;
                    let (s, e) = (bounds[j], bounds[j + 1]);
                    let n = e - s;
                    if n == 1 {
                        out.push(self.byte_to_id[bytes[s] as usize]);
                    } else if n <= CACHE_MAX {
                        self.encode_cached(fast, &bytes[s..e], &ShortKey::new_in(bytes, s, n), out)
                    } else {
                        self.encode_piece_cold(fast, &bytes[s..e], out)
                    }
                }
            }
        })
    }
}

// encode_ordinary, encode_with_specials, find_special, decode_bytes and the
// batches: the encoder seam's default methods (crate::encoder), over the above.
crate::encoder::impl_encoder!(BpeModel);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::train::{train_texts, TieBreak};
    use crate::encoder::{check_encoder, chunk_bounds, chunk_target};
    use crate::pretok::GPT4_PATTERN;
    use proptest::prelude::*;

    #[test]
    fn meets_the_encoder_seam() {
        let merges = [(104, 101, 256), (108, 108, 257), (256, 257, 258)];
        let bpe = BpeModel::new(&ident(), &merges, vec![("<|x|>".into(), 259)], Pretokenizer::Whole, MergeRule::Pairs)
            .unwrap();
        check_encoder(&bpe, "<|x|>", 259);
    }

    /// Many chunks on two threads (the parallel copy), one chunk on one
    /// thread (no copy), empty texts and an empty batch: all equal one by one.
    #[test]
    fn flat_batches_on_one_and_two_threads() {
        let merges = [(104, 101, 256), (108, 108, 257), (256, 257, 258)];
        let bpe = BpeModel::new(&ident(), &merges, vec![], Pretokenizer::Whole, MergeRule::Pairs).unwrap();
        let texts: Vec<String> =
            (0..3000).map(|i| if i % 7 == 0 { String::new() } else { "hello ".repeat(i % 50) }).collect();
        let one: Vec<Vec<u32>> = texts.iter().map(|t| bpe.encode_ordinary(t).unwrap()).collect();
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let (flat, offsets) = pool.install(|| bpe.encode_batch_flat(&texts, false, None)).unwrap();
            assert_eq!(offsets.len(), texts.len() + 1);
            assert_eq!(offsets[0], 0);
            assert_eq!(*offsets.last().unwrap() as usize, flat.len());
            for (i, ids) in one.iter().enumerate() {
                assert_eq!(&flat[offsets[i] as usize..offsets[i + 1] as usize], &ids[..]);
            }
            let (flat, offsets) = pool.install(|| bpe.encode_batch_flat::<&str>(&[], false, None)).unwrap();
            assert!(flat.is_empty());
            assert_eq!(offsets, vec![0]);
        }
        assert!(chunk_bounds(&texts, chunk_target(300_000, 2)).len() > 3);
    }

    fn ident() -> [u32; 256] {
        let mut b = [0u32; 256];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u32;
        }
        b
    }

    /// tiktoken's rule, written the slow obvious way.
    fn slow(model: &BpeModel, piece: &[u8]) -> Vec<u32> {
        let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
        if model.rule == MergeRule::Bytes {
            if let Some(id) = model.tokens.find(piece) {
                return vec![id];
            }
        }
        let id_of = |b: &[u8]| model.tokens.find(b);
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..parts.len().saturating_sub(1) {
                let mut c = parts[i].clone();
                c.extend_from_slice(&parts[i + 1]);
                if let Some(r) = id_of(&c) {
                    if best.is_none_or(|(br, _)| r < br) {
                        best = Some((r, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            let right = parts.remove(i + 1);
            parts[i].extend_from_slice(&right);
        }
        parts.iter().map(|p| id_of(p).unwrap()).collect()
    }

    fn model(texts: &[&str], n: usize) -> BpeModel {
        let m = train_texts(texts, Pretokenizer::Whole, &ident(), 256, n, TieBreak::PairIds, 1).unwrap();
        BpeModel::new(&ident(), &m, vec![], Pretokenizer::new(Some(GPT4_PATTERN)).unwrap(), MergeRule::Bytes).unwrap()
    }

    #[test]
    fn long_and_short_agree() {
        let m = model(&["aaaaaaaaaaaaaaaa abababab hello hello world"], 30);
        for len in [1usize, 2, 3, 7, 95, 96, 97, 500, 1001] {
            let a = "a".repeat(len);
            let mut s = vec![];
            m.merge_short(&a.as_bytes()[..len.min(LONG_PIECE - 1)], &mut s);
            let mut o = vec![];
            m.encode_piece(a.as_bytes(), &mut o);
            assert_eq!(o, slow(&m, a.as_bytes()), "len {len}");
            assert_eq!(m.decode_bytes(&o).unwrap(), a.as_bytes());
        }
    }

    #[test]
    fn specials() {
        let ms = train_texts(&["hello world"], Pretokenizer::Whole, &ident(), 256, 5, TieBreak::PairIds, 1).unwrap();
        let m = BpeModel::new(
            &ident(),
            &ms,
            vec![("<|bos|>".into(), 300), ("<|end|>".into(), 301)],
            Pretokenizer::new(Some(GPT4_PATTERN)).unwrap(),
            MergeRule::Bytes,
        )
        .unwrap();
        let t = "hi<|bos|>there<|end|>";
        let ord = m.encode_ordinary(t).unwrap();
        assert!(!ord.contains(&300));
        let sp = m.encode_with_specials(t, None).unwrap();
        assert!(sp.contains(&300) && sp.contains(&301));
        let only = m.encode_with_specials(t, Some(&[301])).unwrap();
        assert!(!only.contains(&300) && only.contains(&301));
        assert_eq!(m.decode_bytes(&sp).unwrap(), t.as_bytes());
        assert_eq!(m.find_special(t), Some(("<|bos|>".into(), 2)));
        assert_eq!(m.vocab_size(), 302);
        assert!(m.decode_bytes(&[999]).is_err());
    }

    /// Arbitrary tiktoken-style ranks: merges whose ids do not follow the
    /// order they were built in, so merging can create a pair of lower rank.
    fn scrambled(ops: &[(usize, usize)], ranks: &[u32]) -> BpeModel {
        let mut known: Vec<u32> = b"abc".iter().map(|&b| b as u32).collect();
        let mut merges = vec![];
        for (k, &(x, y)) in ops.iter().enumerate() {
            let a = known[x % known.len()];
            let b = known[y % known.len()];
            let z = 1000 + ranks[k];
            merges.push((a, b, z));
            known.push(z);
        }
        BpeModel::new(&ident(), &merges, vec![], Pretokenizer::Whole, MergeRule::Bytes).unwrap()
    }

    #[test]
    fn ids_far_beyond_the_entries_are_refused_not_allocated() {
        let pt = || Pretokenizer::Whole;
        let big = [u32::MAX, u32::MAX - 1, 20_000_000, 256 + 1 + 1024];
        for id in big {
            // a byte id
            let mut b = ident();
            b[7] = id;
            let e = BpeModel::new(&b, &[], vec![], pt(), MergeRule::Bytes).err().expect("refused");
            assert!(e.to_string().contains(&format!("byte 7 has id {id}, too large")), "{e}");
            // a merge id
            let e = BpeModel::new(&ident(), &[(97, 98, id)], vec![], pt(), MergeRule::Pairs).err().expect("refused");
            assert!(e.to_string().contains(&format!("merge 0 has id {id}")), "{e}");
            // a special id
            let e = BpeModel::new(&ident(), &[], vec![("<|x|>".into(), id)], pt(), MergeRule::Bytes)
                .err()
                .expect("refused");
            assert!(e.to_string().contains(&format!("special token \"<|x|>\" has id {id}")), "{e}");
            // a rank
            let mut ranks: Vec<(Vec<u8>, u32)> = (0..256u32).map(|b| (vec![b as u8], b)).collect();
            ranks.push((b"ab".to_vec(), id));
            let r: Vec<(&[u8], u32)> = ranks.iter().map(|(t, i)| (&t[..], *i)).collect();
            assert!(BpeModel::from_ranks(&r).is_err());
        }
        // the slack: 257 entries allow ids up to 256 + 1024
        let m = BpeModel::new(&ident(), &[], vec![("<|x|>".into(), 256 + 1024)], pt(), MergeRule::Bytes).unwrap();
        assert_eq!(m.vocab_size(), 256 + 1025);
    }

    /// a, aa, aaaa, ... a^(2^k): each merge doubles the longest token.
    fn doubling(k: u32) -> Vec<(u32, u32, u32)> {
        let mut merges = vec![(97, 97, 256)];
        for i in 1..k {
            merges.push((255 + i, 255 + i, 256 + i));
        }
        merges
    }

    #[test]
    fn a_doubling_chain_of_16_merges_builds_with_linear_work() {
        // The longest token is 2^16 bytes. Testing every cut of every token by
        // hashing its two sides (the old build) hashes ~2^32 bytes here; the
        // tries find each token's only two-token split in O(its length).
        let m = BpeModel::new(&ident(), &doubling(16), vec![], Pretokenizer::Whole, MergeRule::Bytes).unwrap();
        assert_eq!(m.id_bytes(271).unwrap().len(), 1 << 16);
        assert_eq!(m.pair_map.len(), 16);
        assert_eq!(m.rank(271, 271), NO_RANK);
        assert_eq!(m.rank(270, 270), 271);
        let mut out = vec![];
        m.encode_piece(&vec![b'a'; 3 << 15], &mut out);
        assert_eq!(out, vec![271, 270]);
        // and its merges are recovered from the ranks alone
        let ranks: Vec<(&[u8], u32)> = (0..272u32).map(|i| (m.id_bytes(i).unwrap(), i)).collect();
        let r = BpeModel::from_ranks(&ranks).unwrap();
        for (k, &(a, b, z)) in doubling(16).iter().enumerate() {
            for rule in [SplitRule::BelowOwnRank, SplitRule::AllButOwn] {
                r.token_parts(z, rule, &mut out);
                assert_eq!(out, vec![a, b], "merge {k}");
            }
        }
    }

    /// The merges [`BpeModel::token_parts`] recovers from ranks alone, or
    /// None if a token cannot be built from two of lower rank.
    fn merges_by_token_parts(ranks: &[(&[u8], u32)]) -> Option<Vec<(u32, u32, u32)>> {
        let slow = BpeModel::from_ranks(ranks).unwrap();
        let mut parts = vec![];
        let mut ids: Vec<u32> = ranks.iter().filter(|(t, _)| t.len() >= 2).map(|&(_, id)| id).collect();
        ids.sort_unstable();
        ids.iter()
            .map(|&id| {
                slow.token_parts(id, SplitRule::BelowOwnRank, &mut parts);
                (parts.len() == 2 && parts[0] < id && parts[1] < id).then(|| (parts[0], parts[1], id))
            })
            .collect()
    }

    #[test]
    fn rank_file_merges_equal_token_parts() {
        // trained vocabularies (every token buildable) and scrambled ranks (some not)
        let mut models: Vec<BpeModel> =
            (0..12u64).map(|seed| trained(&bytes_of(3000, seed), 300, MergeRule::Bytes)).collect();
        for seed in 0..40u64 {
            let ops: Vec<(usize, usize)> =
                (0..30).map(|k| (bytes_of(2, seed * 31 + k)[0] as usize, k as usize)).collect();
            let mut order: Vec<u32> = (0..30).collect();
            order.rotate_left(seed as usize % 7);
            models.push(scrambled(&ops, &order));
        }
        let (mut good, mut bad) = (0, 0);
        for m in &models {
            let ranks: Vec<(&[u8], u32)> = m.tokens.iter().map(|(id, t)| (t, id)).collect();
            if BpeModel::from_ranks(&ranks).is_err() {
                continue; // two ids with the same bytes
            }
            let want = merges_by_token_parts(&ranks);
            let got = BpeModel::from_rank_file(&ranks, vec![], Pretokenizer::Whole);
            match (&want, got) {
                (Some(w), Ok(g)) => {
                    assert_eq!(g.merges(), &w[..]);
                    good += 1;
                }
                (None, Err(_)) => bad += 1,
                (w, g) => panic!("token_parts {:?} but from_rank_file {:?}", w.is_some(), g.is_ok()),
            }
        }
        assert!(good >= 10 && bad >= 5, "{good} {bad}");
    }

    #[test]
    fn one_long_run_token_of_a_trained_model() {
        // what training on a corpus with one run of 100,000 `=` gives
        let text = "=".repeat(100_000);
        let merges =
            train_texts(&[&text, "a b c"], Pretokenizer::Whole, &ident(), 256, 40, TieBreak::PairIds, 1).unwrap();
        let m = BpeModel::new(&ident(), &merges, vec![], Pretokenizer::Whole, MergeRule::Bytes).unwrap();
        let longest = merges.iter().map(|&(_, _, z)| m.id_bytes(z).unwrap().len()).max().unwrap();
        assert!(longest >= 1 << 16, "{longest}");
        let ids = m.encode_ordinary(&text).unwrap();
        assert_eq!(m.decode_bytes(&ids).unwrap(), text.as_bytes());
        let mut out = vec![];
        for &(a, b, z) in &merges {
            m.token_parts(z, SplitRule::BelowOwnRank, &mut out);
            assert_eq!(out, vec![a, b]);
        }
    }

    /// The encoder before the fast tables: whole-piece lookup in the hash
    /// map (tiktoken's rule), the merge loops with the hash map's ranks.
    fn old_path(m: &BpeModel, piece: &[u8]) -> Vec<u32> {
        let mut out = vec![];
        if piece.len() == 1 {
            return vec![m.byte_to_id[piece[0] as usize]];
        }
        if m.rule == MergeRule::Bytes {
            if let Some(id) = m.tokens.find(piece) {
                return vec![id];
            }
        }
        if piece.len() < LONG_PIECE {
            m.merge_short(piece, &mut out)
        } else {
            m.merge_long(piece, &mut out)
        }
        out
    }

    /// Lengths around every limit of the fast path (short-token table,
    /// short cache, long cache, the long-piece merge).
    fn near_limits() -> impl Strategy<Value = usize> {
        prop::sample::select(vec![1, 2, 3, 8, 14, 15, 16, 17, 30, 31, 32, 33, 62, 63, 64, 65, 94, 95, 96, 97, 130])
    }

    /// Bytes that are not UTF-8 on their own, ASCII and a space: trained
    /// tokens that cut characters in half.
    fn bytes_of(len: usize, seed: u64) -> Vec<u8> {
        const ALPHA: &[u8] = b"ab \xC3\xA9\xE4\xB8\xFF\x00";
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ALPHA[(x % ALPHA.len() as u64) as usize]
            })
            .collect()
    }

    fn trained(train: &[u8], n: usize, rule: MergeRule) -> BpeModel {
        let t = latin1(train);
        let m = train_texts(&[&t], Pretokenizer::Whole, &ident(), 256, n, TieBreak::PairIds, 1).unwrap();
        BpeModel::new(&ident(), &m, vec![], Pretokenizer::new(Some(GPT4_PATTERN)).unwrap(), rule).unwrap()
    }

    /// Training takes `str`: bytes are mapped 1:1 onto chars below 256, so
    /// each becomes one or two UTF-8 bytes (tokens that are not UTF-8).
    fn latin1(b: &[u8]) -> String {
        b.iter().map(|&c| c as char).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(120))]
        #[test]
        fn fast_paths_equal_the_old_path(
            seed in any::<u64>(),
            lens in prop::collection::vec(near_limits(), 1..12),
            pairs in any::<bool>(),
        ) {
            let rule = if pairs { MergeRule::Pairs } else { MergeRule::Bytes };
            let m = trained(&bytes_of(600, seed ^ 0x5555), 150, rule);
            for (k, &len) in lens.iter().enumerate() {
                let piece = bytes_of(len, seed.wrapping_add(k as u64));
                let want = old_path(&m, &piece);
                if rule == MergeRule::Bytes {
                    prop_assert_eq!(&want, &slow(&m, &piece));
                }
                // twice: the first fills the cache, the second reads it
                for _ in 0..2 {
                    let mut o = vec![];
                    m.encode_piece(&piece, &mut o);
                    prop_assert_eq!(&o, &want, "len {}", len);
                }
            }
        }

        #[test]
        fn batched_text_equals_piece_by_piece(s in "\\PC{0,300}", pairs in any::<bool>()) {
            let rule = if pairs { MergeRule::Pairs } else { MergeRule::Bytes };
            let m = trained("the quick brown fox jumps over the lazy dog, déjà vu 東京 Привет".as_bytes(), 120, rule);
            let mut want = vec![];
            for p in m.pretok.split_vec(&s).unwrap() {
                want.extend(old_path(&m, p.as_bytes()));
            }
            prop_assert_eq!(&m.encode_ordinary(&s).unwrap(), &want);
            prop_assert_eq!(&m.encode_ordinary(&s).unwrap(), &want);
        }
    }

    /// A word of letters (one piece under the GPT-4 pattern) of about `len`
    /// bytes, from `seed`: ASCII, two- and three-byte letters.
    fn word(len: usize, seed: u64) -> String {
        const LETTERS: [char; 10] = ['a', 'b', 'e', 'x', 'é', 'П', 'р', 'и', '東', '京'];
        let (mut w, mut x) = (String::new(), seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        while w.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.push(LETTERS[(x % 10) as usize]);
        }
        w
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(80))]
        #[test]
        fn put_off_pieces_land_in_their_places(
            words in prop::collection::vec((near_limits(), 0u64..60), 1..400),
            pairs in any::<bool>(),
        ) {
            // many different words a chunk (more than LANES wait at once), the
            // same word again before its merge (one lane), known words between
            // them, lengths around every limit; a new model: nothing cached
            let rule = if pairs { MergeRule::Pairs } else { MergeRule::Bytes };
            let m = trained("the quick brown fox, déjà vu 東京 Привет abe xab éé".as_bytes(), 150, rule);
            let words: Vec<String> = words.iter().map(|&(len, seed)| word(len, seed)).collect();
            let want_of = |text: &str| -> Vec<u32> {
                m.pretok.split_vec(text).unwrap().iter().flat_map(|p| old_path(&m, p.as_bytes())).collect()
            };
            // short texts (below ASK_LATER_TEXT: the caches asked at once)
            // and the whole text (mostly above it: asked in `flush`), each
            // kind first on a model of its own (a clone starts with no
            // tables); the second time a piece is merged again and kept, the
            // third time it is found in the caches
            let short: Vec<String> = words.chunks(3).map(|c| c.join(" the ")).collect();
            let text = words.join(" the ");
            let m2 = m.clone();
            for _ in 0..3 {
                prop_assert_eq!(&m.encode_ordinary(&text).unwrap(), &want_of(&text));
                for t in &short {
                    prop_assert_eq!(&m.encode_ordinary(t).unwrap(), &want_of(t));
                    prop_assert_eq!(&m2.encode_ordinary(t).unwrap(), &want_of(t));
                }
                prop_assert_eq!(&m2.encode_ordinary(&text).unwrap(), &want_of(&text));
            }
        }
    }

    /// Pieces with more ids than an entry of their cache holds: kept in the
    /// spill cache from their second merge, their cache entry marking them
    /// so, and found there; in short texts (caches asked at once) and long
    /// ones (asked in `flush`), each on a model of its own.
    #[test]
    fn pieces_with_more_ids_than_an_entry_are_found_in_the_spill_cache() {
        // letters no merge uses: one id a byte; 266 ids are 9 bits, so an
        // entry holds 21 ids (short pieces) or 49 (long ones)
        let p31 = "zqxjkvbpg".repeat(4)[..31].to_string();
        let p63 = "zqxjkvbpg".repeat(7)[..63].to_string();
        // (a newline is a piece of its own: "." or " " would lead the next piece)
        let one = format!("{p31}\n{p63}\n");
        for text in [one.clone(), one.repeat(1024 / one.len() + 1)] {
            let m = model(&["hello hello world"], 10);
            let want: Vec<u32> = text.bytes().map(u32::from).collect();
            for _ in 0..3 {
                assert_eq!(m.encode_ordinary(&text).unwrap(), want);
            }
            let f = m.fast();
            let (cache, long) = f.cache.as_ref().unwrap();
            assert_eq!((cache.most(), long.most()), (21, 49));
            let mut out = vec![];
            assert_eq!(cache.lookup(&ShortKey::new(p31.as_bytes()), &mut out), Cached::Elsewhere);
            assert_eq!(long.lookup(&LongKey::new(p63.as_bytes()), &mut out), Cached::Elsewhere);
            for p in [&p31, &p63] {
                out.clear();
                assert!(f.spill.get(p.as_bytes(), spill_hash(p.as_bytes()), &mut out));
                assert_eq!(out, p.bytes().map(u32::from).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_piece_of_every_length_up_to_the_long_merge() {
        // tokens of every length from 1 to 70 ("a" * k), and pieces of every
        // length to 130: whole tokens, near tokens, long merges
        let mut merges = vec![];
        let mut prev = 97u32;
        for k in 2..=70u32 {
            merges.push((prev, 97, 254 + k));
            prev = 254 + k;
        }
        for rule in [MergeRule::Bytes, MergeRule::Pairs] {
            let m = BpeModel::new(&ident(), &merges, vec![], Pretokenizer::Whole, rule).unwrap();
            for len in 1..=130 {
                let mut piece = vec![b'a'; len];
                for tail in [None, Some(b'b')] {
                    if let Some(t) = tail {
                        piece.push(t);
                    }
                    let want = old_path(&m, &piece);
                    for _ in 0..2 {
                        let mut o = vec![];
                        m.encode_piece(&piece, &mut o);
                        assert_eq!(o, want, "{rule:?} len {}", piece.len());
                    }
                }
            }
            assert!(m.fast_memory() > 0);
            // the same pieces through the scanner, one a line: in one text of
            // 1 KB or more (the caches and tokens asked in `flush`) and each
            // line alone (asked at once), three times each (merged, kept, found)
            let pt = Pretokenizer::new(Some(GPT4_PATTERN)).unwrap();
            let m = BpeModel::new(&ident(), &merges, vec![], pt, rule).unwrap();
            let lines: Vec<String> = (1..=100).flat_map(|k| ["a".repeat(k) + "\n", "a".repeat(k) + "b\n"]).collect();
            let text = lines.concat();
            assert!(text.len() >= ASK_LATER_TEXT && lines.iter().all(|l| l.len() < ASK_LATER_TEXT));
            let want_of = |t: &str| -> Vec<u32> {
                m.pretok.split_vec(t).unwrap().iter().flat_map(|p| old_path(&m, p.as_bytes())).collect()
            };
            for _ in 0..3 {
                assert_eq!(m.encode_ordinary(&text).unwrap(), want_of(&text), "{rule:?}");
                for l in &lines {
                    assert_eq!(m.encode_ordinary(l).unwrap(), want_of(l), "{rule:?} {l:?}");
                }
            }
        }
    }

    #[test]
    fn threads_share_the_cache_and_agree() {
        use rayon::prelude::*;
        let m = trained(&bytes_of(2000, 7), 300, MergeRule::Bytes);
        let pieces: Vec<Vec<u8>> = (0..3000u64).map(|k| bytes_of(2 + (k % 60) as usize, k % 400)).collect();
        let want: Vec<Vec<u32>> = pieces.iter().map(|p| old_path(&m, p)).collect();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
        for _ in 0..3 {
            let got: Vec<Vec<u32>> = pool.install(|| {
                pieces
                    .par_iter()
                    .map(|p| {
                        let mut o = vec![];
                        m.encode_piece(p, &mut o);
                        o
                    })
                    .collect()
            });
            assert_eq!(got, want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn long_pieces_with_scrambled_ranks(
            ops in prop::collection::vec((0usize..50, 0usize..50), 1..30),
            seed in any::<u64>(),
            piece in "[abc]{96,400}",
        ) {
            // a permutation of 0..ops.len() from the seed
            let mut ranks: Vec<u32> = (0..ops.len() as u32).collect();
            let mut x = seed | 1;
            for i in (1..ranks.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                ranks.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let m = scrambled(&ops, &ranks);
            let mut o = vec![];
            m.encode_piece(piece.as_bytes(), &mut o);
            prop_assert_eq!(&o, &slow(&m, piece.as_bytes()));
        }

        #[test]
        fn piece_matches_slow(train in "[abc ]{10,200}", piece in "[abcd]{1,300}") {
            let m = model(&[&train], 40);
            let mut o = vec![];
            m.encode_piece(piece.as_bytes(), &mut o);
            prop_assert_eq!(&o, &slow(&m, piece.as_bytes()));
            prop_assert_eq!(m.decode_bytes(&o).unwrap(), piece.as_bytes().to_vec());
        }
        #[test]
        fn roundtrip_any(s in "\\PC{0,200}") {
            let m = model(&["the quick brown fox jumps over the lazy dog"], 30);
            let ids = m.encode_ordinary(&s).unwrap();
            prop_assert_eq!(m.decode_bytes(&ids).unwrap(), s.as_bytes().to_vec());
        }
    }
}
