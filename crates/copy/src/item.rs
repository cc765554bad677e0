//! [`WorkItem`]: a piece of a copy that can move to another process (an MPI rank), named by
//! raw-byte paths relative to the roots of the plan, and its byte encoding. A leaf.

/// Work another rank can do, with no descriptors or pointers in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkItem {
    /// Create the destination twin of a source subdirectory and copy it. `path` is relative to
    /// root `root` of the plan and ends with the new directory's name.
    Dir {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path, raw bytes, `/`-separated.
        path: Vec<u8>,
        /// The parent destination was created by this run (so the name cannot exist yet).
        parent_fresh: bool,
    },
    /// Copy these entries of directory `dir` (relative to root `root`).
    Entries {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path of the directory, raw bytes (empty: the root itself).
        dir: Vec<u8>,
        /// The destination directory was created by this run.
        fresh: bool,
        /// Names, each with its type from getdents ([`KIND_UNKNOWN`] when it did not say).
        names: Vec<(Vec<u8>, u8)>,
    },
    /// Copy bytes `offset .. offset + len` of the big file `src` in `dir` into `dst` there,
    /// which rank `owner` created and sized. The sender clamps the range to the file's size as
    /// it opened it, and the receiver to the size as it opens it: a length is never taken as
    /// a count of bytes to enumerate.
    Chunk {
        /// Index of the root in `CopyPlan::roots`.
        root: u32,
        /// Relative path of the directory.
        dir: Vec<u8>,
        /// Source name.
        src: Vec<u8>,
        /// The destination name being written (a temporary name under `--atomic`).
        dst: Vec<u8>,
        /// The destination's own name, which messages give (under `--atomic`, `dst` is a
        /// temporary name the user never gave).
        name: Vec<u8>,
        /// First byte.
        offset: u64,
        /// Bytes (the sender's clamp makes it real; an older sender's `u64::MAX - offset`,
        /// "to end of file", is clamped by the receiver).
        len: u64,
        /// The rank that finishes the file.
        owner: u32,
        /// The owner's name for the file.
        id: u64,
    },
    /// A chunk of the owner's file `id` is done (`failed`: and it failed, so the copy of the
    /// file must be given up); `bytes` were copied.
    ChunkDone {
        /// The owner's name for the file.
        id: u64,
        /// The chunk failed.
        failed: bool,
        /// Bytes copied.
        bytes: u64,
    },
}

/// Entry type codes of [`WorkItem::Entries`].
pub const KIND_UNKNOWN: u8 = 0;
/// A regular file.
pub const KIND_FILE: u8 = 1;
/// A directory.
pub const KIND_DIR: u8 = 2;
/// A symlink.
pub const KIND_SYMLINK: u8 = 3;
/// A FIFO, socket or device.
pub const KIND_SPECIAL: u8 = 4;

