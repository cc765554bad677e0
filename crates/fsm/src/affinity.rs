//! CPU pinning, for measurements that must not share a CPU: which CPUs this process may use,
//! and pinning a thread (or a child process before exec) to one of them.

use std::io;

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The default pinning: server and load generator on the first two allowed CPUs, or unpinned
/// when there are fewer than two.
pub fn default_cpus() -> (Option<usize>, Option<usize>) {
    match allowed_cpus()[..] {
        [a, b, ..] => (Some(a), Some(b)),
        _ => (None, None),
    }
}

/// Pins the calling thread (or, before exec, the process) to `cpu`.
pub fn pin_current(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays inside it (cpu is checked against
    // CPU_SETSIZE); sched_setaffinity only reads it.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
