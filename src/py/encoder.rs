//! The bindings of the encoder seam (`crate::encoder::Encoder`), written once
//! for every family class that holds an `Arc<impl Encoder>` and an `IntTable`.
//!
//! pyo3 wants one `#[pymethods]` block per class, so [`encoder_class!`] emits
//! that block: the shared methods below (each a one-line call of a generic
//! function here) followed by the class's own methods. The functions are
//! generic over the model type, so every family's encoder is monomorphized
//! into them: no dynamic dispatch, the same inner loops as before.
//!
//! Shared methods: `vocab_size`, `pattern` (getters), `encode_ordinary`,
//! `encode_ordinary_numpy`, `encode`, `encode_batch`, `encode_batch_numpy`,
//! `encode_jsonl_block`, `decode_bytes`, `id_bytes`, `token_lengths`,
//! `find_special`.
//!
//! Not handled: families outside the seam (mixedgram takes latin1 bytes and
//! has its own class in `py::mixedgram`).

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::sync::Arc;

use super::{borrow_strs, encode_lists, ids_from, jsonl_block, pool, py_strs, IntTable};
use crate::encoder::Encoder;

/// A Python class of one encoder family: its model and its int table.
pub(crate) trait PyEncoder {
    type Model: Encoder + 'static;
    fn model(&self) -> &Arc<Self::Model>;
    fn ints(&self) -> &IntTable;
}

pub(crate) fn vocab_size<C: PyEncoder>(c: &C) -> usize {
    c.model().vocab_size()
}

pub(crate) fn pattern<C: PyEncoder>(c: &C) -> Option<String> {
    c.model().pretokenizer().pattern()
}

pub(crate) fn encode_ordinary<'py, C: PyEncoder>(c: &C, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
    let m = c.model();
    let ids = py.detach(|| m.encode_ordinary(text))?;
    c.ints().list(py, &ids)
}

pub(crate) fn encode_ordinary_numpy<'py, C: PyEncoder>(
    c: &C,
    py: Python<'py>,
    text: &str,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let m = c.model();
    let v = py.detach(|| m.encode_ordinary(text))?;
    Ok(PyArray1::from_vec(py, v))
}

pub(crate) fn encode<'py, C: PyEncoder>(
    c: &C,
    py: Python<'py>,
    text: &str,
    allowed: Option<Vec<u32>>,
) -> PyResult<Bound<'py, PyList>> {
    let m = c.model();
    let ids = py.detach(|| m.encode_with_specials(text, allowed.as_deref()))?;
    c.ints().list(py, &ids)
}

pub(crate) fn encode_batch<'py, C: PyEncoder>(
    c: &C,
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    num_threads: Option<usize>,
    allowed: Option<Vec<u32>>,
    specials: bool,
) -> PyResult<Bound<'py, PyList>> {
    let owned = py_strs(texts)?;
    let m = c.model();
    let allowed = allowed.as_deref();
    encode_lists(py, c.ints(), &borrow_strs(&owned)?, num_threads, |t| m.encode_as(t, specials, allowed))
}

/// (flat ids, offsets of each text's ids).
pub(crate) type FlatBatch<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>);

pub(crate) fn encode_batch_numpy<'py, C: PyEncoder>(
    c: &C,
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    num_threads: Option<usize>,
    allowed: Option<Vec<u32>>,
    specials: bool,
) -> PyResult<FlatBatch<'py>> {
    let owned = py_strs(texts)?;
    let refs = borrow_strs(&owned)?;
    let pool = pool(num_threads)?;
    let m = c.model();
    let (flat, offsets) = py.detach(|| pool.install(|| m.encode_batch_flat(&refs, specials, allowed.as_deref())))?;
    Ok((PyArray1::from_vec(py, flat), PyArray1::from_vec(py, offsets)))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_jsonl_block<'py, C: PyEncoder>(
    c: &C,
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
    let m = c.model();
    let lens = m.token_lengths();
    jsonl_block(py, head, body, end, field, file_start, skip, bos, narrow, num_threads, &lens, |t| m.encode_ordinary(t))
}

pub(crate) fn decode_bytes<'py, C: PyEncoder>(
    c: &C,
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let ids = ids_from(ids)?;
    let m = c.model();
    let b = py.detach(|| m.decode_bytes(&ids))?;
    Ok(PyBytes::new(py, &b))
}

pub(crate) fn id_bytes<'py, C: PyEncoder>(c: &C, py: Python<'py>, id: u32) -> Option<Bound<'py, PyBytes>> {
    c.model().id_bytes(id).map(|b| PyBytes::new(py, b))
}

pub(crate) fn token_lengths<'py, C: PyEncoder>(c: &C, py: Python<'py>) -> Bound<'py, PyArray1<i32>> {
    PyArray1::from_vec(py, c.model().token_lengths())
}

