//! The imported tokenizers' engines (`tokenforge.pipeline`): the model step of
//! a `tokenizer.json` (Unigram, WordPiece) and a SentencePiece model's whole
//! encoding (normalizer and unigram, bpe, word or char model). The Python loops
//! of `tokenforge.pipeline` (`steps.py`, `spm.py`, the lattice of
//! `tokenforge.reference.unigram`) are the slow reference of each; the stages
//! still run in Python (tokenizer.json normalizers and pre-tokenizers, symbol
//! BPE, decoding).
//!
//! Not handled: anything Python-facing (bindings are `py::pipeline`).

pub mod precompiled;
pub mod spm;
pub mod unigram;
pub mod wordpiece;

pub use precompiled::Precompiled;
pub use spm::{Charsmap, SpmEncoder, SpmModel, SpmNormalizer, SpmPieces, SpmScratch};
pub use unigram::{Kind, Rule, Scratch, Unigram};
pub use wordpiece::WordPiece;
