//! The rules in force in one directory: the global list, the `-C` tail, and for each active
//! per-directory merge file its rules here (this directory's first, then the inherited ones),
//! as Arc-linked chains shared with the parent's scope. Entering a directory reads its merge
//! files relative to its descriptor; rsync's parent scan (`dir-merge /.rsync-filter`) reads the
//! transfer root's parents through `..`, relative to the same descriptor.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use super::merge::{read_at, Env, ListBuilder};
use super::rule::{basename, fl, xf, Base, Kind, MergeSpec, Rule};
use super::{FilterError, FilterRules, Side};

/// The rules in force in one directory: the global rules plus the dir-merge files read on the
/// way down. Cloning is cheap (one Arc); memory grows with depth, never with the tree.
#[derive(Clone, Debug)]
pub struct Scope(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    merges: Vec<MergeState>,
    /// The transfer root's absolute path, once a rule needed it.
    root_abs: Option<Arc<[u8]>>,
}

#[derive(Debug)]
struct Shared {
    rules: Arc<FilterRules>,
    /// What `-C` appends after every other rule.
    tail: Vec<Rule>,
}

/// One active per-directory merge file.
#[derive(Clone, Debug)]
struct MergeState {
    spec: Arc<MergeSpec>,
    /// The file name looked for in each directory (the rule's basename once set up).
    name: Arc<[u8]>,
    /// Its rules here: the newest directory's first.
    chain: Option<Arc<Chain>>,
    /// rsync's FINISH_SETUP: the parent scan is done at the first directory entered.
    set_up: bool,
}

/// One directory's rules from one merge file, then those it inherits.
#[derive(Debug)]
struct Chain {
    rules: Vec<Rule>,
    next: Option<Arc<Chain>>,
}

fn merge_states(rules: &[Rule], into: &mut Vec<MergeState>) {
    for r in rules {
        if let Kind::DirMerge(spec) = &r.kind {
            if !into.iter().any(|m| Arc::ptr_eq(&m.spec, spec)) {
                into.push(MergeState {
                    spec: spec.clone(),
                    name: spec.basename().into(),
                    chain: None,
                    set_up: false,
                });
            }
        }
    }
}

fn any_abs(rules: &[Rule]) -> bool {
    rules.iter().any(|r| r.flags & fl::ABS_PATH != 0)
}

/// The components of an absolute or relative path, empty ones skipped.
fn parts(path: &[u8]) -> Vec<&[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect()
}

/// "/" + the components joined, "." and ".." resolved lexically (rsync's clean_fname).
fn clean_abs(path: &[u8]) -> Vec<u8> {
    let mut out: Vec<&[u8]> = Vec::new();
    for c in parts(path) {
        match c {
            b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(c),
        }
    }
    let mut s = Vec::with_capacity(path.len() + 1);
    for c in &out {
        s.push(b'/');
        s.extend_from_slice(c);
    }
    if s.is_empty() {
        s.push(b'/');
    }
    s
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    [dir, b"/", name].concat()
}

impl Scope {
    /// The scope above the transfer root: the global rules only, no per-directory file read
    /// yet. Enter the root (`rel_dir` "") to get the scope of its entries.
    pub fn root(rules: Arc<FilterRules>) -> Scope {
        let tail = rules.cvs_tail();
        let mut merges = Vec::new();
        merge_states(rules.rules(), &mut merges);
        merge_states(&tail, &mut merges);
        Scope(Arc::new(Inner {
            shared: Arc::new(Shared { rules, tail }),
            merges,
            root_abs: None,
        }))
    }

