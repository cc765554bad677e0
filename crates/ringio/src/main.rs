//! `ringio`: the command-line front end. Parsing and printing only; the work is in the library
//! crates.

mod cli;
mod cp;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Cp(args) => cp::run(args),
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
