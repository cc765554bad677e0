//! Copying one directory entry synchronously: the path every engine shares for symlinks,
//! special files, merges into existing directories, and (for the synchronous engines) files.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::bigfile::BigFile;
use super::mover::Mover;
use super::same_file::{self, SameFile};
use crate::backup;
use crate::ctx::Ctx;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::links::Linked;
use crate::node::{DirHold, DirNode};
use crate::opened::{count_done, finish_file, stop_for_tests, Copied, OpenedPair};
use crate::plan::{Backup, BackupMode, Dereference, LinkMode, Overwrite, Reflink, Resume};
use crate::queue::{Entry, Queue, Task};
use crate::quote::quote;
use crate::replaced::{self, Replaced};
use crate::resume::{self, QuickCheck};
use crate::sys::{self, Kind, Stat};
use crate::temp;

/// Copies one entry of `dir` found by the walk (same name on both sides).
pub(crate) fn copy_entry<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    name: CString,
    queue: &Queue<'a>,
) {
    let follow = ctx.plan.dereference == Dereference::Always;
    match sys::statx_at(dir.src_fd(), &name, follow) {
        Ok(stat) => copy_stated(
            ctx,
            mover,
            dir,
            name.clone(),
            name,
            stat,
            follow,
            None,
            queue,
        ),
        Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&name)), e)),
    }
}

/// Copies one entry the walk listed with its type. Into a directory this run made (where the
/// file will be opened anyway), a regular file is opened first and stated through its
/// descriptor: the stat, the data and the metadata are then of one file, for the calls a statx
/// by name costs. Anything else, or a file that cannot be opened, goes to [`copy_entry`], which
/// stats it by name and says why.
pub(crate) fn copy_listed<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    (name, kind): Entry,
    queue: &Queue<'a>,
) {
    let follow = ctx.plan.dereference == Dereference::Always;
    if dir.fresh && kind == Some(Kind::File) && !follow {
        if let Ok(fd) = sys::openat(dir.src_fd(), &name, libc::O_RDONLY | libc::O_NOFOLLOW, 0) {
            match sys::fstatx(fd.as_fd()) {
                Ok(stat) => {
                    let dst = name.clone();
                    copy_stated(ctx, mover, dir, name, dst, stat, false, Some(fd), queue);
                }
                Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(&name)), e)),
            }
            return;
        }
    }
    copy_entry(ctx, mover, dir, name, queue);
}

/// Copies a command-line file operand `src` of `dir` to `dst` in the destination directory.
pub(crate) fn copy_root_entry<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    follow: bool,
    queue: &Queue<'a>,
) {
    match sys::statx_at(dir.src_fd(), src, follow) {
        Ok(stat) => copy_stated(
            ctx,
            mover,
            dir,
            src.to_owned(),
            dst.to_owned(),
            stat,
            follow,
            None,
            queue,
        ),
        Err(e) => ctx.fail(CopyError::io(Op::Stat, dir.src_path(Some(src)), e)),
    }
}

/// Dispatches on the source's type once it is known.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_stated<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: CString,
    dst: CString,
    stat: Stat,
    follow: bool,
    opened: Option<OwnedFd>,
    queue: &Queue<'a>,
) {
    if crate::ranks::sent_to_owner(ctx, dir, &src, &dst, &stat) {
        return;
    }
    match stat.kind() {
        Kind::Dir if ctx.plan.recursive => queue.push(Task::Subdir {
            parent: dir.clone(),
            name: src,
            stat: Some(stat),
        }),
        _ if ctx.plan.link != LinkMode::Copy && stat.kind() != Kind::Dir => {
            match make_link(ctx, dir, &src, &dst, &stat, follow) {
                Ok(true) => count_done(ctx, dir, &src, &dst),
                Ok(false) => {}
                Err(e) => ctx.fail(e),
            }
        }
        Kind::Dir => {
            if ctx.plan.recursive {
                queue.push(Task::Subdir {
                    parent: dir.clone(),
                    name: src,
                    stat: Some(stat),
                });
            } else {
                ctx.fail(CopyError::Refused(format!(
                    "-r not specified; omitting directory {}",
                    quote(&dir.src_path(Some(&src)))
                )));
            }
        }
        // Regular files, and special files read as data (cp without -r, or --copy-contents).
        _ if copied_as_data(ctx, &stat) => {
            let source = Source { follow, opened };
            if let Err(e) = copy_file(ctx, mover, dir, &src, &dst, &stat, source, queue) {
                ctx.fail(e);
            }
        }
        _ => match copy_other(ctx, dir, &src, &dst, &stat) {
            Ok(true) => count_done(ctx, dir, &src, &dst),
            Ok(false) => {}
            Err(e) => ctx.fail(e),
        },
    }
}

