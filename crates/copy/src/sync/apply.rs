//! Carrying out sync's decisions: files written to a temporary and renamed over the old one
//! (or in place), symlinks and special files made under a temporary name and renamed, hard
//! links, attributes, deletions and backups. Under `-n` nothing here touches the disk; each
//! function still says what it would do.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rustix::fs::AtFlags;

use super::attrs::{creation, file_attrs, keep_mode, special_attrs};
use super::filter::Side;
use super::item::{Action, Item};
use super::pair::{join, report, Delayed, Layer, Pair, Run, SrcEntry, STAGE};
use super::wanted::wanted;
use super::Symlinks;
use crate::backup::{self, DestEntry};
use crate::beneath::{self, Walk};
use crate::engine::{punch_hole, DataPath, Ends, Side as DataSide, Stop};
use crate::error::{CopyError, Op};
use crate::links::{Claim, FirstName, Leading};
use crate::manifest::hashing::FileHash;
use crate::policy::sync::{self as rules, QuickCheck, Verdict};
use crate::sys::{self, Kind, Stat};
use crate::temp;
use crate::xattr::Subject;

pub(super) fn os(name: &CStr) -> &OsStr {
    OsStr::from_bytes(name.to_bytes())
}

impl Pair<'_> {
    pub(super) fn dst_of(&self, name: &CStr) -> PathBuf {
        self.dst_path.join(os(name))
    }
}

/// For a symlink under `--copy-unsafe-links` or `--safe-links`: one that leads out of the
/// transfer is followed or left out. Returns the stat the entry is synced as (`None`: left
/// out).
pub(super) fn unsafe_link_target(
    run: &Run<'_>,
    (layer, dir_rel): (&Layer, &[u8]),
    name: &CStr,
    stat: Stat,
) -> Option<Stat> {
    let plan = run.plan;
    if stat.kind() != Kind::Symlink || !(plan.copy_unsafe_links || plan.safe_links) {
        return Some(stat);
    }
    let Ok(target) = sys::readlinkat(layer.fd.as_fd(), name, stat.size) else {
        return Some(stat);
    };
    let depth = dir_rel
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .count();
    if !unsafe_symlink(&target, depth) {
        return Some(stat);
    }
    if plan.copy_unsafe_links {
        return match sys::statx_at(layer.fd.as_fd(), name, true) {
            Ok(s) => Some(s),
            Err(_) => {
                run.out.error(&format!(
                    "symlink has no referent: {}",
                    crate::quote::quote_path(&layer.path.join(os(name)))
                ));
                run.trouble.failed.store(true, Ordering::Relaxed);
                None
            }
        };
    }
    if run.out.verbose > 0 {
        run.out.say(&format!(
            "ignoring unsafe symlink \"{}\" -> \"{}\"",
            String::from_utf8_lossy(&join(dir_rel, name.to_bytes())),
            String::from_utf8_lossy(&target)
        ));
    }
    None
}

/// rsync's test (3.2.7's): a link is unsafe when it is absolute or empty, holds a `..` anywhere
/// but in its leading run of them (`a/../x`: what `a` is cannot be trusted), ends in `/..`, or
/// its leading `..` climb above the transfer root from a link `depth` directories below it.
pub(super) fn unsafe_symlink(target: &[u8], depth: usize) -> bool {
    if target.is_empty() || target.starts_with(b"/") {
        return true;
    }
    let parts: Vec<&[u8]> = target.split(|&b| b == b'/').collect();
    let leading = parts
        .iter()
        .take_while(|p| **p == b".." || p.is_empty())
        .count();
    let rest = &parts[leading..];
    // A `..` after the leading run, and a final `/..`, are refused outright.
    if rest
        .iter()
        .enumerate()
        .any(|(i, p)| *p == b".." && i + 1 < rest.len())
    {
        return true;
    }
    if target.len() > 3 && target.ends_with(b"/..") {
        return true;
    }
    let mut depth = depth as i64;
    for part in &parts[..parts.len().saturating_sub(1)] {
        match *part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    // The last component names the target itself: `..` there climbs too.
    parts.last().is_some_and(|p| *p == b"..") && depth < 1
}

/// Two symlinks with the same target, or two devices with the same number.
pub(super) fn same_value(_run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry, dst: &Stat) -> bool {
    match e.stat.kind() {
        Kind::Symlink => {
            let Some(dir) = &pair.dst else { return false };
            let a = sys::readlinkat(pair.src(e), &e.name, e.stat.size);
            let b = sys::readlinkat(dir.as_fd(), &e.dst_name, dst.size);
            matches!((a, b), (Ok(a), Ok(b)) if a == b)
        }
        Kind::Special => e.stat.rdev == dst.rdev,
        _ => false,
    }
}

/// `-c`: the two files hold the same bytes (read side by side, up to the first difference).
pub(super) fn same_content(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) -> bool {
    let Some(dir) = &pair.dst else { return false };
    let a = open_src(run, pair, e);
    let b = sys::openat(
        dir.as_fd(),
        &e.dst_name,
        libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        0,
    );
    match (a, b) {
        (Ok(a), Ok(b)) => {
            crate::content::same_content(a.as_fd(), b.as_fd(), e.stat.size).unwrap_or(false)
        }
        _ => false,
    }
}

/// Makes an entry DEST lacks from its match in a `--*-dest` tree (`m`): nothing made under
/// `--compare-dest`, a hard link under `--link-dest` (a copy where the link is refused: another
/// filesystem, too many links), a local copy under `--copy-dest`. Returns its line.
pub(super) fn from_alt(
    run: &Run<'_>,
    mover: &mut Mover,
    pair: &Pair<'_>,
    e: &SrcEntry,
    m: &super::alt::Match,
    lines: &mut Vec<u8>,
) -> Result<Item, CopyError> {
    use super::alt::AltKind;
    let plan = run.plan;
    let kind = e.stat.kind();
    let mut item = Item::new(Action::Attributes, &e.stat, &e.rel);
    item.matched = true;
    item.times_kept = plan.times;
    let want = wanted(run, &e.stat, None);
    item.attrs = rules::attr_changes(&run.rules, &want, &m.stat, run.window_ns);
    if kind == Kind::Symlink {
        item.link = link_text(pair, e);
    }
    if plan.alt_kind == AltKind::Compare {
        return Ok(item);
    }
    let path = || pair.dst_of(&e.dst_name);
    if plan.alt_kind == AltKind::Link {
        item.action = Action::HardLink;
        let Some(dir) = &pair.dst else {
            return Ok(item);
        };
        if plan.dry_run {
            return Ok(item);
        }
        match rustix::fs::linkat(
            m.dir.as_fd(),
            &*e.dst_name,
            dir.as_fd(),
            &*e.dst_name,
            AtFlags::empty(),
        ) {
            Ok(()) => {
                run.stats.created.add(kind);
                return Ok(item);
            }
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::MLINK) => {}
            Err(err) => return Err(CopyError::io(Op::Create, path(), err)),
        }
    }
    // A local copy: the match's bytes, the source's attributes.
    item.action = Action::LocalChange;
    if kind == Kind::File {
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        let basis = sys::openat(m.dir.as_fd(), &e.dst_name, flags, 0)
            .map_err(|err| CopyError::io(Op::Open, path(), err))?;
        run.stats.created.add(kind);
        if !plan.dry_run {
            write_file(
                run,
                mover,
                pair,
                e,
                (None, false),
                Some(basis.as_fd()),
                lines,
            )?;
        }
        return Ok(item);
    }
    make(run, mover, pair, e, None, rules::Verdict::Create, lines)?;
    Ok(item)
}

/// The flags a source file is opened with: O_NOFOLLOW unless the run follows symlinks.
fn src_flags(run: &Run<'_>) -> i32 {
    let follow = run.plan.symlinks == Symlinks::Follow || run.plan.copy_unsafe_links;
    libc::O_RDONLY | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW }
}

