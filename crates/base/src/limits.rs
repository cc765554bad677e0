//! Process limits every long-running command raises or reads.

/// The most descriptors a process asks for. Hard limits go as high as 2^30 in some containers;
/// what is sized from the limit (a run's descriptor budgets, the `uring-bufring` server's file
/// table) stays sane under this cap, and a million descriptors is more than any run needs.
const NOFILE_CAP: u64 = 1 << 20;

/// Raises the soft RLIMIT_NOFILE to the hard limit (at most 2^20) and returns the new soft
/// limit: copies hold descriptors for deep trees, servers and load generators a socket per
/// client.
pub fn raise_nofile_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    let current = lim.current.unwrap_or(u64::MAX);
    let want = lim.maximum.unwrap_or(u64::MAX).min(NOFILE_CAP);
    if current < want {
        let raised = Rlimit {
            current: Some(want),
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return want;
        }
    }
    current
}

/// The size the descriptor table is grown to before a run's threads start (see
/// [`grow_descriptor_table`]): more than the trees measured reach (a 26k-file tree copied
/// with `cp -a` reaches descriptor 711), for 32 KiB of kernel memory.
pub const DESCRIPTOR_TABLE: u64 = 4096;

/// Grows the process's descriptor table to [`DESCRIPTOR_TABLE`] slots (at most the soft
/// limit, raised first), to be called while the process has one thread. The kernel grows the
/// table as descriptors are opened past its size (64, then doubling), and in a process of
/// several threads each growth waits for an RCU grace period, during which every thread that
/// opens or closes a descriptor waits too: measured, `cp -a` of a 26k-file tree on tmpfs
/// took 337 ms with the table grown as it went and 310 ms with it grown first. A table never
/// shrinks, so this costs only its memory (8 bytes a slot).
pub fn grow_descriptor_table() {
    let slots = DESCRIPTOR_TABLE.min(raise_nofile_limit());
    let Ok(highest) = i32::try_from(slots.saturating_sub(1)) else {
        return;
    };
    // The lowest free descriptor at or above `highest`: the table grows to hold it.
    let stderr = std::io::stderr();
    if let Ok(fd) = rustix::io::fcntl_dupfd_cloexec(std::os::fd::AsFd::as_fd(&stderr), highest) {
        drop(fd);
    }
}
