//! Kept libraries for kept formats: ASC MHL read through quick-xml (each refusal at its line,
//! the reference implementation's dates in any zone) and local time through jiff (sync's
//! `%M`, `%t`, `--list-only` and `--log-file` as rsync writes them, in unusual zones, across
//! summer time).

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringio_copy::digest::Algo;
use ringio_copy::manifest::mhl;

use crate::common::*;

/// A command of the reference implementation of ASC MHL (`create`, `verify`) run through
/// `python`, its arguments to come, with TZ set (or unset: None).
fn ascmhl(python: &str, command: &str, tz: Option<&str>) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(format!(
        "import sys\nfrom ascmhl.commands import {command}\n\
         {command}.main(args=sys.argv[1:], standalone_mode=False)"
    ));
    with_tz(&mut cmd, tz);
    cmd
}

/// TZ set to `tz`, or unset.
fn with_tz(cmd: &mut Command, tz: Option<&str>) {
    match tz {
        Some(tz) => cmd.env("TZ", tz),
        None => cmd.env_remove("TZ"),
    };
}

/// `secs` since the epoch as a time to set.
fn at(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// The Python that has the reference implementation, or None (the test skips).
fn reference_python() -> Option<String> {
    let python = std::env::var("RINGIO_ASCMHL_PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&python)
        .args(["-c", "import ascmhl.commands"])
        .output()
        .is_ok_and(|o| o.status.success());
    has.then_some(python)
}

/// The dates the reference implementation writes (its zone's offset, `+05:45`, `-02:30`,
/// summer and winter time) are read as the files' times, in any zone.
#[test]
fn the_reference_implementations_dates_are_read_in_any_zone() {
    type Times = Vec<(Vec<u8>, Option<(i64, u32)>)>;
    let Some(python) = reference_python() else {
        skip!("no Python with the ascmhl package");
    };
    // Berlin's spring gap and autumn fold, St. John's summer, Lord Howe's half-hour
    // summer time, a leap day, before 1970.
    let times: [i64; 6] = [
        1_774_747_800,
        1_792_891_800,
        1_784_000_000,
        1_767_225_600,
        951_782_400,
        -1_234_567,
    ];
    for tz in [
        Some("Asia/Kathmandu"),
        Some("Europe/Berlin"),
        Some("America/St_Johns"),
        Some("Australia/Lord_Howe"),
        Some("UTC"),
        None,
    ] {
        let dir = Scratch::new();
        let root = dir.join("A002");
        fs::create_dir(&root).unwrap();
        for (i, secs) in times.iter().enumerate() {
            let file = File::create(root.join(format!("f{i}"))).unwrap();
            let at = if *secs >= 0 {
                UNIX_EPOCH + std::time::Duration::from_secs(*secs as u64)
            } else {
                UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs())
            };
            file.set_modified(at).unwrap();
        }
        let out = ascmhl(&python, "create", tz)
            .arg(&root)
            .args(["-h", "xxh128"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{tz:?}: {out:?}");
        let listing = mhl::read(&root).unwrap();
        assert_eq!(listing.algo, Algo::Xxh128);
        let mut got: Times = listing
            .entries
            .into_iter()
            .map(|e| (e.path, e.mtime))
            .collect();
        got.sort();
        // The instant each date's text says, as Python reads it. (The reference
        // implementation writes the offset of the zone now, not at the date: a date of the
        // other season, or of before Kathmandu's +05:45, is written an hour or 15 minutes
        // off. Where the offsets agree, that is the file's time.)
        let said = Command::new(&python)
            .args([
                "-c",
                "import glob, re, sys\nfrom datetime import datetime\n\
                 for f in glob.glob(sys.argv[1] + '/ascmhl/*.mhl'):\n \
                 for d, p in re.findall('lastmodificationdate=\"([^\"]+)\">([^<]+)<', \
                 open(f).read()):\n  print(p, int(datetime.fromisoformat(d).timestamp()))",
            ])
            .arg(&root)
            .output()
            .unwrap();
        let mut want: Times = String::from_utf8(said.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (path, secs) = l.split_once(' ').unwrap();
                (path.as_bytes().to_vec(), Some((secs.parse().unwrap(), 0)))
            })
            .collect();
        want.sort();
        assert_eq!(want.len(), times.len(), "TZ={tz:?}");
        if matches!(tz, Some("UTC") | Some("Asia/Kathmandu") | None) {
            let mut kept = want.clone();
            kept.retain(|(_, t)| t.is_some_and(|(s, _)| s >= 0));
            for (path, t) in &kept {
                let i: usize = std::str::from_utf8(&path[1..]).unwrap().parse().unwrap();
                assert_eq!(t.unwrap().0, times[i], "TZ={tz:?} f{i}");
            }
        }
        assert_eq!(got, want, "TZ={tz:?}");
    }
}

/// Every class of input the reader refuses, each at its line, in words that never echo the
/// file's own text.
#[test]
fn each_refusal_names_its_line() {
    let dir = Scratch::new();
    let file = dir.join("x.mhl");
    let head = "<?xml version=\"1.0\"?>\n<hashlist version=\"2.0\" xmlns=\"urn:ASC:MHL:v2.0\">\n";
    let md5 = "<md5>b1946ac92492d2347c6235b4d2611184</md5>";
    let cases: &[(&str, usize, &str)] = &[
        // Malformed XML.
        ("<hashes>\n<hash>\n<path>a</path\n", 5, "a tag is never closed"),
        ("<hashes>\n<hash><path>a</path><![CDATA[zzz</hash>", 4, "CDATA section is never closed"),
        ("<hashes>\n<hash><path size=\"1>a</path></hash>", 4, "attribute value is never closed"),
        ("<hashes>\n<hash>\n</path>\n", 5, "an end tag of <path> closes <hash>"),
        ("</hashlist>\n</zzz>", 4, "closes nothing"),
        ("</hashlist>\n\n  zzz", 5, "content after the root element"),
        ("<hashes/>\n<?zzz never closed", 4, "processing instruction is never closed"),
        ("<hashes><hash zzz='1' zzz='2'>", 3, "is given twice"),
        ("<!zzz>", 3, "begins no comment"),
        ("<hashes>\n<ha&zzz>", 4, "unexpected text in the tag of a name ASC MHL does not use"),
        ("<hashes>\n<hash zzz<=\"1\">", 4, "unexpected text in the tag of <hash>"),
        ("<hashes>\n< hash>", 4, "a name was expected"),
        ("<hashes xmlns:zzz=\"a<b\">", 3, "holds '<'"),
        ("<hashes xmlns:zzz=\"a&b\">", 3, "a '&' that begins no reference"),
        ("<hashes>\n<hash><path size=\"1\"zzz=\"2\">a</path>", 4, "unexpected text in the tag of <path>"),
        ("<hashes>\n<hash><path size='1'/></hash></hashes></hashlist>", 4, "an empty path"),
        // A hash format ringio does not read.
        ("<hashes>\n<hash><path>a</path>\n<zzz>00</zzz></hash></hashes></hashlist>", 4, "a has a format ASC MHL does not name"),
        // Required elements missing.
        ("<hashes>\n<hash>\n<md5>00</md5></hash></hashes></hashlist>", 4, "a <hash> without <path>"),
        // Entities and escapes.
        ("<hashes>\n<hash><path>zzz & zzz</path></hash></hashes></hashlist>", 4, "a '&' that begins no reference"),
        ("<hashes>\n<hash><path>a</path>&zzz;</hash></hashes></hashlist>", 4, "an unknown entity"),
        ("<hashes>\n<hash><path size=\"&zzz;\">a</path></hash></hashes></hashlist>", 4, "an unknown entity"),
        ("<hashes>\n<hash><path size=\"1 & 2\">a</path></hash></hashes></hashlist>", 4, "begins no reference"),
        ("<hashes>\n<hash><path size=\"1<2\">a</path></hash></hashes></hashlist>", 4, "holds '<'"),
        ("<hashes>\n\n<hash><path>a&#xFFFE;</path></hash></hashes></hashlist>", 5, "a character XML cannot hold"),
        ("<hashes>\n<hash><path>a&#xD800;</path></hash></hashes></hashlist>", 4, "a character XML cannot hold"),
        ("<hashes>\n<hash><path>a&#x110000;</path></hash></hashes></hashlist>", 4, "a character XML cannot hold"),
        ("<hashes>\n<hash><path>a&#xzzz;</path></hash></hashes></hashlist>", 4, "a character XML cannot hold"),
        ("<hashes>\n<hash><path>a&#1;</path></hash></hashes></hashlist>", 4, "a character XML cannot hold"),
        (
            "<hashes>\n<hash>\n<path>a%zz</path><metadata><r:pathencoding \
             xmlns:r=\"urn:ringio:mhl\">percent</r:pathencoding></metadata></hash></hashes></hashlist>",
            5,
            "a percent-encoded path with a bad escape",
        ),
    ];
    for (body, line, says) in cases {
        fs::write(&file, format!("{head}{body}")).unwrap();
        let (got_line, what) = mhl::read(&file).unwrap_err();
        assert!(what.contains(says), "{body}: {what}");
        assert!(!what.contains("zzz"), "{body}: {what}");
        assert_eq!(got_line, *line, "{body}: {what}");
    }
    // Nested without end (a tree whose drop would overflow the stack).
    let deep = format!("{head}{}", "<zzz>\n".repeat(1_000_000));
    fs::write(&file, deep).unwrap();
    let (line, what) = mhl::read(&file).unwrap_err();
    assert_eq!(
        (line, what.as_str()),
        (3 + 256 - 1, "elements nested deeper than 256 levels")
    );
    // Before the root, and no root at all.
    for (text, line, says) in [
        ("\n\n zzz <hashlist/>", 3, "text outside the root element"),
        (
            "\u{feff}\n\n zzz <hashlist/>",
            3,
            "text outside the root element",
        ),
        (
            "\u{feff}\u{feff}<hashlist/>",
            1,
            "text outside the root element",
        ),
        (
            "\u{feff}<hashlist>\n<a>\n\n</hashlist>",
            4,
            "an end tag of <hashlist> closes a name ASC MHL does not use",
        ),
        ("<!-- only -->\n", 2, "no root element"),
        ("<!DOCTYPE hashlist [\n", 1, "a <!DOCTYPE is never closed"),
        (
            "<zzz/>",
            1,
            "the root element is a name ASC MHL does not use, not <hashlist>",
        ),
    ] {
        fs::write(&file, text).unwrap();
        assert_eq!(
            mhl::read(&file).unwrap_err(),
            (line, says.to_string()),
            "{text}"
        );
    }
    // The escapes XML has are read.
    fs::write(
        &file,
        format!(
            "{head}<hashes><hash><path>&#65;&#x42;&lt;&gt;&amp;&quot;&apos;\r\nb</path>{md5}\
             </hash></hashes></hashlist>"
        ),
    )
    .unwrap();
    assert_eq!(mhl::read(&file).unwrap().entries[0].path, b"AB<>&\"'\nb");
}

/// A `lastmodificationdate` that is no date (or none xs:dateTime has) leaves the entry
/// without a time; the file is not refused for it.
#[test]
fn a_bad_date_leaves_the_time_out() {
    let dir = Scratch::new();
    let file = dir.join("x.mhl");
    for date in [
        "yesterday",
        "2020-02-30T00:00:00Z",
        "2020-01-01",
        "2020-13-01T00:00:00Z",
    ] {
        fs::write(
            &file,
            format!(
                "<hashlist version=\"2.0\"><hashes><hash><path size=\"1\" \
                 lastmodificationdate=\"{date}\">a</path><md5>b1946ac92492d2347c6235b4d2611184\
                 </md5></hash></hashes></hashlist>"
            ),
        )
        .unwrap();
        let entries = mhl::read(&file).unwrap().entries;
        assert_eq!((entries[0].size, entries[0].mtime), (1, None), "{date}");
    }
}

/// The zones the local-time tests run in: unset (/etc/localtime), UTC, +05:45, a ':' name,
/// summer time at 2:00 (Berlin), -03:30 with summer time, a half-hour summer time (Lord Howe),
/// POSIX rules, a POSIX offset of its own, a file's path, a name no zone has and the empty TZ
/// (both UTC to the C library).
const ZONES: [Option<&str>; 12] = [
    None,
    Some("UTC"),
    Some("Asia/Kathmandu"),
    Some(":Asia/Kathmandu"),
    Some("Europe/Berlin"),
    Some("America/St_Johns"),
    Some("Australia/Lord_Howe"),
    Some("EST5EDT,M3.2.0,M11.1.0"),
    Some("<+0545>-5:45"),
    Some("/usr/share/zoneinfo/Asia/Tokyo"),
    Some("Nowhere/Land"),
    Some(""),
];

/// rsync, or None (SKIPPED; a failure in CI).
fn rsync_here() -> Option<()> {
    let ok = Command::new("rsync")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        cannot_run("rsync is not installed (the reference)");
    }
    ok.then_some(())
}

/// `program args` in `cwd` with TZ (or without), LC_ALL=C.
fn run_in(program: &str, cwd: &Path, args: &[&str], tz: Option<&str>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    with_tz(&mut cmd, tz);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        describe(&out)
    );
    out
}

