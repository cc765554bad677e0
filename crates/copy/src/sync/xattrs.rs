//! `-X` and `-A` for sync: which extended attributes and ACLs an entry takes (rsync's: a
//! receiver that is not root keeps only `user.*`; `x` filter rules leave names out; ACLs are
//! `-A`'s), whether an existing entry's differ from its source's, and bringing them over,
//! extras removed.

use std::ffi::CString;
use std::io;

use super::pair::Run;
use crate::xattr::{self, Subject};

/// The attributes of `target` the run carries, sorted by name.
fn carried(run: &Run<'_>, target: Subject<'_>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let plan = run.plan;
    let mut all = xattr::read_all(target)?;
    all.retain(|(name, _)| {
        let name = name.to_bytes();
        if xattr::is_acl(name) {
            return plan.acls;
        }
        // rsync's own (`--fake-super`'s user.rsync.%stat) are not the file's.
        if name.starts_with(b"user.rsync.%") {
            return false;
        }
        plan.xattrs
            && (run.is_root || name.starts_with(b"user."))
            && !name.starts_with(b"system.")
            && !plan.filters.xattr_excluded(name)
    });
    Ok(all)
}

/// Whether the ACLs, and the other extended attributes, of `dst` differ from `src`'s.
pub(super) fn differ(
    run: &Run<'_>,
    src: Subject<'_>,
    dst: Subject<'_>,
) -> io::Result<(bool, bool)> {
    let (a, b) = (carried(run, src)?, carried(run, dst)?);
    let part = |v: &[(CString, Vec<u8>)], acl: bool| -> Vec<(CString, Vec<u8>)> {
        v.iter()
            .filter(|(n, _)| xattr::is_acl(n.to_bytes()) == acl)
            .cloned()
            .collect()
    };
    Ok((
        part(&a, true) != part(&b, true),
        part(&a, false) != part(&b, false),
    ))
}

/// Gives `dst` the carried attributes of `src`: each one that differs set, each one `src`
/// lacks removed.
pub(super) fn bring(run: &Run<'_>, src: Subject<'_>, dst: Subject<'_>) -> io::Result<()> {
    let (want, have) = (carried(run, src)?, carried(run, dst)?);
    for (name, value) in &want {
        if !have.iter().any(|(n, v)| n == name && v == value) {
            xattr::set_one(dst, name, value)?;
        }
    }
    for (name, _) in &have {
        if !want.iter().any(|(n, _)| n == name) {
            xattr::remove_one(dst, name)?;
        }
    }
    Ok(())
}
