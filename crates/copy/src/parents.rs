//! `--parents`: the source operand's leading directories, made under the target directory
//! one component at a time (mkdirat, then an O_NOFOLLOW open of what was made; one that was
//! there already is followed if it is a symlink to a directory, as GNU cp follows it), and
//! given their source's metadata once the operand is copied.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::quote::quote;
use crate::sys::{self, Kind, Stat};

/// One leading directory of an operand: its source and destination, open.
struct Parent {
    src: OwnedFd,
    dst: OwnedFd,
    stat: Stat,
    created: bool,
    path: PathBuf,
}

/// The leading directories of one operand, made and waiting for their metadata.
pub(crate) struct Parents(Vec<Parent>);

/// Makes the leading directories of `src` under `target` (`cp --parents a/b/f T` makes
/// `T/a` and `T/a/b`). Each source prefix is stat-ed through symlinks, as cp does, and must be
/// a directory. A new directory leaves out the group and other bits that ownership or mode
/// preservation might not grant, and is owner-writable until [`Parents::finish`].
pub(crate) fn make(ctx: &Ctx<'_>, src: &Path, target: &Path) -> Result<Parents, CopyError> {
    let cwd = rustix::fs::CWD;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| CopyError::io(Op::Stat, p, std::io::ErrorKind::InvalidInput))
    };
    let mut at =
        sys::open_dir(cwd, &c(target)?, true).map_err(|e| CopyError::io(Op::OpenDir, target, e))?;
    let leading: Vec<Component<'_>> = match src.parent() {
        Some(parent) => parent
            .components()
            .filter(|c| !matches!(c, Component::RootDir))
            .collect(),
        None => Vec::new(),
    };
    let mut src_prefix = if src.has_root() {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    let mut dst_path = target.to_path_buf();
    let mut made = Vec::new();
    for part in leading {
        let name = part.as_os_str();
        src_prefix.push(name);
        dst_path.push(name);
        let src_c = c(&src_prefix)?;
        let unusable = |e: &io::Error| {
            CopyError::Refused(format!(
                "failed to get attributes of {}: {}",
                quote(&src_prefix),
                crate::error::reason(e)
            ))
        };
        let stat = sys::statx_at(cwd, &src_c, true).map_err(|e| unusable(&e))?;
        if stat.kind() != Kind::Dir {
            return Err(unusable(&io::Error::from_raw_os_error(libc::ENOTDIR)));
        }
        let name_c = CString::new(OsStr::as_bytes(name)).expect("a path component has no NUL");
        let created = match sys::mkdirat(
            at.as_fd(),
            &name_c,
            finalize::dir_create_mode(ctx.plan, &stat),
        ) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => false,
            Err(e) => return Err(CopyError::io(Op::CreateDir, &dst_path, e)),
        };
        let dst = open_made(&at, &name_c, created, &dst_path)?;
        if created && ctx.reporter.verbose() {
            // GNU cp 9.1 prints these without quotes.
            ctx.reporter.verbose_line(&format!(
                "{} -> {}",
                src_prefix.display(),
                dst_path.display()
            ));
        }
        let src_fd = sys::open_dir(cwd, &src_c, true)
            .map_err(|e| CopyError::io(Op::OpenDir, &src_prefix, e))?;
        let next = dst
            .try_clone()
            .map_err(|e| CopyError::io(Op::OpenDir, &dst_path, e))?;
        made.push(Parent {
            src: src_fd,
            dst,
            stat,
            created,
            path: dst_path.clone(),
        });
        at = next;
    }
    Ok(Parents(made))
}

/// Opens a leading directory under the target: one this run made with O_NOFOLLOW (a symlink
/// swapped in for it is refused), one that was there through a symlink, as GNU cp's
/// `make_dir_parents_private` stats and enters it: a symlink to a directory is followed; to
/// anything else, "exists but is not a directory"; a dangling one, GNU's "cannot make
/// directory" with mkdir's EEXIST.
fn open_made(
    at: &OwnedFd,
    name: &CString,
    created: bool,
    path: &Path,
) -> Result<OwnedFd, CopyError> {
    sys::open_dir(at.as_fd(), name, !created).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTDIR | libc::ELOOP) => {
            CopyError::Refused(format!("{} exists but is not a directory", quote(path)))
        }
        Some(libc::ENOENT) if !created => CopyError::Refused(format!(
            "cannot make directory {}: {}",
            quote(path),
            crate::error::reason(&io::Error::from_raw_os_error(libc::EEXIST))
        )),
        _ => CopyError::io(Op::OpenDir, path, e),
    })
}

impl Parents {
    /// Gives each directory that this run made (or, with -p, every leading directory) its
    /// source's metadata, deepest first, after the operand is copied.
    pub(crate) fn finish(self, ctx: &Ctx<'_>) {
        for parent in self.0.into_iter().rev() {
            if parent.created || ctx.plan.preserve.any() {
                let path = parent.path.clone();
                // cp sets a leading directory's ACL only when it keeps the mode: an explicit
                // --no-preserve=mode leaves the ACL one took from a default ACL, as if none.
                let default_acl = (!ctx.plan.preserve.mode).then_some(false);
                finalize::directory(
                    ctx,
                    parent.src.as_fd(),
                    parent.dst.as_fd(),
                    &parent.stat,
                    parent.created,
                    default_acl,
                    &move || path.clone(),
                );
            }
        }
    }
}
