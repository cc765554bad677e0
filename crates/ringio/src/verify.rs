//! `ringio verify`. (Scaffold: filled in by the work on its issue.)

/// Options.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> anyhow::Result<i32> {
    anyhow::bail!("'ringio verify' is not built yet")
}
