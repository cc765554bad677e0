//! Tables of cp's rules, run on [`decide`] with every fact stated: no filesystem.

use std::ffi::CString;

use super::*;
use crate::plan::{CopyRoot, Preserve};
use crate::plan::{Resume, Tuning};

const FILE: u32 = libc::S_IFREG | 0o644;
const LINK: u32 = libc::S_IFLNK | 0o777;
const DIR: u32 = libc::S_IFDIR | 0o755;
const FIFO: u32 = libc::S_IFIFO | 0o644;

fn stat(mode: u32, ino: u64, nlink: u32, mtime: i64) -> Stat {
    Stat {
        mode,
        size: 4,
        uid: 0,
        gid: 0,
        nlink,
        ino,
        dev: 1,
        rdev: 0,
        blocks: 8,
        atime: (mtime, 0),
        mtime: (mtime, 0),
    }
}

/// A policy for cp's short options as GNU's tests spell them (`-bdfl`), with `--rem`, without
/// -r, VERSION_CONTROL=numbered (as same-file.sh sets it).
fn policy(options: &str) -> Policy {
    let mut plan = CopyPlan::new(
        vec![CopyRoot {
            src: "s".into(),
            dst: "d".into(),
            parents: None,
            stat: None,
        }],
        false,
    );
    plan.tuning = Tuning::default();
    let letters = options.strip_prefix('-').unwrap_or("");
    if options == "--rem" {
        plan.remove_destination = true;
    } else {
        for letter in letters.chars() {
            match letter {
                'b' => {
                    plan.backup = Some(Backup {
                        mode: BackupMode::Numbered,
                        suffix: "~".into(),
                    })
                }
                'd' => {
                    plan.dereference = Dereference::Never;
                    plan.preserve.links = true;
                }
                'f' => plan.force = true,
                'l' => plan.link = LinkMode::Hard,
                's' => plan.link = LinkMode::Symbolic,
                other => panic!("no option -{other} in the tables"),
            }
        }
        // cp -l without -r follows symlinks (unless -d said otherwise).
        if plan.link == LinkMode::Hard && !letters.contains('d') {
            plan.dereference = Dereference::Always;
        }
    }
    let mut policy = Policy::of(&plan);
    policy.posixly_correct = false;
    policy
}

/// A directory of same-file.sh: `foo`, and the links its `args` need.
struct Tree {
    entries: Vec<(&'static str, Stat, Option<&'static str>)>,
}

impl Tree {
    fn for_args(args: &str) -> Tree {
        let hardlink = args.contains("hardlink");
        let hlsl = args.contains("hlsl");
        let mut entries = vec![("foo", stat(FILE, 10, 1 + u32::from(hardlink), 100), None)];
        if args.contains("symlink") {
            entries.push(("symlink", stat(LINK, 20, 1, 100), Some("foo")));
        }
        if hardlink {
            entries.push(("hardlink", stat(FILE, 10, 2, 100), None));
        }
        if args.contains("sl1") {
            entries.push(("sl1", stat(LINK, 21, 1, 100), Some("foo")));
        }
        if args.contains("sl2") {
            entries.push(("sl2", stat(LINK, 22, 1 + u32::from(hlsl), 100), Some("foo")));
        }
        if hlsl {
            entries.push(("hlsl", stat(LINK, 22, 2, 100), Some("foo")));
        }
        Tree { entries }
    }

    /// The entry itself, and what it leads to.
    fn get(&self, name: &str) -> (Stat, Stat) {
        let (_, own, to) = self.entries.iter().find(|e| e.0 == name).expect("entry");
        match to {
            Some(target) => (*own, self.get(target).1),
            None => (*own, *own),
        }
    }

    /// Every fact of copying `src` onto `dst` under `p`.
    fn facts<'n>(
        &self,
        p: &Policy,
        src: &'n str,
        dst: &'n str,
    ) -> (SourceFacts<'n>, DestFacts<'n>) {
        let (src_own, src_to) = self.get(src);
        let follows = p.dereference != Dereference::Never;
        let mut s = SourceFacts::new(src.as_bytes(), if follows { src_to } else { src_own });
        s.entry = Some(Some(src_own));
        s.target = Some(Some(src_to));
        let (dst_own, dst_to) = self.get(dst);
        let mut d = DestFacts::new(dst.as_bytes(), dst_own, false);
        d.target = Some(Target::File(dst_to));
        d.same_directory = Some(true);
        d.backup_is_source = Some(false);
        d.backup_name = Some(CString::new(format!("{dst}.~1~")).unwrap());
        (s, d)
    }
}

