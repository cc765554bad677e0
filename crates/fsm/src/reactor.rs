//! The readiness-based models: one event loop over a [`Poller`], which is select(2), poll(2)
//! or epoll. The loop, the buffering and the backpressure are shared; only the way of asking
//! "which sockets are ready" differs, so the three compare fairly.
//!
//! epoll runs level-triggered: each readiness event gets one read or one write, so no client
//! can monopolize the loop, and a socket left with data (because its client is over the
//! high-water mark) is simply asked about again later; edge-triggered would have to drain every
//! socket to EAGAIN on each event and keep its own list of sockets with unread data.

use std::collections::HashMap;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::accept::{accept_errno_backoff, log, ACCEPT_PAUSE};
use crate::conn::Conn;
use crate::model::Counters;

/// A ready socket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub fd: RawFd,
    pub readable: bool,
    pub writable: bool,
}

/// Which sockets are ready: select, poll or epoll.
pub(crate) trait Poller {
    /// Whether `fd` can be watched at all (select cannot watch fds ≥ FD_SETSIZE).
    fn can_watch(&self, fd: RawFd) -> bool {
        let _ = fd;
        true
    }
    /// Sets the interest in `fd` (adding it if new).
    fn set(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()>;
    /// Stops watching `fd` (before it is closed).
    fn remove(&mut self, fd: RawFd);
    /// Waits up to `timeout` and appends ready sockets to `events`.
    fn wait(&mut self, timeout: Duration, events: &mut Vec<Event>) -> io::Result<()>;
}

/// Runs the event loop until `stop`.
pub(crate) fn run(
    listener: &TcpListener,
    poller: &mut dyn Poller,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let lfd = listener.as_raw_fd();
    poller.set(lfd, true, false)?;
    let mut conns: HashMap<RawFd, (OwnedFd, Conn)> = HashMap::new();
    let mut events = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut paused_until: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        events.clear();
        match poller.wait(Duration::from_millis(100), &mut events) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if paused_until.is_some_and(|t| Instant::now() >= t) {
            paused_until = None;
            poller.set(lfd, true, false)?;
        }
        for ev in events.iter().copied() {
            if ev.fd == lfd {
                if paused_until.is_none() {
                    if let Some(pause) = accept_all(lfd, poller, &mut conns, counters) {
                        // Out of descriptors: stop watching the listener for a while rather
                        // than spin on it (it stays readable).
                        poller.set(lfd, false, false)?;
                        paused_until = Some(Instant::now() + pause);
                    }
                }
                continue;
            }
            let Some((fd, conn)) = conns.get_mut(&ev.fd) else {
                continue;
            };
            let mut close = false;
            let mut answered = 0;
            if ev.readable && conn.wants_input() {
                // SAFETY: reading into our own buffer from a socket we own.
                let n =
                    unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
                match n {
                    0 => close = true,
                    n if n > 0 => {
                        answered = conn.received(&buf[..n as usize]);
                        Counters::bump(&counters.requests, answered);
                        Counters::note_peak(&counters.peak_replies, conn.pending().len());
                    }
                    _ => {
                        let e = io::Error::last_os_error();
                        if !matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) {
                            Counters::bump(&counters.errors, 1);
                            close = true;
                        }
                    }
                }
            }
            // Replies go out as soon as they exist, not a loop turn later.
            if !close && (ev.writable || answered > 0) && !conn.pending().is_empty() {
                let pending = conn.pending();
                // SAFETY: sending from our own buffer on a socket we own.
                let n = unsafe {
                    libc::send(
                        fd.as_raw_fd(),
                        pending.as_ptr().cast(),
                        pending.len(),
                        libc::MSG_NOSIGNAL,
                    )
                };
                if n >= 0 {
                    conn.wrote(n as usize);
                } else {
                    let e = io::Error::last_os_error();
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) {
                        Counters::bump(&counters.errors, 1);
                        close = true;
                    }
                }
            }
            if close || conn.finished() {
                poller.remove(ev.fd);
                conns.remove(&ev.fd);
            } else {
                let write = !conn.pending().is_empty();
                poller.set(ev.fd, conn.wants_input(), write)?;
            }
        }
    }
    Ok(())
}

/// Accepts every waiting client. Returns a pause when descriptors ran out.
fn accept_all(
    lfd: RawFd,
    poller: &mut dyn Poller,
    conns: &mut HashMap<RawFd, (OwnedFd, Conn)>,
    counters: &Counters,
) -> Option<Duration> {
    loop {
        // SAFETY: accept4 on our listener; the address is not wanted.
        let fd = unsafe {
            libc::accept4(
                lfd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => None,
                io::ErrorKind::Interrupted => continue,
                _ => accept_errno_backoff(&e, counters).then_some(ACCEPT_PAUSE),
            };
        }
        // SAFETY: accept4 returned a new descriptor that nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        if !poller.can_watch(fd) {
            log(&format!(
                "refusing a client: descriptor {fd} is past this model's limit (FD_SETSIZE)"
            ));
            Counters::bump(&counters.refused, 1);
            continue; // dropping `owned` closes it: the client sees the connection end
        }
        crate::conn::set_nodelay(fd);
        if poller.set(fd, true, false).is_err() {
            Counters::bump(&counters.refused, 1);
            continue;
        }
        Counters::bump(&counters.connections, 1);
        conns.insert(fd, (owned, Conn::default()));
    }
}

