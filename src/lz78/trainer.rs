//! Training in three pieces, so that one machine and a cluster share them.
//!
//! * [`OnlineTrainer`]: the online builder (standard, frequency_gated, and the
//!   pools of the pruning strategies). It must see the corpus in order, on one
//!   thread; it returns its [`Pool`].
//! * A plain [`WordCounter`] of the unique chunks (the pruning strategies'
//!   view of the corpus). Counters of parts of a corpus merge exactly, so a
//!   cluster counts partitions apart and merges them.
//! * [`finish`]: strategy, N, parameters, the pool (or none) and the chunks
//!   in, the dictionary and its [`Stats`] out. The strategy dispatch lives
//!   only here.
//!
//! [`Trainer`] is the single-machine path built on them: texts arrive in
//! batches, in corpus order; the online builder runs on one thread and the
//! counter beside it on the others (`rayon::join`), so feeding costs about
//! the slower of the two.
//!
//! Not handled: reading the corpus (the caller feeds texts in order) and
//! moving pools or counters between machines (the Python side does, as plain
//! data: [`Pool::from_parents`] checks what it is given).

use super::strategies::{self, OnlineBuilder, Params, Strategy};
use super::{DictEntry, Dictionary};
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::wordcount::WordCounter;

/// What training saw and did, for the file header and reports.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub corpus_bytes: u64,
    pub texts: u64,
    pub unique_chunks: u64,
    pub pool_entries: u64,
    pub candidates: u64,
    pub evictions: u64,
    pub evicted: u64,
}

/// The texts a trainer read and their UTF-8 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub texts: u64,
    pub bytes: u64,
}

/// An online builder's result: its dictionary (codes in creation order,
/// parents before children) and its eviction counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub dictionary: Dictionary,
    pub evictions: u64,
    pub evicted: u64,
}

impl Pool {
    /// The pool as plain data: each entry's parent code (0 = root) and its character.
    pub fn parents_chars(&self) -> (Vec<u32>, String) {
        let e = &self.dictionary.entries;
        (e.iter().map(|x| x.parent).collect(), e.iter().map(|x| x.ch).collect())
    }

    /// Rebuild a pool from [`Pool::parents_chars`]: entry k (code k + 1) has
    /// parent `parents[k]`, which must be 0 or an earlier code, and character
    /// `chars[k]`; patterns are the parents' plus the character. Sibling
    /// entries with the same character are refused (a trie has one child per
    /// character).
    pub fn from_parents(parents: &[u32], chars: &str, evictions: u64, evicted: u64) -> Result<Self> {
        let chars: Vec<char> = chars.chars().collect();
        if chars.len() != parents.len() {
            return Err(Error::Invalid(format!(
                "LZ78 pool: {} parents but {} characters; expected one character per entry",
                parents.len(),
                chars.len()
            )));
        }
        let mut entries: Vec<DictEntry> = Vec::with_capacity(parents.len());
        let mut seen = rustc_hash::FxHashSet::default();
        for (k, (&p, &ch)) in parents.iter().zip(&chars).enumerate() {
            if p as usize > k {
                return Err(Error::Invalid(format!(
                    "LZ78 pool: entry {} has parent {p}; a parent must be 0 or an earlier entry",
                    k + 1
                )));
            }
            if !seen.insert((p, ch)) {
                return Err(Error::Invalid(format!("LZ78 pool: entry {} repeats a child {ch:?} of entry {p}", k + 1)));
            }
            let mut pattern = if p == 0 { String::new() } else { entries[p as usize - 1].pattern.clone() };
            pattern.push(ch);
            entries.push(DictEntry { parent: p, ch, pattern, output: true });
        }
        Ok(Pool { dictionary: Dictionary { entries, flat: false }, evictions, evicted })
    }
}

/// The online builder's capacity for `strategy` and whether it evicts.
fn online_capacity(strategy: Strategy, n: usize, params: &Params) -> (usize, bool) {
    match strategy {
        Strategy::Standard => (n, false),
        Strategy::FrequencyGated => (n, true),
        _ => {
            let cap = ((n as f64) * params.pool_factor).floor() as usize;
            (cap.max(n), params.pool == Strategy::FrequencyGated)
        }
    }
}

