//! `ringio bench gen` and `ringio bench copy` on tiny workloads.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::*;

fn gen(dir: &std::path::Path, extra: &[&str]) {
    let out = Cp::bare().args(["bench", "gen"]).arg(dir).args(extra).run();
    assert_exit(&out, 0);
}

#[test]
fn the_generator_is_deterministic() {
    let s = Scratch::new();
    for (a, b, c, args) in [
        (
            "u1",
            "u2",
            "u3",
            vec![
                "--files", "50", "--size", "5000", "--dirs", "4", "--depth", "3",
            ],
        ),
        ("m1", "m2", "m3", vec!["--files", "600", "--mix"]),
    ] {
        gen(&s.join(a), &[&args[..], &["--seed", "7"]].concat());
        gen(&s.join(b), &[&args[..], &["--seed", "7"]].concat());
        gen(&s.join(c), &[&args[..], &["--seed", "8"]].concat());
        // Same seed: the same tree, names, bytes, modes, links and mtimes.
        let same = Cp::bare()
            .args(["verify", "--no-owner"])
            .arg(s.join(a))
            .arg(s.join(b))
            .run();
        assert_exit(&same, 0);
        // Another seed: another tree.
        let other = Cp::bare()
            .args(["verify", "-q"])
            .arg(s.join(a))
            .arg(s.join(c))
            .run();
        assert_exit(&other, 1);
    }
    // The mix has symlinks and hard links; a non-empty directory is refused.
    let out = Cp::bare()
        .args(["bench", "gen", "--files", "1", "--size", "1"])
        .arg(s.join("m1"))
        .run();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
}

#[test]
fn bench_copy_runs_verifies_and_writes_json() {
    let s = Scratch::new();
    gen(
        &s.join("src"),
        &["--files", "40", "--size", "3000", "--dirs", "3"],
    );
    let json = s.join("out.json");
    let plots = s.join("plots");
    let out = Cp::bare()
        .args([
            "bench",
            "copy",
            "--tools",
            "cp,ringio,ringio-a,cat",
            "--runs",
            "2",
            "--src",
        ])
        .arg(s.join("src"))
        .arg("--dir")
        .arg(s.join("work"))
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plots)
        .run();
    assert_exit(&out, 0);
    let table = String::from_utf8_lossy(&out.stdout);
    for tool in ["cp ", "ringio ", "ringio-a "] {
        let row = table
            .lines()
            .find(|l| l.starts_with(tool))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(row.ends_with("ok"), "{row}");
    }
    // A ranking only as sure as the runs: "fastest" or "level".
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("fastest: ") || l.starts_with("level: ")),
        "{table}"
    );
    // `cat` reads the source as a reference: not verified, not ranked.
    let cat = table
        .lines()
        .find(|l| l.starts_with("cat "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(cat.ends_with("reference: reads only"), "{cat}");
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["command"][0], "ringio");
    assert!(doc["machine"]["kernel"]
        .as_str()
        .is_some_and(|k| !k.is_empty()));
    let results = doc["workloads"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{r}");
        if r["tool"] == "cat" {
            assert_eq!(r["reference"], true, "{r}");
            for run in runs {
                assert_eq!(run["ok"], true, "{run}");
                assert!(
                    run["verified"].as_str().unwrap().starts_with("none"),
                    "{run}"
                );
            }
            continue;
        }
        assert_eq!(r["reference"], false, "{r}");
        // cp -r and ringio cp -r are checked for content; ringio cp -a for its metadata too.
        let archive = r["tool"] == "ringio-a";
        for run in runs {
            assert!(run["seconds"].as_f64().unwrap() > 0.0);
            assert!(run["problems"].as_array().unwrap().is_empty(), "{run}");
            assert!(run["usage"]["max_rss_kib"].as_u64().unwrap() > 0);
            assert_eq!(run["ok"], true, "{run}");
            let checked = run["metadata_checked"].as_array().unwrap();
            if archive {
                assert_eq!(run["verified"], "content+metadata", "{run}");
                for what in ["mode", "mtime", "hard-links", "xattrs"] {
                    assert!(checked.iter().any(|c| c == what), "{what}: {run}");
                }
            } else {
                assert_eq!(run["verified"], "content", "{run}");
                assert!(checked.is_empty(), "{run}");
            }
        }
    }
    assert!(fs::read_to_string(plots.join("src-warm.svg"))
        .unwrap()
        .starts_with("<svg"));
    // Copies and trash are cleaned up; the source is untouched.
    assert!(!s.join("work/copies/trash").exists() && !s.join("work/copies/dst").exists());
}

/// An executable `/bin/sh` script named `name` in the scratch directory, running `body`.
fn shell_script(s: &Scratch, name: &str, body: &str) -> PathBuf {
    let path = s.join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_wrong_copy_is_failed_and_a_missing_tool_skipped() {
    let s = Scratch::new();
    gen(&s.join("src"), &["--files", "20", "--size", "100"]);
    let script = shell_script(
        &s,
        "drops-a-file.sh",
        "cp -r \"$1\" \"$2\" && rm -f \"$2\"/0000.bin",
    );
    // A command with arguments of its own: they come before SRC and DST.
    let flagged = shell_script(
        &s,
        "needs-a-flag.sh",
        "[ \"$1\" = --deep ] || exit 3\ncp -r \"$2\" \"$3\"",
    );
    let json = s.join("out.json");
    let out = Cp::bare()
        .args(["bench", "copy", "--runs", "1", "--tools"])
        .arg(format!(
            "cp,cmd:broken={},cmd:ghost=/nonexistent/copier,wcp,cmd:flagged={} --deep",
            script.display(),
            flagged.display()
        ))
        .arg("--src")
        .arg(s.join("src"))
        .arg("--dir")
        .arg(s.join("work"))
        .arg("--json")
        .arg(&json)
        .run();
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let runs_of = |tool: &str| {
        doc["workloads"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tool"] == tool)
            .unwrap_or_else(|| panic!("{tool}: {doc}"))["runs"]
            .clone()
    };
    let broken = &runs_of("broken")[0];
    assert_eq!(broken["ok"], false, "{broken}");
    assert_eq!(broken["verified"], "content", "{broken}");
    assert_eq!(runs_of("cp")[0]["ok"], true);
    assert_eq!(runs_of("flagged")[0]["ok"], true);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{table}"))
            .to_string()
    };
    assert!(
        row("broken ").contains("FAILED: '0000.bin': missing from the destination"),
        "{table}"
    );
    // A FAILED tool is never ranked.
    assert!(row("broken ").contains(" - "), "{table}");
    assert!(row("ghost ").contains("skipped: not installed"), "{table}");
    if !row("wcp ").contains("skipped") {
        eprintln!("wcp is installed here; its skip message is not checked");
    } else {
        assert!(row("wcp ").contains("cargo install wcp"), "{table}");
    }
}

#[test]
fn cold_without_root_evicts_file_by_file_and_says_so() {
    if !is_root() {
        skip!("needs root to run the benchmark as another user");
    }
    let s = Scratch::new();
    s.give_to(NOBODY.0, NOBODY.1);
    gen(&s.join("src"), &["--files", "10", "--size", "100"]);
    chown_tree(s.path(), NOBODY.0, NOBODY.1);
    let out = Cp::bare()
        .args([
            "bench", "copy", "--cold", "--runs", "1", "--tools", "cp", "--src",
        ])
        .arg(s.join("src"))
        .arg("--dir")
        .arg(s.join("work"))
        .run_as(NOBODY.0, NOBODY.1)
        .run();
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not root: --cold evicts the source's files one by one"),
        "{err}"
    );
}
