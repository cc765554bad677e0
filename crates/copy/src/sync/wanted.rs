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
    // rsync's match_gid: a group the run cannot give (not root, and not one of the user's
    // groups) is not kept, so neither set nor compared: the entry keeps the group it has.
    let givable = |gid: &u32| run.is_root || plan.fake_super || in_my_groups(*gid);
    let kept = match (plan.chown.1, plan.group) {
        (Some(gid), _) => Some(gid),
        (None, true) => Some(src.gid),
        (None, false) => None,
    };
    want.gid = match (kept.filter(givable), existing) {
        (Some(gid), _) => gid,
        (None, Some(d)) => d.gid,
        (None, None) => run.creator.1,
    };
    let keep_time = plan.times && !(src.kind() == Kind::Dir && plan.omit_dir_times);
    if !keep_time {
        if let Some(d) = existing {
            want.mtime = d.mtime;
        }
    }
    want
}

/// True when `gid` is the process's effective group or one of its supplementary groups: a
/// group an owner who is not root may give a file.
fn in_my_groups(gid: u32) -> bool {
    static GROUPS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    let groups = GROUPS.get_or_init(|| {
        let mut groups = vec![rustix::process::getegid().as_raw()];
        // SAFETY: getgroups(0, NULL) only counts; the second call writes at most `n` gids
        // into a buffer of `n`.
        unsafe {
            let n = libc::getgroups(0, std::ptr::null_mut());
            if n > 0 {
                let mut list = vec![0 as libc::gid_t; n as usize];
                let got = libc::getgroups(n, list.as_mut_ptr());
                if got > 0 {
                    list.truncate(got as usize);
                    groups.extend(list);
                }
            }
        }
        groups
    });
    groups.contains(&gid)
}
