//! cp's rules for an entry whose destination may already exist, as one pure function:
//! [`decide`] takes the run's [`Policy`] and what the statx calls said of the source and of the
//! destination, and returns a [`Decision`]. It makes no system call; the engines gather the
//! facts and carry the decision out (`engine/existing.rs`).
//!
//! Some facts cost a system call and matter only in rare cases (does a symlink lead to the
//! source, is the simple backup name the source itself, what does the user answer to `-i`). They
//! start unknown (`None`), and `decide` asks for the one it needs with [`Decision::Look`]; the
//! caller looks, fills it in and asks again. So an entry costs exactly the calls its case
//! needs, in the order cp makes them, and a test states every fact and never sees a `Look`.

mod same_file;
pub mod sync;
#[cfg(test)]
mod tests;

use std::ffi::CString;

use crate::plan::{Backup, BackupMode, Clobber, CopyPlan, Dereference, LinkMode, Overwrite};
use crate::sys::{Kind, Stat};
use sync::QuickCheck;

pub use crate::refusal::Refusal;
use same_file::SameFile;

/// The options that decide what happens to an existing destination, read once per run.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// `-n`, `-i`, `-u`, `--resume`.
    pub overwrite: Overwrite,
    /// `-f`: an existing destination that cannot be opened is removed (and a symlink loop).
    pub force: bool,
    /// `--remove-destination`.
    pub remove_destination: bool,
    /// `--backup`.
    pub backup: Option<Backup>,
    /// `-l`, `-s`.
    pub link: LinkMode,
    /// `-P`, `-L`, `-H`.
    pub dereference: Dereference,
    /// `--preserve=links`.
    pub preserve_links: bool,
    /// `--preserve=timestamps` (what `--resume` trusts an mtime for).
    pub preserve_timestamps: bool,
    /// `--attributes-only`.
    pub attributes_only: bool,
    /// `--atomic`.
    pub atomic: bool,
    /// A special file (FIFO, device) is read as data: cp without -r, or `--copy-contents`.
    pub special_as_data: bool,
    /// `POSIXLY_CORRECT` is set: data is written through a dangling symlink.
    pub posixly_correct: bool,
}

impl Policy {
    /// The policy of `plan` (with the environment as the plan read it).
    pub fn of(plan: &CopyPlan) -> Self {
        Policy {
            overwrite: plan.overwrite,
            force: plan.force,
            remove_destination: plan.remove_destination,
            backup: plan.backup.clone(),
            link: plan.link,
            dereference: plan.dereference,
            preserve_links: plan.preserve.links,
            preserve_timestamps: plan.preserve.timestamps,
            attributes_only: plan.attributes_only,
            atomic: plan.atomic,
            special_as_data: plan.special_as_data(),
            posixly_correct: plan.posixly_correct,
        }
    }

    /// `--resume`: a symlink or special file that the destination already has as the copy would
    /// make it (the same type, link text or device number, and, where times are kept, the mtime
    /// the copy sets last) is left as it is: no write, no `-v` line. `src_link` and `dst_link`
    /// are the link texts of symlinks.
    pub fn resume_keeps_made(
        &self,
        (src, src_link): (&Stat, Option<&[u8]>),
        (dst, dst_link): (&Stat, Option<&[u8]>),
    ) -> bool {
        if self.overwrite.resume().is_none()
            || self.remove_destination
            || self.backup.is_some()
            || self.link != LinkMode::Copy
            || src.kind() != dst.kind()
        {
            return false;
        }
        let same = match src.kind() {
            Kind::Symlink => src_link.is_some() && src_link == dst_link,
            Kind::Special => {
                src.rdev == dst.rdev && src.mode & libc::S_IFMT == dst.mode & libc::S_IFMT
            }
            _ => false,
        };
        same && (!self.preserve_timestamps || src.mtime == dst.mtime)
    }