/// What is at the destination name, once cp's rules have been applied to it.
pub(crate) enum Existing {
    /// Nothing (or it was removed or renamed aside): the copy is created with O_EXCL.
    Nothing,
    /// An entry that is opened as it is: a file, or what a symlink points to (written through,
    /// same inode), or a FIFO or device that is written into. The stat is the followed one;
    /// `None` for a dangling symlink written through under POSIXLY_CORRECT.
    Open {
        target: Option<Stat>,
        /// The entry itself is a symlink.
        through_link: bool,
        /// `--resume`: a regular file of the source's size, kept if its content is already
        /// the source's.
        compare_first: bool,
    },
}

/// True when the source's bytes are written into the destination (a regular file, or a
/// special file read as data), as opposed to the entry being recreated (symlinks, special
/// files under -r).
pub(crate) fn copied_as_data(ctx: &Ctx<'_>, stat: &Stat) -> bool {
    match stat.kind() {
        Kind::File => true,
        Kind::Special => ctx.plan.special_as_data(),
        Kind::Dir | Kind::Symlink => false,
    }
}

/// Applies cp's rules to an existing destination. `Ok(None)` means skip the entry.
///
/// The entry itself is replaced (removed, or renamed aside, then created anew) only where GNU
/// cp replaces it: `--remove-destination`, `--backup`, a source that is recreated rather than
/// copied as data, and `--preserve=links` onto a file with more than one link. Otherwise it
/// is opened as it is: see [`Existing::Open`].
pub(crate) fn check_existing(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<Option<Existing>, CopyError> {
    if dir.fresh {
        return Ok(Some(Existing::Nothing));
    }
    let plan = ctx.plan;
    let dst_path = || dir.dst_path(Some(dst));
    let entry = match sys::statx_at(dir.dst_fd(), dst, false) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Some(Existing::Nothing)),
        Err(e) => return Err(CopyError::io(Op::Stat, dst_path(), e)),
    };
    let is_link = entry.kind() == Kind::Symlink;
    // -l and -s make a link in place of the entry itself: nothing is written through it.
    let linking = plan.link != LinkMode::Copy;
    let as_data = !linking && copied_as_data(ctx, stat);
    // What the entry points to (None for a dangling symlink); only data is written through it,
    // a recreated entry replaces the link itself.
    // A symlink loop is removed under -f, as cp does.
    let mut loop_removed = false;
    let target = if is_link && !as_data {
        None
    } else if is_link {
        match sys::statx_at(dir.dst_fd(), dst, true) {
            Ok(s) => Some(s),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => None,
            Err(e)
                if e.raw_os_error() == Some(libc::ELOOP)
                    && (plan.force || plan.remove_destination) =>
            {
                loop_removed = true;
                None
            }
            Err(e) => return Err(CopyError::io(Op::Stat, dst_path(), e)),
        }
    } else {
        Some(entry)
    };
    if ctx.just_created(&entry) {
        return Err(CopyError::Refused(if is_link && as_data {
            format!(
                "will not copy {} through just-created symlink {}",
                quote(&dir.src_path(Some(src))),
                quote(&dst_path())
            )
        } else {
            format!(
                "will not overwrite just-created {} with {}",
                quote(&dst_path()),
                quote(&dir.src_path(Some(src)))
            )
        }));
    }
    // cp looks at the entry itself where it will not write through it.
    let looked_at = if !as_data || plan.backup.is_some() || plan.remove_destination {
        Some(entry)
    } else {
        target
    };
    let mut already_done = false;
    if let Some(dst_sb) = looked_at.filter(|_| plan.overwrite != Overwrite::NoClobber) {
        match same_file::judge(ctx, dir, src, dst, stat, &dst_sb) {
            SameFile::Ok => {}
            SameFile::Done => already_done = true,
            SameFile::Refuse => {
                return Err(CopyError::Refused(format!(
                    "{} and {} are the same file",
                    quote(&dir.src_path(Some(src))),
                    quote(&dst_path())
                )))
            }
        }
    }
    // Data goes where the entry points; a recreated entry replaces the entry itself.
    let seen = if as_data { target } else { Some(entry) };
    let recreated = if linking {
        // As cp: a link replaces only what a non-regular source under -P would.
        plan.dereference == Dereference::Never && stat.kind() != Kind::File
    } else {
        !as_data
    };
    // --attributes-only writes no data, so it replaces nothing for the data's sake.
    let for_data = !plan.attributes_only
        && (recreated || (plan.preserve.links && entry.kind() == Kind::File && entry.nlink > 1));
    let replace = plan.remove_destination || plan.backup.is_some() || for_data || loop_removed;
    if as_data && target.is_none() && !replace && std::env::var_os("POSIXLY_CORRECT").is_none() {
        return Err(CopyError::Refused(format!(
            "not writing through dangling symlink {}",
            quote(&dst_path())
        )));
    }
    if let Overwrite::Resume(how) = plan.overwrite {
        // Judged before the rules that replace the entry: a complete file of a hard-link
        // group is kept like any other.
        let replaced_anyway = plan.remove_destination || plan.backup.is_some();
        if let Some(t) = target.filter(|_| as_data && !replaced_anyway) {
            let checksum = how == Resume::Checksum;
            match resume::quick_check(checksum, plan.preserve.timestamps, stat, &t) {
                QuickCheck::Complete => return Ok(None),
                QuickCheck::CompareContent => {
                    return Ok(Some(Existing::Open {
                        target: Some(t),
                        through_link: is_link,
                        compare_first: true,
                    }))
                }
                QuickCheck::Recopy => {}
            }
        }
    }
    match plan.overwrite {
        Overwrite::NoClobber => return Ok(None),
        Overwrite::Update if seen.is_some_and(|s| s.mtime >= stat.mtime) => return Ok(None),
        _ => {}
    }
    if plan.interactive
        && !ctx
            .reporter
            .confirm(&format!("overwrite {}? ", quote(&dst_path())))
    {
        return Ok(None);
    }
    if already_done {
        return Ok(None);
    }
    if seen.is_some_and(|s| s.kind() == Kind::Dir) {
        return Err(CopyError::Refused(format!(
            "cannot overwrite directory {} with non-directory",
            quote(&dst_path())
        )));
    }
    if plan.atomic && as_data && !replace && target.is_none_or(|t| t.kind() != Kind::File) {
        return Err(replaced::not_regular(&dst_path));
    }
    if let Some(backup) = &plan.backup {
        if backup_is_source(dir, src, dst, stat, backup) {
            return Err(CopyError::Refused(format!(
                "backing up {} might destroy source;  {} not copied",
                quote(&dst_path()),
                quote(&dir.src_path(Some(src)))
            )));
        }
        let aside = backup::name_for(dir.dst_fd(), dst, backup)
            .map_err(|e| CopyError::io(Op::ReadDir, dir.dst_path(None), e))?;
        rustix::fs::renameat(dir.dst_fd(), dst, dir.dst_fd(), aside.as_c_str())
            .map_err(|e| CopyError::io(Op::Backup, dst_path(), io::Error::from(e)))?;
        if plan.verbose {
            let aside = dir.dst_path(Some(&aside));
            ctx.backups
                .lock()
                .expect("backups lock")
                .insert(dst_path(), aside);
        }
        return Ok(Some(Existing::Nothing));
    }
    if replace {
        remove_then(dir, dst, || Ok(())).map_err(|e| CopyError::io(Op::Remove, dst_path(), e))?;
        said_removed(ctx, &dst_path());
        return Ok(Some(Existing::Nothing));
    }
    Ok(Some(Existing::Open {
        target,
        through_link: is_link,
        compare_first: false,
    }))
}