/// A source file opened for reading; `--open-noatime` asks for O_NOATIME, which only the
/// file's owner (or root) may use: without that right the file is opened as usual.
fn open_src(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) -> io::Result<std::os::fd::OwnedFd> {
    if run.plan.open_noatime {
        match sys::openat(pair.src(e), &e.name, src_flags(run) | libc::O_NOATIME, 0) {
            Err(err) if err.raw_os_error() == Some(libc::EPERM) => {}
            other => return other,
        }
    }
    sys::openat(pair.src(e), &e.name, src_flags(run), 0)
}

/// A symlink's target, for `%L`.
pub(super) fn link_text(pair: &Pair<'_>, e: &SrcEntry) -> Option<Vec<u8>> {
    sys::readlinkat(pair.src(e), &e.name, e.stat.size).ok()
}

/// `-H`: the first name of a hard-linked inode is recorded (`None`: go on and make it); a
/// later one is linked to it (`Some(done)`).
pub(super) fn hard_link(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    dst: Option<&Stat>,
    decision: Verdict,
    (lines, leading): (&mut Vec<u8>, &mut Option<Leading>),
) -> Option<bool> {
    let anchor = pair.anchor.clone();
    if anchor.is_none() && !run.plan.dry_run {
        return None;
    }
    let key = (e.stat.dev, e.stat.ino);
    // A name left as it is (--ignore-existing, -u) does not hold the group's bytes: the next
    // name to be made leads instead (as rsync transfers that one).
    let skip = matches!(decision, Verdict::Skip(_));
    let lead = || {
        let path = CString::new(join(&pair.dst_rel, e.dst_name.to_bytes())).ok()?;
        (!skip).then(|| FirstName::new(anchor, path, e.rel.clone()))
    };
    let leader = match run.links.claim(key, lead)? {
        // Its guard says it is made when the caller is done with this first name.
        Claim::First(guard) => {
            *leading = Some(guard);
            return None;
        }
        Claim::Later(leader) => leader,
    };
    if skip {
        return Some(false);
    }
    // The first name may be in the making on another worker.
    leader.wait();
    // Its bytes: where they wait under --delay-updates, else at its name.
    let staged = leader.staged.get();
    let lead_path = staged.unwrap_or(&leader.path);
    // Reached from the destination root without following a symlink on the way.
    let lead =
        leader
            .anchor
            .as_ref()
            .map_or(Err(io::Error::from_raw_os_error(libc::ENOENT)), |anchor| {
                let (dir, name) = beneath::open_parent(anchor.as_fd(), lead_path)?;
                let stat = sys::statx_at(dir.as_fd(), &name, false)?;
                Ok((dir, name, stat))
            });
    if let (Some(d), Ok((_, _, l))) = (dst, &lead) {
        if d.ino == l.ino && d.dev == l.dev {
            // Already that link: listed (`hf` without its leader) only when all are, or, under
            // -n, with what the first name's update would change in it (a real run has made
            // that change already, through the first name), as rsync lists it.
            let mut item = Item::new(Action::HardLink, &e.stat, &e.rel);
            if run.plan.dry_run {
                let want = wanted(run, &e.stat, Some(d));
                item.attrs = rules::attr_changes(&run.rules, &want, d, run.window_ns);
                item.size = d.size != e.stat.size;
                item.times_kept = run.plan.times;
            }
            report(run, &item, &e.stat, lines);
            return Some(true);
        }
    }
    let mut item = Item::new(Action::HardLink, &e.stat, &e.rel);
    item.new = dst.is_none_or(|d| d.kind() != e.stat.kind());
    // A name a `--*-dest` tree already holds is not new, linked or not.
    if item.new && dst.is_none() && super::alt::find(run, pair, e).is_some() {
        item.new = false;
        // Under --link-dest the link is the tree's own: nothing to say unless all is said.
        item.matched = run.plan.alt_kind == super::alt::AltKind::Link;
    }
    item.link = Some(leader.name.clone());
    item.times_kept = run.plan.times;
    if let Some(d) = dst.filter(|_| !item.new) {
        let want = wanted(run, &e.stat, Some(d));
        item.attrs = rules::attr_changes(&run.rules, &want, d, run.window_ns);
        item.size = d.size != e.stat.size;
        item.attrs.time |= !run.plan.times;
    }
    if run.plan.dry_run {
        report(run, &item, &e.stat, lines);
        return Some(true);
    }
    pair.dst.as_ref()?;
    // The first name was not made (it failed, or was filtered), or holds other bytes than
    // the group's as the quick check sees them (its write failed and left the old file):
    // copy this one.
    let (lead_dir, lead_name, l) = lead.ok()?;
    let times = !run.plan.times || rules::same_time(l.mtime, e.stat.mtime, run.window_ns);
    if l.size != e.stat.size || !times {
        return None;
    }
    let lead = (lead_dir.as_fd(), lead_name.as_c_str());
    let placed = if staged.is_some() {
        link_delayed(run, pair, e, lead, dst, lines)
    } else {
        link_now(run, pair, e, lead, dst, lines)
    };
    match placed {
        Ok(true) => {}
        Ok(false) => return None,
        Err(err) => {
            run.fail(err);
            return Some(false);
        }
    }
    if dst.is_none() {
        run.stats.created.add(e.stat.kind());
    }
    report(run, &item, &e.stat, lines);
    Some(true)
}

