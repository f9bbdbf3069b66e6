pub mod encode;
pub mod heap;
pub mod hfjson;
pub mod layout;
pub mod ranks;
pub mod tfjson;
pub mod tiktoken;
pub mod train;
