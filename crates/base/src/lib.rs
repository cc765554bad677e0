//! ringio-base: what more than one of ringio's crates needs and none of them owns.
//!
//! It sits below every other crate and holds no copy, lab or server logic, so that the server
//! (`ringio-fsm`) builds without the copy pipeline and the lab, and the lab and the copy crate
//! share one positioned read, one aligned buffer and one descriptor-limit raise:
//!
//! * [`limits`]: raising RLIMIT_NOFILE (copies hold directory descriptors, servers and load
//!   generators a socket per client);
//! * [`io`]: `pread` that retries EINTR, and [`buf::AlignedBuf`] for O_DIRECT;
//! * [`child`]: running a child and taking its own resource usage from `wait4` (the lab's
//!   measurements, the server benchmark);
//! * [`prng`]: the one seeded generator (workload trees, `ringio write`, the load generator);
//! * [`hooks`]: the test-only hook that changes a source at a known instant (`ringio read`,
//!   `dup` and the tree comparer honour it).
#![deny(missing_docs)]

pub mod buf;
pub mod child;
pub mod hooks;
pub mod io;
pub mod limits;
pub mod prng;

pub use prng::Prng;
