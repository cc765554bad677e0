//! `ringio bench`: workload generation and side-by-side benchmarks.

pub mod copy;
pub mod gen;
pub mod mpi_sim;
pub mod report;
pub mod server;
mod suite;
pub mod sync;
pub mod verify;

/// `ringio bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Generate a seeded, deterministic workload tree (uniform, or a realistic mix).
    Gen(gen::Args),
    /// Time ringio's engines and the peer copiers over a tree, verifying every copy.
    Copy(copy::Args),
    /// Time ringio sync, cp --resume and the peer syncers in five scenarios (first sync,
    /// no change, 1% rewritten, 10% added and deleted, a directory renamed), verifying each.
    Sync(sync::Args),
    /// Time `ringio verify --manifest` and the checksum tools' `-c` (xxhsum, b3sum,
    /// sha256sum) on the same trees, for each algorithm.
    Verify(verify::Args),
    /// Load every FSM server model at several client counts.
    Server(server::Args),
    /// The bare cost of a one-byte round trip (socketpair, loopback TCP): the servers' floor.
    Loopback(server::LoopbackArgs),
    /// `cp --mpi` at 16 to 4,096 virtual ranks, simulated: termination latency, steal
    /// success, messages per rank, idle time, files/s against the metadata server's limit.
    MpiSim(mpi_sim::Args),
    /// The tables of `bench copy`, `sync` and `server` made again from their JSON, as
    /// Markdown; or the marked tables of a Markdown file regenerated (--update) or checked
    /// (--check).
    Report(report::Args),
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    match &args.command {
        Command::Gen(a) => gen::run(a),
        Command::Copy(a) => copy::run(a),
        Command::Sync(a) => sync::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Server(a) => server::run(a),
        Command::Loopback(a) => server::run_loopback(a),
        Command::MpiSim(a) => mpi_sim::run(a),
        Command::Report(a) => report::run(a),
    }
}
