//! `ringio`: the command-line front end. Parsing and printing only; the work is in the library
//! crates.

mod bench;
mod cli;
mod cp;
mod cp_mpi;
mod dup;
mod load;
mod man;
mod progress;
mod read;
mod serve;
mod signals;
mod syscost;
mod units;
mod verify;
mod write;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Cp(args) if args.mpi => cp_mpi::run(args),
        Command::Cp(args) => cp::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Dup(args) => dup::run(args),
        Command::Read(args) => read::run(args),
        Command::Write(args) => write::run(args),
        Command::Syscost(args) => syscost::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Load(args) => load::run(args),
        Command::Man { dir } => man::run(dir),
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "ringio",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("ringio: {err}");
            std::process::exit(1);
        }
    }
}
