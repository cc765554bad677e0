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
    let out = Cp::bench_on(
        s.path(),
        &["copy", "--tools", "cp,ringio,ringio-a,cat", "--runs", "2"],
    )
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
    let tools = format!(
        "cp,cmd:broken={},cmd:ghost=/nonexistent/copier,wcp,cmd:flagged={} --deep",
        script.display(),
        flagged.display()
    );
    let out = Cp::bench_on(s.path(), &["copy", "--runs", "1", "--tools", &tools])
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
    let out = Cp::bench_on(
        s.path(),
        &["copy", "--cold", "--runs", "1", "--tools", "cp"],
    )
    .run_as(NOBODY.0, NOBODY.1)
    .run();
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not root: --cold evicts the source's files one by one"),
        "{err}"
    );
}

/// `bench report` makes the run's table again from its JSON, as Markdown; a Markdown file's
/// marked block is regenerated by `--update`, and `--check` fails on a block edited by hand.
#[test]
fn bench_report_makes_the_tables_again_and_checks_them() {
    let s = Scratch::new();
    // Enough files that the copies' inodes (2 tools, 2 runs) count as many: kept to the end.
    gen(&s.join("src"), &["--files", "300", "--size", "200"]);
    let json = s.join("docs/bench/run.json");
    fs::create_dir_all(json.parent().unwrap()).unwrap();
    let out = Cp::bench_on(s.path(), &["copy", "--tools", "cp,ringio", "--runs", "2"])
        .arg("--json")
        .arg(&json)
        .run();
    assert_exit(&out, 0);
    // The copies deleted at the end are stamped; on ext4 the next run says so before its first
    // (a few inodes, deleted at once, are not).
    assert!(s.join("work/deleted-copies").exists());
    let again = Cp::bench_on(s.path(), &["copy", "--tools", "cp", "--runs", "1"]).run();
    assert_exit(&again, 0);
    let fs_type = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(s.join("work"))
        .output()
        .unwrap();
    if String::from_utf8_lossy(&fs_type.stdout).starts_with("ext") {
        assert_stderr_has(&again, "an earlier benchmark deleted its copies here");
    } else {
        println!("not ext4 here: the recently-deleted note is not expected");
    }
    let report = Cp::bare().args(["bench", "report"]).arg(&json).run();
    assert_exit(&report, 0);
    let text = String::from_utf8_lossy(&report.stdout).into_owned();
    assert!(text.starts_with("`ringio bench copy "), "{text}");
    assert!(text.contains("warm cache, 2 timed runs per tool"), "{text}");
    assert!(text.contains("| tool | median s |"), "{text}");
    // The same medians as the terminal table.
    let terminal = String::from_utf8_lossy(&out.stdout);
    for tool in ["cp", "ringio"] {
        let median = terminal
            .lines()
            .find(|l| l.starts_with(&format!("{tool} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("{terminal}"));
        assert!(
            text.contains(&format!("| {tool} | {median} |")),
            "{tool} {median}: {text}"
        );
    }
    // A marked block: regenerated, then checked; a hand edit is found.
    let md = s.join("docs/B.md");
    fs::write(
        &md,
        "# B\n\nbefore\n\n<!-- bench report bench/run.json -->\nstale\n<!-- end bench report -->\n\nafter\n",
    )
    .unwrap();
    let check = || {
        Cp::bare()
            .args(["bench", "report", "--check"])
            .arg(&md)
            .run()
    };
    let stale = check();
    assert_exit(&stale, 1);
    assert_stderr_has(&stale, "B.md:5: the tables differ");
    assert_exit(
        &Cp::bare()
            .args(["bench", "report", "--update"])
            .arg(&md)
            .run(),
        0,
    );
    let updated = fs::read_to_string(&md).unwrap();
    assert!(updated.starts_with("# B\n\nbefore\n\n<!-- bench report bench/run.json -->\n"));
    assert!(
        updated.ends_with("<!-- end bench report -->\n\nafter\n"),
        "{updated}"
    );
    // The same tables; the JSON's link is relative to the Markdown file.
    let tables = &text[text.find("\n\n").unwrap()..];
    assert!(updated.contains(tables), "{updated}\n---\n{text}");
    assert!(updated.contains("[JSON](bench/run.json)"), "{updated}");
    assert_exit(&check(), 0);
    fs::write(&md, updated.replacen("| cp |", "| cp (fast) |", 1)).unwrap();
    assert_exit(&check(), 1);
    // Bad input: not a benchmark's JSON, a workload it lacks, a block never closed.
    fs::write(s.join("other.json"), "{\"a\": 1}").unwrap();
    let foreign = Cp::bare()
        .args(["bench", "report"])
        .arg(s.join("other.json"))
        .run();
    assert_exit(&foreign, 1);
    assert_stderr_has(&foreign, "is not a JSON document of `ringio bench");
    let missing = Cp::bare()
        .args(["bench", "report", "--workload", "1g"])
        .arg(&json)
        .run();
    assert_exit(&missing, 1);
    assert_stderr_has(&missing, "has no workload 1g (it has src)");
    fs::write(&md, "<!-- bench report bench/run.json -->\n").unwrap();
    assert_exit(&check(), 1);
}

/// Every table the README and docs/ mark as made from JSON is what its JSON gives.
#[test]
fn the_docs_tables_agree_with_their_json() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![repo.join("README.md")];
    for dir in [repo.join("docs"), repo.join("docs/bench")] {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for md in pages {
        let out = Cp::bare()
            .args(["bench", "report", "--check"])
            .arg(&md)
            .run();
        assert_exit(&out, 0);
    }
}