/// A later name of a hard-linked group linked to `lead` (a name in `lead_dir`) under a temporary name and renamed into place. False: the link could not be made (the
/// name is copied instead).
fn link_now(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (lead_dir, lead): (BorrowedFd<'_>, &CStr),
    dst: Option<&Stat>,
    lines: &mut Vec<u8>,
) -> Result<bool, CopyError> {
    let Some(dir) = &pair.dst else {
        return Ok(false);
    };
    let dir = dir.as_fd();
    let tmp = temp::name(&e.dst_name);
    if rustix::fs::linkat(lead_dir, lead, dir, &tmp, AtFlags::empty()).is_err() {
        return Ok(false);
    }
    let placed = make_room(run, pair, e, dst, lines)
        .and_then(|()| rename(dir, &tmp, &e.dst_name, || pair.dst_of(&e.dst_name)));
    if placed.is_err() {
        let _ = sys::unlinkat(dir, &tmp);
    }
    placed.map(|()| true)
}

/// `--delay-updates`: a later name of a group whose first name waits in a `.~tmp~` is linked
/// to that copy in its own directory's `.~tmp~`, and put into place with the others at the
/// end.
fn link_delayed(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (lead_dir, lead): (BorrowedFd<'_>, &CStr),
    dst: Option<&Stat>,
    lines: &mut Vec<u8>,
) -> Result<bool, CopyError> {
    let (Some(anchor), Some(stage)) = (pair.anchor.clone(), open_stage(pair)?) else {
        return Ok(false);
    };
    let _ = sys::unlinkat(stage.as_fd(), &e.dst_name);
    if rustix::fs::linkat(
        lead_dir,
        lead,
        stage.as_fd(),
        &*e.dst_name,
        AtFlags::empty(),
    )
    .is_err()
    {
        return Ok(false);
    }
    if let Err(err) = make_room(run, pair, e, dst, lines) {
        let _ = sys::unlinkat(stage.as_fd(), &e.dst_name);
        return Err(err);
    }
    run.delayed.lock().expect("delayed").push(Delayed {
        anchor,
        dir: pair.dst_rel.clone(),
        name: e.dst_name.to_owned(),
        times: pair.kept_times().filter(|_| pair.keeps_attrs),
    });
    Ok(true)
}

/// `--delay-updates`: the directory's `.~tmp~`, made when missing and opened without
/// following a symlink (`None`: no destination directory).
fn open_stage(pair: &Pair<'_>) -> Result<Option<OwnedFd>, CopyError> {
    let Some(dir) = &pair.dst else {
        return Ok(None);
    };
    match sys::mkdirat(dir.as_fd(), STAGE, 0o700) {
        Ok(()) => {}
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {}
        Err(err) => return Err(CopyError::io(Op::CreateDir, pair.dst_of(STAGE), err)),
    }
    sys::open_dir(dir.as_fd(), STAGE, false)
        .map(Some)
        .map_err(|err| CopyError::io(Op::OpenDir, pair.dst_of(STAGE), err))
}

fn rename(
    dir: BorrowedFd<'_>,
    from: &CStr,
    to: &CStr,
    path: impl Fn() -> PathBuf,
) -> Result<(), CopyError> {
    rustix::fs::renameat(dir, from, dir, to).map_err(|e| CopyError::io(Op::Rename, path(), e))
}

/// Clears the way for a new entry where a directory stands (the new entry is not one): rsync
/// deletes it with its contents under `--force` or a deletion mode (what the receiver's
/// filters protect stays), and only an empty one otherwise; a directory that stays is
/// rsync's "cannot delete non-empty directory" (stdout) and "could not make way" (the
/// entry fails). Under -n the same is judged without deleting, so a dry run fails where the
/// real run fails. Other entries are replaced by the rename itself; with `-b` they are
/// backed up first.
fn make_room(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    dst: Option<&Stat>,
    lines: &mut Vec<u8>,
) -> Result<(), CopyError> {
    let Some(d) = dst else { return Ok(()) };
    let Some(dir) = &pair.dst else { return Ok(()) };
    let dir = dir.as_fd();
    if d.kind() == Kind::Dir {
        let recurse = run.plan.force || run.plan.delete.is_some();
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
        let gone = if recurse {
            // rsync names what it deletes to make room, but not the directory itself.
            let how = Removal {
                filtered: true,
                named: false,
                nested: false,
            };
            let mut scratch = Scratch {
                buf: &mut buf,
                lines,
            };
            remove_tree(run, pair, dest_entry(dir, e), &mut scratch, how)?
        } else {
            let removed = if run.plan.dry_run {
                let sub = sys::open_dir(dir, &e.dst_name, false);
                let mut empty = true;
                let read = sub.and_then(|sub| {
                    sys::read_dir_entries(sub.as_fd(), &mut buf, |_, _| empty = false)
                });
                read.map(|()| empty)
            } else {
                match rustix::fs::unlinkat(dir, &*e.dst_name, AtFlags::REMOVEDIR) {
                    Ok(()) => Ok(true),
                    Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => Ok(false),
                    Err(err) => Err(err.into()),
                }
            };
            let removed =
                removed.map_err(|err| CopyError::io(Op::Remove, pair.dst_of(&e.dst_name), err))?;
            if !removed && !run.out.quiet {
                cannot_delete(lines, &e.rel);
            }
            removed
        };
        if !gone {
            let what = match e.stat.kind() {
                Kind::Symlink => "symlink",
                Kind::Special
                    if matches!(e.stat.mode & libc::S_IFMT, libc::S_IFCHR | libc::S_IFBLK) =>
                {
                    "device file"
                }
                Kind::Special => "special file",
                _ => "regular file",
            };
            return Err(CopyError::Refused(format!(
                "could not make way for new {what}: {}",
                String::from_utf8_lossy(&e.rel)
            )));
        }
        return Ok(());
    }
    backup(run, pair, dest_entry(dir, e), d, lines)
}

/// The destination entry of `e` in its directory `dir`.
fn dest_entry<'a>(dir: BorrowedFd<'a>, e: &'a SrcEntry) -> DestEntry<'a> {
    DestEntry {
        dir,
        name: &e.dst_name,
        rel: &e.rel,
    }
}

/// `-b`: the existing `file` (not a directory) is kept as rsync keeps it before it is
/// replaced or deleted: `name` + `--suffix` beside it, or under `--backup-dir`, hard-linked
/// so the old file stays readable under its name until the rename replaces it
/// ([`backup::keep`] holds the rules).
fn backup(
    run: &Run<'_>,
    pair: &Pair<'_>,
    file: DestEntry<'_>,
    d: &Stat,
    lines: &mut Vec<u8>,
) -> Result<(), CopyError> {
    let Some(b) = &run.plan.backup else {
        return Ok(());
    };
    if d.kind() == Kind::Dir {
        return Ok(());
    }
    let place = match &b.dir {
        None => backup::Place::Beside,
        Some(root) => backup::Place::Tree {
            anchor: pair.anchor.as_ref().map(|a| a.as_fd()),
            root,
        },
    };
    let aside = backup::Aside {
        suffix: &b.suffix,
        place,
        how: backup::Move::Link,
    };
    let to = backup::keep(&aside, file, || pair.dst_of(file.name))?;
    backed_up(run, file.rel, &to, lines);
    Ok(())
}

/// `-T`: the temporaries' directory, open, and its device, once DEST is there. A relative one
/// is DEST's own (reached below DEST's root without following a symlink). One that is missing
/// or not a directory ends the run as rsync's receiver ends it (said, exit 1: `Err`); one the
/// walk below DEST refuses (a symlink planted on its way) is said and not used.
pub(super) fn open_temp_dir(run: &Run<'_>) -> Result<Option<(OwnedFd, u64)>, ()> {
    let plan = run.plan;
    let Some(given) = plan.temp_dir.as_ref() else {
        return Ok(None);
    };
    let dest = CString::new(plan.dest.as_os_str().as_bytes()).map_err(|_| ())?;
    let opened = sys::open_dir(rustix::fs::CWD, &dest, true)
        .and_then(|base| beneath::open_root(base.as_fd(), given, false));
    let shown = given.display();
    match opened {
        Ok(fd) => Ok(sys::fstatx(fd.as_fd()).ok().map(|st| (fd, st.dev))),
        // A dry run made no DEST to look in.
        Err(_) if plan.dry_run && given.is_relative() => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            run.out
                .error(&format!("The temp-dir does not exist: {shown}"));
            Err(())
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            run.out
                .error(&format!("The temp-dir is not a directory: {shown}"));
            Err(())
        }
        Err(e) => {
            run.out.error(&format!(
                "the temp-dir {shown} is not used (temporaries go beside their files): {}",
                crate::error::reason(&e)
            ));
            Ok(None)
        }
    }
}

/// `--info=backup`'s line.
fn backed_up(run: &Run<'_>, rel: &[u8], to: &[u8], lines: &mut Vec<u8>) {
    if run.out.backups {
        lines.extend_from_slice(b"backed up ");
        lines.extend_from_slice(rel);
        lines.extend_from_slice(b" to ");
        lines.extend_from_slice(to);
        lines.push(b'\n');
    }
}

/// Makes (or remakes) the entry: a directory, a file's data, a symlink, a special file.
/// Returns the item to report (`None`: nothing done, already reported).
pub(super) fn make(
    run: &Run<'_>,
    mover: &mut Mover,
    pair: &Pair<'_>,
    e: &SrcEntry,
    dst: Option<&Stat>,
    decision: Verdict,
    lines: &mut Vec<u8>,
) -> Result<Option<Item>, CopyError> {
    let plan = run.plan;
    let kind = e.stat.kind();
    let replaced = decision == Verdict::Replace;
    // A symlink or device that changed value is not new; an entry of another type is.
    let fresh = dst.is_none_or(|d| d.kind() != kind);
    let action = if kind == Kind::File {
        Action::Transfer
    } else {
        Action::LocalChange
    };
    let mut item = Item::new(action, &e.stat, &e.rel);
    item.times_kept = plan.times;
    item.new = fresh;
    if let (Some(d), false) = (dst, fresh) {
        let want = wanted(run, &e.stat, Some(d));
        item.attrs = rules::attr_changes(&run.rules, &want, d, run.window_ns);
        if kind == Kind::File {
            item.size = d.size != e.stat.size;
            item.changed = plan.quick == QuickCheck::Checksum;
            if !plan.times {
                item.attrs.time = true;
            }
        }
    }
    if kind == Kind::Symlink {
        item.link = link_text(pair, e);
        if !fresh {
            item.changed = true;
        }
    }
    if kind == Kind::Special && !fresh {
        item.changed = true;
    }
    if fresh {
        run.stats.created.add(kind);
    }
    if kind == Kind::File {
        run.stats.transferred.fetch_add(1, Ordering::Relaxed);
        run.stats
            .transferred_size
            .fetch_add(e.stat.size, Ordering::Relaxed);
    }
    if plan.dry_run {
        // What a real run deletes to make room (a directory in the way), it names, and where
        // it cannot, it fails as the real run does.
        let in_the_way = dst.filter(|d| d.kind() == Kind::Dir && kind != Kind::Dir);
        if in_the_way.is_some() {
            make_room(run, pair, e, in_the_way, lines)?;
        }
        return Ok(Some(item));
    }
    let Some(dir) = &pair.dst else {
        return Ok(Some(item));
    };
    let dir = dir.as_fd();
    let path = || pair.dst_of(&e.dst_name);
    match kind {
        Kind::Dir => {
            if let Some(d) = dst {
                if d.kind() == Kind::Dir {
                    return Ok(Some(item));
                }
                backup(run, pair, dest_entry(dir, e), d, lines)?;
                sys::unlinkat(dir, &e.dst_name)
                    .map_err(|err| CopyError::io(Op::Remove, path(), err))?;
            }
            let mode = (e.stat.perm() & 0o777) | 0o700;
            sys::mkdirat(dir, &e.dst_name, mode)
                .map_err(|err| CopyError::io(Op::CreateDir, path(), err))?;
        }
        Kind::File => {
            if !write_file(run, mover, pair, e, (dst, replaced), None, lines)? {
                return Ok(None);
            }
        }
        Kind::Symlink | Kind::Special => {
            let tmp = temp::name(&e.dst_name);
            if kind == Kind::Symlink {
                let target = sys::readlinkat(pair.src(e), &e.name, e.stat.size)
                    .map_err(|err| CopyError::io(Op::ReadLink, pair.src_of(e), err))?;
                let target =
                    CString::new(target).map_err(|_| CopyError::Refused("bad link".into()))?;
                sys::symlinkat(&target, dir, &tmp)
                    .map_err(|err| CopyError::io(Op::CreateSymlink, path(), err))?;
            } else if plan.fake_super {
                // A device or FIFO is an empty file; what it is, user.rsync.%stat says.
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
                let fd = sys::openat(dir, &tmp, flags | libc::O_CLOEXEC, 0o600)
                    .map_err(|err| CopyError::io(Op::CreateSpecial, path(), err))?;
                let want = wanted(run, &e.stat, None);
                let real =
                    sys::fstatx(fd.as_fd()).map_err(|err| CopyError::io(Op::Stat, path(), err))?;
                super::fake::write(Subject::Fd(fd.as_fd()), &want, &real)
                    .map_err(|err| CopyError::io(Op::SetXattr, path(), err))?;
            } else {
                let mode = (e.stat.mode & libc::S_IFMT) | (e.stat.perm() & 0o777);
                sys::mknodat(dir, &tmp, mode, e.stat.rdev)
                    .map_err(|err| CopyError::io(Op::CreateSpecial, path(), err))?;
            }
            let finish = special_attrs(run, pair, e, (dir, &tmp))
                .and_then(|()| make_room(run, pair, e, dst, lines))
                .and_then(|()| rename(dir, &tmp, &e.dst_name, path));
            if let Err(err) = finish {
                let _ = sys::unlinkat(dir, &tmp);
                return Err(err);
            }
        }
    }
    Ok(Some(item))
}

/// Writes a file's data: to a temporary renamed over the old file, or (`--inplace`) into the
/// file itself. False when the source vanished (reported). With `--hash`, the bytes are
/// hashed on their way, and the file recorded once in place.
pub(super) fn write_file(
    run: &Run<'_>,
    mover: &mut Mover,
    pair: &Pair<'_>,
    e: &SrcEntry,
    existing: (Option<&Stat>, bool),
    basis: Option<BorrowedFd<'_>>,
    lines: &mut Vec<u8>,
) -> Result<bool, CopyError> {
    let Some(recorder) = &run.recorder else {
        return write_data(run, pair, e, existing, basis, (mover, None), lines);
    };
    let hash = FileHash::new(recorder.algo());
    let written = write_data(run, pair, e, existing, basis, (mover, Some(&hash)), lines)?;
    if written {
        match hash.finish_in_order() {
            Ok((hex, len)) => recorder.file(
                &pair.dst_of(&e.dst_name),
                &Stat {
                    size: len,
                    ..e.stat
                },
                hex,
            ),
            Err(err) => run.fail(CopyError::io(Op::Read, pair.src_of(e), err)),
        }
    }
    Ok(written)
}

/// [`write_file`]'s work, feeding `hash`.
fn write_data(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (dst, replaced): (Option<&Stat>, bool),
    basis: Option<BorrowedFd<'_>>,
    (mover, hash): (&mut Mover, Option<&FileHash>),
    lines: &mut Vec<u8>,
) -> Result<bool, CopyError> {
    let plan = run.plan;
    let Some(dir) = &pair.dst else {
        return Ok(true);
    };
    let dir = dir.as_fd();
    let path = || pair.dst_of(&e.dst_name);
    let src = match open_src(run, pair, e) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
            run.vanished(&pair.src_of(e));
            return Ok(false);
        }
        Err(err) => return Err(CopyError::io(Op::Open, pair.src_of(e), err)),
    };
    let existing = dst.filter(|d| d.kind() == Kind::File && !replaced);
    let want = wanted(run, &e.stat, existing);
    // `--copy-dest`: the bytes come from an identical file there; the rest from the source.
    let data = basis.unwrap_or(src.as_fd());
    // --inplace with -b goes the temporary's way: the backup keeps the old inode.
    if plan.inplace && plan.backup.is_none() && existing.is_some() {
        return write_in_place(run, pair, e, (src.as_fd(), &want), (mover, hash)).map(|()| true);
    }
    if plan.delay_updates {
        return delay(
            run,
            pair,
            e,
            (dst, existing),
            (src.as_fd(), data, &want),
            (mover, hash),
            lines,
        );
    }
    let (mode, chmod) = creation(pair, &e.stat, existing, &want);
    let want = &keep_mode(&want, chmod);
    // Nothing to replace: the file is made without a name and named once complete.
    let unnamed = dst.is_none() && run.temp_dir.is_none();
    if unnamed && !run.no_tmpfile.load(Ordering::Relaxed) {
        let made = write_unnamed(
            (run, mover, pair, e),
            (src.as_fd(), data),
            (mode, want),
            hash,
            &path,
        )?;
        if made {
            return Ok(true);
        }
    }
    let mut tmp = temp::name(&e.dst_name);
    // -T: the temporary is written there when a rename can bring it over.
    let here_dev = || sys::fstatx(dir).map(|s| s.dev).ok();
    let tmp_dir = match &run.temp_dir {
        Some((fd, dev)) if Some(*dev) == here_dev() => fd.as_fd(),
        _ => dir,
    };
    let fd = temp::create(tmp_dir, &mut tmp, mode)
        .map_err(|err| CopyError::io(Op::Create, path(), err))?;
    let written = (|| {
        write_bytes(
            mover,
            pair,
            (src.as_fd(), data, fd.as_fd()),
            false,
            e,
            hash,
            &path,
        )?;
        file_attrs(
            run,
            (src.as_fd(), fd.as_fd()),
            want,
            &e.stat,
            &path,
            Some(pair),
        )?;
        make_room(run, pair, e, dst, lines)?;
        rustix::fs::renameat(tmp_dir, &tmp, dir, &*e.dst_name)
            .map_err(|err| CopyError::io(Op::Rename, path(), err))
    })();
    let closed = sys::close(fd);
    if let Err(err) = written {
        let _ = sys::unlinkat(tmp_dir, &tmp);
        return Err(err);
    }
    closed.map_err(|err| CopyError::io(Op::Close, path(), err))?;
    Ok(true)
}

