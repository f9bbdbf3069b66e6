//! The seven training strategies: one enum, one function each.
//!
//! Every rule here has a slow, obviously-correct twin in
//! `python/tokenforge/reference/lz78.py`; the parity tests demand identical
//! dictionaries. All tie-breaks are total orders on integers (counts, codes,
//! ranks, creation order), so results do not depend on the thread count.
//!
//! Inputs: the *online* strategies (standard, frequency_gated, and the pools
//! of the pruning strategies) see the corpus in order, chunk by chunk. The
//! pruning strategies also see the corpus as unique chunks with u64 counts
//! (`chunks`), which is all greedy usage counting needs; memory is bounded by
//! the unique chunks and the dictionary, never the corpus.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::trie::{ByteTrie, CharTrie, NONE};
use super::usage::{groups, PoolTrie};
use super::{DictEntry, Dictionary};
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;

/// Unique chunks of a corpus with their counts, sorted by bytes.
pub type Chunks = [(Box<[u8]>, u64)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Standard,
    FrequencyGated,
    MultiRound,
    CostAdjusted,
    SmartPrune,
    FlatPrune,
    Compressed,
}

impl Strategy {
    pub const ALL: [Strategy; 7] = [
        Strategy::Standard,
        Strategy::FrequencyGated,
        Strategy::MultiRound,
        Strategy::CostAdjusted,
        Strategy::SmartPrune,
        Strategy::FlatPrune,
        Strategy::Compressed,
    ];

