//! Bindings of the mixedgram core (`crate::ngram`): conversion, GIL release
//! and error mapping only. Texts arrive as latin1 `bytes` (the Python layer
//! turns `str` into latin1 and raises `Latin1Error`); ids leave as numpy
//! uint16 arrays. Errors are the crate's `Error` (`Format` with its byte
//! offset), mapped by `py::to_py` like every family's.
//!
//! Not handled: the encoder seam (`py::encoder`): mixedgram takes bytes, not
//! `str`, so its class keeps its own encode and batch methods.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::Arc;

use super::{ids_from, pool};
use crate::error::Error;
use crate::ngram::dist::{self, Edge, NgramCounts, Selector};
use crate::ngram::{self, file, pack, CountStats, Model, Parse, Scored};

fn parse_of(s: &str) -> PyResult<Parse> {
    Ok(Parse::from_name(s)?)
}

/// Ids from Python, each checked to fit 12 bits.
fn ids12(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u16>> {
    let v = ids_from(obj)?;
    let mut out = Vec::with_capacity(v.len());
    for (i, &x) in v.iter().enumerate() {
        if x as usize >= ngram::VOCAB_SIZE {
            return Err(
                Error::Invalid(format!("id {x} at position {i} does not fit in 12 bits (ids are 0..4095)")).into()
            );
        }
        out.push(x as u16);
    }
    Ok(out)
}

/// (flat ids, offsets of each text's ids).
type FlatIds<'py> = (Bound<'py, PyArray1<u16>>, Bound<'py, PyArray1<i64>>);

#[pyclass(module = "tokenforge._core", name = "MixedgramModel", frozen)]
pub struct PyMixedgramModel {
    inner: Arc<Model>,
}

#[pymethods]
impl PyMixedgramModel {
    /// `ngrams[i]` is id 256 + i (b"" = unused, at most 3840); `specials` are
    /// (id, text bytes) in unused slots.
    #[new]
    #[pyo3(signature = (ngrams, specials=Vec::new()))]
    fn new(ngrams: Vec<Vec<u8>>, specials: Vec<(u32, Vec<u8>)>) -> PyResult<Self> {
        let m = Model::new(&ngrams, &specials)?;
        Ok(PyMixedgramModel { inner: Arc::new(m) })
    }

    /// The model of a `.mxgram` header (`data` may hold the whole file).
    #[staticmethod]
    fn from_header(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let m = py.detach(|| file::parse_header(data).and_then(|s| Model::from_keys(s, &[])))?;
        Ok(PyMixedgramModel { inner: Arc::new(m) })
    }

    /// The 3840 slots as bytes (b"" for unused and special slots).
    fn ngrams<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for &k in self.inner.slots() {
            l.append(PyBytes::new(py, &if k == 0 { Vec::new() } else { ngram::key_bytes(k) }))?;
        }
        Ok(l)
    }

    #[getter]
    fn ngram_count(&self) -> usize {
        self.inner.ngram_count()
    }

    /// Ids of latin1 bytes (NULs removed first) as uint16.
    #[pyo3(signature = (data, parse="greedy"))]
    fn encode<'py>(&self, py: Python<'py>, data: &[u8], parse: &str) -> PyResult<Bound<'py, PyArray1<u16>>> {
        let parse = parse_of(parse)?;
        let v = py.detach(|| self.inner.encode(&ngram::strip_nul(data).0, parse));
        Ok(PyArray1::from_vec(py, v))
    }

    /// Greedy ids of `data[start..]` for tokens starting before `stop`, and
    /// where the next token starts: consecutive calls give the whole-text
    /// result (for progress on large inputs). `data` must be NUL-free.
    fn encode_range<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        start: usize,
        stop: usize,
    ) -> PyResult<(Bound<'py, PyArray1<u16>>, usize)> {
        if start > data.len() {
            return Err(Error::Invalid(format!("start {start} is past the end ({})", data.len())).into());
        }
        let end = stop.min(data.len()).max(start);
        if data[start..(end + 8).min(data.len())].contains(&0) {
            return Err(Error::invalid("encode_range needs NUL-free data; strip NULs first").into());
        }
        let (v, next) = py.detach(|| {
            let mut out = Vec::new();
            let next = self.inner.encode_greedy_range(data, start, stop, &mut out);
            (out, next)
        });
        Ok((PyArray1::from_vec(py, v), next))
    }

    /// Many texts in parallel: (flat uint16 ids, uint64 offsets of len(texts)+1).
    #[pyo3(signature = (texts, parse="greedy", num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Vec<u8>>,
        parse: &str,
        num_threads: Option<usize>,
    ) -> PyResult<FlatIds<'py>> {
        use rayon::prelude::*;
        let parse = parse_of(parse)?;
        let pool = pool(num_threads)?;
        let model = self.inner.clone();
        let (flat, offsets) = py.detach(|| {
            let parts: Vec<Vec<u16>> =
                pool.install(|| texts.par_iter().map(|t| model.encode(&ngram::strip_nul(t).0, parse)).collect());
            let mut flat = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
            let mut offsets = Vec::with_capacity(parts.len() + 1);
            offsets.push(0i64);
            for p in &parts {
                flat.extend_from_slice(p);
                offsets.push(flat.len() as i64);
            }
            (flat, offsets)
        });
        Ok((PyArray1::from_vec(py, flat), PyArray1::from_vec(py, offsets)))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = ids_from(ids)?;
        let b = py.detach(|| self.inner.decode(&ids))?;
        Ok(PyBytes::new(py, &b))
    }

    fn id_bytes<'py>(&self, py: Python<'py>, id: u32) -> Option<Bound<'py, PyBytes>> {
        self.inner.id_bytes(id).map(|b| PyBytes::new(py, &b))
    }

    fn token_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i32>> {
        PyArray1::from_vec(py, self.inner.token_lengths())
    }

    /// The 38,400-byte `.mxgram` header of this vocabulary.
    fn header<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &file::write_header(&self.inner))
    }

    /// A whole `.mxgram` file of `data` (NULs removed): (file bytes, tokens).
    #[pyo3(signature = (data, parse="greedy"))]
    fn compress<'py>(&self, py: Python<'py>, data: &[u8], parse: &str) -> PyResult<(Bound<'py, PyBytes>, usize)> {
        let parse = parse_of(parse)?;
        let (out, n) = py.detach(|| {
            let text = ngram::strip_nul(data).0;
            let ids = self.inner.encode(&text, parse);
            let mut out = file::write_header(&self.inner);
            file::append_packed(&ids, &mut out);
            (out, ids.len())
        });
        Ok((PyBytes::new(py, &out), n))
    }

    /// Decode a chunk of a packed stream (whole triples); `base` is its file
    /// offset for errors; only the last chunk may end with padding.
    #[pyo3(signature = (data, base=0, is_last=true))]
    fn decode_stream<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        base: usize,
        is_last: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let out = py.detach(|| {
            let mut out = Vec::new();
            file::decode_stream(&self.inner, data, base, is_last, &mut out).map(|_| out)
        })?;
        Ok(PyBytes::new(py, &out))
    }

    /// How often each id occurs in a packed stream chunk (uint64, 4096).
    #[pyo3(signature = (data, base=0, is_last=true))]
    fn histogram<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        base: usize,
        is_last: bool,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let h = py.detach(|| file::histogram(&self.inner, data, base, is_last))?;
        Ok(PyArray1::from_vec(py, h))
    }
}