/// A file made without a name (O_TMPFILE) in the pair's destination directory, written,
/// given its attributes and then named: nothing was there to replace. `Ok(false)`: not made
/// so (no unnamed files here, or its name taken meanwhile), for the named temporary's way.
fn write_unnamed(
    (run, mover, pair, e): (&Run<'_>, &mut Mover, &Pair<'_>, &SrcEntry),
    (src, data): (BorrowedFd<'_>, BorrowedFd<'_>),
    (mode, want): (u32, &Stat),
    hash: Option<&FileHash>,
    path: &dyn Fn() -> PathBuf,
) -> Result<bool, CopyError> {
    let Some(dir) = &pair.dst else {
        return Ok(false);
    };
    let dir = dir.as_fd();
    let new = match temp::Unnamed::create(dir, mode) {
        Ok(Some(new)) => new,
        Ok(None) => {
            run.no_tmpfile.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        Err(err) => return Err(CopyError::io(Op::Create, path(), err)),
    };
    write_bytes(
        mover,
        pair,
        (src, data, new.fd.as_fd()),
        false,
        e,
        hash,
        path,
    )?;
    file_attrs(run, (src, new.fd.as_fd()), want, &e.stat, path, Some(pair))?;
    match new.link(dir, &e.dst_name) {
        Ok(()) => sys::close(new.fd)
            .map(|()| true)
            .map_err(|err| CopyError::io(Op::Close, path(), err)),
        // Made meanwhile: the named temporary's way replaces it.
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) => Ok(false),
        // No way to link a descriptor here (a kernel before 6.10 without /proc): named
        // temporaries from now on.
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
            run.no_tmpfile.store(true, Ordering::Relaxed);
            Ok(false)
        }
        Err(err) => Err(CopyError::io(Op::Create, path(), err)),
    }
}

