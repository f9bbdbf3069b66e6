//! Bindings of the BPE family: the model (its encoder methods come from
//! `py::encoder`), the piece counter and the trainer, and the rank-split tool.
//! Conversion, GIL release and error mapping only.
//!
//! Not handled: progress display (the caller loops on `run`), batching the
//! corpus into `add_texts` calls (the Python caller's).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::encoder::{encoder_class, PyEncoder};
use super::{pool, pretok_from, py_strs, IntTable};
use crate::bpe::encode::{BpeModel, MergeRule, SplitRule};
use crate::bpe::layout::Layout;
use crate::bpe::train::{TieBreak, Trainer};
use crate::error::Error;
use crate::wordcount::WordCounter;

fn byte_ids_from(v: Vec<u32>) -> PyResult<[u32; 256]> {
    v.try_into()
        .map_err(|v: Vec<u32>| Error::Invalid(format!("byte_ids must have 256 entries, not {}", v.len())).into())
}

#[pyclass(module = "tokenforge._core", name = "BpeModel", frozen)]
pub struct PyBpeModel {
    inner: Arc<BpeModel>,
    /// One Python int per id (see `IntTable`).
    ints: IntTable,
}

impl PyEncoder for PyBpeModel {
    type Model = BpeModel;
    fn model(&self) -> &Arc<BpeModel> {
        &self.inner
    }
    fn ints(&self) -> &IntTable {
        &self.ints
    }
}

encoder_class!(PyBpeModel {
    #[new]
    #[pyo3(signature = (byte_ids, merges, specials, pattern, rule="bytes"))]
    fn new(
        py: Python<'_>,
        byte_ids: Vec<u32>,
        merges: Vec<(u32, u32, u32)>,
        specials: Vec<(String, u32)>,
        pattern: Option<&str>,
        rule: &str,
    ) -> PyResult<Self> {
        let rule = match rule {
            "bytes" => MergeRule::Bytes,
            "pairs" => MergeRule::Pairs,
            r => return Err(Error::Invalid(format!("unknown merge rule {r:?}; expected \"bytes\" or \"pairs\"")).into()),
        };
        let b = byte_ids_from(byte_ids)?;
        let pt = pretok_from(pattern)?;
        let m = py.detach(|| BpeModel::new(&b, &merges, specials, pt, rule))?;
        let ints = IntTable::new(py, m.vocab_size())?;
        Ok(PyBpeModel { inner: Arc::new(m), ints })
    }

    /// Encode one already-split piece (for tests and tools).
    fn encode_piece(&self, piece: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.inner.encode_piece(piece, &mut out);
        out
    }
});

#[pyclass(module = "tokenforge._core", name = "WordCounter")]
pub struct PyWordCounter {
    inner: Option<WordCounter>,
}

impl PyWordCounter {
    fn get(&mut self) -> PyResult<&mut WordCounter> {
        Ok(self.inner.as_mut().ok_or_else(|| Error::invalid("this WordCounter was already used to start training"))?)
    }

    /// The counter, borrowed (LZ78's usage counting reads it round after round).
    pub(crate) fn peek(&self) -> PyResult<&WordCounter> {
        Ok(self.inner.as_ref().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?)
    }

    /// The counter itself, leaving this object used up (LZ78's `lz78_finish` consumes it).
    pub(crate) fn take(&mut self) -> PyResult<WordCounter> {
        Ok(self.inner.take().ok_or_else(|| Error::invalid("this WordCounter was already used"))?)
    }
}

#[pymethods]
impl PyWordCounter {
    #[new]
    #[pyo3(signature = (pattern))]
    fn new(pattern: Option<&str>) -> PyResult<Self> {
        Ok(PyWordCounter { inner: Some(WordCounter::new(pretok_from(pattern)?)) })
    }

    /// Split and count a batch of texts, in parallel, with the GIL released.
    #[pyo3(signature = (texts, num_threads=None))]
    fn add_texts(&mut self, py: Python<'_>, texts: &Bound<'_, PyAny>, num_threads: Option<usize>) -> PyResult<()> {
        let pool = pool(num_threads)?;
        // Each text's UTF-8 as a temporary bytes object, gone when the batch is
        // counted: `PyString::to_str` would make CPython keep a UTF-8 copy inside
        // every non-ASCII str for as long as the caller keeps its documents (15 MB
        // more peak memory on a 50 MB corpus held in a list). A surrogate raises
        // UnicodeEncodeError, as `to_str` does.
        let utf8: Vec<Bound<'_, PyBytes>> = py_strs(texts)?.iter().map(|s| s.encode_utf8()).collect::<PyResult<_>>()?;
        let refs: Vec<&str> = utf8
            .iter()
            .map(|b| std::str::from_utf8(b.as_bytes()).map_err(|e| Error::invalid(format!("not UTF-8: {e}"))))
            .collect::<Result<_, Error>>()?;
        let wc = self.get()?;
        Ok(py.detach(|| pool.install(|| wc.add_texts(&refs)))?)
    }

