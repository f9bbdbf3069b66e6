pub mod encode;
pub mod heap;
pub mod layout;
pub mod ranks;
pub mod train;
