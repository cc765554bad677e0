//! What `--help` and the man pages add after a command's options: examples and the exit status.
//! One table, so that the two cannot disagree.

use clap::Command;

/// One command's examples and exit status.
pub struct Usage {
    /// The command's path below `ringio`, words joined by spaces (`bench copy`).
    pub command: &'static str,
    /// Command lines and what each does.
    pub examples: &'static [(&'static str, &'static str)],
    /// What each exit status means.
    pub exit_status: &'static str,
}

/// The exit status of a command that either works or says why not.
const WORKS_OR_NOT: &str = "0 when it worked; 1 when it failed, with a message saying why; 2 for \
a usage error (an unknown option, a value out of range).";

/// Every command that has examples; the others get [`WORKS_OR_NOT`].
pub const USAGES: &[Usage] = &[
    Usage {
        command: "cp",
        examples: &[
            (
                "ringio cp -a src/ /backup/src",
                "copy a tree with all metadata",
            ),
            (
                "ringio cp -aT --resume src/ /backup/src",
                "finish an interrupted `cp -a src/ /backup/src`; files already complete are kept",
            ),
            (
                "ringio cp -a --atomic --fsync conf/ /etc/app/",
                "readers never see a half-written file; durable at exit",
            ),
            (
                "ringio cp -r --progress --verify big/ /mnt/usb/",
                "show progress, then compare the copy with its source",
            ),
            (
                "ringio cp -a --hash blake3 --manifest card.b3 --tee /mnt/b/card --verify --uncached /media/card /mnt/a/card",
                "offload to two disks in one read of the card, with a manifest b3sum -c checks; re-read both from the disks",
            ),
            (
                "ln -s \"$(command -v ringio)\" ~/bin/cp",
                "run ringio as GNU cp: the same options, messages and exit status",
            ),
        ],
        exit_status: "0 when every entry was copied; 1 when any entry failed (the copy goes on \
with the rest and says why for each), and for a usage error, as GNU cp. Stopped by SIGINT or \
SIGTERM, it removes the file it was writing and dies by that signal (the shell sees 130 or 143). \
An unknown --hash or --manifest-format is 2.",
    },
    Usage {
        command: "verify",
        examples: &[
            (
                "ringio verify src/ /backup/src",
                "compare two trees: content and metadata",
            ),
            (
                "ringio verify --content-only src/ copy/",
                "compare names, types, sizes and bytes only",
            ),
            (
                "ringio verify --manifest card.b3 --uncached /mnt/b/card",
                "check a tree against a manifest (sum, JSON or ASC MHL), reading the disk",
            ),
            (
                "ringio verify -v --progress --manifest SHA256SUMS dir/",
                "the same with a bar and ETA on the terminal; -v names the symlinks and special files no manifest covers",
            ),
        ],
        exit_status: "0 when the trees are the same; 1 when they differ (every difference is \
printed); 2 when the comparison cannot run.",
    },
    Usage {
        command: "dup",
        examples: &[
            (
                "ringio dup --method copy-range big.iso copy.iso",
                "duplicate one file one way",
            ),
            (
                "ringio dup --compare big.iso copy.iso",
                "time every method, then write the copy with the fastest",
            ),
        ],
        exit_status: WORKS_OR_NOT,
    },
    Usage {
        command: "read",
        examples: &[
            (
                "ringio read --bs 1M --method uring big.iso",
                "read a file, print its XOR and MiB/s",
            ),
            (
                "ringio read --cold --sweep big.iso",
                "find the best block size, uncached",
            ),
        ],
        exit_status: "0 when the file was read whole; 1 when it could not be read, or changed \
size while read; 2 for a usage error.",
    },
    Usage {
        command: "write",
        examples: &[(
            "ringio write --bs 1M --count 1024 big.bin",
            "write 1 GiB of random bytes",
        )],
        exit_status: WORKS_OR_NOT,
    },
    Usage {
        command: "bench copy",
        examples: &[
            (
                "ringio bench copy --workload src-tree --tools ringio,cp,rsync --runs 5",
                "time copiers side by side on a real tree, every copy verified",
            ),
            (
                "ringio bench copy --workload 1g --cold --json cold.json",
                "the same with caches dropped before every run",
            ),
        ],
        exit_status: WORKS_OR_NOT,
    },
    Usage {
        command: "bench report",
        examples: &[
            (
                "ringio bench report warm.json cold.json",
                "the tables of two runs again, as Markdown",
            ),
            (
                "ringio bench report warm.json --summary ringio --against cp,xcp",
                "a row per workload: ringio against the fastest of cp and xcp",
            ),
            (
                "ringio bench report --update docs/BENCHMARKS.md",
                "regenerate every marked table of a Markdown file from its JSON",
            ),
        ],
        exit_status: "0 when the tables were written, or all agree with their JSON; 1 when a \
block differs from its JSON (--check), or a file cannot be read or is not a benchmark's JSON; \
2 for a usage error.",
    },
    Usage {
        command: "serve",
        examples: &[(
            "ringio serve --model uring --addr 127.0.0.1:9090",
            "serve the FSM protocol with one io_uring event loop",
        )],
        exit_status: "0 after a clean stop on SIGINT or SIGTERM; 1 when it cannot listen \
(the reason is printed); 2 for a usage error.",
    },
    Usage {
        command: "load",
        examples: &[(
            "ringio load --clients 1000 --duration 5s",
            "load a server with verifying clients; req/s and latency",
        )],
        exit_status: "0 when every reply was right; 1 when a reply was wrong or late, or a \
client could not connect (the first reason is printed); 2 for a usage error.",
    },
];

