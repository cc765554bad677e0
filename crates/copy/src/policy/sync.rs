//! `ringio sync`'s rules for one entry, as pure functions over what statx said of the two sides:
//! [`decide`] says whether the entry is left alone, kept (its attributes brought up to date),
//! created, rewritten, or put in place of an entry of another type; [`attr_changes`] says which
//! attributes differ, which is both what is fixed and what `-i` reports. rsync's quick check,
//! `-c`, `--size-only`, `-I`, `--modify-window`, `-u`, `--existing`, `--ignore-existing`,
//! `--max-size`/`--min-size` and `-K` are rows of these functions; the engine
//! (`crate::sync`) gathers the facts and carries the decision out.

use crate::sys::{Kind, Stat};

/// How an existing regular file is judged up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuickCheck {
    /// Same size and the same mtime, within `window_ns` nanoseconds (`--modify-window`; 0: to
    /// the nanosecond).
    SizeAndTime {
        /// The widest mtime difference still called equal.
        window_ns: u64,
    },
    /// `--size-only`.
    SizeOnly,
    /// `-c`: same size and the same content.
    Checksum,
    /// `-I`: never; every file is rewritten.
    Never,
}

/// The options that decide what happens to each entry, read once per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The quick check.
    pub quick: QuickCheck,
    /// `-u`: a destination file newer than the source is left alone.
    pub update: bool,
    /// `--existing`: nothing new is created.
    pub existing: bool,
    /// `--ignore-existing`: nothing that exists is updated.
    pub ignore_existing: bool,
    /// `--max-size`: larger files are skipped.
    pub max_size: Option<u64>,
    /// `--min-size`: smaller files are skipped.
    pub min_size: Option<u64>,
    /// `-K`: a destination symlink to a directory stands for the directory.
    pub keep_dirlinks: bool,
    /// `-t`.
    pub times: bool,
    /// `-O`: directory times are not kept.
    pub omit_dir_times: bool,
    /// `-p`.
    pub perms: bool,
    /// `-E` (without `-p`): the execute bits follow the source.
    pub executability: bool,
    /// `-o`, and the run may change owners (root).
    pub owner: bool,
    /// `-g`.
    pub group: bool,
}

/// Why sync leaves an entry as it is, unreported (cp's reasons are `policy::Skip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSent {
    /// `--existing`: nothing there, and nothing new is made.
    NotExisting,
    /// `--ignore-existing`.
    Exists,
    /// `-u`: the destination is newer.
    Newer,
    /// `--max-size` or `--min-size`.
    Size,
}

/// What sync does with an entry (rsync's generator's verdict; cp's is `policy::Decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Leave it, and say nothing.
    Skip(NotSent),
    /// Nothing is there: make it.
    Create,
    /// Up to date: only the attributes that differ are set.
    Keep,
    /// Ask again with the content compared (`-c` on two files of one size).
    CompareContent,
    /// A file whose data differs: write it anew (a temporary renamed over it, or in place).
    Rewrite,
    /// Something of another kind (or a symlink or device that differs) is there: it goes, and
    /// the entry is made in its place.
    Replace,
}

/// What the engine knows of an entry's two sides.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The source, as the transfer sees it (followed where symlinks are followed).
    pub src: &'a Stat,
    /// The destination, not followed (`None`: nothing there).
    pub dst: Option<&'a Stat>,
    /// Under `-K`, what a destination symlink leads to, when it leads to a directory.
    pub dst_dir_target: Option<&'a Stat>,
    /// For two symlinks: their targets are equal; for two devices or specials: the same type
    /// and device number. Ignored otherwise.
    pub same_value: bool,
    /// Under `-c`, once compared: the two files hold the same bytes.
    pub same_content: Option<bool>,
}

