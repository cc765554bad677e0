//! Protocol messages as bytes: a tag byte, then the message's fields (little-endian).

use ringio_copy::item::WorkItem;

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
                item.encode(&mut out);
            }
        }
        Msg::Push(item) => {
            out.push(b'P');
            item.encode(&mut out);
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
                items.push(WorkItem::decode(&mut rest)?);
            }
            Msg::Give(items)
        }
        b'P' => Msg::Push(WorkItem::decode(&mut rest)?),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