/// What GNU's run shows, as the decision that leads to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gnu {
    /// "'A' and 'B' are the same file".
    Same,
    /// Nothing changes: the destination already is the link.
    Linked,
    /// `B.~1~` appears.
    BackUp,
    /// B is removed and made anew.
    Remove,
    /// B is opened (or linked over: with -f after EEXIST, without it "cannot create ... link").
    Over,
    /// `cp -bf F F`: the front end copies F to its backup name (see `cp.rs`); decide never
    /// sees the pair.
    Front,
}

/// GNU coreutils 9.1's tests/cp/same-file.sh, every row it runs on Linux: the arguments, the
/// options, and what cp did.
const SAME_FILE_MATRIX: &[(&str, &[(&str, Gnu)])] = {
    use Gnu::*;
    &[
        (
            "foo symlink",
            &[
                ("", Same),
                ("-d", Same),
                ("-f", Same),
                ("-df", Same),
                ("--rem", Remove),
                ("-b", BackUp),
                ("-bd", BackUp),
                ("-bf", BackUp),
                ("-bdf", BackUp),
                ("-l", Over),
                ("-dl", Over),
                ("-fl", Over),
                ("-dfl", Over),
                ("-bl", BackUp),
                ("-bdl", BackUp),
                ("-bfl", BackUp),
                ("-bdfl", BackUp),
                ("-s", Over),
                ("-sf", Over),
            ],
        ),
        (
            "symlink foo",
            &[
                ("", Same),
                ("-d", Same),
                ("-f", Same),
                ("-df", Same),
                ("--rem", Same),
                ("-b", Same),
                ("-bd", BackUp),
                ("-bf", Same),
                ("-bdf", BackUp),
                ("-l", Linked),
                ("-dl", Linked),
                ("-fl", Linked),
                ("-bl", Linked),
                ("-bfl", Linked),
                ("-s", Same),
                ("-sf", Same),
            ],
        ),
        (
            "foo foo",
            &[
                ("", Same),
                ("-d", Same),
                ("-f", Same),
                ("-df", Same),
                ("--rem", Same),
                ("-b", Same),
                ("-bd", Same),
                ("-bf", Front),
                ("-bdf", Front),
                ("-l", Linked),
                ("-dl", Linked),
                ("-fl", Linked),
                ("-dfl", Linked),
                ("-bl", Linked),
                ("-bdl", Linked),
                ("-bfl", Front),
                ("-bdfl", Front),
                ("-s", Same),
                ("-sf", Same),
            ],
        ),
        (
            "sl1 sl2",
            &[
                ("", Same),
                ("-d", Remove),
                ("-f", Same),
                ("-df", Remove),
                ("--rem", Remove),
                ("-b", BackUp),
                ("-bd", BackUp),
                ("-bf", BackUp),
                ("-bdf", BackUp),
                ("-l", Over),
                ("-fl", Over),
                ("-bl", BackUp),
                ("-bfl", BackUp),
                ("-s", Over),
                ("-sf", Over),
            ],
        ),
        (
            "foo hardlink",
            &[
                ("", Same),
                ("-d", Same),
                ("-f", Same),
                ("-df", Same),
                ("--rem", Remove),
                ("-b", BackUp),
                ("-bd", BackUp),
                ("-bf", BackUp),
                ("-bdf", BackUp),
                ("-l", Linked),
                ("-dl", Linked),
                ("-fl", Linked),
                ("-dfl", Linked),
                ("-bl", Linked),
                ("-bdl", Linked),
                ("-bfl", Linked),
                ("-bdfl", Linked),
                ("-s", Same),
                ("-sf", Same),
            ],
        ),
        (
            "hlsl sl2",
            &[
                ("", Same),
                ("-d", Linked),
                ("-f", Same),
                ("-df", Linked),
                ("--rem", Remove),
                ("-b", BackUp),
                ("-bd", BackUp),
                ("-bf", BackUp),
                ("-bdf", BackUp),
                ("-l", Over),
                ("-dl", Linked),
                ("-fl", Over),
                ("-dfl", Linked),
                ("-bl", BackUp),
                ("-bdl", Linked),
                ("-bfl", BackUp),
                ("-bdfl", Linked),
                ("-s", Over),
                ("-sf", Over),
            ],
        ),
    ]
};

