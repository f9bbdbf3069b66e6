//! Bindings of the LZ78 family: the model (its encoder methods come from
//! `py::encoder`), the streaming trainer, the pieces of distributed training
//! (`Lz78Online`, the online builder alone; `lz78_finish`, pool + chunk
//! counts to dictionary) and the Patricia tools. Conversion, GIL release and
//! error mapping only.
//!
//! Not handled: reading and writing dictionary files (`tokenforge.formats`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Arc;

use super::bpe::PyWordCounter;
use super::encoder::{encoder_class, PyEncoder};
use super::{pool, pretok_from, IntTable};
use crate::error::Error;
use crate::lz78::patricia::NO_OUTPUT;
use crate::lz78::usage::{mask_from_bytes, mask_to_bytes};
use crate::lz78::{
    ChunkSource, Dictionary, Lz78Model, OnlineTrainer, Params, Patricia, Pool, PoolTrie, Seen, Stats, Strategy,
    Trainer, UsageCounts,
};

/// A trained dictionary as it crosses to Python: (parent, char, pattern, output) per code.
type Entries = Vec<(u32, String, String, bool)>;
/// A pool as `Lz78UsagePool` takes it: (parent code per entry, one character per entry).
type PoolArgs = (Vec<u32>, String);
/// Patricia rows: (parent, label, output or -1, pattern).
type Rows = Vec<(u32, String, i64, String)>;

#[pyclass(module = "tokenforge._core", name = "Lz78Model", frozen)]
pub struct PyLz78Model {
    inner: Arc<Lz78Model>,
    /// One Python int per id (see `IntTable`); shared by `with_pattern` copies.
    ints: Arc<IntTable>,
}

impl PyEncoder for PyLz78Model {
    type Model = Lz78Model;
    fn model(&self) -> &Arc<Lz78Model> {
        &self.inner
    }
    fn ints(&self) -> &IntTable {
        &self.ints
    }
}

encoder_class!(PyLz78Model {
    /// `outputs[k]` is the pattern of id k+1; `specials` are (text, id).
    #[new]
    #[pyo3(signature = (outputs, specials, pattern))]
    fn new(py: Python<'_>, outputs: Vec<String>, specials: Vec<(String, u32)>, pattern: Option<&str>) -> PyResult<Self> {
        let pt = pretok_from(pattern)?;
        let m = py.detach(|| Lz78Model::new(&outputs, specials, pt))?;
        let ints = Arc::new(IntTable::new(m.vocab_size()));
        Ok(PyLz78Model { inner: Arc::new(m), ints })
    }

    /// The same dictionary with another chunking pattern (None: no chunking).
    fn with_pattern(&self, pattern: Option<&str>) -> PyResult<Self> {
        let pt = pretok_from(pattern)?;
        Ok(PyLz78Model { inner: Arc::new(self.inner.with_pretokenizer(pt)), ints: self.ints.clone() })
    }

    #[getter]
    fn n(&self) -> u32 {
        self.inner.n()
    }

    /// (states, slots) of the double-array byte trie.
    fn trie_size(&self) -> (usize, usize) {
        (self.inner.trie().states(), self.inner.trie().slots())
    }
});

/// The strategy's parameters: its defaults, then those in `d`. A wrong name
/// or type is a `TokenforgeError` naming the strategy (`name`), as
/// `LZ78Tokenizer.train` has always reported it.
fn params_from(name: &str, strategy: Strategy, d: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    let mut p = Params::defaults(strategy);
    let Some(d) = d else { return Ok(p) };
    for (k, v) in d.iter() {
        let k: String = k.extract()?;
        let err =
            |what: &str| PyErr::from(Error::Invalid(format!("strategy {name}: LZ78 parameter {k}: expected {what}")));
        match k.as_str() {
            "pool" => {
                let s: String = v.extract().map_err(|_| err("a strategy name"))?;
                p.pool = Strategy::parse(&s)?;
            }
            "pool_factor" => p.pool_factor = v.extract().map_err(|_| err("a number"))?,
            "rounds" => p.rounds = v.extract().map_err(|_| err("a positive int"))?,
            "evict_interval" => p.evict_interval = v.extract().map_err(|_| err("an int >= 0"))?,
            "evict_fraction" => p.evict_fraction = v.extract().map_err(|_| err("a number"))?,
            "evict_threshold" => p.evict_threshold = v.extract().map_err(|_| err("an int >= 0"))?,
            "decay" => p.decay = v.extract().map_err(|_| err("a number"))?,
            "max_chars" => p.max_chars = v.extract().map_err(|_| err("an int"))?,
            "drop_fraction" => p.drop_fraction = v.extract().map_err(|_| err("a number"))?,
            "max_substrings" => p.max_substrings = v.extract().map_err(|_| err("an int"))?,
            _ => return Err(Error::Invalid(format!("strategy {name}: unknown LZ78 parameter {k:?}")).into()),
        }
    }
    p.validate()?;
    Ok(p)
}

