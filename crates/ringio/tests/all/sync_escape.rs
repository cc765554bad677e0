//! The escape property test: whatever symlinks are planted in DEST, in the backup dir and in
//! the source, and whatever options a run is given, `ringio sync` changes nothing outside DEST
//! (and outside the backup dir and manifest it is told to write there): no entry appears or
//! goes, and no byte, mode, owner, mtime, extended attribute or symlink target changes.
//!
//! Each case is a seed: it makes the trees (tens of entries, from few names so that the source,
//! DEST and the backup dir collide), picks the options and the operands' spelling, snapshots
//! everything under the scratch directory but DEST and the allowed outputs, runs the sync, and
//! compares. A failure names the seed, the user and the command line; to replay it:
//! `RINGIO_ESCAPE_SEED=<seed> cargo test -p ringio --test all sync_escape::`.
//! `RINGIO_ESCAPE_CASES=<n>` runs n cases per user instead of [`CASES`].
//!
//! Under -x, a tmpfs mounted in DEST is watched as if outside DEST: rsync deletes nothing in a
//! filesystem mounted there.
//!
//! Every symlink target lies inside the scratch directory, so a run that escapes DEST can harm
//! nothing else.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

/// Cases per user (each a run of the debug binary on a small tree: seconds in all).
const CASES: u64 = 64;
/// The seed of the first case; case k has seed `FIRST_SEED + k`.
const FIRST_SEED: u64 = 0x5eed_0000;
/// A run takes a fraction of a second; one still running after this is stuck in a loop.
const RUN_LIMIT: Duration = Duration::from_secs(5);
const CASES_VAR: &str = "RINGIO_ESCAPE_CASES";
const SEED_VAR: &str = "RINGIO_ESCAPE_SEED";

/// The names every tree draws from: few, so that source, DEST and backup dir entries collide.
const NAMES: &[&str] = &["a", "b", "c"];
/// Names the options give a meaning in DEST's directories (the backup, temp, delay-updates and
/// MHL directories): planted there as ways out.
const SPECIAL: &[&str] = &[".bk", ".tmp", ".~tmp~", "ascmhl"];

#[test]
fn nothing_outside_dest_changes_as_root() {
    if !is_root() {
        skip!("running sync as root needs root");
    }
    run_cases(None);
}

#[test]
fn nothing_outside_dest_changes_as_nobody() {
    if !is_root() {
        skip!("running sync as another user needs root");
    }
    run_cases(Some(NOBODY));
}

/// Runs every case (or the one of `RINGIO_ESCAPE_SEED`) as `user` (None: this process's), and
/// fails with each case that changed something outside DEST.
fn run_cases(user: Option<(u32, u32)>) {
    let seeds: Vec<u64> = match std::env::var(SEED_VAR) {
        Ok(seed) => vec![parse_seed(&seed)],
        Err(_) => {
            let cases = std::env::var(CASES_VAR)
                .map(|n| {
                    n.parse()
                        .unwrap_or_else(|_| panic!("{CASES_VAR}={n}: not a number"))
                })
                .unwrap_or(CASES);
            (FIRST_SEED..FIRST_SEED + cases).collect()
        }
    };
    let mut failures = Vec::new();
    let mut statuses = BTreeMap::<Option<i32>, usize>::new();
    for &seed in &seeds {
        let (status, failure) = one_case(seed, user);
        *statuses.entry(status).or_default() += 1;
        failures.extend(failure);
    }
    eprintln!(
        "{} cases, exit statuses (status: cases): {statuses:?}",
        seeds.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases changed something outside DEST (replay one with {SEED_VAR}=<seed>):\n\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
}

fn parse_seed(text: &str) -> u64 {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("{SEED_VAR}={text}: not a number"))
}