fn as_gnu(decision: &Decision) -> Gnu {
    match decision {
        Decision::Refuse(Refusal::SameFile) => Gnu::Same,
        Decision::Skip(Skip::AlreadyLinked) => Gnu::Linked,
        Decision::BackUp(_) => Gnu::BackUp,
        Decision::Remove => Gnu::Remove,
        Decision::WriteOver(_) => Gnu::Over,
        other => panic!("no GNU outcome for {other:?}"),
    }
}

#[test]
fn gnu_same_file_matrix() {
    let mut wrong = Vec::new();
    let mut rows = 0;
    for (args, cases) in SAME_FILE_MATRIX {
        let (src, dst) = args.split_once(' ').unwrap();
        let tree = Tree::for_args(args);
        for &(options, gnu) in cases.iter() {
            if gnu == Gnu::Front {
                continue;
            }
            rows += 1;
            let p = policy(options);
            let (s, d) = tree.facts(&p, src, dst);
            let got = decide(&p, &s, Some(&d));
            if as_gnu(&got) != gnu {
                wrong.push(format!("cp {options} {args}: GNU {gnu:?}, decide {got:?}"));
            }
        }
    }
    assert_eq!(rows, 103);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Facts for a source file `s` (mtime 100) onto an existing destination `entry`, which leads
/// to `target` where it is a symlink; every other fact stated as plain.
fn onto<'n>(entry: Stat, target: Target) -> (SourceFacts<'n>, DestFacts<'n>) {
    let src = stat(FILE, 1, 1, 100);
    let mut s = SourceFacts::new(b"f", src);
    s.entry = Some(Some(src));
    s.target = Some(Some(src));
    let mut d = DestFacts::new(b"f", entry, false);
    d.target = Some(target);
    d.same_directory = Some(false);
    d.backup_is_source = Some(false);
    d.backup_name = Some(c"f~".to_owned());
    d.answer = Some(true);
    (s, d)
}

fn file_at(mtime: i64) -> Stat {
    stat(FILE, 2, 1, mtime)
}

fn write_over(target: Option<Stat>, through_link: bool) -> Decision {
    Decision::WriteOver(WriteOver {
        target,
        through_link,
        compare_first: false,
    })
}

/// A policy of the plan `cp` with `change` applied.
fn with(change: impl FnOnce(&mut CopyPlan)) -> Policy {
    let mut plan = CopyPlan::new(
        vec![CopyRoot {
            src: "s".into(),
            dst: "d".into(),
            parents: None,
            stat: None,
        }],
        false,
    );
    change(&mut plan);
    let mut policy = Policy::of(&plan);
    policy.posixly_correct = false;
    policy
}