#[pyclass(module = "tokenforge._core", name = "Lz78Trainer")]
pub struct PyLz78Trainer {
    inner: Option<Trainer>,
}

#[pymethods]
impl PyLz78Trainer {
    /// `n`: output entries wanted; `pattern`: chunking (None: each text is one chunk).
    #[new]
    #[pyo3(signature = (strategy, n, pattern, params=None))]
    fn new(strategy: &str, n: usize, pattern: Option<&str>, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let s = Strategy::parse(strategy)?;
        let p = params_from(strategy, s, params)?;
        let t = Trainer::new(s, n, pretok_from(pattern)?, p)?;
        Ok(PyLz78Trainer { inner: Some(t) })
    }

    /// Feed texts in corpus order (GIL released).
    #[pyo3(signature = (texts, num_threads=None))]
    fn feed(&mut self, py: Python<'_>, texts: Vec<String>, num_threads: Option<usize>) -> PyResult<()> {
        let pool = pool(num_threads)?;
        let t = self.inner.as_mut().ok_or_else(|| Error::invalid("this trainer has finished"))?;
        Ok(py.detach(|| pool.install(|| t.feed(&texts)))?)
    }

    #[getter]
    fn wants_more(&self) -> bool {
        self.inner.as_ref().is_some_and(|t| t.wants_more())
    }

    /// Count the chunks in a memory budget: spill sorted runs under
    /// `tmp_dir` past `limit` estimated bytes; False if the strategy counts no chunks.
    fn spill_to(&mut self, tmp_dir: std::path::PathBuf, limit: u64) -> PyResult<bool> {
        let t = self.inner.as_mut().ok_or_else(|| Error::invalid("this trainer has finished"))?;
        Ok(t.spill_to(&tmp_dir, limit)?)
    }

    /// Exact chunk counts from the runs, the most frequent kept whose cost
    /// fits `keep` bytes: (dropped chunks, their occurrences, the threshold).
    fn settle(
        &mut self,
        py: Python<'_>,
        keep: u64,
        min_coverage: f64,
        budget_per_keep: f64,
    ) -> PyResult<(u64, u64, u64)> {
        let t = self.inner.as_mut().ok_or_else(|| Error::invalid("this trainer has finished"))?;
        Ok(py.detach(|| t.settle(keep, min_coverage, budget_per_keep))?)
    }

    /// Distinct chunks counted (after `settle`: those kept).
    #[getter]
    fn unique(&self) -> usize {
        self.inner.as_ref().map_or(0, |t| t.chunk_totals().0)
    }

    /// Chunk occurrences counted.
    #[getter]
    fn total_pieces(&self) -> u64 {
        self.inner.as_ref().map_or(0, |t| t.chunk_totals().1)
    }

    /// Build the dictionary: (entries [(parent, char, pattern, output)], flat, stats).
    #[pyo3(signature = (num_threads=None))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        num_threads: Option<usize>,
    ) -> PyResult<(Entries, bool, Bound<'py, PyDict>)> {
        let pool = pool(num_threads)?;
        let t = self.inner.take().ok_or_else(|| Error::invalid("this trainer has finished"))?;
        let (d, st) = py.detach(|| pool.install(|| t.finish()))?;
        finished(py, d, &st)
    }
}

/// A trained dictionary and its stats as they cross to Python.
fn finished<'py>(py: Python<'py>, d: Dictionary, st: &Stats) -> PyResult<(Entries, bool, Bound<'py, PyDict>)> {
    let entries = d.entries.into_iter().map(|e| (e.parent, e.ch.to_string(), e.pattern, e.output)).collect();
    let s = PyDict::new(py);
    s.set_item("corpus_bytes", st.corpus_bytes)?;
    s.set_item("texts", st.texts)?;
    s.set_item("unique_chunks", st.unique_chunks)?;
    s.set_item("pool_entries", st.pool_entries)?;
    s.set_item("candidates", st.candidates)?;
    s.set_item("evictions", st.evictions)?;
    s.set_item("evicted", st.evicted)?;
    Ok((entries, d.flat, s))
}