/// One case: its run's exit status, and what it changed outside DEST if anything.
fn one_case(seed: u64, user: Option<(u32, u32)>) -> (Option<i32>, Option<String>) {
    let scratch = Scratch::new();
    let at = Layout::new(scratch.path());
    let mut rng = Prng::new(seed);
    at.build(&mut rng);
    let plan = Plan::draw(&mut rng, &at);
    // Under -x a filesystem mounted in DEST is not DEST's to delete from (rsync keeps it):
    // its entries are watched as if outside DEST. Unmounted before the scratch dir goes.
    let mut watched = Vec::new();
    let _mount = (plan.args.iter().any(|a| a == "-x") && rng.chance(60)).then(|| {
        let mnt = at.dst.join("mnt");
        fs::create_dir(&mnt).unwrap();
        let mount = TmpfsMount::new(&mnt, "1m").unwrap_or_else(|e| panic!("{e}"));
        grow(&mut rng, &at.root, &mnt, 1, 0, &[]);
        watched.push(mnt);
        mount
    });
    if let Some((uid, gid)) = user {
        chown_tree(&at.root, uid, gid);
    }
    let snapshot = || snapshot(&at.root, &plan.allowed, &watched);
    let before = snapshot();
    let mut cp = Cp::bare()
        .arg("sync")
        .args(&plan.args)
        .current_dir(&at.root)
        .timeout(RUN_LIMIT);
    if let Some((uid, gid)) = user {
        cp = cp.run_as(uid, gid);
    }
    // A run that escapes can make a loop it then follows (-L through a symlink it wrote): it
    // is killed at the limit, and the case still reports what changed.
    let Ok(out) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cp.run())) else {
        let changes = changes(&before, &snapshot());
        let failure = format!(
            "seed {seed:#x} as {}: ringio sync {} (in the scratch dir): still running after \
             {RUN_LIMIT:?}, killed\n  {}",
            who(user),
            plan.args.join(" "),
            changes.join("\n  ")
        );
        return (None, Some(failure));
    };
    if !matches!(out.status.code(), Some(0 | 23 | 24)) {
        // A refused command line tests nothing: said, so that a generator drifting into
        // refusals shows.
        let first = stderr_lines(&out).into_iter().next().unwrap_or_default();
        eprintln!("seed {seed:#x}: {}: {first}", out.status);
    }
    let after = snapshot();
    let changes = changes(&before, &after);
    // A crash (a panic's 101, a signal) is a failure whatever it changed: a run cut short can
    // leave DEST half made, which is what the property is about.
    let crashed = matches!(out.status.code(), Some(101) | None);
    if changes.is_empty() && !crashed {
        return (out.status.code(), None);
    }
    let stderr: Vec<String> = stderr_lines(&out).into_iter().take(6).collect();
    let failure = format!(
        "seed {seed:#x} as {}: ringio sync {} (in the scratch dir), {}\n  {}\n  stderr: {stderr:?}",
        who(user),
        plan.args.join(" "),
        out.status,
        changes.join("\n  ")
    );
    (out.status.code(), Some(failure))
}

fn who(user: Option<(u32, u32)>) -> String {
    match user {
        Some((uid, _)) => format!("uid {uid}"),
        None => "root".to_string(),
    }
}

/// The scratch directory of a case: the source, DEST, what lies outside DEST (the victims), a
/// backup dir outside DEST, and a directory for manifests.
struct Layout {
    root: PathBuf,
    src: PathBuf,
    dst: PathBuf,
    outside: PathBuf,
    bk: PathBuf,
    manifests: PathBuf,
}

impl Layout {
    fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
            src: root.join("src"),
            dst: root.join("dst"),
            outside: root.join("outside"),
            bk: root.join("bk"),
            manifests: root.join("manifests"),
        }
    }

    /// Where the planted symlinks of DEST and the backup dirs lead: files and directories
    /// outside DEST, the outside backup dir, the source, the scratch root, nothing.
    fn dest_targets(&self) -> Vec<PathBuf> {
        let mut targets = self.source_targets();
        targets.extend([self.bk.clone(), self.src.clone(), self.root.clone()]);
        targets.extend(NAMES.iter().map(|n| self.src.join(n)));
        targets
    }

    /// Where the source's symlinks lead: out of the source, never to one of its ancestors (a
    /// loop that -L would follow without end is another test's subject).
    fn source_targets(&self) -> Vec<PathBuf> {
        let o = &self.outside;
        vec![
            o.join("f"),
            o.join("d"),
            o.join("d/e"),
            o.join("d/sub"),
            o.join("empty"),
            o.join("missing"),
        ]
    }

    /// Makes every tree of the case, before the snapshot (nothing is made after it).
    fn build(&self, rng: &mut Prng) {
        let o = &self.outside;
        write_file(o.join("f"), "outside file\n");
        write_file(o.join("d/e"), "outside e\n");
        write_file(o.join("d/sub/g"), "outside g\n");
        fs::create_dir(o.join("empty")).unwrap();
        fs::create_dir(&self.manifests).unwrap();
        fs::create_dir(&self.src).unwrap();
        let sources = self.source_targets();
        grow(rng, &self.root, &self.src, 0, 20, &sources);
        if rng.chance(40) {
            hard_link_one(&self.src);
        }
        let targets = self.dest_targets();
        fs::create_dir(&self.dst).unwrap();
        grow(rng, &self.root, &self.dst, 0, 40, &targets);
        plant_special(rng, &self.root, &self.dst, &sources);
        // The backup dirs, inside DEST and outside, hold ways out under the names a backup
        // would take.
        fs::create_dir(&self.bk).unwrap();
        grow(rng, &self.root, &self.bk, 0, 60, &sources);
        if fs::symlink_metadata(self.dst.join(".bk")).is_err() && rng.chance(70) {
            fs::create_dir(self.dst.join(".bk")).unwrap();
            grow(rng, &self.root, &self.dst.join(".bk"), 0, 60, &sources);
        }
    }
}