    /// True when the source's bytes are written into the destination (a regular file, or a
    /// special file read as data), as opposed to the entry being recreated (symlinks, special
    /// files under -r) or linked (`-l`, `-s`).
    pub fn copies_as_data(&self, src: &Stat) -> bool {
        self.link == LinkMode::Copy
            && match src.kind() {
                Kind::File => true,
                Kind::Special => self.special_as_data,
                Kind::Dir | Kind::Symlink => false,
            }
    }

    /// True when a later name of a hard-link group replaces an existing entry with the link, as
    /// cp does (also under -u); not under -n or -i (but under `--resume`, whatever else).
    pub fn link_replaces(&self) -> bool {
        match self.overwrite {
            Overwrite::NoClobber => false,
            Overwrite::Clobber(_) => true,
            Overwrite::Interactive(clobber) => matches!(clobber, Clobber::Incomplete(_)),
        }
    }
}

/// What the walk knows of the source.
#[derive(Debug, Clone)]
pub(crate) struct SourceFacts<'n> {
    /// Its name in its directory.
    pub name: &'n [u8],
    /// Its statx, following a symlink where the copy follows it.
    pub stat: Stat,
    /// Asked for ([`Look::SourceEntry`]) when the copy follows symlinks and the destination is
    /// the same inode: the name's own statx, not followed (`None`: it failed).
    pub entry: Option<Option<Stat>>,
    /// Asked for ([`Look::SourceTarget`]) under -P when the source is a symlink: what it points
    /// to (`None`: dangling, a loop, or unreadable).
    pub target: Option<Option<Stat>>,
}

impl<'n> SourceFacts<'n> {
    /// The source `name`, stated as `stat`; nothing else looked at yet.
    pub fn new(name: &'n [u8], stat: Stat) -> Self {
        SourceFacts {
            name,
            stat,
            entry: None,
            target: None,
        }
    }
}

/// What a symlink at the destination leads to, looked at following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// This file.
    File(Stat),
    /// Nothing: the link dangles (ENOENT, ENOTDIR).
    Dangling,
    /// A loop of symlinks (ELOOP).
    Loop,
    /// The look failed otherwise (this errno).
    Unknown(i32),
}

impl Target {
    /// The file it leads to, if any.
    fn file(self) -> Option<Stat> {
        match self {
            Target::File(stat) => Some(stat),
            _ => None,
        }
    }
}

/// What is at the destination name.
#[derive(Debug, Clone)]
pub(crate) struct DestFacts<'n> {
    /// The destination's name in its directory.
    pub name: &'n [u8],
    /// Its statx, not followed.
    pub entry: Stat,
    /// An earlier operand of this run created it.
    pub just_created: bool,
    /// Asked for ([`Look::Target`]) when it is a symlink: where it leads.
    pub target: Option<Target>,
    /// Asked for ([`Look::SameDirectory`]) when the two names are equal: the destination's
    /// directory is the source's, so the two are one directory entry.
    pub same_directory: Option<bool>,
    /// Asked for ([`Look::BackupIsSource`]) when the simple backup name is the source's name:
    /// that name, in the destination's directory, is the source file.
    pub backup_is_source: Option<bool>,
    /// Asked for ([`Look::BackupName`]): the name it is backed up to (`NAME~`, `NAME.~N~`).
    pub backup_name: Option<CString>,
    /// Asked for ([`Look::Answer`]) under -i: the user's answer to "overwrite 'DST'?".
    pub answer: Option<bool>,
}

impl<'n> DestFacts<'n> {
    /// The destination `name`, stated (not followed) as `entry`.
    pub fn new(name: &'n [u8], entry: Stat, just_created: bool) -> Self {
        DestFacts {
            name,
            entry,
            just_created,
            target: None,
            same_directory: None,
            backup_is_source: None,
            backup_name: None,
            answer: None,
        }
    }
}

