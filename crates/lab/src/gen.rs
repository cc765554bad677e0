//! `ringio bench gen`: seeded, deterministic workload trees. The same seed builds the same
//! names, sizes, bytes, modes, links and mtimes on every machine; the bytes are incompressible.

use ringio_copy::quote::quote;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::LabError;
use ringio_base::Prng;

/// The shape of a generated tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// `files` files of `size` bytes, spread over `dirs` directories nested up to `depth`
    /// levels (`dirs` 0: all in the root).
    Uniform {
        /// Number of files.
        files: u64,
        /// Bytes per file.
        size: u64,
        /// Directories besides the root.
        dirs: u64,
        /// Deepest nesting of those directories.
        depth: u32,
    },
    /// A realistic tree: `files` files with long-tailed sizes (most small, a few large) in a
    /// skewed directory tree, with some symlinks (a few dangling) and hard links.
    Mix {
        /// Number of files.
        files: u64,
    },
}

/// What a generated tree holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Regular files (hard links counted once).
    pub files: u64,
    /// Directories, the root excluded.
    pub dirs: u64,
    /// Symlinks.
    pub symlinks: u64,
    /// Extra names of hard-linked files.
    pub hard_links: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

/// Builds `shape` at `root`, which must not exist or be an empty directory.
pub fn generate(root: &Path, shape: &Shape, seed: u64) -> Result<Generated, LabError> {
    match fs::read_dir(root) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(LabError::Invalid(format!(
                    "{} is not empty: generate into a new or empty directory",
                    quote(&root)
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(root).map_err(|e| LabError::io("create directory", root, e))?;
        }
        Err(e) => return Err(LabError::io("read directory", root, e)),
    }
    let mut rng = Prng::new(seed);
    let mut g = Generated::default();
    let mut buf = Vec::new();
    match *shape {
        Shape::Uniform {
            files,
            size,
            dirs,
            depth,
        } => {
            let dirs = plan_dirs(&mut rng, dirs, depth.max(1));
            make_dirs(root, &dirs, &mut rng, false)?;
            g.dirs = dirs.len() as u64 - 1;
            let width = files.saturating_sub(1).to_string().len().max(4);
            for i in 0..files {
                let dir = &dirs[(i % dirs.len() as u64) as usize];
                let path = root.join(dir).join(format!("{i:0width$}.bin"));
                write_random(&path, size, &mut rng, &mut buf)?;
                g.files += 1;
                g.bytes += size;
            }
        }
        Shape::Mix { files } => {
            let ndirs = (files / 16).max(1);
            let dirs = plan_dirs(&mut rng, ndirs, 6);
            make_dirs(root, &dirs, &mut rng, true)?;
            g.dirs = dirs.len() as u64 - 1;
            // Skewed fan-out: a few directories take many files, most a handful.
            let weights: Vec<f64> = dirs
                .iter()
                .map(|_| pareto(&mut rng, 1.5).min(100.0))
                .collect();
            let total: f64 = weights.iter().sum();
            let extensions = [".rs", ".c", ".h", ".txt", ".json", ".md", ".py", ""];
            let mut made: Vec<PathBuf> = Vec::new();
            for i in 0..files {
                let mut pick = rng.unit() * total;
                let mut d = 0;
                while d + 1 < dirs.len() && pick >= weights[d] {
                    pick -= weights[d];
                    d += 1;
                }
                let ext = extensions[(rng.next_u64() % extensions.len() as u64) as usize];
                let rel = PathBuf::from(&dirs[d]).join(format!("f{i:06}{ext}"));
                let path = root.join(&rel);
                if i % 200 == 199 && !made.is_empty() {
                    // A hard link to an earlier file.
                    let target = &made[(rng.next_u64() % made.len() as u64) as usize];
                    fs::hard_link(root.join(target), &path)
                        .map_err(|e| LabError::io("link", &path, e))?;
                    g.hard_links += 1;
                    continue;
                }
                if i % 100 == 99 && !made.is_empty() {
                    let target = &made[(rng.next_u64() % made.len() as u64) as usize];
                    let link_target = if i % 500 == 499 {
                        PathBuf::from(format!("missing-{i}"))
                    } else {
                        relative(target, &rel)
                    };
                    symlink(&link_target, &path).map_err(|e| LabError::io("symlink", &path, e))?;
                    g.symlinks += 1;
                    continue;
                }
                let size = long_tailed(&mut rng);
                write_random(&path, size, &mut rng, &mut buf)?;
                let mode = match i % 97 {
                    0 => 0o600,
                    1..=2 => 0o755,
                    _ => 0o644,
                };
                fs::set_permissions(&path, fs::Permissions::from_mode(mode))
                    .map_err(|e| LabError::io("chmod", &path, e))?;
                made.push(rel);
                g.files += 1;
                g.bytes += size;
            }
        }
    }
    set_times(root, &mut rng)?;
    Ok(g)
}

/// A file size as source trees have them: log-normal around 2 KiB (σ = 1.6, clipped to 1 B –
/// 1 MiB), and one file in a thousand large (log-uniform 1–8 MiB).
fn long_tailed(rng: &mut Prng) -> u64 {
    if rng.next_u64() % 1000 == 0 {
        return (f64::from(1u32 << 20) * 8f64.powf(rng.unit())) as u64;
    }
    // Box–Muller: a standard normal from two uniforms.
    let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (2048.0 * (1.6 * z).exp()).clamp(1.0, f64::from(1u32 << 20)) as u64
}

fn pareto(rng: &mut Prng, alpha: f64) -> f64 {
    (1.0 - rng.unit()).powf(-1.0 / alpha)
}

/// `target` as seen from the directory holding `link` (both relative to the root).
fn relative(target: &Path, link: &Path) -> PathBuf {
    let up = link.parent().map_or(0, |p| p.components().count());
    let mut out = PathBuf::new();
    for _ in 0..up {
        out.push("..");
    }
    out.join(target)
}

/// A random tree of `count` directories no deeper than `depth`; parents before children.
/// Index 0 is the root ("").
fn plan_dirs(rng: &mut Prng, count: u64, depth: u32) -> Vec<String> {
    let mut dirs = vec![String::new()];
    let mut open: Vec<(usize, u32)> = vec![(0, 0)];
    for i in 1..=count {
        let (parent, d) = open[(rng.next_u64() % open.len() as u64) as usize];
        let path = if dirs[parent].is_empty() {
            format!("d{i:04}")
        } else {
            format!("{}/d{i:04}", dirs[parent])
        };
        dirs.push(path);
        if d + 1 < depth {
            open.push((dirs.len() - 1, d + 1));
        }
    }
    dirs
}

fn make_dirs(
    root: &Path,
    dirs: &[String],
    rng: &mut Prng,
    odd_modes: bool,
) -> Result<(), LabError> {
    for d in dirs.iter().skip(1) {
        let path = root.join(d);
        fs::create_dir(&path).map_err(|e| LabError::io("create directory", &path, e))?;
        if odd_modes && rng.next_u64() % 50 == 0 {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700))
                .map_err(|e| LabError::io("chmod", &path, e))?;
        }
    }
    Ok(())
}

