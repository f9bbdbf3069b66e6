//! The core's one error type, shared by every family. The bindings map each
//! variant once (`py::to_py`) to a class of `tokenforge.errors`; the message
//! always says what was wrong and, where it can, how to fix it.
//!
//! Not handled: file paths and line numbers. The core sees bytes, not files;
//! `Format` carries a byte offset into the data it was given, and the Python
//! readers add the path.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A pre-tokenization pattern that does not compile (`PatternError`).
    Pattern(String),
    /// A vocabulary size or merge count that cannot be honoured (`VocabSizeError`).
    VocabSize(String),
    /// A special token that cannot be used: empty text, or an id that another
    /// token or special already has (`SpecialTokenError`).
    SpecialToken(String),
    /// Malformed data (a packed stream, a file header); `offset` is the byte
    /// offset of the problem from the start of the given data (`FormatError`).
    Format { offset: u64, message: String },
    /// Any other argument or state that cannot be honoured: an inconsistent
    /// vocabulary, merge table or id, an unknown option (`TokenforgeError`).
    Invalid(String),
    /// The system refused a resource (threads) (`OSError`).
    System(String),
    /// The work was interrupted by the caller (`KeyboardInterrupt`).
    Cancelled,
}

impl Error {
    /// A `Format` error at byte `offset`.
    pub fn format(offset: usize, message: impl Into<String>) -> Self {
        Error::Format { offset: offset as u64, message: message.into() }
    }

    /// An `Invalid` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    /// The same error (same variant), its message starting with where it
    /// happened, e.g. `within("text 3 of the batch")`.
    pub fn within(self, place: impl fmt::Display) -> Self {
        match self {
            Error::Pattern(m) => Error::Pattern(format!("{place}: {m}")),
            Error::VocabSize(m) => Error::VocabSize(format!("{place}: {m}")),
            Error::SpecialToken(m) => Error::SpecialToken(format!("{place}: {m}")),
            Error::Invalid(m) => Error::Invalid(format!("{place}: {m}")),
            Error::System(m) => Error::System(format!("{place}: {m}")),
            Error::Format { offset, message } => Error::Format { offset, message: format!("{place}: {message}") },
            Error::Cancelled => Error::Cancelled,
        }
    }

    /// [`Self::within`] text `i` of a batch.
    pub fn in_text(self, i: usize) -> Self {
        self.within(format_args!("text {i} of the batch"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Pattern(m) | Error::VocabSize(m) | Error::SpecialToken(m) | Error::Invalid(m) | Error::System(m) => {
                f.write_str(m)
            }
            Error::Format { offset, message } => write!(f, "byte offset {offset}: {message}"),
            Error::Cancelled => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
