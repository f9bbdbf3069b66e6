//! Python bindings: conversion, GIL release and error mapping only. Every
//! call that is linear in its input runs with the GIL released.
//!
//! One file per family (`bpe`, `lz78`, `mixedgram`, `pipeline`); `encoder` holds the
//! methods every encoder family shares; this file only the helpers they all
//! use: the one error mapping, thread pools, id lists, `str` batches, the
//! `.jsonl` block pipeline, and the module itself.
//!
//! Not handled: Python-level argument checks with their own messages (types
//! of options, corpus arguments) -- the Python layer does those first.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rayon::ThreadPool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::Error;
use crate::pretok::{Pretokenizer, CL100K_PATTERN, GPT2_PATTERN, GPT4_PATTERN, O200K_PATTERN};

mod bpe;
mod encoder;
mod lz78;
mod mixedgram;
mod pipeline;

/// The one mapping of the core's errors to `tokenforge.errors`:
///
/// | `Error`        | Python                                   |
/// |----------------|------------------------------------------|
/// | `Pattern`      | `PatternError`                           |
/// | `VocabSize`    | `VocabSizeError`                         |
/// | `SpecialToken` | `SpecialTokenError`                      |
/// | `Format`       | `FormatError(message, offset=offset)`    |
/// | `Invalid`      | `TokenforgeError`                        |
/// | `System`       | `OSError`                                |
/// | `Cancelled`    | `KeyboardInterrupt`                      |
///
/// Every class is a `ValueError` subclass, and a `ValueError` stands in if
/// `tokenforge.errors` cannot be imported.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let name = match &e {
        Error::Pattern(_) => "PatternError",
        Error::VocabSize(_) => "VocabSizeError",
        Error::SpecialToken(_) => "SpecialTokenError",
        Error::Format { .. } => "FormatError",
        Error::Invalid(_) => "TokenforgeError",
        Error::System(m) => return PyOSError::new_err(m.clone()),
        Error::Cancelled => return PyKeyboardInterrupt::new_err("interrupted"),
    };
    let made = py.import("tokenforge.errors").and_then(|m| m.getattr(name)).and_then(|cls| match &e {
        Error::Format { offset, message } => {
            let kw = PyDict::new(py);
            kw.set_item("offset", *offset)?;
            cls.call((message.as_str(),), Some(&kw))
        }
        _ => cls.call1((e.to_string(),)),
    });
    match made {
        Ok(v) => PyErr::from_value(v),
        Err(_) => PyValueError::new_err(e.to_string()),
    }
}

/// `?` on a core `Result` inside a binding maps the error with [`to_py`].
impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        Python::attach(|py| to_py(py, e))
    }
}

/// A rayon pool per thread count, built once.
pub(crate) fn pool(n: Option<usize>) -> PyResult<Arc<ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let n = match n {
        Some(0) => return Err(Error::invalid("num_threads must be at least 1 (or None for all cores)").into()),
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
            .map_err(|e| Error::System(format!("cannot start {n} threads: {e}")))?,
    );
    pools.insert(n, p.clone());
    Ok(p)
}

/// The layout of a list object in CPython 3.10 to 3.14 with the GIL
/// (`PyListObject` of `Include/cpython/listobject.h`: the variable-size
/// object header, the item array, its allocated length), 64-bit or 32-bit.
/// The per-version build checks it against pyo3's own definition at compile
/// time; the stable-ABI build (where the struct is hidden) checks it at
/// import ([`check_list_layout`]) and uses it only if the running
/// interpreter agrees.
#[repr(C)]
struct ListLayout {
    ob_refcnt: pyo3::ffi::Py_ssize_t,
    ob_type: *mut pyo3::ffi::PyTypeObject,
    ob_size: pyo3::ffi::Py_ssize_t,
    ob_item: *mut *mut pyo3::ffi::PyObject,
    allocated: pyo3::ffi::Py_ssize_t,
}

#[cfg(plain_list)]
const _: () = assert!(std::mem::size_of::<ListLayout>() == std::mem::size_of::<pyo3::ffi::PyListObject>());

