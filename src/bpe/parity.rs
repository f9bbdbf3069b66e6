//! Parity-aware BPE (Foroutan et al. 2025, arXiv 2508.04796): the state the
//! incremental trainer (`super::train`) keeps to pick each merge for the
//! language that is worst compressed now.
//!
//! The rule. Languages `0..L` each have training text and development
//! ("dev") text. After the first `global_merges` merges (picked as plain BPE
//! picks them, by the pair count over all languages: the paper's hybrid
//! variant; 0 by default), every merge is chosen in two steps:
//!
//! 1. the worst language: the one whose dev text costs the most tokens per
//!    unit under the merges so far, `tokens_l / norm_l` largest, where the
//!    unit is the whole dev text (`Measure::Tokens`: dev sets that are parallel,
//!    the same content in every language, as in the paper), its UTF-8 bytes
//!    (`Measure::Bytes`) or its characters (`Measure::Chars`); ties go to the
//!    lower language index (the caller sorts languages by name);
//! 2. the pair with the largest count in *that language's training text*
//!    (the paper's language-specific pair counts), ties broken as plain
//!    training breaks them (`TieBreak`).
//!
//! The moving-window variant (the paper's second; off unless `window > 0`):
//! a language picked for more than `alpha / L` of the last `window` parity
//! merges (counted over `window`, however many have run) is passed over, and
//! the next worst language that is not asked; if every language is over
//! (possible only with `alpha < 1`), the worst is.
//!
//! The tolerance variant (tokenforge's; off unless `tolerance > 0`): while
//! every language not exhausted costs at most `1 + tolerance` times the
//! cheapest one, the merge is global (the trainer's plain pick).
//!
//! The shared-pair variant (tokenforge's; off unless `shared >= 1`): step 2
//! takes, among the worst language's pairs counting at least `1 / shared` of
//! its top pair's count, the one with the largest count over all languages
//! (a pair the others share helps them too), the first in the language's
//! order on a tie. The candidates are not scanned: per language, its pairs
//! sit in buckets by their count in it, each bucket a lazy heap by global
//! count ([`Bands`]), so a pick peeks about `32 log2(shared) + 1` buckets
//! whatever the number of candidates ([`Parity::shared_pick`]).
//!
//! A language none of whose pairs reaches `min_frequency` is exhausted: it is
//! passed over from then on (its pair counts can only fall) and the next worst
//! language is asked; training stops when every language is exhausted. (The
//! paper's script stops at the first exhausted language instead.) With one
//! language the rule is plain BPE: the same merges.
//!
//! How it runs on the arena trainer. The arena holds each language's pieces
//! as one segment (`seg_start`; a piece in two languages is laid out twice):
//! every piece of its training text or its dev text, once, with two counts,
//! its training count and its dev count (each below 2^30 in the two count
//! slots; a piece counted more is laid out as several copies that sum to its
//! counts). The language of an occurrence is a binary search of its position.
//! An occurrence weighs its training count (0 for a piece only in dev text)
//! and, when merged, lowers its language's dev token count by its dev count,
//! so applying a merge to the dev text costs nothing beyond the training
//! text's occurrences, plus those of pieces only in dev text. (Dev text that
//! is part of the training text, as `tokenforge compare`'s near-parallel dev
//! sets are, adds no occurrence at all; laid out apart, it doubled the merge
//! work.) Every live pair has a row of per-language counts (its count in
//! each language's training text), numbered by the pair's slot in the
//! trainer's pair index ([`Slots`]), and per language a lazy-refresh heap
//! orders that language's pairs (the same heap as plain training). A merge's
//! walk sums what each existing pair loses per language beside the global
//! losses, by the other id (as plain training sums the global ones), and each
//! new pair's gains per language by its place in the walk's list, so a merge
//! reads and writes a pair's row once (a row is found with the pair's entry in
//! the index, which the global count needs anyway), not a hash map per
//! occurrence. (The per-language hash maps this replaces cost a probe per
//! occurrence and per language a pick looked at: the 32,768-id shared-pair
//! training spent a third of its merge time in them.) Memory: the plain
//! trainer's, plus the pieces only in dev text, plus `8 L` bytes per pair
//! (its row: at 10 languages about what the maps took, a pair being in three
//! or four of them) and up to two heap entries per (pair, language) with a
//! count above zero (and with the shared-pair variant one more entry per
//! (pair, language): [`Bands`]).
//!
//! Not handled: the paper's target-ratio variant (compression measured on
//! training text against given ratios);
//! weighting languages; a language with no training or no dev text (refused).

use std::collections::VecDeque;

use super::heap::Heap;
use super::train::prefetch;
use crate::error::{Error, Result};

/// A merge picked by the global (plain) rule, in [`Parity::chosen`].
pub const GLOBAL: u32 = u32::MAX;

/// Which rule picks the merges after the global ones (module notes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// The paper's: serve the worst language (with the tolerance variant
    /// measured against the cheapest language).
    Foroutan,
    /// Level up: a global merge while every language not exhausted costs at
    /// most `1 + tolerance` times the reference language's; else serve the
    /// worst. The global merges do not wait for languages cheaper than the
    /// reference to be pulled up to it.
    LevelUp { reference: usize },
    /// Excess-weighted counts: among the global top pair and the top pair of
    /// every language dearer than the reference, the one with the largest
    /// `global count + gain · Σ_l excess_l · count_l`, where `excess_l` is
    /// language `l`'s dev cost over the reference's, minus 1 (0 at or below it).
    Excess { reference: usize, gain: f64 },
    /// Group: the language as level up picks it; the pair, among the worst
    /// language's first [`GROUP_CANDIDATES`] pairs (its order) counting at
    /// least `1 / shared` of its top pair's count, the one with the largest
    /// `sum_l w_l count_l`, `w_l = 1 + gain` for a language dearer than the
    /// reference, 1 otherwise (a pair that serves the other dear languages too).
    Group { reference: usize, gain: f64 },
    /// Keep: level up, and a language cheaper than the reference keeps its
    /// premium. When the parity phase starts (after the global merges), each
    /// language's floor is `min(1, its premium then)` (premium: its dev cost
    /// over the reference's, f64 as [`Parity::ratio`]); from then on its
    /// excess is `premium / floor`. A merge is global while every language
    /// not exhausted has an excess of at most `1 + tolerance`; else the
    /// language with the largest excess is served (the lower index on a tie;
    /// the window and exhaustion as for the worst language). A language
    /// cheaper than the reference is served once its premium rises above where
    /// it started, instead of only when it is the dearest (never, for it).
    Keep { reference: usize },
    /// Discount: the language as level up picks it; the pair by the
    /// shared-pair variant (`shared >= 1`), its global count discounted by the
    /// reference language's: among the worst language's band, the largest
    /// `DISCOUNT_ONE · global − d · count_reference` with `d = round(gain ·
    /// DISCOUNT_ONE)`, `gain` in [0, 1] (0: the shared-pair variant's pick; 1:
    /// the count over every language but the reference). A merge that also
    /// shortens the reference raises every premium; this weighs that down.
    Discount { reference: usize, gain: f64 },
    /// Lift: the language as level up picks it; the pair by the shared-pair
    /// variant (`shared >= 1`), its global count lifted by the served
    /// language's own: among the worst language's band, the largest
    /// `DISCOUNT_ONE · global + e · count_served` with `e = round(gain ·
    /// DISCOUNT_ONE)`, `gain` in [0, [`LIFT_MAX`]] (0: the shared-pair
    /// variant's pick). A hard band alone weighs a pair the served language
    /// barely uses like its best one; this trades the two counts linearly,
    /// so a wide band can be given without picking pairs that do little for
    /// the language served (more merges spent on it). With `dev` (the rule
    /// "devlift"), the global count is the pair's count in the *dev* text of
    /// every language instead of the training text: the global loss as the
    /// dev text measures it (the training text may hold text of other kinds,
    /// e.g. the Debian set's fortunes, in no dev or held-out text).
    Lift { reference: usize, gain: f64, dev: bool },
}

