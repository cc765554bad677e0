//! The operands: which directory pair each source is walked from, rsync's trailing-slash rule,
//! and DEST (made when missing, with its parents under `--mkpath`; a single file may name it).

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::filter::{Scope, Side};
use super::item::{Action, Item};
use super::operand::{self, EntryName, Named};
use super::pair::{Layer, Pair, Pass, Run};
use crate::error::{CopyError, Op};
use crate::policy::sync as rules;
use crate::sys::{self, Kind, Stat};

/// One source operand, resolved.
pub(super) struct Root {
    /// The directory the source side is walked from.
    src_dir: PathBuf,
    /// The destination directory it goes into.
    dst_dir: PathBuf,
    /// The walk covers only these names of `src_dir` (each with its destination name); `None`:
    /// all of it, the directory itself being part of the transfer (`SRC/`).
    only: Option<Vec<(CString, CString)>>,
    /// The source directory's stat, for a `SRC/` root.
    src_stat: Stat,
    /// This run made DEST.
    fresh_dest: bool,
    /// `-R`: the operand's path components below its first (`only`'s one name).
    implied: Option<Arc<[CString]>>,
    /// `-R`: the operand (the last of its path) is followed if it is a symlink (written with
    /// a trailing slash); the directories on the way always are.
    operand_follows: bool,
    /// `-R ./PATH`: the current directory is in the transfer as `./`
    /// (its attributes, not its other contents); its stat.
    dot: Option<Stat>,
}

fn cstring(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

/// The parent directory and last component of a path (`.` for a bare name).
fn split(path: &Path) -> (PathBuf, Vec<u8>) {
    let bytes = path.as_os_str().as_bytes();
    let trimmed = {
        let mut end = bytes.len();
        while end > 1 && bytes[end - 1] == b'/' {
            end -= 1;
        }
        &bytes[..end]
    };
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => (PathBuf::from("/"), trimmed[1..].to_vec()),
        Some(at) => (
            PathBuf::from(OsStr::from_bytes(&trimmed[..at])),
            trimmed[at + 1..].to_vec(),
        ),
        None => (PathBuf::from("."), trimmed.to_vec()),
    }
}

/// Names every operand as rsync does, before anything is made: `None` (reported, the run's
/// usage error) when one cannot be synced as written (rsync refuses the whole run then).
fn name_all<'p>(run: &Run<'p>) -> Option<Vec<(&'p super::Source, Named)>> {
    let plan = run.plan;
    let mut named = Vec::with_capacity(plan.sources.len());
    for (i, source) in plan.sources.iter().enumerate() {
        // A source named twice is synced once (rsync's file list holds each name once).
        if plan.sources[..i].iter().any(|s| s.path == source.path) {
            continue;
        }
        match operand::name(source.path.as_os_str().as_bytes(), plan.relative) {
            Ok(n) => named.push((source, n)),
            Err(why) => {
                run.out.error(&why.to_string());
                run.trouble.usage.store(true, Ordering::Relaxed);
                return None;
            }
        }
    }
    Some(named)
}

/// Each named operand with its stat; a failure is reported (23). The operand itself is not
/// followed when it is a symlink named as an entry, as rsync sends the link (unless -L);
/// otherwise only to a directory. A failed `-R ./PATH` still brings its `.` (`Stat` of the
/// base), as rsync sends its implied dot dir before it looks at PATH.
fn stat_all<'p>(
    run: &Run<'p>,
    named: Vec<(&'p super::Source, Named)>,
) -> Vec<(&'p super::Source, Named, Option<Stat>)> {
    let plan = run.plan;
    let mut sources = Vec::with_capacity(named.len());
    for (source, named) in named {
        let (path, dirlink) = named.stat_path();
        let c = cstring(path.as_os_str().as_bytes());
        let stat = match (plan.symlinks == super::Symlinks::Follow, dirlink) {
            (true, _) => sys::statx_at(rustix::fs::CWD, &c, true),
            (false, true) => super::pair::stat_dirlink(rustix::fs::CWD, &c),
            (false, false) => sys::statx_at(rustix::fs::CWD, &c, false),
        };
        match stat {
            Ok(stat) => sources.push((source, named, Some(stat))),
            Err(e) => {
                let message = format!(
                    "link_stat {} failed: {}",
                    crate::quote::quote_path(&source.path),
                    crate::error::reason(&e)
                );
                let e = CopyError::io(Op::Stat, source.path.clone(), e);
                run.out.fail_worded(&message, &e);
                run.trouble.failed.store(true, Ordering::Relaxed);
                if matches!(named, Named::Relative { dot: true, .. }) {
                    sources.push((source, named, None));
                }
            }
        }
    }
    sources
}

