//! The walk of the two trees together: a pool of workers takes directory pairs from a shared
//! LIFO stack, so with one worker the order is rsync's (a directory's entries, then each
//! subdirectory's, depth first). Each pair's listing is read in full, filtered and sorted, the
//! destination's extraneous entries are deleted (once the source listing is known to be
//! complete), and each entry is decided and carried out. A directory's own attributes are set
//! when its pair is dropped, after all its children.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::apply;
use super::filter::Side;
use super::held::{self, DirFd};
use super::item::{Action, Item};
use super::listing::{self, Listed, Listing};
use super::order::{Block, Printer};
use super::pair::{
    join, report, rsync_order, Ancestry, Handed, Layer, Pair, Pass, Run, SrcEntry, Trouble,
};
use super::roots::{self, Root};
use super::{DeleteWhen, Outcome, Output, Progress, Stats, Symlinks, SyncPlan};
use crate::error::{CopyError, Op};
use crate::policy::sync::{self as rules, Facts, QuickCheck, Rules, Verdict};
use crate::stack::WorkStack;
use crate::sys::{self, Kind, Stat};

/// Bytes of the buffer a worker reads directories into.
const DIR_BUF: usize = 64 * 1024;

/// Entries of one directory handed to a worker of their own (a big directory spreads over
/// the workers), and stated by a thread of their own as it is listed.
const BATCH: usize = 256;

/// [`BATCH`] in a directory the run made: every entry is one to make, work enough that smaller
/// batches spread it better (a first sync of 1,024 files of 32 KiB in one directory, ext4,
/// warm: 0.031 s against 0.037 s with 256; in directories that exist, where most entries are
/// only compared, 32 made re-syncs of 50k-mixed 8-14% slower).
const NEW_BATCH: usize = 32;

/// Work for a worker: a directory to walk, or a batch of a listed directory's entries.
pub(super) enum Work<'r> {
    Dir(Box<Task<'r>>),
    /// With the block its lines go to (when lines are kept in order).
    Entries(
        Arc<Pair<'r>>,
        Arc<Listing>,
        std::ops::Range<usize>,
        Option<Arc<Block<'r>>>,
    ),
    /// A directory's deletions whose turn came (see `order`), and whether they may be made.
    Delete(Arc<Block<'r>>, bool, super::order::Deferred<'r>),
}

/// The work waiting to be done, and how many workers are doing some.
pub(super) struct Pool<'r> {
    stack: WorkStack<Work<'r>>,
    /// Keeps rsync's order of the lines, where lines are printed, and of the deletions.
    printer: Option<Printer<'r>>,
}

/// A subdirectory to walk.
pub(super) struct Task<'r> {
    parent: Arc<Pair<'r>>,
    name: CString,
    /// The parent's sources that hold it as a directory (the first gave the entry).
    layers: Vec<usize>,
    src_stat: Stat,
    dst_before: Option<Stat>,
    /// Its destination entry is a symlink to a directory kept under -K.
    dst_follow: bool,
    /// Its line.
    item: Option<Item>,
    /// Where its lines wait for their turn (when lines are printed).
    block: Option<Arc<Block<'r>>>,
    /// Its entries are walked (false: `-d`, `-R` or `--files-from` without `-r`, or `-x` at
    /// a mount point: the directory is made and given its attributes, and left empty).
    contents: bool,
}

impl Drop for Pair<'_> {
    fn drop(&mut self) {
        let run = self.run;
        let transfer = matches!(self.pass, Pass::Transfer { .. });
        if self.keeps_attrs && !run.plan.dry_run && transfer && self.dst.is_some() {
            // Its descriptors may have closed under the budget: opened again for this.
            match held::hold(self) {
                Ok(_held) => {
                    // Deletions waiting for their turn set the times once they have deleted
                    // (`Handoff`), with this descriptor if it can be lent.
                    let waiting = self.handoff.get().filter(|h| h.waiting());
                    let dst = self.dst.as_ref().map(|d| d.as_fd());
                    let times = waiting.is_none();
                    if let Err(e) =
                        dst.map_or(Ok(()), |dst| super::attrs::dir_attrs(run, self, dst, times))
                    {
                        run.fail(e);
                    }
                    let take = || self.dst.as_ref().and_then(|d| d.take());
                    if waiting.is_some_and(|h| !h.lend(run, take)) {
                        // They came meanwhile, after all.
                        let dst = self.dst.as_ref().map(|d| d.as_fd());
                        if let Err(e) = dst.map_or(Ok(()), |dst| super::attrs::dir_times(self, dst))
                        {
                            run.fail(e);
                        }
                    }
                }
                Err(e) => run.fail(e),
            }
        }
        held::dropped(self);
    }
}

impl<'r> Pool<'r> {
    fn new(printer: Option<Printer<'r>>, threads: usize) -> Self {
        Pool {
            stack: WorkStack::new(threads),
            printer,
        }
    }

    /// A directory's lines are done (with the blocks of its subdirectories, in order): printed
    /// now, or when their turn comes.
    fn print(
        &self,
        out: &Output,
        block: Option<&Block<'r>>,
        lines: Vec<u8>,
        children: Vec<Arc<Block<'r>>>,
    ) {
        match (&self.printer, block) {
            (Some(printer), Some(block)) => {
                self.delete(printer.finish(out, block, lines, children))
            }
            _ => out.print(&lines),
        }
    }

    /// Hands deletions whose turn came to the workers.
    fn delete(&self, due: super::order::Due<'r>) {
        let work = due
            .into_iter()
            .map(|(block, clean, f)| Work::Delete(block, clean, f));
        self.push(work.collect());
    }

    fn push_all(&self, tasks: Vec<Task<'r>>) {
        self.push(tasks.into_iter().map(|t| Work::Dir(Box::new(t))).collect());
    }

    fn push(&self, work: Vec<Work<'r>>) {
        self.stack.push_all(work);
    }

    /// Takes the next piece of work, waiting while others work; `None` when all is done.
    fn pop(&self) -> Option<Work<'r>> {
        self.stack.pop_or_finish(false)
    }

    fn done_one(&self) {
        self.stack.done();
    }
}

/// Runs a plan: resolves the roots, then walks each (a deletion pass first or after, as asked).
pub(super) fn run(plan: &SyncPlan, out: &Output, stop: &AtomicBool) -> Outcome {
    let started = Instant::now();
    // Before the workers start: the table never grows under them.
    ringio_base::limits::grow_descriptor_table();
    let mut run = new_run(plan, out, stop);
    let roots = open_roots(&mut run);
    // rsync deletes nothing when a source could not be read (its "IO error encountered").
    let source_trouble = (run.trouble.failed.load(Ordering::Relaxed)
        || run.trouble.root.load(Ordering::Relaxed))
        && !plan.ignore_errors;
    let delete = plan.delete.filter(|_| !source_trouble);
    if source_trouble && plan.delete.is_some() && !roots.is_empty() {
        let mut line = Vec::new();
        run.deletion_stopped(&mut line);
        out.print(&line);
    }
    walk_passes(&run, &roots, delete, started);
    out.flush();
    let skipped = run.deletions_skipped.load(Ordering::Relaxed);
    if skipped > 0 {
        out.error(&format!(
            "Deletions stopped due to --max-delete limit ({skipped} skipped)"
        ));
        run.trouble.delete_limit.store(true, Ordering::Relaxed);
    }
    let code = exit_code(&run.trouble, stop, roots.is_empty());
    let (hashes, code) = match run.recorder.take().filter(|_| code != 20) {
        Some(recorder) => super::apply::manifest_of_dest(recorder, plan, out, code),
        None => (None, code),
    };
    Outcome {
        code,
        stats: run.stats,
        hashes,
    }
}

