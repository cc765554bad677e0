//! Sizes and durations as people type them on the command line: the one place both are parsed.

use std::time::Duration;

/// Parses sizes like `4096`, `128K`, `1M`, `1MiB`, `2G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size (e.g. 4096, 128K, 1M)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("'{text}': unknown unit '{unit}' (use K, M or G)")),
    };
    let size = n
        .checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or(format!("'{text}' is too large"))?;
    if size == 0 {
        return Err("size must be greater than zero".into());
    }
    Ok(size)
}

/// Parses `5s`, `500ms`, `2m` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (e.g. 5s, 500ms)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("'{text}': a duration must be positive"));
    }
    match Duration::try_from_secs_f64(v * scale) {
        Ok(d) if d.is_zero() => Err(format!("'{text}': a duration must be at least 1ns")),
        Ok(d) => Ok(d),
        Err(_) => Err(format!("'{text}': too long a duration")),
    }
}

/// Parses a whole number from `min` to `max`; anything else (a sign, a fraction, `nan`, a
/// number past the range) is an error that gives the range.
pub fn parse_whole(text: &str, min: u64, max: u64) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("must be a whole number from {min} to {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("128K").unwrap(), 128 << 10);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert!(parse_size("0").is_err());
        assert!(parse_size("12Q").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
        for bad in ["inf", "nan", "-1", "1e300", "1e-300", "1e300ms"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn whole_numbers() {
        assert_eq!(parse_whole("7", 1, 10).unwrap(), 7);
        for bad in [
            "0",
            "11",
            "-1",
            "1.5",
            "nan",
            "inf",
            "18446744073709551616",
            "",
        ] {
            assert!(parse_whole(bad, 1, 10).is_err(), "{bad}");
        }
    }
}
