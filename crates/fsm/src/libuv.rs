//! The libuv model: libuv's event loop (through libuv-sys2), a read callback per client that
//! runs the state machine, and a write request per batch of replies. libuv handles EMFILE on
//! accept itself (it keeps a spare descriptor to turn clients away cleanly).

use std::io;
use std::net::TcpListener;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use libuv_sys2 as uv;

use crate::accept::log;
use crate::conn::HIGH_WATER;
use crate::model::Counters;
use crate::protocol::Session;

const READ_BUF: usize = 16 * 1024;

/// What every callback reaches through the loop's data pointer.
struct Shared<'a> {
    counters: &'a Counters,
    stop: &'a AtomicBool,
}

#[repr(C)]
struct Client {
    tcp: uv::uv_tcp_t,
    session: Session,
    buf: [u8; READ_BUF],
    reading: bool,
    done: bool,
    /// Reply bytes handed to uv_write and not yet written.
    queued: usize,
}

/// `repr(C)`: `req` must be the first field, since libuv hands back only its address.
#[repr(C)]
struct WriteReq {
    req: uv::uv_write_t,
    data: Vec<u8>,
}

fn check(rc: i32, what: &str) -> io::Result<()> {
    if rc < 0 {
        return Err(io::Error::other(format!("{what}: libuv error {rc}")));
    }
    Ok(())
}

