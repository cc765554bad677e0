//! The copiers `bench copy` knows: ringio's engines and the peers, found in PATH, with what
//! each one's copies are checked for.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ringio_copy::verify::VerifyOptions;

use crate::error::LabError;

/// A copier under test.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The name in tables (`cp-a`, `ringio:aio`, ...).
    pub name: String,
    /// The program, or `None` when it is not installed.
    pub program: Option<PathBuf>,
    /// Arguments, with `{src}` and `{dst}` placeholders.
    pub args: Vec<String>,
    /// How to get it, said when it is missing.
    pub install: String,
    /// What its copies are checked for beyond content.
    pub keeps: VerifyOptions,
    /// A reference, not a copier: `cat` reads every source file to /dev/null. Its runs are
    /// not verified (there is no copy) and not ranked; copiers are compared against it.
    pub reference: bool,
}

/// Looks for `name` in PATH and in ~/.cargo/bin.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// The tool names `--tools` knows, for help texts.
pub const KNOWN_TOOLS: &str = "ringio, ringio-a, ringio:ENGINE, ringio-hash:ALGO, cp, cp-a, \
     cp-a+b3sum, cp-a+xxhsum, rsync, xcp, fcp, cpz, wcp, cat, cmd:NAME=PROGRAM [ARG...]";

/// Resolves one `--tools` entry. `ringio` is this binary.
pub fn resolve_tool(spec: &str, ringio: &Path) -> Result<Tool, LabError> {
    let hint = "or run bench/install-peers.sh";
    let archive = VerifyOptions::archive();
    let content = VerifyOptions::content_only();
    let peer = |name: &str, args: &[&str], install: String, keeps: VerifyOptions| Tool {
        name: spec.to_string(),
        program: find_program(name),
        args: args.iter().map(|s| s.to_string()).collect(),
        install,
        keeps,
        reference: false,
    };
    let tool = match spec {
        "cp" => peer(
            "cp",
            &["-r", "{src}", "{dst}"],
            "apt-get install coreutils".into(),
            content,
        ),
        "cp-a" => peer(
            "cp",
            &["-a", "{src}", "{dst}"],
            "apt-get install coreutils".into(),
            archive,
        ),
        // rsync -a keeps modes, owners and times, but not hard links (-H), xattrs (-X) or
        // holes (-S).
        "rsync" => peer(
            "rsync",
            &["-a", "--inplace", "-W", "{src}/", "{dst}"],
            format!("apt-get install rsync, {hint}"),
            VerifyOptions {
                hard_links: false,
                xattrs: false,
                sparseness: false,
                ..archive
            },
        ),
        "xcp" => peer(
            "xcp",
            &["-r", "{src}", "{dst}"],
            format!("cargo install xcp, {hint}"),
            content,
        ),
        "fcp" | "cpz" | "wcp" => peer(
            spec,
            &["{src}", "{dst}"],
            // bench/install-peers.sh installs fcp and cpz, not wcp.
            if spec == "wcp" {
                "cargo install wcp".to_string()
            } else {
                format!("cargo install {spec}, {hint}")
            },
            content,
        ),
        // The floor of a copy: reading its source. `find` hands the files to as few `cat`s as
        // it can, so a tree costs about what reading its files costs.
        "cat" => Tool {
            name: spec.to_string(),
            program: find_program("cat")
                .and(find_program("find"))
                .and_then(|_| find_program("sh")),
            args: [
                "-c",
                "find \"$1\" -type f -exec cat -- {} + > /dev/null",
                "sh",
                "{src}",
            ]
            .map(String::from)
            .to_vec(),
            install: "apt-get install coreutils findutils".into(),
            keeps: content,
            reference: true,
        },
        _ if spec == "ringio"
            || spec == "ringio-a"
            || spec.starts_with("ringio:")
            || spec.starts_with("ringio-a:") =>
        {
            let (name, engine) = spec.split_once(':').unwrap_or((spec, ""));
            let a = name == "ringio-a";
            let mut args = vec!["cp".to_string(), if a { "-a" } else { "-r" }.to_string()];
            if !engine.is_empty() {
                engine.parse::<ringio_copy::Engine>().map_err(|_| {
                    LabError::Invalid(crate::names::unknown(
                        "engine",
                        engine,
                        ringio_copy::Engine::ALL.iter().map(|e| e.name()),
                    ))
                })?;
                args.extend(["--engine".to_string(), engine.to_string()]);
            }
            args.extend(["{src}".to_string(), "{dst}".to_string()]);
            Tool {
                name: spec.to_string(),
                program: Some(ringio.to_path_buf()),
                args,
                install: "cargo build --release".into(),
                keeps: if a { archive } else { content },
                reference: false,
            }
        }
        // One pass: `cp -a` that hashes every file on its way and writes a manifest beside
        // the copy (replaced each run).
        _ if spec.starts_with("ringio-hash:") => {
            let algo = &spec["ringio-hash:".len()..];
            algo.parse::<ringio_copy::digest::Algo>().map_err(|_| {
                LabError::Invalid(crate::names::unknown(
                    "hash",
                    algo,
                    ringio_copy::digest::Algo::ALL.iter().map(|a| a.into()),
                ))
            })?;
            Tool {
                name: spec.to_string(),
                program: Some(ringio.to_path_buf()),
                args: [
                    "cp",
                    "-af",
                    "--hash",
                    algo,
                    "--manifest",
                    "{dst}.sum",
                    "{src}",
                    "{dst}",
                ]
                .map(String::from)
                .to_vec(),
                install: "cargo build --release".into(),
                keeps: archive,
                reference: false,
            }
        }
        // Two passes, the way without ringio: `cp -a`, then a checksum tool over the copy.
        "cp-a+b3sum" | "cp-a+xxhsum" => {
            let (sum, install) = match spec {
                "cp-a+b3sum" => ("b3sum", format!("cargo install b3sum, {hint}")),
                _ => ("xxhsum -H2", format!("apt-get install xxhash, {hint}")),
            };
            let program = sum.split(' ').next().unwrap_or(sum);
            Tool {
                name: spec.to_string(),
                program: find_program(program)
                    .and(find_program("cp"))
                    .and_then(|_| find_program("sh")),
                args: vec![
                    "-c".into(),
                    format!(
                        "cp -a \"$1\" \"$2\" && cd \"$2\" && \
                         find . -type f -print0 | xargs -0 -r {sum} > \"$2.sum\""
                    ),
                    "sh".into(),
                    "{src}".into(),
                    "{dst}".into(),
                ],
                install,
                keeps: archive,
                reference: false,
            }
        }
        _ if spec.starts_with("cmd:") => command_tool(spec)?,
        _ => {
            return Err(LabError::Invalid(format!(
                "unknown tool '{spec}' (known: {KNOWN_TOOLS})"
            )))
        }
    };
    Ok(tool)
}