impl WorkItem {
    /// Appends the item's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            WorkItem::Dir {
                root,
                path,
                parent_fresh,
            } => {
                out.push(b'D');
                out.extend_from_slice(&root.to_le_bytes());
                out.push(u8::from(*parent_fresh));
                put_bytes(out, path);
            }
            WorkItem::Entries {
                root,
                dir,
                fresh,
                names,
            } => {
                out.push(b'E');
                out.extend_from_slice(&root.to_le_bytes());
                out.push(u8::from(*fresh));
                put_bytes(out, dir);
                out.extend_from_slice(&(names.len() as u32).to_le_bytes());
                for (name, kind) in names {
                    put_bytes(out, name);
                    out.push(*kind);
                }
            }
            WorkItem::Chunk {
                root,
                dir,
                src,
                dst,
                name,
                offset,
                len,
                owner,
                id,
            } => {
                out.push(b'C');
                out.extend_from_slice(&root.to_le_bytes());
                out.push(0);
                put_bytes(out, dir);
                put_bytes(out, src);
                put_bytes(out, dst);
                put_bytes(out, name);
                for n in [*offset, *len, u64::from(*owner), *id] {
                    out.extend_from_slice(&n.to_le_bytes());
                }
            }
            WorkItem::ChunkDone { id, failed, bytes } => {
                out.push(b'K');
                out.extend_from_slice(&0u32.to_le_bytes());
                out.push(u8::from(*failed));
                put_bytes(out, &[]);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&bytes.to_le_bytes());
            }
        }
    }

    /// Decodes one item from the front of `input`, advancing it. `None` on malformed input.
    pub fn decode(input: &mut &[u8]) -> Option<WorkItem> {
        let tag = take_u8(input)?;
        let root = take_u32(input)?;
        let flag = take_u8(input)? != 0;
        let path = take_bytes(input)?;
        match tag {
            b'D' => Some(WorkItem::Dir {
                root,
                path,
                parent_fresh: flag,
            }),
            b'E' => {
                let count = take_u32(input)? as usize;
                let mut names = Vec::with_capacity(count.min(4096));
                for _ in 0..count {
                    let name = take_bytes(input)?;
                    names.push((name, take_u8(input)?));
                }
                Some(WorkItem::Entries {
                    root,
                    dir: path,
                    fresh: flag,
                    names,
                })
            }
            b'C' => {
                let src = take_bytes(input)?;
                let dst = take_bytes(input)?;
                let name = take_bytes(input)?;
                Some(WorkItem::Chunk {
                    root,
                    dir: path,
                    src,
                    dst,
                    name,
                    offset: take_u64(input)?,
                    len: take_u64(input)?,
                    owner: u32::try_from(take_u64(input)?).ok()?,
                    id: take_u64(input)?,
                })
            }
            b'K' => Some(WorkItem::ChunkDone {
                id: take_u64(input)?,
                failed: flag,
                bytes: take_u64(input)?,
            }),
            _ => None,
        }
    }

    /// How deep in its tree the item is (components of its path).
    pub fn depth(&self) -> usize {
        let path = match self {
            WorkItem::Dir { path, .. } => path,
            WorkItem::Entries { dir, .. } | WorkItem::Chunk { dir, .. } => dir,
            WorkItem::ChunkDone { .. } => return 0,
        };
        if path.is_empty() {
            0
        } else {
            path.split(|&b| b == b'/').count()
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn take_u8(input: &mut &[u8]) -> Option<u8> {
    let (&b, rest) = input.split_first()?;
    *input = rest;
    Some(b)
}

fn take_u32(input: &mut &[u8]) -> Option<u32> {
    let (head, rest) = input.split_at_checked(4)?;
    *input = rest;
    Some(u32::from_le_bytes(head.try_into().ok()?))
}

fn take_u64(input: &mut &[u8]) -> Option<u64> {
    let (head, rest) = input.split_at_checked(8)?;
    *input = rest;
    Some(u64::from_le_bytes(head.try_into().ok()?))
}

fn take_bytes(input: &mut &[u8]) -> Option<Vec<u8>> {
    let len = take_u32(input)? as usize;
    let (head, rest) = input.split_at_checked(len)?;
    *input = rest;
    Some(head.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip() {
        let items = [
            WorkItem::Dir {
                root: 3,
                path: b"a/b\xff".to_vec(),
                parent_fresh: true,
            },
            WorkItem::Entries {
                root: 0,
                dir: Vec::new(),
                fresh: false,
                names: vec![(b"x".to_vec(), KIND_FILE), (b"\n".to_vec(), KIND_UNKNOWN)],
            },
            WorkItem::Chunk {
                root: 1,
                dir: b"d".to_vec(),
                src: b"big".to_vec(),
                dst: b".big.tmp".to_vec(),
                name: b"big".to_vec(),
                offset: 8 << 20,
                len: u64::MAX - (8 << 20),
                owner: 3,
                id: 0xdead_beef,
            },
            WorkItem::ChunkDone {
                id: 7,
                failed: true,
                bytes: 12,
            },
        ];
        let mut buf = Vec::new();
        for item in &items {
            item.encode(&mut buf);
        }
        let mut input = &buf[..];
        for item in &items {
            assert_eq!(WorkItem::decode(&mut input).as_ref(), Some(item));
        }
        assert!(input.is_empty());
        assert_eq!(WorkItem::decode(&mut &buf[..3]), None);
        assert_eq!(items[0].depth(), 2);
    }
}
