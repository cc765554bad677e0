//! The attributes the run gives an entry: the source's, as far as the options keep them
//! (`-p`, `-E`, `-o`, `-g`, `--chown`, `-t`, `-O`), else the existing entry's, else rsync's
//! defaults for a new one.

use super::pair::Run;
use crate::sys::{Kind, Stat};

/// The attributes the run gives an entry whose source is `src`, where `existing` is there
/// now (of the same kind) or nothing is.
pub(super) fn wanted(run: &Run<'_>, src: &Stat, existing: Option<&Stat>) -> Stat {
    let plan = run.plan;
    let existing = existing.filter(|d| d.kind() == src.kind());
    let mut want = *src;
    let kind_bits = src.mode & libc::S_IFMT;
    let perm = if plan.perms {
        src.perm()
    } else if let Some(d) = existing {
        let mut perm = d.perm();
        if plan.executability && src.kind() == Kind::File {
            let src_x = src.mode & 0o111 != 0;
            let dst_x = perm & 0o111 != 0;
            if src_x && !dst_x {
                perm |= (perm & 0o444) >> 2;
            } else if !src_x && dst_x {
                perm &= !0o111;
            }
        }
        perm
    } else {
        src.perm() & 0o777 & !run.umask
    };
    want.mode = kind_bits | perm;
    want.uid = match (plan.chown.0, run.rules.owner, existing) {
        (Some(uid), _, _) => uid,
        (None, true, _) => src.uid,
        (None, false, Some(d)) => d.uid,
        (None, false, None) => rustix::process::geteuid().as_raw(),
    };
    want.gid = match (plan.chown.1, plan.group, existing) {
        (Some(gid), _, _) => gid,
        (None, true, _) => src.gid,
        (None, false, Some(d)) => d.gid,
        (None, false, None) => rustix::process::getegid().as_raw(),
    };
    let keep_time = plan.times && !(src.kind() == Kind::Dir && plan.omit_dir_times);
    if !keep_time {
        if let Some(d) = existing {
            want.mtime = d.mtime;
        }
    }
    want
}
