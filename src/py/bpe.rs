//! Bindings of the BPE family: the model (its encoder methods come from
//! `py::encoder`), the piece counter and the trainer, and the rank-split tool.
//! Conversion, GIL release and error mapping only.
//!
//! Not handled: progress display (the caller loops on `run`), batching the
//! corpus into `add_texts` calls (the Python caller's).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use rayon::ThreadPool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::encoder::{encoder_class, PyEncoder};
use super::{pool, pretok_from, py_strs, IntTable};
use crate::bpe::encode::{BpeModel, MergeRule, SplitRule};
use crate::bpe::layout::Layout;
use crate::bpe::parity::{Measure, Rule, GLOBAL};
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
        let ints = IntTable::new(m.vocab_size());
        Ok(PyBpeModel { inner: Arc::new(m), ints })
    }

    /// The merges `(left, right, new)` in order: those given, or those
    /// recovered from a rank file (`bpe_model_from_tiktoken`).
    fn merges(&self) -> Vec<(u32, u32, u32)> {
        self.inner.merges().to_vec()
    }

    /// The id of each single byte.
    fn byte_ids(&self) -> Vec<u32> {
        self.inner.byte_ids().to_vec()
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
    /// The counter, every count in its table (`WordCounter::flush`: what the
    /// counting threads held back after `add_jsonl_block(hold=True)`).
    fn get(&mut self) -> PyResult<&mut WordCounter> {
        let wc = self.counting()?;
        wc.flush();
        Ok(wc)
    }

    /// The counter as it is (held counts may stay held).
    fn counting(&mut self) -> PyResult<&mut WordCounter> {
        Ok(self.inner.as_mut().ok_or_else(|| Error::invalid("this WordCounter was already used to start training"))?)
    }

    /// The counter, borrowed (LZ78's usage counting reads it round after round).
    pub(crate) fn peek(&self) -> PyResult<&WordCounter> {
        let wc = self.inner.as_ref().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?;
        if wc.holds() {
            return Err(Error::invalid("this WordCounter's counting threads hold counts: call flush() first").into());
        }
        Ok(wc)
    }

    /// The counter itself, flushed, leaving this object used up (training and
    /// LZ78's `lz78_finish` consume it).
    pub(crate) fn take(&mut self) -> PyResult<WordCounter> {
        let mut wc = self.inner.take().ok_or_else(|| Error::invalid("this WordCounter was already used"))?;
        wc.flush();
        Ok(wc)
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

    /// Count the documents of a block of whole JSON lines, `head + body[:end]`
    /// (`tokenforge.data.corpus.JsonlBlock`'s parts, not copied), read and
    /// split in Rust with the GIL released. Returns the block's number of
    /// lines, or None -- nothing counted -- when a line needs the Python reader.
    /// `hold`: the counting threads keep their most counted pieces for the
    /// next block (`flush()`, or any other method, adds them to the table).
    #[pyo3(signature = (head, body, end, field, file_start, num_threads=None, hold=false))]
    #[allow(clippy::too_many_arguments)]
    fn add_jsonl_block(
        &mut self,
        py: Python<'_>,
        head: &[u8],
        body: &[u8],
        end: usize,
        field: &str,
        file_start: bool,
        num_threads: Option<usize>,
        hold: bool,
    ) -> PyResult<Option<usize>> {
        let pool = pool(num_threads)?;
        if end > body.len() || head.contains(&b'\n') {
            return Err(Error::invalid("a block is a head without newlines and body[:end]").into());
        }
        let wc = self.counting()?;
        let body = &body[..end];
        Ok(py.detach(|| pool.install(|| wc.add_jsonl_block(head, body, field, file_start, hold)))?)
    }

    /// Add the counts the counting threads hold (`add_jsonl_block(hold=True)`)
    /// to the table. GIL released.
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let wc = self.counting()?;
        py.detach(|| wc.flush());
        Ok(())
    }

    /// Spill sorted runs of the counts to a new directory under `tmp_dir`
    /// whenever the table passes `limit` estimated bytes (`crate::spill`).
    fn spill_to(&mut self, tmp_dir: std::path::PathBuf, limit: u64) -> PyResult<()> {
        Ok(self.get()?.spill_to(&tmp_dir, limit)?)
    }

    /// Sorted runs written to disk so far.
    #[getter]
    fn runs(&mut self) -> PyResult<usize> {
        Ok(self.get()?.runs())
    }

    /// The spill directory, while there is one.
    #[getter]
    fn spill_dir(&mut self) -> PyResult<Option<std::path::PathBuf>> {
        Ok(self.get()?.spill_dir().map(|p| p.to_path_buf()))
    }

    /// Merge the runs into exact counts and keep the most frequent pieces
    /// whose training cost fits `keep` bytes (`WordCounter::settle`); returns
    /// (unique pieces dropped, their occurrences, the threshold). GIL released.
    fn settle(
        &mut self,
        py: Python<'_>,
        keep: u64,
        min_coverage: f64,
        budget_per_keep: f64,
    ) -> PyResult<(u64, u64, u64)> {
        let wc = self.get()?;
        Ok(py.detach(|| wc.settle(keep, min_coverage, budget_per_keep))?)
    }

    /// The training cost of every distinct piece counted, runs on disk
    /// included (`WordCounter::train_cost_total`). GIL released.
    fn train_cost_total(&mut self, py: Python<'_>) -> PyResult<u64> {
        let wc = self.get()?;
        Ok(py.detach(|| wc.train_cost_total())?)
    }

    /// (unique pieces dropped, their occurrences, threshold) by `settle`.
    #[getter]
    fn budget_dropped(&mut self) -> PyResult<(u64, u64, u64)> {
        Ok(self.get()?.budget_dropped())
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
        let b = py.detach(|| wc.to_bytes_checked())?;
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
        let mut o = other.try_borrow_mut().map_err(|_| Error::invalid("cannot merge a WordCounter into itself"))?;
        let theirs = o.inner.as_mut().ok_or_else(|| Error::invalid("the other WordCounter was already consumed"))?;
        theirs.flush();
        let theirs = &*theirs;
        let mine = self.inner.as_mut().ok_or_else(|| Error::invalid("this WordCounter was already consumed"))?;
        Ok(py.detach(|| mine.merge(theirs))?)
    }

    /// A new counter holding the sum of `counters` (none of them changed).
    #[staticmethod]
    fn merged(py: Python<'_>, counters: Vec<Bound<'_, PyWordCounter>>) -> PyResult<Self> {
        for c in &counters {
            // (a counter listed twice is flushed the first time)
            if let Some(wc) = c.try_borrow_mut().ok().as_mut().and_then(|b| b.inner.as_mut()) {
                wc.flush();
            }
        }
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
    /// The pool the trainer was set up on: the large merges run on its threads.
    pool: Arc<ThreadPool>,
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
        let wc = counter.take()?;
        let pool = pool(num_threads)?;
        let t = py.detach(|| {
            pool.install(|| Trainer::from_counter(wc, &b, &merges, next_id, num_merges, tie, min_frequency))
        })?;
        Ok(PyBpeTrainer { inner: t, done_total: 0, pool })
    }

    /// Parity-aware training (`crate::bpe::parity`): `train[l]` and `dev[l]`
    /// are language `l`'s counters (same split pattern; each is consumed);
    /// merges get ids from `next_id`; the first `global_merges` are plain
    /// BPE's; `measure`: "tokens" (parallel dev sets), "bytes" or "chars";
    /// `norms` (one per language, above zero) overrides it; `window` > 0 turns
    /// on the moving-window variant with `alpha`; `tolerance` > 0 the
    /// tolerance variant, `shared` >= 1 the shared-pair variant (0: off);
    /// `rule`: "foroutan2025", "levelup", "excess", "group", "keep",
    /// "discount", "lift" or "devlift" (`reference`: the index of the reference language,
    /// needed by all but the first; `gain`: excess's, group's, discount's and
    /// the lifts' knob).
    #[staticmethod]
    #[pyo3(signature = (train, dev, byte_ids, next_id, num_merges, tie_break="pair_ids", min_frequency=1, num_threads=None, global_merges=0, measure="tokens", norms=None, window=0, alpha=2.0, tolerance=0.0, shared=0.0, rule="foroutan2025", reference=None, gain=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn parity(
        py: Python<'_>,
        train: Vec<PyRefMut<'_, PyWordCounter>>,
        dev: Vec<PyRefMut<'_, PyWordCounter>>,
        byte_ids: Vec<u32>,
        next_id: u32,
        num_merges: usize,
        tie_break: &str,
        min_frequency: u64,
        num_threads: Option<usize>,
        global_merges: usize,
        measure: &str,
        norms: Option<Vec<u64>>,
        window: usize,
        alpha: f64,
        tolerance: f64,
        shared: f64,
        rule: &str,
        reference: Option<usize>,
        gain: f64,
    ) -> PyResult<Self> {
        let tie = TieBreak::parse(tie_break)?;
        let measure = Measure::parse(measure)?;
        let rule = Rule::parse(rule, reference, gain, train.len())?;
        let b = byte_ids_from(byte_ids)?;
        let take = |v: Vec<PyRefMut<'_, PyWordCounter>>| -> PyResult<Vec<WordCounter>> {
            v.into_iter().map(|mut c| c.take()).collect()
        };
        let (train, dev) = (take(train)?, take(dev)?);
        let pool = pool(num_threads)?;
        let t = py.detach(|| {
            pool.install(|| {
                Trainer::parity_from_counters(
                    train,
                    dev,
                    &b,
                    next_id,
                    num_merges,
                    tie,
                    min_frequency,
                    global_merges,
                    measure,
                    norms,
                    (window, alpha),
                )
                .and_then(|mut t| t.set_parity_rule(tolerance, shared, rule).map(|()| t))
            })
        })?;
        Ok(PyBpeTrainer { inner: t, done_total: 0, pool })
    }

    /// Parity training: per merge, the index of the language it was picked
    /// for (None: a global merge); None for plain training.
    fn merge_languages(&self) -> Option<Vec<Option<u32>>> {
        self.inner.merge_languages().map(|v| v.iter().map(|&l| (l != GLOBAL).then_some(l)).collect())
    }

    /// Parity training: per language, (dev tokens before training, dev tokens
    /// now, merges picked for it); None for plain training.
    fn parity_summary(&self) -> Option<Vec<(u64, u64, u64)>> {
        self.inner.parity_summary()
    }

    /// Run merges with the GIL released for at most `seconds`; returns how many ran.
    #[pyo3(signature = (max_merges=usize::MAX, seconds=0.25))]
    fn run(&mut self, py: Python<'_>, max_merges: usize, seconds: f64) -> usize {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        let (t, pool) = (&mut self.inner, &self.pool);
        let n = py.detach(|| pool.install(|| t.run(max_merges, Some(deadline))));
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

/// The model of a `.tiktoken` file's bytes (`crate::bpe::tiktoken`) with
/// its merges recovered (`BpeModel::from_rank_file`), or None when the file
/// is not in the canonical shape or breaks a rule: the Python reader then
/// reads it line by line and reports what is wrong where. GIL released.
#[pyfunction]
#[pyo3(signature = (raw, specials, pattern))]
fn bpe_model_from_tiktoken(
    py: Python<'_>,
    raw: &[u8],
    specials: Vec<(String, u32)>,
    pattern: Option<&str>,
) -> PyResult<Option<PyBpeModel>> {
    let pt = pretok_from(pattern)?;
    let pool = pool(None)?;
    let m = py.detach(|| {
        let file = crate::bpe::tiktoken::parse(raw)?;
        pool.install(|| BpeModel::from_rank_file(&file.ranks(), specials, pt).ok())
    });
    let Some(m) = m else { return Ok(None) };
    let ints = IntTable::new(m.vocab_size());
    Ok(Some(PyBpeModel { inner: Arc::new(m), ints }))
}

/// What the fast tokenforge-bpe JSON reader hands to Python: the model; the
/// top-level members in order with their raw JSON text (None for the big
/// integer arrays); the canonical text of those arrays (for the checksum);
/// and the specials and pattern the model was built with.
type TfjsonFast<'py> =
    (PyBpeModel, Vec<(String, Option<String>)>, Vec<(String, Bound<'py, PyBytes>)>, Vec<(String, u32)>, Option<String>);

/// The parts of a tokenforge-bpe JSON file the model is built from.
struct TfjsonParts {
    byte_ids: [u32; 256],
    merges: Vec<(u32, u32, u32)>,
    specials: Vec<(String, u32)>,
    pattern: Option<String>,
    small: Vec<(String, Option<String>)>,
    big: Vec<(String, Vec<u8>)>,
}

fn tfjson_parts(text: &str) -> Option<TfjsonParts> {
    use crate::bpe::tfjson::{int_array, members, pair_array};
    let m = members(text)?;
    let (mut byte_ids, mut pairs, mut merge_ids, mut first, mut specials, mut pattern) =
        (None, None, None, None, None, None);
    let (mut small, mut big) = (Vec::new(), Vec::new());
    let mut seen = rustc_hash::FxHashSet::default();
    for (k, v) in &m.0 {
        if !seen.insert(k.as_str()) {
            return None; // a duplicate key: the Python reader's rule (the last one wins) applies
        }
        let raw = v.get();
        match k.as_str() {
            "byte_ids" | "merge_ids" => {
                let (ids, canon) = int_array(raw)?;
                if k == "byte_ids" {
                    byte_ids = Some(ids);
                } else {
                    merge_ids = Some(ids);
                }
                big.push((k.clone(), canon));
                small.push((k.clone(), None));
                continue;
            }
            "merges" => {
                let (p, canon) = pair_array(raw)?;
                pairs = Some(p);
                big.push((k.clone(), canon));
                small.push((k.clone(), None));
                continue;
            }
            "first_merge_id" => first = Some(serde_json::from_str::<u32>(raw).ok()?),
            "special_tokens" => {
                let mut sp = Vec::new();
                for (t, i) in crate::bpe::tfjson::members(raw)?.0 {
                    sp.push((t, serde_json::from_str::<u32>(i.get()).ok()?));
                }
                specials = Some(sp);
            }
            "pattern" => pattern = Some(serde_json::from_str::<Option<String>>(raw).ok()?),
            _ => {}
        }
        small.push((k.clone(), Some(raw.to_string())));
    }
    let byte_ids: [u32; 256] = byte_ids?.try_into().ok()?;
    let pairs = pairs?;
    let ids: Vec<u32> = match (first, merge_ids) {
        (Some(f), None) => (0..pairs.len()).map(|k| f.checked_add(u32::try_from(k).ok()?)).collect::<Option<_>>()?,
        (None, Some(ids)) if ids.len() == pairs.len() => ids,
        _ => return None,
    };
    if ids.windows(2).any(|w| w[1] <= w[0]) {
        return None;
    }
    let merges = pairs.iter().zip(&ids).map(|(&(a, b), &z)| (a, b, z)).collect();
    Some(TfjsonParts { byte_ids, merges, specials: specials?, pattern: pattern?, small, big })
}

/// The model of a tokenforge-bpe JSON file's bytes (`crate::bpe::tfjson`)
/// with what the Python reader still checks (see [`TfjsonFast`]), or None
/// when the fast path declines: the Python reader then reads the file and
/// reports what is wrong where. GIL released.
///
/// It declines too when the merges define more than `max_token_bytes` bytes
/// of tokens in all (counted from lengths before anything is built): the
/// Python reader then says so, with the file's limit.
#[pyfunction]
fn bpe_model_from_tfjson<'py>(py: Python<'py>, raw: &[u8], max_token_bytes: u64) -> PyResult<Option<TfjsonFast<'py>>> {
    let raw = raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw);
    let Ok(text) = std::str::from_utf8(raw) else { return Ok(None) };
    let Some(p) = py.detach(|| tfjson_parts(text)) else { return Ok(None) };
    if crate::bpe::ranks::token_bytes_total(&p.byte_ids, &p.merges) > max_token_bytes {
        return Ok(None);
    }
    let Ok(pt) = pretok_from(p.pattern.as_deref()) else { return Ok(None) };
    let pool = pool(None)?;
    let (byte_ids, merges, specials) = (p.byte_ids, p.merges, p.specials.clone());
    let Some(m) = py.detach(|| pool.install(|| BpeModel::new(&byte_ids, &merges, specials, pt, MergeRule::Bytes).ok()))
    else {
        return Ok(None);
    };
    let ints = IntTable::new(m.vocab_size());
    let big = p.big.into_iter().map(|(k, c)| (k, PyBytes::new(py, &c))).collect();
    Ok(Some((PyBpeModel { inner: Arc::new(m), ints }, p.small, big, p.specials, p.pattern)))
}