/// A run's shared state before its roots are opened: the plan's rules for one entry, the
/// counters, and who runs it.
fn new_run<'r>(plan: &'r SyncPlan, out: &'r Output, stop: &'r AtomicBool) -> Run<'r> {
    let is_root = rustix::process::geteuid().is_root();
    let rules = Rules {
        quick: plan.quick,
        update: plan.update,
        existing: plan.existing,
        ignore_existing: plan.ignore_existing,
        max_size: plan.max_size,
        min_size: plan.min_size,
        keep_dirlinks: plan.keep_dirlinks,
        times: plan.times,
        omit_dir_times: plan.omit_dir_times,
        perms: plan.perms,
        executability: plan.executability,
        owner: (plan.owner || plan.chown.0.is_some())
            && (is_root || plan.super_user || plan.fake_super),
        group: plan.group || plan.chown.1.is_some(),
    };
    let window_ns = match plan.quick {
        QuickCheck::SizeAndTime { window_ns } => window_ns,
        _ => 0,
    };
    Run {
        plan,
        out,
        rules,
        window_ns,
        stats: Stats::default(),
        trouble: Trouble::default(),
        stop,
        umask: sys::umask(),
        is_root: is_root || plan.super_user,
        deletions: AtomicU64::new(0),
        deletions_skipped: AtomicU64::new(0),
        links: Default::default(),
        delayed: Mutex::new(Vec::new()),
        temp_dir: None,
        dest_id: std::sync::OnceLock::new(),
        dest_anchor: std::sync::OnceLock::new(),
        alt_roots: Vec::new(),
        creator: (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        ),
        no_tmpfile: AtomicBool::new(false),
        recorder: plan
            .hashing
            .as_ref()
            .map(|h| crate::manifest::Recorder::new(h.algo, h.base.clone(), plan.times)),
        budget: held::Budget::default(),
        lent: Default::default(),
    }
}

/// The run's descriptor budget, then its roots (none when the budget or `--temp-dir` is
/// refused), the `--*-dest` trees and DEST's identity (a source directory that is DEST is
/// not sent).
fn open_roots(run: &mut Run<'_>) -> Vec<Root> {
    let (plan, out) = (run.plan, run.out);
    // cp's sharing of RLIMIT_NOFILE, with DEST's anchor held for the whole run; a sync worker
    // holds a file's temporary and its side directories besides cp's synchronous worker's
    // descriptors. Checked before anything is made: a limit too tight is
    // refused with DEST untouched. Held besides a pair's: each source's root, each
    // --link-dest/--copy-dest/--compare-dest tree's root and --temp-dir.
    let held = plan.sources.len() + plan.alt_dests.len() + usize::from(plan.temp_dir.is_some());
    let side = held::Budget::side(plan);
    let fit = |nofile, in_use, tuning: &_| {
        let fit = crate::run::FdBudget::new(nofile, in_use, held, 1, tuning, 2 + side);
        (fit.threads, fit.dir_pairs)
    };
    let mut roots = match held::Budget::of_limit(plan.threads, held + side, fit) {
        Ok(budget) => {
            run.budget = budget;
            roots::resolve(run)
        }
        Err(why) => {
            out.error(&why);
            run.trouble.usage.store(true, Ordering::Relaxed);
            Vec::new()
        }
    };
    if !roots.is_empty() {
        match apply::open_temp_dir(run) {
            Ok(temp_dir) => run.temp_dir = temp_dir,
            Err(()) => {
                run.trouble.usage.store(true, Ordering::Relaxed);
                roots.clear();
            }
        }
    }
    run.alt_roots = super::alt::open_roots(run);
    let dest = std::ffi::CString::new(plan.dest.as_os_str().as_encoded_bytes()).unwrap_or_default();
    if let Ok(d) = sys::statx_at(rustix::fs::CWD, &dest, true) {
        let _ = run.dest_id.set((d.dev, d.ino));
    }
    roots
}

/// The walk's passes for the deletion asked (`None`: none, or none after a source error).
///
/// --delete-before deletes only once the whole source was read without error (a scan
/// first); --delete-after not at all after an error; --delete-delay in the directories
/// before the first error; --delete-during as the walk's order reaches each directory
/// (see `order`).
fn passes(delete: Option<DeleteWhen>) -> &'static [Pass] {
    match delete {
        None => &[Pass::Transfer { delete: false }],
        Some(DeleteWhen::During) => &[Pass::Transfer { delete: true }],
        Some(DeleteWhen::Before) => &[Pass::Scan, Pass::Delete, Pass::Transfer { delete: false }],
        Some(DeleteWhen::After | DeleteWhen::Delay) => {
            &[Pass::Transfer { delete: false }, Pass::Delete]
        }
    }
}

/// Walks the roots in each pass, with `--info=progress2`'s line beside them; a deletion pass
/// after a source error only says so (`--delete-delay` still deletes before the failure).
fn walk_passes<'r>(run: &'r Run<'r>, roots: &[Root], delete: Option<DeleteWhen>, started: Instant) {
    let (plan, out) = (run.plan, run.out);
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        if out.progress == Progress::Total {
            // Without a thread for it (a thread limit), the run goes on without the line.
            let _ = std::thread::Builder::new()
                .spawn_scoped(s, || total_progress(run, started, &finished));
        }
        for &pass in passes(delete) {
            let failed = run.trouble.source_io.load(Ordering::Relaxed) && !plan.ignore_errors;
            if pass == Pass::Delete && failed {
                let mut line = Vec::new();
                run.deletion_stopped(&mut line);
                out.print(&line);
                if delete != Some(DeleteWhen::Delay) {
                    continue;
                }
            }
            if !roots.is_empty() && !run.stop.load(Ordering::Relaxed) {
                walk_root(run, roots, pass);
            }
            if matches!(pass, Pass::Transfer { .. }) {
                apply::finish_delayed(run);
            }
        }
        finished.store(true, Ordering::Relaxed);
    });
}

/// rsync's exit code for what went wrong, the gravest first (`no_roots`: no root could be
/// opened).
fn exit_code(t: &Trouble, stop: &AtomicBool, no_roots: bool) -> i32 {
    if t.usage.load(Ordering::Relaxed) {
        1
    } else if stop.load(Ordering::Relaxed) {
        20
    } else if t.root.load(Ordering::Relaxed) && no_roots {
        3
    } else if t.file_io.load(Ordering::Relaxed) {
        11
    } else if t.failed.load(Ordering::Relaxed)
        || t.root.load(Ordering::Relaxed)
        || t.source_io.load(Ordering::Relaxed)
    {
        23
    } else if t.delete_limit.load(Ordering::Relaxed) {
        25
    } else if t.vanished.load(Ordering::Relaxed) {
        24
    } else {
        0
    }
}

/// `--info=progress2`: the whole transfer's line, rewritten about once a second until
/// `finished`, then written once more with its end of line: the bytes written, how much of
/// what was listed so far is done, the rate, the time left (at the end: taken), and rsync's
/// `(xfr#N, ir-chk=LEFT/LISTED)`.
fn total_progress(run: &Run<'_>, started: Instant, finished: &AtomicBool) {
    let line = |last: bool| {
        let stats = &run.stats;
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (bytes, total) = (load(&stats.transferred_size), load(&stats.total_size));
        let done = load(&stats.checked_size);
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        let elapsed = started.elapsed().as_secs_f64();
        let shown = if last || percent == 0 {
            elapsed
        } else {
            elapsed * (100 - percent) as f64 / percent as f64
        };
        let (listed, checked) = (load(&stats.listed), load(&stats.checked));
        let eol = format!(
            " (xfr#{}, ir-chk={}/{listed}){}",
            load(&stats.transferred),
            listed.saturating_sub(checked),
            if last { "\n" } else { "  " }
        );
        let rate = bytes as f64 / elapsed.max(1e-9);
        let text = super::output::progress_line(bytes, percent, rate, shown as u64, &eol);
        run.out.progress_update(&text);
    };
    let tick = std::time::Duration::from_millis(50);
    let mut next = Instant::now() + std::time::Duration::from_secs(1);
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        if Instant::now() >= next {
            line(false);
            next += std::time::Duration::from_secs(1);
        }
    }
    line(true);
}