/// `--inplace`: the data written into the existing file itself (the source's holes punched
/// in it under `-S`), cut to the source's size, and given its attributes.
fn write_in_place(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (src, want): (BorrowedFd<'_>, &Stat),
    (mover, hash): (&mut Mover, Option<&FileHash>),
) -> Result<(), CopyError> {
    let path = || pair.dst_of(&e.dst_name);
    let Some(dir) = &pair.dst else {
        return Ok(());
    };
    let flags = libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let fd = sys::openat(dir.as_fd(), &e.dst_name, flags, 0)
        .map_err(|err| CopyError::io(Op::Open, path(), err))?;
    write_bytes(mover, pair, (src, src, fd.as_fd()), true, e, hash, &path)?;
    rustix::fs::ftruncate(&fd, e.stat.size).map_err(|err| CopyError::io(Op::Write, path(), err))?;
    file_attrs(run, (src, fd.as_fd()), want, &e.stat, &path, None)?;
    sys::close(fd).map_err(|err| CopyError::io(Op::Close, path(), err))
}

/// `--delay-updates`: the file is written into the directory's `.~tmp~` under its own name
/// (replacing a stale one there) and renamed into place by [`finish_delayed`].
fn delay(
    run: &Run<'_>,
    pair: &Pair<'_>,
    e: &SrcEntry,
    (dst, existing): (Option<&Stat>, Option<&Stat>),
    (src, data, want): (BorrowedFd<'_>, BorrowedFd<'_>, &Stat),
    (mover, hash): (&mut Mover, Option<&FileHash>),
    lines: &mut Vec<u8>,
) -> Result<bool, CopyError> {
    let (mode, chmod) = creation(pair, &e.stat, existing, want);
    let want = &keep_mode(want, chmod);
    let Some(anchor) = pair.anchor.clone() else {
        return Ok(true);
    };
    let path = || pair.dst_of(&e.dst_name);
    let Some(stage) = open_stage(pair)? else {
        return Ok(true);
    };
    let _ = sys::unlinkat(stage.as_fd(), &e.dst_name);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = sys::openat(stage.as_fd(), &e.dst_name, flags, mode)
        .map_err(|err| CopyError::io(Op::Create, path(), err))?;
    let written = (|| {
        write_bytes(mover, pair, (src, data, fd.as_fd()), false, e, hash, &path)?;
        file_attrs(run, (src, fd.as_fd()), want, &e.stat, &path, Some(pair))?;
        make_room(run, pair, e, dst, lines)
    })();
    let closed = sys::close(fd);
    if let Err(err) = written {
        let _ = sys::unlinkat(stage.as_fd(), &e.dst_name);
        return Err(err);
    }
    closed.map_err(|err| CopyError::io(Op::Close, path(), err))?;
    // The first name of a hard-linked group: its later names are linked to this copy.
    if run.plan.hard_links && e.stat.nlink > 1 {
        let mut staged = join(&pair.dst_rel, STAGE.to_bytes());
        staged.push(b'/');
        staged.extend_from_slice(e.dst_name.to_bytes());
        let mine = run.links.get((e.stat.dev, e.stat.ino)).filter(|l| {
            l.anchor.as_ref().is_some_and(|a| Arc::ptr_eq(a, &anchor))
                && l.path.as_bytes() == join(&pair.dst_rel, e.dst_name.to_bytes())
        });
        if let (Some(l), Ok(staged)) = (mine, CString::new(staged)) {
            let _ = l.staged.set(staged);
        }
    }
    run.delayed.lock().expect("delayed").push(Delayed {
        anchor,
        dir: pair.dst_rel.clone(),
        name: e.dst_name.to_owned(),
        times: pair.kept_times().filter(|_| pair.keeps_attrs),
    });
    Ok(true)
}

/// `--delay-updates`, at the end of the transfer: every waiting file renamed into place, and
/// each `.~tmp~` removed once empty. The directories are reopened below the destination root
/// without following any symlink.
pub(super) fn finish_delayed(run: &Run<'_>) {
    let delayed = std::mem::take(&mut *run.delayed.lock().expect("delayed"));
    // The directories whose entries moved, with the times to put back once all are placed
    // (as rsync's `touch_up_dirs` does after the receiver placed the delayed files).
    let mut touched = HashMap::new();
    let open = |anchor: &Arc<OwnedFd>, rel: &[u8]| {
        if rel.is_empty() {
            anchor.try_clone()
        } else {
            let rel = std::path::Path::new(OsStr::from_bytes(rel));
            beneath::open_dirs(anchor.as_fd(), rel, Walk::Existing)
        }
    };
    for d in delayed {
        let placed = open(&d.anchor, &d.dir).and_then(|dir| {
            let stage = sys::open_dir(dir.as_fd(), STAGE, false)?;
            rustix::fs::renameat(stage.as_fd(), &d.name, dir.as_fd(), &d.name)?;
            // Gone once its last file is placed (a stale one left there keeps it).
            let _ = rustix::fs::unlinkat(dir.as_fd(), STAGE, AtFlags::REMOVEDIR);
            Ok(())
        });
        if let Err(err) = placed {
            let path = run.plan.dest.join(OsStr::from_bytes(&d.dir));
            run.fail(CopyError::io(Op::Rename, path.join(os(&d.name)), err));
        } else if let Some(times) = d.times {
            let key = (Arc::as_ptr(&d.anchor) as usize, d.dir);
            touched.insert(key, (d.anchor, times));
        }
    }
    for ((_, rel), (anchor, (atime, mtime))) in touched {
        let set = open(&anchor, &rel).and_then(|dir| sys::futimens(dir.as_fd(), atime, mtime));
        if let Err(err) = set {
            let path = run.plan.dest.join(OsStr::from_bytes(&rel));
            run.fail(CopyError::io(Op::SetTimes, path, err));
        }
    }
}

/// Files up to this size are copied through a buffer: one pread and one pwrite cost less than
/// a copy_file_range (measured: 76 against 97 µs for 32 KiB on ext4), and sharing extents
/// saves nothing worth having at this size. cp's small-file threshold, for the same reason.
const SMALL_FILE: u64 = 64 * 1024;

/// Big files' buffer (plain reads and writes, and every byte of a hashed file).
const BLOCK: usize = 1 << 20;

/// Sync stops between entries (a signal ends the run at the next one), never inside a file's
/// copy: a file is written whole or not at all.
struct BetweenEntries;

impl Stop for BetweenEntries {
    fn stopped(&self) -> bool {
        false
    }
}

/// One sync worker's means of moving bytes, made once for the run and owned by the worker
/// (never shared, never keyed by anything): cp's data path, with its buffer and the device
/// pairs where copy_file_range was refused kept from file to file.
pub(super) struct Mover {
    data: DataPath,
}

impl Mover {
    /// The data path of `run`: holes kept under `-S`, every byte through the hash under
    /// `--hash`.
    pub(super) fn new(run: &Run<'_>) -> Self {
        let (holes, hashing) = (run.plan.sparse, run.recorder.is_some());
        Mover {
            data: DataPath::for_whole_files(holes, hashing, BLOCK, SMALL_FILE + 1),
        }
    }
}

/// Copies the file's bytes from `data` (the source `source`, or a `--copy-dest` basis with its
/// bytes) to `dst` through cp's data path, up to the size the listing saw (a file that changes
/// meanwhile has a new mtime, which the next run sees): copy_file_range (which shares extents
/// where the filesystem can), plain reads and writes for small files and where it refuses;
/// under `-S` only the data extents, so holes stay holes (and are punched in a file that
/// `holds_data`, `--inplace`), and the file is given the listing's length.
///
/// With `hash`, every byte goes through a buffer and into the hash on its way, holes as zeros;
/// a source that changed while it was read fails the file, so the manifest never holds a hash
/// of bytes from two versions of it.
fn write_bytes(
    mover: &mut Mover,
    pair: &Pair<'_>,
    (source, data, dst): (BorrowedFd<'_>, BorrowedFd<'_>, BorrowedFd<'_>),
    holds_data: bool,
    e: &SrcEntry,
    hash: Option<&FileHash>,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), CopyError> {
    let size = e.stat.size;
    let sparse = pair.run.plan.sparse;
    let ends = Ends {
        src: data,
        dst,
        devs: (e.stat.dev, pair.dst_stat.map_or(0, |d| d.dev)),
        punch_holes: holds_data,
    };
    let copied = mover
        .data
        .copy_span(&BetweenEntries, ends, 0, size, &e.stat, hash);
    let copied = copied.map_err(|side| match side {
        DataSide::Read(err) => CopyError::io(Op::Read, path(), err),
        DataSide::Write(err) | DataSide::Clone(err) => CopyError::io(Op::Write, path(), err),
    })?;
    if sparse {
        rustix::fs::ftruncate(dst, size).map_err(|err| CopyError::io(Op::Write, path(), err))?;
        // The file shrank while it was read: past its end, the old bytes read as zeros too.
        if holds_data && copied < size {
            punch_hole(dst, copied, size - copied)
                .map_err(|err| CopyError::io(Op::Write, path(), err))?;
        }
    }
    if hash.is_some() {
        // The source itself, whatever the bytes came from (a `--copy-dest` basis).
        if let Err(why) = crate::opened::held_still(source, &e.stat) {
            return Err(CopyError::Refused(format!(
                "{} changed while it was copied ({why}): not written, and left out of the \
                 manifest",
                crate::quote::quote(&path())
            )));
        }
    }
    Ok(())
}

/// `--hash`: a regular file this run left in DEST without writing it (up to date, skipped,
/// linked, taken from a `--*-dest` tree) is read there and recorded, so the manifest covers
/// every file of the transfer as DEST holds it. Nothing there (`--existing`): nothing recorded.
pub(super) fn record_existing(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) {
    let (Some(recorder), Some(dir)) = (&run.recorder, &pair.dst) else {
        return;
    };
    if e.stat.kind() != Kind::File || run.plan.dry_run {
        return;
    }
    let path = pair.dst_of(&e.dst_name);
    if let Err(err) = recorder.existing((dir.as_fd(), &e.dst_name, &path), Some(&e.stat)) {
        run.fail(CopyError::io(Op::Read, path, err));
    }
}

/// `--hash`: the listing of everything DEST holds after the run (the files this run did not
/// meet, such as those the source lacks, read there too), and the run's exit code; a file of
/// DEST that cannot be read is an error (code 23), and then no listing.
pub(super) fn manifest_of_dest(
    recorder: crate::manifest::Recorder,
    plan: &super::SyncPlan,
    out: &super::Output,
    code: i32,
) -> (Option<crate::manifest::Listing>, i32) {
    let hashing = plan.hashing.as_ref();
    // DEST is the root (not a directory holding the one file synced to a new name).
    if hashing.is_some_and(|h| h.base == plan.dest) {
        if let Err((path, e)) = recorder.cover_tree(hashing.and_then(|h| h.manifest.as_deref())) {
            let e = CopyError::io(Op::Read, path, e);
            out.error(&e.to_string());
            return (None, if code == 0 { 23 } else { code });
        }
    }
    (Some(recorder.listing()), code)
}

/// `-m`: whether anything but directories would be transferred from the source directory
/// `e` or below it (filters applied, as the walk would apply them); what cannot be read counts
/// as holding files, so that the walk reaches it and reports it.
pub(super) fn holds_files(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) -> bool {
    let follow = run.plan.symlinks == Symlinks::Follow;
    let Ok(fd) = sys::open_dir(pair.src(e), &e.name, follow) else {
        return true;
    };
    let Ok(scope) = pair.layers[e.layer].scope.enter(fd.as_fd(), &e.rel) else {
        return true;
    };
    holds_files_in(run, fd.as_fd(), &scope, &e.rel)
}

fn holds_files_in(
    run: &Run<'_>,
    dir: BorrowedFd<'_>,
    scope: &super::filter::Scope,
    rel: &[u8],
) -> bool {
    let plan = run.plan;
    let follow = plan.symlinks == Symlinks::Follow;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut names = Vec::new();
    if sys::read_dir_entries(dir, &mut buf, |n, _| names.push(n.to_owned())).is_err() {
        return true;
    }
    for name in names {
        // What cannot be read counts as holding files: the walk then goes there and reports
        // it (a source error, which stops deletion), as rsync's sender does; a vanished entry
        // holds nothing.
        let stat = match sys::statx_at(dir, &name, follow) {
            Ok(stat) => stat,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(_) => return true,
        };
        let child = join(rel, name.to_bytes());
        let is_dir = stat.kind() == Kind::Dir;
        if scope.excluded(&child, is_dir, Side::Sender) {
            continue;
        }
        let transferred = match stat.kind() {
            Kind::Dir => {
                let Ok(fd) = sys::open_dir(dir, &name, follow) else {
                    return true;
                };
                let Ok(inner) = scope.enter(fd.as_fd(), &child) else {
                    return true;
                };
                holds_files_in(run, fd.as_fd(), &inner, &child)
            }
            Kind::File => true,
            Kind::Symlink => plan.symlinks != Symlinks::Skip,
            Kind::Special => plan.devices || plan.specials,
        };
        if transferred {
            return true;
        }
    }
    false
}

/// `--remove-source-files`: a file now synced is removed from the source, unless it changed
/// meanwhile.
pub(super) fn remove_source(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) {
    if run.plan.dry_run {
        return;
    }
    // The source and its copy are one file (SRC given as DEST): removing it would lose it.
    let copy = pair
        .dst
        .as_ref()
        .and_then(|d| sys::statx_at(d.as_fd(), &e.dst_name, false).ok());
    if copy.is_some_and(|c| c.dev == e.stat.dev && c.ino == e.stat.ino) {
        run.fail(CopyError::Refused(format!(
            "ERROR: Skipping sender remove of destination file: {}",
            String::from_utf8_lossy(&e.rel)
        )));
        return;
    }
    match sys::statx_at(pair.src(e), &e.name, false) {
        Ok(now)
            if now.size == e.stat.size && now.mtime == e.stat.mtime && now.ino == e.stat.ino =>
        {
            if let Err(err) = sys::unlinkat(pair.src(e), &e.name) {
                run.fail(CopyError::io(Op::Remove, pair.src_of(e), err));
            }
        }
        Ok(_) => run.out.error(&format!(
            "not removing {}: it changed while it was synced",
            crate::quote::quote_path(&pair.src_of(e))
        )),
        Err(_) => {}
    }
}

/// The names a destination directory holds beyond the source's (`kept`, after filters), each
/// with whether it is a directory, in the order their deletions are made (rsync's order,
/// reversed). Read before any of the directory's entries is made: the stale temporaries of
/// an interrupted run are removed on the way (not under -n) and never listed, and so is the
/// `--delay-updates` staging directory where the entries will be made while the names wait
/// (`keep_stage`). Under -x a directory on another filesystem (a mount point synced into)
/// keeps what it holds, as rsync's receiver keeps it: nothing is listed.
pub(super) fn extraneous(
    run: &Run<'_>,
    pair: &Pair<'_>,
    (dir, keep_stage): (BorrowedFd<'_>, bool),
    kept: &dyn Fn(&[u8]) -> bool,
    buf: &mut [MaybeUninit<u8>],
) -> Result<Vec<(bool, CString)>, CopyError> {
    let root_dev = || {
        pair.anchor
            .as_ref()
            .and_then(|a| sys::fstatx(a.as_fd()).ok())
    };
    if run.plan.one_file_system && !on_dev(dir, root_dev().map(|s| s.dev)) {
        return Ok(Vec::new());
    }
    let (mut names, mut ours) = (Vec::new(), Vec::new());
    sys::read_dir_entries(dir, buf, |name, kind| {
        let bytes = name.to_bytes();
        if temp::is_ours(bytes) {
            ours.push(name.to_owned());
        } else if !(kept(bytes) || keep_stage && name == STAGE) {
            // Where the directory does not say (DT_UNKNOWN), a statx does.
            let kind = kind.or_else(|| sys::statx_at(dir, name, false).ok().map(|s| s.kind()));
            names.push((kind == Some(Kind::Dir), name.to_owned()));
        }
    })
    .map_err(|e| CopyError::io(Op::ReadDir, pair.dst_path.clone(), e))?;
    if !run.plan.dry_run && !ours.is_empty() {
        pair.changing();
        for name in ours {
            let _ = temp::remove_stale(dir, &name);
        }
    }
    names.sort_unstable_by(|(a_dir, a), (b_dir, b)| {
        super::pair::rsync_order((*b_dir, b.to_bytes()), (*a_dir, a.to_bytes()))
    });
    Ok(names)
}

/// Deletes the `names` of the destination directory `dir` ([`extraneous`]'s, in its order),
/// except what a filter protects; says whether any went.
pub(super) fn delete_extraneous(
    run: &Run<'_>,
    pair: &Pair<'_>,
    dir: BorrowedFd<'_>,
    names: &[(bool, CString)],
    buf: &mut [MaybeUninit<u8>],
    lines: &mut Vec<u8>,
) -> bool {
    // Whether a source error stops it is the walk's to say, in its order (`walk::deletion`).
    let mut deleted = false;
    if !names.is_empty() {
        pair.changing();
    }
    let mut scratch = Scratch { buf, lines };
    for (_, name) in names {
        let rel = join(&pair.rel, name.to_bytes());
        let how = Removal {
            filtered: true,
            named: true,
            nested: false,
        };
        let at = DestEntry {
            dir,
            name,
            rel: &rel,
        };
        match remove_tree(run, pair, at, &mut scratch, how) {
            Ok(gone) => deleted |= gone,
            Err(err) => run.fail(err),
        }
    }
    deleted
}

/// `dir` is on the filesystem `dev` (`None`: unknown, so not).
fn on_dev(dir: BorrowedFd<'_>, dev: Option<u64>) -> bool {
    dev.is_some_and(|dev| sys::fstatx(dir).is_ok_and(|d| d.dev == dev))
}

/// rsync's note for a directory that stays because it is not empty.
fn cannot_delete(lines: &mut Vec<u8>, rel: &[u8]) {
    lines.extend_from_slice(b"cannot delete non-empty directory: ");
    lines.extend_from_slice(rel);
    lines.push(b'\n');
}

/// What a deletion carries down the tree: the buffer directories are read into and the
/// lines it says.
struct Scratch<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    lines: &'a mut Vec<u8>,
}

/// How [`remove_tree`] treats what it deletes.
#[derive(Clone, Copy)]
struct Removal {
    /// The receiver's filters are asked (what they protect stays).
    filtered: bool,
    /// The entry itself is itemized (its contents always are).
    named: bool,
    /// The entry is inside a directory being deleted.
    nested: bool,
}

/// Descriptors a deletion holds at most, one a level of the tree it deletes: deeper, an
/// ancestor's closes, and is opened again through its child's `..` (its identity checked) when
/// the deletion comes back up to it. Where the descriptor budget is roomy, three (so most
/// deletions never reopen anything); under a tight limit one, which with the one it opens next
/// fits the budget's room for a worker's file and its temporary, which it does not hold while
/// it deletes. So a tree of any depth is deleted under any limit the budget accepted, and
/// without recursion.
const REMOVAL_HELD: usize = 3;

/// A directory being deleted, on [`remove_tree`]'s stack.
struct Doomed {
    /// Its descriptor (`None` while closed for [`REMOVAL_HELD`]).
    fd: Option<OwnedFd>,
    /// Its name in its parent, the length of the deletion's path that names it from DEST, and
    /// its stat (its (dev, inode) is what a reopened descriptor must have).
    name: CString,
    len: usize,
    stat: Stat,
    /// Its entries not yet deleted (the last in name order is deleted first).
    names: Vec<CString>,
    /// It holds an entry that is not a directory.
    holds_files: bool,
    /// Every entry handled so far is gone.
    all_gone: bool,
    how: Removal,
}

/// What [`enter`] found at an entry to delete.
enum Found {
    /// Nothing there (gone meanwhile).
    Nothing,
    /// It stays: protected by a filter, or on another filesystem under -x.
    Kept,
    /// A non-directory, to delete.
    Leaf(Stat),
    /// A directory, opened and listed, to empty first.
    Dir(Doomed),
}

/// The path messages show for the entry `rel` (from DEST) of a deletion in `pair`.
fn shown(pair: &Pair<'_>, rel: &[u8]) -> PathBuf {
    let below = rel
        .strip_prefix(pair.rel.as_slice())
        .map(|r| r.strip_prefix(b"/").unwrap_or(r))
        .filter(|_| !pair.rel.is_empty())
        .unwrap_or(rel);
    pair.dst_path.join(OsStr::from_bytes(below))
}

/// Looks at the entry `at` a deletion reaches: what stays, what goes, and for a directory its
/// names (read now, with a descriptor that [`remove_tree`] holds while it empties it).
fn enter(
    run: &Run<'_>,
    pair: &Pair<'_>,
    at: DestEntry<'_>,
    buf: &mut [MaybeUninit<u8>],
    how: Removal,
) -> Result<Found, CopyError> {
    let DestEntry { dir, name, rel } = at;
    let stat = match sys::statx_at(dir, name, false) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Found::Nothing),
        Err(e) => return Err(CopyError::io(Op::Stat, shown(pair, rel), e)),
    };
    let is_dir = stat.kind() == Kind::Dir;
    // -x: what is on another filesystem (what is mounted inside DEST) is never deleted, and
    // so neither is the directory holding it (rsync says it cannot delete it).
    if run.plan.one_file_system && !on_dev(dir, Some(stat.dev)) {
        return Ok(Found::Kept);
    }
    if how.filtered {
        // Inside a directory being deleted, rsync leaves perishable rules out.
        let protected = match &pair.dst_scope {
            None => true,
            Some(scope) if how.nested => scope.excluded_in_deleted_dir(rel, is_dir),
            Some(scope) => scope.excluded(rel, is_dir, Side::Receiver),
        };
        if protected {
            return Ok(Found::Kept);
        }
    }
    if !is_dir {
        return Ok(Found::Leaf(stat));
    }
    let path = || shown(pair, rel);
    let sub = sys::open_dir(dir, name, false).map_err(|e| CopyError::io(Op::OpenDir, path(), e))?;
    let now = sys::fstatx(sub.as_fd()).map_err(|e| CopyError::io(Op::Stat, path(), e))?;
    if !now.same_file(&stat) {
        return Err(CopyError::Refused(format!(
            "not deleting {}: it was replaced while it was deleted",
            crate::quote::quote_path(&path())
        )));
    }
    let mut names = Vec::new();
    let mut holds_files = false;
    sys::read_dir_entries(sub.as_fd(), buf, |n, kind| {
        holds_files |= kind != Some(Kind::Dir);
        names.push(n.to_owned());
    })
    .map_err(|e| CopyError::io(Op::ReadDir, path(), e))?;
    names.sort();
    Ok(Found::Dir(Doomed {
        fd: Some(sub),
        name: name.to_owned(),
        len: rel.len(),
        stat,
        names,
        holds_files,
        all_gone: true,
        how,
    }))
}

