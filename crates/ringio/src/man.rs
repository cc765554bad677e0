//! `ringio man DIR`: the manual pages, from the same clap definitions as `--help`, with the
//! examples and exit status of [`crate::examples`].

use ringio_copy::quote::quote;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::{Command, CommandFactory};
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

use crate::cli::Cli;
use crate::examples;

/// Writes `ringio.1` and `ringio-<command>.1` for every subcommand, nested ones included
/// (`ringio-bench-copy.1`), into `dir` (created if missing).
pub fn run(dir: &Path) -> Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", quote(&dir)))?;
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    write_pages(&top, "", dir)?;
    println!(
        "ringio: wrote ringio.1 and a ringio-<command>.1 for every command into {}",
        quote(&dir)
    );
    Ok(0)
}

/// Writes the page of `cmd` (at `path` below ringio) and of every command below it.
fn write_pages(cmd: &Command, path: &str, dir: &Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        write_pages(sub, &sub_path, dir)?;
    }
    let man = Man::new(cmd.clone()).source(format!("ringio {}", env!("CARGO_PKG_VERSION")));
    let file = dir.join(man.get_filename());
    let mut page = Vec::new();
    render(&man, cmd, path, &mut page)?;
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(&page))
        .with_context(|| format!("cannot write {}", quote(&file)))
}

/// One page: clap_mangen's sections, then the command's notes, examples, exit status and
/// related pages.
fn render(man: &Man, cmd: &Command, path: &str, w: &mut dyn Write) -> std::io::Result<()> {
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    let mut roff = Roff::default();
    if let Some(notes) = cmd.get_after_help() {
        roff.control("SH", ["NOTES"]);
        roff.text([roman(notes.to_string())]);
    }
    if let Some(usage) = examples::usage_of(path) {
        roff.control("SH", ["EXAMPLES"]);
        for (line, what) in usage.examples {
            roff.control("TP", []);
            roff.text([bold(*line)]);
            roff.text([roman(*what)]);
        }
    }
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman(examples::exit_status_of(path))]);
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(see_also(cmd, path))]);
    roff.to_writer(w)?;
    man.render_version_section(w)
}

/// The related pages: ringio(1) from a command's page, every command's page from ringio(1),
/// and the tools a command stands in for.
fn see_also(cmd: &Command, path: &str) -> String {
    let mut pages: Vec<String> = if path.is_empty() {
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("ringio-{}(1)", s.get_name()))
            .collect()
    } else {
        vec!["ringio(1)".to_string()]
    };
    match path {
        "cp" => pages.extend(["cp(1)", "rsync(1)"].map(String::from)),
        "verify" => pages.push("diff(1)".into()),
        "read" | "write" | "dup" => pages.push("fio(1)".into()),
        _ => {}
    }
    pages.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every page names ringio and its version in its footer, and has the sections a reader
    /// looks for.
    #[test]
    fn pages_have_examples_exit_status_and_see_also() {
        let dir = tempfile::tempdir().expect("tempdir");
        run(dir.path()).expect("man pages");
        let page = std::fs::read_to_string(dir.path().join("ringio-cp.1")).expect("ringio-cp.1");
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            page.contains(&format!("\"ringio {version}\"")),
            "footer:\n{page}"
        );
        for heading in [
            ".SH EXAMPLES",
            ".SH \"EXIT STATUS\"",
            ".SH \"SEE ALSO\"",
            ".SH NOTES",
        ] {
            assert!(page.contains(heading), "no {heading} in:\n{page}");
        }
        assert!(page.contains("ringio cp \\-a src/ /backup/src"), "{page}");
        let top = std::fs::read_to_string(dir.path().join("ringio.1")).expect("ringio.1");
        assert!(top.contains("ringio\\-cp(1)"), "{top}");
        // A command without examples still says what its exit status means.
        let syscost =
            std::fs::read_to_string(dir.path().join("ringio-syscost.1")).expect("syscost");
        assert!(syscost.contains(".SH \"EXIT STATUS\""), "{syscost}");
    }
}
