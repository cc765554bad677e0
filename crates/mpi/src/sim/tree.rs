//! The trees the simulator copies: a synthetic one drawn from hashes, and a real one listed
//! from disk.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{mix, SimConfig};
use crate::protocol::RankId;

/// The inode behind a name with more than one link: (device, inode number) for a real tree.
pub type Link = (u64, u64);

/// What reading one directory finds, in the order the directory returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Its entries other than directories: `Some` for a name of a multiply linked inode.
    pub files: Vec<Option<Link>>,
    /// Its subdirectories, as ids for [`Tree::list`].
    pub subdirs: Vec<u64>,
}

/// A tree the simulator copies.
pub trait Tree {
    /// The root directory's id.
    fn root(&self) -> u64;
    /// Reads directory `dir`.
    fn list(&self, dir: u64) -> Listing;
    /// The rank of `ranks` that copies every name of `link`.
    fn owner(&self, link: Link, ranks: u32) -> RankId;
}

/// The tree of a [`SimConfig`]: every directory's contents come from a hash of its id, which
/// carries its depth in the low byte.
#[derive(Debug, Clone)]
pub struct SyntheticTree {
    seed: u64,
    depth: u32,
    fanout: u32,
    files_per_dir: u32,
    linked: f64,
}

impl SyntheticTree {
    /// The tree `cfg` describes.
    pub fn of(cfg: &SimConfig) -> SyntheticTree {
        SyntheticTree {
            seed: cfg.seed,
            depth: cfg.depth.min(255),
            fanout: cfg.fanout,
            files_per_dir: cfg.files_per_dir,
            linked: cfg.linked,
        }
    }
}

impl Tree for SyntheticTree {
    fn root(&self) -> u64 {
        mix(self.seed) & !0xff
    }

    fn list(&self, dir: u64) -> Listing {
        let depth = (dir & 0xff) as u32;
        let files = self.files_per_dir;
        let linked = (f64::from(files) * self.linked).round() as u32;
        let subdirs = if depth < self.depth {
            let children = mix(dir) % (2 * u64::from(self.fanout) + 1);
            (0..children)
                .map(|c| {
                    mix(dir.wrapping_mul(31).wrapping_add(c + 1)) & !0xff | u64::from(depth + 1)
                })
                .collect()
        } else {
            Vec::new()
        };
        Listing {
            files: (0..files)
                .map(|i| (i < linked).then_some((dir, u64::from(i))))
                .collect(),
            subdirs,
        }
    }

    fn owner(&self, link: Link, ranks: u32) -> RankId {
        (mix(link.0 ^ (link.1 << 40)) % u64::from(ranks.max(1))) as RankId
    }
}

/// A real tree, listed once from disk as `cp -a` sees it (hard links kept): each directory's
/// entries in the order the directory returns them, and the (device, inode) of every name
/// with more than one link.
#[derive(Debug, Clone)]
pub struct ListedTree {
    dirs: Vec<Listing>,
    owner: fn(u64, u64, u32) -> u32,
}

impl ListedTree {
    /// Lists the tree at `root` (symbolic links are not followed). `owner(dev, ino, ranks)`
    /// places multiply linked inodes on ranks, as the copy does
    /// (`ringio_copy::ranks::link_owner`).
    pub fn read(root: &Path, owner: fn(u64, u64, u32) -> u32) -> io::Result<ListedTree> {
        let mut dirs: Vec<Listing> = vec![Listing::default()];
        let mut stack: Vec<(usize, PathBuf)> = vec![(0, root.to_path_buf())];
        while let Some((id, path)) = stack.pop() {
            let mut listing = Listing::default();
            for entry in fs::read_dir(&path)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    listing.subdirs.push(dirs.len() as u64);
                    stack.push((dirs.len(), entry.path()));
                    dirs.push(Listing::default());
                } else {
                    let meta = entry.metadata()?;
                    listing
                        .files
                        .push((meta.nlink() > 1).then(|| (meta.dev(), meta.ino())));
                }
            }
            dirs[id] = listing;
        }
        Ok(ListedTree { dirs, owner })
    }
}

impl Tree for ListedTree {
    fn root(&self) -> u64 {
        0
    }

    fn list(&self, dir: u64) -> Listing {
        self.dirs[dir as usize].clone()
    }

    fn owner(&self, link: Link, ranks: u32) -> RankId {
        (self.owner)(link.0, link.1, ranks)
    }
}
