//! Opening a regular file's source and destination once the rules for an existing destination
//! have been applied: a new file with O_EXCL, an existing one as it is (through a symlink,
//! into a FIFO or a device), or under `--atomic` a temporary beside it.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::existing::{self, Existing, WriteOver};
use super::job::EntryJob;
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::node::DirHold;
use crate::opened::{stop_for_tests, OpenedPair};
use crate::plan::Reflink;
use crate::refusal::Refusal;
use crate::replaced::{self, Replaced};
use crate::sys::{self, Kind, Stat};
use crate::temp;

/// Opens the source and the destination of `job` following cp's rules (`opened`: the source's
/// descriptor, when the job had it open already). Returns `None` when the entry is skipped (`-n`, `-u`, a
/// complete file under `--resume`, ...).
pub(crate) fn open_pair(
    job: &EntryJob<'_, '_>,
    opened: Option<OwnedFd>,
) -> Result<Option<OpenedPair>, CopyError> {
    let Some(existing) = existing::resolve(job)? else {
        // Kept by the rules (`-n`, `-u`): its bytes may not be the source's.
        record_kept(job, true);
        return Ok(None);
    };
    let (dir, ctx) = (job.dir, job.dir.ctx);
    let (src_fd, src_stat) = match opened {
        // Stated through this very descriptor: nothing to compare.
        Some(fd) => (fd, job.stat),
        None => {
            let nofollow = if job.follow { 0 } else { libc::O_NOFOLLOW };
            stop_for_tests();
            let fd = sys::openat(dir.src_fd(), &job.src, libc::O_RDONLY | nofollow, 0)
                .map_err(|e| CopyError::io(Op::Open, job.src_path(), e))?;
            let stat = opened_as_stated(dir, &job.src, fd.as_fd(), &job.stat)?;
            (fd, stat)
        }
    };
    let dst = job.dst.as_c_str();
    let stat = &src_stat;
    let source_stream = stat.kind() != Kind::File;
    if let Existing::WriteOver(WriteOver {
        compare_first: true,
        ..
    }) = existing
    {
        if complete_already(dir, dst, src_fd.as_fd(), stat)? {
            record_kept(job, false);
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
    let (write_over, backup) = match existing {
        Existing::WriteOver(how) => (Some(how), None),
        Existing::Nothing { backup } => (None, backup),
    };
    // --attributes-only writes no data into an existing file, so no reader can see a part of
    // it: it is opened as it is, and its content stays.
    let in_place = ctx.plan.attributes_only && write_over.is_some();
    if ctx.plan.atomic && !in_place {
        let dst_path = || job.dst_path();
        let mut temp = temp::name(dst);
        let link_target = match write_over {
            Some(WriteOver {
                through_link: true, ..
            }) => Some(
                resolve_link(dir.dst_fd(), dst)
                    .map_err(|e| CopyError::io(Op::Create, dst_path(), e))?,
            ),
            _ => None,
        };
        let (at, name_there) = match &link_target {
            Some((target_dir, name)) => (target_dir.as_fd(), name.as_c_str()),
            None => (dir.dst_fd(), dst),
        };
        let replaces = match write_over {
            Some(_) => Replaced::read(at, name_there, ctx.plan.force, &dst_path)?,
            None => None,
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
            backup,
            hash: ctx.file_hash(),
        }));
    }
    // (descriptor, created, removable, stream)
    let (opened, created, removable, stream) = match write_over {
        None => (create(dir.dst_fd(), dst), true, true, source_stream),
        Some(WriteOver {
            target,
            through_link,
            ..
        }) => {
            let regular = target.is_none_or(|t| t.kind() == Kind::File);
            let clones = ctx.plan.reflink == Reflink::Always && !ctx.plan.attributes_only;
            if regular && target.is_some() && clones {
                // Truncating first and failing the clone after would lose the file.
                clone_possible(dir.dst_fd(), src_fd.as_fd(), stat)
                    .map_err(|e| CopyError::clone_failed(job.dst_path(), job.src_path(), e))?;
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
                Err(_) if ctx.policy.force && target.is_some() => (
                    existing::remove_then(dir, dst, || {
                        existing::said_removed(dir, &job.dst_path());
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
    let dst_fd = opened.map_err(|e| CopyError::io(Op::Create, job.dst_path(), e))?;
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
        backup,
        hash: ctx.file_hash(),
    }))
}

/// The source as opened: the statx of its descriptor, when it is the file the walk stat'ed
/// (same device, inode and type). Otherwise the name was pointed at another file between the
/// two (a rename, a swap), and the entry is skipped with GNU cp's words: what was opened is
/// not what the rules were applied to, and its metadata must not go to a copy of another file.
pub(crate) fn opened_as_stated(
    dir: &DirHold<'_>,
    src: &CStr,
    fd: BorrowedFd<'_>,
    stated: &Stat,
) -> Result<Stat, CopyError> {
    // (What `opened::held_still` compares with after the copy: taken where the test hook
    // that stands for a times-keeping writer is not half done, as that check is.)
    let opened = ringio_base::hooks::between_rewrites(|| sys::fstatx(fd))
        .map_err(|e| CopyError::io(Op::Stat, dir.src_path(Some(src)), e))?;
    if !opened.same_file(stated) {
        let src = dir.src_path(Some(src));
        return Err(Refusal::ReplacedWhileCopied.of(src.clone(), src).into());
    }
    stop_for_tests();
    Ok(opened)
}

/// `--hash`: a destination the run keeps as it is (`-n`, `-u`, `--resume` finding it complete)
/// is read and recorded, so the manifest covers what the destination holds; with
/// `compare`, the source is read too and a file whose bytes are not the source's is noted
/// (a check of the copy by these hashes names it, as a check of the trees would).
fn record_kept(job: &EntryJob<'_, '_>, compare: bool) {
    let (dir, ctx) = (job.dir, job.dir.ctx);
    if let Some(recorder) = &ctx.recorder {
        let path = job.dst_path();
        match recorder.existing((dir.dst_fd(), &job.dst, &path), Some(&job.stat)) {
            Ok(Some(hex)) if compare => {
                let source = (dir.src_fd(), job.src.as_c_str(), job.follow);
                if let Err(e) = recorder.compare_source(&path, &hex, source) {
                    ctx.fail(CopyError::io(Op::Read, job.src_path(), e));
                }
            }
            Ok(_) => {}
            Err(e) => ctx.fail(CopyError::io(Op::Read, path, e)),
        }
    }
}

/// `--resume`: true when the existing destination `dst` already holds the source's bytes; its
/// metadata is then applied again (it may be what the interrupted run never reached).
fn complete_already(
    dir: &DirHold<'_>,
    dst: &CStr,
    src: BorrowedFd<'_>,
    stat: &Stat,
) -> Result<bool, CopyError> {
    let path = || dir.dst_path(Some(dst));
    let dst_fd = sys::openat(dir.dst_fd(), dst, libc::O_RDONLY, 0)
        .map_err(|e| CopyError::io(Op::Open, path(), e))?;
    let same = crate::content::same_content(src, dst_fd.as_fd(), stat.size)
        .map_err(|e| CopyError::io(Op::Read, path(), e))?;
    if same && dir.ctx.plan.preserve.any() {
        finalize::file(
            dir.ctx,
            dir.in_dir(),
            (src, dst_fd.as_fd()),
            stat,
            false,
            &path,
        )?;
    }
    Ok(same)
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