#[test]
fn every_overwrite_option_on_an_older_and_a_newer_file() {
    let older = file_at(50);
    let newer = file_at(150);
    let resume = |how| Overwrite::Clobber(Clobber::Incomplete(how));
    // (what the options make, destination, decision)
    let cases: Vec<(&str, Policy, Stat, Decision)> = vec![
        ("cp", with(|_| {}), older, write_over(Some(older), false)),
        ("cp", with(|_| {}), newer, write_over(Some(newer), false)),
        (
            "-n",
            with(|p| p.overwrite = Overwrite::NoClobber),
            older,
            Decision::Skip(Skip::NoClobber),
        ),
        (
            "-u",
            with(|p| p.overwrite = Overwrite::Clobber(Clobber::Older)),
            older,
            write_over(Some(older), false),
        ),
        (
            "-u",
            with(|p| p.overwrite = Overwrite::Clobber(Clobber::Older)),
            newer,
            Decision::Skip(Skip::NotOlder),
        ),
        (
            "-u (same mtime)",
            with(|p| p.overwrite = Overwrite::Clobber(Clobber::Older)),
            file_at(100),
            Decision::Skip(Skip::NotOlder),
        ),
        (
            "-f",
            with(|p| p.force = true),
            older,
            write_over(Some(older), false),
        ),
        (
            "--remove-destination",
            with(|p| p.remove_destination = true),
            older,
            Decision::Remove,
        ),
        (
            "--backup",
            with(|p| {
                p.backup = Some(Backup {
                    mode: BackupMode::Simple,
                    suffix: "~".into(),
                })
            }),
            older,
            Decision::BackUp(c"f~".to_owned()),
        ),
        (
            "--resume, -a, complete",
            with(|p| {
                p.overwrite = resume(Resume::Quick);
                p.preserve = Preserve::ALL;
            }),
            stat(FILE, 2, 1, 100),
            Decision::Skip(Skip::Complete),
        ),
        (
            "--resume, -a, other mtime",
            with(|p| {
                p.overwrite = resume(Resume::Quick);
                p.preserve = Preserve::ALL;
            }),
            older,
            write_over(Some(older), false),
        ),
        (
            "--resume, no -p: content decides",
            with(|p| p.overwrite = resume(Resume::Quick)),
            older,
            Decision::WriteOver(WriteOver {
                target: Some(older),
                through_link: false,
                compare_first: true,
            }),
        ),
        (
            "--resume=checksum, -a, same mtime: content decides",
            with(|p| {
                p.overwrite = resume(Resume::Checksum);
                p.preserve = Preserve::ALL;
            }),
            stat(FILE, 2, 1, 100),
            Decision::WriteOver(WriteOver {
                target: Some(stat(FILE, 2, 1, 100)),
                through_link: false,
                compare_first: true,
            }),
        ),
        (
            "--resume, another size",
            with(|p| p.overwrite = resume(Resume::Quick)),
            Stat { size: 9, ..older },
            write_over(Some(Stat { size: 9, ..older }), false),
        ),
        (
            "--preserve=links onto a file of two links: replaced, not written through",
            with(|p| p.preserve.links = true),
            stat(FILE, 2, 2, 50),
            Decision::Remove,
        ),
        (
            "--attributes-only onto a file of two links: opened as it is",
            with(|p| {
                p.preserve.links = true;
                p.attributes_only = true;
            }),
            stat(FILE, 2, 2, 50),
            write_over(Some(stat(FILE, 2, 2, 50)), false),
        ),
        (
            "onto a directory",
            with(|_| {}),
            stat(DIR, 2, 2, 50),
            Decision::Refuse(Refusal::DirectoryWithNonDirectory),
        ),
        (
            "-n onto a directory: skipped first",
            with(|p| p.overwrite = Overwrite::NoClobber),
            stat(DIR, 2, 2, 50),
            Decision::Skip(Skip::NoClobber),
        ),
        (
            "--atomic onto a FIFO",
            with(|p| p.atomic = true),
            stat(FIFO, 2, 1, 50),
            Decision::Refuse(Refusal::AtomicNotRegular),
        ),
        (
            "into a FIFO",
            with(|_| {}),
            stat(FIFO, 2, 1, 50),
            write_over(Some(stat(FIFO, 2, 1, 50)), false),
        ),
        (
            "--atomic onto a file",
            with(|p| p.atomic = true),
            older,
            write_over(Some(older), false),
        ),
        (
            "--atomic --remove-destination onto a FIFO",
            with(|p| {
                p.atomic = true;
                p.remove_destination = true;
            }),
            stat(FIFO, 2, 1, 50),
            Decision::Remove,
        ),
    ];
    for (what, p, dst, want) in cases {
        let (s, mut d) = onto(dst, Target::File(dst));
        d.entry = dst;
        assert_eq!(decide(&p, &s, Some(&d)), want, "{what}");
    }
}

#[test]
fn interactive_asks_after_the_rules_that_skip_and_before_those_that_replace() {
    let older = file_at(50);
    let ask = with(|p| p.overwrite = Overwrite::Interactive(Clobber::All));
    let (s, mut d) = onto(older, Target::File(older));
    d.answer = None;
    assert_eq!(decide(&ask, &s, Some(&d)), Decision::Look(Look::Answer));
    d.answer = Some(false);
    assert_eq!(decide(&ask, &s, Some(&d)), Decision::Skip(Skip::Declined));
    d.answer = Some(true);
    assert_eq!(decide(&ask, &s, Some(&d)), write_over(Some(older), false));
    // -i -u: a newer destination is skipped without a question.
    let ask_older = with(|p| p.overwrite = Overwrite::Interactive(Clobber::Older));
    let newer = file_at(150);
    let (s, mut d) = onto(newer, Target::File(newer));
    d.answer = None;
    assert_eq!(
        decide(&ask_older, &s, Some(&d)),
        Decision::Skip(Skip::NotOlder)
    );
    // The same file is refused before any question.
    let (s, mut d) = onto(stat(FILE, 1, 1, 100), Target::File(stat(FILE, 1, 1, 100)));
    d.answer = None;
    assert_eq!(
        decide(&ask, &s, Some(&d)),
        Decision::Refuse(Refusal::SameFile)
    );
    // A directory is refused only once the user said yes, as cp.
    let dir = stat(DIR, 2, 2, 50);
    let (s, mut d) = onto(dir, Target::File(dir));
    d.answer = None;
    assert_eq!(decide(&ask, &s, Some(&d)), Decision::Look(Look::Answer));
    // Under -i a hard-link group's later name does not replace what is there; under
    // --resume it does, whatever -i says.
    assert!(!ask.link_replaces());
    let ask_resume =
        with(|p| p.overwrite = Overwrite::Interactive(Clobber::Incomplete(Resume::Quick)));
    assert!(ask_resume.link_replaces());
    assert!(with(|p| p.overwrite = Overwrite::Clobber(Clobber::Older)).link_replaces());
    assert!(!with(|p| p.overwrite = Overwrite::NoClobber).link_replaces());
}

