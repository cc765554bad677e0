//! Reading through a file mapping whose file is truncated meanwhile. The kernel answers a touch
//! of a mapped page that lies wholly past the new end of file with SIGBUS, whose default action
//! kills the process. While a [`FaultGuard`] covers a mapping, a SIGBUS inside it maps
//! anonymous zero pages over the rest of the mapping instead and marks the guard: the read
//! completes, and its caller reports the file as changed. A SIGBUS anywhere else goes on to
//! the handler that was installed before (Rust's own, or the default action).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use rustix::mm;

/// How many mappings may be guarded at once (threads of one `read` share one mapping).
const SLOTS: usize = 32;

/// One guarded address range; `end == 0` means none.
struct Slot {
    taken: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array below, never shared
const FREE: Slot = Slot {
    taken: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action found before ours, to pass on what is not ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

/// Keeps a SIGBUS inside one mapping from killing the process, until dropped.
pub(crate) struct FaultGuard {
    slot: &'static Slot,
}

impl FaultGuard {
    /// Guards `len` bytes from `start`. `None` when every slot is in use.
    ///
    /// # Safety
    ///
    /// `[start, start + len)` must be one mapping the caller made and keeps mapped until the
    /// guard is dropped, and nothing may rely on its pages past the point of a SIGBUS being
    /// the file's: the handler replaces them with zero pages.
    pub(crate) unsafe fn new(start: *const u8, len: usize) -> Option<FaultGuard> {
        INSTALL.call_once(install);
        let slot = GUARDED.iter().find(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        slot.faulted.store(false, Ordering::Relaxed);
        slot.start.store(start as usize, Ordering::Release);
        slot.end.store(start as usize + len, Ordering::Release);
        Some(FaultGuard { slot })
    }

    /// Whether the file ended inside the mapping while it was read.
    pub(crate) fn faulted(&self) -> bool {
        self.slot.faulted.load(Ordering::Acquire)
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        // `end` first: a handler reading the slot meanwhile sees an empty range.
        self.slot.end.store(0, Ordering::Release);
        self.slot.start.store(0, Ordering::Release);
        self.slot.taken.store(false, Ordering::Release);
    }
}

fn install() {
    // The page size from libc, as ringio-copy's sys takes it (rustix reads it from the
    // auxiliary vector, which faults under valgrind).
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        PAGE_SIZE.store(page as usize, Ordering::Relaxed);
    }
    // SAFETY: all zeros is a valid sigaction (SIG_DFL, no flags, an empty mask).
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action, sigaction only reads the current one into `previous`.
    let read = unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) };
    if read != 0 {
        return;
    }
    let _ = PREVIOUS.set(previous);
    // SAFETY: a zeroed sigaction is a valid value to fill in; `on_sigbus` has the three-argument
    // signature that SA_SIGINFO calls, and does only async-signal-safe work (atomics, mmap,
    // sigaction, and the previous handler). SA_ONSTACK keeps Rust's alternate signal stack in
    // use, which its stack-overflow report needs. (Signal handlers stay with libc: rustix has
    // no sigaction for them.)
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; si_addr is the faulting
    // address for SIGBUS.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR {
        let page = PAGE_SIZE.load(Ordering::Relaxed);
        for slot in &GUARDED {
            let end = slot.end.load(Ordering::Acquire);
            let start = slot.start.load(Ordering::Acquire);
            if start <= addr && addr < end {
                let from = addr & !(page - 1);
                // SAFETY: [from, end) lies inside a mapping whose owner keeps it mapped while
                // guarded and accepts zero pages past a fault (FaultGuard::new's contract).
                // MAP_FIXED replaces exactly those pages; the faulting access then reads zero.
                let mapped = unsafe {
                    mm::mmap_anonymous(
                        from as *mut c_void,
                        end - from,
                        mm::ProtFlags::READ,
                        mm::MapFlags::PRIVATE | mm::MapFlags::FIXED,
                    )
                };
                if mapped.is_ok() {
                    slot.faulted.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }
    pass_on(signal, info, context);
}

/// Hands a SIGBUS that is not a guarded mapping's to the action installed before ours.
fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let handler = PREVIOUS.get().map(|p| (p.sa_sigaction, p.sa_flags));
    match handler {
        Some((handler, flags)) if handler != libc::SIG_DFL && handler != libc::SIG_IGN => {
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: SA_SIGINFO says the handler takes these three arguments.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                    unsafe { std::mem::transmute(handler) };
                handler(signal, info, context);
            } else {
                // SAFETY: without SA_SIGINFO the handler takes the signal number alone.
                let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
                handler(signal);
            }
        }
        _ => {
            // Back to the default action: the faulting access repeats on return and ends the
            // process as it would have without us (an ignored SIGBUS would loop forever).
            // SAFETY: a zeroed sigaction is SIG_DFL with no flags; sigaction is
            // async-signal-safe.
            unsafe {
                let default: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            }
        }
    }
}