/// Resolves the operands. Failures are reported; a source that cannot be used is left out
/// (and the run ends with 23), a DEST that cannot be made leaves no roots.
pub(super) fn resolve(run: &Run<'_>) -> Vec<Root> {
    let plan = run.plan;
    let Some(named) = name_all(run) else {
        return Vec::new();
    };
    let sources = stat_all(run, named);
    let dest = &plan.dest;
    // With no source left, rsync's receiver still makes a DEST written as a directory.
    let dest_names_dir = plan.dest_is_dir || operand::names_dir(dest.as_os_str().as_bytes());
    if sources.is_empty() && !plan.sources.is_empty() && !dest_names_dir {
        return Vec::new();
    }
    // DEST: a directory, unless one file is synced to a name that is not one.
    let dest_stat = sys::statx_at(rustix::fs::CWD, &cstring(dest.as_os_str().as_bytes()), true);
    let dest_is_dir = matches!(&dest_stat, Ok(s) if s.kind() == Kind::Dir);
    if let [(_, named, Some(stat))] = &sources[..] {
        let single_file = plan.sources.len() == 1 && stat.kind() != Kind::Dir && !dest_names_dir;
        if single_file && !dest_is_dir {
            if let Some(root) = single_file_root(run, named, *stat) {
                return root;
            }
        }
    }
    if let Err(e) = &dest_stat {
        if e.raw_os_error() != Some(libc::ENOENT) {
            run.fail(CopyError::io(
                Op::Stat,
                dest.clone(),
                std::io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO)),
            ));
            run.trouble.root.store(true, Ordering::Relaxed);
            return Vec::new();
        }
    } else if !dest_is_dir {
        run.out.error(&format!(
            "ERROR: destination must be a directory when copying more than 1 file: {}",
            crate::quote::quote_path(dest)
        ));
        run.trouble.root.store(true, Ordering::Relaxed);
        return Vec::new();
    }
    let fresh_dest = !dest_is_dir;
    if !dest_is_dir && !plan.dry_run {
        let made = if plan.mkpath {
            std::fs::create_dir_all(dest)
        } else {
            std::fs::create_dir(dest)
        };
        if let Err(e) = made {
            run.fail(CopyError::io(Op::CreateDir, dest.clone(), e));
            // rsync: a DEST that cannot be made is an I/O error (11) where there is something
            // to put in it; with no source left, its receiver only fails to enter it (3).
            if sources.is_empty() {
                run.trouble.root.store(true, Ordering::Relaxed);
            } else {
                run.trouble.file_io.store(true, Ordering::Relaxed);
            }
            return Vec::new();
        }
    }
    if !dest_is_dir && run.out.format.is_some() && !run.out.list_only {
        let shown = dest.as_os_str().as_bytes();
        let end = shown.iter().rposition(|&b| b != b'/').map_or(1, |i| i + 1);
        let shown = String::from_utf8_lossy(&shown[..end]);
        run.out.say(&format!("created directory {shown}"));
    }
    sources
        .into_iter()
        .filter_map(|(source, named, stat)| root_of(run, source, named, stat, fresh_dest))
        .collect()
}