/// Deletes the entry `name` of `dir` (a directory with its contents, deepest first), each
/// deletion counted against `--max-delete` and itemized; what the receiver's filters protect
/// stays, and so does the directory that holds it. A loop over a stack of the directories
/// being emptied, holding at most [`REMOVAL_HELD`] of their descriptors.
fn remove_tree(
    run: &Run<'_>,
    pair: &Pair<'_>,
    at: DestEntry<'_>,
    scratch: &mut Scratch<'_>,
    how: Removal,
) -> Result<bool, CopyError> {
    let mut stack = match enter(run, pair, at, scratch.buf, how)? {
        Found::Nothing => return Ok(true),
        Found::Kept => return Ok(false),
        Found::Leaf(stat) => return remove_one(run, pair, at, &stat, (true, false), scratch, how),
        Found::Dir(top) => vec![top],
    };
    let held_most = if run.budget.roomy { REMOVAL_HELD } else { 1 };
    // The path from DEST of what is being deleted: one buffer, each level a prefix of it.
    let mut rel = at.rel.to_vec();
    loop {
        let deepest = stack.last_mut().expect("a directory being emptied");
        if let Some(child) = deepest.names.pop() {
            rel.truncate(deepest.len);
            rel.push(b'/');
            rel.extend_from_slice(child.to_bytes());
            let inner = Removal {
                named: true,
                nested: true,
                ..deepest.how
            };
            let dir = deepest.fd.as_ref().expect("the deepest is open").as_fd();
            let at = DestEntry {
                dir,
                name: &child,
                rel: &rel,
            };
            match enter(run, pair, at, scratch.buf, inner)? {
                Found::Nothing => {}
                Found::Kept => deepest.all_gone = false,
                Found::Leaf(stat) => {
                    deepest.all_gone &=
                        remove_one(run, pair, at, &stat, (true, false), scratch, inner)?;
                }
                Found::Dir(sub) => {
                    stack.push(sub);
                    let held = stack.len();
                    if held > held_most {
                        stack[held - 1 - held_most].fd = None;
                    }
                }
            }
            continue;
        }
        // Emptied (or not): the directory itself, from its parent, opened again if it closed.
        let mut done = stack.pop().expect("a directory being emptied");
        let child = done.fd.take().expect("the deepest is open");
        rel.truncate(done.len);
        let parent = match stack.last_mut() {
            None => at.dir,
            Some(parent) => {
                if parent.fd.is_none() {
                    let id = (parent.stat.dev, parent.stat.ino);
                    let fd = beneath::reopen_parent(child.as_fd(), id).map_err(|e| {
                        CopyError::io(Op::OpenDir, shown(pair, &rel[..parent.len]), e)
                    })?;
                    parent.fd = Some(fd);
                }
                parent.fd.as_ref().expect("just opened").as_fd()
            }
        };
        drop(child);
        let at = DestEntry {
            dir: parent,
            name: &done.name,
            rel: &rel,
        };
        let state = (done.all_gone, done.holds_files);
        let gone = remove_one(run, pair, at, &done.stat, state, scratch, done.how)?;
        match stack.last_mut() {
            Some(parent) => parent.all_gone &= gone,
            None => return Ok(gone),
        }
    }
}

