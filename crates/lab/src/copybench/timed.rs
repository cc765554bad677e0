//! One timed run of a tool, and its verdict: the exit status and `ringio verify`'s comparison
//! of the destination with the source, for what the tool promises.

use std::path::Path;
use std::process::Command;

use ringio_base::child::{self, ChildRun};
use ringio_copy::verify::verify;

use super::results::{metadata_checked, Run};
use super::tools::Tool;
use crate::error::LabError;

/// Runs `tool` (installed as `program`) from `src` to `dst`: its arguments with `{src}` and
/// `{dst}` filled in, timed by wait4.
pub fn run_tool(tool: &Tool, program: &Path, src: &Path, dst: &Path) -> Result<ChildRun, LabError> {
    let args: Vec<String> = tool
        .args
        .iter()
        .map(|a| {
            a.replace("{src}", &src.to_string_lossy())
                .replace("{dst}", &dst.to_string_lossy())
        })
        .collect();
    child::run(Command::new(program).args(&args)).map_err(|e| LabError::io("run", program, e))
}

/// The record of a timed run: its time and usage, and whether it exited 0 and left `dst`
/// equal to `src` in everything `tool` promises (a reference tool copies nothing and is not
/// compared). The first five differences are kept, with their total.
pub fn judge(tool: &Tool, done: &ChildRun, src: &Path, dst: &Path) -> Run {
    let mut problems = Vec::new();
    if !done.status.success() {
        problems.push(format!(
            "exit status {}: {}",
            done.status,
            done.stderr_text()
        ));
    }
    if tool.reference {
        return Run {
            seconds: done.usage.wall.as_secs_f64(),
            usage: done.usage.clone(),
            exit_code: done.status.code(),
            ok: problems.is_empty(),
            problems,
            verified: "none (a reference: reads the source, copies nothing)".into(),
            metadata_checked: Vec::new(),
        };
    }
    match verify(src, dst, &tool.keeps, &mut |d| {
        if problems.len() < 5 {
            problems.push(d.to_string());
        }
    }) {
        Ok(report) if !report.is_same() && problems.len() >= 5 => problems.push(format!(
            "... {} differences in all",
            report.total_differences
        )),
        Ok(_) => {}
        Err(e) => problems.push(e.to_string()),
    }
    let metadata = metadata_checked(&tool.keeps);
    Run {
        seconds: done.usage.wall.as_secs_f64(),
        usage: done.usage.clone(),
        exit_code: done.status.code(),
        ok: done.status.success() && problems.is_empty(),
        problems,
        verified: if metadata.is_empty() {
            "content"
        } else {
            "content+metadata"
        }
        .into(),
        metadata_checked: metadata,
    }
}