    pub fn parse(s: &str) -> Result<Self> {
        Strategy::ALL.iter().copied().find(|x| x.name() == s).ok_or_else(|| {
            Error::Invalid(format!(
                "unknown LZ78 strategy {s:?}; expected one of {}",
                Strategy::ALL.iter().map(|x| x.name()).collect::<Vec<_>>().join(", ")
            ))
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Standard => "standard",
            Strategy::FrequencyGated => "frequency_gated",
            Strategy::MultiRound => "multi_round",
            Strategy::CostAdjusted => "cost_adjusted",
            Strategy::SmartPrune => "smart_prune",
            Strategy::FlatPrune => "flat_prune",
            Strategy::Compressed => "compressed",
        }
    }

    /// Does the strategy re-count usage over the corpus (needs the unique chunks)?
    pub fn needs_chunks(self) -> bool {
        !matches!(self, Strategy::Standard | Strategy::FrequencyGated)
    }

    /// Does the strategy build a dictionary online over the corpus in order?
    pub fn needs_online(self) -> bool {
        !matches!(self, Strategy::FlatPrune)
    }
}

/// Strategy parameters. [`Params::defaults`] gives the tuned defaults that
/// docs/algorithms.md documents with their measurements.
#[derive(Clone, Debug)]
pub struct Params {
    /// Builder of the pool that multi_round, cost_adjusted, smart_prune and
    /// compressed prune: `Standard` or `FrequencyGated`.
    pub pool: Strategy,
    /// Pool size (or flat_prune's candidate count, or compressed's build
    /// multiple) as a multiple of N.
    pub pool_factor: f64,
    /// Pruning rounds; sizes shrink linearly from the pool size to N.
    pub rounds: u32,
    /// frequency_gated: evict after this many phrases parsed with a full
    /// dictionary (0 = the capacity).
    pub evict_interval: u64,
    /// frequency_gated: fraction of the leaves evicted each time.
    pub evict_fraction: f64,
    /// frequency_gated: if > 0, evict every leaf with fewer references
    /// instead of a fraction.
    pub evict_threshold: u64,
    /// frequency_gated: multiply every reference count by this after an
    /// eviction (1.0 = no decay), rounding down.
    pub decay: f64,
    /// flat_prune: longest candidate, in characters.
    pub max_chars: usize,
    /// flat_prune: fraction of entries dropped per leave-one-out round.
    pub drop_fraction: f64,
    /// flat_prune: bound on distinct substrings held while counting
    /// candidates (lossy beyond it: the less frequent half is dropped).
    pub max_substrings: usize,
}

impl Params {
    pub fn defaults(s: Strategy) -> Self {
        Params {
            pool: Strategy::FrequencyGated,
            pool_factor: match s {
                Strategy::Compressed => 2.0,
                Strategy::SmartPrune | Strategy::FlatPrune => 8.0,
                _ => 4.0,
            },
            rounds: if s == Strategy::SmartPrune { 6 } else { 3 },
            evict_interval: 0,
            evict_fraction: 0.1,
            evict_threshold: 0,
            decay: 1.0,
            max_chars: 16,
            drop_fraction: 0.1,
            max_substrings: 1 << 23,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if !matches!(self.pool, Strategy::Standard | Strategy::FrequencyGated) {
            return bad(format!("pool must be standard or frequency_gated, not {}", self.pool.name()));
        }
        if !(self.pool_factor >= 1.0 && self.pool_factor <= 1000.0) {
            return bad(format!("pool_factor must be between 1 and 1000, not {}", self.pool_factor));
        }
        if self.rounds < 1 || self.rounds > 1000 {
            return bad(format!("rounds must be between 1 and 1000, not {}", self.rounds));
        }
        if !(self.evict_fraction > 0.0 && self.evict_fraction <= 1.0) {
            return bad(format!("evict_fraction must be in (0, 1], not {}", self.evict_fraction));
        }
        if !(self.decay > 0.0 && self.decay <= 1.0) {
            return bad(format!("decay must be in (0, 1], not {}", self.decay));
        }
        if self.max_chars < 2 || self.max_chars > 256 {
            return bad(format!("max_chars must be between 2 and 256, not {}", self.max_chars));
        }
        if !(self.drop_fraction > 0.0 && self.drop_fraction <= 1.0) {
            return bad(format!("drop_fraction must be in (0, 1], not {}", self.drop_fraction));
        }
        if self.max_substrings < 1024 {
            return bad(format!("max_substrings must be at least 1024, not {}", self.max_substrings));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// online building: standard and frequency_gated
// ---------------------------------------------------------------------------

/// Online LZ78 over the corpus in order, with a capacity.
///
/// A phrase starts at the root and follows children while they match; the
/// first character without a child ends it. While the dictionary has room
/// that character creates the entry (node, char). Phrases never cross a chunk
/// boundary. `standard` stops when the dictionary is full. `frequency_gated`
/// keeps going: every phrase parsed with a full dictionary adds one reference
/// to the node it matched (the last phrase of a chunk, cut by the boundary,
/// too), and every `interval` such phrases the least-referenced leaves are
/// evicted (fewest references first, then the oldest), freeing slots. If
/// the corpus ends before those slots refill, the last eviction's victims are
/// put back (most referenced first) so the dictionary ends full.
#[derive(Clone, Debug)]
pub struct OnlineBuilder {
    pub trie: CharTrie,
    capacity: usize,
    gated: bool,
    interval: u64,
    fraction: f64,
    threshold: u64,
    decay: f64,
    full_phrases: u64,
    done: bool,
    pub evictions: u64,
    pub evicted: u64,
    /// The last eviction's victims: (parent node, char, refs, seq).
    last_victims: Vec<(u32, char, u64, u64)>,
}

impl OnlineBuilder {
    pub fn new(capacity: usize, gated: bool, p: &Params) -> Self {
        OnlineBuilder {
            trie: CharTrie::new(),
            capacity,
            gated,
            interval: if p.evict_interval == 0 { capacity as u64 } else { p.evict_interval },
            fraction: p.evict_fraction,
            threshold: p.evict_threshold,
            decay: p.decay,
            full_phrases: 0,
            done: capacity == 0,
            evictions: 0,
            evicted: 0,
            last_victims: Vec::new(),
        }
    }

    /// Standard LZ78 stops reading once the dictionary is full.
    pub fn done(&self) -> bool {
        self.done
    }

    #[inline]
    fn reference(&mut self, node: u32) {
        if node != 0 {
            self.trie.nodes[node as usize].refs += 1;
        }
        self.full_phrases += 1;
        if self.full_phrases >= self.interval {
            self.evict();
            self.full_phrases = 0;
        }
    }

    fn evict(&mut self) {
        let nodes = &self.trie.nodes;
        let mut leaves: Vec<u32> =
            (1..nodes.len() as u32).filter(|&i| nodes[i as usize].alive && nodes[i as usize].children == 0).collect();
        let victims: Vec<u32> = if self.threshold > 0 {
            leaves.into_iter().filter(|&i| nodes[i as usize].refs < self.threshold).collect()
        } else {
            let k = ((leaves.len() as f64 * self.fraction).floor() as usize).max(1).min(leaves.len());
            if k == 0 {
                return;
            }
            let keyf = |&i: &u32| (nodes[i as usize].refs, nodes[i as usize].seq);
            if k < leaves.len() {
                leaves.select_nth_unstable_by_key(k - 1, keyf);
            }
            leaves.truncate(k);
            leaves
        };
        self.last_victims.clear();
        for &v in &victims {
            let n = &self.trie.nodes[v as usize];
            self.last_victims.push((n.parent, n.ch, n.refs, n.seq));
            self.trie.remove_leaf(v);
        }
        self.evicted += victims.len() as u64;
        self.evictions += 1;
        if self.decay < 1.0 {
            let d = self.decay;
            for n in self.trie.nodes.iter_mut() {
                if n.alive {
                    n.refs = (n.refs as f64 * d).floor() as u64;
                }
            }
        }
    }

    /// One chunk (phrases restart at its start).
    pub fn feed_chunk(&mut self, chunk: &str) {
        if self.done {
            return;
        }
        let mut cur = 0u32;
        for c in chunk.chars() {
            if let Some(n) = self.trie.child(cur, c) {
                cur = n;
                continue;
            }
            if self.trie.len() < self.capacity {
                self.trie.add(cur, c);
                if !self.gated && self.trie.len() >= self.capacity {
                    self.done = true;
                    return;
                }
            } else {
                self.reference(cur);
            }
            cur = 0;
        }
        if cur != 0 && self.gated && self.trie.len() >= self.capacity {
            self.reference(cur);
        }
    }

    /// A text, split into chunks by `pretok` (`Whole`: the text is one chunk).
    pub fn feed_text(&mut self, text: &str, pretok: &Pretokenizer) -> Result<()> {
        if self.done {
            return Ok(());
        }
        pretok.split(text, |c| self.feed_chunk(c))
    }

    /// If the corpus ended before the slots freed by the last eviction were
    /// refilled, put back that eviction's victims, most referenced first
    /// (then the newest), so the dictionary has its full capacity. Their
    /// parents are alive: only leaves are evicted and nothing was evicted since.
    fn restore_last_victims(&mut self) {
        let mut v = std::mem::take(&mut self.last_victims);
        v.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.cmp(&a.3)));
        for (parent, ch, _, seq) in v {
            if self.trie.len() >= self.capacity {
                break;
            }
            if self.trie.child(parent, ch).is_none() {
                self.trie.add_with_seq(parent, ch, seq);
            }
        }
    }

    /// The dictionary: live entries in creation order, codes 1.., parents remapped.
    pub fn into_dictionary(mut self) -> Dictionary {
        self.restore_last_victims();
        let order = self.trie.live_in_order();
        let mut code = vec![0u32; self.trie.nodes.len()];
        let mut entries = Vec::with_capacity(order.len());
        let mut patterns: Vec<String> = Vec::with_capacity(order.len());
        for (k, &i) in order.iter().enumerate() {
            code[i as usize] = k as u32 + 1;
            let n = &self.trie.nodes[i as usize];
            let parent = if n.parent == 0 { 0 } else { code[n.parent as usize] };
            let mut pat = if parent == 0 { String::new() } else { patterns[parent as usize - 1].clone() };
            pat.push(n.ch);
            patterns.push(pat.clone());
            entries.push(DictEntry { parent, ch: n.ch, pattern: pat, output: true });
        }
        Dictionary { entries, flat: false }
    }
}

/// `standard`: the online builder without eviction.
pub fn standard(builder: OnlineBuilder) -> Dictionary {
    builder.into_dictionary()
}

/// `frequency_gated`: the online builder with eviction.
pub fn frequency_gated(builder: OnlineBuilder) -> Dictionary {
    builder.into_dictionary()
}

// ---------------------------------------------------------------------------
// usage counting
// ---------------------------------------------------------------------------

/// Total tokens (byte fallbacks included) of greedy longest match.
pub fn total_tokens(trie: &ByteTrie, chunks: &Chunks) -> u64 {
    groups(chunks)
        .par_iter()
        .map(|g| {
            let mut n = 0u64;
            for (s, w) in g.iter() {
                let mut k = 0u64;
                trie.parse(s, NONE, |_, _, _| k += 1);
                n += k * w;
            }
            n
        })
        .sum()
}

// ---------------------------------------------------------------------------
// tree pruning: multi_round, cost_adjusted, smart_prune, compressed
// ---------------------------------------------------------------------------

/// Target size of round `r` (1-based) of `rounds`, shrinking linearly from `pool` to `n`.
pub fn round_target(pool: usize, n: usize, r: u32, rounds: u32) -> usize {
    n + (pool - n) * (rounds - r) as usize / rounds as usize
}

/// A pruning round's usage counter. Given the mask of pool codes counted as
/// outputs this round (`mask[code]`, pool entries + 1 long), it returns how
/// often greedy longest match over the corpus's chunks emits each code (the
/// others are pass-through prefixes), weighted by the chunk counts: what
/// [`usage_counts`](super::usage::usage_counts) gives over the chunks here ([`local_usage`]), or what a
/// cluster's workers give, each over its own chunks, summed.
pub type UsageFn<'a> = dyn FnMut(&[bool]) -> Result<Vec<u64>> + 'a;

/// The single-machine [`UsageFn`]: the pool's trie (built at the first
/// round), its outputs switched to each round's mask, over `chunks`.
pub fn local_usage<'a>(pool: &'a Dictionary, chunks: &'a Chunks) -> impl FnMut(&[bool]) -> Result<Vec<u64>> + 'a {
    let mut trie: Option<PoolTrie> = None;
    move |mask: &[bool]| {
        let t = match &mut trie {
            Some(t) => t,
            None => trie.insert(PoolTrie::new(pool)?),
        };
        t.set_mask(mask)?;
        Ok(t.usage(chunks).into_vec())
    }
}

/// One round's counts, checked: one per pool code.
fn round_usage(usage: &mut UsageFn, mask: &[bool]) -> Result<Vec<u64>> {
    let counts = usage(mask)?;
    if counts.len() != mask.len() {
        return Err(Error::Invalid(format!(
            "usage counts of {} codes for a pool of {} codes (counted with another pool?)",
            counts.len(),
            mask.len()
        )));
    }
    Ok(counts)
}

/// Keep the entries with `keep[code]`, in code order, parents remapped.
/// Every kept entry's parent must be kept (or be the root).
fn restrict(pool: &Dictionary, keep: &[bool], output: &[bool]) -> Dictionary {
    // outputs first, then prefix-only, each in pool order
    let mut order: Vec<usize> = (1..=pool.entries.len()).filter(|&c| keep[c] && output[c]).collect();
    order.extend((1..=pool.entries.len()).filter(|&c| keep[c] && !output[c]));
    let mut code = vec![0u32; pool.entries.len() + 1];
    for (k, &c) in order.iter().enumerate() {
        code[c] = k as u32 + 1;
    }
    let entries = order
        .iter()
        .map(|&c| {
            let e = &pool.entries[c - 1];
            DictEntry { parent: code[e.parent as usize], ch: e.ch, pattern: e.pattern.clone(), output: output[c] }
        })
        .collect();
    Dictionary { entries, flat: false }
}

/// `multi_round`: count usage, keep the most-used entries with the ancestors
/// they need, shrinking linearly from the pool to N over `rounds` rounds.
pub fn multi_round(pool: Dictionary, chunks: &Chunks, n: usize, rounds: u32) -> Result<Dictionary> {
    prune(Strategy::MultiRound, &pool, &mut local_usage(&pool, chunks), n, rounds)
}

/// `cost_adjusted`: as multi_round, but greedy by count / (ancestor slots it
/// would newly force in, itself included), values updated as ancestors get kept.
pub fn cost_adjusted(pool: Dictionary, chunks: &Chunks, n: usize, rounds: u32) -> Result<Dictionary> {
    prune(Strategy::CostAdjusted, &pool, &mut local_usage(&pool, chunks), n, rounds)
}

/// The pool strategies (multi_round, cost_adjusted, smart_prune,
/// compressed) with the usage counting as a parameter: the one home of their
/// rules, whether the chunks are here or on a cluster's workers.
pub fn prune(strategy: Strategy, pool: &Dictionary, usage: &mut UsageFn, n: usize, rounds: u32) -> Result<Dictionary> {
    match strategy {
        Strategy::MultiRound => prune_tree(pool, usage, n, rounds, false),
        Strategy::CostAdjusted => prune_tree(pool, usage, n, rounds, true),
        Strategy::SmartPrune | Strategy::Compressed => {
            let output = select_outputs(pool, usage, n, rounds)?;
            Ok(with_ancestors(pool, &output))
        }
        s => Err(Error::Invalid(format!("strategy {} does not prune a pool", s.name()))),
    }
}

/// Each round counts usage with the alive entries as outputs (an entry not
/// alive has no alive descendant: the selections keep ancestors), so the
/// pool's trie with the others switched off parses as a trie of the alive
/// entries alone would.
fn prune_tree(pool: &Dictionary, usage: &mut UsageFn, n: usize, rounds: u32, cost: bool) -> Result<Dictionary> {
    let p = pool.entries.len();
    if p <= n {
        return Ok(pool.clone());
    }
    let mut alive = vec![true; p + 1];
    alive[0] = false;
    for r in 1..=rounds {
        let target = round_target(p, n, r, rounds);
        let counts = round_usage(usage, &alive)?;
        let kept = if cost {
            select_cost_adjusted(pool, &alive, &counts, target)
        } else {
            select_most_used(pool, &alive, &counts, target)
        };
        alive = kept;
    }
    let out = alive.clone();
    Ok(restrict(pool, &alive, &out))
}

fn select_most_used(pool: &Dictionary, alive: &[bool], counts: &[u64], target: usize) -> Vec<bool> {
    let mut order: Vec<usize> = (1..alive.len()).filter(|&c| alive[c]).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let mut kept = vec![false; alive.len()];
    let mut nkept = 0;
    let mut need = Vec::new();
    for c in order {
        if nkept >= target {
            break;
        }
        if kept[c] {
            continue;
        }
        need.clear();
        let mut u = c;
        while u != 0 && !kept[u] {
            need.push(u);
            u = pool.entries[u - 1].parent as usize;
        }
        if nkept + need.len() <= target {
            for &x in &need {
                kept[x] = true;
            }
            nkept += need.len();
        }
    }
    kept
}

#[derive(PartialEq, Eq)]
struct Cand {
    count: u64,
    cost: u32,
    code: u32,
}

impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        // larger count/cost first, then the smaller code
        let a = self.count as u128 * o.cost as u128;
        let b = o.count as u128 * self.cost as u128;
        a.cmp(&b).then(o.code.cmp(&self.code))
    }
}

impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

fn select_cost_adjusted(pool: &Dictionary, alive: &[bool], counts: &[u64], target: usize) -> Vec<bool> {
    let m = alive.len();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); m];
    for (c, _) in alive.iter().enumerate().skip(1).filter(|(_, &a)| a) {
        {
            let p = pool.entries[c - 1].parent as usize;
            children[p].push(c as u32);
        }
    }
    // cost = nodes on the path to the root not yet kept (itself included)
    let mut cost = vec![0u32; m];
    for c in 1..m {
        if alive[c] {
            let p = pool.entries[c - 1].parent as usize;
            cost[c] = cost[p] + 1; // parents precede children in code order
        }
    }
    let mut heap: BinaryHeap<Cand> =
        (1..m).filter(|&c| alive[c]).map(|c| Cand { count: counts[c], cost: cost[c], code: c as u32 }).collect();
    let mut kept = vec![false; m];
    let mut nkept = 0usize;
    let mut stack = Vec::new();
    while let Some(x) = heap.pop() {
        if nkept >= target {
            break;
        }
        let c = x.code as usize;
        if kept[c] || x.cost != cost[c] {
            continue; // kept already, or a stale value
        }
        if nkept + cost[c] as usize > target {
            continue; // does not fit now; re-pushed if its cost falls
        }
        let mut u = c;
        while u != 0 && !kept[u] {
            kept[u] = true;
            nkept += 1;
            // every descendant of u now needs one slot fewer
            stack.clear();
            stack.extend(children[u].iter().copied());
            while let Some(d) = stack.pop() {
                let d = d as usize;
                cost[d] -= 1;
                if !kept[d] {
                    heap.push(Cand { count: counts[d], cost: cost[d], code: d as u32 });
                }
                stack.extend(children[d].iter().copied());
            }
            u = pool.entries[u - 1].parent as usize;
        }
    }
    kept
}

