//! `-X` and `-A` for sync: which extended attributes and ACLs an entry takes (rsync's: a
//! receiver that is not root keeps only `user.*`; `x` filter rules leave names out; ACLs are
//! `-A`'s), whether an existing entry's differ from its source's, and bringing them over,
//! extras removed.

use std::ffi::CString;
use std::io;

use super::pair::Run;
use crate::policy::sync::{carries_xattr, xattr_changes, xattr_steps, XattrRules, XattrStep};
use crate::xattr::{self, Subject};

/// The attributes of `target` the run carries (`policy::sync::carries_xattr`), sorted by name.
fn carried(run: &Run<'_>, target: Subject<'_>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let plan = run.plan;
    let r = XattrRules {
        xattrs: plan.xattrs,
        acls: plan.acls,
        root: run.is_root,
    };
    let mut all = xattr::read_all(target)?;
    all.retain(|(name, _)| {
        let name = name.to_bytes();
        carries_xattr(&r, name, plan.xattrs && plan.filters.xattr_excluded(name))
    });
    Ok(all)
}

/// Whether the ACLs, and the other extended attributes, of `dst` differ from `src`'s.
pub(super) fn differ(
    run: &Run<'_>,
    src: Subject<'_>,
    dst: Subject<'_>,
) -> io::Result<(bool, bool)> {
    Ok(xattr_changes(&carried(run, src)?, &carried(run, dst)?))
}

/// Gives `dst` the carried attributes of `src` (`policy::sync::xattr_steps`): each one that
/// differs set, each one `src` lacks removed, the ACLs last (an ACL rewrites the mode, and one
/// that takes the owner's write bit away would refuse what comes after it); a read-only `dst`
/// too (`xattr::while_writable`). Returns whether an ACL was set or removed: the mode moved.
pub(super) fn bring(run: &Run<'_>, src: Subject<'_>, dst: Subject<'_>) -> io::Result<bool> {
    let (want, have) = (carried(run, src)?, carried(run, dst)?);
    let mut steps = xattr_steps(&want, &have);
    let is_acl = |step: &XattrStep<'_>| match step {
        XattrStep::Set(name, _) | XattrStep::Remove(name) => xattr::is_acl(name.to_bytes()),
    };
    steps.sort_by_key(is_acl);
    xattr::while_writable(dst, xattr::is_denied, || {
        for step in &steps {
            match *step {
                XattrStep::Set(name, value) => xattr::set_one(dst, name, value)?,
                XattrStep::Remove(name) => xattr::remove_one(dst, name)?,
            }
        }
        Ok(())
    })?;
    Ok(steps.iter().any(is_acl))
}
