//! ringio-lab: the measurements behind `ringio read`, `write`, `dup`, `syscost` and
//! `bench copy`, with what they and the server benchmark share: running a child under `wait4`
//! for its rusage, the seeded pseudo-random generator, result tables and SVG plots.
#![deny(missing_docs)]

pub mod cache;
pub mod child;
pub mod copybench;
pub mod dup;
pub mod error;
mod fault;
pub mod gen;
mod hook;
pub mod machine;
mod names;
pub mod plot;
pub mod prng;
pub mod read;
pub mod syscost;
pub mod table;
pub mod write;
pub mod xor;

pub use error::LabError;
pub use prng::Prng;