/// Whether lists are built in an item array of our own through
/// [`ListLayout`]: always in the per-version build (`plain_list`), and in the
/// stable-ABI build when [`check_list_layout`] found the running CPython's
/// lists laid out so.
#[cfg(not(plain_list))]
static PLAIN_LIST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The running CPython's minor version, where [`plain_list`] holds in the
/// stable-ABI build: it says which inline reference-count rule applies
/// ([`incref`]).
#[cfg(not(plain_list))]
static PY_MINOR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `Py_INCREF` of a live object. `INLINE` (where [`plain_list`] holds): the
/// per-version build uses pyo3's inline increment for the version built for;
/// the stable-ABI build the rule of the running CPython (`skip_immortal`:
/// 3.12 and later leave immortal objects alone, whose 32-bit reference count
/// reads negative; 3.10 and 3.11 add one), where the stable ABI would call
/// `_Py_IncRef` for each id of a list. Otherwise `Py_INCREF` as pyo3 has it.
///
/// # Safety
/// Attached to the interpreter; `p` is a live object; `INLINE` only where
/// [`plain_list`] holds, with `skip_immortal` from [`skip_immortal`].
#[inline(always)]
unsafe fn incref<const INLINE: bool>(p: *mut pyo3::ffi::PyObject, skip_immortal: bool) {
    #[cfg(not(plain_list))]
    if INLINE {
        // SAFETY: the reference count is every object's first field (the
        // header ListLayout reads, checked at import); attached, so no other
        // thread changes it.
        unsafe {
            let rc = p as *mut pyo3::ffi::Py_ssize_t;
            let cur = *rc;
            if !(skip_immortal && (cur as i32) < 0) {
                *rc = cur + 1;
            }
        }
        return;
    }
    let _ = skip_immortal;
    // SAFETY: the caller's contract.
    unsafe { pyo3::ffi::Py_INCREF(p) };
}

/// Whether [`incref`] must leave immortal objects alone (CPython 3.12+), in
/// the stable-ABI build; unused by the per-version build.
#[inline]
fn skip_immortal() -> bool {
    #[cfg(not(plain_list))]
    {
        PY_MINOR.load(Ordering::Relaxed) >= 12
    }
    #[cfg(plain_list)]
    {
        false
    }
}

#[inline(always)]
fn plain_list() -> bool {
    #[cfg(plain_list)]
    {
        true
    }
    #[cfg(not(plain_list))]
    {
        PLAIN_LIST.load(Ordering::Relaxed)
    }
}

/// At import, in the stable-ABI build: the running CPython's minor version
/// if [`ListLayout`] is its list layout -- a version it describes (3.10 to
/// 3.14, with the GIL, 64-bit), `list` objects of its size, and a list made
/// through the API that reads back through it (length, items, allocation);
/// None for anything else (a newer CPython, another implementation), which
/// keeps `PyList_New` and `PyList_SetItem`.
#[cfg(not(plain_list))]
fn check_list_layout(py: Python<'_>) -> PyResult<Option<u32>> {
    let sys = py.import("sys")?;
    let name: String = sys.getattr("implementation")?.getattr("name")?.extract()?;
    let version = sys.getattr("version_info")?;
    let major: u32 = version.get_item(0)?.extract()?;
    let minor: u32 = version.get_item(1)?.extract()?;
    let gil = match sys.getattr("_is_gil_enabled") {
        Ok(f) => f.call0()?.extract::<bool>()?,
        Err(_) => true,
    };
    let basic: usize = py.get_type::<PyList>().getattr("__basicsize__")?.extract()?;
    if name != "cpython"
        || major != 3
        || !(10..=14).contains(&minor)
        || !gil
        || !cfg!(target_pointer_width = "64")
        || basic != std::mem::size_of::<ListLayout>()
    {
        return Ok(None);
    }
    let probe = PyList::new(py, [7u32, 8, 9])?;
    probe.append(10u32)?; // grows the item array past its length
    let p = probe.as_ptr();
    // SAFETY: attached; `p` is a live list of 4 items whose type's size is
    // that of ListLayout. Only its header fields are read, then compared with
    // what the API says.
    let ok = unsafe {
        let l = &*(p as *const ListLayout);
        l.ob_size == 4
            && l.allocated >= 4
            && !l.ob_item.is_null()
            && (0..4).all(|i| *l.ob_item.add(i) == pyo3::ffi::PyList_GetItem(p, i as pyo3::ffi::Py_ssize_t))
    };
    Ok(ok.then_some(minor))
}

