//! Bindings of the imported tokenizers' engines (`crate::pipeline`): the
//! tokenizer.json model step over pre-tokenized words (`WordModel`: Unigram
//! or WordPiece) and a SentencePiece model's whole encoding (`SpmEncoder`).
//! Conversion, GIL release and error mapping only.
//!
//! Not handled: the Python stages (normalizers, pre-tokenizers, decoders).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use rayon::prelude::*;

use super::{borrow_strs, encode_lists, pool, py_strs, IntTable};
use crate::error::{Error, Result};
use crate::lz78::trie::ByteTrie;
use crate::pipeline::{
    Charsmap, Kind, Precompiled, Scratch, SpmEncoder, SpmModel, SpmNormalizer, SpmPieces, SpmScratch, Unigram,
    WordPiece,
};

/// Something that encodes one pre-tokenized word at a time.
trait WordModel: Sync {
    fn word_into(&self, w: &str, scratch: &mut Scratch, out: &mut Vec<u32>) -> Result<()>;
}

impl WordModel for Unigram {
    fn word_into(&self, w: &str, scratch: &mut Scratch, out: &mut Vec<u32>) -> Result<()> {
        self.encode_into(w, scratch, out)
    }
}

impl WordModel for WordPiece {
    fn word_into(&self, w: &str, _: &mut Scratch, out: &mut Vec<u32>) -> Result<()> {
        self.encode_into(w, out)
    }
}

fn words_of<M: WordModel>(m: &M, words: &[&str]) -> Result<Vec<u32>> {
    let mut out = Vec::with_capacity(words.iter().map(|w| w.len()).sum::<usize>() / 3 + 1);
    let mut scratch = Scratch::default();
    for w in words {
        m.word_into(w, &mut scratch, &mut out)?;
    }
    Ok(out)
}

fn encode_words<'py, M: WordModel>(
    py: Python<'py>,
    m: &M,
    ints: &IntTable,
    words: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let owned = py_strs(words)?;
    let refs = borrow_strs(&owned)?;
    let ids = py.detach(|| words_of(m, &refs))?;
    ints.list(py, &ids)
}

fn encode_words_batch<'py, M: WordModel>(
    py: Python<'py>,
    m: &M,
    ints: &IntTable,
    words: &Bound<'py, PyAny>,
    counts: Vec<usize>,
    num_threads: Option<usize>,
) -> PyResult<Bound<'py, PyList>> {
    let owned = py_strs(words)?;
    let refs = borrow_strs(&owned)?;
    let mut bounds = Vec::with_capacity(counts.len() + 1);
    bounds.push(0usize);
    for c in &counts {
        let next = bounds.last().unwrap() + c;
        if next > refs.len() {
            return Err(Error::invalid("the word counts add up to more than the words given").into());
        }
        bounds.push(next);
    }
    let pool = pool(num_threads)?;
    let parts: Result<Vec<Vec<u32>>> = py.detach(|| {
        pool.install(|| {
            (0..counts.len())
                .into_par_iter()
                .with_min_len(8)
                .map(|k| words_of(m, &refs[bounds[k]..bounds[k + 1]]).map_err(|e| e.in_text(k)))
                .collect()
        })
    });
    ints.lists(py, &parts?)
}

/// The two word models, behind one class.
enum Words {
    Unigram(Unigram),
    WordPiece(WordPiece),
}

impl WordModel for Words {
    fn word_into(&self, w: &str, scratch: &mut Scratch, out: &mut Vec<u32>) -> Result<()> {
        match self {
            Words::Unigram(m) => m.word_into(w, scratch, out),
            Words::WordPiece(m) => m.word_into(w, scratch, out),
        }
    }
}

/// A tokenizer.json's model over pre-tokenized words: `tokenizers`' Unigram or WordPiece.
#[pyclass(module = "tokenforge._core", name = "WordModel", frozen)]
pub struct PyWordModel {
    inner: Words,
    ints: IntTable,
}

#[pymethods]
impl PyWordModel {
    /// Unigram: the pieces and their scores, the unknown id if any, byte fallback.
    #[staticmethod]
    #[pyo3(signature = (pieces, scores, unk_id, byte_fallback))]
    fn unigram(
        py: Python<'_>,
        pieces: Vec<String>,
        scores: Vec<f64>,
        unk_id: Option<u32>,
        byte_fallback: bool,
    ) -> PyResult<Self> {
        let n = pieces.len();
        let m = py.detach(|| Unigram::tokenizers(&pieces, &scores, unk_id, byte_fallback))?;
        Ok(PyWordModel { inner: Words::Unigram(m), ints: IntTable::new(n) })
    }

    /// WordPiece: (piece, id) pairs, the unknown token, the continuing prefix, the longest word.
    #[staticmethod]
    #[pyo3(signature = (vocab, unk_token, prefix, max_chars))]
    fn wordpiece(
        py: Python<'_>,
        vocab: Vec<(String, u32)>,
        unk_token: &str,
        prefix: &str,
        max_chars: usize,
    ) -> PyResult<Self> {
        let n = vocab.iter().map(|v| v.1 as usize + 1).max().unwrap_or(0);
        let m = py.detach(|| WordPiece::new(&vocab, unk_token, prefix, max_chars))?;
        Ok(PyWordModel { inner: Words::WordPiece(m), ints: IntTable::new(n) })
    }

    /// The ids of one text's words, in order.
    fn encode_words<'py>(&self, py: Python<'py>, words: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        encode_words(py, &self.inner, &self.ints, words)
    }

    /// The words of many texts in one list, `counts[k]` of them for text k; one
    /// id list per text, encoded on `num_threads` threads.
    #[pyo3(signature = (words, counts, num_threads=None))]
    fn encode_words_batch<'py>(
        &self,
        py: Python<'py>,
        words: &Bound<'py, PyAny>,
        counts: Vec<usize>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        encode_words_batch(py, &self.inner, &self.ints, words, counts, num_threads)
    }
}