/// The lift rule's largest gain (its served-language count weighs at most this
/// many global counts).
pub const LIFT_MAX: f64 = 1_048_576.0;

/// The discount rule's fixed-point unit: its weight `gain` is `d / DISCOUNT_ONE`.
pub const DISCOUNT_ONE: u64 = 1024;

/// The group rule looks at most at this many of the worst language's pairs a
/// merge (its top pair included): the cost of a pick is bounded by it, not by
/// how flat the language's counts are (the shared-pair variant's candidate
/// lists grow to thousands late in a 32,768-id training).
pub const GROUP_CANDIDATES: usize = 64;

/// A rule's reference language given as this index is the median language:
/// before each merge, the language whose dev cost is the lower median of all
/// languages' (ordered by cost, then by index; the `(L - 1) / 2`-th).
pub const MEDIAN: usize = usize::MAX;

impl Rule {
    /// The rule named `name` ("foroutan2025", "levelup", "excess", "group",
    /// "keep", "discount", "lift", "devlift"); all but the first need `reference` (a language index below
    /// `langs`, or [`MEDIAN`]).
    pub fn parse(name: &str, reference: Option<usize>, gain: f64, langs: usize) -> Result<Self> {
        let need_ref = || match reference {
            Some(r) if r < langs || r == MEDIAN => Ok(r),
            Some(r) => Err(Error::Invalid(format!("the parity reference language {r} is not one of the {langs}"))),
            None => Err(Error::Invalid(format!("the parity rule {name:?} needs a reference language"))),
        };
        match name {
            "foroutan2025" => Ok(Rule::Foroutan),
            "levelup" => Ok(Rule::LevelUp { reference: need_ref()? }),
            "keep" => Ok(Rule::Keep { reference: need_ref()? }),
            "excess" if gain.is_finite() && gain >= 0.0 => Ok(Rule::Excess { reference: need_ref()?, gain }),
            "group" if gain.is_finite() && gain >= 0.0 => Ok(Rule::Group { reference: need_ref()?, gain }),
            "discount" if (0.0..=1.0).contains(&gain) => match need_ref()? {
                // a moving reference would let a band key rise: its entries are lazy (keys only fall)
                MEDIAN => Err(Error::Invalid("the discount rule needs a fixed reference language, not the median".into())),
                r => Ok(Rule::Discount { reference: r, gain }),
            },
            "discount" => Err(Error::Invalid(format!("the discount rule's gain must be in [0, 1], not {gain}"))),
            "lift" | "devlift" if (0.0..=LIFT_MAX).contains(&gain) => {
                Ok(Rule::Lift { reference: need_ref()?, gain, dev: name == "devlift" })
            }
            "lift" | "devlift" => {
                Err(Error::Invalid(format!("the {name} rule's gain must be in [0, {LIFT_MAX}], not {gain}")))
            }
            "excess" | "group" => {
                Err(Error::Invalid(format!("the {name} rule's gain must be a number >= 0, not {gain}")))
            }
            other => Err(Error::Invalid(format!(
                "unknown parity rule {other:?}; expected \"foroutan2025\", \"levelup\", \"excess\", \"group\", \"keep\", \"discount\", \"lift\" or \"devlift\""
            ))),
        }
    }
}

/// How a language's compression on its dev text is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Dev tokens in all: for parallel dev sets (the same content in every language).
    Tokens,
    /// Dev tokens per dev byte (UTF-8).
    Bytes,
    /// Dev tokens per dev character.
    Chars,
}

impl Measure {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "tokens" => Ok(Measure::Tokens),
            "bytes" => Ok(Measure::Bytes),
            "chars" => Ok(Measure::Chars),
            other => Err(Error::Invalid(format!(
                "unknown parity measure {other:?}; expected \"tokens\" (parallel dev sets), \"bytes\" or \"chars\""
            ))),
        }
    }

    /// The unit of one language's dev text, from its pieces and their counts.
    pub fn norm<'a>(self, pieces: impl Iterator<Item = (&'a [u8], u64)>) -> u64 {
        match self {
            Measure::Tokens => 1,
            Measure::Bytes => pieces.map(|(w, c)| w.len() as u64 * c).sum(),
            // a character starts at every byte that is not a UTF-8 continuation byte
            Measure::Chars => pieces.map(|(w, c)| w.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u64 * c).sum(),
        }
    }
}

pub struct Parity {
    /// Number of languages.
    pub(super) langs: usize,
    /// First arena slot of each language's segment (training and dev pieces,
    /// module notes); `L + 1` entries, the last the end.
    pub(super) seg_start: Vec<u32>,
    /// Per live pair, by its slot ([`Slots`]), a row of `langs + 1`: the
    /// pair's key, then its count in each language's training text. A
    /// removed pair's row keeps its key and counts 0 everywhere until its slot
    /// is reused, when the row is written whole: a heap entry that names the
    /// slot (and the key) finds its pair's counts with one read of the row,
    /// not a probe of the index (`count_at`).
    rows: Vec<i64>,
    /// Per language: its pairs with a count above zero.
    live: Vec<usize>,
    /// Per language: (count, pair, slot) entries, refreshed lazily against `rows`.
    heaps: Vec<Heap<Entry>>,
    /// Per language: tokens of its dev text under the merges so far.
    pub(super) dev_tokens: Vec<u64>,
    dev_tokens_start: Vec<u64>,
    norms: Vec<u64>,
    pub(super) global_merges: usize,
    exhausted: Vec<bool>,
    /// Per merge: the language it was picked for, or [`GLOBAL`].
    pub(super) chosen: Vec<u32>,
    /// The walk of the merge under way, per language (each `[x * langs + l]`,
    /// zero between merges): what (x, a) lost, what (b, y) lost, what the
    /// merged pair lost, and what the new pair at index `i` of the walk's list
    /// gained ([`Parity::lose_left`] and the next ones).
    lost_left: Vec<i64>,
    lost_right: Vec<i64>,
    lost_pair: Vec<i64>,
    gained: Vec<i64>,
    /// The moving window: its length (0: off), `alpha`, the languages of
    /// the last `window` parity merges and how often each is among them.
    pub(super) window: usize,
    alpha: f64,
    recent: VecDeque<u32>,
    in_window: Vec<usize>,
    /// The tolerance variant (0: off): while the worst language's cost is
    /// within `1 + tolerance` of the best's, the merge is global.
    pub(super) tolerance: f64,
    /// The shared-pair variant (0: off): among the worst language's pairs
    /// counting at least `1 / shared` of its top pair's count, the one with
    /// the largest count over all languages.
    shared: f64,
    /// The shared-pair variant's index, per language (built at its first pick).
    bands: Vec<Bands>,
    /// The rule after the global merges.
    pub(super) rule: Rule,
    /// The keep rule's floors (set when the parity phase starts; empty before).
    floors: Vec<f64>,
    /// The language of the last position [`Parity::lang_at`] looked up.
    cursor: usize,
    /// The devlift rule is on: the per-slot dev counts below are kept.
    pub(super) track_dev: bool,
    /// The devlift rule (empty otherwise): per live pair, by its slot, its
    /// count in the dev text of every language (dev-only occurrences too),
    /// kept by the merge walk as the rows are; a new pair's entry is written
    /// with its row.
    dev_rows: Vec<i64>,
    /// The walk's dev sums, as `lost_left`, `lost_right` and `gained` but
    /// over all languages (the merged pair's entry is cleared whole).
    dev_lost_left: Vec<i64>,
    dev_lost_right: Vec<i64>,
    dev_gained: Vec<i64>,
}