/// A fact [`decide`] needs before it can decide: the caller fills it in and asks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// [`DestFacts::target`]: statx of the destination, following symlinks.
    Target,
    /// [`SourceFacts::entry`]: statx of the source, not following symlinks.
    SourceEntry,
    /// [`SourceFacts::target`]: statx of the source, following symlinks.
    SourceTarget,
    /// [`DestFacts::same_directory`].
    SameDirectory,
    /// [`DestFacts::backup_is_source`].
    BackupIsSource,
    /// [`DestFacts::backup_name`].
    BackupName,
    /// [`DestFacts::answer`].
    Answer,
}

/// Why an entry is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// `-n`: the destination exists.
    NoClobber,
    /// `-u`: the destination is not older than the source.
    NotOlder,
    /// `--resume`: the destination is provably complete.
    Complete,
    /// `-i`: the user said no.
    Declined,
    /// `-l` (or `-P` onto a symlink to the same file): the destination already is the link
    /// that would be made.
    AlreadyLinked,
}

/// How an existing destination is opened and written as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriteOver {
    /// What is written: the file itself, or what a symlink there leads to (written through,
    /// same inode), or a FIFO or device that is written into. `None`: a dangling symlink
    /// written through under POSIXLY_CORRECT, which creates its target.
    pub target: Option<Stat>,
    /// The destination itself is a symlink.
    pub through_link: bool,
    /// `--resume`: a regular file of the source's size, kept if its content is already the
    /// source's.
    pub compare_first: bool,
}

/// What to do with an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A fact is missing.
    Look(Look),
    /// Leave the destination as it is.
    Skip(Skip),
    /// Nothing is there: create the copy (O_EXCL).
    Create,
    /// Open the existing destination and write over it (see [`WriteOver`]).
    WriteOver(WriteOver),
    /// Remove the destination, then create the copy.
    Remove,
    /// Rename the destination to this name in its directory, then create the copy.
    BackUp(CString),
    /// Do not copy the entry: cp's error.
    Refuse(Refusal),
}

