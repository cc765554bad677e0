//! ringio-fsm: the finite-state-machine server behind `ringio serve`, `ringio load` and
//! `ringio bench server`. One state machine ([`protocol::Session`]) serves every concurrency
//! model ([`Model`]).
#![deny(missing_docs)]

mod accept;
pub mod affinity;
pub mod bench;
mod blocking;
mod bufring;
mod c_epoll;
mod conn;
#[cfg(feature = "libuv")]
mod libuv;
pub mod load;
pub mod load_epoll;
pub mod loopback;
mod model;
pub mod protocol;
mod reactor;
mod ring;
mod serve;
mod tokio_model;
mod uring;

pub use model::{Model, Summary};
pub use serve::{listen, serve, ServeError, MAX_THREADS};