/// The trainer's pair index as parity training reads it (`super::train`):
/// a live pair keeps one slot, a number below [`Slots::slots`], from its
/// first occurrence to its last; the slot numbers its row of language counts.
pub(super) trait Slots {
    /// `key`'s slot; None when it is not a live pair.
    fn slot(&self, key: u64) -> Option<u32>;
    /// The count over all languages of the pair in `slot`.
    fn global_at(&self, slot: u32) -> u64;
    /// One more than the largest slot.
    fn slots(&self) -> usize;
    /// `f(slot, key)` for every live pair.
    fn each_slot(&self, f: impl FnMut(u32, u64));
}

/// Where a merge's walk saw a loss: (x, a) by `x`, (b, y) by `y`, or the merged pair.
#[derive(Clone, Copy)]
pub(super) enum Lose {
    Left(u32),
    Right(u32),
    Pair,
}

/// A language heap's entry: (count, pair, the pair's slot).
type Entry = (u64, u64, u32);

/// The order of language heap entries: `better` on (count, pair).
fn entry_order<'a>(better: &'a impl Fn(&(u64, u64), &(u64, u64)) -> bool) -> impl Fn(&Entry, &Entry) -> bool + 'a {
    move |a, b| better(&(a.0, a.1), &(b.0, b.1))
}

/// Where the row of `slot` starts in `rows` (`langs + 1` a row: the key, then the counts).
#[inline(always)]
fn row_at(langs: usize, slot: u32) -> usize {
    slot as usize * (langs + 1)
}

/// Language `l`'s count of `key`, whose slot was `slot` (None: zero, or the
/// pair is gone: its row counts 0 everywhere, or names another pair).
#[inline(always)]
fn count_at(rows: &[i64], langs: usize, l: usize, key: u64, slot: u32) -> Option<u64> {
    let r = row_at(langs, slot);
    if rows[r] as u64 != key {
        return None;
    }
    let c = rows[r + 1 + l];
    (c > 0).then_some(c as u64)
}

/// The top entry of a lazy heap of (count, key) whose current counts are
/// `current` (None: the key is gone), left in the heap; stale entries on
/// top are dropped or moved down to their current count first. `better` is
/// a total order on (count, key) and equal entries are interchangeable, so
/// what comes out of a heap depends on its contents alone: reading the top
/// in place leaves every later pop as popping and pushing it back would.
pub(super) fn peek_current<T: Copy + PartialEq>(
    heap: &mut Heap<T>,
    current: impl Fn(&T) -> Option<T>,
    better: &impl Fn(&T, &T) -> bool,
) -> Option<T> {
    loop {
        let top = *heap.peek()?;
        match current(&top) {
            Some(cur) if cur == top => return Some(top),
            Some(cur) => {
                heap.pop(better);
                heap.push(cur, better);
            }
            None => {
                heap.pop(better);
            }
        }
    }
}

/// The key of the candidate (count, key, slot) with the largest `score` (of
/// its key and slot), the first on a tie.
fn best_scored(cands: &[Entry], score: impl Fn(u64, u32) -> f64) -> u64 {
    let mut best = 0;
    let mut best_s = score(cands[0].1, cands[0].2);
    for (i, c) in cands.iter().enumerate().skip(1) {
        let s = score(c.1, c.2);
        if s > best_s {
            best = i;
            best_s = s;
        }
    }
    cands[best].1
}

/// Buckets of a language count: one per count below 64, then 32 per octave
/// (a bucket spans at most 1/32 of its lowest count), so the shared-pair band
/// `[top / shared, top]` covers at most about `32 log2(shared) + 1` buckets
/// whatever the counts.
fn bucket_of(c: u64) -> usize {
    if c < 64 {
        c as usize
    } else {
        let e = 63 - c.leading_zeros() as usize; // 6 and up
        64 + (e - 6) * 32 + ((c >> (e - 5)) & 31) as usize
    }
}

/// Buckets for every u64 count.
const BUCKETS: usize = 64 + (64 - 6) * 32;

/// A band entry: (band key, language count, pair, the pair's slot).
type BandEntry = (u64, u64, u64, u32);

/// The shared-pair variant's order of (global count, language count, pair, slot):
/// the larger global count first, then the language's own order.
fn band_order<'a>(
    better: &'a impl Fn(&(u64, u64), &(u64, u64)) -> bool,
) -> impl Fn(&BandEntry, &BandEntry) -> bool + 'a {
    move |a, b| a.0 > b.0 || (a.0 == b.0 && better(&(a.1, a.2), &(b.1, b.2)))
}

/// What a band key is made of: the discount rule's (reference language,
/// `d`), the lift rule's `e`, and whether the global count is the dev text's
/// (the devlift rule).
#[derive(Clone, Copy)]
struct KeyRule {
    discount: Option<(usize, i64)>,
    lift: Option<i64>,
    dev: bool,
}

/// The shared-pair variant's key of a pair in language `l`'s band: its
/// global count `g` (over every language's training text, or under the
/// devlift rule its dev text), or `DISCOUNT_ONE · g − d · count_reference`
/// under the discount rule, `DISCOUNT_ONE · g + e · count_l` under the
/// lift rules (in 128 bits, clamped to [0, u64::MAX]). Every count only
/// falls and the reference's is part of the global one, so the key only
/// falls too (`d <= DISCOUNT_ONE`, `e >= 0`): the lazy band entries stay
/// upper bounds. (Tests: the scan the banded pick is checked against.)
#[cfg(test)]
fn band_key<'a>(
    pairs: &'a impl Slots,
    rows: &'a [i64],
    dev_rows: &'a [i64],
    langs: usize,
    kr: KeyRule,
    l: usize,
) -> impl Fn(u64) -> u64 + 'a {
    move |k| pairs.slot(k).map_or(0, |s| band_key_at(pairs, rows, dev_rows, langs, kr, l, s))
}

/// [`band_key`] of the pair in slot `s`.
#[inline(always)]
fn band_key_at(pairs: &impl Slots, rows: &[i64], dev_rows: &[i64], langs: usize, kr: KeyRule, l: usize, s: u32) -> u64 {
    let g = if kr.dev { dev_rows[s as usize].max(0) as u64 } else { pairs.global_at(s) };
    if kr.discount.is_none() && kr.lift.is_none() {
        return g;
    }
    let row = row_at(langs, s) + 1;
    let mut v = g as i128 * DISCOUNT_ONE as i128;
    if let Some((r, d)) = kr.discount {
        v -= d as i128 * rows[row + r].max(0) as i128;
    }
    if let Some(e) = kr.lift {
        v += e as i128 * rows[row + l].max(0) as i128;
    }
    v.clamp(0, u64::MAX as i128) as u64
}

