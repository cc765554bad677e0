//! What a copy promised, as the comparison that checks it: derived from the plan in one place,
//! so `cp --verify` never reports as a difference what an option asked for.

use crate::plan::{CopyPlan, Dereference, LinkMode, Sparse};

use super::report::{Follow, MadeAs, VerifyOptions};

impl VerifyOptions {
    /// What `plan` promised about each destination root, compared with its source:
    /// - the metadata its `--preserve` set keeps (the owner only as root: anyone else keeps the
    ///   group alone), hard-link grouping under `--preserve=links`, holes unless
    ///   `--sparse=never`;
    /// - under `-L` the copy of what each symlink points to, under `-H` (and without -r) of
    ///   what the command-line operands point to;
    /// - under `-l` the source's own inodes, under `-s` symlinks that lead to the source's
    ///   entries, rather than copies (directories are still made and compared);
    /// - under `--attributes-only` metadata, not content.
    pub fn promised_by(plan: &CopyPlan) -> VerifyOptions {
        let keep = plan.preserve;
        let root = rustix::process::geteuid().is_root();
        VerifyOptions {
            mode: keep.mode,
            ownership: keep.ownership && root,
            mtime: keep.timestamps,
            xattrs: keep.xattr,
            hard_links: keep.links,
            sparseness: plan.sparse != Sparse::Never && !plan.attributes_only,
            content: !plan.attributes_only,
            follow: match plan.dereference {
                Dereference::Never => Follow::Never,
                Dereference::CommandLine => Follow::Roots,
                Dereference::Always => Follow::Always,
            },
            made_as: match plan.link {
                LinkMode::Copy => MadeAs::Copies,
                LinkMode::Hard => MadeAs::HardLinks,
                LinkMode::Symbolic => MadeAs::SymbolicLinks,
            },
            ..VerifyOptions::content_only()
        }
    }
}