    /// Entering directory `rel_dir` (its path from the transfer root, "" for the root) whose
    /// open descriptor is `dir`: reads its per-directory merge files (openat relative to `dir`),
    /// giving the scope for its entries.
    ///
    /// As rsync: a missing or unreadable file is no rules; `n` rules are not inherited below;
    /// `!` in a file clears that merge file's inherited rules; a rule with a leading "/" in a
    /// file is anchored at the file's directory; a dir-merge rule in a file is active from this
    /// directory down; a merge file named with a path (`: /.rsync-filter`, `: ../../.rules`)
    /// is also looked for, the first time a directory is entered, in every parent from the one
    /// it names down to this directory's parent. A syntax error in a file is an error.
    pub fn enter(&self, dir: BorrowedFd<'_>, rel_dir: &[u8]) -> Result<Scope, FilterError> {
        let shared = &self.0.shared;
        let mut root_abs = self.0.root_abs.clone();
        if root_abs.is_none()
            && (any_abs(shared.rules.rules())
                || any_abs(&shared.tail)
                || any_abs(shared.rules.cvs_rules()))
        {
            root_abs = Some(find_root(dir, rel_dir)?);
        }
        let mut merges: Vec<MergeState> = self
            .0
            .merges
            .iter()
            .map(|m| MergeState {
                chain: if m.spec.flags & fl::NO_INHERIT != 0 {
                    None
                } else {
                    m.chain.clone()
                },
                ..m.clone()
            })
            .collect();
        let base = Arc::new(Base {
            strip: rel_dir.into(),
            lead: Box::default(),
        });
        let mut new_abs = false;
        let mut i = 0;
        while i < merges.len() {
            if !merges[i].set_up {
                merges[i].set_up = true;
                self.set_up(&mut merges, i, dir, rel_dir, &mut root_abs, &mut new_abs)?;
            }
            let name = merges[i].name.clone();
            if let Ok(data) = read_at(dir, &name) {
                let shown = String::from_utf8_lossy(&join(rel_dir, &name)).into_owned();
                let shown = shown.trim_start_matches('/').to_owned();
                let mut env = Env {
                    shared: &shared.rules,
                    base: Some(base.clone()),
                    dir: Some(dir),
                    origin: None,
                    taken: merges.iter().map(|m| m.name.to_vec().into()).collect(),
                    depth: 0,
                    from0: shared.rules.from0(),
                };
                let mut b = ListBuilder::default();
                let flags = merges[i].spec.flags;
                b.parse_file(&mut env, &data, &shown, flags, xf::ANCHORED2ABS)?;
                new_abs |= any_abs(&b.rules);
                add_local(&mut merges, i, b);
            }
            i += 1;
        }
        if root_abs.is_none() && new_abs {
            root_abs = Some(find_root(dir, rel_dir)?);
        }
        Ok(Scope(Arc::new(Inner {
            shared: shared.clone(),
            merges,
            root_abs,
        })))
    }

    /// rsync's `setup_merge_file`: a merge file named with a path is looked for in the parents
    /// of this directory from the one the path names; from then on only its basename is used.
    fn set_up(
        &self,
        merges: &mut Vec<MergeState>,
        i: usize,
        dir: BorrowedFd<'_>,
        rel_dir: &[u8],
        root_abs: &mut Option<Arc<[u8]>>,
        new_abs: &mut bool,
    ) -> Result<(), FilterError> {
        let spec = merges[i].spec.clone();
        let name = &spec.name[..];
        if !name.starts_with(b"/") && spec.origin.is_none() && !name.contains(&b'/') {
            return Ok(());
        }
        if root_abs.is_none() {
            *root_abs = Some(find_root(dir, rel_dir)?);
        }
        let root = root_abs.clone().unwrap_or_else(|| Arc::from(&b"/"[..]));
        let here = clean_abs(&join(&root, rel_dir));
        let file = if name.starts_with(b"/") {
            clean_abs(name)
        } else if let Some(origin) = &spec.origin {
            clean_abs(&join(origin, name))
        } else {
            clean_abs(&join(&here, name))
        };
        merges[i].name = basename(&file).into();
        let file_dir = parts(&file[..file.len() - basename(&file).len()]);
        let here_parts = parts(&here);
        let root_parts = parts(&root);
        if file_dir.len() >= here_parts.len() || here_parts[..file_dir.len()] != file_dir[..] {
            return Ok(()); // not a parent of this directory: no scan
        }
        let name = merges[i].name.clone();
        for up in (1..=here_parts.len() - file_dir.len()).rev() {
            let depth = here_parts.len() - up; // the parent's component count
            let mut rel = b"../".repeat(up);
            rel.extend_from_slice(&name);
            let Ok(data) = read_at(dir, &rel) else {
                continue;
            };
            let base = if depth <= root_parts.len() {
                Base {
                    strip: Box::default(),
                    lead: root_parts[depth..].join(&b'/').into(),
                }
            } else {
                Base {
                    strip: here_parts[root_parts.len()..depth].join(&b'/').into(),
                    lead: Box::default(),
                }
            };
            let parent_abs = clean_abs(&here_parts[..depth].join(&b'/'));
            let shown = String::from_utf8_lossy(&join(&parent_abs, &name)).replace("//", "/");
            let mut env = Env {
                shared: &self.0.shared.rules,
                base: Some(Arc::new(base)),
                dir: Some(dir),
                origin: Some(parent_abs.into()),
                taken: merges.iter().map(|m| m.name.to_vec().into()).collect(),
                depth: 0,
                from0: self.0.shared.rules.from0(),
            };
            let mut b = ListBuilder::default();
            b.parse_file(&mut env, &data, &shown, spec.flags, xf::ANCHORED2ABS)?;
            *new_abs |= any_abs(&b.rules);
            if spec.flags & fl::NO_INHERIT != 0 {
                continue; // rsync reads and drops them
            }
            add_local(merges, i, b);
        }
        Ok(())
    }