/// Walks the roots (merged into one pair) in one pass, on the run's workers.
fn walk_root<'r>(run: &'r Run<'r>, roots: &[Root], pass: Pass) {
    let Some(mut pair) = roots::open_root_pair(run, roots, pass) else {
        return;
    };
    // The order is kept where lines are printed, and wherever the run deletes: deletions
    // follow it (see `order`).
    let ordered = run.out.lists_entries() || (run.plan.delete.is_some() && pass != Pass::Scan);
    let printer = ordered.then(|| {
        let (printer, root) = Printer::new();
        pair.block = Some(root);
        printer
    });
    let pool = Pool::new(printer, run.budget.threads);
    held::opened(&pair);
    let threads = run.budget.threads;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); DIR_BUF];
    // The root is listed on this thread before the others start, so its lines come first;
    // this thread then works on as one of the workers, with its own mover.
    list_dir(
        (run, &mut apply::Mover::new(run)),
        &pool,
        Arc::new(pair),
        &mut buf,
    );
    std::thread::scope(|s| {
        for _ in 1..threads {
            // Under a thread limit the run goes on with the workers it could have.
            if std::thread::Builder::new()
                .spawn_scoped(s, || worker(run, &pool))
                .is_err()
            {
                break;
            }
        }
        worker(run, &pool);
    });
    if let Some(printer) = &pool.printer {
        printer.rest(run.out, &mut buf);
        if matches!(pass, Pass::Transfer { .. }) {
            let mut first = run.trouble.first_failure.lock().expect("first failure");
            if first.is_none() {
                *first = printer.first_failure();
            }
        }
    }
}

fn worker<'r>(run: &'r Run<'r>, pool: &Pool<'r>) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); DIR_BUF];
    // This worker's own data path for the run.
    let mover = &mut apply::Mover::new(run);
    while let Some(work) = pool.pop() {
        // Counted done however the work ends (a panic included), so that the others do not
        // wait for it for ever.
        let _done = Done(pool);
        if !run.stop.load(Ordering::Relaxed) {
            match work {
                Work::Dir(task) => {
                    let block = task.block.clone();
                    match open_task(run, *task) {
                        Ok(pair) => list_dir((run, mover), pool, Arc::new(pair), &mut buf),
                        Err(lines) => pool.print(run.out, block.as_deref(), lines, Vec::new()),
                    }
                }
                Work::Entries(pair, listing, range, block) => {
                    let at = (block.as_deref(), Vec::new());
                    match held::hold(&pair) {
                        Ok(_held) => {
                            entries_of((run, mover), pool, &pair, (&listing, range), Vec::new(), at)
                        }
                        Err(e) => {
                            run.fail(e);
                            pool.print(run.out, at.0, Vec::new(), Vec::new());
                        }
                    }
                }
                Work::Delete(block, clean, delete) => {
                    let lines = delete(clean, &mut buf);
                    if let Some(printer) = &pool.printer {
                        pool.delete(printer.made(run.out, &block, lines));
                    }
                }
            }
        }
    }
}

/// Marks a piece of work done when dropped.
struct Done<'a, 'r>(&'a Pool<'r>);

impl Drop for Done<'_, '_> {
    fn drop(&mut self) {
        self.0.done_one();
    }
}

/// A subdirectory walked by a pass that makes nothing and prints no line (the scan of
/// `--delete-before`, a deletion pass): only its contents are read.
fn pass_task<'r>(
    pair: &Arc<Pair<'r>>,
    e: &SrcEntry,
    dst_before: Option<Stat>,
    layers: Vec<usize>,
) -> Task<'r> {
    Task {
        parent: pair.clone(),
        name: e.dst_name.to_owned(),
        src_stat: e.stat,
        dst_before,
        dst_follow: false,
        item: None,
        block: None,
        contents: true,
        layers,
    }
}

/// Why one source of a subdirectory is not walked: it vanished (not an error), or it failed
/// (reported; where no source is left, its deletions are not made).
enum NotOpened {
    Vanished,
    Failed,
}

/// Opens a subdirectory task's two sides: each source that holds the directory, and the
/// destination's. When it cannot be walked, the lines of its block: its own line (it was
/// made), and where a source error keeps its deletions from being made, rsync's note.
fn open_task<'r>(run: &'r Run<'r>, task: Task<'r>) -> Result<Pair<'r>, Vec<u8>> {
    // The parent's descriptors, open while the child opens from them.
    let _held = match held::hold(&task.parent) {
        Ok(held) => held,
        Err(e) => {
            run.fail(e);
            return Err(Vec::new());
        }
    };
    let parent = &task.parent;
    let name = &task.name;
    let rel = join(&parent.rel, name.to_bytes());
    let dst_path = parent.dst_path.join(apply::os(name));
    let mut layers = Vec::with_capacity(task.layers.len());
    let mut failed = false;
    for &i in &task.layers {
        match open_layer(run, &task, &parent.layers[i], &rel) {
            Ok(layer) => layers.push(layer),
            Err(NotOpened::Failed) => failed = true,
            Err(NotOpened::Vanished) => {}
        }
    }
    if layers.is_empty() {
        return Err(unwalked_lines(run, &task, failed));
    }
    let dst = match &parent.dst {
        Some(_) if parent.pass == Pass::Scan => None,
        Some(dst) if !(run.plan.dry_run && task.dst_before.is_none()) => {
            match sys::open_dir(dst.as_fd(), name, task.dst_follow) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    run.fail(CopyError::io(Op::OpenDir, dst_path, e));
                    return Err(Vec::new());
                }
            }
        }
        _ => None,
    };
    let dst_scope = match (&dst, &parent.dst_scope) {
        (Some(fd), Some(above)) => match above.enter(fd.as_fd(), &rel) {
            Ok(s) => Some(s),
            Err(e) => {
                run.fail(CopyError::Refused(e.to_string()));
                None
            }
        },
        _ => None,
    };
    let dst_stat = dst.as_ref().and_then(|fd| sys::fstatx(fd.as_fd()).ok());
    let pair = Pair {
        run,
        dst_stat,
        changed: Default::default(),
        dst_default_acl: std::sync::OnceLock::new(),
        anchor: parent.anchor.clone(),
        dst_rel: join(&parent.dst_rel, name.to_bytes()),
        _parent: Some(parent.clone()),
        handoff: Default::default(),
        whole: layers.iter().any(|l| l.only.is_none()),
        // A directory on the way to a -R operand keeps its source's attributes too, and so
        // does one that is not entered.
        keeps_attrs: layers.iter().any(|l| l.only.is_none())
            || !run.plan.no_implied_dirs
            || !task.contents,
        layers,
        dst: dst.map(DirFd::new),
        holders: Default::default(),
        rel,
        dst_path,
        src_stat: task.src_stat,
        dst_before: task.dst_before,
        dst_scope,
        pass: parent.pass,
        made_now: task.dst_before.is_none(),
        item: task.item,
        block: task.block,
    };
    held::opened(&pair);
    Ok(pair)
}

/// Opens the subdirectory `task` in `above`, one of its parent's sources, as a source of the
/// subdirectory's pair (`rel`: its path from the transfer root): a directory that is one of
/// its own ancestors is refused, the sender's rules there are read, and under -R it holds
/// only the next component of the way to an operand.
fn open_layer(
    run: &Run<'_>,
    task: &Task<'_>,
    above: &Layer,
    rel: &[u8],
) -> Result<Layer, NotOpened> {
    let (pass, name) = (task.parent.pass, &task.name);
    let follow = run.plan.symlinks == Symlinks::Follow;
    let path = above.path.join(apply::os(name));
    let failed = |e: CopyError| {
        run.source_fail(pass, task.block.as_deref(), e);
        NotOpened::Failed
    };
    // --copy-unsafe-links: a symlink here is one the listing followed (a safe one is
    // synced as a symlink, never entered); a cycle through it is found below, as -L's.
    let opened = match sys::open_dir(above.fd.as_fd(), name, follow || above.enters_only()) {
        Err(e)
            if run.plan.copy_unsafe_links
                && matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) =>
        {
            sys::open_dir(above.fd.as_fd(), name, true)
        }
        other => other,
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            if pass != Pass::Scan {
                run.vanished(&path);
            }
            return Err(NotOpened::Vanished);
        }
        Err(e) => return Err(failed(CopyError::io(Op::OpenDir, path, e))),
    };
    // -L and its kin: a directory that is one of its own ancestors (a symlink to `.`,
    // `..` or higher) would be walked for ever; rsync stops there at ELOOP. Not a -R
    // operand's path: it is walked one named component at a time, to its end, and what
    // is walked below it is checked against it.
    let id = sys::fstatx(fd.as_fd()).map_or((0, 0), |st| (st.dev, st.ino));
    if !above.enters_only() && above.ancestry.holds(id) {
        let e = std::io::Error::from_raw_os_error(libc::ELOOP);
        return Err(failed(CopyError::io(Op::OpenDir, path, e)));
    }
    let ancestry = Arc::new(Ancestry {
        id,
        up: Some(above.ancestry.clone()),
    });
    let scope = match above.scope.enter(fd.as_fd(), rel) {
        Ok(scope) => scope,
        Err(e) => return Err(failed(CopyError::Refused(e.to_string()))),
    };
    let (dev, fd) = (id.0, DirFd::new(fd));
    if !task.contents {
        // Not entered: it holds nothing.
        return Ok(Layer {
            fd,
            dev,
            path,
            only: Some(Vec::new()),
            implied: None,
            operand_follows: false,
            scope,
            ancestry,
        });
    }
    // Under -R a directory on the way to an operand holds only the next component; one
    // that is not entered, nothing.
    let toward = above.implied.as_ref().filter(|rest| !rest.is_empty());
    Ok(Layer {
        fd,
        dev,
        path,
        only: toward.map(|rest| vec![(rest[0].clone(), rest[0].clone())]),
        implied: toward.map(|rest| Arc::from(&rest[1..])),
        operand_follows: above.operand_follows,
        scope,
        ancestry,
    })
}