/// `ringio sync args`.
fn ours(cwd: &Path, args: &[&str], tz: Option<&str>) -> Output {
    let args = [&["sync"][..], args].concat();
    run_in(env!("CARGO_BIN_EXE_ringio"), cwd, &args, tz)
}

/// Lines of stdout, sorted (parallel workers print in their own order), without ringio's
/// "created directory" (which rsync 3.2.7 prints and later ones do not).
fn sorted(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("created directory"))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// A file's time in local time, as `--list-only` and `%M` show it, is rsync's, byte for byte:
/// in every zone of [`ZONES`], for times in summer time's gap and fold, before 1970 and 1901,
/// and in 2100 and 2500.
#[test]
fn local_times_are_rsyncs_in_any_zone() {
    if rsync_here().is_none() {
        return;
    }
    let dir = Scratch::new();
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    let times: [i64; 11] = [
        1_774_747_800, // 2026-03-29 01:30 UTC: Berlin's 02:00-03:00 gap just passed
        1_792_888_200, // 2026-10-25 00:30 UTC: Berlin's 02:30, summer time
        1_792_891_800, // 2026-10-25 01:30 UTC: Berlin's 02:30 again, winter time
        1_775_313_900, // 2026-04-04 14:45 UTC: Lord Howe's half hour back
        1_772_937_000, // 2026-03-08 02:30 UTC: New York's gap (EST5EDT)
        500_000_000,   // 1985-11-05: Kathmandu still +05:30
        0,
        -1_234_567,
        -2_208_988_800, // 1900-01-01
        4_102_444_800,  // 2100-01-01
        16_725_225_600, // 2500-01-01
    ];
    for (i, secs) in times.iter().enumerate() {
        let file = File::create(src.join(format!("f{i:02}"))).unwrap();
        file.set_modified(at(*secs)).unwrap();
    }
    for (n, tz) in ZONES.iter().enumerate() {
        let listed =
            |program: &str| run_in(program, dir.path(), &["-r", "--list-only", "src/"], *tz);
        let (mine, theirs) = (
            ours(dir.path(), &["-r", "--list-only", "src/"], *tz),
            listed("rsync"),
        );
        assert_eq!(sorted(&mine), sorted(&theirs), "TZ={tz:?}");
        let modified = |dst: &str| {
            vec![
                "-rt".to_string(),
                "--out-format=%M %n".into(),
                "src/".into(),
                dst.into(),
            ]
        };
        let (a, b) = (modified(&format!("o{n}/")), modified(&format!("r{n}/")));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let (mine, theirs) = (
            ours(dir.path(), &a, *tz),
            run_in("rsync", dir.path(), &b, *tz),
        );
        assert_eq!(sorted(&mine), sorted(&theirs), "TZ={tz:?}");
        assert_eq!(sorted(&mine).len(), times.len() + 1, "TZ={tz:?}");
    }
}