fn check_n(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::VocabSize("the dictionary must have at least one entry".into()));
    }
    Ok(())
}

/// The online half of training: the corpus in order, on one thread.
pub struct OnlineTrainer {
    builder: OnlineBuilder,
    pretok: Pretokenizer,
    seen: Seen,
}

impl OnlineTrainer {
    /// The builder of `strategy` (its pool for the pruning strategies);
    /// flat_prune has none.
    pub fn new(strategy: Strategy, n: usize, pretok: Pretokenizer, params: &Params) -> Result<Self> {
        params.validate()?;
        check_n(n)?;
        if !strategy.needs_online() {
            return Err(Error::Invalid(format!("strategy {} builds no dictionary online", strategy.name())));
        }
        let (cap, gated) = online_capacity(strategy, n, params);
        Ok(OnlineTrainer { builder: OnlineBuilder::new(cap, gated, params), pretok, seen: Seen::default() })
    }

    /// True once more text cannot change the pool (standard is full).
    pub fn done(&self) -> bool {
        self.builder.done()
    }

    /// Feed texts in corpus order; stops at the text that fills a standard
    /// builder (the texts after it are not read, nor counted in [`Self::seen`]).
    pub fn feed<S: AsRef<str>>(&mut self, texts: &[S]) -> Result<()> {
        for t in texts {
            if self.builder.done() {
                break;
            }
            self.builder.feed_text(t.as_ref(), &self.pretok)?;
            self.seen.texts += 1;
            self.seen.bytes += t.as_ref().len() as u64;
        }
        Ok(())
    }

    pub fn seen(&self) -> Seen {
        self.seen
    }

    pub fn finish(self) -> Pool {
        let (evictions, evicted) = (self.builder.evictions, self.builder.evicted);
        Pool { dictionary: self.builder.into_dictionary(), evictions, evicted }
    }
}

/// How the pruning strategies see the corpus.
pub enum ChunkSource<'a> {
    /// Its unique chunks, here: usage is counted over them
    /// ([`strategies::local_usage`]).
    Here(WordCounter),
    /// Counted elsewhere (a cluster's workers keep the chunks): how many
    /// unique chunks the whole corpus has (for the stats) and each round's
    /// usage counter. Not for flat_prune, whose candidates come from the
    /// chunks themselves.
    Elsewhere { unique_chunks: u64, usage: Box<strategies::UsageFn<'a>> },
}

