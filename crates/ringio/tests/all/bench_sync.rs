//! `ringio bench sync` on a tiny tree: every scenario runs, and each tool that promises it
//! leaves a destination equal to the source.

use std::fs;

use crate::common::*;

#[test]
fn bench_sync_runs_every_scenario_and_verifies() {
    let rsync = std::process::Command::new("rsync")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !rsync {
        skip!("rsync is not installed (apt-get install rsync)");
    }
    if !gnu_cp_available() {
        skip!("GNU cp makes the reference copies");
    }
    let s = Scratch::new();
    let gen = Cp::bare()
        .args([
            "bench", "gen", "--files", "60", "--size", "2000", "--dirs", "4", "--depth", "2",
        ])
        .arg(s.join("src"))
        .run();
    assert_exit(&gen, 0);
    let json = s.join("out.json");
    let tools = "ringio-sync,ringio-resume,rsync";
    let out = Cp::bench_on(s.path(), &["sync", "--runs", "1", "--tools", tools])
        .arg("--json")
        .arg(&json)
        .run();
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["command"][0], "ringio");
    let scenarios = doc["workloads"][0]["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["first", "nochange", "changed1", "addel10", "rename"]
    );
    let table = String::from_utf8_lossy(&out.stdout);
    for sc in scenarios {
        let name = sc["scenario"].as_str().unwrap();
        assert!(sc["skipped"].is_null(), "{sc}");
        assert_eq!(
            sc["change"].is_null(),
            matches!(name, "first" | "nochange"),
            "{sc}"
        );
        let result = |tool: &str| {
            sc["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["tool"] == tool)
                .unwrap_or_else(|| panic!("{tool}: {sc}"))
                .clone()
        };
        let rsync = result("rsync");
        let run = &rsync["runs"][0];
        assert_eq!(
            run["metadata_checked"],
            serde_json::json!(["mode", "ownership", "mtime"]),
            "{run}"
        );
        assert_eq!(run["ok"], true, "{name}: {run}");
        assert_eq!(sc["ratio_to_rsync"]["rsync"], 1.0, "{sc}");
        // cp --resume brings a copy up to date but deletes nothing.
        let resume = &result("ringio-resume")["runs"][0];
        let deletes = matches!(name, "addel10" | "rename");
        assert_eq!(resume["ok"], !deletes, "{name}: {resume}");
        if deletes {
            assert!(
                resume["problems"][0]
                    .as_str()
                    .unwrap()
                    .contains("only in the destination"),
                "{resume}"
            );
        }
        // ringio sync runs when this ringio has it, and is said to be skipped otherwise.
        let sync = result("ringio-sync");
        match sync["skipped"].as_str() {
            Some(why) => assert!(why.contains("ringio sync --help"), "{why}"),
            None => assert_eq!(sync["runs"][0]["ok"], true, "{name}: {sync}"),
        }
        assert!(table.lines().any(|l| l.starts_with(name)), "{table}");
    }
    // The destination and the trash are gone; the source is untouched.
    assert!(!s.join("work/syncs/trash").exists() && !s.join("work/syncs/dst").exists());
}