/// True when the simple backup name of `dst` is the source itself (`cp --b=simple a~ a`):
/// renaming `dst` aside would destroy the source.
fn backup_is_source(
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    backup: &Backup,
) -> bool {
    if backup.mode == BackupMode::Numbered {
        return false;
    }
    let mut name = dst.to_bytes().to_vec();
    name.extend_from_slice(backup.suffix.as_bytes());
    let last = src
        .to_bytes()
        .rsplit(|&b| b == b'/')
        .next()
        .unwrap_or_default();
    if last != name.as_slice() {
        return false;
    }
    let Ok(name) = CString::new(name) else {
        return false;
    };
    sys::statx_at(dir.dst_fd(), &name, true).is_ok_and(|s| s.dev == stat.dev && s.ino == stat.ino)
}

/// True when the first copy of a source inode is remembered for later names to link to:
/// multiply linked files, and under -L (or -H on the command line) every file, since two
/// symlinks may name one file.
fn tracks_links(ctx: &Ctx<'_>, stat: &Stat, follow: bool) -> bool {
    ctx.plan.preserve.links && (stat.nlink > 1 || follow)
}

/// True when a later name of a hard-link group replaces an existing entry with the link, as
/// cp does (also under -u); not under -n or -i.
fn link_replaces(ctx: &Ctx<'_>) -> bool {
    resuming(ctx) || (ctx.plan.overwrite != Overwrite::NoClobber && !ctx.plan.interactive)
}

