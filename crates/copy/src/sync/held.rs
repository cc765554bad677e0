//! The walk's descriptor budget: a directory pair's descriptors stay open while the walk holds
//! the pair ([`Hold`]); once nobody does and the run is over its budget (a deep tree under a
//! low RLIMIT_NOFILE), they close, and the next holder opens them again from the nearest open
//! ancestor, one component at a time, each directory checked to be the one first opened. The
//! rule is cp's ([`crate::node::DirHold`]); under ordinary limits nothing closes early.

use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

pub(super) use super::dirfd::{Budget, DirFd};
use super::pair::Pair;
use crate::error::{CopyError, Op};
use crate::sys;

/// The descriptors a pair holds open.
fn count(pair: &Pair<'_>) -> usize {
    pair.layers.len() + usize::from(pair.dst.is_some())
}

/// Counts a newly opened pair's descriptors.
pub(super) fn opened(pair: &Pair<'_>) {
    pair.run
        .budget
        .open
        .fetch_add(count(pair), Ordering::Relaxed);
}

/// Closes and uncounts a pair's descriptors as it is dropped: now, not when its fields go,
/// which is after its parent's drop (a chain of pairs ending together).
pub(super) fn dropped(pair: &mut Pair<'_>) {
    let open = pair.holders.0.get_mut().expect("holders").1;
    if open {
        close(pair);
    }
}

/// Closes a pair's descriptors (nobody holds it) and uncounts them.
fn close(pair: &Pair<'_>) {
    for layer in &pair.layers {
        layer.fd.close();
    }
    if let Some(dst) = &pair.dst {
        dst.close();
    }
    pair.run
        .budget
        .open
        .fetch_sub(count(pair), Ordering::Relaxed);
}

/// A claim on a pair's descriptors: open while it lives.
pub(super) struct Hold<'a, 'r>(&'a Pair<'r>);

impl<'r> std::ops::Deref for Hold<'_, 'r> {
    type Target = Pair<'r>;
    fn deref(&self) -> &Pair<'r> {
        self.0
    }
}

impl Drop for Hold<'_, '_> {
    fn drop(&mut self) {
        let pair = self.0;
        let mut state = pair.holders.0.lock().expect("holders");
        state.0 -= 1;
        if state.0 == 0 && state.1 && pair.run.budget.over() && closable(pair) {
            close(pair);
            state.1 = false;
        }
    }
}

/// A pair that can be opened again: below a root, with every directory's identity known.
fn closable(pair: &Pair<'_>) -> bool {
    pair._parent.is_some()
        && pair.layers.iter().all(|l| l.ancestry.id != (0, 0))
        && (pair.dst.is_none() || pair.dst_stat.is_some())
}

/// Holds `pair` if its descriptors are open.
fn hold_open<'a, 'r>(pair: &'a Pair<'r>) -> Option<Hold<'a, 'r>> {
    let mut state = pair.holders.0.lock().expect("holders");
    state.1.then(|| {
        state.0 += 1;
        Hold(pair)
    })
}

/// Holds `pair`, opening its descriptors again if the budget closed them: from the nearest
/// open ancestor down, each pair on the way held while its child opens.
pub(super) fn hold<'a, 'r>(pair: &'a Pair<'r>) -> Result<Hold<'a, 'r>, CopyError> {
    if let Some(held) = hold_open(pair) {
        return Ok(held);
    }
    let mut chain = vec![pair];
    let mut above = loop {
        let Some(parent) = chain[chain.len() - 1]._parent.as_deref() else {
            // A root never closes.
            unreachable!("a closed pair has a parent");
        };
        match hold_open(parent) {
            Some(held) => break held,
            None => chain.push(parent),
        }
    };
    while let Some(pair) = chain.pop() {
        let mut state = pair.holders.0.lock().expect("holders");
        if !state.1 {
            reopen(above.0, pair)?;
            state.1 = true;
            pair.run
                .budget
                .open
                .fetch_add(count(pair), Ordering::Relaxed);
        }
        state.0 += 1;
        drop(state);
        above = Hold(pair);
    }
    Ok(above)
}

/// Opens `pair`'s descriptors again below its held `parent`: each source layer from the
/// parent's layer it was opened from, the destination from the parent's, by its name, each
/// required to be the directory it was.
fn reopen(parent: &Pair<'_>, pair: &Pair<'_>) -> Result<(), CopyError> {
    let run = pair.run;
    let name = pair.rel.rsplit(|&c| c == b'/').next().unwrap_or_default();
    let name = std::ffi::CString::new(name).unwrap_or_default();
    let replaced = |path: &std::path::Path| {
        CopyError::Refused(format!(
            "{} was replaced during the run",
            crate::quote::quote_path(path)
        ))
    };
    let mut opened = Vec::with_capacity(pair.layers.len());
    for layer in &pair.layers {
        let above = parent.layers.iter().find(|a| {
            layer
                .ancestry
                .up
                .as_ref()
                .is_some_and(|up| std::sync::Arc::ptr_eq(up, &a.ancestry))
        });
        let Some(above) = above else {
            return Err(replaced(&layer.path));
        };
        let follow = run.plan.symlinks == super::Symlinks::Follow || above.enters_only();
        let fd = sys::open_dir(above.fd.as_fd(), &name, follow)
            .or_else(|e| match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR) if run.plan.copy_unsafe_links => {
                    sys::open_dir(above.fd.as_fd(), &name, true)
                }
                _ => Err(e),
            })
            .map_err(|e| CopyError::io(Op::OpenDir, layer.path.clone(), e))?;
        let st =
            sys::fstatx(fd.as_fd()).map_err(|e| CopyError::io(Op::Stat, layer.path.clone(), e))?;
        if (st.dev, st.ino) != layer.ancestry.id {
            return Err(replaced(&layer.path));
        }
        opened.push(fd);
    }
    let dst = match (&pair.dst, &parent.dst) {
        (Some(_), Some(above)) => {
            let path = &pair.dst_path;
            // Never through a symlink, except one the walk itself followed (-K).
            let fd = sys::open_dir(above.as_fd(), &name, false)
                .or_else(|e| match e.raw_os_error() {
                    Some(libc::ELOOP | libc::ENOTDIR) if run.plan.keep_dirlinks => {
                        sys::open_dir(above.as_fd(), &name, true)
                    }
                    _ => Err(e),
                })
                .map_err(|e| CopyError::io(Op::OpenDir, path.clone(), e))?;
            let st =
                sys::fstatx(fd.as_fd()).map_err(|e| CopyError::io(Op::Stat, path.clone(), e))?;
            if pair.dst_stat.map(|d| (d.dev, d.ino)) != Some((st.dev, st.ino)) {
                return Err(replaced(path));
            }
            Some(fd)
        }
        _ => None,
    };
    for (layer, fd) in pair.layers.iter().zip(opened) {
        layer.fd.put(fd);
    }
    if let (Some(slot), Some(fd)) = (&pair.dst, dst) {
        slot.put(fd);
    }
    Ok(())
}