/// One language's pairs for the shared-pair pick: an entry (global count,
/// language count, pair) per pair of the language, in the bucket of its
/// language count, each bucket a heap in [`band_order`]. Entries are lazy:
/// counts only fall (a pair's global and language counts alike; a pair a
/// merge creates is new and enters with its counts), so an entry's counts
/// bound its pair's current ones from above and it sits in its pair's bucket
/// or a higher one; a stale entry is refreshed (moved down) when it comes to
/// the top of its bucket. One entry per live pair, plus dead ones until they
/// surface (rebuilt when over twice the live pairs, as the heaps are).
struct Bands {
    buckets: Vec<Heap<BandEntry>>,
    /// Entries held, live or stale.
    held: usize,
    /// No bucket above this one holds an entry.
    high: usize,
}

impl Bands {
    /// Language `l`'s bands, from the rows and dev counts (`kr`: [`band_key`]'s).
    fn build(
        l: usize,
        pairs: &impl Slots,
        (rows, dev_rows): (&[i64], &[i64]),
        langs: usize,
        kr: KeyRule,
        order: &impl Fn(&BandEntry, &BandEntry) -> bool,
    ) -> Self {
        let mut by: Vec<Vec<BandEntry>> = vec![Vec::new(); BUCKETS];
        let (mut high, mut held) = (0, 0);
        pairs.each_slot(|s, k| {
            let c = rows[row_at(langs, s) + 1 + l];
            if c > 0 {
                let b = bucket_of(c as u64);
                by[b].push((band_key_at(pairs, rows, dev_rows, langs, kr, l, s), c as u64, k, s));
                high = high.max(b);
                held += 1;
            }
        });
        let buckets = by.into_iter().map(|v| Heap::from_vec(v, order)).collect();
        Bands { buckets, held, high }
    }

    fn push(&mut self, e: BandEntry, order: &impl Fn(&BandEntry, &BandEntry) -> bool) {
        let b = bucket_of(e.1);
        self.buckets[b].push(e, order);
        self.held += 1;
        self.high = self.high.max(b);
    }
}

impl Parity {
    /// `seg_start` as laid out; `dev_tokens` and `norms` per language.
    pub(super) fn new(seg_start: Vec<u32>, dev_tokens: Vec<u64>, norms: Vec<u64>, global_merges: usize) -> Self {
        let langs = dev_tokens.len();
        debug_assert_eq!(seg_start.len(), langs + 1);
        Parity {
            langs,
            seg_start,
            rows: Vec::new(),
            live: vec![0; langs],
            heaps: (0..langs).map(|_| Heap::with_capacity(0)).collect(),
            dev_tokens_start: dev_tokens.clone(),
            dev_tokens,
            norms,
            global_merges,
            exhausted: vec![false; langs],
            chosen: Vec::new(),
            lost_left: Vec::new(),
            lost_right: Vec::new(),
            lost_pair: vec![0; langs],
            gained: Vec::new(),
            window: 0,
            alpha: 0.0,
            recent: VecDeque::new(),
            in_window: vec![0; langs],
            tolerance: 0.0,
            shared: 0.0,
            bands: Vec::new(),
            rule: Rule::Foroutan,
            floors: Vec::new(),
            cursor: 0,
            track_dev: false,
            dev_rows: Vec::new(),
            dev_lost_left: Vec::new(),
            dev_lost_right: Vec::new(),
            dev_gained: Vec::new(),
        }
    }

    /// Turn on the tolerance variant (> 0) and the shared-pair variant
    /// (>= 1); 0 leaves either off (see the module notes).
    pub(super) fn set_rule(&mut self, tolerance: f64, shared: f64, rule: Rule) {
        self.tolerance = tolerance;
        self.shared = shared;
        self.rule = rule;
        self.track_dev = matches!(rule, Rule::Lift { dev: true, .. });
        if !self.track_dev {
            self.dev_rows = Vec::new();
        }
    }

    /// The discount rule's (reference language, `d`); None under any other rule.
    fn discount(&self) -> Option<(usize, i64)> {
        match self.rule {
            Rule::Discount { reference, gain } => Some((reference, (gain * DISCOUNT_ONE as f64).round() as i64)),
            _ => None,
        }
    }

    /// The band keys' knobs under the rule set.
    fn key_rule(&self) -> KeyRule {
        KeyRule { discount: self.discount(), lift: self.lift(), dev: self.track_dev }
    }

    /// The devlift rule: every pair's dev count (`dev`: key, count over every
    /// language's dev text, from the arena as laid out) into its slot's entry
    /// of [`Parity::dev_rows`], kept from here on by the merge walk (once
    /// [`Parity::set_rule`] sets the devlift rule).
    pub(super) fn set_dev_counts(&mut self, pairs: &impl Slots, dev: impl Iterator<Item = (u64, i64)>) {
        self.dev_rows = vec![0; pairs.slots()];
        for (key, c) in dev {
            if let Some(s) = pairs.slot(key) {
                self.dev_rows[s as usize] = c;
            }
        }
    }

    /// The devlift rule, the walk: an occurrence of (x, a) with `dev` dev tokens is gone.
    #[inline(always)]
    pub(super) fn dev_left(&mut self, x: u32, dev: i64) {
        self.dev_lost_left[x as usize] += dev;
    }

    /// The devlift rule, the walk: an occurrence of (b, y) with `dev` dev tokens is gone.
    #[inline(always)]
    pub(super) fn dev_right(&mut self, y: u32, dev: i64) {
        self.dev_lost_right[y as usize] += dev;
    }

    /// The devlift rule, the walk: the new pair at index `i` of its list changes by `dev`.
    #[inline(always)]
    pub(super) fn dev_gain(&mut self, i: u32, dev: i64) {
        let i = i as usize;
        if i >= self.dev_gained.len() {
            self.dev_gained.resize((i + 1).max(2 * self.dev_gained.len()), 0);
        }
        self.dev_gained[i] += dev;
    }

    /// The lift rule's `e` (the served language's weight in [`DISCOUNT_ONE`]
    /// units); None under any other rule.
    fn lift(&self) -> Option<i64> {
        match self.rule {
            Rule::Lift { gain, .. } => Some((gain * DISCOUNT_ONE as f64).round() as i64),
            _ => None,
        }
    }

    /// `a`'s dev cost is above `b`'s (`t_a / n_a > t_b / n_b`, exact in 128 bits).
    fn dearer(&self, a: usize, b: usize) -> bool {
        self.dev_tokens[a] as u128 * self.norms[b] as u128 > self.dev_tokens[b] as u128 * self.norms[a] as u128
    }

    /// Language `l`'s dev cost over language `r`'s, as f64 (each product exact
    /// in 128 bits, then rounded once to f64, the quotient in f64).
    fn ratio(&self, l: usize, r: usize) -> f64 {
        let x = (self.dev_tokens[l] as u128 * self.norms[r] as u128) as f64;
        let y = (self.dev_tokens[r] as u128 * self.norms[l] as u128) as f64;
        x / y
    }

    /// The keep rule's excess of language `l` over its floor against reference `r`.
    fn excess(&self, l: usize, r: usize) -> f64 {
        self.ratio(l, r) / self.floors[l]
    }

    /// The reference language now: `r`, or the median language for [`MEDIAN`].
    fn resolve(&self, r: usize) -> usize {
        if r != MEDIAN {
            return r;
        }
        let mut by_cost: Vec<usize> = (0..self.langs).collect();
        by_cost.sort_by(|&a, &b| {
            let x = self.dev_tokens[a] as u128 * self.norms[b] as u128;
            let y = self.dev_tokens[b] as u128 * self.norms[a] as u128;
            x.cmp(&y).then(a.cmp(&b))
        });
        by_cost[(self.langs - 1) / 2]
    }

