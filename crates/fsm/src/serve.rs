//! Running a server: the listener, the model, the stop flag, and what they share (logging,
//! what to do when accept fails).

use std::io;
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;

#[cfg(feature = "libuv")]
use crate::libuv;
use crate::model::{Counters, Model, Summary};
use crate::{blocking, bufring, c_epoll, reactor, tokio_model, uring};

/// Serving failed as a whole (not one client).
#[derive(Debug, thiserror::Error)]
#[error("{model} server: cannot {op}: {source}")]
pub struct ServeError {
    /// The model.
    pub model: Model,
    /// What failed.
    pub op: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// The most worker threads a model with a pool may run.
pub const MAX_THREADS: usize = 1024;

/// Binds `addr` with a listen backlog of 4096 (std's default of 128 drops SYNs when thousands
/// of clients connect at once, and they retry only after a second).
pub fn listen(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let listener = TcpListener::bind(addr)?;
    // SAFETY: listen on our own bound socket.
    if unsafe { libc::listen(listener.as_raw_fd(), 4096) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// Serves on `listener` with `model` until `stop` is set. `threads` is the worker count for
/// the models that have one (tokio), at most [`MAX_THREADS`]; the others are single-threaded
/// (or a thread per client).
pub fn serve(
    model: Model,
    listener: TcpListener,
    threads: usize,
    stop: &AtomicBool,
) -> Result<Summary, ServeError> {
    let counters = Counters::default();
    let err = |op| move |source| ServeError { model, op, source };
    if threads > MAX_THREADS {
        return Err(err("start")(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{threads} worker threads: at most {MAX_THREADS}"),
        )));
    }
    match model {
        Model::Sequential => {
            blocking::run(&listener, false, stop, &counters).map_err(err("serve"))?
        }
        Model::Threaded => blocking::run(&listener, true, stop, &counters).map_err(err("serve"))?,
        Model::Select => reactor::run(
            &listener,
            &mut reactor::SelectPoller::default(),
            stop,
            &counters,
        )
        .map_err(err("serve"))?,
        Model::Poll => reactor::run(
            &listener,
            &mut reactor::PollPoller::default(),
            stop,
            &counters,
        )
        .map_err(err("serve"))?,
        Model::Epoll => {
            let mut poller =
                reactor::EpollPoller::new().map_err(err("create an epoll instance"))?;
            reactor::run(&listener, &mut poller, stop, &counters).map_err(err("serve"))?
        }
        #[cfg(feature = "libuv")]
        Model::Libuv => libuv::run(listener, stop, &counters).map_err(err("serve"))?,
        #[cfg(not(feature = "libuv"))]
        Model::Libuv => {
            return Err(err("serve")(io::Error::new(
                io::ErrorKind::Unsupported,
                Model::Libuv.unavailable().unwrap_or_default(),
            )))
        }
        Model::Tokio => {
            tokio_model::run(listener, threads, stop, &counters).map_err(err("serve"))?
        }
        Model::Uring => uring::run(&listener, stop, &counters).map_err(err("serve"))?,
        Model::UringBufring => bufring::run(&listener, stop, &counters).map_err(err("serve"))?,
        Model::CEpoll => c_epoll::run(&listener, stop, &counters).map_err(err("serve"))?,
    }
    Ok(counters.summary())
}
