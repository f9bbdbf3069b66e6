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
//! work.) Per language, a sparse map holds the pair counts of that
//! language's training text and a lazy-refresh heap orders them (the same
//! heap as plain training); a merge's deltas go to the map of the language
//! of each occurrence. Memory: the plain trainer's, plus the pieces only in
//! dev text, plus one map entry and up to two heap entries per (pair,
//! language) with a count above zero (and with the shared-pair variant one
//! more entry per (pair, language): [`Bands`]).
//!
//! Not handled: the paper's target-ratio variant (compression measured on
//! training text against given ratios);
//! weighting languages; a language with no training or no dev text (refused).

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

use super::heap::Heap;
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
    /// Per language: its training text's count of every pair above zero.
    counts: Vec<FxHashMap<u64, i64>>,
    /// Per language: (count, pair) entries, refreshed lazily against `counts`.
    heaps: Vec<Heap<(u64, u64)>>,
    /// Per language: tokens of its dev text under the merges so far.
    pub(super) dev_tokens: Vec<u64>,
    dev_tokens_start: Vec<u64>,
    norms: Vec<u64>,
    pub(super) global_merges: usize,
    exhausted: Vec<bool>,
    /// Per merge: the language it was picked for, or [`GLOBAL`].
    pub(super) chosen: Vec<u32>,
    /// (language, pair) of the pairs the merge under way created.
    touched: Vec<(u32, u64)>,
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
    /// The pair the merge under way merges (None between merges).
    merging: Option<u64>,
    /// The devlift rule (empty otherwise): every pair's count in the dev text
    /// of all languages, kept up to date by the merge walk ([`Parity::add_dev`]).
    pub(super) dev_pairs: FxHashMap<u64, i64>,
    /// The dev count of the occurrence the walk is at (set by its weighing).
    pub(super) dev_here: u64,
}

/// The top entry of a lazy heap of (count, key) whose current counts are
/// `current` (None: the key is gone), left in the heap; stale entries on
/// top are dropped or moved down to their current count first. `better` is
/// a total order on (count, key) and equal entries are interchangeable, so
/// what comes out of a heap depends on its contents alone: reading the top
/// in place leaves every later pop as popping and pushing it back would.
pub(super) fn peek_current(
    heap: &mut Heap<(u64, u64)>,
    current: impl Fn(u64) -> Option<u64>,
    better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
) -> Option<(u64, u64)> {
    loop {
        let top = *heap.peek()?;
        match current(top.1) {
            Some(cur) if cur == top.0 => return Some(top),
            Some(cur) => {
                heap.pop(better);
                heap.push((cur, top.1), better);
            }
            None => {
                heap.pop(better);
            }
        }
    }
}

/// The key of the candidate (count, key) with the largest `score`, the first on a tie.
fn best_scored(cands: &[(u64, u64)], score: impl Fn(u64) -> f64) -> u64 {
    let mut best = 0;
    let mut best_s = score(cands[0].1);
    for (i, c) in cands.iter().enumerate().skip(1) {
        let s = score(c.1);
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

/// The shared-pair variant's order of (global count, language count, pair):
/// the larger global count first, then the language's own order.
fn band_order<'a>(
    better: &'a impl Fn(&(u64, u64), &(u64, u64)) -> bool,
) -> impl Fn(&(u64, u64, u64), &(u64, u64, u64)) -> bool + 'a {
    move |a, b| a.0 > b.0 || (a.0 == b.0 && better(&(a.1, a.2), &(b.1, b.2)))
}

/// The shared-pair variant's key of a pair in one language's band: its
/// global count, or under the discount rule (`discount`: the reference
/// language's counts and `d`) `DISCOUNT_ONE · global − d · count_reference`,
/// under the lift rule (`lift`: the band language's own counts and `e`)
/// `DISCOUNT_ONE · global + e · count_language` (in 128 bits, clamped to
/// [0, u64::MAX]). Every count only falls and the reference's is part of the
/// global one, so the key only falls too (`d <= DISCOUNT_ONE`, `e >= 0`):
/// the lazy band entries stay upper bounds.
fn band_key<'a>(
    global: &'a impl Fn(u64) -> u64,
    discount: Option<(&'a FxHashMap<u64, i64>, i64)>,
    lift: Option<(&'a FxHashMap<u64, i64>, i64)>,
) -> impl Fn(u64) -> u64 + 'a {
    move |k| match (discount, lift) {
        (None, None) => global(k),
        _ => {
            let mut v = global(k) as i128 * DISCOUNT_ONE as i128;
            if let Some((rc, d)) = discount {
                v -= d as i128 * rc.get(&k).map_or(0, |&c| c as i128);
            }
            if let Some((lc, e)) = lift {
                v += e as i128 * lc.get(&k).map_or(0, |&c| c as i128);
            }
            v.clamp(0, u64::MAX as i128) as u64
        }
    }
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
    buckets: Vec<Heap<(u64, u64, u64)>>,
    /// Entries held, live or stale.
    held: usize,
    /// No bucket above this one holds an entry.
    high: usize,
}