/// Deletes the entry `at` whose contents, if it is a directory, were handled: `all_gone` says
/// they all went, `holds_files` that it held a non-directory. Counted against `--max-delete`,
/// backed up under `-b`, itemized when `how` names it.
fn remove_one(
    run: &Run<'_>,
    pair: &Pair<'_>,
    at: DestEntry<'_>,
    stat: &Stat,
    (all_gone, holds_files): (bool, bool),
    scratch: &mut Scratch<'_>,
    how: Removal,
) -> Result<bool, CopyError> {
    let DestEntry { dir, name, rel } = at;
    let path = || shown(pair, rel);
    let is_dir = stat.kind() == Kind::Dir;
    if is_dir {
        // `-b` without --backup-dir keeps each deleted file's backup beside it: the directory
        // is left holding them, with rsync's note (so a dry run says what a real run does).
        let backups_beside = run.plan.backup.as_ref().is_some_and(|b| b.dir.is_none());
        let limited = run.deletions_skipped.load(Ordering::Relaxed) > 0;
        if !all_gone || (backups_beside && holds_files) {
            if !run.out.quiet && !limited {
                cannot_delete(scratch.lines, rel);
            }
            return Ok(false);
        }
    }
    if let Some(max) = run.plan.max_delete {
        if run.deletions.load(Ordering::Relaxed) >= max {
            run.deletions_skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
    }
    if !run.plan.dry_run {
        if is_dir {
            match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
                Ok(()) => {}
                // What it holds now was made meanwhile (a `-b` backup of its file): it stays,
                // as rsync leaves it, with a note.
                Err(rustix::io::Errno::NOTEMPTY) => {
                    if !run.out.quiet {
                        cannot_delete(scratch.lines, rel);
                    }
                    return Ok(false);
                }
                Err(e) => return Err(CopyError::io(Op::Remove, path(), e)),
            }
        } else {
            if run.plan.backup.is_some() {
                backup(run, pair, at, stat, scratch.lines)?;
            }
            sys::unlinkat(dir, name).map_err(|e| CopyError::io(Op::Remove, path(), e))?;
        }
    }
    run.deletions.fetch_add(1, Ordering::Relaxed);
    run.stats.deleted.add(stat.kind());
    if how.named {
        let item = Item::new(Action::Deleted, stat, rel);
        report(run, &item, stat, scratch.lines);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::unsafe_symlink;

    #[test]
    fn unsafe_symlinks_as_rsync_judges_them() {
        assert!(unsafe_symlink(b"/etc/passwd", 3));
        assert!(unsafe_symlink(b"..", 0));
        assert!(!unsafe_symlink(b"..", 1));
        assert!(unsafe_symlink(b"a/../b", 0));
        assert!(unsafe_symlink(b"a/../../b", 0));
        assert!(unsafe_symlink(b"a/a/a/../../../unsafe2", 1));
        assert!(unsafe_symlink(b"x/..", 3));
        assert!(!unsafe_symlink(b"../files/file1", 1));
        assert!(unsafe_symlink(b"../../unsafe/unsafefile", 1));
        assert!(!unsafe_symlink(b"../x", 2));
        assert!(unsafe_symlink(b"../../../x", 2));
        assert!(!unsafe_symlink(b"./x", 0));
    }
}