    fn add_word(&mut self, word: &[u8], count: u64) -> PyResult<()> {
        self.get()?.add_word(word, count);
        Ok(())
    }

    #[getter]
    fn unique(&mut self) -> PyResult<usize> {
        Ok(self.get()?.unique())
    }

    #[getter]
    fn total_pieces(&mut self) -> PyResult<u64> {
        Ok(self.get()?.total_pieces())
    }

    #[getter]
    fn total_bytes(&mut self) -> PyResult<u64> {
        Ok(self.get()?.total_bytes())
    }

    /// The bytes of `crate::transport` (kind: pieces): what a cluster ships.
    /// Equal counts give equal bytes. GIL released.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let wc = self.inner.as_ref().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?;
        let b = py.detach(|| wc.to_bytes());
        Ok(PyBytes::new(py, &b))
    }

    /// A counter from `to_bytes`' output (FormatError with the byte offset if damaged).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PyWordCounter { inner: Some(py.detach(|| WordCounter::from_bytes(data))?) })
    }

    /// Add `other`'s counts and totals to this counter (`other` is unchanged).
    fn merge(&mut self, py: Python<'_>, other: &Bound<'_, PyWordCounter>) -> PyResult<()> {
        // (borrowing fails only when `other` is this counter, borrowed mutably for this call)
        let o = other.try_borrow().map_err(|_| Error::invalid("cannot merge a WordCounter into itself"))?;
        let theirs = o.inner.as_ref().ok_or_else(|| Error::invalid("the other WordCounter was already consumed"))?;
        let mine = self.inner.as_mut().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?;
        Ok(py.detach(|| mine.merge(theirs))?)
    }

    /// A new counter holding the sum of `counters` (none of them changed).
    #[staticmethod]
    fn merged(py: Python<'_>, counters: Vec<Bound<'_, PyWordCounter>>) -> PyResult<Self> {
        let borrows: Vec<PyRef<'_, PyWordCounter>> =
            counters.iter().map(|c| c.try_borrow()).collect::<Result<_, _>>()?;
        let mut parts: Vec<&WordCounter> = Vec::with_capacity(borrows.len());
        for (i, b) in borrows.iter().enumerate() {
            parts.push(b.inner.as_ref().ok_or_else(|| Error::invalid(format!("counters[{i}] was already consumed")))?);
        }
        let Some((first, rest)) = parts.split_first() else {
            return Err(Error::invalid("merged() needs at least one WordCounter").into());
        };
        let out = py.detach(|| -> Result<WordCounter, Error> {
            let mut acc = WordCounter::new(first.pretokenizer().clone());
            acc.merge(first)?;
            for p in rest {
                acc.merge(p)?;
            }
            Ok(acc)
        })?;
        Ok(PyWordCounter { inner: Some(out) })
    }

    /// Bounded mode: drop the pieces counted fewer than `min_count` times so
    /// far; returns how many unique pieces went (recorded in `dropped`).
    fn prune_below(&mut self, min_count: u64) -> PyResult<usize> {
        Ok(self.get()?.prune_below(min_count))
    }

    /// (unique pieces dropped, their occurrences, largest threshold) by `prune_below`.
    #[getter]
    fn dropped(&mut self) -> PyResult<(u64, u64, u64)> {
        Ok(self.get()?.dropped())
    }

    /// The split pattern the pieces were cut with (None: whole texts).
    #[getter]
    fn pattern(&mut self) -> PyResult<Option<String>> {
        Ok(self.get()?.pretokenizer().pattern())
    }

    /// The count of one piece (0 if absent).
    fn count(&mut self, piece: &[u8]) -> PyResult<u64> {
        Ok(self.get()?.get(piece))
    }

    /// Pickles through `to_bytes` (how a cluster ships a counter).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let data = slf.borrow().to_bytes(py)?;
        Ok((slf.get_type().getattr("from_bytes")?, (data,)))
    }

    /// The counted pieces as (bytes, count), sorted by bytes.
    fn items<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let wc = self.inner.take().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?;
        let items = py.detach(|| wc.into_sorted());
        let l = PyList::empty(py);
        for (w, c) in items {
            l.append((PyBytes::new(py, &w), c))?;
        }
        Ok(l)
    }
}

#[pyclass(module = "tokenforge._core", name = "BpeTrainer")]
pub struct PyBpeTrainer {
    inner: Trainer,
    done_total: usize,
}