/// The root one operand is walked from (`None`: left out, reported). `stat`: the operand's
/// (`None` for a `-R ./PATH` whose PATH failed: only its `.` is in the transfer).
fn root_of(
    run: &Run<'_>,
    source: &super::Source,
    named: Named,
    stat: Option<Stat>,
    fresh_dest: bool,
) -> Option<Root> {
    let dest = &run.plan.dest;
    let dot_of = |base: &Path| {
        sys::statx_at(rustix::fs::CWD, &cstring(base.as_os_str().as_bytes()), true).ok()
    };
    let root = |src_dir: PathBuf, src_stat: Stat| Root {
        src_dir,
        dst_dir: dest.clone(),
        only: None,
        src_stat,
        fresh_dest,
        implied: None,
        operand_follows: false,
        dot: None,
    };
    let Some(stat) = stat else {
        let Named::Relative { base, .. } = named else {
            return None;
        };
        let dot = dot_of(&base)?;
        return Some(Root {
            only: Some(Vec::new()),
            dot: Some(dot),
            ..root(base, dot)
        });
    };
    match named {
        Named::Relative {
            base,
            parts,
            slash,
            dot,
        } => {
            let (first, rest) = parts.split_first().expect("a -R operand has a part");
            // rsync lists the dot directory itself only when the path below `/./` starts
            // with it.
            let dot = dot.then(|| dot_of(&base)).flatten();
            let rest: Vec<CString> = rest.iter().cloned().map(EntryName::into_cstring).collect();
            let first = first.clone().into_cstring();
            Some(Root {
                only: Some(vec![(first.clone(), first)]),
                implied: Some(Arc::from(rest)),
                operand_follows: slash,
                dot,
                ..root(base, stat)
            })
        }
        Named::Contents(dir) => {
            if stat.kind() != Kind::Dir {
                let enotdir = std::io::Error::from_raw_os_error(libc::ENOTDIR);
                run.fail(CopyError::io(Op::OpenDir, dir, enotdir));
                return None;
            }
            if overlaps(run, &source.path, dest) {
                return None;
            }
            Some(root(dir, stat))
        }
        Named::Entry { dir, name } => {
            if stat.kind() == Kind::Dir && overlaps(run, &source.path, dest) {
                return None;
            }
            let name = name.into_cstring();
            Some(Root {
                only: Some(vec![(name.clone(), name)]),
                ..root(dir, stat)
            })
        }
    }
}

/// One file synced to a name that is not a directory (`f NEW`): the root that writes it,
/// DEST's parent made first under `--mkpath`; `None` for an operand that names no entry.
/// An empty vector when that parent cannot be made or DEST's name cannot be an entry's.
fn single_file_root(run: &Run<'_>, named: &Named, stat: Stat) -> Option<Vec<Root>> {
    let plan = run.plan;
    let (src_dir, name) = named.entry()?;
    let (dst_dir, dst_name) = split(&plan.dest);
    let Some(dst_name) = EntryName::new(&dst_name) else {
        run.out.error(&format!(
            "cannot sync a file to {}: not a file name",
            crate::quote::quote_path(&plan.dest)
        ));
        run.trouble.root.store(true, Ordering::Relaxed);
        return Some(Vec::new());
    };
    if plan.mkpath && !plan.dry_run {
        if let Err(e) = std::fs::create_dir_all(&dst_dir) {
            run.fail(CopyError::io(Op::CreateDir, dst_dir, e));
            run.trouble.root.store(true, Ordering::Relaxed);
            return Some(Vec::new());
        }
    }
    Some(vec![Root {
        src_dir,
        dst_dir,
        only: Some(vec![(name.into_cstring(), dst_name.into_cstring())]),
        src_stat: stat,
        fresh_dest: false,
        implied: None,
        operand_follows: false,
        dot: None,
    }])
}