/// The lines of a subdirectory none of whose sources could be opened: its own line (it was
/// made), and, where a source error keeps its deletions from being made, rsync's note.
fn unwalked_lines(run: &Run<'_>, task: &Task<'_>, failed: bool) -> Vec<u8> {
    let mut lines = Vec::new();
    let pass = task.parent.pass;
    if pass != Pass::Scan {
        if let Some(item) = &task.item {
            report(run, item, &task.src_stat, &mut lines);
        }
        let deletes = matches!(pass, Pass::Transfer { delete: true } | Pass::Delete);
        // As rsync: said where a deletion would have been tried (not, under -n, in a
        // directory that does not exist yet).
        let exists = task.dst_before.is_some() || !run.plan.dry_run;
        if deletes && failed && exists && !run.plan.ignore_errors {
            run.deletion_stopped(&mut lines);
        }
    }
    lines
}

/// Reads, stat's and filters the pair's source listings into one, sorted in rsync's order:
/// each name once, the first source to list it giving the entry (see `Layer`); with whether
/// every source was read whole. A big directory's names are stat'ed by the run's threads at
/// once: the rest of the walk waits for its listing (a flat directory is all the work there
/// is), and a cold cache answers many reads at once faster than one at a time.
fn list<'r>(run: &'r Run<'r>, pair: &Pair<'r>, buf: &mut [MaybeUninit<u8>]) -> (Listing, bool) {
    let plan = run.plan;
    let follow = plan.symlinks == Symlinks::Follow;
    let mut listing = Listing::default();
    // Names repeat only across sources, or in a source's named operands.
    let repeats = pair.layers.len() > 1 || pair.layers.iter().any(|l| l.only.is_some());
    let mut named: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut complete = true;
    let mut rel = Vec::new();
    for (i, layer) in pair.layers.iter().enumerate() {
        let start = listing.entries.len();
        match &layer.only {
            Some(only) => {
                for (name, dst_name) in only {
                    listing.push(i, name, Some(dst_name));
                }
            }
            None => {
                let read = sys::read_dir_entries(layer.fd.as_fd(), buf, |name, _| {
                    listing.push(i, name, None);
                });
                if let Err(e) = read {
                    // Nothing here is deleted: the listing is not known to be complete.
                    listing.entries.truncate(start);
                    let e = CopyError::io(Op::ReadDir, layer.path.clone(), e);
                    run.source_fail(pair.pass, pair.block.as_deref(), e);
                    complete = false;
                    continue;
                }
            }
        }
        if let Some(gone) = ringio_base::hooks::vanish_after_list() {
            let listed = listing.entries[start..].iter();
            if pair.pass != Pass::Scan && listed.clone().any(|l| listing.name(l) == gone) {
                let dir = layer.fd.as_fd();
                if sys::unlinkat(dir, gone).is_err() {
                    let _ = rustix::fs::unlinkat(dir, gone, rustix::fs::AtFlags::REMOVEDIR);
                }
            }
        }
        let dir = layer.fd.as_fd();
        let failed = if layer.operand_dirlink() && !follow {
            let dirlink = |name: &CStr| super::pair::stat_dirlink(dir, name);
            listing.stat_from(start, dirlink, 1, BATCH)
        } else {
            let follow_names = follow || layer.on_the_way();
            let threads = run.budget.threads;
            listing.stat_from(start, listing::statx_in(dir, follow_names), threads, BATCH)
        };
        let mut failed = failed.into_iter().peekable();
        for at in start..listing.entries.len() {
            let error = failed.next_if(|(k, _)| *k == at).map(|(_, e)| e);
            match keep(run, pair, layer, (&listing, at), error, &mut rel) {
                Kept::No => listing.entries[at].drop_it(),
                Kept::Incomplete => {
                    complete = false;
                    listing.entries[at].drop_it();
                }
                Kept::Yes(stat) => {
                    listing.entries[at].stat = stat;
                    if !repeats {
                        continue;
                    }
                    let is_dir = stat.kind() == Kind::Dir;
                    let dst_name = |l: &Listing| l.dst_name(&l.entries[at]).to_bytes().to_vec();
                    match named.get(&dst_name(&listing)).copied() {
                        // A directory a later source holds too merges into the first one's.
                        Some(first) if is_dir && listing.entries[first].is_dir() => {
                            listing.entries[at].drop_it();
                            listing.merge(first, i);
                        }
                        // A directory wins over an earlier non-directory of its name (rsync's
                        // clean_flist): the tree below it is not lost.
                        Some(first) if is_dir => {
                            listing.entries[first] = listing.entries[at];
                            listing.entries[at].drop_it();
                        }
                        Some(_) => listing.entries[at].drop_it(),
                        None => {
                            named.insert(dst_name(&listing), at);
                        }
                    }
                }
            }
        }
    }
    listing.drop_marked();
    listing.sort();
    (listing, complete)
}

/// Whether a listed entry is in the transfer: with its stat (as -L, --copy-unsafe-links,
/// --fake-super and --chmod make it), or not (it failed, vanished or is excluded), or not and
/// the listing is not complete (its stat failed).
enum Kept {
    Yes(Stat),
    No,
    Incomplete,
}

/// Judges the listed entry `at` of source `layer` (`error`: its stat failed); `rel` is a
/// buffer for its path.
fn keep(
    run: &Run<'_>,
    pair: &Pair<'_>,
    layer: &Layer,
    (listing, at): (&Listing, usize),
    error: Option<std::io::Error>,
    rel: &mut Vec<u8>,
) -> Kept {
    let plan = run.plan;
    let follow = plan.symlinks == Symlinks::Follow;
    let name = listing.name(&listing.entries[at]);
    let src_path = || layer.path.join(apply::os(name));
    let stat = match error {
        None => listing.entries[at].stat,
        Some(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let dangling = follow
                && sys::statx_at(layer.fd.as_fd(), name, false)
                    .is_ok_and(|s| s.kind() == Kind::Symlink);
            if dangling {
                let e = CopyError::Refused(format!(
                    "symlink has no referent: {}",
                    crate::quote::quote_path(&src_path())
                ));
                run.source_fail(pair.pass, pair.block.as_deref(), e);
            } else if pair.pass != Pass::Scan {
                run.vanished(&src_path());
            }
            return Kept::No;
        }
        Some(e) => {
            let e = CopyError::io(Op::Stat, src_path(), e);
            run.source_fail(pair.pass, pair.block.as_deref(), e);
            return Kept::Incomplete;
        }
    };
    let Some(mut stat) = apply::unsafe_link_target(run, (layer, &pair.rel), name, stat) else {
        return Kept::No;
    };
    if plan.fake_super {
        let target = crate::xattr::Subject::at(layer.fd.as_fd(), name, false);
        super::fake::read(target, &mut stat);
    }
    if !plan.chmod.is_empty() && stat.kind() != Kind::Symlink {
        let is_dir = stat.kind() == Kind::Dir;
        let perm = super::chmod::apply(&plan.chmod, stat.perm(), is_dir, run.umask);
        stat.mode = (stat.mode & libc::S_IFMT) | perm;
    }
    rel.clear();
    if !pair.rel.is_empty() {
        rel.extend_from_slice(&pair.rel);
        rel.push(b'/');
    }
    rel.extend_from_slice(name.to_bytes());
    let is_dir = stat.kind() == Kind::Dir;
    if layer.scope.excluded(rel, is_dir, Side::Sender) {
        return Kept::No;
    }
    if is_dir && run.dest_id.get() == Some(&(stat.dev, stat.ino)) {
        return Kept::No;
    }
    // -xx: a directory on another filesystem is not sent at all.
    if is_dir && plan.skip_mount_points && stat.dev != layer.dev {
        return Kept::No;
    }
    Kept::Yes(stat)
}