/// The examples and exit status of the command at `path`, if it has examples.
pub fn usage_of(path: &str) -> Option<&'static Usage> {
    USAGES.iter().find(|u| u.command == path)
}

/// The exit status of the command at `path`.
pub fn exit_status_of(path: &str) -> &'static str {
    usage_of(path).map_or(WORKS_OR_NOT, |u| u.exit_status)
}

/// `--help` (the long form) of every command with examples ends with them and its exit
/// status, after the command's own notes. `path` is `cmd`'s own path below ringio ("" for
/// ringio itself, "cp" for ringio run as cp).
pub fn in_long_help(cmd: Command, path: &str) -> Command {
    fn walk(mut cmd: Command, path: &str) -> Command {
        if let Some(usage) = usage_of(path) {
            let mut text = cmd
                .get_after_help()
                .map(|notes| format!("{notes}\n\n"))
                .unwrap_or_default();
            text.push_str("Examples:\n");
            for (line, what) in usage.examples {
                text.push_str(&format!("  {line}\n      {what}\n"));
            }
            text.push_str(&format!("\nExit status: {}", usage.exit_status));
            cmd = cmd.after_long_help(text);
        }
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in names {
            let sub_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path} {name}")
            };
            cmd = cmd.mut_subcommand(&name, |sub| walk(sub, &sub_path));
        }
        cmd
    }
    walk(cmd, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every table entry names a command that exists, and its examples run that command.
    #[test]
    fn every_usage_names_a_real_command() {
        let top = crate::cli::Cli::command();
        for usage in USAGES {
            let mut cmd = &top;
            for word in usage.command.split(' ') {
                cmd = cmd
                    .find_subcommand(word)
                    .unwrap_or_else(|| panic!("no command {:?}", usage.command));
            }
            for (line, _) in usage.examples {
                let runs = line.starts_with(&format!("ringio {} ", usage.command))
                    || line.contains("ringio");
                assert!(runs, "{line:?} does not run ringio {}", usage.command);
            }
        }
    }

    #[test]
    fn long_help_ends_with_examples_and_exit_status() {
        let mut top = in_long_help(crate::cli::Cli::command(), "");
        let cp = top.find_subcommand_mut("cp").expect("cp");
        let help = cp.render_long_help().to_string();
        assert!(
            help.contains("Examples:\n  ringio cp -a src/ /backup/src\n"),
            "{help}"
        );
        assert!(
            help.contains("Exit status: 0 when every entry was copied"),
            "{help}"
        );
        // The command's own notes stay, before them.
        assert!(
            help.contains("Copying onto an existing directory"),
            "{help}"
        );
    }
}