/// True (and reported) when the source directory `src` lies inside DEST and a deletion would
/// reach it, unless a filter protects the part of DEST that holds it. (DEST inside a source
/// needs no refusal: the walk leaves DEST's own directory out of the source.)
fn overlaps(run: &Run<'_>, src: &Path, dest: &Path) -> bool {
    let (Ok(s), Ok(d)) = (src.canonicalize(), canonical_or_parent(dest)) else {
        return false;
    };
    if !s.starts_with(&d) || s == d || run.plan.delete.is_none() {
        return false;
    }
    let rel = s.strip_prefix(&d).unwrap_or(&s);
    let scope = Scope::root(run.plan.filters.clone());
    let mut path = Vec::new();
    for part in rel.components() {
        path = super::pair::join(&path, part.as_os_str().as_bytes());
        if scope.excluded(&path, true, Side::Receiver) {
            return false;
        }
    }
    run.out.error(&format!(
        "refusing to sync {} into {} with deletion: the source lies inside the destination \
         (exclude it to protect it)",
        crate::quote::quote_path(src),
        crate::quote::quote_path(dest)
    ));
    run.trouble.root.store(true, Ordering::Relaxed);
    true
}

/// The canonical path of `p`, or of its nearest existing ancestor joined with the rest.
fn canonical_or_parent(p: &Path) -> std::io::Result<PathBuf> {
    match p.canonicalize() {
        Ok(c) => Ok(c),
        Err(_) => {
            let parent = p.parent().filter(|p| !p.as_os_str().is_empty());
            let base = match parent {
                Some(parent) => canonical_or_parent(parent)?,
                None => std::env::current_dir()?,
            };
            Ok(base.join(p.file_name().unwrap_or_default()))
        }
    }
}

fn open_path(path: &Path) -> std::io::Result<OwnedFd> {
    sys::open_dir(rustix::fs::CWD, &cstring(path.as_os_str().as_bytes()), true)
}

/// Opens the directory pair of the roots (the operands, which all go into one destination
/// directory) for `pass`: one source layer per operand, merged as rsync's one file list
/// merges them. The root of a `SRC/` transfer is itemized as `./`.
pub(super) fn open_root_pair<'r>(run: &'r Run<'r>, roots: &[Root], pass: Pass) -> Option<Pair<'r>> {
    let plan = run.plan;
    let first = roots.first()?;
    let top = Scope::root(plan.filters.clone());
    let enter = |fd: &OwnedFd| match top.enter(fd.as_fd(), b"") {
        Ok(s) => Some(s),
        Err(e) => {
            run.fail(CopyError::Refused(e.to_string()));
            None
        }
    };
    let layers = root_layers(run, roots, &top, &enter)?;
    // A later pass works in the directory the first one opened (one anchor for the run),
    // opened anew: a duplicate would share the offset the first pass's listing left at its end.
    let opened = match run.dest_anchor.get() {
        Some(anchor) => sys::open_dir(anchor.as_fd(), c".", false),
        None => open_path(&first.dst_dir),
    };
    let dst: Option<OwnedFd> = match opened {
        Ok(fd) => Some(fd),
        Err(e) if plan.dry_run && e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => {
            run.fail(CopyError::io(Op::OpenDir, first.dst_dir.clone(), e));
            run.trouble.root.store(true, Ordering::Relaxed);
            return None;
        }
    };
    // DEST is part of the transfer when some operand is a `SRC/`: the first one's stat is
    // the one DEST takes.
    let whole_root = roots.iter().find(|r| r.only.is_none());
    let whole = whole_root.is_some();
    let dot = roots.iter().find_map(|r| r.dot);
    let mut src_stat = whole_root
        .map(|r| r.src_stat)
        .or(dot)
        .unwrap_or(first.src_stat);
    // --chmod applies to the transfer's root as to every entry.
    if !plan.chmod.is_empty() {
        let perm = super::chmod::apply(&plan.chmod, src_stat.perm(), true, run.umask);
        src_stat.mode = (src_stat.mode & libc::S_IFMT) | perm;
    }
    if plan.fake_super {
        if let Some(layer) = layers.first() {
            super::fake::read(crate::xattr::Subject::Fd(layer.fd.as_fd()), &mut src_stat);
        }
    }
    let shown = whole || dot.is_some();
    let dst_before = dst.as_ref().and_then(|fd| sys::fstatx(fd.as_fd()).ok());
    let dst_scope = if whole {
        dst.as_ref().and_then(enter)
    } else {
        Some(top.clone())
    };
    let root_item = (shown && matches!(pass, Pass::Transfer { .. }))
        .then(|| root_item(run, &src_stat, dst_before.filter(|_| !first.fresh_dest)));
    let anchor = match run.dest_anchor.get() {
        Some(anchor) => Some(anchor.clone()),
        None => {
            let anchor = dst
                .as_ref()
                .and_then(|fd| fd.try_clone().ok())
                .map(Arc::new);
            if let Some(anchor) = &anchor {
                let _ = run.dest_anchor.set(anchor.clone());
            }
            anchor
        }
    };
    Some(Pair {
        run,
        _parent: None,
        handoff: Default::default(),
        layers,
        dst: dst.map(super::dirfd::DirFd::new),
        holders: Default::default(),
        rel: Vec::new(),
        anchor,
        dst_rel: Vec::new(),
        dst_path: first.dst_dir.clone(),
        src_stat,
        dst_before,
        dst_stat: dst_before,
        changed: Default::default(),
        dst_default_acl: std::sync::OnceLock::new(),
        whole,
        keeps_attrs: shown,
        dst_scope,
        pass,
        item: root_item,
        made_now: first.fresh_dest && !plan.dry_run,
        block: None,
    })
}