/// Lists a directory pair and handles each of its entries.
fn list_dir<'r>(
    (run, mover): (&'r Run<'r>, &mut apply::Mover),
    pool: &Pool<'r>,
    pair: Arc<Pair<'r>>,
    buf: &mut [MaybeUninit<u8>],
) {
    let _held = match held::hold(&pair) {
        Ok(held) => held,
        Err(e) => {
            run.fail(e);
            return;
        }
    };
    let plan = run.plan;
    let mut lines = Vec::new();
    let (mut listing, complete) = list(run, &pair, buf);
    let scan = pair.pass == Pass::Scan;
    let delete_here = match pair.pass {
        Pass::Transfer { delete } => delete,
        Pass::Delete => true,
        Pass::Scan => false,
    };
    // What the destination holds beyond the source (every name listed, sent or not) is read
    // now, before any entry is made (stale temporaries go with it).
    let found = (delete_here && pair.whole && pair.dst.is_some()).then(|| {
        let index = listing.by_dst_name();
        extraneous(&pair, &|name| listing.holds(index.as_deref(), name), buf)
    });
    // The notes on what is not transferred come first, as rsync's sender prints them while
    // it lists the directory.
    for l in &listing.entries {
        // rsync's "total size": every file's and symlink's length in the list.
        if matches!(l.stat.kind(), Kind::File | Kind::Symlink) && !scan {
            run.stats
                .total_size
                .fetch_add(l.stat.size, Ordering::Relaxed);
        }
        if let Some(note) = skip_note(plan, &l.stat) {
            if !run.out.quiet && !scan {
                let e = listing.entry(&pair.rel, l);
                lines.extend_from_slice(format!("{note} \"").as_bytes());
                lines.extend_from_slice(&pair.src_path_shown(&e));
                lines.extend_from_slice(b"\"\n");
            }
        }
    }
    listing
        .entries
        .retain(|l| skip_note(plan, &l.stat).is_none());
    if !scan {
        run.stats
            .listed
            .fetch_add(listing.entries.len() as u64, Ordering::Relaxed);
    }
    if plan.hard_links {
        hard_link_order(&pair, &mut listing);
    }
    // rsync's generator order: the directory's own line, its deletions, its entries.
    let implied_hidden = plan.no_implied_dirs && pair.implied();
    if let Some(item) = pair.item.as_ref().filter(|_| !implied_hidden && !scan) {
        report(run, item, &pair.src_stat, &mut lines);
    }
    if let Some(Ok(found)) = found {
        // The deletions are made now if it is the directory's turn, else when it comes
        // (see `order`).
        let idle = found.names.is_empty();
        let deletion = deletion(&pair, found, complete);
        let now = match pool.printer.as_ref().zip(pair.block.as_ref()) {
            Some((printer, block)) => printer.claim(block, lines.len(), deletion, idle),
            None => Some((deletion, !run.trouble.source_io.load(Ordering::Relaxed))),
        };
        if let Some((delete, clean)) = now {
            lines.extend(delete(clean, buf));
        }
    } else if found.is_none() && pair.whole && !scan {
        remove_stale(&pair, buf);
    }

    // A big directory's entries spread over the workers (where no order is printed, and no
    // hard-link group depends on one).
    // Where the order is kept, each batch has a block of its own, after the directory's
    // first batch and its subdirectories (directories sort last in a listing, so a batch
    // that holds any is followed only by batches of directories).
    let listing = Arc::new(listing);
    let count = listing.entries.len();
    let mut first = 0..count;
    let mut batch_blocks = Vec::new();
    let batch = if pair.made_now { NEW_BATCH } else { BATCH };
    if run.budget.threads > 1 && !plan.hard_links && count > 2 * batch {
        first = 0..batch;
        let mut batches = Vec::new();
        for start in (batch..count).step_by(batch) {
            let block = pair.block.is_some().then(|| Block::at(pair.rel.clone()));
            batch_blocks.extend(block.clone());
            let range = start..(start + batch).min(count);
            batches.push(Work::Entries(pair.clone(), listing.clone(), range, block));
        }
        pool.push(batches);
    }
    let block = pair.block.clone();
    entries_of(
        (run, mover),
        pool,
        &pair,
        (&listing, first),
        lines,
        (block.as_deref(), batch_blocks),
    );
}

/// What a directory's destination holds beyond the source's names ([`apply::extraneous`]),
/// read as the directory is listed, with that directory's (dev, inode).
struct Extraneous {
    names: Vec<(bool, CString)>,
    was: (u64, u64),
}

/// A directory's deletions, to be made at its turn in the walk's order (see `order`): with
/// whether every directory before it (and it) was read without error, they delete the
/// `found` names, or say once that deletion stopped. `--ignore-errors` deletes all the same,
/// but never where the listing itself is incomplete (its missing names are not known to be
/// extraneous). `--delete-delay` deletes only in the directories before the first that
/// failed during the transfer.
///
/// What waits for its turn holds no descriptor: the pair is kept weakly, with a copy without
/// descriptors ([`Pair::detached`]). At the turn, a pair still walked lends its directory (and
/// sets its attributes when its walk ends); a pair whose walk ended has the directory opened
/// again, and its times put back once something was deleted in it ([`super::attrs::dir_times`]).
fn deletion<'r>(
    pair: &Arc<Pair<'r>>,
    found: Extraneous,
    complete: bool,
) -> super::order::Deferred<'r> {
    let (run, pass, rel) = (pair.run, pair.pass, pair.rel.clone());
    let keeps_attrs = pair.keeps_attrs;
    let transfer = matches!(pass, Pass::Transfer { .. }) && keeps_attrs && !run.plan.dry_run;
    let work = (!found.names.is_empty()).then(|| {
        let handoff = transfer.then(|| pair.handoff.get_or_init(Default::default).clone());
        (Arc::downgrade(pair), pair.detached(), found, handoff)
    });
    Box::new(move |clean, buf: &mut [MaybeUninit<u8>]| {
        let mut lines = Vec::new();
        let Some((weak, detached, found, handoff)) = work else {
            if !deletes(run, (pass, &rel), clean, complete) && (complete || !run.plan.ignore_errors)
            {
                run.deletion_stopped(&mut lines);
            }
            return lines;
        };
        // What the pair left, if it was dropped first: its times to set, its descriptor.
        let left = match handoff.map(|h| h.take()) {
            Some(Handed::Lent(fd)) => Some(fd),
            _ => None,
        };
        let may = deletes(run, (pass, &rel), clean, complete);
        if !may && (complete || !run.plan.ignore_errors) {
            run.deletion_stopped(&mut lines);
        }
        let (live, reopened, held_live);
        let (pair, dir) = match (left.as_ref(), weak.upgrade()) {
            // Nothing to delete, and no times left to set.
            (None, _) if !may => return lines,
            (Some(Some(lent)), _) => (&detached, lent.fd.as_fd()),
            (None, Some(pair)) => {
                live = pair;
                held_live = match held::hold(&live) {
                    Ok(held) => held,
                    Err(e) => {
                        run.fail(e);
                        return lines;
                    }
                };
                let Some(dst) = &held_live.dst else {
                    return lines;
                };
                (&*live, dst.as_fd())
            }
            _ => match detached.reopen(found.was) {
                Ok(dir) => {
                    reopened = dir;
                    (&detached, reopened.as_fd())
                }
                Err(e) => {
                    run.fail(e);
                    return lines;
                }
            },
        };
        let mut deleted = false;
        if may {
            deleted = apply::delete_extraneous(run, pair, dir, &found.names, buf, &mut lines);
        }
        // Deleting moved the directory's mtime: put back where no walk will (a deletion pass
        // after the transfer, a walk that ended before its turn, which left its times here).
        let unattended = pass == Pass::Delete || (keeps_attrs && pair.dst.is_none());
        if ((deleted && unattended) || left.is_some()) && !run.plan.dry_run {
            if let Err(e) = super::attrs::dir_times(pair, dir) {
                run.fail(e);
            }
        }
        lines
    })
}

