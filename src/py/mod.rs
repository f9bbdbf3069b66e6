//! Python bindings: conversion, GIL release and error mapping only.
//! Every call that is linear in its input runs with the GIL released.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use rayon::ThreadPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::bpe::encode::{BpeModel, MergeRule, SplitRule};
use crate::bpe::train::{TieBreak, Trainer, WordCounter};
use crate::error::Error;
use crate::pretok::{Pretokenizer, CL100K_PATTERN, GPT2_PATTERN, GPT4_PATTERN};

mod mixedgram;
mod lz78;

/// Map a core error to the matching `tokenforge.errors` class.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let name = match &e {
        Error::Pattern(_) => "PatternError",
        Error::VocabSize(_) => "VocabSizeError",
        Error::Invalid(_) => "TokenforgeError",
        Error::Cancelled => return PyKeyboardInterrupt::new_err("interrupted"),
    };
    match py.import("tokenforge.errors").and_then(|m| m.getattr(name)) {
        Ok(cls) => match cls.call1((e.to_string(),)) {
            Ok(v) => PyErr::from_value(v),
            Err(x) => x,
        },
        Err(_) => PyValueError::new_err(e.to_string()),
    }
}

/// A rayon pool per thread count, built once.
pub(crate) fn pool(n: Option<usize>) -> PyResult<Arc<ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let n = match n {
        Some(0) => return Err(PyValueError::new_err("num_threads must be at least 1 (or None for all cores)")),
        Some(n) => n,
        None => std::thread::available_parallelism().map(|x| x.get()).unwrap_or(1),
    };
    let mut pools = POOLS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap();
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| PyValueError::new_err(format!("cannot start {n} threads: {e}")))?,
    );
    pools.insert(n, p.clone());
    Ok(p)
}

/// One Python int per id, made once per model. Lists of ids are built from
/// these (a reference-count increment each) instead of allocating a fresh
/// int per token: on long texts and batches, creating the Python list under
/// the GIL otherwise costs as much as the encoding, and it is the serial part
/// that keeps `encode_batch` from scaling with threads.
pub(crate) struct IntTable(Vec<Py<PyAny>>);

impl IntTable {
    pub(crate) fn new(py: Python<'_>, n: usize) -> PyResult<Self> {
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            v.push((i as u64).into_pyobject(py)?.into_any().unbind());
        }
        Ok(IntTable(v))
    }

    pub(crate) fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            ids.iter().map(|&i| match self.0.get(i as usize) {
                Some(o) => o.bind(py).clone(),
                None => (i as u64).into_pyobject(py).expect("int").into_any(),
            }),
        )
    }

    pub(crate) fn lists<'py>(&self, py: Python<'py>, parts: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in parts {
            out.append(self.list(py, p)?)?;
        }
        Ok(out)
    }
}