/// The online builder alone (`OnlineTrainer`): the pool of a strategy, built
/// from the corpus in order, returned as plain data.
#[pyclass(module = "tokenforge._core", name = "Lz78Online")]
pub struct PyLz78Online {
    inner: Option<OnlineTrainer>,
}

impl PyLz78Online {
    fn get(&self) -> PyResult<&OnlineTrainer> {
        Ok(self.inner.as_ref().ok_or_else(|| Error::invalid("this builder has finished"))?)
    }
}

#[pymethods]
impl PyLz78Online {
    /// The builder of `strategy` (not flat_prune, which has none); the
    /// arguments are `Lz78Trainer`'s.
    #[new]
    #[pyo3(signature = (strategy, n, pattern, params=None))]
    fn new(strategy: &str, n: usize, pattern: Option<&str>, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let s = Strategy::parse(strategy)?;
        let p = params_from(strategy, s, params)?;
        Ok(PyLz78Online { inner: Some(OnlineTrainer::new(s, n, pretok_from(pattern)?, &p)?) })
    }

    /// Feed texts in corpus order (GIL released). The builder runs on one
    /// thread: `num_threads` (the common batching helper passes it) is only checked.
    #[pyo3(signature = (texts, num_threads=None))]
    fn feed(&mut self, py: Python<'_>, texts: Vec<String>, num_threads: Option<usize>) -> PyResult<()> {
        if num_threads == Some(0) {
            return Err(Error::invalid("num_threads must be at least 1 (or None for all cores)").into());
        }
        let t = self.inner.as_mut().ok_or_else(|| Error::invalid("this builder has finished"))?;
        Ok(py.detach(|| t.feed(&texts))?)
    }

    /// False once more text cannot change the pool (standard is full).
    #[getter]
    fn wants_more(&self) -> bool {
        self.inner.as_ref().is_some_and(|t| !t.done())
    }

    /// Texts read so far (standard stops reading once full).
    #[getter]
    fn texts(&self) -> PyResult<u64> {
        Ok(self.get()?.seen().texts)
    }

    /// UTF-8 bytes of the texts read so far.
    #[getter]
    fn corpus_bytes(&self) -> PyResult<u64> {
        Ok(self.get()?.seen().bytes)
    }

    /// The pool as plain data, what `lz78_finish` takes: (parent code per
    /// entry, one character per entry, evictions, evicted).
    fn finish(&mut self, py: Python<'_>) -> PyResult<(Vec<u32>, String, u64, u64)> {
        let t = self.inner.take().ok_or_else(|| Error::invalid("this builder has finished"))?;
        Ok(py.detach(|| {
            let p = t.finish();
            let (parents, chars) = p.parents_chars();
            (parents, chars, p.evictions, p.evicted)
        }))
    }
}

/// Dictionary-usage counts (`crate::lz78::UsageCounts`): one u64 per pool
/// code, summed by `merge`; pickles through `to_bytes`.
#[pyclass(module = "tokenforge._core", name = "UsageCounts")]
pub struct PyUsageCounts {
    inner: UsageCounts,
}

#[pymethods]
impl PyUsageCounts {
    #[new]
    fn new(counts: Vec<u64>) -> Self {
        PyUsageCounts { inner: UsageCounts::from_vec(counts) }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The counts, index = pool code (0: the root, always 0).
    fn counts(&self) -> Vec<u64> {
        self.inner.as_slice().to_vec()
    }

    /// Add `other`'s counts, code by code (same pool: same length).
    fn merge(&mut self, other: &Bound<'_, PyUsageCounts>) -> PyResult<()> {
        let o = other.try_borrow().map_err(|_| Error::invalid("cannot merge UsageCounts into itself"))?;
        Ok(self.inner.merge(&o.inner)?)
    }

    /// A new object holding the sum of `parts` (none of them changed).
    #[staticmethod]
    fn merged(parts: Vec<PyRef<'_, PyUsageCounts>>) -> PyResult<Self> {
        let Some((first, rest)) = parts.split_first() else {
            return Err(Error::invalid("merged() needs at least one UsageCounts").into());
        };
        let mut acc = first.inner.clone();
        for p in rest {
            acc.merge(&p.inner)?;
        }
        Ok(PyUsageCounts { inner: acc })
    }

    /// The bytes of `crate::transport` (kind: usage). Equal counts give equal bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Counts from `to_bytes`' output (FormatError with the byte offset if damaged).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PyUsageCounts { inner: py.detach(|| UsageCounts::from_bytes(data))? })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.downcast::<PyUsageCounts>().is_ok_and(|o| o.borrow().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        format!("UsageCounts(codes={}, total={})", self.inner.len(), self.inner.as_slice().iter().sum::<u64>())
    }