/// Output selection with an output-only budget: only emitted entries take a
/// slot. Rounds shrink the output set linearly from the pool to N; each round
/// counts greedy usage over the current outputs (the others stay in the trie
/// as pass-through prefixes) and keeps the most used. Returns `output[code]`.
pub fn select_outputs(pool: &Dictionary, usage: &mut UsageFn, n: usize, rounds: u32) -> Result<Vec<bool>> {
    let p = pool.entries.len();
    let mut output = vec![true; p + 1];
    output[0] = false;
    if p <= n {
        return Ok(output);
    }
    for r in 1..=rounds {
        let target = round_target(p, n, r, rounds);
        let counts = round_usage(usage, &output)?;
        let mut order: Vec<usize> = (1..=p).filter(|&c| output[c]).collect();
        order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
        for &c in &order[target.min(order.len())..] {
            output[c] = false;
        }
    }
    Ok(output)
}

/// Outputs plus every ancestor they need (as prefix-only entries).
fn with_ancestors(pool: &Dictionary, output: &[bool]) -> Dictionary {
    let mut keep = output.to_vec();
    for c in (1..keep.len()).rev() {
        if keep[c] {
            let p = pool.entries[c - 1].parent as usize;
            keep[p] = true;
        }
    }
    keep[0] = false;
    restrict(pool, &keep, output)
}