/// Train: the top `slots` n-grams of latin1 `data` (NULs removed first), in
/// vocabulary order, as [(bytes, count)], plus counting statistics (`runs`:
/// spilled runs). `spill`: (tmp_dir, limit, keep, budget_per_keep, fixed), a
/// memory budget's bounds for the level tables (`ngram::count::Spill`).
#[pyfunction]
#[pyo3(signature = (data, slots=ngram::NGRAM_SLOTS, num_threads=None, spill=None))]
fn mixedgram_train<'py>(
    py: Python<'py>,
    data: &[u8],
    slots: usize,
    num_threads: Option<usize>,
    spill: Option<(std::path::PathBuf, u64, u64, f64, u64)>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    if slots > ngram::NGRAM_SLOTS {
        return Err(Error::Invalid(format!("slots must be at most {}", ngram::NGRAM_SLOTS)).into());
    }
    let spill = match spill {
        Some((parent, limit, keep, budget_per_keep, fixed)) => {
            if !parent.is_dir() {
                let msg = format!("the temporary directory {} does not exist", parent.display());
                return Err(Error::invalid(msg).into());
            }
            Some(ngram::count::Spill { parent, limit, keep, budget_per_keep, fixed })
        }
        None => None,
    };
    let pool = pool(num_threads)?;
    let (top, stats, runs, removed, len) = py.detach(|| {
        let (text, removed) = ngram::strip_nul(data);
        let (top, stats, runs) = pool.install(|| ngram::count::top_ngrams_bounded(&text, slots, spill.as_ref()))?;
        Ok::<_, Error>((top, stats, runs, removed, text.len()))
    })?;
    let (l, d) = top_to_py(py, &top, &stats, len as u64)?;
    d.set_item("nul_removed", removed)?;
    d.set_item("runs", runs)?;
    Ok((l, d))
}

