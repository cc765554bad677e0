//! Running a [`CopyPlan`]: roots become tasks, workers take them, metadata lands in post-order.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::ctx::Ctx;
use crate::engine::shared::{Member, SharedReads};
use crate::engine::{uring_available, BlockingMover, DataPath, Mover, UringMover};
use crate::error::{CopyError, Op};
use crate::finalize;
use crate::links::LinkTracker;
use crate::manifest::Recorder;
use crate::node::{DirNode, RootNames, RootPaths};
use crate::parents;
use crate::plan::{check_not_inside, CopyPlan, CopyRoot, Dereference, Engine, Tuning};
use crate::policy::Policy;
use crate::progress::{Progress, Reporter, Summary};
use crate::queue::{Queue, Task};
use crate::quote::quote;
use crate::ranks::Ranks;
use crate::refusal::Refusal;
use crate::sys::{self, Kind};
use crate::walk;

/// Bytes of I/O buffers all workers together may hold when no limit asks for less.
const BUFFER_BUDGET: u64 = 64 << 20;

/// What memory a run may use, derived once from its limits (RLIMIT_AS, RLIMIT_DATA) and a
/// fixed budget, as [`FdBudget`] is from RLIMIT_NOFILE: every buffer the options ask for is
/// scaled down to fit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryBudget {
    /// Bytes of I/O buffers all workers together may hold.
    pub buffers: u64,
    /// The most worker threads the address space has room for (stacks, rings, buffers).
    pub threads: usize,
}

impl MemoryBudget {
    /// Address space a worker takes besides its buffers: its stack (2 MiB with std's default),
    /// its ring and what the allocator keeps for it, with room to spare.
    const THREAD_SPACE: u64 = 4 << 20;
    /// The least buffer memory worth starting a worker for.
    const WORKER_BUFFERS: u64 = 256 << 10;
    /// The smallest buffer (and request) size: one page.
    const PAGE: usize = 4096;
    /// The smallest chunk a big file is split into: a smaller one adds tasks, not speed.
    pub const MIN_CHUNK: u64 = 1 << 20;

    /// The budget of this process, from its limits and the address space it maps now.
    pub fn from_limits() -> Self {
        let limit = sys::memory_limit();
        if limit.is_some() {
            sys::share_malloc_arena();
        }
        Self::new(limit, sys::address_space_used())
    }

    /// The budget under an address-space or data limit of `limit` bytes (`None`: none), with
    /// `used` bytes mapped already. Buffers get a quarter of what is left and threads half of
    /// it, so the allocator, the kernel's rings and the walk keep the rest.
    pub fn new(limit: Option<u64>, used: u64) -> Self {
        match limit {
            None => MemoryBudget {
                buffers: BUFFER_BUDGET,
                threads: usize::MAX,
            },
            Some(limit) => {
                let free = limit.saturating_sub(used);
                let buffers = (free / 4).min(BUFFER_BUDGET);
                let threads = (free / 2 / (Self::THREAD_SPACE + Self::WORKER_BUFFERS)).max(1);
                MemoryBudget {
                    buffers: buffers.max(Self::WORKER_BUFFERS),
                    threads: usize::try_from(threads).unwrap_or(usize::MAX),
                }
            }
        }
    }

    /// Fits `tuning` (threads already fitted to descriptors) for `engine` within the budget:
    /// fewer threads, smaller buffers and fewer of them, bigger chunks. Each worker gets an
    /// equal share: half for the buffers of files in flight (io_uring slots, AIO requests), a
    /// quarter for its `--bs` buffer, a quarter for the rest (AIO's buffered tail, io_uring's
    /// in-place buffer).
    pub fn fit(&self, tuning: &mut Tuning, engine: Engine) {
        let page = Self::PAGE as u64;
        let most_threads = (self.buffers / Self::WORKER_BUFFERS).max(1);
        let threads = (tuning.threads.max(1) as u64)
            .min(most_threads)
            .min(self.threads as u64);
        tuning.threads = threads as usize;
        let share = self.buffers / threads;
        let quarter = (share / 4 / page * page).max(page);
        tuning.block_size = (tuning.block_size as u64)
            .next_multiple_of(page)
            .clamp(page, quarter) as usize;
        let in_flight = (share / 2).max(page);
        let depth = match engine {
            Engine::Aio => (in_flight / tuning.block_size as u64).max(1),
            _ => {
                // io_uring: the small files in flight and the one copied in place each take a
                // buffer of the threshold.
                tuning.small_file_threshold = tuning.small_file_threshold.min(quarter);
                let slot = tuning.small_file_threshold.next_multiple_of(page).max(page);
                (in_flight / slot).max(1)
            }
        };
        tuning.queue_depth = tuning
            .queue_depth
            .clamp(1, depth.min(u64::from(u32::MAX)) as u32);
        if tuning.chunk_size > 0 {
            tuning.chunk_size = tuning
                .chunk_size
                .max(Self::MIN_CHUNK)
                .max(tuning.block_size as u64);
        }
    }
}