/// cp's rules applied to the source and, when something is at the destination name, to it.
pub(crate) fn decide(p: &Policy, src: &SourceFacts<'_>, dst: Option<&DestFacts<'_>>) -> Decision {
    let Some(dst) = dst else {
        return Decision::Create;
    };
    let entry = dst.entry;
    let is_link = entry.kind() == Kind::Symlink;
    let as_data = p.copies_as_data(&src.stat);
    // What a symlink leads to; only data is written through it, a recreated entry replaces
    // the link itself. A symlink loop is removed under -f, as cp does.
    let mut loop_removed = false;
    let target = if is_link && !as_data {
        None
    } else if is_link {
        match dst.target {
            None => return Decision::Look(Look::Target),
            Some(Target::File(stat)) => Some(stat),
            Some(Target::Dangling) => None,
            Some(Target::Loop) if p.force || p.remove_destination => {
                loop_removed = true;
                None
            }
            Some(Target::Loop) => return Decision::Refuse(Refusal::Unreadable(libc::ELOOP)),
            Some(Target::Unknown(errno)) => return Decision::Refuse(Refusal::Unreadable(errno)),
        }
    } else {
        Some(entry)
    };
    if dst.just_created {
        return Decision::Refuse(if is_link && as_data {
            Refusal::ThroughJustCreatedSymlink
        } else {
            Refusal::JustCreated
        });
    }
    // cp looks at the entry itself where it will not write through it.
    let looked_at = if !as_data || p.backup.is_some() || p.remove_destination {
        Some(entry)
    } else {
        target
    };
    let mut already_linked = false;
    if let Some(dst_sb) = looked_at.filter(|_| p.overwrite != Overwrite::NoClobber) {
        match same_file::judge(p, src, dst, &dst_sb) {
            Ok(SameFile::Different) => {}
            Ok(SameFile::AlreadyLinked) => already_linked = true,
            Ok(SameFile::Refuse) => return Decision::Refuse(Refusal::SameFile),
            Err(look) => return Decision::Look(look),
        }
    }
    // Data goes where the entry leads; a recreated entry replaces the entry itself.
    let seen = if as_data { target } else { Some(entry) };
    let recreated = if p.link != LinkMode::Copy {
        // As cp: a link replaces only what a non-regular source under -P would.
        p.dereference == Dereference::Never && src.stat.kind() != Kind::File
    } else {
        !as_data
    };
    // --attributes-only writes no data, so it replaces nothing for the data's sake.
    let for_data = !p.attributes_only
        && (recreated || (p.preserve_links && entry.kind() == Kind::File && entry.nlink > 1));
    let replace = p.remove_destination || p.backup.is_some() || for_data || loop_removed;
    if as_data && target.is_none() && !replace && !p.posixly_correct {
        return Decision::Refuse(Refusal::DanglingSymlink);
    }
    let clobber = match p.overwrite {
        Overwrite::NoClobber => return Decision::Skip(Skip::NoClobber),
        Overwrite::Clobber(clobber) | Overwrite::Interactive(clobber) => clobber,
    };
    match clobber {
        Clobber::All => {}
        Clobber::Older if seen.is_some_and(|s| s.mtime >= src.stat.mtime) => {
            return Decision::Skip(Skip::NotOlder)
        }
        Clobber::Older => {}
        Clobber::Incomplete(how) => {
            // Judged before the rules that replace the entry: a complete file of a hard-link
            // group is kept like any other.
            let replaced_anyway = p.remove_destination || p.backup.is_some();
            if let Some(t) = target.filter(|_| as_data && !replaced_anyway) {
                // A sync in one direction: a complete file has the source's size and, where
                // times are kept (set last), its ns mtime; without them only content can tell.
                let quick = match how {
                    crate::plan::Resume::Quick if p.preserve_timestamps => {
                        QuickCheck::SizeAndTime { window_ns: 0 }
                    }
                    _ => QuickCheck::Checksum,
                };
                match sync::quick_check(quick, &src.stat, &t, None) {
                    sync::Verdict::Keep => return Decision::Skip(Skip::Complete),
                    sync::Verdict::CompareContent => {
                        return Decision::WriteOver(WriteOver {
                            target: Some(t),
                            through_link: is_link,
                            compare_first: true,
                        })
                    }
                    _ => {}
                }
            }
        }
    }
    if let Overwrite::Interactive(_) = p.overwrite {
        match dst.answer {
            None => return Decision::Look(Look::Answer),
            Some(false) => return Decision::Skip(Skip::Declined),
            Some(true) => {}
        }
    }
    if already_linked {
        return Decision::Skip(Skip::AlreadyLinked);
    }
    if seen.is_some_and(|s| s.kind() == Kind::Dir) {
        return Decision::Refuse(Refusal::DirectoryWithNonDirectory);
    }
    if p.atomic && as_data && !replace && target.is_none_or(|t| t.kind() != Kind::File) {
        return Decision::Refuse(Refusal::AtomicNotRegular);
    }
    if let Some(backup) = &p.backup {
        if simple_backup_is_named(backup, src.name, dst.name) {
            match dst.backup_is_source {
                None => return Decision::Look(Look::BackupIsSource),
                Some(true) => return Decision::Refuse(Refusal::BackupDestroysSource),
                Some(false) => {}
            }
        }
        return match &dst.backup_name {
            None => Decision::Look(Look::BackupName),
            Some(name) => Decision::BackUp(name.clone()),
        };
    }
    if replace {
        return Decision::Remove;
    }
    Decision::WriteOver(WriteOver {
        target,
        through_link: is_link,
        compare_first: false,
    })
}

/// True when the simple backup name of `dst` (`DST~`) is the source's last component
/// (`cp --b=simple a~ a`): renaming `dst` aside might then destroy the source, which only a
/// look can tell ([`Look::BackupIsSource`]). Numbered backups never take that name.
pub(crate) fn simple_backup_is_named(backup: &Backup, src: &[u8], dst: &[u8]) -> bool {
    if backup.mode == BackupMode::Numbered {
        return false;
    }
    let last = src.rsplit(|&b| b == b'/').next().unwrap_or_default();
    last == crate::backup::simple_name(dst, &backup.suffix)
}
