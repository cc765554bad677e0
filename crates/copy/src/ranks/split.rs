//! Who owns what in a copy spread over ranks: the one rank that copies every name of a
//! multiply linked inode, so it can link them all.

use std::collections::HashSet;

use crate::plan::{CopyPlan, Dereference};
use crate::sys;

/// The rank of `size` that copies every name of the multiply linked inode `(dev, ino)` in a
/// copy spread over ranks: one rank links them all. (The simulator places links with it too.)
pub fn link_owner(dev: u64, ino: u64, size: u32) -> u32 {
    // splitmix64 finalizer: inode numbers are dense, ranks should be even.
    let mut x = dev.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ino;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x % u64::from(size.max(1))) as u32
}

/// Who owns each multiply linked inode in a job of several ranks.
pub(super) struct Owners {
    size: u32,
    /// Multiply linked inodes that a command-line file operand names, as (dev, ino): rank 0
    /// copies the operands, so it owns these, and their names inside trees go to it.
    operand_links: HashSet<(u64, u64)>,
}

impl Owners {
    /// The owners of `plan`'s inodes in a job of `size` ranks. Every rank finds the same.
    pub fn new(plan: &CopyPlan, size: u32) -> Self {
        Owners {
            size,
            operand_links: operand_links(plan),
        }
    }

    /// Whose inode is `(dev, ino)`: the rank that copies every name of it.
    pub fn owner_of(&self, dev: u64, ino: u64) -> u32 {
        if self.operand_links.contains(&(dev, ino)) {
            0
        } else {
            link_owner(dev, ino, self.size)
        }
    }
}

/// The multiply linked inodes that command-line file operands name (under `--preserve=links`):
/// every rank finds the same ones, and rank 0, which copies the operands, owns them.
fn operand_links(plan: &CopyPlan) -> HashSet<(u64, u64)> {
    if !plan.preserve.links {
        return HashSet::new();
    }
    let follow = plan.dereference != Dereference::Never;
    plan.roots
        .iter()
        .filter_map(|root| {
            let stat = root.source_stat(follow).ok()?;
            (stat.kind() != sys::Kind::Dir && stat.nlink > 1).then_some((stat.dev, stat.ino))
        })
        .collect()
}