/// How a run shares RLIMIT_NOFILE out, so the descriptors it holds stay within the limit at
/// any depth of tree and for any number of operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FdBudget {
    pub threads: usize,
    /// Small files in flight per io_uring worker (two descriptors each).
    queue_depth: u32,
    /// Directory pairs (operands' included) that may be open at once. Past it, a directory
    /// nobody holds closes, and is reopened (and checked) when it is needed again.
    pub dir_pairs: usize,
    /// There is room for a ring per worker; without it the run copies synchronously.
    ring: bool,
}

impl FdBudget {
    /// The spare descriptor kept besides those open at the start.
    const SPARE: usize = 1;
    /// Per worker besides directories and in-flight small files: its ring, a synchronous file
    /// pair, and the descriptors a reopen holds on its way down.
    const PER_WORKER: usize = 6;
    /// Directory pairs a worker holds at once: the one it reads and a subdirectory it opens.
    const HELD_PAIRS: usize = 2;
    /// Below this many free descriptors, rings and queues do not pay: one synchronous worker
    /// per [`FdBudget::SYNC_WORKER`] descriptors, and every idle directory that the budget
    /// cannot keep is closed.
    const ROOMY: usize = 32;
    /// What a synchronous worker holds at most: the directory pair it reads and a file pair,
    /// or that pair and a subdirectory's (a reopen on the way down stays within the same
    /// four). With the descriptors open at the start, the least a copy needs.
    const SYNC_WORKER: usize = 4;

    /// The budget under RLIMIT_NOFILE `nofile` with `in_use` descriptors open at the start, for
    /// `roots` operands of which `anchors` hold a descriptor for the whole run (the hard-link
    /// anchor under `--preserve=links`); `extra`: the descriptors each worker keeps besides
    /// (the splice engine's pipe, sync's temporary and side directories).
    pub fn new(
        nofile: usize,
        in_use: usize,
        roots: usize,
        anchors: usize,
        tuning: &Tuning,
        extra: usize,
    ) -> Self {
        // What the run may use when operands close while they wait.
        let usable = nofile.saturating_sub(in_use + Self::SPARE + anchors);
        if usable < Self::ROOMY {
            let free = nofile.saturating_sub(in_use + anchors);
            let per_worker = Self::SYNC_WORKER + extra;
            // Half for the workers, half for directories left open between their visits.
            let threads = (free / (2 * per_worker)).clamp(1, tuning.threads.max(1));
            return FdBudget {
                threads,
                queue_depth: 1,
                dir_pairs: free.saturating_sub(threads * per_worker) / 2,
                ring: false,
            };
        }
        // Workers and queues are sized as if every operand stayed open, as they may where
        // there is room; only operands past it close while they wait.
        let free = usable.saturating_sub(2 * roots);
        // A worker is worth starting with at least 128 descriptors to use.
        let threads = tuning.threads.clamp(1, (free / 128).max(1));
        let per_thread = free / threads;
        let fixed = Self::PER_WORKER + extra + 2 * Self::HELD_PAIRS;
        let fd_depth = (per_thread.saturating_sub(fixed + 64) / 2).max(1);
        let queue_depth = (tuning.queue_depth as usize).clamp(1, fd_depth) as u32;
        let files = threads * (Self::PER_WORKER + extra + 2 * queue_depth as usize);
        let below_roots = (free.saturating_sub(files) / 2).max(threads * Self::HELD_PAIRS);
        let dir_pairs = (below_roots + roots).min(usable.saturating_sub(files) / 2);
        FdBudget {
            threads,
            queue_depth,
            dir_pairs,
            ring: true,
        }
    }
}

/// What a run settles before it starts, beside the plan it never changes: the plan's tuning
/// fitted to RLIMIT_NOFILE and the memory budget (its own value: the engines read it, through
/// [`Ctx::tuning`]), whether io_uring is used, and the directory budget.
pub(crate) struct Setup<'a> {
    pub plan: &'a CopyPlan,
    /// The plan's tuning, fitted: fewer threads, a smaller queue, smaller buffers, bigger
    /// chunks than asked where the limits say so.
    pub tuning: Tuning,
    pub use_uring: bool,
    pub dir_budget: usize,
}