/// `smart_prune`: [`select_outputs`] on the pool; ancestors stay as prefix-only nodes.
pub fn smart_prune(pool: Dictionary, chunks: &Chunks, n: usize, rounds: u32) -> Result<Dictionary> {
    prune(Strategy::SmartPrune, &pool, &mut local_usage(&pool, chunks), n, rounds)
}

/// `compressed`: the dictionary a Patricia trie is built from. The base is
/// built at `pool_factor`×N and N outputs are selected as in smart_prune
/// (nothing to select when the multiple is 1). The caller builds the
/// Patricia trie ([`super::patricia::Patricia`]).
pub fn compressed(pool: Dictionary, chunks: &Chunks, n: usize, rounds: u32) -> Result<Dictionary> {
    prune(Strategy::Compressed, &pool, &mut local_usage(&pool, chunks), n, rounds)
}

// ---------------------------------------------------------------------------
// flat_prune
// ---------------------------------------------------------------------------

/// Candidate strings for flat_prune: substrings of 1..=`max_chars`
/// characters of the chunks (single ASCII characters excluded: byte fallback
/// covers them at one token), scored by the bytes they could save,
/// `occurrences × (bytes − 1)`, ranked by score (ties: bytes ascending).
/// Returns the best `m`.
pub fn flat_candidates(chunks: &Chunks, m: usize, max_chars: usize, max_substrings: usize) -> Vec<Box<[u8]>> {
    let mut map: FxHashMap<&[u8], u64> = FxHashMap::default();
    let mut starts: Vec<usize> = Vec::new();
    for (s, w) in chunks {
        let s: &[u8] = s;
        starts.clear();
        starts.extend((0..s.len()).filter(|&i| (s[i] & 0xC0) != 0x80));
        starts.push(s.len());
        for a in 0..starts.len() - 1 {
            let end = (a + max_chars).min(starts.len() - 1);
            for b in a + 1..=end {
                let (i, j) = (starts[a], starts[b]);
                if j - i == 1 {
                    continue; // a single ASCII character (or a stray byte)
                }
                *map.entry(&s[i..j]).or_insert(0) += w * (j - i - 1) as u64;
            }
        }
        if map.len() > max_substrings {
            // lossy: drop the less frequent half (by score; ties all go)
            let mut scores: Vec<u64> = map.values().copied().collect();
            let mid = scores.len() / 2;
            let (_, &mut cut, _) = scores.select_nth_unstable(mid);
            map.retain(|_, v| *v > cut);
        }
    }
    let mut v: Vec<(&[u8], u64)> = map.into_iter().collect();
    let cmp = |a: &(&[u8], u64), b: &(&[u8], u64)| b.1.cmp(&a.1).then(a.0.cmp(b.0));
    if v.len() > m && m > 0 {
        v.select_nth_unstable_by(m - 1, cmp);
        v.truncate(m);
    }
    v.sort_unstable_by(cmp);
    v.truncate(m);
    v.into_iter().map(|(s, _)| s.into()).collect()
}