#[test]
fn symlinks_at_the_destination() {
    let link = stat(LINK, 3, 1, 50);
    let file = file_at(50);
    let cp = with(|_| {});
    // Data is written through a symlink to a file.
    let (s, d) = onto(link, Target::File(file));
    assert_eq!(decide(&cp, &s, Some(&d)), write_over(Some(file), true));
    // Not through a dangling one, unless POSIXLY_CORRECT; -f and --remove-destination
    // replace it.
    let (s, d) = onto(link, Target::Dangling);
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        Decision::Refuse(Refusal::DanglingSymlink)
    );
    let posix = Policy {
        posixly_correct: true,
        ..cp.clone()
    };
    assert_eq!(decide(&posix, &s, Some(&d)), write_over(None, true));
    let remove = with(|p| p.remove_destination = true);
    assert_eq!(decide(&remove, &s, Some(&d)), Decision::Remove);
    let force = with(|p| p.force = true);
    assert_eq!(
        decide(&force, &s, Some(&d)),
        Decision::Refuse(Refusal::DanglingSymlink)
    );
    // A loop is removed under -f, an error without it.
    let (s, d) = onto(link, Target::Loop);
    assert_eq!(decide(&force, &s, Some(&d)), Decision::Remove);
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        Decision::Refuse(Refusal::Unreadable(libc::ELOOP))
    );
    let (s, d) = onto(link, Target::Unknown(libc::EACCES));
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        Decision::Refuse(Refusal::Unreadable(libc::EACCES))
    );
    // --atomic through a symlink to a file replaces that file; to a FIFO, it refuses.
    let atomic = with(|p| p.atomic = true);
    let (s, d) = onto(link, Target::File(file));
    assert_eq!(decide(&atomic, &s, Some(&d)), write_over(Some(file), true));
    let (s, d) = onto(link, Target::File(stat(FIFO, 4, 1, 50)));
    assert_eq!(
        decide(&atomic, &s, Some(&d)),
        Decision::Refuse(Refusal::AtomicNotRegular)
    );
    let (s, d) = onto(link, Target::Dangling);
    assert_eq!(
        decide(
            &Policy {
                posixly_correct: true,
                ..atomic
            },
            &s,
            Some(&d)
        ),
        Decision::Refuse(Refusal::AtomicNotRegular)
    );
    // A symlink made by an earlier operand is not written through.
    let (s, mut d) = onto(link, Target::File(file));
    d.just_created = true;
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        Decision::Refuse(Refusal::ThroughJustCreatedSymlink)
    );
    let (s, mut d) = onto(file, Target::File(file));
    d.just_created = true;
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        Decision::Refuse(Refusal::JustCreated)
    );
    // A symlink source under -P replaces the destination entry itself, link or not.
    let never = with(|p| p.dereference = Dereference::Never);
    let (mut s, d) = onto(link, Target::File(file));
    s.stat = stat(LINK, 5, 1, 50);
    assert_eq!(decide(&never, &s, Some(&d)), Decision::Remove);
}