impl<'a> Setup<'a> {
    /// Fits the plan's threads and queue depth to RLIMIT_NOFILE and the buffer budget, and
    /// probes io_uring.
    pub fn new(plan: &'a CopyPlan, reporter: &dyn Reporter) -> Self {
        let nofile =
            usize::try_from(ringio_base::limits::raise_nofile_limit()).unwrap_or(usize::MAX);
        let anchors = if plan.preserve.links {
            plan.roots.len()
        } else {
            0
        };
        // Only a tight limit is worth a look at what is open already.
        let in_use = if nofile < 256 {
            sys::open_descriptors(nofile).unwrap_or(3)
        } else {
            3
        };
        let pipe = if plan.engine == Engine::Splice { 2 } else { 0 };
        let roots = plan.roots.len();
        let budget = FdBudget::new(nofile, in_use, roots, anchors, &plan.tuning, pipe);
        let mut tuning = plan.tuning;
        tuning.threads = budget.threads;
        tuning.queue_depth = budget.queue_depth;
        // Buffers count in RSS once used: all of them stay within one budget whatever the
        // options and the thread count.
        MemoryBudget::from_limits().fit(&mut tuning, plan.engine);
        let use_uring = match plan.engine {
            Engine::Uring if !budget.ring => {
                if reporter.verbose() {
                    reporter.note(&format!(
                        "{nofile} open files (RLIMIT_NOFILE) are too few for io_uring; using \
                         the synchronous threaded engine"
                    ));
                }
                false
            }
            Engine::Uring => match uring_available() {
                Ok(()) => true,
                Err(why) => {
                    if reporter.verbose() {
                        reporter.note(&format!("{why}; using the synchronous threaded engine"));
                    }
                    false
                }
            },
            _ => false,
        };
        Setup {
            plan,
            tuning,
            use_uring,
            dir_budget: budget.dir_pairs,
        }
    }

    /// Worker threads, as fitted.
    pub fn threads(&self) -> usize {
        self.tuning.threads
    }

    /// The shared state of a run of this setup (`ranks`: this rank's part of an MPI job).
    pub fn ctx(
        &self,
        progress: &'a Progress,
        reporter: &'a dyn Reporter,
        ranks: Option<Ranks>,
    ) -> Ctx<'a> {
        let plan = self.plan;
        Ctx {
            plan,
            tuning: self.tuning,
            policy: Policy::of(plan),
            progress,
            reporter,
            umask: sys::umask(),
            is_root: rustix::process::geteuid().is_root(),
            euid: rustix::process::geteuid().as_raw(),
            egid: rustix::process::getegid().as_raw(),
            errors: AtomicU64::new(0),
            fatal: AtomicBool::new(false),
            links: LinkTracker::default(),
            open_dirs: AtomicUsize::new(0),
            dir_budget: self.dir_budget,
            xattr_warned: AtomicBool::new(false),
            created: (plan.roots.len() > 1).then(Default::default),
            operands: (plan.roots.len() > 1).then(Default::default),
            ranks,
            shared: None,
            recorder: plan
                .hashing
                .as_ref()
                .map(|h| Recorder::new(h.algo, h.base.clone(), plan.preserve.timestamps)),
        }
    }

    /// What the run reports when it is over.
    pub fn summary(&self, ctx: &Ctx<'_>) -> Summary {
        let progress = ctx.progress;
        let engine = match (self.plan.engine, self.use_uring) {
            (Engine::Uring, false) => "sync (io_uring unavailable)",
            (engine, _) => engine.name(),
        };
        Summary {
            files: progress.files.load(Ordering::Relaxed),
            dirs: progress.dirs.load(Ordering::Relaxed),
            bytes: progress.bytes.load(Ordering::Relaxed),
            errors: ctx.errors.load(Ordering::Relaxed),
            skipped: progress.skipped.load(Ordering::Relaxed),
            interrupted: progress.cancelled(),
            engine: engine.to_string(),
            hashes: None,
            kept_unlike_source: Vec::new(),
        }
    }
}

/// Runs the plan. Per-entry errors go to `reporter` and are counted in the summary.
pub fn copy(plan: &CopyPlan, progress: &Progress, reporter: &dyn Reporter) -> Summary {
    copy_member(plan, progress, reporter, None)
}