/// # Safety
/// `handle` belongs to the loop `run` drives, whose data is a live `Shared`.
unsafe fn shared<'a>(handle: *const uv::uv_handle_t) -> &'a Shared<'a> {
    // SAFETY: per the function's contract.
    unsafe { &*(uv::uv_loop_get_data((*handle).loop_) as *const Shared<'a>) }
}

pub(crate) fn run(listener: TcpListener, stop: &AtomicBool, counters: &Counters) -> io::Result<()> {
    let shared = Shared { counters, stop };
    // SAFETY: the loop, server and timer live on this stack frame until the loop is closed
    // below; every callback gets them back through data pointers set here.
    unsafe {
        let mut lp: Box<uv::uv_loop_t> = Box::new(std::mem::zeroed());
        check(uv::uv_loop_init(&mut *lp), "uv_loop_init")?;
        uv::uv_loop_set_data(&mut *lp, &shared as *const Shared<'_> as *mut _);
        let mut server: Box<uv::uv_tcp_t> = Box::new(std::mem::zeroed());
        check(uv::uv_tcp_init(&mut *lp, &mut *server), "uv_tcp_init")?;
        check(
            uv::uv_tcp_open(&mut *server, listener.into_raw_fd()),
            "uv_tcp_open",
        )?;
        check(
            uv::uv_listen(
                &mut *server as *mut _ as *mut uv::uv_stream_t,
                4096,
                Some(on_connection),
            ),
            "uv_listen",
        )?;
        let mut timer: Box<uv::uv_timer_t> = Box::new(std::mem::zeroed());
        check(uv::uv_timer_init(&mut *lp, &mut *timer), "uv_timer_init")?;
        check(
            uv::uv_timer_start(&mut *timer, Some(on_tick), 100, 100),
            "uv_timer_start",
        )?;
        uv::uv_run(&mut *lp, uv::uv_run_mode_UV_RUN_DEFAULT);
        // Stopped: close every handle (clients free themselves in their close callback).
        uv::uv_walk(&mut *lp, Some(close_any), std::ptr::null_mut());
        uv::uv_run(&mut *lp, uv::uv_run_mode_UV_RUN_DEFAULT);
        uv::uv_loop_close(&mut *lp);
    }
    Ok(())
}

unsafe extern "C" fn on_tick(timer: *mut uv::uv_timer_t) {
    // SAFETY: called by the loop of `run` with its own timer.
    unsafe {
        if shared(timer as *const uv::uv_handle_t)
            .stop
            .load(Ordering::Relaxed)
        {
            uv::uv_stop((*timer).loop_);
        }
    }
}

unsafe extern "C" fn close_any(handle: *mut uv::uv_handle_t, _arg: *mut std::ffi::c_void) {
    // SAFETY: a handle of the loop being torn down.
    unsafe {
        if uv::uv_is_closing(handle) == 0 {
            let is_client = !uv::uv_handle_get_data(handle).is_null();
            uv::uv_close(handle, if is_client { Some(free_client) } else { None });
        }
    }
}

unsafe extern "C" fn on_connection(server: *mut uv::uv_stream_t, status: i32) {
    // SAFETY: called by the loop of `run` for its server; the client is boxed and owned by its
    // handle until `free_client`.
    unsafe {
        let sh = shared(server as *const uv::uv_handle_t);
        if status < 0 {
            log(&format!("accept failed (libuv error {status})"));
            Counters::bump(&sh.counters.refused, 1);
            return;
        }
        let client = Box::into_raw(Box::new(Client {
            tcp: std::mem::zeroed(),
            session: Session::new(),
            buf: [0; READ_BUF],
            reading: false,
            done: false,
            queued: 0,
        }));
        let tcp = &mut (*client).tcp;
        uv::uv_tcp_init((*server).loop_, tcp);
        uv::uv_handle_set_data(tcp as *mut _ as *mut uv::uv_handle_t, client.cast());
        if uv::uv_accept(server, tcp as *mut _ as *mut uv::uv_stream_t) < 0 {
            Counters::bump(&sh.counters.refused, 1);
            uv::uv_close(tcp as *mut _ as *mut uv::uv_handle_t, Some(free_client));
            return;
        }
        Counters::bump(&sh.counters.connections, 1);
        uv::uv_tcp_nodelay(tcp, 1);
        start_reading(client);
    }
}

/// # Safety
/// `client` is live and its handle open.
unsafe fn start_reading(client: *mut Client) {
    // SAFETY: per the contract.
    unsafe {
        (*client).reading = true;
        uv::uv_read_start(
            &mut (*client).tcp as *mut _ as *mut uv::uv_stream_t,
            Some(on_alloc),
            Some(on_read),
        );
    }
}

unsafe extern "C" fn on_alloc(
    handle: *mut uv::uv_handle_t,
    _suggested: usize,
    buf: *mut uv::uv_buf_t,
) {
    // SAFETY: the handle's data is its live client; the buffer is inside it.
    unsafe {
        let client = uv::uv_handle_get_data(handle) as *mut Client;
        (*buf).base = (*client).buf.as_mut_ptr().cast();
        (*buf).len = READ_BUF;
    }
}

unsafe extern "C" fn on_read(
    stream: *mut uv::uv_stream_t,
    nread: isize,
    _buf: *const uv::uv_buf_t,
) {
    // SAFETY: the stream's data is its live client.
    unsafe {
        let sh = shared(stream as *const uv::uv_handle_t);
        let client = uv::uv_handle_get_data(stream as *const uv::uv_handle_t) as *mut Client;
        if nread < 0 {
            if nread != uv::uv_errno_t_UV_EOF as isize {
                Counters::bump(&sh.counters.errors, 1);
            }
            close_client(client);
            return;
        }
        if nread == 0 || (*client).done {
            return;
        }
        let mut out = Vec::new();
        let c = &mut *client;
        let before = c.session.requests;
        let fed = c.session.feed(&c.buf[..nread as usize], &mut out);
        Counters::bump(&sh.counters.requests, c.session.requests - before);
        if !out.is_empty() {
            let req = Box::into_raw(Box::new(WriteReq {
                req: std::mem::zeroed(),
                data: out,
            }));
            let len = (*req).data.len();
            let buf = uv::uv_buf_init((*req).data.as_mut_ptr().cast(), len as u32);
            (*client).queued += len;
            Counters::note_peak(&sh.counters.peak_replies, (*client).queued);
            if uv::uv_write(&mut (*req).req, stream, &buf, 1, Some(on_written)) < 0 {
                drop(Box::from_raw(req));
                close_client(client);
                return;
            }
        }
        if fed.done {
            (*client).done = true;
        }
        if ((*client).done || (*client).queued >= HIGH_WATER) && (*client).reading {
            // Backpressure: read no more until the replies are written.
            uv::uv_read_stop(stream);
            (*client).reading = false;
        }
    }
}

unsafe extern "C" fn on_written(req: *mut uv::uv_write_t, status: i32) {
    // SAFETY: `req` is the first field of a boxed WriteReq made in `on_read`; its handle's client
    // is live (libuv runs write callbacks before the close callback).
    unsafe {
        let wr = Box::from_raw(req as *mut WriteReq);
        let stream = (*req).handle;
        let client = uv::uv_handle_get_data(stream as *const uv::uv_handle_t) as *mut Client;
        (*client).queued -= wr.data.len();
        if status < 0 {
            if status != uv::uv_errno_t_UV_ECANCELED {
                Counters::bump(&shared(stream as *const uv::uv_handle_t).counters.errors, 1);
            }
            close_client(client);
            return;
        }
        if (*client).done && (*client).queued == 0 {
            close_client(client);
        } else if !(*client).done && !(*client).reading && (*client).queued < HIGH_WATER {
            start_reading(client);
        }
    }
}

/// # Safety
/// `client` is live.
unsafe fn close_client(client: *mut Client) {
    // SAFETY: per the contract; `free_client` frees it once libuv is done with the handle.
    unsafe {
        let h = &mut (*client).tcp as *mut _ as *mut uv::uv_handle_t;
        if uv::uv_is_closing(h) == 0 {
            uv::uv_close(h, Some(free_client));
        }
    }
}

unsafe extern "C" fn free_client(handle: *mut uv::uv_handle_t) {
    // SAFETY: the handle's data is the Box made in `on_connection`, freed exactly once here.
    unsafe { drop(Box::from_raw(uv::uv_handle_get_data(handle) as *mut Client)) };
}