/// The selection as Python: [(bytes, count)] and {text_bytes, positions, distinct, min_count}.
fn top_to_py<'py>(
    py: Python<'py>,
    top: &[Scored],
    stats: &CountStats,
    len: u64,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    let l = PyList::empty(py);
    for s in top {
        l.append((PyBytes::new(py, &ngram::key_bytes(s.key)), s.count))?;
    }
    let d = PyDict::new(py);
    d.set_item("text_bytes", len)?;
    d.set_item("positions", stats.positions.to_vec())?;
    d.set_item("distinct", stats.distinct.to_vec())?;
    d.set_item("min_count", stats.min_count.to_vec())?;
    Ok((l, d))
}

// ---- distributed training (crate::ngram::dist) -------------------------------

/// One level's n-gram counts (a piece's, or merged); pickles through its bytes.
#[pyclass(module = "tokenforge._core", name = "NgramCounts", frozen)]
pub struct PyNgramCounts {
    inner: NgramCounts,
}

#[pymethods]
impl PyNgramCounts {
    /// No counts of `n`-grams.
    #[new]
    fn new(n: usize) -> PyResult<Self> {
        Ok(PyNgramCounts { inner: NgramCounts::empty(n)? })
    }

    #[getter]
    fn n(&self) -> usize {
        self.inner.n()
    }

    /// The positions counted (the sum of the counts).
    #[getter]
    fn positions(&self) -> u64 {
        self.inner.positions()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// [(n-gram bytes, count)] in byte order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for &(k, c) in self.inner.entries() {
            l.append((PyBytes::new(py, &ngram::key_bytes(k)), c))?;
        }
        Ok(l)
    }

    /// The sum of counts of the same n.
    #[staticmethod]
    fn merge(py: Python<'_>, parts: Vec<PyRef<'_, PyNgramCounts>>) -> PyResult<Self> {
        let refs: Vec<&NgramCounts> = parts.iter().map(|p| &p.inner).collect();
        let inner = py.detach(|| NgramCounts::merge(&refs))?;
        Ok(PyNgramCounts { inner })
    }

    /// Compact versioned little-endian bytes (deterministic; docs/formats.md).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Read `to_bytes`' layout strictly (FormatError with the byte offset).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = py.detach(|| NgramCounts::from_bytes(data))?;
        Ok(PyNgramCounts { inner })
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let f = py.get_type::<PyNgramCounts>().getattr("from_bytes")?;
        Ok((f, (self.to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        format!(
            "NgramCounts(n={}, distinct={}, positions={})",
            self.inner.n(),
            self.inner.len(),
            self.inner.positions()
        )
    }
}

/// The level-`n` counts of one NUL-free piece of text: the n-grams wholly
/// inside it whose (n-1)-prefix and -suffix are in `frequent` (None at level 2).
#[pyfunction]
#[pyo3(signature = (text, n, frequent=None, num_threads=None))]
fn mixedgram_count_piece(
    py: Python<'_>,
    text: &[u8],
    n: usize,
    frequent: Option<PyRef<'_, PyNgramCounts>>,
    num_threads: Option<usize>,
) -> PyResult<PyNgramCounts> {
    let pool = pool(num_threads)?;
    let f = frequent.as_ref().map(|f| &f.inner);
    let inner = py.detach(|| pool.install(|| dist::count_piece(text, n, f)))?;
    Ok(PyNgramCounts { inner })
}

/// (length, head, tail) of a NUL-free piece: what the selector needs of it.
#[pyfunction]
fn mixedgram_edge<'py>(py: Python<'py>, text: &[u8]) -> (u64, Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
    let e = Edge::of(text);
    (e.len, PyBytes::new(py, &e.head), PyBytes::new(py, &e.tail))
}