/// Encode `texts` on `num_threads` threads and return one Python list of ids
/// per text. Building the lists needs the GIL, so it is serial; with two or
/// more threads, chunks of texts are taken in order by `num_threads - 1` pool
/// threads and by the calling thread, which between its own chunks builds
/// the lists of the finished ones -- so list building overlaps the encoding
/// and exactly `num_threads` threads work. With one thread the lists are
/// built after the encoding.
pub(crate) fn encode_lists<'py, F>(
    py: Python<'py>,
    ints: &IntTable,
    texts: &[&str],
    num_threads: Option<usize>,
    encode: F,
) -> PyResult<Bound<'py, PyList>>
where
    F: Fn(&str) -> Result<Vec<u32>, Error> + Sync + Send,
{
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let pool = pool(num_threads)?;
    let threads = pool.current_num_threads();
    let total: usize = texts.iter().map(|t| t.len()).sum();
    // Chunks of about total / (16 * threads) bytes (at least 64 KiB), cut at text boundaries.
    let target = (total / (16 * threads.max(1))).max(1 << 16);
    let mut bounds = vec![0usize];
    let mut acc = 0;
    for (i, t) in texts.iter().enumerate() {
        acc += t.len();
        if acc >= target {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().unwrap() != texts.len() {
        bounds.push(texts.len());
    }
    let chunks = bounds.len() - 1;
    if threads < 2 || chunks < 2 {
        let parts: Result<Vec<Vec<u32>>, Error> =
            py.detach(|| pool.install(|| texts.par_iter().with_min_len(1).map(|t| encode(t)).collect()));
        return ints.lists(py, &parts.map_err(|e| to_py(py, e))?);
    }
    type Chunk = (usize, Result<Vec<Vec<u32>>, Error>);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<Chunk>();
    let out = PyList::empty(py);
    let mut result: PyResult<()> = Ok(());
    let encode_chunk = |i: usize| -> Result<Vec<Vec<u32>>, Error> {
        texts[bounds[i]..bounds[i + 1]].iter().map(|t| encode(t)).collect()
    };
    std::thread::scope(|scope| {
        let (next, stop, encode_chunk, pool) = (&next, &stop, &encode_chunk, &pool);
        // threads - 1 pool threads take chunks in order; this thread is the last
        // encoder, and builds the lists of finished chunks whenever the next one is ready.
        scope.spawn(move || {
            pool.scope(|s| {
                for _ in 1..threads {
                    let tx = tx.clone();
                    s.spawn(move |_| loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= chunks || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        if tx.send((i, encode_chunk(i))).is_err() {
                            break;
                        }
                    });
                }
            });
        });
        let mut ready: Vec<Option<Result<Vec<Vec<u32>>, Error>>> = (0..chunks).map(|_| None).collect();
        let mut done = 0;
        let mut rx = rx;
        while done < chunks {
            while let Ok((i, r)) = rx.try_recv() {
                ready[i] = Some(r);
            }
            if ready[done].is_none() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i < chunks {
                    let r = py.detach(|| encode_chunk(i));
                    ready[i] = Some(r);
                } else {
                    let (got, back) = py.detach(move || (rx.recv(), rx));
                    rx = back;
                    match got {
                        Ok((i, r)) => ready[i] = Some(r),
                        Err(_) => break,
                    }
                }
                continue;
            }
            while done < chunks {
                let Some(r) = ready[done].take() else { break };
                done += 1;
                let step = r.map_err(|e| to_py(py, e)).and_then(|parts| {
                    for p in &parts {
                        out.append(ints.list(py, p)?)?;
                    }
                    Ok(())
                });
                if let Err(e) = step {
                    result = Err(e);
                    stop.store(true, Ordering::Relaxed);
                    done = chunks;
                }
            }
        }
        if result.is_ok() && done < chunks {
            result = Err(pyo3::exceptions::PyRuntimeError::new_err("the encoding threads stopped before the batch was done"));
        }
    });
    result.map(|_| out)
}

/// The str items of a Python sequence, kept alive so their UTF-8 can be
/// borrowed (`to_str`) across a GIL release without copying the text.
pub(crate) fn py_strs<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyString>>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("expected a list of str, not a single str"));
    }
    let mut v = Vec::new();
    for (i, x) in obj.try_iter()?.enumerate() {
        let x = x?;
        let name = x.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        v.push(x.cast_into::<PyString>().map_err(|_| PyTypeError::new_err(format!("item {i} is {name}, expected str")))?);
    }
    Ok(v)
}

pub(crate) fn borrow_strs<'a>(owned: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    owned.iter().map(|s| s.to_str()).collect()
}

/// One block of a `.jsonl` file for the pretokenizing pipeline (see
/// `crate::jsonl`), for a family whose `encode_batch` is `encode`: the lines
/// `head + body[:end]` (two parts, so the reader hands over what it read
/// without copying it), parsed and encoded in parallel with the GIL released.
/// None when a line needs the Python reader; else (tokens as uint16 if
/// `narrow` else uint32, then per document uint64 token counts, byte counts
/// and character counts, then the number of lines in the block).
#[allow(clippy::too_many_arguments)]
pub(crate) fn jsonl_block<'py, F>(
    py: Python<'py>,
    head: &[u8],
    body: &[u8],
    end: usize,
    field: &str,
    file_start: bool,
    skip: usize,
    bos: Option<u32>,
    narrow: bool,
    num_threads: Option<usize>,
    token_len: &[i32],
    encode: F,
) -> PyResult<Option<Bound<'py, PyTuple>>>
where
    F: Fn(&str) -> Result<Vec<u32>, Error> + Sync + Send,
{
    use crate::jsonl::{encode_block, Encoded};
    let pool = pool(num_threads)?;
    if end > body.len() || head.contains(&b'\n') {
        return Err(PyValueError::new_err("a block is a head without newlines and body[:end]"));
    }
    fn tuple<'py, T: numpy::Element>(py: Python<'py>, e: Encoded<T>) -> PyResult<Bound<'py, PyTuple>> {
        let parts = [
            PyArray1::from_vec(py, e.tokens).into_any(),
            PyArray1::from_vec(py, e.ntok).into_any(),
            PyArray1::from_vec(py, e.nbytes).into_any(),
            PyArray1::from_vec(py, e.nchars).into_any(),
            (e.lines as u64).into_pyobject(py)?.into_any(),
        ];
        PyTuple::new(py, parts)
    }
    let body = &body[..end];
    if narrow {
        let e = py.detach(|| pool.install(|| encode_block::<u16, _>(head, body, field, file_start, skip, bos, token_len, &encode)));
        e.map_err(|e| to_py(py, e))?.map(|e| tuple(py, e)).transpose()
    } else {
        let e = py.detach(|| pool.install(|| encode_block::<u32, _>(head, body, field, file_start, skip, bos, token_len, &encode)));
        e.map_err(|e| to_py(py, e))?.map(|e| tuple(py, e)).transpose()
    }
}