/// Runs several plans of the same sources at once, each into its own destination (`cp
/// --tee`), as one tee group: every byte range of a source is read once and written to every
/// destination that copies it ([`SharedReads`]). Each plan is a run of its own in every other
/// way (its walk of the destination, its rules for what exists there, its metadata, links and
/// hashes, its errors): a destination that fails stops only its own run. The summaries come
/// in the order of the plans, each with its `progress`.
pub fn copy_tee(
    plans: &[&CopyPlan],
    progress: &[&Progress],
    reporter: &dyn Reporter,
) -> Vec<Summary> {
    assert_eq!(plans.len(), progress.len(), "a progress for each plan");
    // Before any run's thread starts (each run grows it again: by then it is grown).
    ringio_base::limits::grow_descriptor_table();
    if plans.len() > crate::engine::shared::MAX_MEMBERS {
        // More destinations than a group has places: each reads for itself.
        return std::thread::scope(|scope| {
            let runs: Vec<_> = plans
                .iter()
                .zip(progress)
                .map(|(plan, progress)| scope.spawn(move || copy(plan, progress, reporter)))
                .collect();
            runs.into_iter()
                .map(|run| run.join().expect("a tee's copy panicked"))
                .collect()
        });
    }
    let members = SharedReads::group(plans.len());
    std::thread::scope(|scope| {
        let runs: Vec<_> = plans
            .iter()
            .zip(progress)
            .zip(members)
            .map(|((plan, progress), member)| {
                scope.spawn(move || copy_member(plan, progress, reporter, Some(member)))
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a tee's copy panicked"))
            .collect()
    })
}

/// Runs the plan, as `member` of a tee group when given.
fn copy_member(
    plan: &CopyPlan,
    progress: &Progress,
    reporter: &dyn Reporter,
    member: Option<Member>,
) -> Summary {
    // Before the workers start: the table never grows under them.
    ringio_base::limits::grow_descriptor_table();
    let setup = Setup::new(plan, reporter);
    let mut ctx = setup.ctx(progress, reporter, None);
    ctx.shared = member;
    for wave in waves(&plan.roots) {
        if ctx.stopped() {
            break;
        }
        run_wave(&ctx, &wave, setup.threads(), setup.use_uring);
    }
    if let Some(member) = &ctx.shared {
        // Nothing more is read for this run: what only it still wanted is let go.
        member.leave();
    }
    if plan.fsync && !progress.cancelled() {
        sync_destinations(&ctx);
    }
    let mut summary = setup.summary(&ctx);
    if !progress.cancelled() {
        if let Some(recorder) = ctx.recorder.take() {
            summary.kept_unlike_source = recorder.kept_unlike_source();
            summary.hashes = Some(recorder.listing());
        }
    }
    summary
}

/// Operands in the order cp settles them: an operand whose destination path an earlier
/// operand already names waits for a later wave, so `cp a/f b/f dst/` copies a/f first and
/// then meets it as "just created". Usually there is one wave.
pub(crate) fn waves(roots: &[CopyRoot]) -> Vec<Vec<&CopyRoot>> {
    let mut waves: Vec<Vec<&CopyRoot>> = Vec::new();
    let mut seen: std::collections::HashMap<&Path, usize> = std::collections::HashMap::new();
    for root in roots {
        let count = seen.entry(root.dst.as_path()).or_default();
        let earlier = *count;
        *count += 1;
        if waves.len() <= earlier {
            waves.push(Vec::new());
        }
        waves[earlier].push(root);
    }
    waves
}

/// Copies one wave of operands with a pool of workers, and waits for all of it.
fn run_wave<'a>(ctx: &'a Ctx<'a>, roots: &[&CopyRoot], threads: usize, use_uring: bool) {
    let plan = ctx.plan;
    let reporter = ctx.reporter;
    // Copying a few files needs no pool: a thread (and ring) per file at most, unless one is
    // big enough to be split into chunks.
    let threads = if roots.iter().any(|root| needs_pool(plan, &ctx.tuning, root)) {
        threads
    } else {
        threads.min(roots.len()).max(1)
    };
    let queue = Queue::new(threads);
    let mut made_parents = Vec::new();
    for root in roots {
        if ctx.stopped() {
            break;
        }
        if let Some(target) = &root.parents {
            match parents::make(ctx, &root.src, target) {
                Ok(made) => made_parents.push(made),
                Err(e) => {
                    ctx.fail(e);
                    continue;
                }
            }
        }
        if let Err(e) = start_root(ctx, &queue, root) {
            ctx.fail(e);
        }
    }
    let work = || {
        let mut mover = new_mover(plan, &ctx.tuning, use_uring, reporter);
        mover.data_path().share(ctx.shared.clone());
        walk::worker(ctx, &queue, mover.as_mut());
    };
    std::thread::scope(|scope| {
        // Under a thread or memory limit (ulimit -u, ulimit -v) fewer workers start; the
        // caller's own thread is the last one, so the copy always runs.
        for _ in 1..threads {
            if std::thread::Builder::new()
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
    for made in made_parents {
        made.finish(ctx);
    }
}

/// A worker's engine.
pub(crate) fn new_mover<'a>(
    plan: &'a CopyPlan,
    tuning: &Tuning,
    use_uring: bool,
    reporter: &dyn Reporter,
) -> Box<dyn Mover<'a> + 'a> {
    match plan.engine {
        Engine::ReadWrite => Box::new(BlockingMover::new(DataPath::new(plan, tuning, false))),
        Engine::Aio | Engine::CopyRange | Engine::Sendfile | Engine::Splice => {
            let method = plan.engine.method().expect("an alternative engine");
            let plain_below = match plan.engine {
                Engine::Aio => tuning.small_file_threshold,
                _ => 0,
            };
            Box::new(BlockingMover::new(DataPath::with_method(
                plan,
                tuning,
                method,
                plain_below,
            )))
        }
        Engine::Uring if use_uring => {
            match UringMover::new(
                tuning.queue_depth,
                tuning.small_file_threshold,
                tuning.ring_only,
                DataPath::new(plan, tuning, true),
            ) {
                Ok(m) => Box::new(m),
                Err(e) => {
                    if reporter.verbose() {
                        reporter.note(&format!(
                            "io_uring setup failed ({e}); this worker copies synchronously"
                        ));
                    }
                    Box::new(BlockingMover::new(DataPath::new(plan, tuning, true)))
                }
            }
        }
        Engine::Uring => Box::new(BlockingMover::new(DataPath::new(plan, tuning, true))),
    }
}

/// `--fsync`: flushes every filesystem the copy wrote to. One syncfs per destination root
/// costs far less than an fsync per file, and leaves the whole copy durable before exit.
pub(crate) fn sync_destinations(ctx: &Ctx<'_>) {
    let mut synced = Vec::new();
    for root in &ctx.plan.roots {
        let target = if root.dst.is_dir() {
            root.dst.as_path()
        } else {
            match root.dst.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            }
        };
        let result = std::fs::File::open(target).and_then(|f| {
            let dev = std::os::unix::fs::MetadataExt::dev(&f.metadata()?);
            if !synced.contains(&dev) {
                rustix::fs::syncfs(&f)?;
                synced.push(dev);
            }
            Ok(())
        });
        if let Err(e) = result {
            ctx.fail(CopyError::io(Op::Sync, target, e));
        }
    }
}

fn cstring(bytes: &[u8], path: &Path) -> Result<CString, CopyError> {
    CString::new(bytes).map_err(|_| CopyError::io(Op::Stat, path, io::ErrorKind::InvalidInput))
}

fn path_cstring(path: &Path) -> Result<CString, CopyError> {
    cstring(path.as_os_str().as_bytes(), path)
}

/// True when copying `root` can use every worker: a directory, or a file split into chunks
/// (by the fitted `tuning`).
pub(crate) fn needs_pool(plan: &CopyPlan, tuning: &Tuning, root: &CopyRoot) -> bool {
    let follow = plan.dereference != Dereference::Never;
    match root.source_stat(follow) {
        Ok(stat) => {
            use crate::engine::file::{weight, worth_splitting};
            stat.kind() == Kind::Dir || worth_splitting(tuning, weight(&stat, plan.sparse))
        }
        Err(_) => false,
    }
}

/// The index of `root` in the plan's roots.
fn root_index(plan: &CopyPlan, root: &CopyRoot) -> u32 {
    plan.roots
        .iter()
        .position(|r| std::ptr::eq(r, root))
        .unwrap_or(0) as u32
}

/// Turns one command-line operand into its first task. Returns the node of a directory
/// operand.
pub(crate) fn start_root<'a>(
    ctx: &'a Ctx<'a>,
    queue: &Queue<'a>,
    root: &CopyRoot,
) -> Result<Option<Arc<DirNode<'a>>>, CopyError> {
    let plan = ctx.plan;
    let follow = plan.dereference != Dereference::Never;
    let src_c = path_cstring(&root.src)?;
    let cwd = rustix::fs::CWD;
    let stat = root
        .source_stat(follow)
        .map_err(|e| CopyError::io(Op::Stat, &root.src, e))?;
    if stat.kind() != Kind::Dir {
        if named_again(ctx, root, &stat)? {
            return Ok(None);
        }
        return start_root_entry(ctx, queue, root, follow).map(|()| None);
    }
    if !plan.recursive {
        return Err(Refusal::NotRecursive.of(&root.src, &root.dst).into());
    }
    if named_again(ctx, root, &stat)? {
        return Ok(None);
    }
    check_not_inside(&root.src, (stat.dev, stat.ino), &root.dst)?;
    let dst_c = path_cstring(&root.dst)?;
    let fresh = match sys::mkdirat(cwd, &dst_c, finalize::dir_create_mode(plan, &stat)) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => false,
        Err(e) => return Err(CopyError::io(Op::CreateDir, &root.dst, e)),
    };
    let src = match sys::open_dir(cwd, &src_c, follow) {
        Ok(fd) => fd,
        Err(e) => {
            // As GNU cp, which makes the directory before it reads the source: an unreadable
            // one is still copied, empty, with its metadata.
            let unreadable = matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM));
            if let Some(dst) = sys::open_dir(cwd, &dst_c, false)
                .ok()
                .filter(|_| unreadable)
            {
                if fresh && ctx.reporter.verbose() {
                    ctx.reporter.copied(&root.src, &root.dst);
                }
                let path = || root.dst.clone();
                let src = crate::xattr::Subject::at(cwd, &src_c, follow);
                finalize::directory_of(ctx, src, dst.as_fd(), &stat, fresh, None, &path);
            }
            return Err(CopyError::io(Op::Access, &root.src, e));
        }
    };
    // Not following a final symlink: `cp -rT dir link` must not write through `link`.
    let dst = match sys::open_dir(cwd, &dst_c, false) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
            return Err(Refusal::NonDirectoryWithDirectory
                .of(&root.src, &root.dst)
                .into())
        }
        Err(e) => return Err(CopyError::io(Op::OpenDir, &root.dst, e)),
    };
    let dst_stat = sys::fstatx(dst.as_fd()).map_err(|e| CopyError::io(Op::Stat, &root.dst, e))?;
    if fresh && ctx.reporter.verbose() {
        ctx.reporter.copied(&root.src, &root.dst);
    }
    let names = RootNames {
        src: root.src.clone(),
        dst: root.dst.clone(),
        index: root_index(plan, root),
    };
    let node = DirNode::root(ctx, names, (src, dst), (stat, &dst_stat), fresh, true).reopened_by(
        RootPaths {
            src: src_c,
            follow_src: follow,
            dst: dst_c,
            follow_dst: false,
        },
    );
    let node = if plan.preserve.links {
        node.with_link_anchor()
    } else {
        node
    };
    let node = Arc::new(node);
    queue.push(Task::Read(node.clone()));
    // Its task may wait behind many operands: under a tight budget it closes until then.
    node.park();
    Ok(Some(node))
}

