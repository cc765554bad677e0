//! ringio-lab: the measurements behind `ringio read`, `write`, `dup`, `syscost` and
//! `bench copy`, with their result tables and SVG plots. The child runner and the seeded
//! generator they share with the server benchmark live in ringio-base.
#![deny(missing_docs)]

pub mod cache;
pub mod copybench;
pub mod dup;
pub mod error;
mod fault;
pub mod gen;
pub mod machine;
mod names;
pub mod plot;
pub mod read;
pub mod syncbench;
pub mod syscost;
pub mod table;
pub mod verifybench;
pub mod write;
pub mod xor;

pub use error::LabError;
