//! The machine a benchmark ran on: CPU, kernel, memory, and the filesystem and device under a
//! path. Recorded with every result.

use std::path::Path;

use serde::Serialize;

/// What was measured on.
#[derive(Debug, Clone, Serialize)]
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

/// (fs type, options, source device) of the mount holding `dir`, from /proc/self/mountinfo:
/// the longest mount point that prefixes the canonical path.
fn mount_of(dir: &Path) -> Option<(String, String, String)> {
    let real = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, (String, String, String))> = None;
    for line in info.lines() {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        let (point, options) = (fields.get(4)?, fields.get(5)?);
        let rest: Vec<&str> = right.split_whitespace().collect();
        if real.starts_with(point) && best.as_ref().is_none_or(|(len, _)| point.len() >= *len) {
            let fs = rest.first().unwrap_or(&"").to_string();
            let dev = rest.get(1).unwrap_or(&"").to_string();
            let super_opts = rest.get(2).unwrap_or(&"");
            best = Some((point.len(), (fs, format!("{options},{super_opts}"), dev)));
        }
    }
    best.map(|(_, m)| m)
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