#[test]
fn backups_never_destroy_the_source() {
    let simple = |mode| {
        with(move |p| {
            p.backup = Some(Backup {
                mode,
                suffix: "~".into(),
            })
        })
    };
    let file = file_at(50);
    // `cp --b=simple a~ a`: the backup name of a is the source.
    let (mut s, mut d) = onto(file, Target::File(file));
    s.name = b"a~";
    d.name = b"a";
    d.backup_is_source = None;
    let p = simple(BackupMode::Simple);
    assert_eq!(
        decide(&p, &s, Some(&d)),
        Decision::Look(Look::BackupIsSource)
    );
    d.backup_is_source = Some(true);
    assert_eq!(
        decide(&p, &s, Some(&d)),
        Decision::Refuse(Refusal::BackupDestroysSource)
    );
    d.backup_is_source = Some(false);
    assert_eq!(decide(&p, &s, Some(&d)), Decision::BackUp(c"f~".to_owned()));
    // Numbered backups never take the simple name; `existing` may.
    d.backup_is_source = None;
    assert_eq!(
        decide(&simple(BackupMode::Numbered), &s, Some(&d)),
        Decision::BackUp(c"f~".to_owned())
    );
    assert_eq!(
        decide(&simple(BackupMode::Existing), &s, Some(&d)),
        Decision::Look(Look::BackupIsSource)
    );
    // The name is looked up only when a backup is made.
    d.backup_is_source = Some(false);
    d.backup_name = None;
    assert_eq!(decide(&p, &s, Some(&d)), Decision::Look(Look::BackupName));
    assert!(simple_backup_is_named(
        &Backup {
            mode: BackupMode::Simple,
            suffix: ".orig".into()
        },
        b"dir/a.orig",
        b"a"
    ));
    assert!(!simple_backup_is_named(
        &Backup {
            mode: BackupMode::Simple,
            suffix: "~".into()
        },
        b"a",
        b"a"
    ));
}

#[test]
fn nothing_there_is_created_and_facts_are_asked_for_only_when_needed() {
    let cp = with(|_| {});
    let src = stat(FILE, 1, 1, 100);
    let s = SourceFacts::new(b"f", src);
    assert_eq!(decide(&cp, &s, None), Decision::Create);
    // A plain file over a plain file needs no second look.
    let d = DestFacts::new(b"f", file_at(50), false);
    assert_eq!(
        decide(&cp, &s, Some(&d)),
        write_over(Some(file_at(50)), false)
    );
    // Data onto a symlink: where it leads.
    let d = DestFacts::new(b"f", stat(LINK, 3, 1, 50), false);
    assert_eq!(decide(&cp, &s, Some(&d)), Decision::Look(Look::Target));
    // Following symlinks and finding one inode: the source's name, not followed.
    let follow = with(|p| p.dereference = Dereference::Always);
    let d = DestFacts::new(b"g", src, false);
    assert_eq!(
        decide(&follow, &s, Some(&d)),
        Decision::Look(Look::SourceEntry)
    );
    // Under -P, two symlinks of one name: whether they are one directory entry.
    let never = with(|p| p.dereference = Dereference::Never);
    let s = SourceFacts::new(b"l", stat(LINK, 3, 1, 50));
    let d = DestFacts::new(b"l", stat(LINK, 4, 1, 50), false);
    assert_eq!(
        decide(&never, &s, Some(&d)),
        Decision::Look(Look::SameDirectory)
    );
    // Under -P, a symlink source onto a file: what the source leads to.
    let d = DestFacts::new(b"l", file_at(50), false);
    assert_eq!(
        decide(&never, &s, Some(&d)),
        Decision::Look(Look::SourceTarget)
    );
}

#[test]
fn refusals_read_as_gnu_cp_writes_them() {
    let said = |rule: Refusal| rule.of("a", "b").to_string();
    assert_eq!(said(Refusal::SameFile), "'a' and 'b' are the same file");
    assert_eq!(
        said(Refusal::JustCreated),
        "will not overwrite just-created 'b' with 'a'"
    );
    assert_eq!(
        said(Refusal::ThroughJustCreatedSymlink),
        "will not copy 'a' through just-created symlink 'b'"
    );
    assert_eq!(
        said(Refusal::DanglingSymlink),
        "not writing through dangling symlink 'b'"
    );
    assert_eq!(
        said(Refusal::DirectoryWithNonDirectory),
        "cannot overwrite directory 'b' with non-directory"
    );
    assert_eq!(
        said(Refusal::NonDirectoryWithDirectory),
        "cannot overwrite non-directory 'b' with directory 'a'"
    );
    assert_eq!(
        said(Refusal::BackupDestroysSource),
        "backing up 'b' might destroy source;  'a' not copied"
    );
    assert_eq!(
        said(Refusal::NotRecursive),
        "-r not specified; omitting directory 'a'"
    );
    assert_eq!(
        said(Refusal::IntoItself),
        "cannot copy a directory, 'a', into itself, 'b'"
    );
    assert_eq!(
        said(Refusal::Unreadable(libc::ELOOP)),
        "cannot stat 'b': Too many levels of symbolic links"
    );
}
