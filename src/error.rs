//! The core's error type. Bindings map each variant to a Python exception of
//! `tokenforge.errors`; the message always says what was wrong.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A pre-tokenization pattern that does not compile.
    Pattern(String),
    /// A vocabulary size or merge count that cannot be honoured.
    VocabSize(String),
    /// An inconsistent vocabulary, merge table or id.
    Invalid(String),
    /// The work was interrupted by the caller.
    Cancelled,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Pattern(m) | Error::VocabSize(m) | Error::Invalid(m) => f.write_str(m),
            Error::Cancelled => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