/// Whether a directory's deletions may be made at their turn: its listing is complete, no
/// directory before it (in the walk's order) or in it failed to be read (`clean`; under
/// `--ignore-errors` regardless), and, for `--delete-delay`'s pass, it comes before the first
/// that failed during the transfer.
fn deletes(run: &Run<'_>, (pass, rel): (Pass, &[u8]), clean: bool, complete: bool) -> bool {
    let before_failure = match &*run.trouble.first_failure.lock().expect("first failure") {
        Some(failed) if pass == Pass::Delete && !run.plan.ignore_errors => precedes(rel, failed),
        _ => true,
    };
    complete && before_failure && (clean || run.plan.ignore_errors)
}

/// Reads the pair's destination directory as it is listed: the names it holds beyond
/// `kept` ([`apply::extraneous`]; under `--delay-updates` the staging directory is not one),
/// with its (dev, inode) as the walk opened it. A directory made now holds none.
fn extraneous(
    pair: &Pair<'_>,
    kept: &dyn Fn(&[u8]) -> bool,
    buf: &mut [MaybeUninit<u8>],
) -> Result<Extraneous, ()> {
    let Some(dst) = pair.dst.as_ref().filter(|_| !pair.made_now) else {
        return Ok(Extraneous {
            names: Vec::new(),
            was: (0, 0),
        });
    };
    let (run, stage) = (pair.run, pair.run.plan.delay_updates);
    let names =
        apply::extraneous(run, pair, (dst.as_fd(), stage), kept, buf).map_err(|e| run.fail(e))?;
    // Its identity as the walk opened it (unknown: it matches nothing opened again).
    let was = pair.dst_stat.map_or((0, 0), |d| (d.dev, d.ino));
    Ok(Extraneous { names, was })
}

/// Removes the stale temporaries of an interrupted run from the pair's destination directory.
fn remove_stale(pair: &Pair<'_>, buf: &mut [MaybeUninit<u8>]) {
    let run = pair.run;
    if let Some(dst) = pair
        .dst
        .as_ref()
        .filter(|_| !run.plan.dry_run && !pair.made_now)
    {
        let _ = crate::temp::remove_stale_in(dst.as_fd(), buf, &|| pair.changing());
    }
}

/// Whether the directory `a` comes before the directory `b` in rsync's depth-first order
/// (both paths from the transfer root, "" for the root): an ancestor comes first, else the
/// first component that differs decides, compared as rsync compares directory names.
fn precedes(a: &[u8], b: &[u8]) -> bool {
    if b.is_empty() {
        return false;
    }
    if a.is_empty() {
        return true;
    }
    let (mut a, mut b) = (a.split(|&c| c == b'/'), b.split(|&c| c == b'/'));
    loop {
        match (a.next(), b.next()) {
            (None, Some(_)) => return true,
            (_, None) => return false,
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => return rsync_order((true, x), (true, y)).is_lt(),
        }
    }
}

/// Decides and carries out entries of a listed directory, then prints their lines and queues
/// their subdirectories.
///
/// `block` is where their lines go, followed by `later`: the blocks of the directory's
/// later batches.
fn entries_of<'r>(
    (run, mover): (&'r Run<'r>, &mut apply::Mover),
    pool: &Pool<'r>,
    pair: &Arc<Pair<'r>>,
    (listing, range): (&Listing, std::ops::Range<usize>),
    mut lines: Vec<u8>,
    (block, later): (Option<&Block<'r>>, Vec<Arc<Block<'r>>>),
) {
    let mut subdirs = Vec::new();
    let scan = pair.pass == Pass::Scan;
    // Made whole (its names and path) only while it is handled, in one entry's buffers.
    let mut whole = SrcEntry::default();
    for l in &listing.entries[range] {
        if run.stop.load(Ordering::Relaxed) {
            break;
        }
        listing.entry_into(&pair.rel, l, &mut whole);
        let e = &whole;
        entry((run, mover), (pair, block), e, &mut lines, &mut subdirs);
        if scan {
            continue;
        }
        run.stats.checked.fetch_add(1, Ordering::Relaxed);
        // Counted as the total size counts them (`--info=progress2`'s percentage).
        if matches!(e.stat.kind(), Kind::File | Kind::Symlink) {
            run.stats
                .checked_size
                .fetch_add(e.stat.size, Ordering::Relaxed);
        }
    }
    let mut children = Vec::new();
    if block.is_some() {
        for task in &mut subdirs {
            let block = Block::at(join(&pair.rel, task.name.to_bytes()));
            task.block = Some(block.clone());
            children.push(block);
        }
    }
    children.extend(later);
    pool.print(run.out, block, lines, children);
    pool.push_all(subdirs);
}

/// The destination's statx of `name` in the pair, not followed (`None`: nothing there, or no
/// destination directory under -n).
fn dst_stat(pair: &Pair<'_>, name: &CStr) -> Result<Option<Stat>, std::io::Error> {
    let Some(dst) = &pair.dst else {
        return Ok(None);
    };
    match sys::statx_at(dst.as_fd(), name, false) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One source entry on its way through the walk's rules (sync's counterpart of cp's
/// `EntryJob`): the pair it is in, where its lines go, the entry, and what it adds to its
/// directory: lines, and subdirectories to walk. Every step of [`entry`] takes it.
struct SyncEntry<'j, 'r> {
    run: &'r Run<'r>,
    /// The worker's data path.
    mover: &'j mut apply::Mover,
    /// The directory pair it is in (held by the caller).
    pair: &'j Arc<Pair<'r>>,
    /// Where its lines go (when lines are kept in order).
    block: Option<&'j Block<'r>>,
    e: &'j SrcEntry,
    lines: &'j mut Vec<u8>,
    subdirs: &'j mut Vec<Task<'r>>,
}

/// What the destination holds at an entry's name, as the rules see it.
#[derive(Clone, Copy)]
struct AtDest {
    /// Its statx, not followed (`None`: nothing there, or no destination directory under -n).
    dst: Option<Stat>,
    /// -K: the directory a destination symlink leads to, where the source is a directory.
    dir_target: Option<Stat>,
}

impl AtDest {
    /// The entry whose attributes are compared and set: a -K symlink's directory, else the
    /// destination itself.
    fn attr_target(self) -> Option<Stat> {
        self.dir_target.or(self.dst)
    }
}

/// Decides and carries out one entry; `block` is where its lines go.
fn entry<'r>(
    (run, mover): (&'r Run<'r>, &mut apply::Mover),
    (pair, block): (&Arc<Pair<'r>>, Option<&Block<'r>>),
    e: &SrcEntry,
    lines: &mut Vec<u8>,
    subdirs: &mut Vec<Task<'r>>,
) {
    let mut job = SyncEntry {
        run,
        mover,
        pair,
        block,
        e,
        lines,
        subdirs,
    };
    match pair.pass {
        Pass::Scan => job.scan(),
        Pass::Delete => job.enter_for_deletion(),
        Pass::Transfer { .. } => job.transfer(),
    }
}

