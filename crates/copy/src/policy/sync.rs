//! `ringio sync`'s rules for one entry, as pure functions over what statx said of the two sides:
//! [`decide`] says whether the entry is left alone, kept (its attributes brought up to date),
//! created, rewritten, or put in place of an entry of another type; [`attr_changes`] says which
//! attributes differ, which is both what is fixed and what `-i` reports. rsync's quick check,
//! `-c`, `--size-only`, `-I`, `--modify-window`, `-u`, `--existing`, `--ignore-existing`,
//! `--max-size`/`--min-size` and `-K` are rows of these functions; the engine
//! (`crate::sync`) gathers the facts and carries the decision out.

use std::ffi::{CStr, CString};

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

/// What `-X` and `-A` carry, read once per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XattrRules {
    /// `-X`: extended attributes.
    pub xattrs: bool,
    /// `-A`: POSIX ACLs (carried as their `system.posix_acl_*` attributes).
    pub acls: bool,
    /// The receiver is root: every namespace but `system.*`; else only `user.*`.
    pub root: bool,
}

/// Whether the run carries the extended attribute `name` (rsync's rules): an ACL under `-A`;
/// under `-X`, `user.*` (every namespace but `system.*` as root) unless an `x` filter rule
/// leaves it out (`excluded`); never `--fake-super`'s own `user.rsync.%*`.
pub fn carries_xattr(r: &XattrRules, name: &[u8], excluded: bool) -> bool {
    if crate::xattr::is_acl(name) {
        return r.acls;
    }
    if name.starts_with(b"user.rsync.%") {
        return false;
    }
    r.xattrs && (r.root || name.starts_with(b"user.")) && !name.starts_with(b"system.") && !excluded
}

/// One step that brings an entry's carried attributes to the source's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrStep<'a> {
    /// Set this attribute to this value (missing, or of another value).
    Set(&'a CStr, &'a [u8]),
    /// Remove this attribute (the source lacks it).
    Remove(&'a CStr),
}

/// An entry's carried attributes, by name.
pub type Xattrs = [(CString, Vec<u8>)];

/// The steps from `have` to `want` (both the carried attributes only): every one that differs
/// set, in `want`'s order, then every one `want` lacks removed. None: they are equal.
pub fn xattr_steps<'a>(want: &'a Xattrs, have: &'a Xattrs) -> Vec<XattrStep<'a>> {
    let set = want
        .iter()
        .filter(|(n, v)| !have.iter().any(|(hn, hv)| hn == n && same_value(n, hv, v)))
        .map(|(n, v)| XattrStep::Set(n, v));
    let remove = have
        .iter()
        .filter(|(n, _)| !want.iter().any(|(wn, _)| wn == n))
        .map(|(n, _)| XattrStep::Remove(n));
    set.chain(remove).collect()
}