/// A new list with room for `n` items and a length of 0 (see
/// [`list_filled`]), and where its items go; null (with a Python error set)
/// on failure. Where [`plain_list`] holds, the item array is allocated
/// without being zeroed (`PyList_New` clears what [`IntTable::list`]
/// overwrites at once) and the items pointer is returned; elsewhere it is
/// `PyList_New(n)` and a null items pointer.
///
/// # Safety
/// Attached to the interpreter. Until [`list_filled`], only [`set_slot`]
/// may touch the list's items.
unsafe fn new_list(n: pyo3::ffi::Py_ssize_t) -> (*mut pyo3::ffi::PyObject, *mut *mut pyo3::ffi::PyObject) {
    use pyo3::ffi;
    if !plain_list() {
        // SAFETY: attached (the caller's contract).
        return (unsafe { ffi::PyList_New(n) }, std::ptr::null_mut());
    }
    // SAFETY: attached (the caller's contract); the list is ours alone, and
    // an empty list has no item array, so giving it one of `n` slots (from
    // the allocator it frees its items with) loses nothing. Its length stays
    // 0 until `list_filled`, so nothing reads a slot not yet set. The layout
    // is the running interpreter's (`plain_list`).
    unsafe {
        let l = ffi::PyList_New(0);
        if l.is_null() || n == 0 {
            return (l, std::ptr::null_mut());
        }
        let bytes = (n as usize).checked_mul(std::mem::size_of::<*mut ffi::PyObject>());
        let items = bytes.map_or(std::ptr::null_mut(), |b| ffi::PyMem_Malloc(b)) as *mut *mut ffi::PyObject;
        if items.is_null() {
            ffi::Py_DECREF(l);
            ffi::PyErr_NoMemory();
            return (std::ptr::null_mut(), items);
        }
        let lp = l as *mut ListLayout;
        (*lp).ob_item = items;
        (*lp).allocated = n;
        (l, items)
    }
}

/// Put the new reference `o` in slot `i` of a list from [`new_list`]:
/// through `items` when `INLINE` (new_list gave an item array), else through
/// the API.
///
/// # Safety
/// `i` is below the `n` the list was made with, and is set once; `INLINE`
/// exactly when `items` is not null.
#[inline(always)]
unsafe fn set_slot<const INLINE: bool>(
    l: *mut pyo3::ffi::PyObject,
    items: *mut *mut pyo3::ffi::PyObject,
    i: usize,
    o: *mut pyo3::ffi::PyObject,
) {
    if INLINE {
        // SAFETY: `items` (from new_list where plain_list holds) has `n > i`
        // slots (the caller's contract); written through the pointer kept,
        // not reloaded from the list after each reference-count increment
        // (which could alias it).
        unsafe { items.add(i).write(o) };
        return;
    }
    #[cfg(not(feature = "abi3"))]
    // SAFETY: as above; the list steals the reference.
    unsafe {
        pyo3::ffi::PyList_SET_ITEM(l, i as pyo3::ffi::Py_ssize_t, o)
    };
    #[cfg(feature = "abi3")]
    // SAFETY: as above; the list steals the reference.
    unsafe {
        pyo3::ffi::PyList_SetItem(l, i as pyo3::ffi::Py_ssize_t, o);
    }
}

/// The first `filled` slots of a list from [`new_list`] are set: they are
/// its items now (the list releases them when freed).
///
/// # Safety
/// Slots `0..filled` were set with [`set_slot`].
#[inline]
unsafe fn list_filled(l: *mut pyo3::ffi::PyObject, items: *mut *mut pyo3::ffi::PyObject, filled: usize) {
    if !items.is_null() {
        // SAFETY: a list of the plain layout (new_list gave it `items`);
        // `filled <= allocated`, every one of those slots a reference.
        unsafe { (*(l as *mut ListLayout)).ob_size = filled as pyo3::ffi::Py_ssize_t };
    }
    // otherwise PyList_New(n) made n empty slots, set in place; an unset one
    // is NULL, which the list's release skips
}

