//! ringio-mpi: `ringio cp --mpi`, one copy spread over the ranks of an MPI job.
//!
//! * [`protocol`]: work stealing and Dijkstra–Safra termination as a pure state machine.
//! * [`sim`]: a discrete-event simulator that drives the same state machine with thousands of
//!   virtual ranks, random message delays and a metadata-server model.
//! * `runtime` (cargo feature `mpi`): each rank runs ringio-copy's engine on its share of the
//!   tree and talks to the others over MPI.
#![deny(missing_docs)]

pub mod protocol;
