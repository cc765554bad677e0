//! The counters of a sync run, and `--stats`' report in rsync's wording.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::Kind;

/// Counts by kind of entry: regular files, directories, symlinks, devices, specials.
#[derive(Debug, Default)]
pub struct ByKind {
    /// Regular files.
    pub reg: AtomicU64,
    /// Directories.
    pub dir: AtomicU64,
    /// Symlinks.
    pub link: AtomicU64,
    /// Devices and specials.
    pub special: AtomicU64,
}

impl ByKind {
    /// Counts one entry of `kind`.
    pub fn add(&self, kind: Kind) {
        let counter = match kind {
            Kind::File => &self.reg,
            Kind::Dir => &self.dir,
            Kind::Symlink => &self.link,
            Kind::Special => &self.special,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn total(&self) -> u64 {
        [&self.reg, &self.dir, &self.link, &self.special]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// `N (reg: A, dir: B, link: C)`, as rsync lists the kinds present.
    fn show(&self) -> String {
        let total = self.total();
        let parts: Vec<String> = [
            ("reg", &self.reg),
            ("dir", &self.dir),
            ("link", &self.link),
            ("special", &self.special),
        ]
        .iter()
        .filter(|(_, c)| c.load(Ordering::Relaxed) > 0)
        .map(|(name, c)| format!("{name}: {}", group(c.load(Ordering::Relaxed))))
        .collect();
        if parts.is_empty() {
            group(total)
        } else {
            format!("{} ({})", group(total), parts.join(", "))
        }
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Entries of the source the run considered (after filters).
    pub files: ByKind,
    /// Entries it created.
    pub created: ByKind,
    /// Entries it deleted.
    pub deleted: ByKind,
    /// Regular files whose data it wrote.
    pub transferred: AtomicU64,
    /// The sum of the sizes of the regular files considered.
    pub total_size: AtomicU64,
    /// The sum of the sizes of those written.
    pub transferred_size: AtomicU64,
    /// Entries listed so far (what `--info=progress2`'s `ir-chk=` counts against).
    pub listed: AtomicU64,
    /// Entries decided and carried out so far.
    pub checked: AtomicU64,
    /// The sizes of the regular files and symlinks among them (written or found up to date).
    pub checked_size: AtomicU64,
}

/// 1,234,567 (rsync's thousands separators).
pub(super) fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// 1,234,567.89: a figure with two decimals, its whole part grouped as [`group`] does
/// (rsync's comma_dnum, for rates and the speedup).
pub(super) fn group_decimal(x: f64) -> String {
    let text = format!("{:.2}", x.max(0.0));
    let (whole, frac) = text.split_once('.').unwrap_or((&text, "00"));
    match whole.parse::<u64>() {
        Ok(n) => format!("{}.{frac}", group(n)),
        Err(_) => text,
    }
}

impl ByKind {
    /// `{"total": N, "reg": A, "dir": B, "link": C, "special": D}` (`--json`).
    fn to_json(&self) -> serde_json::Value {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "total": self.total(),
            "reg": load(&self.reg),
            "dir": load(&self.dir),
            "link": load(&self.link),
            "special": load(&self.special),
        })
    }
}

impl Stats {
    /// `--stats`' figures as one object (`--json`): the entries considered, created and
    /// deleted by kind, the regular files transferred, and the sizes.
    pub fn to_json(&self) -> serde_json::Value {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "files": self.files.to_json(),
            "created": self.created.to_json(),
            "deleted": self.deleted.to_json(),
            "transferred": load(&self.transferred),
            "total_size": load(&self.total_size),
            "transferred_size": load(&self.transferred_size),
        })
    }

    /// `--stats`' lines (rsync's wording; the protocol's own figures, which a local run
    /// through one process does not have, are given as the data moved).
    pub fn report(&self, seconds: f64) -> Vec<String> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let total = load(&self.total_size);
        let sent = load(&self.transferred_size);
        vec![
            String::new(),
            format!("Number of files: {}", self.files.show()),
            format!("Number of created files: {}", self.created.show()),
            format!("Number of deleted files: {}", self.deleted.show()),
            format!(
                "Number of regular files transferred: {}",
                group(load(&self.transferred))
            ),
            format!("Total file size: {} bytes", group(total)),
            format!("Total transferred file size: {} bytes", group(sent)),
            format!("Literal data: {} bytes", group(sent)),
            "Matched data: 0 bytes".to_string(),
            format!("Elapsed time: {seconds:.3} seconds"),
        ]
    }

    /// `-v`'s last two lines: what moved, and the speedup (total size over data moved).
    pub fn totals(&self, seconds: f64, dry_run: bool) -> Vec<String> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let total = load(&self.total_size);
        let sent = load(&self.transferred_size);
        let rate = sent as f64 / seconds.max(1e-6);
        let speedup = total as f64 / (sent.max(1)) as f64;
        let dry = if dry_run { " (DRY RUN)" } else { "" };
        vec![
            String::new(),
            format!(
                "sent {} bytes  received {} bytes  {} bytes/sec",
                group(sent),
                group(0),
                group_decimal(rate)
            ),
            format!(
                "total size is {}  speedup is {}{dry}",
                group(total),
                group_decimal(speedup)
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_three() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
    }

    #[test]
    fn rates_are_grouped_with_two_decimals() {
        assert_eq!(group_decimal(0.0), "0.00");
        assert_eq!(group_decimal(764.0), "764.00");
        assert_eq!(group_decimal(1234.567), "1,234.57");
        assert_eq!(group_decimal(90_751_203.49), "90,751,203.49");
    }

    #[test]
    fn kinds_present_are_listed() {
        let k = ByKind::default();
        assert_eq!(k.show(), "0");
        k.add(Kind::File);
        k.add(Kind::File);
        k.add(Kind::Dir);
        assert_eq!(k.show(), "3 (reg: 2, dir: 1)");
    }
}