/// `cmd:NAME=PROGRAM [ARG...]`: any program, checked for content; the words after the program
/// come before SRC and DST.
pub fn command_tool(spec: &str) -> Result<Tool, LabError> {
    let Some((name, command)) = spec.strip_prefix("cmd:").and_then(|s| s.split_once('=')) else {
        return Err(LabError::Invalid(format!(
            "tool '{spec}' needs a name and a program: cmd:NAME=PROGRAM [ARG...]"
        )));
    };
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or_default();
    if name.is_empty() || program.is_empty() {
        return Err(LabError::Invalid(format!(
            "tool '{spec}' needs a name and a program: cmd:NAME=PROGRAM [ARG...]"
        )));
    }
    let mut args: Vec<String> = words.map(String::from).collect();
    args.extend(["{src}".to_string(), "{dst}".to_string()]);
    // As a shell finds it: a name with a slash is a path (made absolute, since the runs happen
    // elsewhere), a bare name is looked up in PATH.
    let found = if program.contains('/') {
        std::path::absolute(program)
            .ok()
            .filter(|p| fs::metadata(p).is_ok_and(|m| m.is_file()))
    } else {
        find_program(program)
    };
    Ok(Tool {
        name: name.to_string(),
        program: found,
        args,
        install: format!(
            "'{program}' is no executable file (a name without a slash is looked up in PATH)"
        ),
        keeps: VerifyOptions::content_only(),
        reference: false,
    })
}