/// `--reflink=always` onto an existing file: whether `src` can be cloned into the destination
/// directory, tried on an unnamed temporary file there (O_TMPFILE), so that where it cannot the
/// existing file is left as it was. Where O_TMPFILE itself is unsupported the answer is yes, and
/// the clone that follows decides.
fn clone_possible(dir: BorrowedFd<'_>, src: BorrowedFd<'_>, stat: &Stat) -> io::Result<()> {
    if stat.size == 0 {
        return Ok(());
    }
    let flags = libc::O_TMPFILE | libc::O_WRONLY;
    match sys::openat(dir, c".", flags, 0o600) {
        Ok(probe) => sys::ficlone(probe.as_fd(), src),
        Err(_) => Ok(()),
    }
}

/// Follows the symlink `name` in `dir` to the file it finally names: that file's directory,
/// opened, and its name there.
fn resolve_link(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<(OwnedFd, CString)> {
    let mut at = sys::open_dir(dir, c".", false)?;
    let mut name = name.to_owned();
    // The kernel's own limit on a chain of symlinks.
    for _ in 0..40 {
        let target = match sys::readlinkat(at.as_fd(), &name, 256) {
            Ok(t) => t,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok((at, name)),
            Err(e) => return Err(e),
        };
        let (parent, last) = match target.iter().rposition(|&b| b == b'/') {
            Some(0) => (&b"/"[..], &target[1..]),
            Some(slash) => (&target[..slash], &target[slash + 1..]),
            None => (&b"."[..], &target[..]),
        };
        let parent = CString::new(parent).map_err(|_| io::ErrorKind::InvalidData)?;
        at = sys::open_dir(at.as_fd(), &parent, true)?;
        name = CString::new(last).map_err(|_| io::ErrorKind::InvalidData)?;
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// How a regular file's source is reached: opened already (the in-place path opens first and
/// stats the descriptor, so the file it hands on needs no second open), or by name, following
/// a symlink or not.
pub(crate) struct Source {
    /// Whether a symlink at the name is followed when the source is opened by name.
    pub follow: bool,
    /// The source, when it was opened and stated through its descriptor already.
    pub opened: Option<OwnedFd>,
}

/// Opens the source and the destination following cp's rules: a new file is created with
/// O_EXCL, an existing one is opened as it is (see [`check_existing`]).
/// Returns `None` when the entry is skipped (`-n`, `-u`).
pub(crate) fn open_pair(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    source: Source,
) -> Result<Option<OpenedPair>, CopyError> {
    let Some(existing) = check_existing(ctx, dir, src, dst, stat)? else {
        return Ok(None);
    };
    let (src_fd, src_stat) = match source.opened {
        // Stated through this very descriptor: nothing to compare.
        Some(fd) => (fd, *stat),
        None => {
            let nofollow = if source.follow { 0 } else { libc::O_NOFOLLOW };
            stop_for_tests();
            let fd = sys::openat(dir.src_fd(), src, libc::O_RDONLY | nofollow, 0)
                .map_err(|e| CopyError::io(Op::Open, dir.src_path(Some(src)), e))?;
            let stat = opened_as_stated(dir, src, fd.as_fd(), stat)?;
            (fd, stat)
        }
    };
    let stat = &src_stat;
    let source_stream = stat.kind() != Kind::File;
    if let Existing::Open {
        compare_first: true,
        ..
    } = existing
    {
        if complete_already(ctx, dir, dst, src_fd.as_fd(), stat)? {
            return Ok(None);
        }
    }
    let create = |at: BorrowedFd<'_>, name: &CStr| {
        sys::openat(
            at,
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            finalize::create_mode(ctx.plan, stat, dir.fresh),
        )
    };
    // --attributes-only writes no data into an existing file, so no reader can see a part of
    // it: it is opened as it is, and its content stays.
    let in_place = ctx.plan.attributes_only && matches!(existing, Existing::Open { .. });
    if ctx.plan.atomic && !in_place {
        let dst_path = || dir.dst_path(Some(dst));
        let mut temp = temp::name(dst);
        let link_target = match existing {
            Existing::Open {
                through_link: true, ..
            } => Some(
                resolve_link(dir.dst_fd(), dst)
                    .map_err(|e| CopyError::io(Op::Create, dst_path(), e))?,
            ),
            _ => None,
        };
        let (at, name_there) = match &link_target {
            Some((target_dir, name)) => (target_dir.as_fd(), name.as_c_str()),
            None => (dir.dst_fd(), dst),
        };
        let replaces = match existing {
            Existing::Open { .. } => Replaced::read(at, name_there, ctx.plan.force, &dst_path)?,
            Existing::Nothing => None,
        };
        let mode = match replaces {
            Some(_) => replaced::TEMP_MODE,
            None => finalize::create_mode(ctx.plan, stat, dir.fresh),
        };
        // Messages name the destination: the temporary's name means nothing to the user.
        let dst_fd = temp::create(at, &mut temp, mode)
            .map_err(|e| CopyError::io(Op::Create, dst_path(), e))?;
        let created = replaces.is_none();
        if created {
            // The temporary becomes this new file: a later operand of the same name must see
            // it as just created, as without --atomic.
            ctx.note_created(dir.is_operand_dir(), dst_fd.as_fd());
        }
        return Ok(Some(OpenedPair {
            src: src_fd,
            stat: src_stat,
            dst: dst_fd,
            created,
            temp: Some(temp),
            replaces,
            link_target,
            removable: true,
            stream: source_stream,
        }));
    }
    // (descriptor, created, removable, stream)
    let (opened, created, removable, stream) = match existing {
        Existing::Nothing => (create(dir.dst_fd(), dst), true, true, source_stream),
        Existing::Open {
            target,
            through_link,
            ..
        } => {
            let regular = target.is_none_or(|t| t.kind() == Kind::File);
            let clones = ctx.plan.reflink == Reflink::Always && !ctx.plan.attributes_only;
            if regular && target.is_some() && clones {
                // Truncating first and failing the clone after would lose the file.
                clone_possible(dir.dst_fd(), src_fd.as_fd(), stat).map_err(|e| {
                    CopyError::clone_failed(dir.dst_path(Some(dst)), dir.src_path(Some(src)), e)
                })?;
            }
            // A FIFO or a device is written into as it is: no truncation, in order.
            let mut flags = libc::O_WRONLY;
            // --attributes-only keeps an existing file's content.
            if regular && !ctx.plan.attributes_only {
                flags |= libc::O_TRUNC;
            }
            if target.is_none() {
                // POSIXLY_CORRECT: write through a dangling symlink, creating its target.
                flags |= libc::O_CREAT;
            }
            match sys::openat(
                dir.dst_fd(),
                dst,
                flags,
                finalize::create_mode(ctx.plan, stat, dir.fresh),
            ) {
                // -f: an existing file that cannot be opened for writing is removed and
                // created anew (never a dangling symlink's target: that stays an error).
                Err(_) if ctx.plan.force && target.is_some() => (
                    remove_then(dir, dst, || {
                        said_removed(ctx, &dir.dst_path(Some(dst)));
                        create(dir.dst_fd(), dst)
                    }),
                    true,
                    true,
                    source_stream,
                ),
                other => (
                    other,
                    target.is_none(),
                    regular && !through_link,
                    source_stream || !regular,
                ),
            }
        }
    };
    let dst_fd = opened.map_err(|e| CopyError::io(Op::Create, dir.dst_path(Some(dst)), e))?;
    if created {
        ctx.note_created(dir.is_operand_dir(), dst_fd.as_fd());
    }
    Ok(Some(OpenedPair {
        src: src_fd,
        stat: src_stat,
        dst: dst_fd,
        created,
        temp: None,
        replaces: None,
        link_target: None,
        removable,
        stream,
    }))
}

/// The source as opened: the statx of its descriptor, when it is the file the walk stat'ed
/// (same device, inode and type). Otherwise the name was pointed at another file between the
/// two (a rename, a swap), and the entry is skipped with GNU cp's words: what was opened is
/// not what the rules were applied to, and its metadata must not go to a copy of another file.
pub(crate) fn opened_as_stated(
    dir: &DirNode<'_>,
    src: &CStr,
    fd: BorrowedFd<'_>,
    stated: &Stat,
) -> Result<Stat, CopyError> {
    let opened =
        sys::fstatx(fd).map_err(|e| CopyError::io(Op::Stat, dir.src_path(Some(src)), e))?;
    if !opened.same_file(stated) {
        return Err(CopyError::Refused(format!(
            "skipping file {}, as it was replaced while being copied",
            quote(&dir.src_path(Some(src)))
        )));
    }
    stop_for_tests();
    Ok(opened)
}

/// `--resume`: true when the existing destination `dst` already holds the source's bytes; its
/// metadata is then applied again (it may be what the interrupted run never reached).
fn complete_already(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    dst: &CStr,
    src: BorrowedFd<'_>,
    stat: &Stat,
) -> Result<bool, CopyError> {
    let path = || dir.dst_path(Some(dst));
    let dst_fd = sys::openat(dir.dst_fd(), dst, libc::O_RDONLY, 0)
        .map_err(|e| CopyError::io(Op::Open, path(), e))?;
    let same = resume::same_content(src, dst_fd.as_fd(), stat.size)
        .map_err(|e| CopyError::io(Op::Read, path(), e))?;
    if same && ctx.plan.preserve.any() {
        finalize::file(
            ctx,
            dir.dst_setgid,
            dir.dst_default_acl,
            src,
            dst_fd.as_fd(),
            stat,
            false,
            dir.fresh,
            &path,
        )?;
    }
    Ok(same)
}

/// True under `--resume`.
fn resuming(ctx: &Ctx<'_>) -> bool {
    matches!(ctx.plan.overwrite, Overwrite::Resume(_))
}

/// `-v`: cp's line for a destination removed before it is created anew.
fn said_removed(ctx: &Ctx<'_>, path: &std::path::Path) {
    if ctx.plan.verbose {
        ctx.reporter
            .verbose_line(&format!("removed {}", quote(&path)));
    }
}

fn remove_then<T>(
    dir: &DirNode<'_>,
    name: &CStr,
    then: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match sys::unlinkat(dir.dst_fd(), name) {
        Ok(()) => then(),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => then(),
        Err(e) => Err(e),
    }
}

/// Copies a regular file synchronously; big files are split into chunk tasks.
#[allow(clippy::too_many_arguments)]
fn copy_file<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    source: Source,
    queue: &Queue<'a>,
) -> Result<(), CopyError> {
    if tracks_links(ctx, stat, source.follow) {
        if ctx.plan.atomic {
            // Later names link to the final name, so it must exist before they do: the first
            // copy is finished, renamed and all, while the link map's lock is held.
            let linked = ctx.links.link_or_create(
                dir.dst_fd(),
                dst,
                || dir.anchored_path(dst),
                stat,
                link_replaces(ctx),
                || match open_pair(ctx, dir, src, dst, stat, source)? {
                    Some(pair) => copy_opened(ctx, mover, dir, src, dst, pair, None),
                    None => Ok(()),
                },
            )?;
            if let Linked::Linked = linked {
                count_done(ctx, dir, src, dst);
            }
            return Ok(());
        }
        match ctx.links.link_or_create(
            dir.dst_fd(),
            dst,
            || dir.anchored_path(dst),
            stat,
            link_replaces(ctx),
            || open_pair(ctx, dir, src, dst, stat, source),
        )? {
            Linked::Linked => {
                count_done(ctx, dir, src, dst);
                Ok(())
            }
            Linked::Created(Some(pair)) => {
                copy_opened(ctx, mover, dir, src, dst, pair, Some(queue))
            }
            Linked::Created(None) => Ok(()),
        }
    } else {
        match open_pair(ctx, dir, src, dst, stat, source)? {
            Some(pair) => copy_opened(ctx, mover, dir, src, dst, pair, Some(queue)),
            None => Ok(()),
        }
    }
}

/// Copies the data of an opened pair and finishes the file; with a `queue`, a big file is
/// split into chunks that any worker may copy.
fn copy_opened<'a>(
    ctx: &'a Ctx<'a>,
    mover: &mut dyn Mover<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    pair: OpenedPair,
    queue: Option<&Queue<'a>>,
) -> Result<(), CopyError> {
    let stat = &pair.stat.clone();
    let tuning = &ctx.plan.tuning;
    // A sparse file is split by the data it holds, not by its length.
    let weight = if mover.data_path().keeps_holes(stat) {
        stat.blocks.saturating_mul(512).min(stat.size)
    } else {
        stat.size
    };
    let devs = (stat.dev, dir.dst_dev);
    if ctx.plan.attributes_only {
        return finish_file(ctx, dir, src, dst, pair, Copied::Spread(stat.size));
    }
    if pair.stream {
        // A pipe or a device: in order, to end of input.
        let result = mover
            .data_path()
            .copy_stream(ctx, pair.src.as_fd(), pair.dst.as_fd());
        return match result {
            Ok(copied) => {
                ctx.progress.bytes.fetch_add(copied, Ordering::Relaxed);
                finish_file(ctx, dir, src, dst, pair, Copied::Spread(copied))
            }
            Err(side) => {
                pair.abandon(dir, dst);
                Err(side.into_error(dir, src, dst))
            }
        };
    }
    // --debug reports each file's copy whole, so it is not split.
    let split = tuning.threads > 1
        && !ctx.plan.debug
        && tuning.chunk_size > 0
        && weight >= 2 * tuning.chunk_size
        && mover.data_path().splits_files();
    if let (Some(queue), true) = (queue, split) {
        // A clone takes one call whatever the size: try it before splitting.
        match mover
            .data_path()
            .try_clone(pair.src.as_fd(), pair.dst.as_fd(), devs, stat)
        {
            Ok(true) => {
                ctx.progress.bytes.fetch_add(stat.size, Ordering::Relaxed);
                return finish_file(ctx, dir, src, dst, pair, Copied::Spread(stat.size));
            }
            Ok(false) => {}
            Err(side) => {
                pair.abandon(dir, dst);
                return Err(side.into_error(dir, src, dst));
            }
        }
        // A file already in the page cache goes whole to one worker (a task of its own, so
        // other workers take other files): chunks of one cached file only contend for its
        // inode lock (1 GiB warm: 0.24 s and 0.24 s of CPU whole, 0.24-0.31 s and 0.42-0.54 s
        // of CPU in 16 MiB chunks on 4 workers). Reading from the disk is what chunks speed up.
        let chunk = if sys::fully_cached(pair.src.as_fd(), stat.size) == Some(true) {
            stat.size
        } else {
            tuning.chunk_size
        };
        split_into_chunks(ctx, dir, src, dst, pair, chunk, queue);
        return Ok(());
    }
    let result = mover
        .data_path()
        .copy_whole(ctx, pair.src.as_fd(), pair.dst.as_fd(), devs, stat);
    let copied = match result {
        Ok(n) => n,
        Err(side) => {
            pair.abandon(dir, dst);
            return Err(side.into_error(dir, src, dst));
        }
    };
    ctx.progress.bytes.fetch_add(copied, Ordering::Relaxed);
    let finished = finish_file(ctx, dir, src, dst, pair, Copied::Spread(copied));
    if ctx.plan.debug {
        // After the -v line, as GNU cp prints it.
        ctx.reporter.verbose_line(&mover.data_path().report.line());
    }
    finished
}