/// A byte-level BPE `tokenizer.json` read by the engine
/// (`crate::bpe::hfjson`), before the Python reader has worked out the split
/// pattern from the pre-tokenizer settings; `build(pattern)` makes the model.
#[pyclass(module = "tokenforge._core", name = "HfJsonParts")]
pub struct PyHfJsonParts {
    parts: Option<crate::bpe::hfjson::HfParts>,
}

#[pymethods]
impl PyHfJsonParts {
    /// Top-level members but `model`, as raw JSON.
    fn top(&self) -> Vec<(String, String)> {
        self.parts.as_ref().map_or_else(Vec::new, |p| p.top.clone())
    }

    /// `model`'s members but `vocab` and `merges`, as raw JSON.
    fn model(&self) -> Vec<(String, String)> {
        self.parts.as_ref().map_or_else(Vec::new, |p| p.model.clone())
    }

    /// The special tokens, in file order.
    fn specials(&self) -> Vec<(String, u32)> {
        self.parts.as_ref().map_or_else(Vec::new, |p| p.specials.clone())
    }

    /// The model with `pattern` (once), or None if the engine refuses the
    /// ids (the Python reader then reports why). GIL released.
    fn build(&mut self, py: Python<'_>, pattern: Option<&str>) -> PyResult<Option<PyBpeModel>> {
        let p = self.parts.take().ok_or_else(|| Error::invalid("these parts were already built"))?;
        let pt = pretok_from(pattern)?;
        let pool = pool(None)?;
        let Some(m) =
            py.detach(|| pool.install(|| BpeModel::new(&p.byte_ids, &p.merges, p.specials, pt, MergeRule::Bytes).ok()))
        else {
            return Ok(None);
        };
        let ints = IntTable::new(m.vocab_size());
        Ok(Some(PyBpeModel { inner: Arc::new(m), ints }))
    }
}