/// Token ids from a list of ints or a 1-D numpy integer array.
pub(crate) fn ids_from(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<u32>>() {
        return Ok(a.as_slice().map(|s| s.to_vec()).unwrap_or_else(|_| a.as_array().to_vec()));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<u16>>() {
        return Ok(a.as_array().iter().map(|&x| x as u32).collect());
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<i64>>() {
        return a.as_array().iter().enumerate().map(|(i, &x)| check_id(x, i)).collect();
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<i32>>() {
        return a.as_array().iter().enumerate().map(|(i, &x)| check_id(x as i64, i)).collect();
    }
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err("token ids must be a sequence of ints, not str/bytes"));
    }
    let mut out = Vec::new();
    for (i, x) in obj.try_iter()?.enumerate() {
        let x = x?;
        if x.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err(format!("token id at position {i} is a bool, not an int")));
        }
        let v: i64 = x.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "token id at position {i} must be an int, not {}",
                x.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        out.push(check_id(v, i)?);
    }
    Ok(out)
}

fn check_id(x: i64, i: usize) -> PyResult<u32> {
    if x < 0 || x > u32::MAX as i64 {
        return Err(PyValueError::new_err(format!("token id {x} at position {i} is out of range")));
    }
    Ok(x as u32)
}

fn byte_ids_from(v: Vec<u32>) -> PyResult<[u32; 256]> {
    v.try_into().map_err(|v: Vec<u32>| PyValueError::new_err(format!("byte_ids must have 256 entries, not {}", v.len())))
}

fn pretok_from(py: Python<'_>, pattern: Option<&str>) -> PyResult<Pretokenizer> {
    Pretokenizer::new(pattern).map_err(|e| to_py(py, e))
}

#[pyclass(module = "tokenforge._core", name = "BpeModel", frozen)]
pub struct PyBpeModel {
    inner: Arc<BpeModel>,
    ints: IntTable,
}