/// For each id, how many more tokens greedy longest match would emit over
/// the chunks if that id alone were removed (exact; may be negative).
///
/// Removing e changes the parse only from each place e was emitted until the
/// new parse lands on a boundary of the old one whose old token is not e:
/// from there on greedy matching sees the same longest matches as before. So
/// each occurrence costs a short re-parse, not a re-parse of the corpus.
pub fn leave_one_out(trie: &ByteTrie, chunks: &Chunks, n_ids: usize) -> Vec<i64> {
    let parts: Vec<Vec<i64>> = groups(chunks)
        .par_iter()
        .map(|g| {
            let mut delta = vec![0i64; n_ids];
            let mut stamp = vec![u32::MAX; n_ids];
            let mut covered = vec![0usize; n_ids];
            let mut toks: Vec<(u32, u32)> = Vec::new(); // (start, id)
            let mut at: Vec<u32> = Vec::new();
            for (ci, (s, w)) in g.iter().enumerate() {
                let s: &[u8] = s;
                toks.clear();
                at.clear();
                at.resize(s.len() + 1, NONE);
                trie.parse(s, NONE, |i, _, id| {
                    at[i] = toks.len() as u32;
                    toks.push((i as u32, id));
                });
                let ntok = toks.len();
                for k in 0..ntok {
                    let (start, e) = toks[k];
                    if e == NONE {
                        continue;
                    }
                    let e_us = e as usize;
                    if stamp[e_us] == ci as u32 && covered[e_us] > start as usize {
                        continue;
                    }
                    let mut p = start as usize;
                    let mut new = 0i64;
                    let q = loop {
                        p += match trie.longest(&s[p..], e) {
                            Some((_, l)) => l,
                            None => 1,
                        };
                        new += 1;
                        if p == s.len() {
                            break ntok;
                        }
                        let t = at[p];
                        if t != NONE && toks[t as usize].1 != e {
                            break t as usize;
                        }
                    };
                    delta[e_us] += *w as i64 * (new - (q - k) as i64);
                    stamp[e_us] = ci as u32;
                    covered[e_us] = p;
                }
            }
            delta
        })
        .collect();
    let mut total = vec![0i64; n_ids];
    for p in parts {
        for (t, x) in total.iter_mut().zip(p) {
            *t += x;
        }
    }
    total
}

