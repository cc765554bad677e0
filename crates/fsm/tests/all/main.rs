//! ringio-fsm's integration tests: one test binary (`cargo test -p ringio-fsm --test all`), one
//! module per subject; `cargo test -p ringio-fsm --test all soak::` runs one of them.

mod backpressure;
mod protocol;
mod soak;