/// One Python int per id, made the first time a list holds the id and kept
/// for the model's life. Lists of ids are built from these (a reference-count
/// increment each) instead of allocating a fresh int per token: on long texts
/// and batches, creating the Python list under the GIL otherwise costs as
/// much as the encoding, and it is the serial part that keeps `encode_batch`
/// from scaling with threads.
///
/// Made when first needed, not all at load: a text uses a few thousand of a
/// large vocabulary's ids (o200k: 200,000 ints, ~6 MB if all made), and ints
/// made in the order they are first met lie together in memory, so a list's
/// increments (and the decrements when Python frees it) touch a few hundred
/// KB instead of megabytes; the load makes none. The list is built with the
/// table entry and the int of ids ahead prefetched, into an item array that
/// is not zeroed first (where [`plain_list`] holds).
pub(crate) struct IntTable(Box<[AtomicPtr<pyo3::ffi::PyObject>]>);

impl IntTable {
    pub(crate) fn new(n: usize) -> Self {
        IntTable((0..n).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect())
    }

    /// A new reference to the int of `id` (made now if the table has none
    /// yet; ids past the table get a fresh int); null with a Python error set
    /// if it cannot be made.
    ///
    /// # Safety
    /// The caller is attached to the interpreter (holds `py`).
    #[inline(always)]
    unsafe fn int<const INLINE: bool>(&self, id: u32, skip_immortal: bool) -> *mut pyo3::ffi::PyObject {
        use pyo3::ffi;
        let Some(slot) = self.0.get(id as usize) else {
            // SAFETY: attached (the caller's contract)
            return unsafe { ffi::PyLong_FromUnsignedLong(id as std::os::raw::c_ulong) };
        };
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: the table holds a reference to p, so it is alive;
            // attached; INLINE and skip_immortal as the caller was given them.
            unsafe { incref::<INLINE>(p, skip_immortal) };
            return p;
        }
        // SAFETY: attached.
        unsafe { self.make(slot, id) }
    }

    /// The first use of `id`: make its int and keep it in `slot` (if another
    /// thread kept one first, that one is used).
    ///
    /// # Safety
    /// The caller is attached to the interpreter.
    #[cold]
    #[inline(never)]
    unsafe fn make(&self, slot: &AtomicPtr<pyo3::ffi::PyObject>, id: u32) -> *mut pyo3::ffi::PyObject {
        use pyo3::ffi;
        // SAFETY: attached (the caller's contract) for every call below; p and
        // q are live ints: p ours, q held by the table.
        unsafe {
            let p = ffi::PyLong_FromUnsignedLong(id as std::os::raw::c_ulong);
            if p.is_null() {
                return p;
            }
            // the table keeps p's reference; the caller gets a new one
            match slot.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    ffi::Py_INCREF(p);
                    p
                }
                Err(q) => {
                    ffi::Py_DECREF(p);
                    ffi::Py_INCREF(q);
                    q
                }
            }
        }
    }

    pub(crate) fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        // Decided once a list, so the loop below is one of two, neither
        // branching per id on how lists are built.
        if plain_list() {
            self.list_with::<true>(py, ids)
        } else {
            self.list_with::<false>(py, ids)
        }
    }

    fn list_with<'py, const INLINE: bool>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        use pyo3::ffi;
        // How far ahead the table entries and the ints are asked for: measured
        // on o200k code and English (a list cost 2.5-5.7 ns an id more than a
        // numpy array at 32 and 16, 1.2-2.8 at 128 and 64; farther is no
        // better). A list's ids repeat little in the short run, so each entry
        // and int is a miss in a cache (the table is 1.6 MB for o200k, the
        // ints a few hundred KB).
        const TABLE_AHEAD: usize = 128;
        const INT_AHEAD: usize = 64;
        let n = ffi::Py_ssize_t::try_from(ids.len()).map_err(|_| Error::invalid("too many ids for one list"))?;
        let table = &self.0;
        let skip = skip_immortal();
        // SAFETY: a new list whose `n` slots are each set once to a new
        // reference (the list steals it) before the list is handed out; on
        // failure the list (and what it holds) is released. Attached to the
        // interpreter throughout (`py`).
        unsafe {
            let (l, items) = new_list(n);
            if l.is_null() {
                return Err(PyErr::fetch(py));
            }
            let list = Bound::from_owned_ptr(py, l);
            // The table entry of the id TABLE_AHEAD places on and the int of
            // the one INT_AHEAD on are asked for while this one is set (the
            // entry was asked for earlier, so reading it to find the int does
            // not wait); the first entries are asked for before the loop.
            for &a in ids.iter().take(TABLE_AHEAD) {
                crate::bpe::fast::prefetch(table.as_ptr().wrapping_add(a as usize));
            }
            for (i, &id) in ids.iter().enumerate() {
                if let Some(&a) = ids.get(i + TABLE_AHEAD) {
                    crate::bpe::fast::prefetch(table.as_ptr().wrapping_add(a as usize));
                }
                if let Some(e) = ids.get(i + INT_AHEAD).and_then(|&a| table.get(a as usize)) {
                    let p = e.load(Ordering::Relaxed);
                    if !p.is_null() {
                        crate::bpe::fast::prefetch(p);
                    }
                }
                let o = self.int::<INLINE>(id, skip);
                if o.is_null() {
                    // the slots set so far are the list's (released with it)
                    list_filled(l, items, i);
                    return Err(PyErr::fetch(py));
                }
                set_slot::<INLINE>(l, items, i, o);
            }
            list_filled(l, items, ids.len());
            Ok(list.downcast_into_unchecked())
        }
    }

    /// One list per part, in a new list (see [`BatchLists`]).
    pub(crate) fn lists<'py>(&self, py: Python<'py>, parts: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
        let mut out = BatchLists::new(py);
        for p in parts {
            out.push(self.list(py, p)?)?;
        }
        Ok(out.finish())
    }
}