/// True when `root` names a source that an earlier operand of this run already named, and
/// cp copies it only once, as GNU cp judges it by the source's identity (`stat`): the same
/// file under the same name in the same directory (`cp f ./f dir/`; a second hard link is
/// another name, and with backups it is copied again), or under -r the same directory to the
/// same destination, get a warning and no copy. The same directory to another destination
/// would be a hard link to a directory: an error, unless symlinks on the command line are
/// followed (then it is copied again, as GNU does).
fn named_again(ctx: &Ctx<'_>, root: &CopyRoot, stat: &sys::Stat) -> Result<bool, CopyError> {
    let Some(seen) = &ctx.operands else {
        return Ok(false);
    };
    let plan = ctx.plan;
    let index = root_index(plan, root) as usize;
    let earlier = {
        let mut seen = seen.lock().expect("operands lock");
        let names = seen.entry((stat.dev, stat.ino)).or_default();
        let earlier = names.clone();
        names.push(index);
        earlier
    };
    let mut earlier = earlier.iter().filter_map(|&i| plan.roots.get(i)).peekable();
    let Some(first) = earlier.peek().copied() else {
        return Ok(false);
    };
    let what = if stat.kind() != Kind::Dir {
        if plan.backup.is_some() || !earlier.any(|e| crate::plan::same_name(&e.src, &root.src)) {
            return Ok(false);
        }
        "file"
    } else if first.dst == root.dst {
        "directory"
    } else if plan.dereference == Dereference::Never {
        return Err(Refusal::HardLinkToDirectory
            .of(&first.dst, &root.dst)
            .into());
    } else {
        return Ok(false);
    };
    ctx.reporter.note(&format!(
        "warning: source {what} {} specified more than once",
        quote(&root.src)
    ));
    Ok(true)
}

