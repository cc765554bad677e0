//! The protocol every model speaks (fixed; see the design notes): one byte per action, one
//! byte per reply, pipelining allowed, whitespace ignored, '?' for anything else, and the
//! connection closes after the reply 'd'.

/// The transition table: `TABLE[state][action]`, states 'a'..'d' as 0..3.
pub const TABLE: [[u8; 4]; 4] = [
    [b'a', b'b', b'c', b'd'],
    [b'a', b'a', b'b', b'd'],
    [b'a', b'a', b'c', b'd'],
    [b'd', b'd', b'd', b'd'],
];

/// The reply to a byte that is not an action.
pub const BAD: u8 = b'?';

/// The action a byte stands for: 0x00-0x03 or ASCII '0'-'3'.
pub fn action(byte: u8) -> Option<usize> {
    match byte {
        0..=3 => Some(byte as usize),
        b'0'..=b'3' => Some((byte - b'0') as usize),
        _ => None,
    }
}

/// Bytes that are skipped without a reply.
pub fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// One connection's state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    state: u8,
    /// Actions answered (bad bytes included).
    pub requests: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

/// What [`Session::feed`] did with a chunk of input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Input bytes consumed (all of them, unless the session ended part way).
    pub consumed: usize,
    /// The reply 'd' was produced: send what is pending, then close.
    pub done: bool,
}

impl Session {
    /// A session in state 'a'.
    pub fn new() -> Self {
        Session {
            state: b'a',
            requests: 0,
        }
    }

    /// The current state, 'a'..'d'.
    pub fn state(&self) -> u8 {
        self.state
    }

    /// Feeds received bytes, appending one reply byte per action or bad byte to `out`. Stops
    /// after the reply 'd': bytes after it are not consumed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        for (i, &b) in input.iter().enumerate() {
            if is_space(b) {
                continue;
            }
            self.requests += 1;
            let reply = match action(b) {
                Some(a) => TABLE[(self.state - b'a') as usize][a],
                None => BAD,
            };
            if reply != BAD {
                self.state = reply;
            }
            out.push(reply);
            if reply == b'd' {
                return Fed {
                    consumed: i + 1,
                    done: true,
                };
            }
        }
        Fed {
            consumed: input.len(),
            done: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_whitespace_and_bad_bytes() {
        let mut s = Session::new();
        let mut out = Vec::new();
        let fed = s.feed(b"1 2\n0\x02x2", &mut out);
        assert_eq!(out, b"bbac?c");
        assert!(!fed.done);
        let fed = s.feed(b"13000", &mut out);
        assert_eq!(&out[6..], b"ad");
        assert_eq!(fed.consumed, 2);
        assert!(fed.done);
        assert_eq!(s.requests, 8);
    }
}
