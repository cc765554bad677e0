//! `ringio bench gen DIR`: a seeded, deterministic workload tree.

use std::path::PathBuf;

use anyhow::Result;
use ringio_lab::gen::{generate, Shape};

use crate::units::parse_size;

/// `ringio bench gen`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The same seed makes the same tree (names, sizes, bytes, modes, links, \
mtimes) on every machine; the bytes are incompressible. DIR must be new or empty."
)]
pub struct Args {
    /// Where to make the tree.
    pub dir: PathBuf,
    /// Number of files.
    #[arg(long, value_name = "N")]
    pub files: u64,
    /// Bytes per file (uniform trees), e.g. 32K, 1M.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, required_unless_present = "mix")]
    pub size: Option<u64>,
    /// Deepest directory nesting (uniform trees).
    #[arg(long, value_name = "D", default_value_t = 1)]
    pub depth: u32,
    /// Directories to spread the files over (uniform trees; 0: all in DIR).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub dirs: u64,
    /// A realistic tree instead: long-tailed sizes, a skewed directory tree, symlinks (a few
    /// dangling) and some hard links.
    #[arg(long, conflicts_with_all = ["size", "dirs"])]
    pub mix: bool,
    /// The seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: &Args) -> Result<i32> {
    let shape = if args.mix {
        Shape::Mix { files: args.files }
    } else {
        Shape::Uniform {
            files: args.files,
            size: args.size.unwrap_or(0),
            dirs: args.dirs,
            depth: args.depth,
        }
    };
    let g = generate(&args.dir, &shape, args.seed)?;
    println!(
        "made {} files ({} bytes), {} directories, {} symlinks, {} hard links in {}",
        g.files,
        g.bytes,
        g.dirs,
        g.symlinks,
        g.hard_links,
        args.dir.display()
    );
    Ok(0)
}