    /// Is the merge global now? Foroutan: the tolerance variant
    /// ([`Parity::balanced`]); level up: every language not exhausted costs at
    /// most `1 + tolerance` times the reference (`t_w n_r <= (1 + tol) t_r n_w`,
    /// the products exact, the comparison in f64); keep: every language not
    /// exhausted has an excess over its floor of at most `1 + tolerance` (the
    /// floors set at the first call, when the parity phase starts). The
    /// excess rule decides in [`Parity::pick_excess`].
    pub(super) fn global_now(&mut self) -> bool {
        match self.rule {
            Rule::Foroutan => self.balanced(),
            Rule::Excess { .. } => false,
            Rule::Keep { reference: r } => {
                let r = self.resolve(r);
                if self.floors.is_empty() {
                    // the parity phase starts: every language's floor
                    self.floors = (0..self.langs).map(|l| self.ratio(l, r).min(1.0)).collect();
                }
                (0..self.langs).filter(|&l| !self.exhausted[l]).all(|l| self.excess(l, r) <= 1.0 + self.tolerance)
            }
            Rule::LevelUp { reference: r }
            | Rule::Group { reference: r, .. }
            | Rule::Discount { reference: r, .. }
            | Rule::Lift { reference: r, .. } => {
                let r = self.resolve(r);
                let Some(hi) =
                    (0..self.langs)
                        .filter(|&l| !self.exhausted[l])
                        .reduce(|h, l| if self.dearer(l, h) { l } else { h })
                else {
                    return true;
                };
                let worst = (self.dev_tokens[hi] as u128 * self.norms[r] as u128) as f64;
                let refc = (self.dev_tokens[r] as u128 * self.norms[hi] as u128) as f64;
                worst <= (1.0 + self.tolerance) * refc
            }
        }
    }

    /// The tolerance variant: every language not exhausted costs at most
    /// `1 + tolerance` times the cheapest one's (`t_w / n_w <= (1 + tol) t_b / n_b`,
    /// the products exact in 128 bits, the comparison in f64).
    pub(super) fn balanced(&self) -> bool {
        if self.tolerance <= 0.0 {
            return false;
        }
        let live: Vec<usize> = (0..self.langs).filter(|&l| !self.exhausted[l]).collect();
        let cheaper = |a: usize, b: usize| {
            (self.dev_tokens[a] as u128 * self.norms[b] as u128) < (self.dev_tokens[b] as u128 * self.norms[a] as u128)
        };
        let (Some(&first), true) = (live.first(), live.len() > 1) else { return false };
        let (mut lo, mut hi) = (first, first);
        for &l in &live[1..] {
            if cheaper(l, lo) {
                lo = l;
            }
            if cheaper(hi, l) {
                hi = l;
            }
        }
        let worst = (self.dev_tokens[hi] as u128 * self.norms[lo] as u128) as f64;
        let best = (self.dev_tokens[lo] as u128 * self.norms[hi] as u128) as f64;
        worst <= (1.0 + self.tolerance) * best
    }

    /// Turn on the moving-window variant (see the module notes).
    pub(super) fn set_window(&mut self, window: usize, alpha: f64) {
        self.window = window;
        self.alpha = alpha;
    }

    /// Language `l` was picked more than `alpha / L` of the last `window` merges.
    fn over_window(&self, l: usize) -> bool {
        self.window > 0 && (self.in_window[l] as f64) / (self.window as f64) > self.alpha / self.langs as f64
    }

    /// The language of arena position `p`.
    #[inline(always)]
    pub(super) fn lang_of(&self, p: usize) -> usize {
        self.seg_start.partition_point(|&s| s as usize <= p) - 1
    }

    /// The language of arena position `p` during a merge's walk: the walk
    /// visits a pair's positions in ascending order, so the language of the
    /// position before is kept and checked first (two comparisons instead of
    /// a binary search's unpredictable branches, once per occurrence); any
    /// other position falls back to the search.
    #[inline(always)]
    pub(super) fn lang_at(&mut self, p: usize) -> usize {
        let l = self.cursor;
        if self.seg_start[l] as usize <= p && p < self.seg_start[l + 1] as usize {
            return l;
        }
        let l = self.lang_of(p);
        self.cursor = l;
        l
    }

    /// The setup's counts: a row for every pair of `pairs`, its counts zero
    /// ([`Parity::set_count`] fills them).
    pub(super) fn start_counts(&mut self, pairs: &impl Slots) {
        let langs = self.langs;
        self.rows = vec![0; pairs.slots() * (langs + 1)];
        pairs.each_slot(|s, k| self.rows[row_at(langs, s)] = k as i64);
    }

    /// The setup's count of the pair in `slot` in language `l`'s training text.
    pub(super) fn set_count(&mut self, l: usize, slot: u32, c: i64) {
        let r = &mut self.rows[row_at(self.langs, slot) + 1 + l];
        debug_assert_eq!(*r, 0, "a pair's count in a language is set once");
        *r = c;
        if c > 0 {
            self.live[l] += 1;
        }
    }

    /// A merge that makes id `z` starts (every id of it is at most `z`).
    pub(super) fn begin_merge(&mut self, z: u32) {
        let n = (z as usize + 1) * self.langs;
        if self.lost_left.len() < n {
            self.lost_left.resize(n, 0);
            self.lost_right.resize(n, 0);
        }
        if self.track_dev && self.dev_lost_left.len() <= z as usize {
            self.dev_lost_left.resize(z as usize + 1, 0);
            self.dev_lost_right.resize(z as usize + 1, 0);
        }
    }

    /// The walk: an occurrence of (x, a) in language `l`, of weight `w`, is gone.
    #[inline(always)]
    pub(super) fn lose_left(&mut self, x: u32, l: u32, w: i64) {
        self.lost_left[x as usize * self.langs + l as usize] += w;
    }

    /// The walk: an occurrence of (b, y) in language `l`, of weight `w`, is gone.
    #[inline(always)]
    pub(super) fn lose_right(&mut self, y: u32, l: u32, w: i64) {
        self.lost_right[y as usize * self.langs + l as usize] += w;
    }

    /// The walk: an occurrence of the merged pair in language `l`, of weight `w`, is gone.
    #[inline(always)]
    pub(super) fn lose_pair(&mut self, l: u32, w: i64) {
        self.lost_pair[l as usize] += w;
    }

    /// The walk: the new pair at index `i` of its list changes by `w` in language `l`.
    #[inline(always)]
    pub(super) fn gain(&mut self, i: u32, l: u32, w: i64) {
        let at = i as usize * self.langs + l as usize;
        if at >= self.gained.len() {
            // whole rows: `after_merge` reads a row whole or not at all
            self.gained.resize(((i as usize + 1) * self.langs).max(2 * self.gained.len()), 0);
        }
        self.gained[at] += w;
    }