/// Whether two values of the attribute `name` are the same to rsync: for an access ACL, all
/// but the permissions the mode holds (the owner's, others', and the mask's, or the owning
/// group's where there is no mask), which the mode's own comparison judges and its chmod sets:
/// `-A --chmod=g-w` gives a copy a narrower mask than its source's, and the copy is still
/// the same.
fn same_value(name: &CStr, a: &[u8], b: &[u8]) -> bool {
    if name.to_bytes() != b"system.posix_acl_access" {
        return a == b;
    }
    match (acl_without_mode(a), acl_without_mode(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// An access ACL's value (the kernel's form: a 4-byte version, then entries of a 2-byte tag,
/// 2-byte permissions and 4-byte id, little-endian) with the permissions the mode holds
/// cleared; `None` if it is not of that form.
fn acl_without_mode(value: &[u8]) -> Option<Vec<u8>> {
    const USER_OBJ: u16 = 0x01;
    const GROUP_OBJ: u16 = 0x04;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    let entries = value.get(4..)?;
    if entries.len() % 8 != 0 {
        return None;
    }
    let tag = |e: &[u8]| u16::from_le_bytes([e[0], e[1]]);
    let masked = entries.chunks(8).any(|e| tag(e) == MASK);
    let group = if masked { MASK } else { GROUP_OBJ };
    let mut out = value.to_vec();
    for (i, e) in entries.chunks(8).enumerate() {
        if matches!(tag(e), USER_OBJ | OTHER) || tag(e) == group {
            let at = 4 + i * 8 + 2;
            out[at..at + 2].fill(0);
        }
    }
    Some(out)
}

/// Which of [`Changes::acl`] and [`Changes::xattr`] hold between `want` and `have` (carried
/// attributes only): an ACL step makes the first, any other the second.
pub fn xattr_changes(want: &Xattrs, have: &Xattrs) -> (bool, bool) {
    let steps = xattr_steps(want, have);
    let is_acl = |step: &XattrStep<'_>| match step {
        XattrStep::Set(n, _) | XattrStep::Remove(n) => crate::xattr::is_acl(n.to_bytes()),
    };
    (steps.iter().any(is_acl), steps.iter().any(|s| !is_acl(s)))
}

/// What an entry of a `--compare-dest`/`--copy-dest`/`--link-dest` tree is to the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AltMatch {
    /// It is exactly what the transfer would make: the same kind; for a file, data that passes
    /// the quick check and every kept attribute the same; a symlink to the same target; a
    /// device or special of the same type and number; any directory.
    pub exact: bool,
    /// A file whose data passes the quick check though its attributes differ: rsync copies it
    /// from there (a local change, `cf`).
    pub same_data: bool,
}

/// What the engine knows, or can find out, of an alternate tree's entry. The questions that
/// cost a call are asked only when the rule needs their answer (in this order).
pub struct AltFacts<'a> {
    /// The source, and the attributes the transfer gives it.
    pub src: &'a Stat,
    pub want: &'a Stat,
    /// The entry there, of the same kind (an entry of another kind is no match).
    pub alt: &'a Stat,
    /// Two symlinks: the same target.
    pub same_target: &'a mut dyn FnMut() -> bool,
    /// Two files under `-c`: the same bytes.
    pub same_content: &'a mut dyn FnMut() -> bool,
    /// Two files: the same carried extended attributes and ACLs (true without `-X`/`-A`).
    pub same_xattrs: &'a mut dyn FnMut() -> bool,
}

/// rsync's judgement of an alternate tree's entry ([`AltMatch`]).
pub fn judge_alt(r: &Rules, window_ns: u64, f: AltFacts<'_>) -> AltMatch {
    let (src, alt) = (f.src, f.alt);
    let exact = match src.kind() {
        Kind::Dir => true,
        Kind::Symlink => (f.same_target)(),
        Kind::Special => src.rdev == alt.rdev && src.mode == alt.mode,
        Kind::File => {
            let same_data = match quick_check(r.quick, src, alt, None) {
                Verdict::Keep => true,
                Verdict::CompareContent => (f.same_content)(),
                _ => false,
            };
            let exact =
                same_data && attr_changes(r, f.want, alt, window_ns).none() && (f.same_xattrs)();
            return AltMatch { exact, same_data };
        }
    };
    AltMatch {
        exact,
        same_data: false,
    }
}