#[pymethods]
impl PyBpeModel {
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
            r => return Err(PyValueError::new_err(format!("unknown merge rule {r:?}; expected \"bytes\" or \"pairs\""))),
        };
        let b = byte_ids_from(byte_ids)?;
        let pt = pretok_from(py, pattern)?;
        let m = py.detach(|| BpeModel::new(&b, &merges, specials, pt, rule)).map_err(|e| to_py(py, e))?;
        let ints = IntTable::new(py, m.vocab_size())?;
        Ok(PyBpeModel { inner: Arc::new(m), ints })
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    #[getter]
    fn pattern(&self) -> Option<String> {
        self.inner.pretokenizer().pattern()
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ids = py.detach(|| self.inner.encode_ordinary(text)).map_err(|e| to_py(py, e))?;
        self.ints.list(py, &ids)
    }

    /// Ids as a numpy uint32 array (no per-id Python objects).
    fn encode_ordinary_numpy<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let v = py.detach(|| self.inner.encode_ordinary(text)).map_err(|e| to_py(py, e))?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Encode with the given special ids allowed (None: all specials).
    #[pyo3(signature = (text, allowed=None))]
    fn encode<'py>(&self, py: Python<'py>, text: &str, allowed: Option<Vec<u32>>) -> PyResult<Bound<'py, PyList>> {
        let ids = py.detach(|| self.inner.encode_with_specials(text, allowed.as_deref())).map_err(|e| to_py(py, e))?;
        self.ints.list(py, &ids)
    }

    /// Many texts in parallel, as lists of ids (one per text).
    #[pyo3(signature = (texts, num_threads=None, allowed=None, specials=false))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
        allowed: Option<Vec<u32>>,
        specials: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let owned = py_strs(texts)?;
        let model = &self.inner;
        let allowed = allowed.as_deref();
        encode_lists(py, &self.ints, &borrow_strs(&owned)?, num_threads, |t| {
            if specials {
                model.encode_with_specials(t, allowed)
            } else {
                model.encode_ordinary(t)
            }
        })
    }

    /// Many texts in parallel: (flat uint32 ids, uint64 offsets of len(texts)+1),
    /// handed to numpy without a copy.
    #[pyo3(signature = (texts, num_threads=None, allowed=None, specials=false))]
    fn encode_batch_numpy<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
        allowed: Option<Vec<u32>>,
        specials: bool,
    ) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)> {
        let owned = py_strs(texts)?;
        let parts = self.batch(py, &borrow_strs(&owned)?, num_threads, allowed, specials)?;
        let (flat, offsets) = py.detach(|| {
            let total: usize = parts.iter().map(|p| p.len()).sum();
            let mut flat = Vec::with_capacity(total);
            let mut offsets = Vec::with_capacity(parts.len() + 1);
            offsets.push(0u64);
            for p in &parts {
                flat.extend_from_slice(p);
                offsets.push(flat.len() as u64);
            }
            (flat, offsets)
        });
        Ok((PyArray1::from_vec(py, flat), PyArray1::from_vec(py, offsets)))
    }

    /// One `.jsonl` block for the pretokenizing pipeline (see `jsonl_block`).
    #[pyo3(signature = (head, body, end, field, file_start, skip, bos, narrow, num_threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn encode_jsonl_block<'py>(
        &self,
        py: Python<'py>,
        head: &[u8],
        body: &[u8],
        end: usize,
        field: &str,
        file_start: bool,
        skip: usize,
        bos: Option<u32>,
        narrow: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let model = self.inner.clone();
        let lens = model.token_lengths();
        jsonl_block(py, head, body, end, field, file_start, skip, bos, narrow, num_threads, &lens, |t| model.encode_ordinary(t))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = ids_from(ids)?;
        let b = py.detach(|| self.inner.decode_bytes(&ids)).map_err(|e| to_py(py, e))?;
        Ok(PyBytes::new(py, &b))
    }

    fn id_bytes<'py>(&self, py: Python<'py>, id: u32) -> Option<Bound<'py, PyBytes>> {
        self.inner.id_bytes(id).map(|b| PyBytes::new(py, b))
    }

    fn token_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i32>> {
        PyArray1::from_vec(py, self.inner.token_lengths())
    }

    fn find_special(&self, py: Python<'_>, text: &str) -> Option<(String, usize)> {
        py.detach(|| self.inner.find_special(text))
    }

    /// Encode one already-split piece (for tests and tools).
    fn encode_piece(&self, piece: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.inner.encode_piece(piece, &mut out);
        out
    }
}

impl PyBpeModel {
    fn batch(
        &self,
        py: Python<'_>,
        texts: &[&str],
        num_threads: Option<usize>,
        allowed: Option<Vec<u32>>,
        specials: bool,
    ) -> PyResult<Vec<Vec<u32>>> {
        use rayon::prelude::*;
        let pool = pool(num_threads)?;
        let model = self.inner.clone();
        let res: Result<Vec<Vec<u32>>, Error> = py.detach(|| {
            pool.install(|| {
                texts
                    .par_iter()
                    .map(|t| {
                        if specials {
                            model.encode_with_specials(t, allowed.as_deref())
                        } else {
                            model.encode_ordinary(t)
                        }
                    })
                    .collect()
            })
        });
        res.map_err(|e| to_py(py, e))
    }
}

#[pyclass(module = "tokenforge._core", name = "WordCounter")]
pub struct PyWordCounter {
    inner: Option<WordCounter>,
}

impl PyWordCounter {
    fn get(&mut self) -> PyResult<&mut WordCounter> {
        self.inner.as_mut().ok_or_else(|| PyValueError::new_err("this WordCounter was already used to start training"))
    }
}