    /// After the walk, before the pair in `slot` (where the walk saw the loss
    /// `at`) may leave the index: its row loses what the walk summed, and the
    /// sums go back to zero. (A pair's counts only fall here: its heap and
    /// band entries stay upper bounds.)
    pub(super) fn apply_loss(&mut self, slot: u32, at: Lose) {
        let langs = self.langs;
        if self.track_dev {
            // the devlift rule's dev count likewise; the merged pair's is gone
            let d = &mut self.dev_rows[slot as usize];
            match at {
                Lose::Left(x) => *d -= std::mem::take(&mut self.dev_lost_left[x as usize]),
                Lose::Right(y) => *d -= std::mem::take(&mut self.dev_lost_right[y as usize]),
                Lose::Pair => *d = 0,
            }
            debug_assert!(*d >= 0, "a dev count fell below zero");
        }
        let lost = match at {
            Lose::Left(x) => &mut self.lost_left[x as usize * langs..(x as usize + 1) * langs],
            Lose::Right(y) => &mut self.lost_right[y as usize * langs..(y as usize + 1) * langs],
            Lose::Pair => &mut self.lost_pair[..],
        };
        let r = row_at(langs, slot) + 1;
        let row = &mut self.rows[r..r + langs];
        for (l, (c, d)) in row.iter_mut().zip(lost.iter_mut()).enumerate() {
            if *d != 0 {
                *c -= *d;
                *d = 0;
                debug_assert!(*c >= 0, "a language count fell below zero");
                if *c == 0 {
                    self.live[l] -= 1;
                }
            }
        }
    }

    /// Every language's heap from the rows (after the setup's counts).
    pub(super) fn build_heaps(&mut self, pairs: &impl Slots, better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool) {
        let mut entries: Vec<Vec<Entry>> = self.live.iter().map(|&n| Vec::with_capacity(n)).collect();
        let langs = self.langs;
        pairs.each_slot(|s, k| {
            let r = row_at(langs, s) + 1;
            for (e, &c) in entries.iter_mut().zip(&self.rows[r..r + langs]) {
                if c > 0 {
                    e.push((c as u64, k, s));
                }
            }
        });
        let order = entry_order(better);
        self.heaps = entries.into_iter().map(|e| Heap::from_vec(e, &order)).collect();
    }

    /// Language `l`'s pairs and their counts, from the rows.
    fn entries_of(&self, pairs: &impl Slots, l: usize) -> Vec<Entry> {
        let mut entries = Vec::with_capacity(self.live[l]);
        pairs.each_slot(|s, k| {
            let c = self.rows[row_at(self.langs, s) + 1 + l];
            if c > 0 {
                entries.push((c as u64, k, s));
            }
        });
        entries
    }

    /// After a merge (its losses applied, its new pairs in the index): the
    /// new pairs, `(key, slot)` in the order of the walk's list (the slot
    /// None for a pair with no occurrence left, not in the index), take their rows
    /// and enter the heaps of their languages (each once; a new pair never
    /// existed before, so pushing its final count is enough), and the
    /// shared-pair index once built; a heap or index holding more than twice
    /// its live pairs is rebuilt (the lazy heap otherwise grows with the
    /// merges run).
    pub(super) fn after_merge(
        &mut self,
        fresh: impl Iterator<Item = (u64, Option<u32>)>,
        pairs: &impl Slots,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        slack: usize,
    ) {
        let langs = self.langs;
        let need = pairs.slots() * (langs + 1);
        if self.rows.len() < need {
            self.rows.resize(need.max(self.rows.len() + self.rows.len() / 2), 0);
        }
        if self.track_dev && self.dev_rows.len() < pairs.slots() {
            self.dev_rows.resize(pairs.slots().max(self.dev_rows.len() + self.dev_rows.len() / 2), 0);
        }
        let order = band_order(better);
        let lorder = entry_order(better);
        let kr = self.key_rule();
        let mut n = 0;
        for (i, (key, slot)) in fresh.enumerate() {
            n = i + 1;
            // the devlift rule: the new pair's dev count, written with its row
            let dev = self.dev_gained.get_mut(i).map_or(0, std::mem::take);
            if let Some(s) = slot.filter(|_| self.track_dev) {
                self.dev_rows[s as usize] = dev;
            }
            debug_assert!(slot.is_some() || dev == 0, "a pair with no occurrence has no dev count");
            // (none: the walk's list grew past `gained`, every language's gain 0)
            let gained = self.gained.get_mut(i * langs..(i + 1) * langs);
            let Some(s) = slot else {
                if let Some(g) = gained {
                    debug_assert!(g.iter().all(|&c| c == 0), "a pair with no occurrence counts in no language");
                    g.fill(0);
                }
                continue;
            };
            debug_assert_eq!(pairs.slot(key), Some(s));
            let r = row_at(langs, s);
            self.rows[r] = key as i64;
            let row = &mut self.rows[r + 1..r + 1 + langs];
            match gained {
                Some(g) => {
                    row.copy_from_slice(g);
                    g.fill(0);
                }
                None => row.fill(0),
            }
            for l in 0..langs {
                let c = self.rows[r + 1 + l];
                if c > 0 {
                    self.live[l] += 1;
                    self.heaps[l].push((c as u64, key, s), &lorder);
                    if !self.bands.is_empty() {
                        let e = (band_key_at(pairs, &self.rows, &self.dev_rows, langs, kr, l, s), c as u64, key, s);
                        self.bands[l].push(e, &order);
                    }
                }
            }
        }
        debug_assert!(self.gained[(n * langs).min(self.gained.len())..].iter().all(|&c| c == 0));
        debug_assert!(self.dev_gained[n.min(self.dev_gained.len())..].iter().all(|&c| c == 0));
        for l in 0..langs {
            if self.heaps[l].len() > 2 * self.live[l] + slack {
                self.heaps[l] = Heap::with_capacity(0);
                self.heaps[l] = Heap::from_vec(self.entries_of(pairs, l), &lorder);
            }
            if self.bands.get(l).is_some_and(|b| b.held > 2 * self.live[l] + slack) {
                self.bands[l] = Bands::build(l, pairs, (&self.rows, &self.dev_rows), langs, kr, &order);
            }
        }
    }

    /// The worst compressed language not exhausted (and, with the window,
    /// not over it, unless all are): the largest `dev_tokens / norm`
    /// (compared exactly, as `a * nb > b * na`), the lower index on a tie;
    /// under the keep rule, the largest excess over its floor (f64).
    fn worst(&self) -> Option<usize> {
        let keep_ref = match self.rule {
            Rule::Keep { reference } => Some(self.resolve(reference)),
            _ => None,
        };
        let any_under = (0..self.langs).any(|l| !self.exhausted[l] && !self.over_window(l));
        let mut best: Option<usize> = None;
        for l in 0..self.langs {
            if self.exhausted[l] || (any_under && self.over_window(l)) {
                continue;
            }
            best = match best {
                None => Some(l),
                Some(b) => Some(match keep_ref {
                    Some(r) => {
                        if self.excess(l, r) > self.excess(b, r) {
                            l
                        } else {
                            b
                        }
                    }
                    None => {
                        let x = self.dev_tokens[l] as u128 * self.norms[b] as u128;
                        let y = self.dev_tokens[b] as u128 * self.norms[l] as u128;
                        if x > y {
                            l
                        } else {
                            b
                        }
                    }
                }),
            };
        }
        best
    }

