//! The machine a benchmark ran on: CPU, kernel, memory, and the filesystem and device under a
//! path. Recorded with every result.

use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What was measured on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Total memory, MiB.
    pub memory_mib: u64,
    /// Filesystem type under the benchmark directory.
    pub filesystem: String,
    /// Its mount options.
    pub mount_options: String,
    /// The mounted device.
    pub device: String,
    /// The device's rotational flag and model, where sysfs has them.
    pub device_info: String,
}

fn first_line_with(path: &str, prefix: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(|l| l.split_once(':').map_or(l, |(_, v)| v).trim().to_string())
}

/// Describes this machine and the filesystem holding `dir`.
pub fn describe(dir: &Path) -> Machine {
    let (filesystem, mount_options, device) = mount_of(dir).unwrap_or_default();
    let device_info = device_info(&device);
    Machine {
        cpu: first_line_with("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown".into()),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        memory_mib: first_line_with("/proc/meminfo", "MemTotal")
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024),
        filesystem,
        mount_options,
        device,
        device_info,
    }
}

/// (fs type, options, source device) of the mount holding `dir`, from /proc/self/mountinfo.
fn mount_of(dir: &Path) -> Option<(String, String, String)> {
    let real = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mount_in(&info, &real)
}

/// The mount in `mountinfo` text that holds `path` (canonical): the longest mount point that
/// prefixes it, the later one on a tie (it is mounted over the earlier).
fn mount_in(mountinfo: &str, path: &Path) -> Option<(String, String, String)> {
    let mut best: Option<(usize, (String, String, String))> = None;
    for line in mountinfo.lines() {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        let (point, options) = (unescape(fields.get(4)?), fields.get(5)?);
        let rest: Vec<&str> = right.split_whitespace().collect();
        let depth = point.components().count();
        if path.starts_with(&point) && best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            let fs = rest.first().unwrap_or(&"").to_string();
            let dev = unescape(rest.get(1).unwrap_or(&""));
            let super_opts = rest.get(2).unwrap_or(&"");
            let dev = dev.to_string_lossy().into_owned();
            best = Some((depth, (fs, format!("{options},{super_opts}"), dev)));
        }
    }
    best.map(|(_, m)| m)
}

/// Undoes mountinfo's escapes: the kernel writes space, tab, newline and backslash in paths as
/// `\040`, `\011`, `\012` and `\134`.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) if bytes[i] == b'\\' => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

fn device_info(device: &str) -> String {
    let Some(name) = device.strip_prefix("/dev/") else {
        return String::new();
    };
    // A partition's queue lives with its parent disk.
    let base: String = name
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .to_string();
    for disk in [name, base.as_str(), base.trim_end_matches('p')] {
        let rot = std::fs::read_to_string(format!("/sys/block/{disk}/queue/rotational"));
        if let Ok(rot) = rot {
            let model = std::fs::read_to_string(format!("/sys/block/{disk}/device/model"))
                .map(|m| m.trim().to_string())
                .unwrap_or_default();
            return format!("{disk}: rotational={} {model}", rot.trim())
                .trim()
                .to_string();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
40 22 0:35 / /mnt/my\\040disk rw,nosuid shared:20 - xfs /dev/sdb1 rw,attr2
41 22 0:36 / /mnt/my rw shared:21 - tmpfs tmpfs rw,size=1024k
42 40 0:37 / /mnt/my\\040disk/back\\134slash rw - btrfs /dev/my\\040dev rw
";

    #[test]
    fn escaped_mount_points_match() {
        let m = |p: &str| mount_in(MOUNTINFO, Path::new(p)).unwrap();
        assert_eq!(m("/mnt/my disk/a").0, "xfs");
        assert_eq!(m("/mnt/my disk/a").1, "rw,nosuid,rw,attr2");
        assert_eq!(m("/mnt/my/a").0, "tmpfs");
        assert_eq!(m("/mnt/mydisk").0, "ext4");
        assert_eq!(m("/mnt/my disk/back\\slash/x").0, "btrfs");
        assert_eq!(m("/mnt/my disk/back\\slash/x").2, "/dev/my dev");
        assert_eq!(m("/home").2, "/dev/sda1");
    }

    #[test]
    fn unescape_leaves_other_backslashes() {
        assert_eq!(unescape("a\\040b\\x\\04"), Path::new("a b\\x\\04"));
    }
}
