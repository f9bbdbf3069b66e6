//! Streaming training: texts arrive in batches, in corpus order.
//!
//! The online builder (standard, frequency_gated, and the pools of the
//! pruning strategies) must see the corpus in order and runs on one thread;
//! the unique-chunk counter the pruning strategies need runs beside it on the
//! other threads (`rayon::join`), so feeding costs about the slower of the two.

use super::strategies::{self, OnlineBuilder, Params, Strategy};
use super::Dictionary;
use crate::error::{Error, Result};
use crate::pretok::Pretokenizer;
use crate::wordcount::WordCounter;

pub struct Trainer {
    strategy: Strategy,
    params: Params,
    n: usize,
    pretok: Pretokenizer,
    builder: Option<OnlineBuilder>,
    counter: Option<WordCounter>,
    bytes: u64,
    texts: u64,
}

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

impl Trainer {
    /// `n`: output entries wanted. `pretok`: the chunking (`Whole` = none;
    /// then each text is one chunk).
    pub fn new(strategy: Strategy, n: usize, pretok: Pretokenizer, params: Params) -> Result<Self> {
        params.validate()?;
        if n == 0 {
            return Err(Error::VocabSize("the dictionary must have at least one entry".into()));
        }
        let builder = if strategy.needs_online() {
            let (cap, gated) = match strategy {
                Strategy::Standard => (n, false),
                Strategy::FrequencyGated => (n, true),
                _ => {
                    let cap = ((n as f64) * params.pool_factor).floor() as usize;
                    (cap.max(n), params.pool == Strategy::FrequencyGated)
                }
            };
            Some(OnlineBuilder::new(cap, gated, &params))
        } else {
            None
        };
        let counter = if strategy.needs_chunks() { Some(WordCounter::new(pretok.clone())) } else { None };
        Ok(Trainer { strategy, params, n, pretok, builder, counter, bytes: 0, texts: 0 })
    }

    /// False once more text cannot change the result (standard is full).
    pub fn wants_more(&self) -> bool {
        self.counter.is_some() || self.builder.as_ref().is_some_and(|b| !b.done())
    }

    /// Feed texts in corpus order; uses the current rayon pool.
    pub fn feed<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        let pretok = &self.pretok;
        let all_bytes = texts.iter().map(|t| t.as_ref().len() as u64).sum::<u64>();
        match (&mut self.builder, &mut self.counter) {
            (Some(b), Some(c)) => {
                let (r1, r2) = rayon::join(
                    || -> Result<()> {
                        for t in texts {
                            b.feed_text(t.as_ref(), pretok)?;
                        }
                        Ok(())
                    },
                    || c.add_texts(texts),
                );
                r1?;
                r2
            }
            (Some(b), None) => {
                // standard stops once full: count only the texts it read
                for t in texts {
                    if b.done() {
                        break;
                    }
                    b.feed_text(t.as_ref(), pretok)?;
                    self.texts += 1;
                    self.bytes += t.as_ref().len() as u64;
                }
                return Ok(());
            }
            (None, Some(c)) => c.add_texts(texts),
            (None, None) => Ok(()),
        }?;
        self.texts += texts.len() as u64;
        self.bytes += all_bytes;
        Ok(())
    }

    /// Build the final dictionary.
    pub fn finish(self) -> Result<(Dictionary, Stats)> {
        let mut st = Stats { corpus_bytes: self.bytes, texts: self.texts, ..Default::default() };
        let chunks = match self.counter {
            Some(c) => {
                let v = c.into_sorted();
                st.unique_chunks = v.len() as u64;
                v
            }
            None => Vec::new(),
        };
        let pool = self.builder.inspect(|b| {
            st.evictions = b.evictions;
            st.evicted = b.evicted;
        });
        let n = self.n;
        let rounds = self.params.rounds;
        let d = match self.strategy {
            Strategy::Standard => strategies::standard(pool.unwrap()),
            Strategy::FrequencyGated => strategies::frequency_gated(pool.unwrap()),
            s => {
                if s == Strategy::FlatPrune {
                    let (d, ncand) = strategies::flat_prune(&chunks, n, &self.params)?;
                    st.candidates = ncand as u64;
                    d
                } else {
                    let pool = pool.unwrap().into_dictionary();
                    st.pool_entries = pool.entries.len() as u64;
                    match s {
                        Strategy::MultiRound => strategies::multi_round(pool, &chunks, n, rounds)?,
                        Strategy::CostAdjusted => strategies::cost_adjusted(pool, &chunks, n, rounds)?,
                        Strategy::SmartPrune => strategies::smart_prune(pool, &chunks, n, rounds)?,
                        Strategy::Compressed => strategies::compressed(pool, &chunks, n, rounds)?,
                        _ => unreachable!(),
                    }
                }
            }
        };
        Ok((d, st))
    }
}