/// A directory operand that another rank has started: its node, to hang work items from.
/// It applies no metadata (the starting rank does) and is not fresh here. `None` when it is
/// not a directory or cannot be opened (the starting rank reported why).
pub(crate) fn open_root<'a>(ctx: &'a Ctx<'a>, root: &CopyRoot) -> Option<Arc<DirNode<'a>>> {
    let plan = ctx.plan;
    let follow = plan.dereference != Dereference::Never;
    let src_c = path_cstring(&root.src).ok()?;
    let dst_c = path_cstring(&root.dst).ok()?;
    let cwd = rustix::fs::CWD;
    let stat = root.source_stat(follow).ok()?;
    if stat.kind() != Kind::Dir || !plan.recursive {
        return None;
    }
    let src = sys::open_dir(cwd, &src_c, follow).ok()?;
    let dst = sys::open_dir(cwd, &dst_c, false).ok()?;
    let dst_stat = sys::fstatx(dst.as_fd()).ok()?;
    let names = RootNames {
        src: root.src.clone(),
        dst: root.dst.clone(),
        index: root_index(plan, root),
    };
    let mut node = DirNode::root(ctx, names, (src, dst), (stat, &dst_stat), false, false);
    // The top of a tree (whose metadata rank 0 applies), not a file operand's directory.
    node.operand = false;
    Some(Arc::new(if plan.preserve.links {
        node.with_link_anchor()
    } else {
        node
    }))
}

