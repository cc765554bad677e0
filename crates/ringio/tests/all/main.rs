//! ringio's integration tests: one test binary (`cargo test -p ringio --test all`), one module
//! per subject. A filter on the module's path runs one subject, e.g.
//! `cargo test -p ringio --test all cp_tree::`.
//!
//! The tests run in parallel threads of one process. What a test sets for the `ringio` it runs
//! (working directory, environment, resource limits, user, seccomp filter) is set in that child
//! only ([`common::Cp`]); no test changes the process's own. A test that measures the whole
//! process runs alone in a process of its own ([`common::isolated`]).

// First: the modules after it use its macros (`engine_tests!`, `skip!`, `moot!`).
#[macro_use]
mod common;

mod bench_copy;
mod bench_server;
mod bench_sync;
mod blake3_parallel;
mod cli;
mod cp_destinations;
mod cp_errors;
mod cp_gnu;
mod cp_memory;
mod cp_policies;
mod cp_resume;
mod cp_tree;
mod fallback;
mod fsm;
mod harness;
mod hashed;
mod json_report;
mod lab;
mod manifest_safety;
mod mhl_kept;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(not(feature = "mpi"))]
mod mpi_missing;
mod outside_fixes;
mod progress;
mod sync;
mod sync_adversary;
mod sync_bounds;
mod sync_cli;
mod sync_data;
mod sync_dest;
mod sync_engine;
mod sync_errors;
mod sync_escape;
mod sync_operands;
mod tee_one_read;
mod torture;
mod verify;
mod verify_speed;