fn write_random(path: &Path, size: u64, rng: &mut Prng, buf: &mut Vec<u8>) -> Result<(), LabError> {
    use std::io::Write;
    let mut f = fs::File::create(path).map_err(|e| LabError::io("create", path, e))?;
    let mut left = size;
    buf.resize((1 << 20).min(size as usize), 0);
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        f.write_all(&buf[..n])
            .map_err(|e| LabError::io("write", path, e))?;
        left -= n as u64;
    }
    Ok(())
}

/// Old, distinct mtimes with nanoseconds (post-order, so children do not move their parents'),
/// so that a tool that claims to keep them and does not is caught.
fn set_times(root: &Path, rng: &mut Prng) -> Result<(), LabError> {
    fn walk(path: &Path, rng: &mut Prng) -> Result<(), LabError> {
        let mut entries: Vec<_> = fs::read_dir(path)
            .map_err(|e| LabError::io("read directory", path, e))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| LabError::io("read directory", path, e))?;
        entries.sort();
        for entry in entries {
            let meta = fs::symlink_metadata(&entry).map_err(|e| LabError::io("stat", &entry, e))?;
            if meta.is_dir() {
                walk(&entry, rng)?;
            } else {
                stamp(&entry, rng)?;
            }
        }
        stamp(path, rng)
    }
    fn stamp(path: &Path, rng: &mut Prng) -> Result<(), LabError> {
        let sec = 1_500_000_000 + (rng.next_u64() % 100_000_000) as i64;
        let nsec = (rng.next_u64() % 1_000_000_000) as i64;
        let t = rustix::fs::Timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        };
        let times = rustix::fs::Timestamps {
            last_access: t,
            last_modification: t,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &times,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| LabError::io("set times of", path, e.into()))
    }
    walk(root, rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_long_tailed() {
        let mut rng = Prng::new(1);
        let mut sizes: Vec<u64> = (0..20_000).map(|_| long_tailed(&mut rng)).collect();
        sizes.sort_unstable();
        assert!(
            sizes[10_000] > 1 << 10 && sizes[10_000] < 4 << 10,
            "median {}",
            sizes[10_000]
        );
        assert!(sizes[19_999] >= 1 << 20, "largest {}", sizes[19_999]);
        let mean = sizes.iter().sum::<u64>() / sizes.len() as u64;
        assert!(mean < 64 << 10, "mean {mean}");
    }

    #[test]
    fn relative_links_climb_out_of_their_directory() {
        assert_eq!(
            relative(Path::new("a/f"), Path::new("b/c/l")),
            Path::new("../../a/f")
        );
        assert_eq!(relative(Path::new("f"), Path::new("l")), Path::new("f"));
    }
}