/// `flat_prune`: N independent strings. Start from the best
/// `pool_factor`×N candidates; repeatedly drop the `drop_fraction` of entries
/// whose removal adds the fewest tokens (leave-one-out, exact; ties: the
/// lower-ranked candidate goes first) until N remain.
pub fn flat_prune(chunks: &Chunks, n: usize, p: &Params) -> Result<(Dictionary, usize)> {
    let m = ((n as f64) * p.pool_factor).floor() as usize;
    let cands = flat_candidates(chunks, m, p.max_chars, p.max_substrings);
    let ncand = cands.len();
    let mut alive: Vec<usize> = (0..cands.len()).collect();
    while alive.len() > n {
        let trie = ByteTrie::build(alive.iter().map(|&i| (&cands[i][..], i as u32)))?;
        let delta = leave_one_out(&trie, chunks, cands.len());
        let k = ((alive.len() as f64 * p.drop_fraction).floor() as usize).max(1).min(alive.len() - n);
        let mut order = alive.clone();
        order.sort_by(|&a, &b| delta[a].cmp(&delta[b]).then(b.cmp(&a)));
        let mut drop = vec![false; cands.len()];
        for &i in &order[..k] {
            drop[i] = true;
        }
        alive.retain(|&i| !drop[i]);
    }
    let entries = alive
        .iter()
        .map(|&i| {
            let pat =
                String::from_utf8(cands[i].to_vec()).map_err(|_| Error::Invalid("candidate is not UTF-8".into()))?;
            let ch = pat.chars().last().unwrap();
            Ok(DictEntry { parent: 0, ch, pattern: pat, output: true })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((Dictionary { entries, flat: true }, ncand))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(texts: &[&str]) -> Vec<(Box<[u8]>, u64)> {
        let mut m: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        let pt = Pretokenizer::new(Some(crate::pretok::GPT4_PATTERN)).unwrap();
        for t in texts {
            pt.split(t, |c| *m.entry(c.as_bytes().to_vec()).or_insert(0) += 1).unwrap();
        }
        m.into_iter().map(|(k, v)| (k.into_boxed_slice(), v)).collect()
    }

    #[test]
    fn standard_lz78() {
        let mut b = OnlineBuilder::new(100, false, &Params::defaults(Strategy::Standard));
        b.feed_chunk("abababab");
        let d = b.into_dictionary();
        let pats: Vec<&str> = d.entries.iter().map(|e| e.pattern.as_str()).collect();
        // a | b | ab | aba | b(end, partial)
        assert_eq!(pats, vec!["a", "b", "ab", "aba"]);
        assert_eq!(d.entries[3].parent, 3);
    }

    #[test]
    fn standard_stops() {
        let mut b = OnlineBuilder::new(2, false, &Params::defaults(Strategy::Standard));
        b.feed_chunk("abcdef");
        assert!(b.done());
        assert_eq!(b.into_dictionary().entries.len(), 2);
    }

    #[test]
    fn gated_evicts() {
        let mut p = Params::defaults(Strategy::FrequencyGated);
        p.evict_interval = 3;
        let mut b = OnlineBuilder::new(4, true, &p);
        b.feed_chunk("abcdaaaaaaaaaaaaxyzxyz");
        assert!(b.evictions > 0);
        assert!(b.trie.len() <= 4);
    }

    #[test]
    fn loo_matches_bruteforce() {
        let ch = chunks(&["the cat sat on the mat, then the hat", "that is the theme of these mathematics"]);
        let cands = flat_candidates(&ch, 60, 6, 1 << 20);
        let trie = ByteTrie::build(cands.iter().enumerate().map(|(i, c)| (&c[..], i as u32))).unwrap();
        let d = leave_one_out(&trie, &ch, cands.len());
        let base = total_tokens(&trie, &ch) as i64;
        assert_eq!(d.len(), cands.len());
        for (e, &delta) in d.iter().enumerate() {
            let t = ByteTrie::build(cands.iter().enumerate().filter(|(i, _)| *i != e).map(|(i, c)| (&c[..], i as u32)))
                .unwrap();
            assert_eq!(delta, total_tokens(&t, &ch) as i64 - base, "entry {e}");
        }
    }

    #[test]
    fn cost_adjusted_is_tree() {
        let texts = ["aaaa bbbb aaaa abab abba baba the theme then there", "mathematics is the theme"];
        let pt = Pretokenizer::new(Some(crate::pretok::GPT4_PATTERN)).unwrap();
        let mut b = OnlineBuilder::new(40, true, &Params::defaults(Strategy::FrequencyGated));
        for t in texts {
            b.feed_text(t, &pt).unwrap();
        }
        let pool = b.into_dictionary();
        let ch = chunks(&texts);
        for cost in [false, true] {
            let d = if cost { cost_adjusted(pool.clone(), &ch, 10, 3) } else { multi_round(pool.clone(), &ch, 10, 3) };
            let d = d.unwrap();
            assert_eq!(d.entries.len(), 10);
            for e in &d.entries {
                if e.parent != 0 {
                    let p = &d.entries[e.parent as usize - 1];
                    assert_eq!(format!("{}{}", p.pattern, e.ch), e.pattern);
                }
            }
        }
        let s = smart_prune(pool, &ch, 10, 3).unwrap();
        assert_eq!(s.entries.iter().filter(|e| e.output).count(), 10);
    }
}
