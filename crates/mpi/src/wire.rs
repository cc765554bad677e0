//! The wire format of `cp --mpi`, all of it: protocol messages, the work items they carry
//! ([`WorkItem`], which ringio-copy defines as data only), and the bundles of a lockstep round.
//! Each message and item is a tag byte, then its fields; integers are little-endian, byte
//! strings a `u32` length and the bytes.

use ringio_copy::ranks::WorkItem;

use crate::protocol::Msg;

/// Encodes one message.
pub fn encode(msg: &Msg<WorkItem>) -> Vec<u8> {
    let mut out = Vec::new();
    match msg {
        Msg::Steal => out.push(b'S'),
        Msg::Give(items) => {
            out.push(b'G');
            out.extend_from_slice(&(items.len() as u32).to_le_bytes());
            for item in items {
                put_item(&mut out, item);
            }
        }
        Msg::Push(item) => {
            out.push(b'P');
            put_item(&mut out, item);
        }
        Msg::Token { black, count } => {
            out.push(b'T');
            out.push(u8::from(*black));
            out.extend_from_slice(&count.to_le_bytes());
        }
        Msg::Done => out.push(b'X'),
        Msg::Tally => out.push(b'Y'),
        Msg::TallyUp(values) => {
            out.push(b'U');
            out.extend_from_slice(&(values.len() as u32).to_le_bytes());
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

/// Decodes one message; `None` when the bytes are not one.
pub fn decode(bytes: &[u8]) -> Option<Msg<WorkItem>> {
    let (&tag, mut rest) = bytes.split_first()?;
    let msg = match tag {
        b'S' => Msg::Steal,
        b'G' => {
            let (count, tail) = rest.split_at_checked(4)?;
            rest = tail;
            let count = u32::from_le_bytes(count.try_into().ok()?);
            let mut items = Vec::with_capacity(count.min(1024) as usize);
            for _ in 0..count {
                items.push(take_item(&mut rest)?);
            }
            Msg::Give(items)
        }
        b'P' => Msg::Push(take_item(&mut rest)?),
        b'T' => {
            let (&black, tail) = rest.split_first()?;
            let (count, tail) = tail.split_at_checked(8)?;
            rest = tail;
            Msg::Token {
                black: black != 0,
                count: i64::from_le_bytes(count.try_into().ok()?),
            }
        }
        b'X' => Msg::Done,
        b'Y' => Msg::Tally,
        b'U' => {
            let (count, tail) = rest.split_at_checked(4)?;
            rest = tail;
            let count = u32::from_le_bytes(count.try_into().ok()?) as usize;
            let (body, tail) = rest.split_at_checked(count.checked_mul(8)?)?;
            rest = tail;
            Msg::TallyUp(
                body.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            )
        }
        _ => return None,
    };
    rest.is_empty().then_some(msg)
}

/// Appends `msg` to a lockstep round's bundle of messages for one rank: its length as a `u32`,
/// then its encoding.
pub fn bundle(bundle: &mut Vec<u8>, msg: &Msg<WorkItem>) {
    let bytes = encode(msg);
    bundle.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    bundle.extend_from_slice(&bytes);
}

/// The messages of one bundle, in order: `None` for one that is not a message, after which
/// nothing more is read.
pub fn unbundle(mut bundle: &[u8]) -> impl Iterator<Item = Option<Msg<WorkItem>>> + '_ {
    std::iter::from_fn(move || {
        let (len, tail) = bundle.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let msg = tail.get(..len).and_then(decode);
        bundle = if msg.is_some() { &tail[len..] } else { &[] };
        Some(msg)
    })
}

/// Appends the encoding of `item` to `out`.
fn put_item(out: &mut Vec<u8>, item: &WorkItem) {
    match item {
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
fn take_item(input: &mut &[u8]) -> Option<WorkItem> {
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
    use ringio_copy::ranks::{KIND_FILE, KIND_UNKNOWN};

    #[test]
    fn messages_round_trip() {
        let item = WorkItem::Dir {
            root: 1,
            path: b"x/y".to_vec(),
            parent_fresh: false,
        };
        for msg in [
            Msg::Steal,
            Msg::Give(vec![]),
            Msg::Give(vec![item.clone(), item.clone()]),
            Msg::Push(item),
            Msg::Token {
                black: true,
                count: -3,
            },
            Msg::Done,
            Msg::Tally,
            Msg::TallyUp(vec![1, u64::MAX, 0]),
        ] {
            assert_eq!(decode(&encode(&msg)), Some(msg));
        }
        assert_eq!(decode(b"G\x01\x00\x00\x00"), None);
    }

    #[test]
    fn bundles_round_trip() {
        let msgs = [Msg::Steal, Msg::Give(vec![]), Msg::TallyUp(vec![9])];
        let mut bytes = Vec::new();
        for msg in &msgs {
            bundle(&mut bytes, msg);
        }
        let got: Vec<_> = unbundle(&bytes).collect();
        assert_eq!(got, msgs.map(Some));
        // A length past the end: one `None`, then nothing.
        bytes.extend_from_slice(&9u32.to_le_bytes());
        assert_eq!(unbundle(&bytes).skip(3).collect::<Vec<_>>(), [None]);
    }

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
            put_item(&mut buf, item);
        }
        let mut input = &buf[..];
        for item in &items {
            assert_eq!(take_item(&mut input).as_ref(), Some(item));
        }
        assert!(input.is_empty());
        assert_eq!(take_item(&mut &buf[..3]), None);
    }
}
