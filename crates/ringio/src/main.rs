//! `ringio`: the command-line front end. Parsing and printing only; the work is in the library
//! crates.

mod argmatch;
mod argv;
mod bench;
mod cli;
mod cp;
mod cp_mpi;
mod dup;
mod examples;
mod load;
mod log_file;
mod man;
mod popt;
mod progress;
mod read;
mod serve;
mod signals;
mod sync;
mod syscost;
mod units;
mod verify;
mod write;

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command, CpCli, RsyncCli};

fn main() {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let code = if argv::invoked_as_rsync(args.first().map(OsString::as_os_str)) {
        let known = popt::Known::from_command(&RsyncCli::command());
        let rest = popt::preparse(args.split_off(1), &known)
            .unwrap_or_else(|refusal| rsync_refusal(&refusal, "rsync"));
        args.extend(rest);
        match RsyncCli::command().try_get_matches_from(&args) {
            Ok(m) => match RsyncCli::from_arg_matches(&m) {
                Ok(cli) => sync::run(&cli.args, &m, "rsync"),
                Err(e) => sync_usage_error(&e, "rsync"),
            },
            Err(e) => sync_usage_error(&e, "rsync"),
        }
    } else if argv::invoked_as_cp(args.first().map(OsString::as_os_str)) {
        let table = argv::OptionTable::from_command(&CpCli::command(), true);
        let rest = argv::getopt(args.split_off(1), &table, &cli::value_check)
            .unwrap_or_else(|message| usage_failure(&message, "cp"));
        let parsed = examples::in_long_help(CpCli::command(), "cp")
            .try_get_matches_from(std::iter::once(OsString::from("cp")).chain(rest))
            .and_then(|m| CpCli::from_arg_matches(&m).map(|cli| (cli, m)));
        match parsed {
            Ok((mut cli, matches)) => {
                cli.args.note_order(&matches);
                if cli.args.mpi {
                    cp_mpi::run(&cli.args)
                } else {
                    cp::run(&cli.args)
                }
            }
            Err(e) => usage_error(&e, "cp"),
        }
    } else {
        if args.get(1).is_some_and(|a| a == "sync") {
            let mut top = Cli::command();
            top.build();
            let known = top
                .find_subcommand("sync")
                .map(popt::Known::from_command)
                .expect("ringio has a sync subcommand");
            let rest = popt::preparse(args.split_off(2), &known)
                .unwrap_or_else(|refusal| rsync_refusal(&refusal, "ringio sync"));
            args.extend(rest);
        }
        if args.get(1).is_some_and(|a| a == "cp") {
            let mut top = Cli::command();
            // Built, so that `ringio cp` has the --version it inherits.
            top.build();
            let table = top
                .find_subcommand("cp")
                .map(|cp| argv::OptionTable::from_command(cp, false))
                .unwrap_or_default();
            let rest = argv::getopt(args.split_off(2), &table, &cli::value_check)
                .unwrap_or_else(|message| usage_failure(&message, "ringio cp"));
            args.extend(rest);
        }
        let parsed = examples::in_long_help(Cli::command(), "")
            .try_get_matches_from(&args)
            .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
        match parsed {
            Ok((mut cli, matches)) => {
                if let (Command::Cp(cp), Some(m)) =
                    (&mut cli.command, matches.subcommand_matches("cp"))
                {
                    cp.note_order(m);
                }
                match (&cli.command, matches.subcommand_matches("sync")) {
                    (Command::Sync(args), Some(m)) => sync::run(args, m, "ringio sync"),
                    _ => run(cli),
                }
            }
            Err(e) if args.get(1).is_some_and(|a| a == "cp") => usage_error(&e, "ringio cp"),
            Err(e) if args.get(1).is_some_and(|a| a == "sync") => {
                sync_usage_error(&e, "ringio sync")
            }
            Err(e) => e.exit(),
        }
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("{}: {}", argv::program(), one_line(&err));
            std::process::exit(1);
        }
    }
}

/// An error and its causes on one line, each reason once: a context ("cannot write 'F'") gets
/// the reason below it, while a cause whose text the message already holds (a library error
/// that names its reason) adds nothing. Reasons read as cp prints them, without Rust's
/// " (os error N)".
fn one_line(err: &anyhow::Error) -> String {
    let bare = |text: String| match text.rsplit_once(" (os error ") {
        Some((reason, _)) => reason.to_string(),
        None => text,
    };
    let mut line = bare(err.to_string());
    for cause in err.chain().skip(1) {
        let reason = bare(cause.to_string());
        if !line.contains(&reason) {
            line.push_str(": ");
            line.push_str(&reason);
        }
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Cp(args) if args.mpi => cp_mpi::run(args),
        Command::Cp(args) => cp::run(args),
        Command::Sync(args) => sync::run(args, &clap::ArgMatches::default(), "ringio sync"),
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
    }
}

/// An rsync command line refused as rsync refuses it: the message, rsync's line for its
/// exit code, and that code.
fn rsync_refusal(refusal: &popt::Refusal, program: &str) -> ! {
    let why = match refusal.code {
        4 => "requested action not supported",
        _ => "syntax or usage error",
    };
    if refusal.bare {
        eprintln!("{}", refusal.message);
    } else {
        eprintln!("{program}: {}", refusal.message);
    }
    eprintln!("{program} error: {why} (code {})", refusal.code);
    std::process::exit(refusal.code);
}

/// rsync's usage errors: the message, and exit status 1 (rsync's for syntax); --help and
/// --version print and exit 0.
fn sync_usage_error(err: &clap::Error, program: &str) -> ! {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        err.exit();
    }
    let text = err.render().to_string();
    let message = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ");
    eprintln!("{program}: {message}");
    eprintln!(
        "{program} error: syntax or usage error (code {})",
        sync::SYNTAX
    );
    std::process::exit(sync::SYNTAX);
}

/// cp's usage errors that clap finds (values of ringio's own options): `cp: MESSAGE` and a
/// pointer to --help, exit status 1 (GNU's, where clap would exit 2). --help and --version
/// print and exit 0.
fn usage_error(err: &clap::Error, command: &str) -> ! {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        err.exit();
    }
    let text = err.render().to_string();
    // clap's text without its usage and help pointer: the message and any possible values.
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let message = message.join("\n");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    usage_failure(message.as_bytes(), command)
}

/// Prints a usage error as GNU cp does (`cp: MESSAGE`, then `Try 'cp --help' for more
/// information.`) and exits with status 1. The message is bytes: getopt repeats a bad option
/// as it was given.
fn usage_failure(message: &[u8], command: &str) -> ! {
    use std::io::Write;
    let mut text = format!("{}: ", argv::program()).into_bytes();
    text.extend_from_slice(message);
    text.extend_from_slice(format!("\nTry '{command} --help' for more information.\n").as_bytes());
    let _ = std::io::stderr().lock().write_all(&text);
    std::process::exit(1);
}