/// The outer list of a batch's id lists, filled one list at a time.
///
/// Performance: each id list is taken off the cycle collector's young
/// generation as it is added, and all are put back by [`Self::finish`]. A
/// list of ints can hold no cycle, but every list made counts towards the
/// collector's next young collection (one per 700 new containers), which
/// walks every item of every young list twice; with the lists tracked, a
/// batch of 4 KB texts paid about one such walk per id during the call, a
/// quarter of the single-thread time of `encode_batch` returning lists
/// (8.5 MB as 4 KB documents, 32k vocabulary, 1 thread: 11 of 46 ms, gen0
/// collections timed with `gc.callbacks`). Untracked, the collections made
/// while the batch is built pass over it; once returned, the lists are
/// ordinary tracked lists, walked by the next young collection only if the
/// caller still holds them.
///
/// A list that is dropped before `finish` (an error part way) is freed
/// untracked, which CPython allows; none is handed out untracked.
pub(crate) struct BatchLists<'py> {
    out: Bound<'py, PyList>,
}

impl<'py> BatchLists<'py> {
    pub(crate) fn new(py: Python<'py>) -> Self {
        BatchLists { out: PyList::empty(py) }
    }

    /// Add `l`, a new list no one else holds.
    pub(crate) fn push(&mut self, l: Bound<'py, PyList>) -> PyResult<()> {
        #[cfg(gc_untrack)]
        // SAFETY: attached (`l` is bound); `l` is a list (a collected type)
        // that only this batch holds, tracked since `PyList_New`; untracking
        // a tracked object is allowed at any time.
        unsafe {
            pyo3::ffi::PyObject_GC_UnTrack(l.as_ptr().cast())
        };
        self.out.append(l)
    }

    /// The outer list, every item tracked again.
    pub(crate) fn finish(self) -> Bound<'py, PyList> {
        #[cfg(gc_untrack)]
        for item in self.out.iter() {
            let p = item.as_ptr();
            // SAFETY: attached; `p` is a live list of this batch (only `push`
            // adds items, and no other code has seen `out`). Tracking an
            // object already tracked is a fatal error, hence the check.
            unsafe {
                if pyo3::ffi::PyObject_GC_IsTracked(p) == 0 {
                    pyo3::ffi::PyObject_GC_Track(p.cast());
                }
            }
        }
        self.out
    }
}