impl<'r> SyncEntry<'_, 'r> {
    /// The destination as the user would name it (built only for messages).
    fn dst_path(&self) -> std::path::PathBuf {
        self.pair.dst_path.join(apply::os(&self.e.dst_name))
    }

    /// Reports a failure of the entry: one reading its source (the source's path is the one
    /// it names) is a source error (see [`Run::source_fail`]).
    fn failed(&self, err: CopyError) {
        let from_source = match &err {
            CopyError::Io { path, .. } => *path == self.pair.src_of(self.e),
            _ => false,
        };
        if from_source {
            self.run.source_fail(self.pair.pass, self.block, err);
        } else {
            self.run.fail(err);
        }
    }

    /// Whether the walk goes into the directory entry: `-r`, or on the way to a `-R` operand,
    /// and not across a mount under `-x`.
    fn walked_into(&self) -> bool {
        let (run, pair, e) = (self.run, self.pair, self.e);
        (run.plan.recursive || leads_on(pair, e)) && descends(run, pair, e)
    }

    /// The scan of `--delete-before`: every directory of the source is read.
    fn scan(&mut self) {
        if self.e.stat.kind() == Kind::Dir && self.walked_into() {
            let task = pass_task(self.pair, self.e, None, dir_layers(self.e));
            self.subdirs.push(task);
        }
    }

    /// A deletion pass: only directories present on both sides are entered, and under
    /// --delete-delay only those before the first that failed (nothing at it or after it is
    /// deleted).
    fn enter_for_deletion(&mut self) {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let plan = run.plan;
        let first_failure = run
            .trouble
            .first_failure
            .lock()
            .expect("first failure")
            .clone();
        let before = |f: &Vec<u8>| plan.ignore_errors || precedes(&e.rel, f);
        if e.stat.kind() == Kind::Dir
            && self.walked_into()
            && first_failure.as_ref().is_none_or(before)
        {
            if let Ok(Some(d)) = dst_stat(pair, &e.dst_name) {
                if d.kind() == Kind::Dir {
                    self.subdirs
                        .push(pass_task(pair, e, Some(d), dir_layers(e)));
                }
            }
        }
    }

    /// The transfer: the entry decided by `policy::sync` and the decision carried out.
    fn transfer(&mut self) {
        let (run, plan) = (self.run, self.run.plan);
        let kind = self.e.stat.kind();
        run.stats.files.add(kind);
        if is_device(&self.e.stat) && !(run.is_root || plan.fake_super) {
            // rsync's receiver makes a device only as root (or under --super, --fake-super):
            // it is skipped and said, and the name stays the source's (nothing of that name is
            // deleted).
            if !run.out.quiet {
                self.lines
                    .extend_from_slice(b"skipping non-regular file \"");
                self.lines.extend_from_slice(&self.e.rel);
                self.lines.extend_from_slice(b"\"\n");
            }
            return;
        }
        let Ok(dst) = self.existing() else {
            return;
        };
        let at = AtDest {
            dst,
            dir_target: self.kept_dirlink(dst),
        };
        let Some(decision) = self.decide(at) else {
            return;
        };
        // Hard links: a later name of a group is linked to the first.
        // Held while this entry is made when it is the first name of its inode.
        let mut _leading = None;
        if plan.hard_links && kind != Kind::Dir && self.e.stat.nlink > 1 {
            let how = (&mut *self.lines, &mut _leading);
            let (pair, e) = (self.pair, self.e);
            // It may link or replace a name here.
            pair.changing();
            if let Some(done) = apply::hard_link(run, pair, e, dst.as_ref(), decision, how) {
                apply::record_existing(run, pair, e);
                if done && plan.remove_source_files {
                    apply::remove_source(run, pair, e);
                }
                return;
            }
        }
        match decision {
            Verdict::Skip(why) => {
                skipped(run, self.e, why, self.lines);
                apply::record_existing(run, self.pair, self.e);
            }
            Verdict::CompareContent => unreachable!("decided once the content was compared"),
            Verdict::Keep => self.keep(at),
            Verdict::Create | Verdict::Rewrite | Verdict::Replace => self.make(dst, decision),
        }
    }

    /// The destination's statx at the entry's name (with `--fake-super`'s stored attributes);
    /// `Err` once its failure is reported.
    fn existing(&self) -> Result<Option<Stat>, ()> {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let found = if pair.made_now {
            Ok(None)
        } else {
            dst_stat(pair, &e.dst_name)
        };
        match found {
            Ok(Some(mut d)) if run.plan.fake_super => {
                if let Some(dir) = &pair.dst {
                    super::fake::read(
                        crate::xattr::Subject::at(dir.as_fd(), &e.dst_name, false),
                        &mut d,
                    );
                }
                Ok(Some(d))
            }
            Ok(d) => Ok(d),
            Err(err) => {
                run.fail(CopyError::io(Op::Stat, self.dst_path(), err));
                Err(())
            }
        }
    }

    /// -K: where a destination symlink leads, when it is a directory and the source is one.
    fn kept_dirlink(&self, dst: Option<Stat>) -> Option<Stat> {
        let (plan, pair, e) = (self.run.plan, self.pair, self.e);
        match dst {
            Some(d)
                if plan.keep_dirlinks
                    && d.kind() == Kind::Symlink
                    && e.stat.kind() == Kind::Dir =>
            {
                pair.dst
                    .as_ref()
                    .and_then(|fd| sys::statx_at(fd.as_fd(), &e.dst_name, true).ok())
                    .filter(|t| t.kind() == Kind::Dir)
            }
            _ => None,
        }
    }

    /// `policy::sync::decide` on the entry's facts (the content compared only when the rules
    /// ask for it); `None`: -m leaves out a directory with nothing to transfer below it.
    fn decide(&self, at: AtDest) -> Option<Verdict> {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let plan = run.plan;
        let kind = e.stat.kind();
        let same_value = match at.dst {
            Some(d) if d.kind() == kind && kind != Kind::File && kind != Kind::Dir => {
                apply::same_value(run, pair, e, &d)
            }
            _ => false,
        };
        let mut facts = Facts {
            src: &e.stat,
            dst: at.dst.as_ref(),
            dst_dir_target: at.dir_target.as_ref(),
            same_value,
            same_content: None,
        };
        // -m: a directory with nothing to transfer anywhere below it is left out.
        if kind == Kind::Dir
            && plan.prune_empty_dirs
            && plan.recursive
            && !apply::holds_files(run, pair, e)
        {
            return None;
        }
        let mut decision = rules::decide(&run.rules, &facts);
        if decision == Verdict::CompareContent {
            facts.same_content = Some(apply::same_content(run, pair, e));
            decision = rules::decide(&run.rules, &facts);
        }
        Some(decision)
    }

    /// An entry kept as it is: only its attributes that differ are set (a directory's when
    /// its walk ends), and its line printed.
    fn keep(&mut self, at: AtDest) {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let plan = run.plan;
        let kind = e.stat.kind();
        let mut item = Item::new(Action::Attributes, &e.stat, &e.rel);
        item.attrs = self.attr_changes(at);
        item.times_kept = plan.times;
        if kind == Kind::Symlink {
            item.link = apply::link_text(pair, e);
        }
        if kind == Kind::Dir {
            // A directory's attributes are set when its walk ends (entered or not).
            self.walk_later(item, at.attr_target(), at.dir_target.is_some());
            return;
        }
        if !item.attrs.none() && !plan.dry_run {
            if let Err(err) = super::attrs::fix_attrs(run, pair, e, &item.attrs) {
                self.failed(err);
                return;
            }
        }
        self.finish_existing(&item);
    }

    /// Which of the kept entry's attributes differ from what the run gives it (its xattrs and
    /// ACL too, under -X and -A).
    fn attr_changes(&self, at: AtDest) -> rules::Changes {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let plan = run.plan;
        let want = super::wanted::wanted(run, &e.stat, at.attr_target().as_ref());
        let mut changes = at
            .attr_target()
            .map(|d| rules::attr_changes(&run.rules, &want, &d, run.window_ns))
            .unwrap_or_default();
        if plan.xattrs || plan.acls {
            if let Some(dst_dir) = &pair.dst {
                let follow = plan.symlinks == Symlinks::Follow || at.dir_target.is_some();
                let src =
                    crate::xattr::Subject::at(pair.src(e), &e.name, e.stat.kind() != Kind::Symlink);
                let dst = crate::xattr::Subject::at(dst_dir.as_fd(), &e.dst_name, follow);
                match super::xattrs::differ(run, src, dst) {
                    Ok((acl, xattr)) => {
                        changes.acl = acl;
                        changes.xattr = xattr;
                    }
                    Err(err) => self.failed(CopyError::io(Op::SetXattr, self.dst_path(), err)),
                }
            }
        }
        changes
    }

    /// A directory entry whose attributes are set when its walk ends: queued as a subdirectory
    /// (entered or not), with its line.
    fn walk_later(&mut self, item: Item, dst_before: Option<Stat>, dst_follow: bool) {
        let contents = self.walked_into();
        let (pair, e) = (self.pair, self.e);
        self.subdirs.push(Task {
            parent: pair.clone(),
            name: e.dst_name.to_owned(),
            src_stat: e.stat,
            dst_before,
            dst_follow,
            item: Some(item),
            block: None,
            contents,
            layers: dir_layers(e),
        });
    }

    /// An entry left as it is at the destination, or made from a `--*-dest` tree: its line,
    /// its hash recorded, and its source removed under `--remove-source-files`.
    fn finish_existing(&mut self, item: &Item) {
        let (run, pair, e) = (self.run, self.pair, self.e);
        report(run, item, &e.stat, self.lines);
        apply::record_existing(run, pair, e);
        if run.plan.remove_source_files {
            apply::remove_source(run, pair, e);
        }
    }

    /// An entry made, rewritten or replaced: from an exact match in a `--*-dest` tree when
    /// DEST lacks it, else by `apply::make`.
    fn make(&mut self, dst: Option<Stat>, decision: Verdict) {
        let (run, pair, e) = (self.run, self.pair, self.e);
        let kind = e.stat.kind();
        pair.changing();
        // --*-dest: what DEST lacks may be in another tree already.
        let alt = (decision == Verdict::Create)
            .then(|| super::alt::find(run, pair, e))
            .flatten();
        if let Some(m) = alt.as_ref().filter(|m| m.exact && kind != Kind::Dir) {
            match apply::from_alt(run, self.mover, pair, e, m, self.lines) {
                Ok(item) => self.finish_existing(&item),
                Err(err) => self.failed(err),
            }
            return;
        }
        let started = Instant::now();
        let result = apply::make(run, self.mover, pair, e, dst.as_ref(), decision, self.lines);
        match result {
            Ok(Some(mut item)) => {
                item.took = Some(started.elapsed());
                if let Some(m) = &alt {
                    self.listed_as_from(m, &mut item);
                }
                if kind == Kind::Dir {
                    self.walk_later(item, None, false);
                    return;
                }
                report(run, &item, &e.stat, self.lines);
                if run.plan.remove_source_files {
                    apply::remove_source(run, pair, e);
                }
            }
            Ok(None) => {}
            Err(err) => self.failed(err),
        }
    }

    /// The line of an entry made where a `--*-dest` tree holds it, not exactly: a directory is
    /// made all the same, listed as matching; a file that differs from the tree's is listed as
    /// changed from it.
    fn listed_as_from(&self, m: &super::alt::Match, item: &mut Item) {
        let (run, e) = (self.run, self.e);
        let want = super::wanted::wanted(run, &e.stat, None);
        item.new = false;
        item.matched = m.exact;
        item.attrs = rules::attr_changes(&run.rules, &want, &m.stat, run.window_ns);
        if e.stat.kind() == Kind::File {
            if m.same_data {
                item.action = Action::LocalChange;
            }
            item.size = m.stat.size != e.stat.size;
            item.attrs.time |= !run.plan.times;
        }
    }
}