/// A SentencePiece model's encoding (normalizer and model).
#[pyclass(module = "tokenforge._core", name = "SpmEncoder", frozen)]
pub struct PySpmEncoder {
    inner: SpmEncoder,
    ints: IntTable,
}

fn kind_of(t: u8) -> PyResult<Kind> {
    Ok(match t {
        1 => Kind::Normal,
        4 => Kind::UserDefined,
        5 => Kind::Unused,
        2 | 3 | 6 => Kind::Reserved,
        _ => return Err(Error::invalid(format!("unknown SentencePiece piece type {t}")).into()),
    })
}

#[pymethods]
impl PySpmEncoder {
    /// `types`: the ModelProto piece types (1 normal .. 6 byte); `kind`:
    /// "UNIGRAM", "BPE", "WORD" or "CHAR"; `byte_ids`: the 256 byte pieces' ids when
    /// byte fallback is on; `charsmap`: the precompiled charsmap (empty: none).
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pieces, scores, types, kind, unk_id, byte_ids, charsmap, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces))]
    fn new(
        py: Python<'_>,
        pieces: Vec<String>,
        scores: Vec<f32>,
        types: Vec<u8>,
        kind: &str,
        unk_id: u32,
        byte_ids: Option<Vec<u32>>,
        charsmap: &[u8],
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
    ) -> PyResult<Self> {
        let kinds: Vec<Kind> = types.iter().map(|&t| kind_of(t)).collect::<PyResult<_>>()?;
        if pieces.len() != kinds.len() {
            return Err(Error::invalid("pieces and types differ in length").into());
        }
        let n = pieces.len();
        let inner = py.detach(|| -> Result<SpmEncoder> {
            let with = |want: &dyn Fn(u8) -> bool| -> Result<Option<ByteTrie>> {
                let items: Vec<(&[u8], u32)> = pieces
                    .iter()
                    .zip(&types)
                    .enumerate()
                    .filter(|(_, (_, t))| want(**t))
                    .map(|(i, (p, _))| (p.as_bytes(), i as u32))
                    .collect();
                if items.is_empty() {
                    Ok(None)
                } else {
                    ByteTrie::build(items).map(Some)
                }
            };
            let user = with(&|t| t == 4)?;
            let cm = if charsmap.is_empty() { None } else { Some(Charsmap::new(charsmap)?) };
            let normalizer =
                SpmNormalizer::new(cm, user, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces);
            let model = match kind {
                "UNIGRAM" => SpmModel::Unigram(Unigram::sentencepiece(&pieces, &scores, &kinds, unk_id, byte_ids)?),
                "WORD" | "CHAR" | "BPE" => {
                    let p = SpmPieces {
                        normal: with(&|t| matches!(t, 1 | 4 | 5))?.unwrap_or(ByteTrie::build(std::iter::empty())?),
                        reserved: with(&|t| matches!(t, 2 | 3 | 6))?,
                        user: with(&|t| t == 4)?,
                        unk: unk_id,
                        bytes: byte_ids,
                        scores: scores.clone(),
                        unused: kinds.iter().map(|&k| k == Kind::Unused).collect(),
                    };
                    match kind {
                        "WORD" => SpmModel::Word(p),
                        "CHAR" => SpmModel::Char(p),
                        _ => SpmModel::Bpe(p),
                    }
                }
                k => return Err(Error::invalid(format!("unknown SentencePiece model type {k:?}"))),
            };
            Ok(SpmEncoder { normalizer, model })
        })?;
        Ok(PySpmEncoder { inner, ints: IntTable::new(n) })
    }

    fn normalize(&self, py: Python<'_>, text: &str) -> PyResult<String> {
        let mut out = String::new();
        py.detach(|| self.inner.normalizer.normalize(text, &mut out))?;
        Ok(out)
    }

    fn encode<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ids = py.detach(|| {
            let mut out = Vec::with_capacity(text.len() / 3 + 1);
            self.inner.encode_into(text, &mut SpmScratch::default(), &mut out).map(|_| out)
        })?;
        self.ints.list(py, &ids)
    }

    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let owned: Vec<Bound<'py, PyString>> = py_strs(texts)?;
        let refs = borrow_strs(&owned)?;
        let m = &self.inner;
        encode_lists(py, &self.ints, &refs, num_threads, |t| {
            let mut out = Vec::with_capacity(t.len() / 3 + 1);
            m.encode_into(t, &mut SpmScratch::default(), &mut out).map(|_| out)
        })
    }
}

/// tokenizers' `Precompiled` normalizer (a tokenizer.json's SentencePiece charsmap).
#[pyclass(module = "tokenforge._core", name = "HfPrecompiled", frozen)]
pub struct PyHfPrecompiled {
    inner: Precompiled,
}

#[pymethods]
impl PyHfPrecompiled {
    /// `charsmap`: the precompiled charsmap's bytes (the JSON's base64 decoded).
    #[new]
    fn new(charsmap: &[u8]) -> PyResult<Self> {
        Ok(PyHfPrecompiled { inner: Precompiled::new(charsmap)? })
    }

    fn normalize(&self, py: Python<'_>, text: &str) -> PyResult<String> {
        let mut out = String::new();
        py.detach(|| self.inner.normalize(text, &mut out))?;
        Ok(out)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyWordModel>()?;
    m.add_class::<PyHfPrecompiled>()?;
    m.add_class::<PySpmEncoder>()?;
    Ok(())
}
