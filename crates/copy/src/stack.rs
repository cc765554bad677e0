//! The work stack every tree walk's workers share: a LIFO of work items (the most recently
//! found first, so the workers stay near each other in the tree and few directories wait open)
//! and the count of workers busy with one, which tells them when the walk is done: nothing
//! queued and nobody busy means nothing can queue more. cp's walk stacks its [`Task`]s
//! ([`crate::queue::Queue`]), sync's its directories, batches and deletions.
//!
//! [`Task`]: crate::queue::Task

use std::sync::{Condvar, Mutex};

/// The shared stack of `T`s and the count of busy workers.
pub(crate) struct WorkStack<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
    threads: usize,
}

struct State<T> {
    items: Vec<T>,
    busy: usize,
    /// Idle workers wait instead of finishing: more work may come from outside (other ranks).
    held_open: bool,
}

impl<T> WorkStack<T> {
    /// An empty stack for `threads` workers.
    pub fn new(threads: usize) -> Self {
        WorkStack {
            state: Mutex::new(State {
                items: Vec::new(),
                busy: 0,
                held_open: false,
            }),
            wake: Condvar::new(),
            threads,
        }
    }

    /// Queues one item and wakes a waiting worker.
    pub fn push(&self, item: T) {
        self.state.lock().expect("work stack").items.push(item);
        self.wake.notify_one();
    }

    /// Queues `items` so that the first is taken first, and wakes a worker for each (all of
    /// them for more than one).
    pub fn push_all(&self, items: Vec<T>) {
        let one = match items.len() {
            0 => return,
            n => n == 1,
        };
        self.state
            .lock()
            .expect("work stack")
            .items
            .extend(items.into_iter().rev());
        if one {
            self.wake.notify_one();
        } else {
            self.wake.notify_all();
        }
    }

    /// True when idle workers could use more queued work.
    pub fn hungry(&self) -> bool {
        self.state.lock().expect("work stack").items.len() < self.threads * 2
    }

    /// The top item, if any, without waiting (the caller is busy already).
    pub fn try_pop(&self) -> Option<T> {
        self.state.lock().expect("work stack").items.pop()
    }

    /// Keeps idle workers waiting for items pushed from outside (`true`), or lets them finish
    /// once the stack is empty (`false`).
    pub fn hold_open(&self, open: bool) {
        self.state.lock().expect("work stack").held_open = open;
        self.wake.notify_all();
    }

    /// Nothing queued and no worker busy.
    pub fn is_idle(&self) -> bool {
        let st = self.state.lock().expect("work stack");
        st.items.is_empty() && st.busy == 0
    }

    /// Removes the older half of the items `movable` accepts, oldest first: rounded up while a
    /// worker is busy, down when none is (an idle rank keeps its one item: giving it away
    /// would only swap thief and victim, and two idle ranks could pass it back and forth).
    pub fn take_oldest_half(&self, movable: impl Fn(&T) -> bool) -> Vec<T> {
        let mut st = self.state.lock().expect("work stack");
        let count = st.items.iter().filter(|t| movable(t)).count();
        let mut want = (count + usize::from(st.busy > 0)) / 2;
        let mut taken = Vec::with_capacity(want);
        let mut kept = Vec::with_capacity(st.items.len() - want);
        for item in st.items.drain(..) {
            if want > 0 && movable(&item) {
                want -= 1;
                taken.push(item);
            } else {
                kept.push(item);
            }
        }
        st.items = kept;
        taken
    }

    /// Blocks until an item arrives, or returns None when none is queued and no worker is busy
    /// (nothing can queue more). The caller counts as busy while it holds the item, until it
    /// asks again (`was_busy`) or says [`WorkStack::done`].
    pub fn pop_or_finish(&self, was_busy: bool) -> Option<T> {
        let mut st = self.state.lock().expect("work stack");
        if was_busy {
            st.busy -= 1;
        }
        loop {
            if let Some(item) = st.items.pop() {
                st.busy += 1;
                return Some(item);
            }
            if st.busy == 0 && !st.held_open {
                self.wake.notify_all();
                return None;
            }
            st = self.wake.wait(st).expect("work stack");
        }
    }

    /// A worker is done with the item it took (however it ended: call it from a guard's drop,
    /// so a panic does not leave the others waiting for ever).
    pub fn done(&self) {
        let mut st = self.state.lock().expect("work stack");
        st.busy -= 1;
        if st.busy == 0 && st.items.is_empty() {
            self.wake.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items pushed together come out first to last, on top of what was there; a worker that
    /// finds the stack empty with another busy waits, and both finish once that one is done
    /// and queued nothing.
    #[test]
    fn lifo_order_and_termination() {
        let stack = WorkStack::new(2);
        stack.push(0);
        stack.push_all(vec![1, 2, 3]);
        assert_eq!(stack.pop_or_finish(false), Some(1));
        assert_eq!(stack.try_pop(), Some(2));
        assert_eq!(stack.pop_or_finish(true), Some(3));
        assert_eq!(stack.take_oldest_half(|_| true), vec![0]);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| stack.pop_or_finish(false));
            std::thread::sleep(std::time::Duration::from_millis(20));
            stack.done();
            assert_eq!(waiter.join().unwrap(), None);
        });
        assert!(stack.is_idle());
    }
}