/// Fills `dir` (`depth` levels below its tree's top) with files, directories and, one time in
/// 100/`links`, symlinks to one of `targets`, absolute or relative.
fn grow(rng: &mut Prng, root: &Path, dir: &Path, depth: u32, links: u64, targets: &[PathBuf]) {
    let unique = format!("u{}", rng.below(1000));
    for name in NAMES.iter().copied().chain([unique.as_str()]) {
        if !rng.chance(75) {
            continue;
        }
        let path = dir.join(name);
        let roll = rng.below(100);
        if roll < links {
            plant_link(rng, root, &path, targets);
        } else if depth < 2 && roll < links + (100 - links) / 3 {
            fs::create_dir(&path).unwrap();
            grow(rng, root, &path, depth + 1, links, targets);
        } else {
            let mut data = vec![0u8; rng.below(300) as usize];
            rng.fill(&mut data);
            write_file(&path, &data);
            if rng.chance(30) {
                set_xattr(&path, "user.escape", &data[..data.len().min(8)]).unwrap();
            }
            let mtime = 1_600_000_000 + rng.below(100_000_000) as i64;
            set_times(&path, None, Some(Ts::new(mtime, 0))).unwrap();
        }
    }
}

/// A symlink at `path` to one of `targets`: absolute, or relative to `path`'s directory.
fn plant_link(rng: &mut Prng, root: &Path, path: &Path, targets: &[PathBuf]) {
    let target = rng.pick(targets);
    let link = if rng.chance(50) {
        target.clone()
    } else {
        let ups = path
            .parent()
            .unwrap()
            .strip_prefix(root)
            .unwrap()
            .components()
            .count();
        let mut rel = PathBuf::new();
        for _ in 0..ups {
            rel.push("..");
        }
        rel.join(target.strip_prefix(root).unwrap())
    };
    symlink(&link, path).unwrap();
}

/// Symlinks out of DEST under the names of the backup, temp, delay-updates and MHL
/// directories, in DEST and in its directories.
fn plant_special(rng: &mut Prng, root: &Path, dir: &Path, targets: &[PathBuf]) {
    for name in SPECIAL {
        if rng.chance(35) && fs::symlink_metadata(dir.join(name)).is_err() {
            plant_link(rng, root, &dir.join(name), targets);
        }
    }
    for name in NAMES {
        let sub = dir.join(name);
        if fs::symlink_metadata(&sub).is_ok_and(|m| m.is_dir()) {
            plant_special(rng, root, &sub, targets);
        }
    }
}

/// A second name for the source's first regular file at its top, for -H.
fn hard_link_one(src: &Path) {
    let first = NAMES
        .iter()
        .map(|n| src.join(n))
        .find(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()));
    if let Some(file) = first {
        fs::hard_link(file, src.join("hl")).unwrap();
    }
}

/// A case's command line, and the paths outside DEST it may change.
struct Plan {
    args: Vec<String>,
    allowed: Vec<PathBuf>,
}