    /// The next merge of the parity phase (see the module notes), recorded in
    /// `chosen`; None when every language is exhausted.
    pub(super) fn pick(
        &mut self,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        min_frequency: u64,
        pairs: &impl Slots,
    ) -> Option<u64> {
        #[cfg(test)]
        let kr = self.key_rule();
        let langs = self.langs;
        let lorder = entry_order(better);
        loop {
            let l = self.worst()?;
            let heap = &mut self.heaps[l];
            let rows = &self.rows;
            let count = |k: u64, s: u32| count_at(rows, langs, l, k, s);
            // The top is read in place (the group rule and the shared-pair
            // variant leave it there: most picks are not it; a pop and a push
            // back each were a walk down and up the heap); the other rules
            // take it out below.
            let current = |e: &Entry| count(e.1, e.2).map(|c| (c, e.1, e.2));
            let found = match peek_current(heap, current, &lorder) {
                // counts only fall: a language below stays below
                Some(top) if top.0 < min_frequency => None,
                other => other,
            };
            let found = match (found, self.rule) {
                (Some(top), Rule::Group { reference, gain }) => {
                    let reference = self.resolve(reference);
                    let weights: Vec<f64> = (0..self.langs)
                        .map(|m| {
                            let dear = self.dev_tokens[m] as u128 * self.norms[reference] as u128
                                > self.dev_tokens[reference] as u128 * self.norms[m] as u128;
                            if dear {
                                1.0 + gain
                            } else {
                                1.0
                            }
                        })
                        .collect();
                    // the candidate's row: one read for every language
                    let score = |_key: u64, s: u32| {
                        let r = row_at(langs, s) + 1;
                        let row = &rows[r..r + langs];
                        let mut sum = 0.0;
                        for (&w, &c) in weights.iter().zip(row) {
                            sum += w * c.max(0) as f64;
                        }
                        sum
                    };
                    let heap = &mut self.heaps[l];
                    // tests: the walk picks as taking the candidates out did
                    #[cfg(test)]
                    let taken = {
                        let mut h = heap.clone();
                        assert_eq!(h.pop(&lorder), Some(top));
                        Self::candidates_pick(
                            &mut h,
                            &count,
                            top,
                            self.shared,
                            min_frequency,
                            &lorder,
                            GROUP_CANDIDATES,
                            score,
                        )
                    };
                    // the row's first and last number: every cache line of it
                    let ahead = |s: u32| {
                        prefetch(rows, row_at(langs, s));
                        prefetch(rows, row_at(langs, s) + langs);
                    };
                    let key = Self::candidates_walk(
                        heap,
                        &count,
                        &ahead,
                        top,
                        self.shared,
                        min_frequency,
                        &lorder,
                        GROUP_CANDIDATES,
                        score,
                    );
                    #[cfg(test)]
                    assert_eq!(key, taken, "the group rule's walk differs from taking the candidates out");
                    Some(key)
                }
                (Some(top), _) if self.shared > 0.0 => {
                    // tests: the banded pick equals the scan of every candidate
                    #[cfg(test)]
                    let scan = {
                        let key_of = band_key(pairs, rows, &self.dev_rows, langs, kr, l);
                        let g = |k: u64, _: u32| key_of(k) as f64;
                        assert_eq!(heap.pop(&lorder), Some(top));
                        Self::candidates_pick(heap, &count, top, self.shared, min_frequency, &lorder, usize::MAX, g)
                    };
                    let key = self.shared_pick(l, top.0, min_frequency, better, pairs);
                    #[cfg(test)]
                    assert_eq!(key, scan, "the banded shared-pair pick differs from the scan");
                    Some(key)
                }
                (Some(top), _) => {
                    heap.pop(&lorder);
                    Some(top.1)
                }
                (None, _) => None,
            };
            match found {
                Some(key) => {
                    self.chosen.push(l as u32);
                    if self.window > 0 {
                        self.recent.push_back(l as u32);
                        self.in_window[l] += 1;
                        if self.recent.len() > self.window {
                            let old = self.recent.pop_front().expect("longer than the window");
                            self.in_window[old as usize] -= 1;
                        }
                    }
                    return Some(key);
                }
                None => self.exhausted[l] = true,
            }
        }
    }

    /// The shared-pair variant's pair for language `l`, whose top pair counts
    /// `top`: among its pairs counting `c >= min_frequency` with `c * shared
    /// >= top` (in f64, as the scan compares), the one with the largest count
    /// over all languages (`global`), the first in `l`'s order on a tie.
    ///
    /// The candidates are the buckets from the one of the least such count
    /// up to `top`'s; each bucket's best candidate is its top once refreshed
    /// (every other entry's counts bound its pair's from above, in
    /// [`band_order`]), except in the lowest bucket, whose top may count
    /// below the band and is set aside. A bucket whose top cannot beat the
    /// best so far is skipped unrefreshed. Cost: O(buckets in the band) peeks
    /// a merge, about 32 log2(shared) + 1 (not the candidates: thousands late
    /// in a 32,768-id training), plus O(log n) for each refresh, which a
    /// count change pays for at most once.
    fn shared_pick(
        &mut self,
        l: usize,
        top: u64,
        min_frequency: u64,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        pairs: &impl Slots,
    ) -> u64 {
        let order = band_order(better);
        let kr = self.key_rule();
        let langs = self.langs;
        let (rows, dev_rows) = (&self.rows, &self.dev_rows);
        if self.bands.is_empty() {
            self.bands = (0..langs).map(|m| Bands::build(m, pairs, (rows, dev_rows), langs, kr, &order)).collect();
        }
        // an entry's pair's band key and count in `l` now (one read of its row)
        let current = |e: &BandEntry| {
            let c = count_at(rows, langs, l, e.2, e.3)?;
            Some((band_key_at(pairs, rows, dev_rows, langs, kr, l, e.3), c, e.2, e.3))
        };
        let shared = self.shared;
        let fits = |c: u64| c as f64 * shared >= top as f64;
        let mut t = ((top as f64 / shared) as u64).clamp(1, top);
        while t > 1 && fits(t - 1) {
            t -= 1;
        }
        while !fits(t) {
            t += 1;
        }
        let t = t.max(min_frequency);
        let bands = &mut self.bands[l];
        let (lo, hi) = (bucket_of(t), bucket_of(top));
        // no pair of `l` counts above `top`: every entry above its bucket is stale
        for b in (hi + 1..=bands.high).rev() {
            while let Some(e) = bands.buckets[b].pop(&order) {
                bands.held -= 1;
                if let Some(cur) = current(&e) {
                    bands.push(cur, &order);
                }
            }
        }
        bands.high = hi;
        let mut best: Option<BandEntry> = None;
        let mut aside = Vec::new();
        for b in (lo..=hi).rev() {
            while let Some(&e) = bands.buckets[b].peek() {
                if best.is_some_and(|x| !order(&e, &x)) {
                    break;
                }
                bands.buckets[b].pop(&order);
                bands.held -= 1;
                let Some(cur) = current(&e) else { continue };
                if cur != e {
                    bands.push(cur, &order);
                } else if cur.1 < t {
                    aside.push(cur);
                } else {
                    best = Some(cur);
                    bands.push(cur, &order);
                    break;
                }
            }
        }
        for e in aside {
            bands.push(e, &order);
        }
        best.expect("the top pair is a candidate").2
    }