/// Of the alternate trees' entries at one place (in the trees' order, judged as they are
/// drawn), the one rsync uses: the first exact match, else the first of the entry's kind.
pub fn choose_alt<T>(candidates: impl IntoIterator<Item = (AltMatch, T)>) -> Option<(AltMatch, T)> {
    let mut first = None;
    for (m, it) in candidates {
        if m.exact {
            return Some((m, it));
        }
        first.get_or_insert((m, it));
    }
    first
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

    /// Which attribute names each option set carries, as rsync's receiver keeps them.
    #[test]
    fn the_xattrs_and_acls_each_option_set_carries() {
        let x = |xattrs, acls, root| XattrRules { xattrs, acls, root };
        let acl = b"system.posix_acl_access".as_slice();
        let default_acl = b"system.posix_acl_default".as_slice();
        // (name, rules, excluded by an `x` rule, carried)
        let table: &[(&[u8], XattrRules, bool, bool)] = &[
            (b"user.a", x(true, false, false), false, true),
            (b"user.a", x(true, false, false), true, false),
            (b"user.a", x(false, true, true), false, false),
            (b"trusted.t", x(true, false, false), false, false),
            (b"trusted.t", x(true, false, true), false, true),
            (b"security.selinux", x(true, false, true), false, true),
            (b"system.other", x(true, true, true), false, false),
            (b"user.rsync.%stat", x(true, false, true), false, false),
            (b"user.rsync.kept", x(true, false, false), false, true),
            (acl, x(false, true, false), false, true),
            (default_acl, x(false, true, false), false, true),
            (acl, x(true, false, true), false, false),
            (acl, x(true, true, false), true, true),
        ];
        for &(name, r, excluded, carried) in table {
            let shown = String::from_utf8_lossy(name);
            assert_eq!(
                carries_xattr(&r, name, excluded),
                carried,
                "{shown} {r:?} {excluded}"
            );
        }
    }

    fn attrs(list: &[(&str, &str)]) -> Vec<(CString, Vec<u8>)> {
        list.iter()
            .map(|(n, v)| (CString::new(*n).unwrap(), v.as_bytes().to_vec()))
            .collect()
    }

    /// The steps from an entry's attributes to the source's, and what they say changed.
    #[test]
    fn xattr_steps_set_what_differs_and_remove_what_the_source_lacks() {
        let acl = "system.posix_acl_access";
        // (want, have, steps as text, (acl changed, other changed))
        type Attrs<'a> = &'a [(&'a str, &'a str)];
        type Row<'a> = (Attrs<'a>, Attrs<'a>, &'a [&'a str], (bool, bool));
        let table: &[Row<'_>] = &[
            (&[], &[], &[], (false, false)),
            (&[("user.a", "1")], &[("user.a", "1")], &[], (false, false)),
            (&[("user.a", "1")], &[], &["set user.a=1"], (false, true)),
            (
                &[("user.a", "2")],
                &[("user.a", "1")],
                &["set user.a=2"],
                (false, true),
            ),
            (&[], &[("user.a", "1")], &["remove user.a"], (false, true)),
            (
                &[(acl, "x")],
                &[(acl, "y")],
                &["set system.posix_acl_access=x"],
                (true, false),
            ),
            (
                &[(acl, "x"), ("user.b", "1")],
                &[("user.a", "1"), ("user.b", "1")],
                &["set system.posix_acl_access=x", "remove user.a"],
                (true, true),
            ),
        ];
        for (want, have, steps, changed) in table {
            let (want, have) = (attrs(want), attrs(have));
            let shown: Vec<String> = xattr_steps(&want, &have)
                .iter()
                .map(|step| match step {
                    XattrStep::Set(n, v) => {
                        format!("set {}={}", n.to_str().unwrap(), String::from_utf8_lossy(v))
                    }
                    XattrStep::Remove(n) => format!("remove {}", n.to_str().unwrap()),
                })
                .collect();
            assert_eq!(&shown, steps, "{want:?} from {have:?}");
            assert_eq!(
                xattr_changes(&want, &have),
                *changed,
                "{want:?} from {have:?}"
            );
        }
    }

    /// Judges `alt` for `src` with each question answered as given, and returns the verdict
    /// with the questions asked (t: target, c: content, x: xattrs).
    fn judged(
        r: &Rules,
        src: &Stat,
        alt: &Stat,
        answers: (bool, bool, bool),
    ) -> (AltMatch, String) {
        let asked = std::cell::RefCell::new(String::new());
        let verdict = judge_alt(
            r,
            0,
            AltFacts {
                src,
                want: src,
                alt,
                same_target: &mut || {
                    asked.borrow_mut().push('t');
                    answers.0
                },
                same_content: &mut || {
                    asked.borrow_mut().push('c');
                    answers.1
                },
                same_xattrs: &mut || {
                    asked.borrow_mut().push('x');
                    answers.2
                },
            },
        );
        (verdict, asked.into_inner())
    }

    /// `--compare-dest`/`--copy-dest`/`--link-dest`: what an alternate tree's entry is to the
    /// transfer, per kind and quick check, and which questions that costs.
    #[test]
    fn alternate_entries_as_rsync_judges_them() {
        let m = |exact, same_data| AltMatch { exact, same_data };
        let with = |quick| Rules { quick, ..rules() };
        let time = rules();
        let checksum = with(QuickCheck::Checksum);
        let size_only = with(QuickCheck::SizeOnly);
        let never = with(QuickCheck::Never);
        let file = stat(F, 10, (5, 0));
        let newer = stat(F, 10, (6, 0));
        let longer = stat(F, 11, (5, 0));
        let mut other_mode = file;
        other_mode.mode = F | 0o600;
        let dir = stat(D, 0, (1, 0));
        let link = stat(L, 3, (1, 0));
        let mut dev = stat(libc::S_IFCHR, 0, (1, 0));
        dev.rdev = 5;
        let mut other_dev = dev;
        other_dev.rdev = 6;
        let yes = (true, true, true);
        // (rules, src, alt, answers, verdict, questions asked)
        type Row<'a> = (
            &'a Rules,
            &'a Stat,
            &'a Stat,
            (bool, bool, bool),
            AltMatch,
            &'a str,
        );
        let table: Vec<Row<'_>> = vec![
            (&time, &file, &file, yes, m(true, true), "x"),
            (
                &time,
                &file,
                &file,
                (true, true, false),
                m(false, true),
                "x",
            ),
            (&time, &file, &newer, yes, m(false, false), ""),
            (&time, &file, &longer, yes, m(false, false), ""),
            (&time, &file, &other_mode, yes, m(false, true), ""),
            (&checksum, &file, &newer, yes, m(false, true), "c"),
            (
                &checksum,
                &file,
                &file,
                (true, false, true),
                m(false, false),
                "c",
            ),
            (&checksum, &file, &longer, yes, m(false, false), ""),
            (&size_only, &file, &newer, yes, m(false, true), ""),
            (&never, &file, &file, yes, m(false, false), ""),
            (&time, &dir, &dir, yes, m(true, false), ""),
            (&time, &link, &link, yes, m(true, false), "t"),
            (
                &time,
                &link,
                &link,
                (false, true, true),
                m(false, false),
                "t",
            ),
            (&time, &dev, &dev, yes, m(true, false), ""),
            (&time, &dev, &other_dev, yes, m(false, false), ""),
        ];
        for (i, (r, src, alt, answers, want, asks)) in table.into_iter().enumerate() {
            assert_eq!(
                judged(r, src, alt, answers),
                (want, asks.to_string()),
                "row {i}"
            );
        }
    }

    /// The first exact match wins, else the first entry of the kind; judging stops at it.
    #[test]
    fn the_first_exact_alternate_wins_else_the_first() {
        let m = |exact| AltMatch {
            exact,
            same_data: false,
        };
        assert_eq!(choose_alt(Vec::<(AltMatch, u8)>::new()), None);
        assert_eq!(choose_alt([(m(false), 0), (m(false), 1)]).unwrap().1, 0);
        assert_eq!(choose_alt([(m(false), 0), (m(true), 1)]).unwrap().1, 1);
        let mut drawn = 0;
        let lazy = [m(true), m(true), m(false)]
            .into_iter()
            .enumerate()
            .map(|(i, j)| {
                drawn += 1;
                (j, i)
            });
        assert_eq!(choose_alt(lazy).unwrap().1, 0);
        assert_eq!(drawn, 1);
    }

    /// An access ACL in the kernel's form from (tag, perm, id) entries.
    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = 2u32.to_le_bytes().to_vec();
        for &(tag, perm, id) in entries {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    #[test]
    fn an_access_acl_is_compared_without_what_the_mode_holds() {
        const ANY: u32 = u32::MAX;
        let named = |user: u16, mask: u16, other: u16| {
            acl(&[
                (0x01, 7, ANY),
                (0x02, user, 99),
                (0x04, 4, ANY),
                (0x10, mask, ANY),
                (0x20, other, ANY),
            ])
        };
        let unmasked = |group: u16| acl(&[(0x01, 7, ANY), (0x04, group, ANY), (0x20, 5, ANY)]);
        let access = c"system.posix_acl_access";
        let default = c"system.posix_acl_default";
        let cases: &[(&CStr, Vec<u8>, Vec<u8>, bool)] = &[
            // The mask, the owner's and others' bits are the mode's: `--chmod` may narrow them.
            (access, named(7, 7, 5), named(7, 5, 5), true),
            (access, named(7, 7, 5), named(7, 7, 0), true),
            // A named user's bits are the ACL's own.
            (access, named(7, 7, 5), named(5, 7, 5), false),
            // Without a mask the owning group's bits are the mode's.
            (access, unmasked(5), unmasked(7), true),
            // A default ACL is not the mode's: compared whole.
            (default, named(7, 7, 5), named(7, 5, 5), false),
            // Any other attribute, or a value of another form, byte for byte.
            (c"user.x", named(7, 7, 5), named(7, 5, 5), false),
            (access, vec![2, 0, 0, 0, 1], vec![2, 0, 0, 0, 2], false),
        ];
        for (name, want, have, same) in cases {
            let want = [((*name).to_owned(), want.clone())];
            let have = [((*name).to_owned(), have.clone())];
            assert_eq!(
                xattr_steps(&want, &have).is_empty(),
                *same,
                "{name:?} {want:?} {have:?}"
            );
        }
    }
}
