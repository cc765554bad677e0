//! rsync's size arguments (`--max-size`, `--min-size`, `--bwlimit`, `--block-size`,
//! `--max-alloc`): one parser, with rsync 3.2.7's grammar, bounds and messages
//! (options.c, `parse_size_arg`).

/// One option's size argument: its name, the unit a bare number is in, and its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeArg {
    /// The option's long name, for messages.
    pub option: &'static str,
    /// The unit of a number without one: `b`, `k`, ... (rsync's `def_suf`).
    pub unit: u8,
    /// The least value taken.
    pub min: u64,
    /// The greatest value taken (`None`: any).
    pub max: Option<u64>,
    /// 0 is taken below `min`, meaning "unlimited".
    pub zero_unlimited: bool,
}

impl SizeArg {
    /// `--max-size`: bytes by default.
    pub const MAX_SIZE: SizeArg = SizeArg::bytes("max-size");
    /// `--min-size`: bytes by default.
    pub const MIN_SIZE: SizeArg = SizeArg::bytes("min-size");
    /// `--bwlimit`: KiB per second by default, at least 512 bytes, or 0 for unlimited.
    pub const BWLIMIT: SizeArg = SizeArg {
        option: "bwlimit",
        unit: b'k',
        min: 512,
        max: None,
        zero_unlimited: true,
    };
    /// `--block-size`: at most rsync's largest block (protocol 30 and later).
    pub const BLOCK_SIZE: SizeArg = SizeArg {
        max: Some(128 << 10),
        ..SizeArg::bytes("block-size")
    };
    /// `--max-alloc`: at least 1 MiB, or 0 for unlimited.
    pub const MAX_ALLOC: SizeArg = SizeArg {
        min: 1 << 20,
        zero_unlimited: true,
        ..SizeArg::bytes("max-alloc")
    };

    const fn bytes(option: &'static str) -> SizeArg {
        SizeArg {
            option,
            unit: b'b',
            min: 0,
            max: None,
            zero_unlimited: false,
        }
    }

