//! cp's judgement of a source and an existing destination that may be one file: symlinks and
//! hard links to the same inode, crossed with -b, -f, -d, --remove-destination, -l and -s
//! (GNU coreutils' `same_file_ok`, whose cases tests/cp/same-file.sh enumerates).

use crate::ctx::Ctx;
use crate::node::DirNode;
use crate::plan::{Dereference, LinkMode};
use crate::sys::{self, Kind, Stat};
use std::ffi::CStr;

/// The verdict on a source and its existing destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SameFile {
    /// Go on with the copy.
    Ok,
    /// Nothing to do: the destination already is the link that would be made.
    Done,
    /// "'SRC' and 'DST' are the same file".
    Refuse,
}

fn same_inode(a: &Stat, b: &Stat) -> bool {
    a.dev == b.dev && a.ino == b.ino
}

fn is_link(s: &Stat) -> bool {
    s.kind() == Kind::Symlink
}

/// Judges `src` (stat-ed as the copy follows it: `src_sb`) against the existing `dst` (stat-ed
/// as cp looks at it: `dst_sb`, the entry itself or what it points to), both names in `dir`.
/// Extra stats are made only when the first look finds one inode.
pub(crate) fn judge(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    src_sb: &Stat,
    dst_sb: &Stat,
) -> SameFile {
    let plan = ctx.plan;
    let hard_link = plan.link == LinkMode::Hard;
    let backup = plan.backup.is_some();
    let unlink_first = plan.remove_destination;
    let never = plan.dereference == Dereference::Never;
    let ok = |b: bool| if b { SameFile::Ok } else { SameFile::Refuse };
    // The same directory entry: one directory on both sides and one name.
    let same_name = || {
        src == dst
            && sys::fstatx(dir.dst_fd())
                .is_ok_and(|d| d.dev == dir.stat.dev && d.ino == dir.stat.ino)
    };
    let same = same_inode(src_sb, dst_sb);
    if same && hard_link {
        return SameFile::Done;
    }
    let (src_link, dst_link, same_link);
    if never {
        same_link = same;
        if is_link(src_sb) && is_link(dst_sb) {
            let sn = same_name();
            if !sn {
                if backup {
                    return SameFile::Ok;
                }
                if same_link {
                    return SameFile::Done;
                }
            }
            return ok(!sn);
        }
        src_link = *src_sb;
        dst_link = *dst_sb;
    } else {
        if !same {
            return SameFile::Ok;
        }
        let (Ok(d), Ok(s)) = (
            sys::statx_at(dir.dst_fd(), dst, false),
            sys::statx_at(dir.src_fd(), src, false),
        ) else {
            return SameFile::Ok;
        };
        src_link = s;
        dst_link = d;
        same_link = same_inode(&src_link, &dst_link);
        if is_link(&src_link) && is_link(&dst_link) && unlink_first {
            return SameFile::Ok;
        }
    }
    if backup {
        if !same_link {
            if !never && is_link(&src_link) && !is_link(&dst_link) {
                return SameFile::Refuse;
            }
            return SameFile::Ok;
        }
        return ok(!same_name());
    }
    if unlink_first {
        if is_link(&dst_link) {
            return SameFile::Ok;
        }
        if same_link && dst_link.nlink > 1 && !same_name() {
            return SameFile::Ok;
        }
    }
    if !is_link(&src_link) && !is_link(&dst_link) {
        if !same_inode(&src_link, &dst_link) {
            return SameFile::Ok;
        }
        if hard_link {
            return SameFile::Done;
        }
    }
    if plan.link == LinkMode::Symbolic && is_link(&dst_link) {
        return SameFile::Ok;
    }
    if never {
        let followed = |link: &Stat, at: &DirNode<'_>, name: &CStr, src_side: bool| {
            if !is_link(link) {
                return Some(*link);
            }
            let fd = if src_side { at.src_fd() } else { at.dst_fd() };
            sys::statx_at(fd, name, true).ok()
        };
        let (Some(s), Some(d)) = (
            followed(&src_link, dir, src, true),
            followed(&dst_link, dir, dst, false),
        ) else {
            return SameFile::Ok;
        };
        if !same_inode(&s, &d) {
            return SameFile::Ok;
        }
        if hard_link {
            return if is_link(&dst_link) {
                SameFile::Ok
            } else {
                SameFile::Done
            };
        }
    }
    SameFile::Refuse
}