/// `now` in local time by the C library (coreutils' date), as rsync writes times.
fn date_now(tz: Option<&str>) -> String {
    let out = run_in("date", Path::new("/"), &["+%Y/%m/%d %H:%M:%S"], tz);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `%t` and the `--log-file` lines begin with the local time now, as rsync writes them
/// (`YYYY/MM/DD HH:MM:SS [PID] `): in each zone, the time ringio writes is the C library's
/// local time between the run's start and end, and rsync's lines have the same shape.
#[test]
fn log_file_and_t_lines_are_rsyncs() {
    if rsync_here().is_none() {
        return;
    }
    let dir = Scratch::new();
    fs::create_dir(dir.join("src")).unwrap();
    fs::write(dir.join("src/a"), b"a").unwrap();
    let shape = |stamp: &str| -> String {
        stamp
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect()
    };
    for (n, tz) in ZONES.iter().enumerate() {
        let stamps = |program: &str, name: &str| -> Vec<String> {
            let log = dir.join(format!("{name}{n}.log"));
            let args = [
                "-r".to_string(),
                format!("--log-file={}", log.display()),
                "--out-format=%t|%n".into(),
                "src/".into(),
                format!("{name}{n}/"),
            ];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let before = date_now(*tz);
            let out = if program == "rsync" {
                run_in("rsync", dir.path(), &args, *tz)
            } else {
                ours(dir.path(), &args, *tz)
            };
            let after = date_now(*tz);
            let mut stamps = Vec::new();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some((t, _)) = line.split_once('|') {
                    stamps.push(t.to_string());
                }
            }
            for line in fs::read_to_string(&log).unwrap().lines() {
                // `YYYY/MM/DD HH:MM:SS [PID] `
                let (t, rest) = line.split_at(19.min(line.len()));
                let pid = rest.strip_prefix(" [").and_then(|r| r.split_once("] "));
                assert!(
                    pid.is_some_and(|(p, _)| p.parse::<u32>().is_ok()),
                    "{program}: {line}"
                );
                stamps.push(t.to_string());
            }
            assert!(stamps.len() >= 3, "{program} TZ={tz:?}: {stamps:?}");
            for t in &stamps {
                assert_eq!(shape(t), "9999/99/99 99:99:99", "{program} TZ={tz:?}: {t}");
                assert!(
                    before <= *t && *t <= after,
                    "{program} TZ={tz:?}: {before} <= {t} <= {after}"
                );
            }
            stamps
        };
        stamps("rsync", "r");
        stamps("ringio", "o");
    }
}