/// rsync's rule for the entry.
pub fn decide(r: &Rules, f: &Facts<'_>) -> Verdict {
    let src = f.src;
    let kind = src.kind();
    if kind == Kind::File {
        let too_big = r.max_size.is_some_and(|max| src.size > max);
        let too_small = r.min_size.is_some_and(|min| src.size < min);
        if too_big || too_small {
            return Verdict::Skip(NotSent::Size);
        }
    }
    let Some(dst) = f.dst else {
        return if r.existing {
            Verdict::Skip(NotSent::NotExisting)
        } else {
            Verdict::Create
        };
    };
    // -K: a symlink to a directory where the source has a directory is that directory.
    let dst = match (kind, dst.kind(), f.dst_dir_target) {
        (Kind::Dir, Kind::Symlink, Some(target)) if r.keep_dirlinks => target,
        _ => dst,
    };
    // --ignore-existing leaves what exists, a file where the source has a directory too.
    if r.ignore_existing && (kind != Kind::Dir || dst.kind() != Kind::Dir) {
        return Verdict::Skip(NotSent::Exists);
    }
    // -u spares newer regular files only (rsync replaces a newer symlink all the same).
    if r.update && kind == Kind::File && dst.mtime > src.mtime && dst.kind() == kind {
        return Verdict::Skip(NotSent::Newer);
    }
    if dst.kind() != kind {
        return Verdict::Replace;
    }
    match kind {
        Kind::Dir => Verdict::Keep,
        Kind::Symlink => {
            if f.same_value {
                Verdict::Keep
            } else {
                Verdict::Replace
            }
        }
        Kind::Special => {
            let same_type = src.mode & libc::S_IFMT == dst.mode & libc::S_IFMT;
            if same_type && f.same_value {
                Verdict::Keep
            } else {
                Verdict::Replace
            }
        }
        Kind::File => quick_check(r.quick, src, dst, f.same_content),
    }
}

/// Whether the regular file `dst` already holds `src`: [`Verdict::Keep`], [`Verdict::Rewrite`],
/// or [`Verdict::CompareContent`] until `same_content` is known. The one quick check of sync
/// and of `cp --resume` (which is a sync in one direction: `SizeAndTime` where times are kept,
/// `Checksum` where they are not).
pub fn quick_check(
    quick: QuickCheck,
    src: &Stat,
    dst: &Stat,
    same_content: Option<bool>,
) -> Verdict {
    if dst.kind() != Kind::File || (src.size != dst.size && quick != QuickCheck::Never) {
        return Verdict::Rewrite;
    }
    match quick {
        QuickCheck::Never => Verdict::Rewrite,
        QuickCheck::SizeOnly => Verdict::Keep,
        QuickCheck::SizeAndTime { window_ns } => {
            if same_time(src.mtime, dst.mtime, window_ns) {
                Verdict::Keep
            } else {
                Verdict::Rewrite
            }
        }
        QuickCheck::Checksum => match same_content {
            None => Verdict::CompareContent,
            Some(true) => Verdict::Keep,
            Some(false) => Verdict::Rewrite,
        },
    }
}

/// Two mtimes equal within `window_ns`.
pub fn same_time(a: (i64, u32), b: (i64, u32), window_ns: u64) -> bool {
    let ns = |t: (i64, u32)| i128::from(t.0) * 1_000_000_000 + i128::from(t.1);
    (ns(a) - ns(b)).unsigned_abs() <= u128::from(window_ns)
}

/// The attributes of an existing entry that differ from what the run gives it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// The mtime (kept under `-t`).
    pub time: bool,
    /// The permission bits (`-p`, or the execute bits under `-E`).
    pub perms: bool,
    /// The owner (`-o`, as root).
    pub owner: bool,
    /// The group (`-g`).
    pub group: bool,
    /// The ACLs (`-A`; looked at by the engine, not here).
    pub acl: bool,
    /// The other extended attributes (`-X`; looked at by the engine, not here).
    pub xattr: bool,
}

impl Changes {
    /// Nothing differs.
    pub fn none(&self) -> bool {
        *self == Changes::default()
    }
}

