//! The imported tokenizers' engines (`tokenforge.pipeline`): the model step of
//! a `tokenizer.json` (Unigram, WordPiece) and a SentencePiece model's whole
//! encoding (normalizer and Unigram, word or char model). The Python package
//! holds the slow reference of each (`tokenforge.reference.pipeline`) and the
//! stages still run in Python (tokenizer.json normalizers and pre-tokenizers,
//! symbol BPE, SentencePiece BPE, decoding).
//!
//! Not handled: anything Python-facing (bindings are `py::pipeline`).

pub mod spm;
pub mod unigram;
pub mod wordpiece;

pub use spm::{Charsmap, SpmEncoder, SpmModel, SpmNormalizer, SpmScratch};
pub use unigram::{Kind, Rule, Scratch, Unigram};
pub use wordpiece::WordPiece;