/// Queues the copy of a big file as tasks of `chunk` bytes, up to its size as opened; a source
/// that grows or shrinks meanwhile is caught when the last chunk is done (see
/// [`finish_file`]). A file never has more than [`super::bigfile::MAX_CHUNKS`] of them,
/// whatever the chunk size asked for.
fn split_into_chunks<'a>(
    ctx: &'a Ctx<'a>,
    dir: &Arc<DirNode<'a>>,
    src: &CStr,
    dst: &CStr,
    pair: OpenedPair,
    chunk: u64,
    queue: &Queue<'a>,
) {
    let size = pair.stat.size;
    let chunk = super::bigfile::chunk_len(size, chunk);
    // Reserve the length up front so parallel writers do not race to extend the file.
    let _ = rustix::fs::ftruncate(&pair.dst, size);
    let held = match DirHold::new(dir.clone()) {
        Ok(held) => held,
        Err(e) => return ctx.fail(CopyError::io(Op::OpenDir, dir.dst_path(None), e)),
    };
    let file = Arc::new(BigFile::new(held, src.to_owned(), dst.to_owned(), pair));
    let mut offset = 0;
    while offset < size {
        let len = chunk.min(size - offset);
        queue.push(Task::Chunk {
            file: file.clone(),
            offset,
            len,
        });
        offset += len;
    }
}