/// Which of the kept attributes of the existing `dst` differ from `want`, the attributes the
/// run gives the entry (the source's, after `--chmod`, `--chown` and the like). A symlink's
/// permissions are never compared (Linux has none to set).
pub fn attr_changes(r: &Rules, want: &Stat, dst: &Stat, window_ns: u64) -> Changes {
    let kind = want.kind();
    let keep_time = r.times
        && match kind {
            Kind::Dir => !r.omit_dir_times,
            _ => true,
        };
    let perms = if kind == Kind::Symlink {
        false
    } else if r.perms {
        want.perm() != dst.perm()
    } else if r.executability && kind == Kind::File {
        (want.mode & 0o111 != 0) != (dst.mode & 0o111 != 0)
    } else {
        false
    };
    Changes {
        time: keep_time && !same_time(want.mtime, dst.mtime, window_ns),
        perms,
        owner: r.owner && want.uid != dst.uid,
        group: r.group && want.gid != dst.gid,
        acl: false,
        xattr: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(kind: u32, size: u64, mtime: (i64, u32)) -> Stat {
        Stat {
            mode: kind | 0o644,
            size,
            uid: 1,
            gid: 1,
            nlink: 1,
            ino: 7,
            dev: 1,
            rdev: 0,
            blocks: 0,
            atime: (0, 0),
            mtime,
        }
    }

    fn rules() -> Rules {
        Rules {
            quick: QuickCheck::SizeAndTime { window_ns: 0 },
            update: false,
            existing: false,
            ignore_existing: false,
            max_size: None,
            min_size: None,
            keep_dirlinks: false,
            times: true,
            omit_dir_times: false,
            perms: true,
            executability: false,
            owner: false,
            group: false,
        }
    }

    fn facts<'a>(src: &'a Stat, dst: Option<&'a Stat>) -> Facts<'a> {
        Facts {
            src,
            dst,
            dst_dir_target: None,
            same_value: false,
            same_content: None,
        }
    }

    const F: u32 = libc::S_IFREG;
    const D: u32 = libc::S_IFDIR;
    const L: u32 = libc::S_IFLNK;

    #[test]
    fn the_quick_check_compares_size_and_the_nanosecond_mtime() {
        let r = rules();
        let src = stat(F, 10, (100, 5));
        let cases = [
            (stat(F, 10, (100, 5)), Verdict::Keep),
            (stat(F, 10, (100, 6)), Verdict::Rewrite),
            (stat(F, 11, (100, 5)), Verdict::Rewrite),
            (stat(F, 10, (99, 5)), Verdict::Rewrite),
        ];
        for (dst, want) in cases {
            assert_eq!(decide(&r, &facts(&src, Some(&dst))), want, "{dst:?}");
        }
        assert_eq!(decide(&r, &facts(&src, None)), Verdict::Create);
    }

    #[test]
    fn modify_window_widens_the_time_check() {
        let r = Rules {
            quick: QuickCheck::SizeAndTime {
                window_ns: 1_000_000_000,
            },
            ..rules()
        };
        let src = stat(F, 10, (100, 500));
        assert_eq!(
            decide(&r, &facts(&src, Some(&stat(F, 10, (101, 500))))),
            Verdict::Keep
        );
        assert_eq!(
            decide(&r, &facts(&src, Some(&stat(F, 10, (101, 501))))),
            Verdict::Rewrite
        );
    }

    #[test]
    fn size_only_checksum_and_ignore_times() {
        let src = stat(F, 10, (100, 0));
        let older = stat(F, 10, (50, 0));
        let size_only = Rules {
            quick: QuickCheck::SizeOnly,
            ..rules()
        };
        assert_eq!(
            decide(&size_only, &facts(&src, Some(&older))),
            Verdict::Keep
        );
        let checksum = Rules {
            quick: QuickCheck::Checksum,
            ..rules()
        };
        let mut f = facts(&src, Some(&older));
        assert_eq!(decide(&checksum, &f), Verdict::CompareContent);
        f.same_content = Some(true);
        assert_eq!(decide(&checksum, &f), Verdict::Keep);
        f.same_content = Some(false);
        assert_eq!(decide(&checksum, &f), Verdict::Rewrite);
        // -c never reads two files of different sizes.
        let longer = stat(F, 11, (100, 0));
        assert_eq!(
            decide(&checksum, &facts(&src, Some(&longer))),
            Verdict::Rewrite
        );
        let never = Rules {
            quick: QuickCheck::Never,
            ..rules()
        };
        assert_eq!(
            decide(&never, &facts(&src, Some(&src.clone()))),
            Verdict::Rewrite
        );
    }

    #[test]
    fn update_existing_ignore_existing_and_sizes() {
        let src = stat(F, 10, (100, 0));
        let newer = stat(F, 3, (200, 0));
        let update = Rules {
            update: true,
            ..rules()
        };
        assert_eq!(
            decide(&update, &facts(&src, Some(&newer))),
            Verdict::Skip(NotSent::Newer)
        );
        assert_eq!(
            decide(&update, &facts(&newer, Some(&src))),
            Verdict::Rewrite
        );
        // -u does not keep a newer entry of another type.
        let newer_dir = stat(D, 0, (200, 0));
        assert_eq!(
            decide(&update, &facts(&src, Some(&newer_dir))),
            Verdict::Replace
        );
        let existing = Rules {
            existing: true,
            ..rules()
        };
        assert_eq!(
            decide(&existing, &facts(&src, None)),
            Verdict::Skip(NotSent::NotExisting)
        );
        assert_eq!(
            decide(&existing, &facts(&src, Some(&newer))),
            Verdict::Rewrite
        );
        let ignore = Rules {
            ignore_existing: true,
            ..rules()
        };
        assert_eq!(
            decide(&ignore, &facts(&src, Some(&newer))),
            Verdict::Skip(NotSent::Exists)
        );
        assert_eq!(decide(&ignore, &facts(&src, None)), Verdict::Create);
        // A directory is still entered under --ignore-existing; a file in its way stays.
        let dir = stat(D, 0, (1, 0));
        assert_eq!(decide(&ignore, &facts(&dir, Some(&dir))), Verdict::Keep);
        assert_eq!(
            decide(&ignore, &facts(&dir, Some(&newer))),
            Verdict::Skip(NotSent::Exists)
        );
        let sized = Rules {
            max_size: Some(9),
            min_size: Some(2),
            ..rules()
        };
        assert_eq!(
            decide(&sized, &facts(&src, None)),
            Verdict::Skip(NotSent::Size)
        );
        let small = stat(F, 1, (1, 0));
        assert_eq!(
            decide(&sized, &facts(&small, None)),
            Verdict::Skip(NotSent::Size)
        );
        let fits = stat(F, 5, (1, 0));
        assert_eq!(decide(&sized, &facts(&fits, None)), Verdict::Create);
    }

    #[test]
    fn kinds_that_differ_are_replaced_and_equal_values_kept() {
        let r = rules();
        let file = stat(F, 1, (1, 0));
        let dir = stat(D, 0, (1, 0));
        let link = stat(L, 3, (1, 0));
        assert_eq!(decide(&r, &facts(&file, Some(&dir))), Verdict::Replace);
        assert_eq!(decide(&r, &facts(&dir, Some(&file))), Verdict::Replace);
        assert_eq!(decide(&r, &facts(&dir, Some(&dir))), Verdict::Keep);
        let mut f = facts(&link, Some(&link));
        assert_eq!(decide(&r, &f), Verdict::Replace);
        f.same_value = true;
        assert_eq!(decide(&r, &f), Verdict::Keep);
        // -K: a symlink to a directory stands for it; without -K it is replaced.
        let mut f = facts(&dir, Some(&link));
        f.dst_dir_target = Some(&dir);
        assert_eq!(decide(&r, &f), Verdict::Replace);
        let k = Rules {
            keep_dirlinks: true,
            ..rules()
        };
        assert_eq!(decide(&k, &f), Verdict::Keep);
    }

    #[test]
    fn attribute_changes_follow_the_options() {
        let r = rules();
        let want = stat(F, 1, (5, 0));
        let mut dst = want;
        assert!(attr_changes(&r, &want, &dst, 0).none());
        dst.mode = F | 0o600;
        dst.mtime = (6, 0);
        dst.uid = 9;
        let c = attr_changes(&r, &want, &dst, 0);
        assert!(c.perms && c.time && !c.owner && !c.group);
        let bare = Rules {
            times: false,
            perms: false,
            ..rules()
        };
        assert!(attr_changes(&bare, &want, &dst, 0).none());
        let exec = Rules {
            executability: true,
            ..bare
        };
        dst.mode = F | 0o755;
        assert!(attr_changes(&exec, &want, &dst, 0).perms);
        let owners = Rules {
            owner: true,
            group: true,
            ..bare
        };
        assert!(attr_changes(&owners, &want, &dst, 0).owner);
        let dir = stat(D, 0, (5, 0));
        let mut dir_dst = dir;
        dir_dst.mtime = (9, 0);
        let omit = Rules {
            omit_dir_times: true,
            ..rules()
        };
        assert!(!attr_changes(&omit, &dir, &dir_dst, 0).time);
        assert!(attr_changes(&r, &dir, &dir_dst, 0).time);
    }
}
