pub mod encode; pub mod train; pub mod heap; pub mod layout; pub mod ranks;