/// The final dictionary of `strategy` from its pool (`None` for flat_prune)
/// and the corpus's unique chunks (`None` for standard and frequency_gated).
/// `seen`: the corpus as the caller counted it (all of it when there are
/// chunks; the texts the builder read otherwise).
pub fn finish(
    strategy: Strategy,
    n: usize,
    params: &Params,
    pool: Option<Pool>,
    chunks: Option<ChunkSource<'_>>,
    seen: Seen,
) -> Result<(Dictionary, Stats)> {
    params.validate()?;
    check_n(n)?;
    let name = strategy.name();
    if strategy.needs_online() != pool.is_some() {
        let what = if pool.is_some() { "takes no pool" } else { "needs the pool its online builder made" };
        return Err(Error::Invalid(format!("strategy {name} {what}")));
    }
    if strategy.needs_chunks() != chunks.is_some() {
        let what = if chunks.is_some() { "takes no chunk counts" } else { "needs the corpus's chunk counts" };
        return Err(Error::Invalid(format!("strategy {name} {what}")));
    }
    let mut st = Stats { corpus_bytes: seen.bytes, texts: seen.texts, ..Default::default() };
    let mut remote = None;
    let chunks = match chunks {
        Some(ChunkSource::Here(c)) => {
            let v = c.into_sorted();
            st.unique_chunks = v.len() as u64;
            v
        }
        Some(ChunkSource::Elsewhere { unique_chunks, usage }) => {
            if strategy == Strategy::FlatPrune {
                return Err(Error::Invalid(format!("strategy {name} needs the chunks themselves, not usage counts")));
            }
            st.unique_chunks = unique_chunks;
            remote = Some(usage);
            Vec::new()
        }
        None => Vec::new(),
    };
    let pool = match pool {
        Some(p) => {
            let (cap, _) = online_capacity(strategy, n, params);
            if p.dictionary.entries.len() > cap || p.dictionary.flat {
                return Err(Error::Invalid(format!(
                    "strategy {name}: a pool of {} entries is not one its online builder makes (capacity {cap})",
                    p.dictionary.entries.len()
                )));
            }
            st.evictions = p.evictions;
            st.evicted = p.evicted;
            Some(p.dictionary)
        }
        None => None,
    };
    let rounds = params.rounds;
    let d = match (strategy, pool) {
        (Strategy::Standard | Strategy::FrequencyGated, Some(pool)) => pool,
        (Strategy::FlatPrune, None) => {
            let (d, ncand) = strategies::flat_prune(&chunks, n, params)?;
            st.candidates = ncand as u64;
            d
        }
        (s, Some(pool)) => {
            st.pool_entries = pool.entries.len() as u64;
            match remote {
                Some(mut usage) => strategies::prune(s, &pool, &mut *usage, n, rounds)?,
                None => strategies::prune(s, &pool, &mut strategies::local_usage(&pool, &chunks), n, rounds)?,
            }
        }
        (_, None) => unreachable!("checked above: every strategy but flat_prune has a pool"),
    };
    Ok((d, st))
}

/// Single-machine training: [`OnlineTrainer`] and a [`WordCounter`] fed
/// side by side, then [`finish`].
pub struct Trainer {
    strategy: Strategy,
    params: Params,
    n: usize,
    online: Option<OnlineTrainer>,
    counter: Option<WordCounter>,
    /// Every text fed (used when counting chunks: then all of the corpus is read).
    seen: Seen,
}

impl Trainer {
    /// `n`: output entries wanted. `pretok`: the chunking (`Whole` = none;
    /// then each text is one chunk).
    pub fn new(strategy: Strategy, n: usize, pretok: Pretokenizer, params: Params) -> Result<Self> {
        params.validate()?;
        check_n(n)?;
        let online = if strategy.needs_online() {
            Some(OnlineTrainer::new(strategy, n, pretok.clone(), &params)?)
        } else {
            None
        };
        let counter = if strategy.needs_chunks() { Some(WordCounter::new(pretok)) } else { None };
        Ok(Trainer { strategy, params, n, online, counter, seen: Seen::default() })
    }

    /// False once more text cannot change the result (standard is full).
    pub fn wants_more(&self) -> bool {
        self.counter.is_some() || self.online.as_ref().is_some_and(|o| !o.done())
    }

