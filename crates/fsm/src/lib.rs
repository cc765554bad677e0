//! ringio-fsm: the finite-state-machine server behind `ringio serve`, `ringio load` and
//! `ringio bench server`.
#![deny(missing_docs)]
