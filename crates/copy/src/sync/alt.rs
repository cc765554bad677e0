//! `--compare-dest`, `--copy-dest`, `--link-dest`: other trees (up to 20, relative ones below
//! DEST) consulted for an entry DEST lacks. An entry there that is already what the transfer
//! would make is left out (`--compare-dest`), copied locally (`--copy-dest`), or hard-linked
//! (`--link-dest`: rsnapshot-style snapshots, where unchanged files share one inode).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::pair::{Pair, Run, SrcEntry};
use crate::policy::sync::{self as rules, AltFacts, AltMatch};
use crate::sys::{self, Stat};

/// What an alternate tree is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AltKind {
    /// `--compare-dest`: a match is not made in DEST at all.
    Compare,
    /// `--copy-dest`: a match is copied locally.
    Copy,
    /// `--link-dest`: a match is hard-linked.
    Link,
}

/// An entry of an alternate tree that matches the source's.
pub(super) struct Match {
    /// Its directory there.
    pub dir: OwnedFd,
    /// Its stat there.
    pub stat: Stat,
    /// It is exactly what the transfer would make (else only an entry of the same kind there:
    /// what the transfer's lines compare with).
    pub exact: bool,
    /// A file whose data passes the quick check (size and mtime, or `-c`'s content) though
    /// its attributes differ: rsync copies it from there, a local change (`cf`).
    pub same_data: bool,
}

/// Opens the alternate trees' roots (relative to DEST), in order; a missing one is noted.
pub(super) fn open_roots(run: &Run<'_>) -> Vec<OwnedFd> {
    let plan = run.plan;
    let mut roots = Vec::new();
    let dest = std::ffi::CString::new(plan.dest.as_os_str().as_encoded_bytes()).unwrap_or_default();
    let dest = sys::open_dir(rustix::fs::CWD, &dest, true).ok();
    for dir in &plan.alt_dests {
        // A tree inside DEST is part of the sandbox: reached from DEST's root without following
        // a symlink (one planted there would lead the links out).
        let inside = dest
            .as_ref()
            .and_then(|d| Some((d, crate::beneath::below(d.as_fd(), dir)?)));
        let opened = match inside {
            Some((d, rest)) => {
                crate::beneath::open_dirs(d.as_fd(), &rest, crate::beneath::Walk::Existing)
            }
            None => {
                let path = if dir.is_relative() {
                    lexical(&plan.dest.join(dir))
                } else {
                    dir.clone()
                };
                let c =
                    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
                sys::open_dir(rustix::fs::CWD, &c, true)
            }
        };
        match opened {
            Ok(fd) => roots.push(fd),
            Err(_) if !plan.dry_run || plan.dest.exists() => {
                run.out.error(&format!(
                    "--{}-dest arg does not exist: {}",
                    match plan.alt_kind {
                        AltKind::Compare => "compare",
                        AltKind::Copy => "copy",
                        AltKind::Link => "link",
                    },
                    dir.display()
                ));
            }
            Err(_) => {}
        }
    }
    roots
}

/// `a/b/../c` as `a/c`, without asking the filesystem: DEST may not exist yet (a dry run),
/// and a relative tree is named from DEST (`--link-dest=../prev`).
fn lexical(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The first alternate tree whose entry at `e`'s place is exactly what the transfer would make
/// of it, else the first that has an entry of its kind there (`policy::sync::choose_alt`).
pub(super) fn find(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) -> Option<Match> {
    if run.alt_roots.is_empty() {
        return None;
    }
    let candidates = run.alt_roots.iter().filter_map(|root| {
        let dir = if pair.dst_rel.is_empty() {
            root.try_clone().ok()
        } else {
            let rel = std::path::Path::new(os_str(&pair.dst_rel));
            crate::beneath::open_dirs(root.as_fd(), rel, crate::beneath::Walk::Existing).ok()
        }?;
        let mut stat = sys::statx_at(dir.as_fd(), &e.dst_name, false).ok()?;
        if run.plan.fake_super {
            let target = crate::xattr::Subject::at(dir.as_fd(), &e.dst_name, false);
            super::fake::read(target, &mut stat);
        }
        (stat.kind() == e.stat.kind()).then(|| (judge(run, pair, e, &dir, &stat), (dir, stat)))
    });
    let (judged, (dir, stat)) = rules::choose_alt(candidates)?;
    Some(Match {
        dir,
        stat,
        exact: judged.exact,
        same_data: judged.same_data,
    })
}

/// Bytes as an `OsStr`'s (Unix paths are bytes).
fn os_str(bytes: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(bytes)
}

/// rsync's judgement of the alternate entry `alt` (in `dir`) for `e`, asking the filesystem
/// only what the rule needs.
fn judge(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry, dir: &OwnedFd, alt: &Stat) -> AltMatch {
    let want = super::wanted::wanted(run, &e.stat, None);
    let facts = AltFacts {
        src: &e.stat,
        want: &want,
        alt,
        same_target: &mut || {
            let a = sys::readlinkat(pair.src(e), &e.name, e.stat.size);
            let b = sys::readlinkat(dir.as_fd(), &e.dst_name, alt.size);
            matches!((a, b), (Ok(a), Ok(b)) if a == b)
        },
        same_content: &mut || same_content_at(pair, e, dir.as_fd()),
        same_xattrs: &mut || {
            if !(run.plan.xattrs || run.plan.acls) {
                return true;
            }
            let src = crate::xattr::Subject::at(pair.src(e), &e.name, false);
            let alt = crate::xattr::Subject::at(dir.as_fd(), &e.dst_name, false);
            matches!(super::xattrs::differ(run, src, alt), Ok((false, false)))
        },
    };
    rules::judge_alt(&run.rules, run.window_ns, facts)
}

/// `-c` against an alternate tree: the source file and `dir`'s entry of its name hold the
/// same bytes.
fn same_content_at(pair: &Pair<'_>, e: &SrcEntry, dir: BorrowedFd<'_>) -> bool {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let a = sys::openat(pair.src(e), &e.name, flags, 0);
    let b = sys::openat(dir, &e.dst_name, flags, 0);
    match (a, b) {
        (Ok(a), Ok(b)) => {
            crate::content::same_content(a.as_fd(), b.as_fd(), e.stat.size).unwrap_or(false)
        }
        _ => false,
    }
}