    /// Pickles through `to_bytes` (how a cluster ships it).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let data = slf.borrow().to_bytes(slf.py());
        Ok((slf.get_type().getattr("from_bytes")?, (data,)))
    }
}

/// A pool (`Lz78Online.finish()`'s parents and characters) ready to count
/// usage on a worker: its byte trie is built once, here; each round's mask
/// switches outputs on a copy. Pickles as the parents and characters.
#[pyclass(module = "tokenforge._core", name = "Lz78UsagePool", frozen)]
pub struct PyLz78UsagePool {
    parents: Vec<u32>,
    chars: String,
    trie: PoolTrie,
}

#[pymethods]
impl PyLz78UsagePool {
    #[new]
    fn new(py: Python<'_>, parents: Vec<u32>, chars: String) -> PyResult<Self> {
        let trie = py.detach(|| -> Result<PoolTrie, Error> {
            let pool = Pool::from_parents(&parents, &chars, 0, 0)?;
            PoolTrie::new(&pool.dictionary)
        })?;
        Ok(PyLz78UsagePool { parents, chars, trie })
    }

    /// The length of a round's mask and of its counts (pool entries + 1).
    #[getter]
    fn codes(&self) -> usize {
        self.trie.codes()
    }

    /// Usage over `counter`'s chunks with the outputs of `mask` (a round's
    /// bytes, as `lz78_finish` hands them to its `usage` callback). GIL released.
    #[pyo3(signature = (counter, mask, num_threads=None))]
    fn usage(
        &self,
        py: Python<'_>,
        counter: &Bound<'_, PyWordCounter>,
        mask: &[u8],
        num_threads: Option<usize>,
    ) -> PyResult<PyUsageCounts> {
        let threads = super::pool(num_threads)?;
        let c = counter.borrow();
        let wc = c.peek()?;
        let inner = py.detach(|| -> Result<UsageCounts, Error> {
            let mask = mask_from_bytes(mask)?;
            let mut t = self.trie.clone();
            t.set_mask(&mask)?;
            let items: Vec<(&[u8], u64)> = wc.pieces().collect();
            Ok(threads.install(|| t.usage(&items)))
        })?;
        Ok(PyUsageCounts { inner })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, PoolArgs)> {
        let me = slf.get();
        Ok((slf.get_type().into_any(), (me.parents.clone(), me.chars.clone())))
    }
}