#[pymethods]
impl PyWordCounter {
    #[new]
    #[pyo3(signature = (pattern))]
    fn new(py: Python<'_>, pattern: Option<&str>) -> PyResult<Self> {
        Ok(PyWordCounter { inner: Some(WordCounter::new(pretok_from(py, pattern)?)) })
    }

    /// Split and count a batch of texts, in parallel, with the GIL released.
    #[pyo3(signature = (texts, num_threads=None))]
    fn add_texts(&mut self, py: Python<'_>, texts: &Bound<'_, PyAny>, num_threads: Option<usize>) -> PyResult<()> {
        let pool = pool(num_threads)?;
        let owned = py_strs(texts)?;
        let refs = borrow_strs(&owned)?;
        let wc = self.get()?;
        py.detach(|| pool.install(|| wc.add_texts(&refs))).map_err(|e| to_py(py, e))
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

    /// The counted pieces as (bytes, count), sorted by bytes.
    fn items<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let wc = self.inner.take().ok_or_else(|| PyValueError::new_err("this WordCounter was already consumed"))?;
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
    /// Consume a WordCounter. Each unique piece becomes byte ids via
    /// `byte_ids`, then the earlier `merges` are applied (lowest id first,
    /// pairs rule); `num_merges` new merges get ids from `next_id`.
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
        use rayon::prelude::*;
        let tie = TieBreak::parse(tie_break).map_err(|e| to_py(py, e))?;
        let b = byte_ids_from(byte_ids)?;
        let wc = counter.inner.take().ok_or_else(|| PyValueError::new_err("this WordCounter was already used"))?;
        let pool = pool(num_threads)?;
        let t = py
            .detach(|| -> Result<Trainer, Error> {
                let model = BpeModel::new(&b, &merges, vec![], Pretokenizer::Whole, MergeRule::Pairs)?;
                let mut tokens: Vec<Vec<u8>> = (0..model.vocab_size().max(next_id as usize))
                    .map(|i| if (i as u32) < next_id { model.id_bytes(i as u32).map(|x| x.to_vec()).unwrap_or_default() } else { Vec::new() })
                    .collect();
                tokens.truncate(next_id as usize);
                let sorted = wc.into_sorted();
                let words: Vec<(Vec<u32>, u64)> = pool.install(|| {
                    sorted
                        .par_iter()
                        .map(|(w, c)| {
                            let mut ids = Vec::with_capacity(w.len());
                            if merges.is_empty() {
                                ids.extend(w.iter().map(|&x| b[x as usize]));
                            } else {
                                model.encode_piece(w, &mut ids);
                            }
                            (ids, *c)
                        })
                        .collect()
                });
                drop(sorted);
                Trainer::new(words, tokens, next_id, num_merges, tie, min_frequency)
            })
            .map_err(|e| to_py(py, e))?;
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

/// Split `text` with a pattern (None: whole text) as the trainer and encoder do.
#[pyfunction]
#[pyo3(signature = (pattern, text, use_regex=false))]
fn split(py: Python<'_>, pattern: Option<&str>, text: &str, use_regex: bool) -> PyResult<Vec<String>> {
    let pt = match (pattern, use_regex) {
        (Some(p), true) => Pretokenizer::regex(p).map_err(|e| to_py(py, e))?,
        _ => pretok_from(py, pattern)?,
    };
    let v = py.detach(|| pt.split_vec(text).map(|v| v.into_iter().map(String::from).collect::<Vec<_>>()));
    v.map_err(|e| to_py(py, e))
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
        return Err(PyValueError::new_err(format!("token index {k} is out of range")));
    }
    let split_rule = match rule {
        "below_own_rank" => Some(SplitRule::BelowOwnRank),
        "all_but_own" => Some(SplitRule::AllButOwn),
        "first_lower_cut" => None,
        r => {
            return Err(PyValueError::new_err(format!(
                "unknown rule {r:?}; expected \"below_own_rank\", \"all_but_own\" or \"first_lower_cut\""
            )))
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
    res.map_err(|e| to_py(py, e))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GPT4_PATTERN", GPT4_PATTERN)?;
    m.add("CL100K_PATTERN", CL100K_PATTERN)?;
    m.add("GPT2_PATTERN", GPT2_PATTERN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<PyBpeModel>()?;
    m.add_class::<PyWordCounter>()?;
    m.add_class::<PyBpeTrainer>()?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_rank_splits, m)?)?;
    mixedgram::register(m)?;
    lz78::register(m)?;
    Ok(())
}
