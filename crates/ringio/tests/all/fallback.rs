//! Where io_uring is forbidden (a seccomp profile, `kernel.io_uring_disabled`), the default
//! engine falls back to the synchronous threaded engine by itself, says so under `-v`, and
//! still copies everything.

use crate::common::*;

#[cfg(target_arch = "x86_64")]
#[test]
fn copies_without_io_uring() {
    let scratch = Scratch::new();
    let tree = TreeSpec::small(11).build(&scratch.join("src"));
    let out = Cp::new()
        .current_dir(scratch.path())
        .without_io_uring()
        .args(["-av", "src", "dst"])
        .run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the copy failed without io_uring: {err}"
    );
    assert!(
        !err.lines().any(|l| l.starts_with("ringio: cannot")),
        "entries failed without io_uring: {err}"
    );
    assert!(
        err.contains("io_uring_setup failed") && err.contains("synchronous"),
        "-v does not say that io_uring was unavailable: {err}"
    );
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("dst"), Check::ARCHIVE);
}
