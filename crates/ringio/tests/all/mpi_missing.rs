//! Without the `mpi` feature, `ringio cp --mpi` says in one line how to get it, and exits 2.

use crate::common::*;

#[test]
fn cp_mpi_says_how_to_build_it() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.join("src")).unwrap();
    let out = Cp::new()
        .args(["--mpi", "-a", "src", "dst"])
        .current_dir(scratch.path())
        .run();
    assert_exit(&out, 2);
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("cargo build --release --features mpi"),
        "{}",
        lines[0]
    );
    assert!(!scratch.join("dst").exists());
}
