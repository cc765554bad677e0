//! ringio-lab: the measurements behind `ringio read`, `write`, `dup`, `syscost` and
//! `bench copy`, with what they share: running a child under `wait4` for its rusage, and SVG
//! plots.
#![deny(missing_docs)]

pub mod child;
pub mod plot;
