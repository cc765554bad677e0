#!/usr/bin/env python3
"""Tests of .ci/modcycles.py's check of the names the docs cite (`--check-doc`): a small tree
of Rust sources and docs, a doc whose every name is stale (each must be reported, at its
line) and one that cites only what exists or what is another project's (nothing reported).

Usage: python3 .ci/test_modcycles.py (CI runs it before the check itself).
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import modcycles  # noqa: E402

SOURCES = {
    "crates/copy/Cargo.toml": """
        [package]
        name = "ringio-copy"

        [dependencies]
        rustix = "1"
        """,
    "crates/copy/src/lib.rs": """
        //! fn copy_data is named in this comment only: comments define nothing.
        pub mod sync;
        pub fn copy() {}
        """,
    "crates/copy/src/sync/mod.rs": """
        mod order;
        pub use order::Printer;
        use rustix::fs::RawDir;
        pub struct SyncPlan {
            pub dry_run: bool,
        }
        impl SyncPlan {
            pub fn builder() -> Self { SyncPlan { dry_run: false } }
        }
        pub enum Pass {
            Scan,
            Run(u8),
        }
        macro_rules! skip { () => {}; }
        """,
    "crates/copy/src/sync/order.rs": """
        pub struct Printer;
        pub struct Block {
            pub source_fail: bool,
        }
        pub(crate) fn gate() {}
        """,
    "crates/ringio/tests/all/main.rs": "mod sync;\n",
    "bench/README.md": "",
}

GOOD = """\
    # Good

    Paths: `sync/order.rs`, `crates/copy/src/sync/`, `order.rs`, `tests/all/`, `bench/`,
    `crates/copy`, `tests/all/main.rs`, `sync/order.rs:2`, and a script run as `bench/README.md --flag`.
    Items: `fn copy`, `copy()`, `SyncPlan`, `SyncPlan::builder`, `SyncPlan::builder()`,
    `sync::SyncPlan`, `sync::Printer` (re-exported), `order::Printer`, `order::gate`,
    `Pass::Scan`, `Pass::Run(1)`, `Block { source_fail: true }`, `Block::source_fail`,
    `dry_run`, `skip`, `crate::sync::order::Block`, `ringio_copy::copy`.
    A file and what it defines: `sync/order.rs` `gate`, `Printer` and `Block`; after a
    path, what is not a bare name ends the list: `order.rs` `sync::SyncPlan` `dry_run`.
    A span over two lines: `fn
    copy`.

    Not names of this tree: `--delete`, `-L/-H/-P`, `cargo test -p ringio --test all sync`,
    `SRC/`, `SRC/.`, `DEST/.bk`, `../x`, `x/..`, `/proc/self/fd/N`, `files/s`, `*.rs`,
    `O_CREAT`, `POSIXLY_CORRECT`, `statx(2)`, `Some(true)`, `Option`, `rustix::fs::statx`,
    `RawDir`, `std::fs::remove_dir_all`, `auto`, `never`, `cannot stat 'x': y`, `.~tmp~`.
    rsync's `delete_in_dir` and `recv_generator`; GNU's `same_file_ok`; rsync's
    `generator.c`; GNU cp's `tests/cp/same-file.sh`; rsync's test helper `chk_perms`;
    `delete_in_dir` alone; `wildtest.txt`; in DEST's `ascmhl/`; `target/release/ringio`.

    ```
    a fenced block is output or a command: `gone/missing.rs`, fn nothing_here
    ```
    """

BAD = """\
    # Bad
    `sync/walk.rs`
    `crates/copy/src/transfer.rs`
    `bench/floor/`
    `fn copy_data`
    `copy_small()`
    `apply::copy_data`
    `SyncPlan::plan`
    `order::Leader`
    `Leader`
    `remove_tree`
    `sync/order.rs` `Ready`
    `Pass::Gone`
    `Gone { field: 1 }`
    `fn
    copy_file`
    `tests/gone/run.sh --ringio x`
    `sync::missing::Printer`
    `sync/gone.rs:12`
    """

# (line, the name reported) for every line of BAD after the title.
BAD_FOUND = [
    (2, "sync/walk.rs"), (3, "crates/copy/src/transfer.rs"), (4, "bench/floor/"),
    (5, "copy_data"), (6, "copy_small"), (7, "apply::copy_data"), (8, "SyncPlan::plan"),
    (9, "order::Leader"), (10, "Leader"), (11, "remove_tree"), (12, "Ready"),
    (13, "Pass::Gone"), (14, "Gone"), (15, "copy_file"), (17, "tests/gone/run.sh"),
    (18, "missing"), (19, "sync/gone.rs"),
]


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))


class DocNames(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="modcycles-test-")
        self.root = self.tmp.name
        write(self.root, SOURCES)

    def tearDown(self):
        self.tmp.cleanup()

    def names(self, doc_text):
        write(self.root, {"docs/DOC.md": doc_text})
        return modcycles.doc_names(self.root, [os.path.join(self.root, "docs/DOC.md")])

    def test_good_doc_has_nothing_reported(self):
        self.assertEqual(self.names(GOOD), [])

    def test_every_stale_name_is_reported_at_its_line(self):
        found = self.names(BAD)
        self.assertEqual(len(found), len(BAD_FOUND), "\n".join(found))
        for report, (line, name) in zip(found, BAD_FOUND):
            self.assertIn(f"DOC.md:{line}: ", report)
            self.assertIn(name, report)

    def test_a_comment_defines_nothing(self):
        self.assertEqual(len(self.names("`fn copy_data`\n")), 1)

    def test_check_doc_fails_on_a_stale_name_and_skips_docs_bench(self):
        drawing = subprocess.run(
            [sys.executable, os.path.join(HERE, "modcycles.py"), "--layers", self.root],
            capture_output=True, text=True, check=True).stdout
        arch = "# Modules\n\n`lib.rs`, `sync/`, `order.rs`\n\n```\n" + drawing + "```\n"
        write(self.root, {"docs/ARCHITECTURE.md": arch,
                          "docs/bench/old.md": "`sync/walk.rs` was removed since\n"})

        def check():
            return subprocess.run(
                [sys.executable, os.path.join(HERE, "modcycles.py"), "--check-doc",
                 os.path.join(self.root, "docs/ARCHITECTURE.md"), self.root],
                capture_output=True, text=True)

        ok = check()
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        write(self.root, {"docs/OTHER.md": "a stale path: `sync/walk.rs`\n"})
        bad = check()
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn("OTHER.md:1: `sync/walk.rs`", bad.stdout)
        self.assertNotIn("old.md", bad.stdout)


if __name__ == "__main__":
    unittest.main()
