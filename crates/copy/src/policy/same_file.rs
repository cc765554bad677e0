//! cp's judgement of a source and an existing destination that may be one file: symlinks and
//! hard links to the same inode, crossed with -b, -f, -d, --remove-destination, -l and -s
//! (GNU coreutils' `same_file_ok`, whose cases tests/cp/same-file.sh enumerates).

use super::{DestFacts, Look, Policy, SourceFacts};
use crate::plan::{Dereference, LinkMode};
use crate::sys::{Kind, Stat};

/// The verdict on a source and its existing destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SameFile {
    /// Not one file (or one cp copies anyway): go on with the copy.
    Different,
    /// Nothing to do: the destination already is the link that would be made.
    AlreadyLinked,
    /// "'SRC' and 'DST' are the same file".
    Refuse,
}

fn same_inode(a: &Stat, b: &Stat) -> bool {
    a.dev == b.dev && a.ino == b.ino
}

fn is_link(s: &Stat) -> bool {
    s.kind() == Kind::Symlink
}

/// Judges the source against the existing destination as cp looks at it (`dst_sb`: the entry
/// itself, or what it leads to where data is written through it). A fact it needs and does
/// not have is the `Err`; they are needed only when the first look finds one inode, or under
/// -P where a symlink is involved.
pub(super) fn judge(
    p: &Policy,
    src: &SourceFacts<'_>,
    dst: &DestFacts<'_>,
    dst_sb: &Stat,
) -> Result<SameFile, Look> {
    use SameFile::{AlreadyLinked, Different, Refuse};
    let hard_link = p.link == LinkMode::Hard;
    let backup = p.backup.is_some();
    let unlink_first = p.remove_destination;
    let never = p.dereference == Dereference::Never;
    let ok = |b: bool| if b { Different } else { Refuse };
    // The same directory entry: one name, in one directory on both sides.
    let same_name = || -> Result<bool, Look> {
        if src.name != dst.name {
            return Ok(false);
        }
        dst.same_directory.ok_or(Look::SameDirectory)
    };
    let src_sb = &src.stat;
    let same = same_inode(src_sb, dst_sb);
    if same && hard_link {
        return Ok(AlreadyLinked);
    }
    let (src_link, dst_link, same_link);
    if never {
        same_link = same;
        if is_link(src_sb) && is_link(dst_sb) {
            let sn = same_name()?;
            if !sn {
                if backup {
                    return Ok(Different);
                }
                if same_link {
                    return Ok(AlreadyLinked);
                }
            }
            return Ok(ok(!sn));
        }
        src_link = *src_sb;
        dst_link = *dst_sb;
    } else {
        if !same {
            return Ok(Different);
        }
        let Some(src_entry) = src.entry.ok_or(Look::SourceEntry)? else {
            return Ok(Different);
        };
        src_link = src_entry;
        dst_link = dst.entry;
        same_link = same_inode(&src_link, &dst_link);
        if is_link(&src_link) && is_link(&dst_link) && unlink_first {
            return Ok(Different);
        }
    }
    if backup {
        if !same_link {
            if !never && is_link(&src_link) && !is_link(&dst_link) {
                return Ok(Refuse);
            }
            return Ok(Different);
        }
        return Ok(ok(!same_name()?));
    }
    if unlink_first {
        if is_link(&dst_link) {
            return Ok(Different);
        }
        if same_link && dst_link.nlink > 1 && !same_name()? {
            return Ok(Different);
        }
    }
    if !is_link(&src_link) && !is_link(&dst_link) {
        if !same_inode(&src_link, &dst_link) {
            return Ok(Different);
        }
        if hard_link {
            return Ok(AlreadyLinked);
        }
    }
    if p.link == LinkMode::Symbolic && is_link(&dst_link) {
        return Ok(Different);
    }
    if never {
        // What each side leads to, where it is a symlink.
        let s = if is_link(&src_link) {
            src.target.ok_or(Look::SourceTarget)?
        } else {
            Some(src_link)
        };
        let d = if is_link(&dst_link) {
            dst.target.ok_or(Look::Target)?.file()
        } else {
            Some(dst_link)
        };
        let (Some(s), Some(d)) = (s, d) else {
            return Ok(Different);
        };
        if !same_inode(&s, &d) {
            return Ok(Different);
        }
        if hard_link {
            return Ok(if is_link(&dst_link) {
                Different
            } else {
                AlreadyLinked
            });
        }
    }
    Ok(Refuse)
}