/// A file, symlink or special file operand: copied by a worker as an entry of its parent.
fn start_root_entry<'a>(
    ctx: &'a Ctx<'a>,
    queue: &Queue<'a>,
    root: &CopyRoot,
    follow: bool,
) -> Result<(), CopyError> {
    if root.dst.as_os_str().as_bytes().ends_with(b"/") {
        // `cp file new/`: a trailing slash promises a directory that is not there.
        let err = io::Error::from_raw_os_error(libc::ENOTDIR);
        return Err(CopyError::io(Op::Create, &root.dst, err));
    }
    let (src_dir, src_name) = split(&root.src);
    let (dst_dir, dst_name) = split(&root.dst);
    let cwd = rustix::fs::CWD;
    let src_dir_c = path_cstring(&src_dir)?;
    let dst_dir_c = path_cstring(&dst_dir)?;
    let src_fd = sys::open_dir(cwd, &src_dir_c, true)
        .map_err(|e| CopyError::io(Op::OpenDir, &src_dir, e))?;
    let dst_fd = sys::open_dir(cwd, &dst_dir_c, true)
        .map_err(|e| CopyError::io(Op::Create, &root.dst, e))?;
    let stat = sys::fstatx(src_fd.as_fd()).map_err(|e| CopyError::io(Op::Stat, &src_dir, e))?;
    let dst_stat = sys::fstatx(dst_fd.as_fd()).map_err(|e| CopyError::io(Op::Stat, &dst_dir, e))?;
    let names = RootNames {
        src: display_dir(&root.src),
        dst: display_dir(&root.dst),
        index: root_index(ctx.plan, root),
    };
    let node = DirNode::root(
        ctx,
        names,
        (src_fd, dst_fd),
        (stat, &dst_stat),
        false,
        false,
    )
    .reopened_by(RootPaths {
        src: src_dir_c,
        follow_src: true,
        dst: dst_dir_c,
        follow_dst: true,
    });
    // A lone file has no other name to link to: no anchor, one descriptor fewer.
    let node = if ctx.plan.preserve.links && ctx.plan.roots.len() > 1 {
        node.with_link_anchor()
    } else {
        node
    };
    let node = Arc::new(node);
    queue.push(Task::Root {
        dir: node.clone(),
        src: cstring(src_name.as_bytes(), &root.src)?,
        dst: cstring(dst_name.as_bytes(), &root.dst)?,
        follow,
    });
    node.park();
    Ok(())
}

/// Splits a path into the directory to open and the final name ("." when there is none).
fn split(path: &Path) -> (PathBuf, &OsStr) {
    let name = path.file_name().unwrap_or(path.as_os_str());
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    (dir, name)
}