/// Symlinks and special files, hard-linked to an earlier copy where the source is.
/// Returns false when skipped by policy.
fn copy_other(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<bool, CopyError> {
    if ctx.plan.preserve.links && stat.nlink > 1 {
        match ctx.links.link_or_create(
            dir.dst_fd(),
            dst,
            || dir.anchored_path(dst),
            stat,
            link_replaces(ctx),
            || create_other(ctx, dir, src, dst, stat),
        )? {
            Linked::Linked => Ok(true),
            Linked::Created(made) => Ok(made),
        }
    } else {
        create_other(ctx, dir, src, dst, stat)
    }
}

fn create_other(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> Result<bool, CopyError> {
    // A recreated entry replaces what was there: check_existing has removed it.
    if check_existing(ctx, dir, src, dst, stat)?.is_none() {
        return Ok(false);
    }
    let is_symlink = stat.kind() == Kind::Symlink;
    if is_symlink {
        let target = sys::readlinkat(dir.src_fd(), src, stat.size)
            .map_err(|e| CopyError::io(Op::ReadLink, dir.src_path(Some(src)), e))?;
        let target = CString::new(target).map_err(|_| {
            CopyError::io(
                Op::ReadLink,
                dir.src_path(Some(src)),
                io::ErrorKind::InvalidData,
            )
        })?;
        sys::symlinkat(&target, dir.dst_fd(), dst)
            .map_err(|e| CopyError::io(Op::CreateSymlink, dir.dst_path(Some(dst)), e))?;
    } else {
        // An explicit --no-preserve=mode gives the default mode, as to a file.
        let perm = if ctx.plan.default_modes {
            0o666
        } else {
            stat.perm() & 0o777
        };
        let mode = (stat.mode & libc::S_IFMT) | perm;
        sys::mknodat(dir.dst_fd(), dst, mode, stat.rdev)
            .map_err(|e| CopyError::io(Op::CreateSpecial, dir.dst_path(Some(dst)), e))?;
    }
    if let Ok(made) = sys::statx_at(dir.dst_fd(), dst, false) {
        ctx.note_created_stat(dir.is_operand_dir(), &made);
    }
    let path = || dir.dst_path(Some(dst));
    finalize::entry_at(
        ctx,
        dir.dst_default_acl,
        dir.src_fd(),
        src,
        dir.dst_fd(),
        dst,
        stat,
        is_symlink,
        &path,
    )?;
    Ok(true)
}

/// `-l` and `-s`: a hard link to the source, or a symbolic link holding the source's path as
/// given, in place of a copy. An existing entry is replaced only where cp replaces it (see
/// [`check_existing`]), or with -f after the link found it there. Returns false when skipped.
fn make_link(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
    follow: bool,
) -> Result<bool, CopyError> {
    let src_path = dir.src_path(Some(src));
    let dst_path = dir.dst_path(Some(dst));
    let symbolic = ctx.plan.link == LinkMode::Symbolic;
    let target = CString::new(src_path.as_os_str().as_encoded_bytes())
        .expect("a path built from C strings has no NUL");
    if symbolic && !target.to_bytes().starts_with(b"/") && !in_current_directory(dir) {
        return Err(CopyError::Refused(format!(
            "{}: can make relative symbolic links only in current directory",
            dst_path.display()
        )));
    }
    let Some(existing) = check_existing(ctx, dir, src, dst, stat)? else {
        return Ok(false);
    };
    let link = || {
        if symbolic {
            sys::symlinkat(&target, dir.dst_fd(), dst)
        } else {
            let flags = if follow {
                rustix::fs::AtFlags::SYMLINK_FOLLOW
            } else {
                rustix::fs::AtFlags::empty()
            };
            rustix::fs::linkat(dir.src_fd(), src, dir.dst_fd(), dst, flags).map_err(io::Error::from)
        }
    };
    let made = match link() {
        Err(e)
            if e.raw_os_error() == Some(libc::EEXIST)
                && ctx.plan.force
                && matches!(existing, Existing::Open { .. }) =>
        {
            remove_then(dir, dst, link)
        }
        other => other,
    };
    made.map_err(|e| {
        CopyError::Refused(format!(
            "cannot create {} link {} to {}: {}",
            if symbolic { "symbolic" } else { "hard" },
            quote(&dst_path),
            quote(&src_path),
            crate::error::reason(&e)
        ))
    })?;
    if let Ok(made) = sys::statx_at(dir.dst_fd(), dst, false) {
        ctx.note_created_stat(dir.is_operand_dir(), &made);
    }
    Ok(true)
}

/// True when the destination directory is the current directory, where a relative `-s`
/// link's target names what it should.
fn in_current_directory(dir: &DirNode<'_>) -> bool {
    match (
        sys::fstatx(dir.dst_fd()),
        sys::statx_at(rustix::fs::CWD, c".", true),
    ) {
        (Ok(here), Ok(cwd)) => here.dev == cwd.dev && here.ino == cwd.ino,
        _ => false,
    }
}
