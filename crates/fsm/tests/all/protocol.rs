//! The protocol's state machine ([`Session`]) against an independent reading of the design
//! notes' protocol, on arbitrary byte streams cut into arbitrary chunks (as TCP may deliver
//! them).

use proptest::prelude::*;
use ringio_fsm::protocol::Session;

/// The protocol as the design notes state it, rule by rule rather than as a table: whitespace
/// gets nothing, a byte that is not an action gets '?' and changes nothing, action 0 returns
/// to 'a', 3 exits, 1 goes from 'a' to 'b' and back to 'a' from anywhere else, 2 goes from
/// 'a' to 'c' and stays put in 'b' or 'c'. Nothing is answered after the 'd'.
///
/// Returns the replies, and the index of the byte that got the 'd' (the connection closes
/// there).
fn expected(stream: &[u8]) -> (Vec<u8>, Option<usize>) {
    let mut state = b'a';
    let mut replies = Vec::new();
    for (i, &byte) in stream.iter().enumerate() {
        let action = match byte {
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            0 | b'0' => 0,
            1 | b'1' => 1,
            2 | b'2' => 2,
            3 | b'3' => 3,
            _ => {
                replies.push(b'?');
                continue;
            }
        };
        state = match (action, state) {
            (3, _) => b'd',
            (0, _) => b'a',
            (1, b'a') => b'b',
            (1, _) => b'a',
            (2, b'a') => b'c',
            (2, same) => same,
            _ => unreachable!("actions are 0-3"),
        };
        replies.push(state);
        if state == b'd' {
            return (replies, Some(i));
        }
    }
    (replies, None)
}

/// What a server does with the stream arriving in `chunks`: feeds each chunk, and stops at the
/// end of the session. Checks what `feed` says about each chunk on the way.
fn serve(chunks: &[&[u8]]) -> Result<(Vec<u8>, Option<usize>, Session), TestCaseError> {
    let mut session = Session::new();
    let mut replies = Vec::new();
    let mut offset = 0;
    for chunk in chunks {
        let before = replies.len();
        let fed = session.feed(chunk, &mut replies);
        let answered = chunk[..fed.consumed]
            .iter()
            .filter(|b| !b" \t\r\n".contains(b))
            .count();
        prop_assert_eq!(
            replies.len() - before,
            answered,
            "one reply per non-space byte"
        );
        if fed.done {
            prop_assert_eq!(replies.last(), Some(&b'd'));
            prop_assert!(fed.consumed > 0);
            return Ok((replies, Some(offset + fed.consumed - 1), session));
        }
        prop_assert_eq!(
            fed.consumed,
            chunk.len(),
            "a chunk is eaten whole until 'd'"
        );
        offset += chunk.len();
    }
    Ok((replies, None, session))
}

/// Cuts `stream` at the given points (taken modulo its length plus one, so any point is valid,
/// and empty chunks happen).
fn cut<'a>(stream: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = points.iter().map(|p| p % (stream.len() + 1)).collect();
    at.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for p in at {
        chunks.push(&stream[start..p]);
        start = p;
    }
    chunks.push(&stream[start..]);
    chunks
}

/// Bytes that reach every rule: mostly actions (raw and ASCII), some whitespace, and any byte
/// at all.
fn protocol_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        6 => prop::sample::select(vec![0u8, 1, 2, 3, b'0', b'1', b'2', b'3']),
        2 => prop::sample::select(b" \t\r\n".to_vec()),
        2 => any::<u8>(),
    ]
}

fn check(stream: &[u8], points: &[usize]) -> Result<(), TestCaseError> {
    let (want, want_end) = expected(stream);
    let (got, end, session) = serve(&cut(stream, points))?;
    prop_assert_eq!(&got, &want);
    prop_assert_eq!(end, want_end);
    prop_assert_eq!(session.requests, want.len() as u64);
    let state = want.iter().rev().find(|&&r| r != b'?').copied();
    prop_assert_eq!(session.state(), state.unwrap_or(b'a'));
    Ok(())
}

proptest! {
    // A failure prints its shrunk input; nothing is written next to the sources.
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mostly_protocol_bytes(
        // Action 3 is one byte in eight here: most streams end early, some run long.
        stream in prop::collection::vec(protocol_byte(), 0..400),
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check(&stream, &points)?;
    }

    #[test]
    fn any_bytes(
        stream in prop::collection::vec(any::<u8>(), 0..1000),
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check(&stream, &points)?;
    }

    #[test]
    fn without_the_exit_action(
        // No 3: the session must answer every byte of a long stream, never stopping early.
        stream in prop::collection::vec(
            protocol_byte().prop_map(|b| if b == 3 || b == b'3' { b'2' } else { b }),
            0..1000,
        ),
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check(&stream, &points)?;
        prop_assert_eq!(expected(&stream).1, None);
    }
}

/// The model itself, on the design notes' table row by row, so that a wrong model cannot
/// agree with a wrong `Session`.
#[test]
fn the_model_follows_the_design_table() {
    let table = [(b'a', *b"abcd"), (b'b', *b"aabd"), (b'c', *b"aacd")];
    // Prefixes that reach each state from 'a'.
    let reach = |state: u8| -> &'static [u8] {
        match state {
            b'a' => b"",
            b'b' => b"1",
            _ => b"2",
        }
    };
    for (state, row) in table {
        for (action, want) in row.iter().enumerate() {
            let mut stream = reach(state).to_vec();
            stream.push(b'0' + action as u8);
            let (replies, _) = expected(&stream);
            assert_eq!(replies.last(), Some(want), "state {state}, action {action}");
            stream.pop();
            stream.push(action as u8);
            assert_eq!(expected(&stream).0.last(), Some(want));
        }
    }
    assert_eq!(expected(b"x 1\t\r\n\xff3 2"), (b"?b?d".to_vec(), Some(7)));
}
