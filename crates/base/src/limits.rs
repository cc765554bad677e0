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