    /// Reads `text` as rsync reads it: a number (a fraction allowed), a unit letter (b, k, m,
    /// g, t, p, either case; this option's own when none), `b` for powers of 1000 or `ib`
    /// (or nothing) for powers of 1024, then `+1` or `-1`. The error is rsync's message,
    /// e.g. `--max-size=ten is invalid`, `--block-size=1M is too large (max: 128.00K)`.
    pub fn parse(&self, text: &str) -> Result<u64, String> {
        let fail = |err: &str, bound: Option<(&str, u64)>| {
            let mut msg = format!("--{}={text} is {err}", self.option);
            if let Some((which, limit)) = bound {
                let unlimited = self.zero_unlimited && which == "min";
                let or_zero = if unlimited { " or 0 for unlimited" } else { "" };
                msg.push_str(&format!(" ({which}: {}{or_zero})", big_num(limit)));
            }
            msg
        };
        let bytes = text.as_bytes();
        let mut at = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        if bytes.get(at) == Some(&b'.') {
            at += 1 + bytes[at + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        }
        let number: f64 = leading_float(text);
        let letter = match bytes.get(at) {
            Some(&c) if c != b'+' && c != b'-' => {
                at += 1;
                c
            }
            _ => self.unit,
        };
        let reps = match letter.to_ascii_lowercase() {
            b'b' => 0,
            b'k' => 1,
            b'm' => 2,
            b'g' => 3,
            b't' => 4,
            b'p' => 5,
            _ => return Err(fail("invalid", None)),
        };
        let rest = &bytes[at..];
        let (base, rest) = match rest {
            [b'b' | b'B', rest @ ..] => (1000f64, rest),
            [] | [b'+' | b'-', ..] => (1024f64, rest),
            [i, b, rest @ ..] if i.eq_ignore_ascii_case(&b'i') && b.eq_ignore_ascii_case(&b'b') => {
                (1024f64, rest)
            }
            _ => return Err(fail("invalid", None)),
        };
        let mut size = (base.powi(reps) * number).trunc();
        let rest = match rest {
            [sign @ (b'+' | b'-'), b'1', rest @ ..] if rest.len() + 2 < bytes.len() => {
                size += if *sign == b'+' { 1.0 } else { -1.0 };
                rest
            }
            _ => rest,
        };
        if !rest.is_empty() {
            return Err(fail("invalid", None));
        }
        let too_large = self.max.is_some_and(|max| size > max as f64);
        if !(0.0..i64::MAX as f64).contains(&size) || too_large {
            return Err(fail("too large", self.max.map(|m| ("max", m))));
        }
        let size = size as u64;
        if size < self.min && !(self.zero_unlimited && size == 0) {
            return Err(fail("too small", Some(("min", self.min))));
        }
        Ok(size)
    }
}

/// C's `atof` over rsync's size grammar: the leading `[-+]digits[.digits]`, 0 when none.
fn leading_float(text: &str) -> f64 {
    let bytes = text.as_bytes();
    let mut end = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    end += bytes[end..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if bytes.get(end) == Some(&b'.') {
        end += 1 + bytes[end + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
    }
    text[..end].trim_end_matches('.').parse().unwrap_or(0.0)
}

/// rsync's `do_big_num(n, 3, NULL)`: below 1024 the number, else two decimals and K, M, G...
fn big_num(n: u64) -> String {
    if n < 1024 {
        return n.to_string();
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < 5 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", ['K', 'M', 'G', 'T', 'P', 'E'][unit])
}

#[cfg(test)]
mod tests {
    use super::SizeArg;

    /// What rsync 3.2.7 makes of each spelling (checked against it: `rsync -n --max-size=X`).
    #[test]
    fn sizes_as_rsync_reads_them() {
        let max = SizeArg::MAX_SIZE;
        for (text, want) in [
            ("10", 10),
            ("1k", 1024),
            ("1K", 1024),
            ("1KB", 1000),
            ("1kib", 1024),
            ("1.5M", 1_572_864),
            ("1.5mb", 1_500_000),
            ("1G-1", (1 << 30) - 1),
            ("1kB+1", 1001),
            ("1-1", 0),
            ("k", 0),
            ("", 0),
            ("2.", 2),
            ("1P", 1 << 50),
        ] {
            assert_eq!(max.parse(text), Ok(want), "{text}");
        }
        for text in ["ten", "1Q", "-1", "1kx", "1ki", "1k+2", "1.2.3", "1 k"] {
            assert_eq!(
                max.parse(text),
                Err(format!("--max-size={text} is invalid")),
                "{text}"
            );
        }
        assert_eq!(
            max.parse("99999999P"),
            Err("--max-size=99999999P is too large".to_string())
        );
    }

    /// Defaults and bounds per option, with rsync's messages.
    #[test]
    fn each_option_has_rsyncs_unit_and_bounds() {
        assert_eq!(SizeArg::BWLIMIT.parse("100"), Ok(102_400));
        assert_eq!(SizeArg::BWLIMIT.parse("0"), Ok(0));
        assert_eq!(
            SizeArg::BWLIMIT.parse("0.1"),
            Err("--bwlimit=0.1 is too small (min: 512 or 0 for unlimited)".to_string())
        );
        assert_eq!(
            SizeArg::BLOCK_SIZE.parse("1000000"),
            Err("--block-size=1000000 is too large (max: 128.00K)".to_string())
        );
        assert_eq!(SizeArg::BLOCK_SIZE.parse("128k"), Ok(128 << 10));
        assert_eq!(
            SizeArg::MAX_ALLOC.parse("1k"),
            Err("--max-alloc=1k is too small (min: 1.00M or 0 for unlimited)".to_string())
        );
        assert_eq!(SizeArg::MAX_ALLOC.parse("0"), Ok(0));
        assert_eq!(SizeArg::MAX_ALLOC.parse("8g"), Ok(8 << 30));
    }
}
