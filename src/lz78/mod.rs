//! The LZ78 family: character-level LZ78 dictionaries, their pruning
//! strategies, Patricia tries, and greedy longest-match encoding.
//!
//! Id layout (the seed's): 0 reserved (root / padding, never emitted), codes
//! 1..=N the output entries, `N + 1 + b` the byte-fallback id of byte `b`,
//! then the special tokens (`<|bos|>`, `<|eos|>`, `<|pad|>`, and any extra
//! ones the Python side appends).

pub mod model;
pub mod patricia;
pub mod strategies;
pub mod trainer;
pub mod trie;
pub mod usage;

pub use model::Lz78Model;
pub use patricia::Patricia;
pub use strategies::{Params, Strategy};
pub use trainer::{finish, ChunkSource, OnlineTrainer, Pool, Seen, Stats, Trainer};
pub use trie::{ByteTrie, CharTrie};
pub use usage::{PoolTrie, UsageCounts};

/// One dictionary entry. Codes are positions + 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DictEntry {
    /// LZ78 parent code (0 = root). Always 0 in a flat dictionary.
    pub parent: u32,
    /// The character extending the parent (a flat entry: its last character).
    pub ch: char,
    pub pattern: String,
    /// Emitted by encoding (false: a prefix-only node kept for structure).
    pub output: bool,
}

/// A trained dictionary. Output entries come first, so output codes are 1..=N.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dictionary {
    pub entries: Vec<DictEntry>,
    /// No tree: entries are independent strings (flat_prune).
    pub flat: bool,
}

impl Dictionary {
    pub fn outputs(&self) -> usize {
        self.entries.iter().filter(|e| e.output).count()
    }
}
