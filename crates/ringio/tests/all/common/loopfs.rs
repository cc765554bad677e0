//! A filesystem image (xfs, btrfs) made and loop-mounted for one test: where reflinks exist.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::sys::is_root;

/// A loop-mounted filesystem image; unmounted (lazily) and removed on drop.
#[derive(Debug)]
pub struct LoopFs {
    mount: PathBuf,
    image: PathBuf,
}

impl LoopFs {
    /// Makes a `fs` image ("xfs" with reflink, "btrfs" or "ext4") under `scratch` and mounts it.
    /// Errors say why it cannot be done here (not root, no mkfs, no loop devices).
    pub fn new(scratch: &Path, fs: &str) -> Result<LoopFs, String> {
        if !is_root() {
            return Err("loop-mounting an image needs root".into());
        }
        let image = scratch.join(format!("{fs}.img"));
        let mount = scratch.join(format!("{fs}-mnt"));
        std::fs::create_dir_all(&mount).map_err(|e| e.to_string())?;
        // xfs refuses filesystems under 300 MiB; the image is sparse, so this costs little.
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        file.set_len(512 << 20).map_err(|e| e.to_string())?;
        drop(file);
        let mkfs = format!("mkfs.{fs}");
        let mut cmd = Command::new(&mkfs);
        match fs {
            "xfs" => cmd.args(["-q", "-m", "reflink=1"]),
            "btrfs" => cmd.args(["-q"]),
            "ext4" => cmd.args(["-q", "-F"]),
            _ => return Err(format!("no recipe for {fs}")),
        };
        let out = cmd
            .arg(&image)
            .output()
            .map_err(|e| format!("{mkfs} is not available: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{mkfs} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let out = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mount)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -o loop failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(LoopFs { mount, image })
    }

    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Flips the first byte of `marker` where it lies on the device (written back first:
    /// `sync`), under the page cache, which keeps the good copy. The image is searched in 4 MiB
    /// steps that overlap by the marker's length.
    pub fn flip_on_device(&self, marker: &[u8]) {
        use std::os::unix::fs::FileExt;
        let synced = Command::new("sync").status().expect("sync");
        assert!(synced.success());
        let image = std::fs::File::open(&self.image).unwrap();
        let mut buf = vec![0u8; 4 << 20];
        let (mut offset, mut at) = (0u64, None);
        while at.is_none() {
            let n = image.read_at(&mut buf, offset).unwrap();
            assert!(n > marker.len(), "the marker is not on the device");
            at = buf[..n]
                .windows(marker.len())
                .position(|w| w == marker)
                .map(|i| offset + i as u64);
            offset += (n - marker.len()) as u64;
        }
        let flipped = [marker[0] ^ 0x20];
        std::fs::OpenOptions::new()
            .write(true)
            .open(&self.image)
            .unwrap()
            .write_at(&flipped, at.unwrap())
            .unwrap();
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// True when every extent of `path` is shared with another file (FIEMAP's SHARED flag), as
/// `filefrag -v` reports it.
pub fn extents_shared(path: &Path) -> Result<bool, String> {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .map_err(|e| format!("filefrag is not available: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let extents: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .filter(|l| l.contains(':'))
        .collect();
    Ok(!extents.is_empty() && extents.iter().all(|l| l.contains("shared")))
}