impl Plan {
    fn draw(rng: &mut Prng, at: &Layout) -> Plan {
        let mut args = vec!["-a".to_string()];
        let mut allowed = vec![at.dst.clone()];
        let mut pick = |rng: &mut Prng, choices: &[&str]| {
            let chosen = *rng.pick(choices);
            args.extend(
                chosen
                    .split(' ')
                    .filter(|a| !a.is_empty())
                    .map(String::from),
            );
        };
        pick(
            rng,
            &[
                "",
                "--delete",
                "--delete-before",
                "--delete-after",
                "--delete-delay",
            ],
        );
        // ringio has no --partial-dir yet (docs/CONFORMANCE.md): --partial and -T instead.
        pick(
            rng,
            &[
                "",
                "--inplace",
                "--partial",
                "--temp-dir=.tmp",
                "--delay-updates",
            ],
        );
        for flag in ["-L", "-x", "-H", "-X"] {
            if rng.chance(30) {
                args.push(flag.into());
            }
        }
        match rng.below(4) {
            0 => {}
            1 => args.push("-b".into()),
            2 => args.extend(["-b".into(), "--backup-dir=.bk".into()]),
            _ => {
                args.extend(["-b".into(), format!("--backup-dir={}", at.bk.display())]);
                allowed.push(at.bk.clone());
            }
        }
        match rng.below(4) {
            0 => args.push("--manifest-format=mhl".into()),
            1 => {
                let manifest = at.manifests.join("m");
                args.push(format!("--manifest={}", manifest.display()));
                allowed.push(at.manifests.clone());
            }
            _ => {}
        }
        args.extend(operands(rng, at));
        Plan { args, allowed }
    }
}

/// The source and DEST operands, in one of the spellings rsync takes (relative to the scratch
/// root, the run's working directory): with -R, from a `/./`.
fn operands(rng: &mut Prng, at: &Layout) -> Vec<String> {
    let dirs: Vec<&str> = NAMES
        .iter()
        .copied()
        .filter(|n| fs::symlink_metadata(at.src.join(n)).is_ok_and(|m| m.is_dir()))
        .collect();
    let sub = dirs.first().copied();
    let mut sources = vec!["src/".to_string(), "src".into(), "src/.".into()];
    if let Some(sub) = sub {
        sources.extend([format!("src/{sub}/.."), format!("src/{sub}/../")]);
    }
    let mut out = Vec::new();
    if rng.chance(30) {
        out.push("-R".to_string());
        sources = vec!["src/./".into(), "./src".into()];
        if let Some(sub) = sub {
            sources.extend([format!("src/./{sub}"), format!("src/./{sub}/")]);
        }
        let links: Vec<String> = NAMES
            .iter()
            .filter(|n| fs::symlink_metadata(at.src.join(n)).is_ok_and(|m| m.is_symlink()))
            .map(|n| format!("src/./{n}/e"))
            .collect();
        sources.extend(links);
    }
    out.push(rng.pick(&sources).clone());
    out.push(rng.pick(&["dst/", "dst"]).to_string());
    out
}

/// Every entry under `root` but those in `allowed` (and below them), and every entry in
/// `watched` (and below): its path relative to `root` ("" for root itself), and what it is.
fn snapshot(root: &Path, allowed: &[PathBuf], watched: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut entries = BTreeMap::new();
    walk(root, root, allowed, &mut entries);
    for dir in watched {
        walk(root, dir, &[], &mut entries);
    }
    entries
}

fn walk(root: &Path, path: &Path, allowed: &[PathBuf], out: &mut BTreeMap<PathBuf, String>) {
    if allowed.iter().any(|a| a == path) {
        return;
    }
    let meta =
        fs::symlink_metadata(path).unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
    let what = if meta.is_symlink() {
        format!("symlink -> {}", fs::read_link(path).unwrap().display())
    } else if meta.is_dir() {
        "dir".to_string()
    } else if meta.is_file() {
        let data = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        format!("file of {} bytes, FNV-1a {:016x}", data.len(), fnv1a(&data))
    } else {
        format!("special file (mode {:o})", meta.mode())
    };
    let rel = path.strip_prefix(root).unwrap().to_path_buf();
    out.insert(
        rel,
        format!(
            "{what}, mode {:o}, owner {}:{}, mtime {}.{:09}, inode {}, xattrs {:?}",
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ino(),
            list_xattrs(path).unwrap_or_else(|e| panic!("xattrs of {}: {e}", path.display()))
        ),
    );
    if meta.is_dir() {
        let mut names: Vec<PathBuf> = fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for name in names {
            walk(root, &name, allowed, out);
        }
    }
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What differs between two snapshots, one line per entry.
fn changes(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, was) in before {
        let shown = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        match after.get(path) {
            None => lines.push(format!("gone: {} (was {was})", shown.display())),
            Some(now) if now != was => lines.push(format!(
                "changed: {}: {was}\n    now {now}",
                shown.display()
            )),
            Some(_) => {}
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            lines.push(format!("new: {} ({now})", path.display()));
        }
    }
    lines
}