impl Drop for IntTable {
    fn drop(&mut self) {
        let made: Vec<_> = self.0.iter().map(|p| p.load(Ordering::Acquire)).filter(|p| !p.is_null()).collect();
        if made.is_empty() {
            return;
        }
        // the table's references, released attached to the interpreter (a
        // model is freed by Python, attached already: this only nests)
        Python::attach(|_| {
            for p in made {
                // SAFETY: each p is a live int whose reference the table holds; attached.
                unsafe { pyo3::ffi::Py_DECREF(p) }
            }
        })
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
    // Chunks of about total / (256 * threads) bytes (at least 4 KiB), cut at text
    // boundaries: the lists of the last chunk are built after every thread is done,
    // so small chunks keep that serial tail short (8.5 MB as 4 KB texts on 2 threads,
    // best of 40 interleaved rounds in one process: 256 the fastest in 5 of 6 runs
    // against 16, by up to 11%; 64 no better than 16; 1,024 slower than 256).
    let target = (total / (256 * threads.max(1))).max(1 << 12);
    let bounds = crate::encoder::chunk_bounds(texts, target);
    let chunks = bounds.len() - 1;
    if threads < 2 || chunks < 2 {
        let parts: Result<Vec<Vec<u32>>, Error> = py.detach(|| {
            pool.install(|| {
                texts.par_iter().enumerate().with_min_len(1).map(|(i, t)| encode(t).map_err(|e| e.in_text(i))).collect()
            })
        });
        return ints.lists(py, &parts?);
    }
    type Chunk = (usize, Result<Vec<Vec<u32>>, Error>);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<Chunk>();
    let mut out = BatchLists::new(py);
    let mut result: PyResult<()> = Ok(());
    let encode_chunk = |i: usize| -> Result<Vec<Vec<u32>>, Error> {
        let lo = bounds[i];
        texts[lo..bounds[i + 1]].iter().enumerate().map(|(j, t)| encode(t).map_err(|e| e.in_text(lo + j))).collect()
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
                let step = r.map_err(PyErr::from).and_then(|parts| {
                    for p in &parts {
                        out.push(ints.list(py, p)?)?;
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
            result = Err(pyo3::exceptions::PyRuntimeError::new_err(
                "the encoding threads stopped before the batch was done",
            ));
        }
    });
    result.map(|_| out.finish())
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
        v.push(
            x.cast_into::<PyString>().map_err(|_| PyTypeError::new_err(format!("item {i} is {name}, expected str")))?,
        );
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
        return Err(Error::invalid("a block is a head without newlines and body[:end]").into());
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
        let e = py.detach(|| {
            pool.install(|| encode_block::<u16, _>(head, body, field, file_start, skip, bos, token_len, &encode))
        });
        e?.map(|e| tuple(py, e)).transpose()
    } else {
        let e = py.detach(|| {
            pool.install(|| encode_block::<u32, _>(head, body, field, file_start, skip, bos, token_len, &encode))
        });
        e?.map(|e| tuple(py, e)).transpose()
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
        if x.is_instance_of::<pyo3::types::PyInt>() && x.extract::<i64>().is_err() {
            // an int past 64 bits is an id out of range, not a wrong type
            return Err(Error::Invalid(format!("token id {x} at position {i} is out of range")).into());
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
        return Err(Error::Invalid(format!("token id {x} at position {i} is out of range")).into());
    }
    Ok(x as u32)
}

/// The pre-tokenizer of a pattern (None: the whole text is one piece).
pub(crate) fn pretok_from(pattern: Option<&str>) -> PyResult<Pretokenizer> {
    Ok(Pretokenizer::new(pattern)?)
}

/// Split `text` with a pattern (None: whole text) as the trainer and encoder do.
#[pyfunction]
#[pyo3(signature = (pattern, text, use_regex=false))]
fn split(py: Python<'_>, pattern: Option<&str>, text: &str, use_regex: bool) -> PyResult<Vec<String>> {
    let pt = match (pattern, use_regex) {
        (Some(p), true) => Pretokenizer::regex(p)?,
        _ => pretok_from(pattern)?,
    };
    Ok(py.detach(|| pt.split_vec(text).map(|v| v.into_iter().map(String::from).collect::<Vec<_>>()))?)
}

/// Whether lists of ids are built inline (item array, reference counts) in
/// this process: always in the per-version build, in the stable-ABI build
/// where the running CPython's list layout checked out at import.
#[pyfunction]
fn lists_built_inline() -> bool {
    plain_list()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    #[cfg(not(plain_list))]
    if let Some(minor) = check_list_layout(m.py())? {
        PY_MINOR.store(minor, Ordering::Relaxed);
        PLAIN_LIST.store(true, Ordering::Relaxed);
    }
    m.add("GPT4_PATTERN", GPT4_PATTERN)?;
    m.add("CL100K_PATTERN", CL100K_PATTERN)?;
    m.add("GPT2_PATTERN", GPT2_PATTERN)?;
    m.add("O200K_PATTERN", O200K_PATTERN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(lists_built_inline, m)?)?;
    bpe::register(m)?;
    mixedgram::register(m)?;
    lz78::register(m)?;
    pipeline::register(m)?;
    Ok(())
}
