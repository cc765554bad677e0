//! Work leaving this rank: queued tasks become [`WorkItem`]s for a thief, and the names of
//! multiply linked inodes go to the rank that owns the inode.

use std::ffi::CStr;

use super::work::{kind_code, WorkItem};
use crate::ctx::Ctx;
use crate::engine::bigfile::BigFile;
use crate::node::DirNode;
use crate::queue::Task;
use crate::sys::{Kind, Stat};

/// True when `task` can be given to another rank: directories to copy, batches of entries and
/// chunks of big files inside a tree (not a command-line file operand).
pub(super) fn movable(task: &Task<'_>) -> bool {
    match task {
        Task::Subdir { .. } | Task::FromRank { .. } => true,
        Task::Entries { dir, .. } => !dir.is_operand_dir(),
        Task::Chunk { file, .. } => !file.dir.is_operand_dir() && file.written_name().is_some(),
        Task::Read(_) | Task::Root { .. } => false,
    }
}

/// `len` bytes from `offset` of `file`, clamped to the size the file had when it was opened:
/// a length that means "to end of file" (`u64::MAX - offset`) never leaves as a count of bytes
/// to enumerate.
pub(super) fn clamp_len(file: &BigFile<'_>, offset: u64, len: u64) -> u64 {
    len.min(file.stat.size.saturating_sub(offset))
}

/// The item a chunk of `file` stands for; `id` is how this rank will know the file again.
/// The range is clamped to the file's size as opened.
pub(super) fn chunk_item(
    file: &BigFile<'_>,
    owner: u32,
    id: u64,
    offset: u64,
    len: u64,
) -> Option<WorkItem> {
    let (root, dir, _) = file.dir.rel_path();
    Some(WorkItem::Chunk {
        root,
        dir,
        src: file.src_name.to_bytes().to_vec(),
        dst: file.written_name()?.to_bytes().to_vec(),
        name: file.dst_name.to_bytes().to_vec(),
        offset,
        len: clamp_len(file, offset, len),
        owner,
        id,
    })
}

/// The item a [`movable`] task other than a chunk stands for.
pub(super) fn to_item(task: Task<'_>) -> Option<WorkItem> {
    match task {
        Task::Subdir { parent, name, .. } => {
            let (root, mut path, _) = parent.rel_path();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.to_bytes());
            Some(WorkItem::Dir {
                root,
                path,
                parent_fresh: parent.fresh,
            })
        }
        Task::Entries { dir, entries } => {
            let (root, path, _) = dir.rel_path();
            Some(WorkItem::Entries {
                root,
                dir: path,
                fresh: dir.fresh,
                names: entries
                    .into_iter()
                    .map(|(name, kind)| (name.into_bytes(), kind_code(kind)))
                    .collect(),
            })
        }
        Task::FromRank { item, .. } => Some(item),
        Task::Read(_) | Task::Root { .. } | Task::Chunk { .. } => None,
    }
}

/// The hook of `copy_stated`: sends the name `src` in `dir` of a multiply linked inode that
/// another rank owns to that rank, so one rank copies the inode once and links every other
/// name to it. True when the name went away; false at once on a single node.
pub(crate) fn sent_to_owner(
    ctx: &Ctx<'_>,
    dir: &DirNode<'_>,
    src: &CStr,
    dst: &CStr,
    stat: &Stat,
) -> bool {
    let Some(ranks) = ctx.ranks.as_ref() else {
        return false;
    };
    if !ctx.plan.preserve.links
        || stat.nlink < 2
        || stat.kind() == Kind::Dir
        || src != dst
        || dir.is_operand_dir()
    {
        return false;
    }
    let owner = ranks.owners.owner_of(stat.dev, stat.ino);
    if owner == ranks.rank {
        return false;
    }
    let (root, path, _) = dir.rel_path();
    ranks.send(
        owner,
        WorkItem::Entries {
            root,
            dir: path,
            fresh: dir.fresh,
            names: vec![(src.to_bytes().to_vec(), kind_code(Some(stat.kind())))],
        },
    );
    true
}