    /// True when the entry at `rel` (path from the transfer root, no leading slash, its last
    /// component the name) is excluded for `side`. First matching rule wins, as rsync.
    pub fn excluded(&self, rel: &[u8], is_dir: bool, side: Side) -> bool {
        self.verdict(rel, is_dir, side, false) == Some(false)
    }

    /// As [`excluded`](Self::excluded) for [`Side::Receiver`] inside a directory that is being
    /// deleted: perishable (`p`) rules are ignored there, so they do not keep the directory.
    pub fn excluded_in_deleted_dir(&self, rel: &[u8], is_dir: bool) -> bool {
        self.verdict(rel, is_dir, Side::Receiver, true) == Some(false)
    }

    /// The first matching rule's verdict for `rel`: `Some(true)` included, `Some(false)`
    /// excluded, None when no rule matched. `ignore_perishable` skips `p` rules.
    pub fn verdict(
        &self,
        rel: &[u8],
        is_dir: bool,
        side: Side,
        ignore_perishable: bool,
    ) -> Option<bool> {
        let shared = &self.0.shared;
        let q = Query {
            rel,
            is_dir,
            side,
            ignore_perishable,
            delete_excluded: shared.rules.delete_excluded(),
            root_abs: self.0.root_abs.as_deref(),
        };
        self.walk(shared.rules.rules(), &q)
            .or_else(|| self.walk(&shared.tail, &q))
    }

    fn walk(&self, rules: &[Rule], q: &Query<'_>) -> Option<bool> {
        for r in rules {
            if q.ignore_perishable && r.flags & fl::PERISHABLE != 0 {
                continue;
            }
            match &r.kind {
                Kind::DirMerge(spec) => {
                    let state = self.0.merges.iter().find(|m| Arc::ptr_eq(&m.spec, spec));
                    let mut link = state.and_then(|m| m.chain.as_deref());
                    while let Some(c) = link {
                        if let Some(v) = self.walk(&c.rules, q) {
                            return Some(v);
                        }
                        link = c.next.as_deref();
                    }
                }
                Kind::Cvs => {
                    if let Some(v) = self.walk(self.0.shared.rules.cvs_rules(), q) {
                        return Some(v);
                    }
                }
                Kind::Pattern => {
                    let mut sides = r.flags & fl::SIDES;
                    if sides == 0 && q.delete_excluded {
                        sides = fl::SENDER;
                    }
                    let want = match q.side {
                        Side::Sender => fl::SENDER,
                        Side::Receiver => fl::RECEIVER,
                    };
                    if sides != 0 && sides & want == 0 {
                        continue;
                    }
                    if r.matches(q.rel, q.is_dir, q.root_abs) {
                        return Some(r.flags & fl::INCLUDE != 0);
                    }
                }
            }
        }
        None
    }
}

struct Query<'a> {
    rel: &'a [u8],
    is_dir: bool,
    side: Side,
    ignore_perishable: bool,
    delete_excluded: bool,
    root_abs: Option<&'a [u8]>,
}

/// Puts one file's rules in front of merge `i`'s chain (after a `!`, in place of it), and makes
/// the dir-merge rules among them active.
fn add_local(merges: &mut Vec<MergeState>, i: usize, b: ListBuilder) {
    if b.cleared {
        merges[i].chain = None;
    }
    if b.rules.is_empty() {
        return;
    }
    merge_states(&b.rules, merges);
    let next = merges[i].chain.take();
    merges[i].chain = Some(Arc::new(Chain {
        rules: b.rules,
        next,
    }));
}

/// The transfer root's absolute path: the directory's, through /proc, less `rel_dir`.
fn find_root(dir: BorrowedFd<'_>, rel_dir: &[u8]) -> Result<Arc<[u8]>, FilterError> {
    let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let path = std::fs::read_link(link).map_err(|source| FilterError::RootPath { source })?;
    let abs = path.as_os_str().as_bytes();
    if !abs.starts_with(b"/") {
        let source = std::io::Error::other(format!("{} is no path", path.display()));
        return Err(FilterError::RootPath { source });
    }
    let here = parts(abs);
    let up = parts(rel_dir).len().min(here.len());
    Ok(clean_abs(&here[..here.len() - up].join(&b'/')).into())
}