#[pymethods]
impl PyBpeTrainer {
    /// Consume a WordCounter and set up training (`Trainer::from_counter`):
    /// each unique piece becomes byte ids via `byte_ids`, then the earlier
    /// `merges` are applied (lowest id first, pairs rule); `num_merges` new
    /// merges get ids from `next_id`.
    #[new]
    #[pyo3(signature = (counter, byte_ids, merges, next_id, num_merges, tie_break="pair_ids", min_frequency=1, num_threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        counter: &mut PyWordCounter,
        byte_ids: Vec<u32>,
        merges: Vec<(u32, u32, u32)>,
        next_id: u32,
        num_merges: usize,
        tie_break: &str,
        min_frequency: u64,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let tie = TieBreak::parse(tie_break)?;
        let b = byte_ids_from(byte_ids)?;
        let wc = counter.inner.take().ok_or_else(|| Error::invalid("this WordCounter was already used"))?;
        let pool = pool(num_threads)?;
        let t = py.detach(|| {
            pool.install(|| Trainer::from_counter(wc, &b, &merges, next_id, num_merges, tie, min_frequency))
        })?;
        Ok(PyBpeTrainer { inner: t, done_total: 0 })
    }

    /// Run merges with the GIL released for at most `seconds`; returns how many ran.
    #[pyo3(signature = (max_merges=usize::MAX, seconds=0.25))]
    fn run(&mut self, py: Python<'_>, max_merges: usize, seconds: f64) -> usize {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        let t = &mut self.inner;
        let n = py.detach(|| t.run(max_merges, Some(deadline)));
        self.done_total += n;
        n
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }

    #[getter]
    fn merges_done(&self) -> usize {
        self.done_total
    }

    fn merges(&self) -> Vec<(u32, u32, u32)> {
        self.inner.merges().to_vec()
    }
}

/// How tokens given by rank split (see `crate::bpe::ranks`); one result per
/// token in `which` (all tokens if None): `(number of parts, the first 8
/// parts)`. Rules: "below_own_rank" and "all_but_own" run tiktoken's merge
/// loop on the token's own bytes with the ranks they name;
/// "first_lower_cut" is the first cut into two tokens of smaller id (2
/// parts) or none (0 parts). Linear in the tokens' bytes, GIL released.
#[pyfunction]
#[pyo3(signature = (tokens, rule, which=None))]
fn bpe_rank_splits(
    py: Python<'_>,
    tokens: Vec<(Bound<'_, PyBytes>, u32)>,
    rule: &str,
    which: Option<Vec<usize>>,
) -> PyResult<Vec<(usize, Vec<u32>)>> {
    const SHOWN: usize = 8;
    let refs: Vec<(&[u8], u32)> = tokens.iter().map(|(b, r)| (b.as_bytes(), *r)).collect();
    let which: Vec<usize> = which.unwrap_or_else(|| (0..refs.len()).collect());
    if let Some(&k) = which.iter().find(|&&k| k >= refs.len()) {
        return Err(Error::Invalid(format!("token index {k} is out of range")).into());
    }
    let split_rule = match rule {
        "below_own_rank" => Some(SplitRule::BelowOwnRank),
        "all_but_own" => Some(SplitRule::AllButOwn),
        "first_lower_cut" => None,
        r => {
            return Err(Error::Invalid(format!(
                "unknown rule {r:?}; expected \"below_own_rank\", \"all_but_own\" or \"first_lower_cut\""
            ))
            .into())
        }
    };
    let res = py.detach(|| -> Result<Vec<(usize, Vec<u32>)>, Error> {
        let Some(split_rule) = split_rule else {
            let found = crate::bpe::ranks::first_lower_splits(&refs, &which)?;
            return Ok(found.into_iter().map(|s| s.map_or((0, vec![]), |(l, r)| (2, vec![l, r]))).collect());
        };
        let model = BpeModel::from_ranks(&refs)?;
        let mut parts = Vec::new();
        Ok(which
            .iter()
            .map(|&k| {
                model.token_parts(refs[k].1, split_rule, &mut parts);
                (parts.len(), parts[..parts.len().min(SHOWN)].to_vec())
            })
            .collect())
    });
    Ok(res?)
}

/// Where training puts its ids (`crate::bpe::layout`): (first merge id,
/// number of merges) for `vocab_size` ids and `specials` special tokens;
/// `VocabSizeError` if they do not fit.
#[pyfunction]
fn bpe_layout(layout: &str, vocab_size: i64, specials: usize) -> PyResult<(u32, usize)> {
    Ok(Layout::parse(layout)?.plan(vocab_size, specials)?)
}

/// The ids of the special tokens, in order, once `merges` merges were learned.
#[pyfunction]
fn bpe_special_ids(layout: &str, specials: usize, merges: usize) -> PyResult<Vec<u64>> {
    Ok(Layout::parse(layout)?.special_ids(specials, merges))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBpeModel>()?;
    m.add_class::<PyWordCounter>()?;
    m.add_class::<PyBpeTrainer>()?;
    m.add_function(wrap_pyfunction!(bpe_rank_splits, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_layout, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_special_ids, m)?)?;
    Ok(())
}
