//! Engines: how the bytes of regular files move. Walk, jobs and finalize are shared, so engines
//! compare fairly; an engine is a [`Mover`] per worker thread.

pub(crate) mod bigfile;
mod blocking;
mod data;
mod entry;
mod existing;
pub(crate) mod file;
mod job;
mod mover;
mod open;
mod other;
pub(crate) mod shared;
mod uring;

pub(crate) use blocking::BlockingMover;
pub(crate) use data::{punch_hole, DataPath, Ends, Side, Stop};
pub(crate) use entry::copy_root_entry;
pub(crate) use mover::Mover;
pub use uring::uring_available;
pub(crate) use uring::UringMover;
