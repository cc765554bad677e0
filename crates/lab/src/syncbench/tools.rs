//! The syncers `bench sync` knows, found in PATH (ringio's own `sync` when this ringio has
//! one), with what each one's result is checked for.

use std::path::Path;
use std::process::{Command, Stdio};

use ringio_copy::verify::VerifyOptions;

use crate::copybench::{command_tool, find_program, Tool};
use crate::error::LabError;

/// The tool names `bench sync --tools` knows, for help texts.
pub const SYNC_TOOLS: &str = "ringio-sync, ringio-resume, rsync, rclone, cmd:NAME=PROGRAM [ARG...], run as PROGRAM ARG... SRC/ DST/";

/// The default tools, in table order.
pub const DEFAULT_SYNC_TOOLS: [&str; 4] = ["ringio-sync", "ringio-resume", "rsync", "rclone"];

/// What `rsync -a` promises: content, mode, owner and group, mtime (not hard links, xattrs or
/// holes, which need -H, -X and -S). `ringio sync -a` is held to the same.
pub fn sync_archive() -> VerifyOptions {
    VerifyOptions {
        hard_links: false,
        xattrs: false,
        sparseness: false,
        ..VerifyOptions::archive()
    }
}

/// Resolves one `bench sync --tools` entry. `ringio` is this binary; its `sync` is used when
/// `ringio sync --help` succeeds.
pub fn resolve_sync_tool(spec: &str, ringio: &Path) -> Result<Tool, LabError> {
    let tool = |program, args: &[&str], install: &str, keeps| Tool {
        name: spec.to_string(),
        program,
        args: args.iter().map(|s| s.to_string()).collect(),
        install: install.to_string(),
        keeps,
        reference: false,
    };
    Ok(match spec {
        "ringio-sync" => {
            let has_sync = Command::new(ringio)
                .args(["sync", "--help"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            tool(
                has_sync.then(|| ringio.to_path_buf()),
                &["sync", "-a", "--delete", "{src}/", "{dst}/"],
                "`ringio sync --help` failed: this ringio has no sync command",
                sync_archive(),
            )
        }
        // cp's way to bring a copy up to date: -T makes DST the copy itself (not DST/SRC), as
        // the syncers' SRC/ DST/ do. It deletes nothing.
        "ringio-resume" => tool(
            Some(ringio.to_path_buf()),
            &["cp", "-a", "--resume", "-T", "{src}", "{dst}"],
            "cargo build --release",
            VerifyOptions::archive(),
        ),
        "rsync" => tool(
            find_program("rsync"),
            &["-a", "--delete", "{src}/", "{dst}/"],
            "apt-get install rsync, or run bench/install-peers.sh",
            sync_archive(),
        ),
        // rclone keeps content and mtimes, not modes or owners; symlinks it skips unless told.
        "rclone" => tool(
            find_program("rclone"),
            &["sync", "{src}", "{dst}"],
            "apt-get install rclone",
            VerifyOptions::content_only(),
        ),
        // A syncer is given the trees' contents (`SRC/ DST/`), as rsync and ringio sync are.
        _ if spec.starts_with("cmd:") => {
            let mut tool = command_tool(spec)?;
            for arg in &mut tool.args {
                if arg == "{src}" || arg == "{dst}" {
                    arg.push('/');
                }
            }
            tool
        }
        _ => {
            return Err(LabError::Invalid(format!(
                "unknown sync tool '{spec}' (known: {SYNC_TOOLS})"
            )))
        }
    })
}
