//! tokenforge's Rust core: pre-tokenization, BPE training and encoding, and
//! the other tokenizer families. No Python type appears outside `py/`.

pub mod bpe;
pub mod chunks;
pub mod encoder;
pub mod error;
pub mod jsonl;
pub mod lz78;
pub mod ngram;
pub mod pipeline;
pub mod pretok;
pub mod specials;
pub mod spill;
pub mod transport;
pub mod unicode;
pub mod wordcount;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