/// rsync's order for the names of one inode within a directory: the first name that exists
/// at the destination leads (made at its place, the later names linked to it at theirs); the
/// names before it, or all but the last when none exists yet, wait and are linked right after
/// the leader is made (the last name, on a first sync).
fn hard_link_order(pair: &Pair<'_>, listing: &mut Listing) {
    let key = |l: &Listed| (l.stat.nlink > 1 && !l.is_dir()).then_some((l.stat.dev, l.stat.ino));
    let entries = std::mem::take(&mut listing.entries);
    // Present at the destination, or (for a destination that lacks it) in a --*-dest tree.
    let exists = |l: &Listed| {
        matches!(dst_stat(pair, listing.dst_name(l)), Ok(Some(_)))
            || super::alt::find(pair.run, pair, &listing.entry(&pair.rel, l)).is_some()
    };
    // Each group's leader: its first name present at the destination, else its last name.
    let mut leader: HashMap<(u64, u64), (usize, bool)> = HashMap::new();
    for (i, l) in entries.iter().enumerate() {
        let Some(k) = key(l) else { continue };
        match leader.get(&k) {
            Some(&(_, true)) => {}
            _ => {
                leader.insert(k, (i, exists(l)));
            }
        }
    }
    let mut waiting: HashMap<(u64, u64), Vec<Listed>> = HashMap::new();
    let mut led: HashSet<(u64, u64)> = HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (i, l) in entries.into_iter().enumerate() {
        match key(&l) {
            Some(k) if leader[&k].0 == i => {
                out.push(l);
                out.extend(waiting.remove(&k).unwrap_or_default());
                led.insert(k);
            }
            Some(k) if !led.contains(&k) => waiting.entry(k).or_default().push(l),
            _ => out.push(l),
        }
    }
    listing.entries = out;
}

/// `--info=skip` (and `-vv`): why an entry is left, in rsync's words.
fn skipped(run: &Run<'_>, e: &SrcEntry, why: rules::NotSent, lines: &mut Vec<u8>) {
    if run.out.skips == 0 {
        return;
    }
    let is_dir = e.stat.kind() == Kind::Dir;
    let (before, after): (&[u8], &[u8]) = match why {
        rules::NotSent::Newer => (b"", b" is newer"),
        rules::NotSent::Exists if is_dir => return,
        rules::NotSent::Exists => (b"", b" exists"),
        rules::NotSent::NotExisting if is_dir => (b"not creating new directory \"", b"\""),
        rules::NotSent::NotExisting => (b"not creating new file \"", b"\""),
        rules::NotSent::Size if run.plan.max_size.is_some_and(|m| e.stat.size > m) => {
            (b"", b" is over max-size")
        }
        rules::NotSent::Size => (b"", b" is under min-size"),
    };
    lines.extend_from_slice(before);
    lines.extend_from_slice(&e.rel);
    lines.extend_from_slice(after);
    lines.push(b'\n');
}

/// Why an entry of this kind is not transferred (`None`: it is).
fn skip_note(plan: &SyncPlan, stat: &Stat) -> Option<&'static str> {
    match stat.kind() {
        Kind::Dir if !plan.recursive && !plan.dirs => Some("skipping directory"),
        Kind::Symlink if plan.symlinks == Symlinks::Skip => Some("skipping non-regular file"),
        Kind::Special if !special_wanted(plan, stat) => Some("skipping non-regular file"),
        _ => None,
    }
}

impl Pair<'_> {
    /// An entry's name as rsync's sender names it in its notes: the path the user gave, then
    /// the path below it.
    fn src_path_shown(&self, e: &SrcEntry) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let layer = &self.layers[e.layer];
        let base = layer.path.as_os_str().as_bytes();
        if layer.only.is_some() {
            return join(if base == b"." { b"" } else { base }, e.name.to_bytes());
        }
        e.rel.clone()
    }
}

/// Whether the walk enters the directory `e`: not, under `-x`, one on another filesystem (a
/// mount point is made, empty, and nothing below it is deleted).
fn descends(run: &Run<'_>, pair: &Pair<'_>, e: &SrcEntry) -> bool {
    !run.plan.one_file_system || e.stat.dev == pair.layers[e.layer].dev
}

/// `-R` (and `--files-from`) without `-r`: the directory `e` is on the way to an operand below
/// it, or is an operand written `DIR/`, so it is entered; an operand that is itself a
/// directory is made, not entered.
fn leads_on(pair: &Pair<'_>, e: &SrcEntry) -> bool {
    dir_layers(e).iter().any(|&i| pair.layers[i].enters_only())
}

/// The sources a subdirectory entry is walked in: the one that gave it, and those that merge.
fn dir_layers(e: &SrcEntry) -> Vec<usize> {
    std::iter::once(e.layer)
        .chain(e.more.iter().copied())
        .collect()
}

/// Whether a FIFO, socket or device is transferred (`--specials`, `--devices`).
fn special_wanted(plan: &SyncPlan, stat: &Stat) -> bool {
    if is_device(stat) {
        plan.devices
    } else {
        plan.specials
    }
}

/// A character or block device.
fn is_device(stat: &Stat) -> bool {
    let fmt = stat.mode & libc::S_IFMT;
    fmt == libc::S_IFCHR || fmt == libc::S_IFBLK
}
