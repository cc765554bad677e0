//! What the two io_uring models share: making the ring, queueing entries, waiting with a
//! timeout (to notice a stop request), and cancelling everything before buffers are freed.

use std::io;

use io_uring::{opcode, squeue, types, IoUring};

/// Entries per ring; completions get four times as many slots.
const ENTRIES: u32 = 4096;

/// A ring; with `defer`, SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them (6.1+).
pub(crate) fn make(defer: bool) -> io::Result<IoUring> {
    if defer {
        let tuned = IoUring::builder()
            .setup_cqsize(ENTRIES * 4)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(ENTRIES);
        if let Ok(ring) = tuned {
            return Ok(ring);
        }
    }
    IoUring::builder().setup_cqsize(ENTRIES * 4).build(ENTRIES)
}

/// Queues `entry`, submitting first if the submission queue is full.
pub(crate) fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: callers guarantee that every buffer and descriptor an entry names stays valid
        // until its completion is reaped (see each model).
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// Submits and waits up to 100 ms for at least one completion.
pub(crate) fn wait(ring: &mut IoUring) -> io::Result<()> {
    let ts = types::Timespec::new().nsec(100_000_000);
    let args = types::SubmitArgs::new().timespec(&ts);
    match ring.submitter().submit_with_args(1, &args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME | libc::EINTR | libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Cancels every operation in flight and reaps completions until none of the `in_flight`
/// operations is left (or a second has passed), so buffers can be freed. Returns false if some
/// are still in flight: the caller must then leak what they use.
pub(crate) fn cancel_all(ring: &mut IoUring, mut in_flight: usize) -> bool {
    const CANCEL: u64 = u64::MAX - 7;
    if in_flight == 0 {
        return true;
    }
    let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
        .build()
        .user_data(CANCEL);
    if push(ring, &cancel).is_err() {
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while in_flight > 0 && std::time::Instant::now() < deadline {
        if wait(ring).is_err() {
            return false;
        }
        for cqe in ring.completion() {
            // A multishot operation ends with its last completion, the one without MORE.
            if cqe.user_data() != CANCEL && !io_uring::cqueue::more(cqe.flags()) {
                in_flight = in_flight.saturating_sub(1);
            }
        }
    }
    in_flight == 0
}