    /// Feed texts in corpus order; uses the current rayon pool.
    pub fn feed<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        match (&mut self.online, &mut self.counter) {
            (Some(o), Some(c)) => {
                let (r1, r2) = rayon::join(|| o.feed(texts), || c.add_texts(texts));
                r1?;
                r2?;
            }
            // standard stops once full: its own count of the texts it read is the one reported
            (Some(o), None) => return o.feed(texts),
            (None, Some(c)) => c.add_texts(texts)?,
            (None, None) => return Ok(()),
        }
        self.seen.texts += texts.len() as u64;
        self.seen.bytes += texts.iter().map(|t| t.as_ref().len() as u64).sum::<u64>();
        Ok(())
    }

    /// Count the chunks in a memory budget: the chunk counter spills sorted
    /// runs under `parent` past `limit` estimated bytes (as BPE's counting
    /// does: [`WordCounter::spill_to`]). False, with nothing done, for a
    /// strategy that counts no chunks (standard, frequency_gated: their
    /// memory is the pool's, fixed by `n`).
    pub fn spill_to(&mut self, parent: &std::path::Path, limit: u64) -> Result<bool> {
        match &mut self.counter {
            Some(c) => c.spill_to(parent, limit).map(|_| true),
            None => Ok(false),
        }
    }

    /// The end of counting in a budget ([`WordCounter::settle`]): the chunk
    /// counts made exact from the runs, the most frequent kept whose cost fits
    /// `keep` bytes; (distinct chunks dropped, their occurrences, the count
    /// threshold), all 0 when nothing was dropped or no chunks are counted.
    pub fn settle(&mut self, keep: u64, min_coverage: f64, budget_per_keep: f64) -> Result<(u64, u64, u64)> {
        match &mut self.counter {
            Some(c) => c.settle(keep, min_coverage, budget_per_keep),
            None => Ok((0, 0, 0)),
        }
    }

    /// Distinct chunks counted so far, and all their occurrences (0, 0 without
    /// a chunk counter; after spilling, the distinct chunks of the table only).
    pub fn chunk_totals(&self) -> (usize, u64) {
        self.counter.as_ref().map_or((0, 0), |c| (c.unique(), c.total_pieces()))
    }

    /// Build the final dictionary (after [`Self::settle`] when counting spilled).
    pub fn finish(self) -> Result<(Dictionary, Stats)> {
        if self.counter.as_ref().is_some_and(|c| c.runs() > 0) {
            return Err(Error::invalid("the chunk counts are partly spilled to disk: call settle() first"));
        }
        let seen = match (&self.online, &self.counter) {
            (Some(o), None) => o.seen(),
            _ => self.seen,
        };
        let pool = self.online.map(OnlineTrainer::finish);
        finish(self.strategy, self.n, &self.params, pool, self.counter.map(ChunkSource::Here), seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::GPT4_PATTERN;

    const TEXTS: [&str; 4] = [
        "the cat sat on the mat, then the hat; the theme of these mathematics",
        "aaaa bbbb aaaa abab abba baba the theme then there 12345",
        "",
        "mathematics is the theme; the cat is not the hat",
    ];

    fn pt() -> Pretokenizer {
        Pretokenizer::new(Some(GPT4_PATTERN)).unwrap()
    }

    /// The pieces run apart (online over all texts, two counters merged
    /// through `add_word`) give what the single-machine trainer gives.
    #[test]
    fn pieces_equal_trainer() {
        for s in Strategy::ALL {
            let mut p = Params::defaults(s);
            p.evict_interval = 7;
            let n = 12;
            let mut t = Trainer::new(s, n, pt(), p.clone()).unwrap();
            t.feed(&TEXTS[..2]).unwrap();
            t.feed(&TEXTS[2..]).unwrap();
            let (d1, s1) = t.finish().unwrap();

            let pool = if s.needs_online() {
                let mut o = OnlineTrainer::new(s, n, pt(), &p).unwrap();
                o.feed(&TEXTS).unwrap();
                let seen = o.seen();
                let pool = o.finish();
                let (par, chars) = pool.parents_chars();
                let back = Pool::from_parents(&par, &chars, pool.evictions, pool.evicted).unwrap();
                assert_eq!(back, pool);
                Some((back, seen))
            } else {
                None
            };
            let chunks = s.needs_chunks().then(|| {
                let mut a = WordCounter::new(pt());
                a.add_texts(&TEXTS[..1]).unwrap();
                let mut b = WordCounter::new(pt());
                b.add_texts(&TEXTS[1..]).unwrap();
                for (w, c) in b.into_sorted() {
                    a.add_word(&w, c);
                }
                a
            });
            let seen = match &pool {
                Some((_, seen)) if chunks.is_none() => *seen,
                _ => Seen { texts: 4, bytes: TEXTS.iter().map(|t| t.len() as u64).sum() },
            };
            let unique = chunks.as_ref().map(|c| c.unique() as u64);
            let sorted = chunks.as_ref().map(|c| {
                let mut v: Vec<(Box<[u8]>, u64)> = Vec::new();
                let mut m = WordCounter::new(pt());
                m.merge(c).unwrap();
                v.extend(m.into_sorted());
                v
            });
            let pool2 = pool.as_ref().map(|x| x.0.clone());
            let (d2, s2) = finish(s, n, &p, pool.map(|x| x.0), chunks.map(ChunkSource::Here), seen).unwrap();
            assert_eq!(d1, d2, "{}", s.name());
            assert_eq!(format!("{s1:?}"), format!("{s2:?}"), "{}", s.name());
            // usage counted "elsewhere": two halves of the chunks, each its own trie, summed
            if s.needs_chunks() && s.needs_online() {
                let sorted = sorted.unwrap();
                let (a, b) = sorted.split_at(sorted.len() / 2);
                let dict = pool2.clone().unwrap().dictionary;
                let mut rounds = 0;
                let usage = Box::new(|mask: &[bool]| -> Result<Vec<u64>> {
                    rounds += 1;
                    let mut total = crate::lz78::UsageCounts::zeros(mask.len());
                    for half in [a, b] {
                        let mut t = crate::lz78::PoolTrie::new(&dict)?;
                        t.set_mask(&crate::lz78::usage::mask_from_bytes(&crate::lz78::usage::mask_to_bytes(mask))?)?;
                        total.merge(&t.usage(half))?;
                    }
                    Ok(total.into_vec())
                });
                let src = ChunkSource::Elsewhere { unique_chunks: unique.unwrap(), usage };
                let (d3, s3) = finish(s, n, &p, pool2, Some(src), seen).unwrap();
                assert_eq!(d1, d3, "{} elsewhere", s.name());
                assert_eq!(format!("{s1:?}"), format!("{s3:?}"), "{} elsewhere", s.name());
            }
        }
    }

    #[test]
    fn standard_counts_only_what_it_read() {
        let mut o = OnlineTrainer::new(Strategy::Standard, 3, pt(), &Params::defaults(Strategy::Standard)).unwrap();
        o.feed(&["abcdef", "xyz"]).unwrap();
        assert!(o.done());
        assert_eq!(o.seen(), Seen { texts: 1, bytes: 6 });
    }

    #[test]
    fn finish_refuses_wrong_inputs() {
        let p = Params::defaults(Strategy::SmartPrune);
        let here = || Some(ChunkSource::Here(WordCounter::new(pt())));
        assert!(finish(Strategy::SmartPrune, 5, &p, None, here(), Seen::default()).is_err());
        let pool = Pool::from_parents(&[0], "a", 0, 0).unwrap();
        assert!(finish(Strategy::SmartPrune, 5, &p, Some(pool.clone()), None, Seen::default()).is_err());
        let fp = Params::defaults(Strategy::FlatPrune);
        assert!(finish(Strategy::FlatPrune, 5, &fp, Some(pool), here(), Seen::default()).is_err());
        let usage = Box::new(|m: &[bool]| Ok(vec![0; m.len()]));
        let elsewhere = Some(ChunkSource::Elsewhere { unique_chunks: 1, usage });
        assert!(finish(Strategy::FlatPrune, 5, &fp, None, elsewhere, Seen::default()).is_err());
        let big = Pool::from_parents(&[0, 0, 0], "abc", 0, 0).unwrap();
        let sp = Params::defaults(Strategy::Standard);
        assert!(finish(Strategy::Standard, 2, &sp, Some(big), None, Seen::default()).is_err());
        assert!(OnlineTrainer::new(Strategy::FlatPrune, 5, pt(), &fp).is_err());
    }

    #[test]
    fn pool_from_parents_checks() {
        assert!(Pool::from_parents(&[0, 2], "ab", 0, 0).is_err()); // parent not earlier
        assert!(Pool::from_parents(&[0, 0], "a", 0, 0).is_err()); // lengths
        assert!(Pool::from_parents(&[0, 0], "aa", 0, 0).is_err()); // repeated child
        let p = Pool::from_parents(&[0, 1, 2, 0], "abcé", 1, 2).unwrap();
        let pats: Vec<&str> = p.dictionary.entries.iter().map(|e| e.pattern.as_str()).collect();
        assert_eq!(pats, ["a", "ab", "abc", "é"]);
    }
}