    /// The shared-pair variant and the group rule: `top` (popped, current)
    /// and the language's next pairs whose count `c` has `c * shared >= top
    /// count` and reaches `min_frequency`, at most `limit` in all, are the
    /// candidates; the one with the largest `score` wins, the first in the
    /// language's order on a tie. Cost: O(candidates · log heap) per merge;
    /// they all go back. (In tests only: the check of the shared-pair
    /// variant's banded pick and of [`Parity::candidates_walk`].)
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    fn candidates_pick(
        heap: &mut Heap<Entry>,
        count: &impl Fn(u64, u32) -> Option<u64>,
        top: Entry,
        shared: f64,
        min_frequency: u64,
        better: &impl Fn(&Entry, &Entry) -> bool,
        limit: usize,
        score: impl Fn(u64, u32) -> f64,
    ) -> u64 {
        let floor = top.0 as f64;
        let mut cands = vec![top];
        while cands.len() < limit {
            let Some(e) = heap.pop(better) else { break };
            let Some(cur) = count(e.1, e.2) else { continue };
            if cur != e.0 {
                heap.push((cur, e.1, e.2), better);
                continue;
            }
            if (e.0 as f64) * shared < floor || e.0 < min_frequency {
                heap.push(e, better);
                break;
            }
            cands.push(e);
        }
        let key = best_scored(&cands, score);
        for c in cands {
            heap.push(c, better);
        }
        key
    }

    /// [`Parity::candidates_pick`]'s pick, the candidates read where they
    /// lie in the heap instead of taken out and put back (the group rule's
    /// 64 pops and 64 pushes a merge were most of its training time): a
    /// best-first walk from the heap's root over a small frontier heap of
    /// (entry, index) yields the entries in the order pops would; a stale
    /// entry met has its children walked and its current count, if any,
    /// joins the frontier as an entry without children (its children count
    /// at most its old count, so nothing comes out of order). The stale
    /// entries met are then lowered in place to their current count (0 for a
    /// pair gone, dropped when it surfaces), deepest first so each lowering
    /// moves only entries below it: the heap holds what the pops would have
    /// left. `top`, current, is the heap's root (the walk's first candidate,
    /// left in place). Cost: O(limit ·
    /// log limit) a merge plus O(log n) per stale entry met, against
    /// O(limit · log n) for taking the candidates out. `ahead(slot)` is called
    /// for each entry that joins the frontier (a cache hint for its row).
    #[allow(clippy::too_many_arguments)]
    fn candidates_walk(
        heap: &mut Heap<Entry>,
        count: &impl Fn(u64, u32) -> Option<u64>,
        ahead: &impl Fn(u32),
        top: Entry,
        shared: f64,
        min_frequency: u64,
        better: &impl Fn(&Entry, &Entry) -> bool,
        limit: usize,
        score: impl Fn(u64, u32) -> f64,
    ) -> u64 {
        const NO_INDEX: usize = usize::MAX;
        let floor = top.0 as f64;
        let mut cands = Vec::with_capacity(limit.min(64));
        let mut stale: Vec<(usize, u64)> = Vec::new();
        let v = heap.as_slice();
        let order = |a: &(Entry, usize), b: &(Entry, usize)| better(&a.0, &b.0);
        let mut front: Heap<(Entry, usize)> = Heap::with_capacity(2 * limit.min(v.len()) + 2);
        if let Some(&root) = v.first() {
            front.push((root, 0), &order);
        }
        while cands.len() < limit {
            let Some((e, i)) = front.pop(&order) else { break };
            if i != NO_INDEX {
                for c in [2 * i + 1, 2 * i + 2] {
                    if let Some(&x) = v.get(c) {
                        // a child is read a few pops later, if at all: ask
                        // for its row and its own children now (each a
                        // cache miss on a large heap, else the walk's cost)
                        ahead(x.2);
                        prefetch(v, 2 * c + 1);
                        front.push((x, c), &order);
                    }
                }
                let cur = count(e.1, e.2);
                if cur != Some(e.0) {
                    stale.push((i, cur.unwrap_or(0)));
                    if let Some(c) = cur {
                        front.push(((c, e.1, e.2), NO_INDEX), &order);
                    }
                    continue;
                }
            }
            if (e.0 as f64) * shared < floor || e.0 < min_frequency {
                break;
            }
            cands.push(e);
        }
        stale.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        for (i, c) in stale {
            let (_, key, slot) = heap.as_slice()[i];
            heap.lower_at(i, (c, key, slot), better);
        }
        best_scored(&cands, score)
    }

    /// Language `l`'s current top pair (count, key), left in its heap; None
    /// when it has no pair left. A current top is read in place (the excess
    /// rule peeks every dear language a merge: a pop and a push each was most
    /// of its pick); stale tops are refreshed as a pop would.
    fn peek(&mut self, l: usize, better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool) -> Option<Entry> {
        let (rows, langs) = (&self.rows, self.langs);
        let current = |e: &Entry| count_at(rows, langs, l, e.1, e.2).map(|c| (c, e.1, e.2));
        peek_current(&mut self.heaps[l], current, &entry_order(better))
    }

    /// The excess rule's pick (module notes): `global_top` is plain BPE's
    /// pick (its count at least `min_frequency`), `pairs` the trainer's index. Candidates, in order: `global_top`, then the
    /// top pair of each language dearer than the reference, by index (a
    /// language whose top pair is below `min_frequency` is exhausted); the
    /// first with the largest score wins. The score is summed in f64 in
    /// language order, as the slow reference sums it. Cost: O(L) heap peeks
    /// and O(L) row lookups of L counts a merge, nothing sized by the text.
    pub(super) fn pick_excess(
        &mut self,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        min_frequency: u64,
        global_top: u64,
        pairs: &impl Slots,
    ) -> u64 {
        let Rule::Excess { reference: r, gain } = self.rule else { unreachable!("pick_excess needs the excess rule") };
        let r = self.resolve(r);
        let excess: Vec<f64> =
            (0..self.langs).map(|l| if self.dearer(l, r) { self.ratio(l, r) - 1.0 } else { 0.0 }).collect();
        let mut cands: Vec<(u32, u64)> = vec![(GLOBAL, global_top)];
        for (l, &e) in excess.iter().enumerate() {
            if e > 0.0 && !self.exhausted[l] {
                match self.peek(l, better) {
                    Some((c, key, _)) if c >= min_frequency => cands.push((l as u32, key)),
                    _ => self.exhausted[l] = true,
                }
            }
        }
        let score = |key: u64| {
            let slot = pairs.slot(key).expect("a candidate is a live pair");
            let r = row_at(self.langs, slot) + 1;
            let row = &self.rows[r..r + self.langs];
            let mut s = pairs.global_at(slot) as f64;
            for (&e, &c) in excess.iter().zip(row) {
                if e > 0.0 {
                    s += gain * e * c.max(0) as f64;
                }
            }
            s
        };
        let (mut best, mut best_s) = (cands[0], score(cands[0].1));
        for &c in &cands[1..] {
            let s = score(c.1);
            if s > best_s {
                best = c;
                best_s = s;
            }
        }
        self.chosen.push(best.0);
        best.1
    }

    /// Per language: (dev tokens before training, dev tokens now, merges picked for it).
    pub fn summary(&self) -> Vec<(u64, u64, u64)> {
        (0..self.langs)
            .map(|l| {
                let n = self.chosen.iter().filter(|&&c| c == l as u32).count() as u64;
                (self.dev_tokens_start[l], self.dev_tokens[l], n)
            })
            .collect()
    }

    pub fn chosen(&self) -> &[u32] {
        &self.chosen
    }

    /// Language `l`'s pairs with a count above zero, as (count, pair).
    #[cfg(test)]
    pub(super) fn counts(&self, pairs: &impl Slots, l: usize) -> Vec<(u64, u64)> {
        self.entries_of(pairs, l).into_iter().map(|(c, k, _)| (c, k)).collect()
    }
}