pub(crate) fn find_special<C: PyEncoder>(c: &C, py: Python<'_>, text: &str) -> Option<(String, usize)> {
    let m = c.model();
    py.detach(|| m.find_special(text))
}

/// `encoder_class!(PyClass { own methods })`: the class's one `#[pymethods]`
/// block, the shared encoder methods first (their Python names and
/// signatures are the contract `tokenforge.base.CoreEncoded` calls).
macro_rules! encoder_class {
    ($cls:ty { $($own:tt)* }) => {
        #[::pyo3::pymethods]
        impl $cls {
            #[getter]
            fn vocab_size(&self) -> usize {
                $crate::py::encoder::vocab_size(self)
            }

            /// The split pattern (None: no pre-tokenization).
            #[getter]
            fn pattern(&self) -> Option<String> {
                $crate::py::encoder::pattern(self)
            }

            /// Ids of `text`, special-token text as ordinary text.
            fn encode_ordinary<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                text: &str,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::types::PyList>> {
                $crate::py::encoder::encode_ordinary(self, py, text)
            }

            /// Ids as a numpy uint32 array (no per-id Python objects).
            fn encode_ordinary_numpy<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                text: &str,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::numpy::PyArray1<u32>>> {
                $crate::py::encoder::encode_ordinary_numpy(self, py, text)
            }

            /// Encode with the given special ids allowed (None: all specials).
            #[pyo3(signature = (text, allowed=None))]
            fn encode<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                text: &str,
                allowed: Option<Vec<u32>>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::types::PyList>> {
                $crate::py::encoder::encode(self, py, text, allowed)
            }

            /// Many texts in parallel, as lists of ids (one per text); with
            /// `specials`, the specials in `allowed` (None: all) become their ids.
            #[pyo3(signature = (texts, num_threads=None, allowed=None, specials=false))]
            fn encode_batch<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                texts: &::pyo3::Bound<'py, ::pyo3::PyAny>,
                num_threads: Option<usize>,
                allowed: Option<Vec<u32>>,
                specials: bool,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::types::PyList>> {
                $crate::py::encoder::encode_batch(self, py, texts, num_threads, allowed, specials)
            }

            /// Many texts in parallel: (flat uint32 ids, int64 offsets of
            /// len(texts)+1), handed to numpy without a copy.
            #[pyo3(signature = (texts, num_threads=None, allowed=None, specials=false))]
            fn encode_batch_numpy<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                texts: &::pyo3::Bound<'py, ::pyo3::PyAny>,
                num_threads: Option<usize>,
                allowed: Option<Vec<u32>>,
                specials: bool,
            ) -> ::pyo3::PyResult<$crate::py::encoder::FlatBatch<'py>> {
                $crate::py::encoder::encode_batch_numpy(self, py, texts, num_threads, allowed, specials)
            }

            /// One `.jsonl` block for the pretokenizing pipeline (see `py::jsonl_block`).
            #[pyo3(signature = (head, body, end, field, file_start, skip, bos, narrow, num_threads=None))]
            #[allow(clippy::too_many_arguments)]
            fn encode_jsonl_block<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                head: &[u8],
                body: &[u8],
                end: usize,
                field: &str,
                file_start: bool,
                skip: usize,
                bos: Option<u32>,
                narrow: bool,
                num_threads: Option<usize>,
            ) -> ::pyo3::PyResult<Option<::pyo3::Bound<'py, ::pyo3::types::PyTuple>>> {
                $crate::py::encoder::encode_jsonl_block(self, py, head, body, end, field, file_start, skip, bos, narrow, num_threads)
            }

            /// The bytes of a list of ids or a 1-D integer array.
            fn decode_bytes<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                ids: &::pyo3::Bound<'py, ::pyo3::PyAny>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::types::PyBytes>> {
                $crate::py::encoder::decode_bytes(self, py, ids)
            }

            /// The bytes of one id (a special's text); None if unused.
            fn id_bytes<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                id: u32,
            ) -> Option<::pyo3::Bound<'py, ::pyo3::types::PyBytes>> {
                $crate::py::encoder::id_bytes(self, py, id)
            }

            /// The byte length of every id as int32 (0: specials, unused ids).
            fn token_lengths<'py>(&self, py: ::pyo3::Python<'py>) -> ::pyo3::Bound<'py, ::numpy::PyArray1<i32>> {
                $crate::py::encoder::token_lengths(self, py)
            }

            /// The first special token whose text occurs in `text`, and where.
            fn find_special(&self, py: ::pyo3::Python<'_>, text: &str) -> Option<(String, usize)> {
                $crate::py::encoder::find_special(self, py, text)
            }

            $($own)*
        }
    };
}

pub(crate) use encoder_class;