/// The dictionary of `strategy` from its pool (`Lz78Online.finish()`; None
/// for flat_prune) and the corpus's chunk counts (a `WordCounter`, consumed;
/// None for standard and frequency_gated): what `Lz78Trainer.finish` returns
/// after the same corpus. `texts` and `corpus_bytes` go into the stats.
///
/// Chunks counted elsewhere (a cluster's workers), for the pool strategies:
/// `counter` None, `unique_chunks` the corpus's number of unique chunks, and
/// `usage` a callable that takes a round's mask (bytes) and returns that
/// round's `UsageCounts` over the whole corpus; it is called once per round,
/// with the GIL, and what it raises is raised here.
#[pyfunction]
#[pyo3(signature = (strategy, n, pool, counter, texts, corpus_bytes, params=None, num_threads=None, unique_chunks=None, usage=None))]
#[allow(clippy::too_many_arguments)]
fn lz78_finish<'py>(
    py: Python<'py>,
    strategy: &str,
    n: usize,
    pool: Option<(Vec<u32>, String, u64, u64)>,
    counter: Option<&Bound<'py, PyWordCounter>>,
    texts: u64,
    corpus_bytes: u64,
    params: Option<&Bound<'py, PyDict>>,
    num_threads: Option<usize>,
    unique_chunks: Option<u64>,
    usage: Option<Py<PyAny>>,
) -> PyResult<(Entries, bool, Bound<'py, PyDict>)> {
    let s = Strategy::parse(strategy)?;
    let p = params_from(strategy, s, params)?;
    let threads = super::pool(num_threads)?;
    let pool = match pool {
        Some((parents, chars, evictions, evicted)) => {
            Some(py.detach(|| Pool::from_parents(&parents, &chars, evictions, evicted))?)
        }
        None => None,
    };
    let seen = Seen { texts, bytes: corpus_bytes };
    if let Some(cb) = usage {
        let Some(unique_chunks) = unique_chunks.filter(|_| counter.is_none()) else {
            return Err(Error::invalid("with usage=, give unique_chunks and no counter").into());
        };
        // a Python error in the callback is kept here and raised as it was
        let mut raised: Option<PyErr> = None;
        let out = py.detach(|| {
            let ask = |mask: &[bool]| -> Result<Vec<u64>, Error> {
                Python::attach(|py| {
                    let blob = PyBytes::new(py, &mask_to_bytes(mask));
                    let got = cb.call1(py, (blob,)).and_then(|r| {
                        let u = r.bind(py).downcast::<PyUsageCounts>().map_err(PyErr::from)?.borrow().inner.clone();
                        Ok(u.into_vec())
                    });
                    got.map_err(|e| {
                        raised = Some(e);
                        Error::invalid("the usage callback raised")
                    })
                })
            };
            let src = ChunkSource::Elsewhere { unique_chunks, usage: Box::new(ask) };
            crate::lz78::finish(s, n, &p, pool, Some(src), seen)
        });
        if let Some(e) = raised {
            return Err(e);
        }
        let (d, st) = out?;
        return finished(py, d, &st);
    }
    let chunks = match counter {
        Some(c) => Some(c.borrow_mut().take()?),
        None => None,
    };
    let (d, st) =
        py.detach(|| threads.install(|| crate::lz78::finish(s, n, &p, pool, chunks.map(ChunkSource::Here), seen)))?;
    finished(py, d, &st)
}

fn items_of(items: &[(String, i64)]) -> Vec<(&str, u32)> {
    items.iter().map(|(p, o)| (p.as_str(), if *o < 0 { NO_OUTPUT } else { *o as u32 })).collect()
}

/// Build a Patricia trie from (pattern, output id or -1): rows (parent,
/// label, output or -1, pattern) for nodes 1.., and the plain-trie node count.
#[pyfunction]
fn lz78_patricia(py: Python<'_>, items: Vec<(String, i64)>) -> PyResult<(Rows, usize)> {
    let p = py.detach(|| Patricia::build(items_of(&items)))?;
    let rows = p.nodes[1..]
        .iter()
        .map(|n| {
            (n.parent, n.label.clone(), if n.output == NO_OUTPUT { -1 } else { n.output as i64 }, n.pattern.clone())
        })
        .collect();
    Ok((rows, p.trie_nodes))
}

/// Greedy longest match on the Patricia trie of (pattern, output id or -1)
/// with byte fallback at `n + 1 + b` (for the Patricia == plain-trie tests).
#[pyfunction]
#[pyo3(signature = (items, n, text, pattern=None))]
fn lz78_patricia_encode(
    py: Python<'_>,
    items: Vec<(String, i64)>,
    n: u32,
    text: &str,
    pattern: Option<&str>,
) -> PyResult<Vec<u32>> {
    let pt = pretok_from(pattern)?;
    py.detach(|| -> Result<Vec<u32>, Error> {
        let p = Patricia::build(items_of(&items))?;
        let mut out = Vec::new();
        pt.split(text, |c| p.encode_into(c.as_bytes(), n + 1, &mut out))?;
        Ok(out)
    })
    .map_err(PyErr::from)
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<PyLz78Model>()?;
    m.add_class::<PyLz78Trainer>()?;
    m.add_class::<PyLz78Online>()?;
    m.add_class::<PyUsageCounts>()?;
    m.add_class::<PyLz78UsagePool>()?;
    m.add_function(wrap_pyfunction!(lz78_finish, m)?)?;
    m.add_function(wrap_pyfunction!(lz78_patricia, m)?)?;
    m.add_function(wrap_pyfunction!(lz78_patricia_encode, m)?)?;
    Ok(())
}