/// The directory part as the user wrote it, so messages show `name`, not `./name`.
fn display_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_budget_fits_small_limits() {
        let tuning = Tuning::default();
        // GNU cp copies under RLIMIT_NOFILE 8: one synchronous worker, no ring, and every
        // idle directory closed.
        let tiny = FdBudget::new(8, 3, 1, 0, &tuning, 0);
        assert_eq!((tiny.threads, tiny.queue_depth, tiny.ring), (1, 1, false));
        assert_eq!(tiny.dir_pairs, 0);
        for nofile in 7..40 {
            for (anchors, extra) in [(0, 0), (1, 0), (0, 2), (1, 6)] {
                let b = FdBudget::new(nofile, 3, 1, anchors, &tuning, extra);
                let worker = FdBudget::SYNC_WORKER + extra;
                let need = 3 + anchors + b.threads * worker + 2 * b.dir_pairs;
                assert!(
                    b.ring || need <= nofile.max(3 + anchors + worker),
                    "{nofile} {anchors} {extra}: {b:?}"
                );
            }
        }
        let small = FdBudget::new(16, 3, 1, 0, &tuning, 0);
        assert_eq!((small.threads, small.ring), (1, false));
        assert!(small.dir_pairs >= 2);
        let roomy = FdBudget::new(1 << 20, 3, 1, 0, &tuning, 0);
        assert_eq!(roomy.threads, tuning.threads);
        assert_eq!(roomy.queue_depth, tuning.queue_depth);
        assert!(roomy.ring && roomy.dir_pairs > 100_000);
        let usual = FdBudget::new(1024, 3, 1, 1, &tuning, 0);
        assert!(usual.ring && usual.threads >= 1 && usual.dir_pairs >= 2 * usual.threads);
        // Operands stay open where there is room, and close while they wait where there is
        // not: the pairs never outgrow the limit.
        for roots in [1, 10, 300, 1000, 5000] {
            let b = FdBudget::new(1024, 3, roots, 0, &tuning, 0);
            let files = b.threads * (FdBudget::PER_WORKER + 2 * b.queue_depth as usize);
            assert!(3 + 1 + files + 2 * b.dir_pairs <= 1024, "{roots}: {b:?}");
            if roots <= 300 {
                assert!(b.dir_pairs >= roots + 2 * b.threads, "{roots}: {b:?}");
            }
        }
    }

    #[test]
    fn memory_budget_scales_every_option_down() {
        let absurd = Tuning {
            threads: 100_000,
            block_size: 1 << 30,
            queue_depth: u32::MAX,
            small_file_threshold: 16 << 20,
            chunk_size: 1,
            ring_only: false,
        };
        let mib = 1u64 << 20;
        for limit in [
            None,
            Some(4 << 30),
            Some(200 * mib),
            Some(100 * mib),
            Some(20 * mib),
        ] {
            let budget = MemoryBudget::new(limit, 17 * mib);
            assert!(budget.buffers <= BUFFER_BUDGET);
            for engine in [
                Engine::Uring,
                Engine::Aio,
                Engine::ReadWrite,
                Engine::Splice,
            ] {
                let mut t = absurd;
                budget.fit(&mut t, engine);
                let what = format!("{limit:?} {engine:?}: {t:?}");
                assert!(t.threads >= 1 && t.queue_depth >= 1, "{what}");
                assert!(t.chunk_size >= MemoryBudget::MIN_CHUNK, "{what}");
                // The buffers a worker may hold at once: files in flight, the `--bs`
                // buffer, and AIO's buffered tail or io_uring's in-place buffer.
                let bs = t.block_size as u64;
                let slot = t.small_file_threshold.next_multiple_of(4096).max(4096);
                let depth = u64::from(t.queue_depth);
                let per_worker = match engine {
                    Engine::Aio => depth * bs + 2 * bs,
                    _ => depth * slot + slot + bs,
                };
                let total = t.threads as u64 * per_worker;
                assert!(total <= budget.buffers, "{what}: {total}");
                if let Some(limit) = limit {
                    // Stacks and buffers within what the limit leaves.
                    let stacks = t.threads as u64 * MemoryBudget::THREAD_SPACE;
                    assert!(
                        stacks <= limit.saturating_sub(17 * mib) / 2 + 4 * mib,
                        "{what}"
                    );
                }
            }
        }
        // Defaults stay as they were measured where memory is plentiful.
        let mut t = Tuning {
            threads: 4,
            ..Tuning::default()
        };
        let defaults = t;
        MemoryBudget::new(None, 0).fit(&mut t, Engine::Aio);
        assert_eq!(t, defaults);
        // A chunk size of 0 (no splitting) stays 0.
        let mut t = Tuning {
            chunk_size: 0,
            ..Tuning::default()
        };
        MemoryBudget::new(None, 0).fit(&mut t, Engine::Uring);
        assert_eq!(t.chunk_size, 0);
    }

    #[test]
    fn operands_of_one_name_wait_for_a_later_wave() {
        let root = |s: &str, d: &str| CopyRoot {
            parents: None,
            src: s.into(),
            dst: d.into(),
            stat: None,
        };
        let roots = [root("a/f", "d/f"), root("b/f", "d/f"), root("c/g", "d/g")];
        let waves = waves(&roots);
        assert_eq!(waves.len(), 2);
        assert_eq!(waves[0].len(), 2);
        assert_eq!(waves[1][0].src, Path::new("b/f"));
    }
}