/// Read a byte-level BPE `tokenizer.json`'s bytes (`crate::bpe::hfjson`),
/// or None when the fast path declines: the Python reader then reads the
/// file and reports what is wrong where. GIL released.
#[pyfunction]
fn bpe_read_hf_json(py: Python<'_>, raw: &[u8]) -> PyResult<Option<PyHfJsonParts>> {
    let raw = raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw);
    let Ok(text) = std::str::from_utf8(raw) else { return Ok(None) };
    let pool = pool(None)?;
    let parts = py.detach(|| pool.install(|| crate::bpe::hfjson::read(text)));
    Ok(parts.map(|parts| PyHfJsonParts { parts: Some(parts) }))
}

/// Where training puts its ids (`crate::bpe::layout`): (first merge id,
/// number of merges) for `vocab_size` ids and `specials` special tokens;
/// `VocabSizeError` if they do not fit.
#[pyfunction]
fn bpe_layout(layout: &str, vocab_size: i64, specials: usize) -> PyResult<(u32, usize)> {
    Ok(Layout::parse(layout)?.plan(vocab_size, specials)?)
}

/// Estimated bytes training holds for a unique piece of `length` bytes
/// (what a memory budget sizes; `crate::wordcount::train_cost`).
#[pyfunction]
fn train_cost(length: usize) -> u64 {
    crate::wordcount::train_cost(length)
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
    m.add_function(wrap_pyfunction!(bpe_model_from_tiktoken, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_model_from_tfjson, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_read_hf_json, m)?)?;
    m.add_class::<PyHfJsonParts>()?;
    m.add_function(wrap_pyfunction!(bpe_layout, m)?)?;
    m.add_function(wrap_pyfunction!(bpe_special_ids, m)?)?;
    m.add_function(wrap_pyfunction!(train_cost, m)?)?;
    Ok(())
}
