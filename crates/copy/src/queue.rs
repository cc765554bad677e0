//! The work of a run: [`Task`]s on a shared LIFO stack ([`Queue`]) that the workers take, and
//! the busy count that tells them when the tree is done.

use std::ffi::CString;
use std::sync::{Arc, Condvar, Mutex};

use crate::engine::bigfile::BigFile;
use crate::node::DirNode;
use crate::ranks::WorkItem;
use crate::sys::{Kind, Stat};

/// One directory entry waiting to be copied: its name and, when getdents knew it, its type.
pub(crate) type Entry = (CString, Option<Kind>);

/// Work for a worker.
pub(crate) enum Task<'a> {
    /// Create and fill the destination twin of a source subdirectory.
    Subdir {
        parent: Arc<DirNode<'a>>,
        name: CString,
        stat: Option<Stat>,
    },
    /// Read an already opened directory pair.
    Read(Arc<DirNode<'a>>),
    /// Copy these entries of one directory.
    Entries {
        dir: Arc<DirNode<'a>>,
        entries: Vec<Entry>,
    },
    /// A command-line file operand, possibly renamed (`cp a b`).
    Root {
        dir: Arc<DirNode<'a>>,
        src: CString,
        dst: CString,
        follow: bool,
    },
    /// A byte range of a big file.
    Chunk {
        file: Arc<BigFile<'a>>,
        offset: u64,
        len: u64,
    },
    /// Work from another rank, below one of this rank's roots (`cp --mpi`).
    FromRank {
        root: Arc<DirNode<'a>>,
        item: WorkItem,
    },
}

/// The shared task stack and the count of busy workers, for termination.
pub(crate) struct Queue<'a> {
    state: Mutex<QueueState<'a>>,
    wake: Condvar,
    threads: usize,
}

struct QueueState<'a> {
    tasks: Vec<Task<'a>>,
    busy: usize,
    /// Idle workers wait instead of finishing: more work may come from other ranks.
    held_open: bool,
}

/// Entries a batch task carries; also how many entries a reader collects before handing off.
pub(crate) const BATCH: usize = 128;

impl<'a> Queue<'a> {
    pub fn new(threads: usize) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                tasks: Vec::new(),
                busy: 0,
                held_open: false,
            }),
            wake: Condvar::new(),
            threads,
        }
    }

    pub fn push(&self, task: Task<'a>) {
        self.state.lock().expect("queue lock").tasks.push(task);
        self.wake.notify_one();
    }

    /// True when idle workers could use more queued work.
    pub fn hungry(&self) -> bool {
        self.state.lock().expect("queue lock").tasks.len() < self.threads * 2
    }

    pub fn try_pop(&self) -> Option<Task<'a>> {
        self.state.lock().expect("queue lock").tasks.pop()
    }

    /// Keeps idle workers waiting for tasks pushed from outside (`true`), or lets them finish
    /// once the queue is empty (`false`).
    pub fn hold_open(&self, open: bool) {
        self.state.lock().expect("queue lock").held_open = open;
        self.wake.notify_all();
    }

    /// Nothing queued and no worker busy.
    pub fn is_idle(&self) -> bool {
        let st = self.state.lock().expect("queue lock");
        st.tasks.is_empty() && st.busy == 0
    }

    /// Removes the older half of the tasks `movable` accepts, oldest first: rounded up while a
    /// worker is busy, down when none is (an idle rank keeps its one task: giving it away
    /// would only swap thief and victim, and two idle ranks could pass it back and forth).
    pub fn take_oldest_half(&self, movable: impl Fn(&Task<'a>) -> bool) -> Vec<Task<'a>> {
        let mut st = self.state.lock().expect("queue lock");
        let count = st.tasks.iter().filter(|t| movable(t)).count();
        let mut want = (count + usize::from(st.busy > 0)) / 2;
        let mut taken = Vec::with_capacity(want);
        let mut kept = Vec::with_capacity(st.tasks.len() - want);
        for task in st.tasks.drain(..) {
            if want > 0 && movable(&task) {
                want -= 1;
                taken.push(task);
            } else {
                kept.push(task);
            }
        }
        st.tasks = kept;
        taken
    }

    /// Blocks until a task arrives, or returns None when no task is queued and no worker is busy
    /// (nothing can create more). The caller counts as busy while it holds a task.
    pub fn pop_or_finish(&self, was_busy: bool) -> Option<Task<'a>> {
        let mut st = self.state.lock().expect("queue lock");
        if was_busy {
            st.busy -= 1;
        }
        loop {
            if let Some(task) = st.tasks.pop() {
                st.busy += 1;
                return Some(task);
            }
            if st.busy == 0 && !st.held_open {
                self.wake.notify_all();
                return None;
            }
            st = self.wake.wait(st).expect("queue lock");
        }
    }
}