/// The roots' source directories opened, each a layer of the root pair with its filter scope
/// (a `SRC/` root reads SRC's own merge files; an operand's parent is not in the transfer).
/// One that cannot be opened is said and left out; `None`: none could be (or a merge file
/// could not be read).
fn root_layers(
    run: &Run<'_>,
    roots: &[Root],
    top: &Scope,
    enter: &dyn Fn(&OwnedFd) -> Option<Scope>,
) -> Option<Vec<Layer>> {
    let mut layers = Vec::with_capacity(roots.len());
    for root in roots {
        let fd = match open_path(&root.src_dir) {
            Ok(fd) => fd,
            Err(e) => {
                run.fail(CopyError::io(Op::OpenDir, root.src_dir.clone(), e));
                continue;
            }
        };
        let scope = if root.only.is_none() {
            enter(&fd)?
        } else {
            top.clone()
        };
        let id = sys::fstatx(fd.as_fd()).map_or((0, 0), |st| (st.dev, st.ino));
        layers.push(Layer {
            fd: super::dirfd::DirFd::new(fd),
            dev: id.0,
            path: root.src_dir.clone(),
            only: root.only.clone(),
            implied: root.implied.clone(),
            operand_follows: root.operand_follows,
            scope,
            ancestry: Arc::new(super::pair::Ancestry { id, up: None }),
        });
    }
    (!layers.is_empty()).then_some(layers)
}

/// The transfer root's own line (`.d..t...... ./`, `cd+++++++++ ./`), counted: against DEST
/// as it was (`None`: made now, or made fresh by this run), or, made now, against the first
/// `--*-dest` tree, which has it.
fn root_item(run: &Run<'_>, src_stat: &Stat, dst_before: Option<Stat>) -> Item {
    run.stats.files.add(Kind::Dir);
    let mut item = Item::new(Action::Attributes, src_stat, b".");
    item.times_kept = run.plan.times;
    match dst_before {
        Some(d) => {
            let want = super::wanted::wanted(run, src_stat, Some(&d));
            item.attrs = rules::attr_changes(&run.rules, &want, &d, run.window_ns);
        }
        None => {
            item.action = Action::LocalChange;
            item.new = true;
            if let Some(alt) = run.alt_roots.first() {
                if let Ok(a) = sys::fstatx(alt.as_fd()) {
                    let want = super::wanted::wanted(run, src_stat, None);
                    item.new = false;
                    item.matched = true;
                    item.attrs = rules::attr_changes(&run.rules, &want, &a, run.window_ns);
                }
            }
        }
    }
    item
}