impl Bands {
    fn build(
        counts: &FxHashMap<u64, i64>,
        global: &impl Fn(u64) -> u64,
        order: &impl Fn(&(u64, u64, u64), &(u64, u64, u64)) -> bool,
    ) -> Self {
        let mut by: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); BUCKETS];
        let mut high = 0;
        for (&k, &c) in counts {
            let b = bucket_of(c as u64);
            by[b].push((global(k), c as u64, k));
            high = high.max(b);
        }
        let buckets = by.into_iter().map(|v| Heap::from_vec(v, order)).collect();
        Bands { buckets, held: counts.len(), high }
    }

    fn push(&mut self, e: (u64, u64, u64), order: &impl Fn(&(u64, u64, u64), &(u64, u64, u64)) -> bool) {
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
            counts: (0..langs).map(|_| FxHashMap::default()).collect(),
            heaps: (0..langs).map(|_| Heap::with_capacity(0)).collect(),
            dev_tokens_start: dev_tokens.clone(),
            dev_tokens,
            norms,
            global_merges,
            exhausted: vec![false; langs],
            chosen: Vec::new(),
            touched: Vec::new(),
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
            merging: None,
            dev_pairs: FxHashMap::default(),
            dev_here: 0,
        }
    }

    /// Turn on the tolerance variant (> 0) and the shared-pair variant
    /// (>= 1); 0 leaves either off (see the module notes).
    pub(super) fn set_rule(&mut self, tolerance: f64, shared: f64, rule: Rule) {
        self.tolerance = tolerance;
        self.shared = shared;
        self.rule = rule;
    }

    /// The discount rule's (reference language, `d`); None under any other rule.
    fn discount(&self) -> Option<(usize, i64)> {
        match self.rule {
            Rule::Discount { reference, gain } => Some((reference, (gain * DISCOUNT_ONE as f64).round() as i64)),
            _ => None,
        }
    }

    /// The devlift rule is on: [`Parity::dev_pairs`] is kept.
    pub(super) fn tracks_dev(&self) -> bool {
        matches!(self.rule, Rule::Lift { dev: true, .. })
    }

    /// The devlift rule: the occurrence the walk is at changes `key`'s dev
    /// count, by its dev count up (`fresh`: a pair the merge creates) or down.
    /// The merged pair is skipped as in [`Parity::add`] (its entry leaves in
    /// [`Parity::after_merge`]).
    #[inline(always)]
    pub(super) fn add_dev(&mut self, key: u64, fresh: bool) {
        if self.dev_here == 0 || self.merging == Some(key) {
            return;
        }
        let d = self.dev_here as i64;
        match self.dev_pairs.entry(key) {
            Entry::Occupied(mut o) => {
                *o.get_mut() += if fresh { d } else { -d };
                debug_assert!(*o.get() >= 0);
                if *o.get() == 0 {
                    o.remove();
                }
            }
            Entry::Vacant(v) => {
                debug_assert!(fresh);
                v.insert(d);
            }
        }
    }

    /// The band's global count: the pair's count over every language's
    /// training text (`global`), or under the devlift rule its dev count.
    fn band_global<'a>(
        dev: Option<&'a FxHashMap<u64, i64>>,
        global: &'a impl Fn(u64) -> u64,
    ) -> impl Fn(u64) -> u64 + 'a {
        move |k| match dev {
            Some(m) => m.get(&k).map_or(0, |&c| c as u64),
            None => global(k),
        }
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

    /// A merge of `pair` starts: until [`Parity::after_merge`], changes to
    /// its own language counts are not applied (see [`Parity::add`]).
    pub(super) fn begin_merge(&mut self, pair: u64) {
        self.merging = Some(pair);
    }

    /// Add `delta` to language `l`'s count of `key` (an entry at zero leaves).
    /// `fresh`: a pair the merge under way created; its first occurrence in
    /// `l` (the entry is new) is noted for [`Parity::after_merge`], which
    /// gives it a heap entry. (A created pair never existed before, so a new
    /// entry is its first occurrence; noting only that one, not every
    /// occurrence, keeps the list to the distinct pairs, less to sort.)
    ///
    /// The pair being merged is skipped: every occurrence of it is merged or
    /// broken by the merge (no merge makes an `a` or a `b`), so each of its
    /// language counts ends at zero, and [`Parity::after_merge`] removes its
    /// entries at once, L removals instead of a probe per occurrence.
    #[inline(always)]
    pub(super) fn add(&mut self, l: u32, key: u64, delta: i64, fresh: bool) {
        if self.merging == Some(key) {
            return;
        }
        // one probe, a removal included
        match self.counts[l as usize].entry(key) {
            Entry::Occupied(mut o) => {
                *o.get_mut() += delta;
                debug_assert!(*o.get() >= 0);
                if *o.get() == 0 {
                    o.remove();
                }
            }
            Entry::Vacant(v) => {
                debug_assert!(delta >= 0);
                if delta != 0 {
                    v.insert(delta);
                    if fresh {
                        self.touched.push((l, key));
                    }
                }
            }
        }
    }

    /// After the setup's first count: every language's heap from its counts.
    pub(super) fn build_heaps(&mut self, better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool) {
        for l in 0..self.langs {
            let entries: Vec<(u64, u64)> = self.counts[l].iter().map(|(&k, &c)| (c as u64, k)).collect();
            self.heaps[l] = Heap::from_vec(entries, better);
        }
    }

    /// After a merge: the pairs it created enter the heaps of their languages
    /// (each once; a created pair never existed before, so pushing its final
    /// count is enough), and the shared-pair index once built (`global`: a
    /// pair's count over all languages, final now); a heap or index holding
    /// more than twice its live pairs is rebuilt (the lazy heap otherwise
    /// grows with the merges run).
    pub(super) fn after_merge(
        &mut self,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        slack: usize,
        global: &impl Fn(u64) -> u64,
    ) {
        if let Some(pair) = self.merging.take() {
            debug_assert_eq!(global(pair), 0, "a merge leaves no occurrence of its pair");
            for counts in &mut self.counts {
                counts.remove(&pair);
            }
            self.dev_pairs.remove(&pair);
        }
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        let order = band_order(better);
        let disc = self.discount();
        let lift = self.lift();
        let dev = self.tracks_dev().then_some(&self.dev_pairs);
        let global = &Self::band_global(dev, global);
        let counts = &self.counts;
        let key_in = |l: usize| band_key(global, disc.map(|(r, d)| (&counts[r], d)), lift.map(|e| (&counts[l], e)));
        for &(l, key) in &touched {
            if let Some(&c) = self.counts[l as usize].get(&key) {
                self.heaps[l as usize].push((c as u64, key), better);
                if let Some(b) = self.bands.get_mut(l as usize) {
                    b.push((key_in(l as usize)(key), c as u64, key), &order);
                }
            }
        }
        touched.clear();
        self.touched = touched;
        for l in 0..self.langs {
            if self.heaps[l].len() > 2 * self.counts[l].len() + slack {
                let entries: Vec<(u64, u64)> = self.counts[l].iter().map(|(&k, &c)| (c as u64, k)).collect();
                self.heaps[l] = Heap::from_vec(entries, better);
            }
            if self.bands.get(l).is_some_and(|b| b.held > 2 * self.counts[l].len() + slack) {
                self.bands[l] = Bands::build(&self.counts[l], &key_in(l), &order);
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
        global_count: &impl Fn(u64) -> u64,
    ) -> Option<u64> {
        #[cfg(test)]
        let (disc, lift, track) = (self.discount(), self.lift(), self.tracks_dev());
        loop {
            let l = self.worst()?;
            let heap = &mut self.heaps[l];
            let counts = &self.counts[l];
            let found = loop {
                let Some(top) = heap.pop(better) else { break None };
                let Some(&cur) = counts.get(&top.1) else { continue };
                if cur as u64 != top.0 {
                    heap.push((cur as u64, top.1), better);
                    continue;
                }
                if (cur as u64) < min_frequency {
                    break None; // counts only fall: this language stays below
                }
                break Some(top);
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
                    let all = &self.counts;
                    let score = |key: u64| {
                        // The languages' counts of a pair add up to its global
                        // count: once they do, every language after counts 0
                        // and its lookup is skipped (the sum, in language
                        // order, is the same f64). A pair in a few languages
                        // costs a few lookups, not L, for each of up to 64
                        // candidates a merge.
                        let total = global_count(key);
                        let (mut s, mut seen) = (0.0, 0u64);
                        for (m, &w) in weights.iter().enumerate() {
                            if seen == total {
                                break;
                            }
                            let c = all[m].get(&key).map_or(0, |&c| c as u64);
                            seen += c;
                            s += w * c as f64;
                        }
                        #[cfg(test)]
                        {
                            let mut full = 0.0;
                            for (m, &w) in weights.iter().enumerate() {
                                full += w * all[m].get(&key).map_or(0, |&c| c as u64) as f64;
                            }
                            assert_eq!(s, full, "the group score's early stop changed it");
                        }
                        s
                    };
                    let heap = &mut self.heaps[l];
                    // tests: the walk picks as taking the candidates out did
                    #[cfg(test)]
                    let taken = {
                        let mut h = heap.clone();
                        Self::candidates_pick(
                            &mut h,
                            &all[l],
                            top,
                            self.shared,
                            min_frequency,
                            better,
                            GROUP_CANDIDATES,
                            score,
                        )
                    };
                    let key = Self::candidates_walk(
                        heap,
                        &all[l],
                        top,
                        self.shared,
                        min_frequency,
                        better,
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
                        let disc = disc.map(|(r, d)| (&self.counts[r], d));
                        let gl = Self::band_global(track.then_some(&self.dev_pairs), global_count);
                        let key_of = band_key(&gl, disc, lift.map(|e| (&self.counts[l], e)));
                        let g = |k: u64| key_of(k) as f64;
                        Self::candidates_pick(heap, counts, top, self.shared, min_frequency, better, usize::MAX, g)
                    };
                    #[cfg(not(test))]
                    heap.push(top, better);
                    let key = self.shared_pick(l, top.0, min_frequency, better, global_count);
                    #[cfg(test)]
                    assert_eq!(key, scan, "the banded shared-pair pick differs from the scan");
                    Some(key)
                }
                (other, _) => other.map(|t| t.1),
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
        global: &impl Fn(u64) -> u64,
    ) -> u64 {
        let order = band_order(better);
        let disc = self.discount();
        let lift = self.lift();
        let dev = self.tracks_dev().then_some(&self.dev_pairs);
        let global = &Self::band_global(dev, global);
        let key_in =
            |m: usize| band_key(global, disc.map(|(r, d)| (&self.counts[r], d)), lift.map(|e| (&self.counts[m], e)));
        if self.bands.is_empty() {
            self.bands = (0..self.langs).map(|m| Bands::build(&self.counts[m], &key_in(m), &order)).collect();
        }
        let global = &key_in(l);
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
        let counts = &self.counts[l];
        let bands = &mut self.bands[l];
        let (lo, hi) = (bucket_of(t), bucket_of(top));
        // no pair of `l` counts above `top`: every entry above its bucket is stale
        for b in (hi + 1..=bands.high).rev() {
            while let Some(e) = bands.buckets[b].pop(&order) {
                bands.held -= 1;
                if let Some(&c) = counts.get(&e.2) {
                    bands.push((global(e.2), c as u64, e.2), &order);
                }
            }
        }
        bands.high = hi;
        let mut best: Option<(u64, u64, u64)> = None;
        let mut aside = Vec::new();
        for b in (lo..=hi).rev() {
            while let Some(&e) = bands.buckets[b].peek() {
                if best.is_some_and(|x| !order(&e, &x)) {
                    break;
                }
                bands.buckets[b].pop(&order);
                bands.held -= 1;
                let Some(&c) = counts.get(&e.2) else { continue };
                let cur = (global(e.2), c as u64, e.2);
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
        heap: &mut Heap<(u64, u64)>,
        counts: &FxHashMap<u64, i64>,
        top: (u64, u64),
        shared: f64,
        min_frequency: u64,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        limit: usize,
        score: impl Fn(u64) -> f64,
    ) -> u64 {
        let floor = top.0 as f64;
        let mut cands = vec![top];
        while cands.len() < limit {
            let Some(e) = heap.pop(better) else { break };
            let Some(&cur) = counts.get(&e.1) else { continue };
            if cur as u64 != e.0 {
                heap.push((cur as u64, e.1), better);
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
    /// left. `top` (popped by the caller, current) goes back. Cost: O(limit ·
    /// log limit) a merge plus O(log n) per stale entry met, against
    /// O(limit · log n) for taking the candidates out.
    #[allow(clippy::too_many_arguments)]
    fn candidates_walk(
        heap: &mut Heap<(u64, u64)>,
        counts: &FxHashMap<u64, i64>,
        top: (u64, u64),
        shared: f64,
        min_frequency: u64,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        limit: usize,
        score: impl Fn(u64) -> f64,
    ) -> u64 {
        const NO_INDEX: usize = usize::MAX;
        let floor = top.0 as f64;
        let mut cands = vec![top];
        let mut stale: Vec<(usize, u64)> = Vec::new();
        let v = heap.as_slice();
        let order = |a: &((u64, u64), usize), b: &((u64, u64), usize)| better(&a.0, &b.0);
        let mut front: Heap<((u64, u64), usize)> = Heap::with_capacity(2 * limit.min(v.len()) + 2);
        if let Some(&root) = v.first() {
            front.push((root, 0), &order);
        }
        while cands.len() < limit {
            let Some((e, i)) = front.pop(&order) else { break };
            if i != NO_INDEX {
                for c in [2 * i + 1, 2 * i + 2] {
                    if let Some(&x) = v.get(c) {
                        front.push((x, c), &order);
                    }
                }
                let cur = counts.get(&e.1).map(|&c| c as u64);
                if cur != Some(e.0) {
                    stale.push((i, cur.unwrap_or(0)));
                    if let Some(c) = cur {
                        front.push(((c, e.1), NO_INDEX), &order);
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
            let key = heap.as_slice()[i].1;
            heap.lower_at(i, (c, key), better);
        }
        heap.push(top, better);
        best_scored(&cands, score)
    }

    /// Language `l`'s current top pair (count, key), left in its heap; None
    /// when it has no pair left. A current top is read in place (the excess
    /// rule peeks every dear language a merge: a pop and a push each was most
    /// of its pick); stale tops are refreshed as a pop would.
    fn peek(&mut self, l: usize, better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool) -> Option<(u64, u64)> {
        peek_current(&mut self.heaps[l], |k| self.counts[l].get(&k).map(|&c| c as u64), better)
    }

    /// The excess rule's pick (module notes): `global_top` is plain BPE's
    /// pick (its count at least `min_frequency`), `global_count` any pair's
    /// count over all languages. Candidates, in order: `global_top`, then the
    /// top pair of each language dearer than the reference, by index (a
    /// language whose top pair is below `min_frequency` is exhausted); the
    /// first with the largest score wins. The score is summed in f64 in
    /// language order, as the slow reference sums it. Cost: O(L) heap peeks
    /// and O(L²) map lookups a merge, nothing sized by the text.
    pub(super) fn pick_excess(
        &mut self,
        better: &impl Fn(&(u64, u64), &(u64, u64)) -> bool,
        min_frequency: u64,
        global_top: u64,
        global_count: &impl Fn(u64) -> u64,
    ) -> u64 {
        let Rule::Excess { reference: r, gain } = self.rule else { unreachable!("pick_excess needs the excess rule") };
        let r = self.resolve(r);
        let excess: Vec<f64> =
            (0..self.langs).map(|l| if self.dearer(l, r) { self.ratio(l, r) - 1.0 } else { 0.0 }).collect();
        let mut cands: Vec<(u32, u64)> = vec![(GLOBAL, global_top)];
        for (l, &e) in excess.iter().enumerate() {
            if e > 0.0 && !self.exhausted[l] {
                match self.peek(l, better) {
                    Some((c, key)) if c >= min_frequency => cands.push((l as u32, key)),
                    _ => self.exhausted[l] = true,
                }
            }
        }
        let score = |key: u64| {
            let mut s = global_count(key) as f64;
            for (m, &e) in excess.iter().enumerate() {
                if e > 0.0 {
                    s += gain * e * self.counts[m].get(&key).map_or(0, |&c| c as u64) as f64;
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

    #[cfg(test)]
    pub(super) fn counts(&self, l: usize) -> &FxHashMap<u64, i64> {
        &self.counts[l]
    }
}