/// The driver of distributed training: `NgramSelector(k, edges)`, then while
/// `level` is not None: `add(merged counts of every piece at that level,
/// counted with frequent())`; `finish()` is `mixedgram_train`'s selection.
#[pyclass(module = "tokenforge._core", name = "NgramSelector")]
pub struct PyNgramSelector {
    inner: Selector,
}

#[pymethods]
impl PyNgramSelector {
    #[new]
    fn new(k: usize, edges: Vec<(u64, Vec<u8>, Vec<u8>)>) -> PyResult<Self> {
        if k > ngram::NGRAM_SLOTS {
            return Err(Error::Invalid(format!("k must be at most {}", ngram::NGRAM_SLOTS)).into());
        }
        let edges: Vec<Edge> = edges.into_iter().map(|(len, head, tail)| Edge { len, head, tail }).collect();
        Ok(PyNgramSelector { inner: Selector::new(k, &edges)? })
    }

    /// The level to count next (2..8), or None when done.
    #[getter]
    fn level(&self) -> Option<usize> {
        self.inner.level()
    }

    /// The frequent (n-1)-grams for counting level n (None at level 2).
    fn frequent(&self) -> Option<PyNgramCounts> {
        self.inner.frequent().map(|f| PyNgramCounts { inner: f.clone() })
    }

    /// The merged counts of every piece at `level`.
    fn add(&mut self, py: Python<'_>, counts: PyRef<'_, PyNgramCounts>) -> PyResult<()> {
        let sel = &mut self.inner;
        let c = &counts.inner;
        py.detach(|| sel.add(c))?;
        Ok(())
    }

    /// ([(bytes, count)] in vocabulary order, {text_bytes, positions, distinct, min_count}).
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
        let (top, stats) = self.inner.finish()?;
        top_to_py(py, &top, &stats, self.inner.text_len())
    }
}

/// Pack a token stream (ids 1..4095; an odd count gets a padding 0).
#[pyfunction]
fn mixedgram_pack<'py>(py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let ids = ids12(ids)?;
    let b = py.detach(|| pack::pack_stream(&ids))?;
    Ok(PyBytes::new(py, &b))
}

/// Unpack a token stream (final padding dropped; FormatError with offset).
#[pyfunction]
fn mixedgram_unpack<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyArray1<u16>>> {
    let v = py.detach(|| pack::unpack_stream(data))?;
    Ok(PyArray1::from_vec(py, v))
}

/// Raw 12-bit packing of any values 0..4095 (odd count: a 0 is added).
#[pyfunction]
fn mixedgram_pack12<'py>(py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let ids = ids12(ids)?;
    let b = py.detach(|| pack::pack12(&ids))?;
    Ok(PyBytes::new(py, &b))
}

/// Raw 12-bit unpacking: two values per triple.
#[pyfunction]
fn mixedgram_unpack12<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyArray1<u16>>> {
    let v = py.detach(|| pack::unpack12(data))?;
    Ok(PyArray1::from_vec(py, v))
}

/// The latin1 text of a whole `.mxgram` file.
#[pyfunction]
fn mixedgram_decompress<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let v = py.detach(|| file::decompress(data))?;
    Ok(PyBytes::new(py, &v))
}

/// (data without NULs, number removed); the same object when it has none.
#[pyfunction]
fn mixedgram_strip_nul<'py>(py: Python<'py>, data: Bound<'py, PyBytes>) -> (Bound<'py, PyBytes>, u64) {
    let raw = data.as_bytes();
    let stripped = py.detach(|| {
        let (t, r) = ngram::strip_nul(raw);
        if r == 0 {
            None
        } else {
            Some((t.into_owned(), r))
        }
    });
    match stripped {
        Some((v, r)) => (PyBytes::new(py, &v), r),
        None => (data, 0),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MIXEDGRAM_HEADER_BYTES", ngram::HEADER_BYTES)?;
    m.add_class::<PyMixedgramModel>()?;
    m.add_function(wrap_pyfunction!(mixedgram_train, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_pack, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_unpack, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_pack12, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_unpack12, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_decompress, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_strip_nul, m)?)?;
    m.add_class::<PyNgramCounts>()?;
    m.add_class::<PyNgramSelector>()?;
    m.add_function(wrap_pyfunction!(mixedgram_count_piece, m)?)?;
    m.add_function(wrap_pyfunction!(mixedgram_edge, m)?)?;
    Ok(())
}
