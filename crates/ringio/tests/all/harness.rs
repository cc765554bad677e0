//! Tests of the test helpers themselves, against GNU cp: the tree builder makes what it says,
//! and the comparer finds every kind of difference (and none where there is none). If these
//! fail, the other tests' verdicts mean nothing.

use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::common::*;

#[test]
fn builder_is_deterministic_and_varied() {
    let scratch = Scratch::new();
    let a = TreeSpec::small(7).build(&scratch.join("a"));
    let b = TreeSpec::small(7).build(&scratch.join("b"));
    assert_eq!(a.files, b.files);
    assert_eq!(a.dirs, b.dirs);
    assert_eq!(a.symlinks, b.symlinks);
    assert_eq!(a.bytes, b.bytes);
    // Same tree, except absolute symlinks, which point into their own tree.
    let diffs = tree_diff(
        &a.root,
        &b.root,
        Check {
            atime: true,
            ..Check::ARCHIVE
        },
    );
    let own_root = |d: &String| {
        d.contains(&format!("symlink target: src \"{}/", a.root.display()))
            && d.contains(&format!("dst \"{}/", b.root.display()))
    };
    assert!(
        !diffs.is_empty() && diffs.iter().all(own_root),
        "{diffs:#?}"
    );
    let c = TreeSpec::small(8).build(&scratch.join("c"));
    assert!(
        !tree_diff(&a.root, &c.root, Check::CONTENT).is_empty(),
        "seeds 7 and 8 agree"
    );

    let standard = TreeSpec::standard(1).build(&scratch.join("standard"));
    assert!(
        standard.bytes < 60 << 20,
        "standard tree is {} bytes",
        standard.bytes
    );
    assert!(standard.files.len() > 100 && standard.symlinks.len() > 10);
    let depth = standard
        .dirs
        .iter()
        .map(|d| d.components().count())
        .max()
        .unwrap();
    assert!(depth >= 7, "deepest directory is {depth} levels down");
}

#[test]
fn gnu_cp_archive_copy_compares_equal() {
    if !gnu_cp_available() {
        skip!("GNU cp not found");
    }
    let scratch = Scratch::new();
    let tree = TreeSpec::small(11).build(&scratch.join("src"));
    let out = gnu_cp(scratch.path(), ["-a", "src", "gnu"]);
    assert_success(&out);
    tree.restore_atimes();
    assert_trees_equal(&tree.root, &scratch.join("gnu"), Check::ARCHIVE);
    // The comparer leaves atimes as it found them, so it can run twice.
    assert_trees_equal(&tree.root, &scratch.join("gnu"), Check::ARCHIVE);
}

#[test]
fn comparer_reports_each_difference() {
    if !gnu_cp_available() {
        skip!("GNU cp not found");
    }
    let scratch = Scratch::new();
    let spec = TreeSpec {
        owners: false,
        unreadable_modes: false,
        ..TreeSpec::small(12)
    };
    let tree = spec.build(&scratch.join("src"));
    assert_success(&gnu_cp(scratch.path(), ["-a", "src", "dst"]));
    tree.restore_atimes();
    let dst = scratch.join("dst");

    let file = tree
        .files
        .iter()
        .find(|f| {
            fs::metadata(tree.root.join(f))
                .map(|m| m.len() > 10)
                .unwrap_or(false)
        })
        .expect("a file with content")
        .clone();
    let target = dst.join(&file);
    let (atime, mtime) = lstat_times(&target);
    let writable_dir = |p: &std::path::Path| {
        let parent = p.parent().unwrap().to_path_buf();
        let mode = mode_of(&parent);
        chmod(&parent, 0o755);
        (parent, mode)
    };
    // One byte changed, size and times kept.
    let mut content = fs::read(&target).unwrap();
    content[5] ^= 0xff;
    let mode = mode_of(&target);
    chmod(&target, 0o600);
    fs::write(&target, &content).unwrap();
    chmod(&target, mode ^ 0o001);
    set_times(
        &target,
        Some(atime),
        Some(Ts::new(mtime.sec, mtime.nsec ^ 1)),
    )
    .unwrap();

    let link = tree.symlinks[0].clone();
    let link_path = dst.join(&link);
    let (parent, parent_mode) = writable_dir(&link_path);
    let (_, parent_mtime) = lstat_times(&parent);
    fs::remove_file(&link_path).unwrap();
    std::os::unix::fs::symlink("elsewhere", &link_path).unwrap();
    write_file(parent.join("extra-in-dst"), "x");
    set_times(&parent, None, Some(parent_mtime)).unwrap();
    chmod(&parent, parent_mode);

    let diffs = tree_diff(&tree.root, &dst, Check::ARCHIVE);
    let text = diffs.join("\n");
    eprintln!("{text}");
    let name = format!("{file:?}");
    for needle in [
        format!("{name}: content differs from byte 5"),
        format!("{name}: mode: src {:04o} dst {:04o}", mode, mode ^ 0o001),
        format!("{name}: mtime: src"),
        format!("{:?}: symlink target", link),
        format!(
            "{:?}: only in dst (regular file)",
            link.parent().unwrap().join("extra-in-dst")
        ),
    ] {
        assert!(text.contains(&needle), "no {needle:?} in the diff:\n{text}");
    }
    // The changed symlink has a new mtime and atime as well; nothing else differs.
    assert_eq!(diffs.len(), 7, "unexpected diff lines:\n{text}");

    let (parent, parent_mode) = writable_dir(&dst.join(&file));
    fs::remove_file(dst.join(&file)).unwrap();
    chmod(&parent, parent_mode);
    let diffs = tree_diff(&tree.root, &dst, Check::CONTENT);
    assert!(
        diffs
            .iter()
            .any(|d| d.contains("only in src (regular file)")),
        "{diffs:?}"
    );
    let partial = Check {
        partial: true,
        ..Check::CONTENT
    };
    let diffs = tree_diff(&tree.root, &dst, partial);
    assert!(
        !diffs.iter().any(|d| d.contains("only in src")),
        "{diffs:?}"
    );
}

#[test]
fn comparer_checks_hard_links_and_owners() {
    let scratch = Scratch::new();
    for side in ["a", "b"] {
        write_file(scratch.join(side).join("one"), "same");
        write_file(scratch.join(side).join("two"), "same");
    }
    fs::remove_file(scratch.join("a/two")).unwrap();
    fs::hard_link(scratch.join("a/one"), scratch.join("a/two")).unwrap();
    let check = Check {
        hard_links: true,
        ..Check::CONTENT
    };
    let diffs = tree_diff(&scratch.join("a"), &scratch.join("b"), check);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("share an inode in src"), "{diffs:?}");
    assert!(tree_diff(&scratch.join("a"), &scratch.join("b"), Check::CONTENT).is_empty());

    if !is_root() {
        skip!("chown to another user needs root");
    }
    std::os::unix::fs::lchown(scratch.join("b/one"), Some(4321), Some(1234)).unwrap();
    let diffs = tree_diff(&scratch.join("a"), &scratch.join("b"), Check::PRESERVE_P);
    let uid = fs::metadata(scratch.join("a/one")).unwrap().uid();
    assert!(
        diffs
            .iter()
            .any(|d| d.contains(&format!("owner: src {uid}:")) && d.contains("4321:1234")),
        "{diffs:?}"
    );
}