/// select(2). Rebuilds its sets on every wait, which is what select costs.
#[derive(Default)]
pub(crate) struct SelectPoller {
    interest: HashMap<RawFd, (bool, bool)>,
}

impl Poller for SelectPoller {
    fn can_watch(&self, fd: RawFd) -> bool {
        (fd as usize) < libc::FD_SETSIZE
    }
    fn set(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        if !self.can_watch(fd) {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        self.interest.insert(fd, (read, write));
        Ok(())
    }
    fn remove(&mut self, fd: RawFd) {
        self.interest.remove(&fd);
    }
    fn wait(&mut self, timeout: Duration, events: &mut Vec<Event>) -> io::Result<()> {
        // SAFETY: fd_set is plain data; FD_ZERO/FD_SET only touch fds < FD_SETSIZE (checked in
        // `set`), and select gets valid pointers.
        unsafe {
            let mut rs: libc::fd_set = std::mem::zeroed();
            let mut ws: libc::fd_set = std::mem::zeroed();
            libc::FD_ZERO(&mut rs);
            libc::FD_ZERO(&mut ws);
            let mut max = -1;
            for (&fd, &(r, w)) in &self.interest {
                if r {
                    libc::FD_SET(fd, &mut rs);
                }
                if w {
                    libc::FD_SET(fd, &mut ws);
                }
                if r || w {
                    max = max.max(fd);
                }
            }
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: timeout.as_micros() as libc::suseconds_t,
            };
            let n = libc::select(max + 1, &mut rs, &mut ws, std::ptr::null_mut(), &mut tv);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            for (&fd, &(r, w)) in &self.interest {
                let readable = r && libc::FD_ISSET(fd, &rs);
                let writable = w && libc::FD_ISSET(fd, &ws);
                if readable || writable {
                    events.push(Event {
                        fd,
                        readable,
                        writable,
                    });
                }
            }
        }
        Ok(())
    }
}

/// poll(2).
#[derive(Default)]
pub(crate) struct PollPoller {
    fds: Vec<libc::pollfd>,
    index: HashMap<RawFd, usize>,
}

impl Poller for PollPoller {
    fn set(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        let events =
            (if read { libc::POLLIN } else { 0 }) | (if write { libc::POLLOUT } else { 0 });
        match self.index.get(&fd) {
            Some(&i) => self.fds[i].events = events,
            None => {
                self.index.insert(fd, self.fds.len());
                self.fds.push(libc::pollfd {
                    fd,
                    events,
                    revents: 0,
                });
            }
        }
        Ok(())
    }
    fn remove(&mut self, fd: RawFd) {
        if let Some(i) = self.index.remove(&fd) {
            self.fds.swap_remove(i);
            if i < self.fds.len() {
                self.index.insert(self.fds[i].fd, i);
            }
        }
    }
    fn wait(&mut self, timeout: Duration, events: &mut Vec<Event>) -> io::Result<()> {
        // SAFETY: `fds` is a valid array of pollfd of that length.
        let n = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                timeout.as_millis() as i32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for p in &self.fds {
            if p.revents != 0 {
                let err = p.revents & (libc::POLLERR | libc::POLLHUP) != 0;
                events.push(Event {
                    fd: p.fd,
                    readable: p.revents & libc::POLLIN != 0
                        || (err && p.events & libc::POLLIN != 0),
                    writable: p.revents & libc::POLLOUT != 0
                        || (err && p.events & libc::POLLOUT != 0),
                });
            }
        }
        Ok(())
    }
}

/// epoll, level-triggered.
pub(crate) struct EpollPoller {
    epfd: OwnedFd,
    known: HashMap<RawFd, u32>,
    buf: Vec<libc::epoll_event>,
}

impl EpollPoller {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EpollPoller {
            // SAFETY: a new descriptor we own.
            epfd: unsafe { OwnedFd::from_raw_fd(fd) },
            known: HashMap::new(),
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
        })
    }
}

impl Poller for EpollPoller {
    fn set(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        let events = (if read { libc::EPOLLIN as u32 } else { 0 })
            | (if write { libc::EPOLLOUT as u32 } else { 0 });
        let op = match self.known.get(&fd) {
            Some(&old) if old == events => return Ok(()),
            Some(_) => libc::EPOLL_CTL_MOD,
            None => libc::EPOLL_CTL_ADD,
        };
        let mut ev = libc::epoll_event {
            events,
            u64: fd as u64,
        };
        // SAFETY: a valid event for our epoll instance.
        if unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.known.insert(fd, events);
        Ok(())
    }
    fn remove(&mut self, fd: RawFd) {
        if self.known.remove(&fd).is_some() {
            // SAFETY: removing a registered fd; the event argument is ignored.
            unsafe {
                libc::epoll_ctl(
                    self.epfd.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    fd,
                    std::ptr::null_mut(),
                )
            };
        }
    }
    fn wait(&mut self, timeout: Duration, events: &mut Vec<Event>) -> io::Result<()> {
        // SAFETY: `buf` has room for its length of events.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd.as_raw_fd(),
                self.buf.as_mut_ptr(),
                self.buf.len() as i32,
                timeout.as_millis() as i32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for ev in &self.buf[..n as usize] {
            let (bits, fd) = (ev.events, ev.u64 as RawFd);
            let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            events.push(Event {
                fd,
                readable: bits & libc::EPOLLIN as u32 != 0 || err,
                writable: bits & libc::EPOLLOUT as u32 != 0,
            });
        }
        Ok(())
    }
}
