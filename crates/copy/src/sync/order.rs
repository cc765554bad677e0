//! rsync's order for the lines of a parallel walk, and for its deletions. rsync prints a
//! directory's block (its own line, its deletions, its entries) and then each subdirectory's,
//! in order: a depth-first walk. Here directories finish on any worker in any order, so each
//! one's block waits in a [`Block`] until every block before it is printed; the [`Printer`]
//! follows the walk's order and prints whatever is ready. The walk's shared stack hands out
//! the most recently found directories first, so the workers stay near the printed edge and
//! few blocks wait.
//!
//! A second cursor, the gate, gates deletion. rsync deletes nothing once reading the source
//! failed ("IO error encountered -- skipping file deletion"), and its generator meets
//! directories in this order, so a directory's deletions are made only when every directory
//! before it in the order has been walked (listed, its entries read) and none of them, nor
//! it, met a source error. The gate passes every finished block in order; a directory listed
//! while the gate is on it deletes at once; one listed earlier leaves its deletions in its
//! block ([`Printer::claim`]), and they are made when the gate reaches it, handed to the
//! workers (outside the lock, side by side). The printing cursor follows, printing a block once
//! its deletions are made. What waits is what the printer keeps anyway: a block per
//! directory finished out of turn, which the LIFO stack keeps few.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::output::Output;

/// A directory's deletions, made at its turn: called with whether they may be made (no
/// source error before it or in it) and the buffer of the worker that makes them (to list a
/// directory it removes), it returns their lines.
pub(super) type Deferred<'r> =
    Box<dyn for<'b> FnOnce(bool, &'b mut [MaybeUninit<u8>]) -> Vec<u8> + Send + 'r>;

/// One directory's lines and, once it is listed, its subdirectories' blocks in order.
#[derive(Default)]
pub(super) struct Block<'r> {
    done: Mutex<Option<Done<'r>>>,
    /// The directory's path from the transfer root.
    rel: Vec<u8>,
    /// Reading the source failed in this directory (opening it, listing it, an entry).
    source_error: AtomicBool,
    /// Its deletions, waiting for their turn, being made, then their lines; with where those
    /// go in its block (after its own line).
    deletion: Mutex<Option<(usize, Deletion<'r>)>>,
}

enum Deletion<'r> {
    /// With whether there is nothing to delete (then it is made only to say that deletion
    /// stopped, should it stop there).
    Waiting(Deferred<'r>, bool),
    Making,
    Made(Vec<u8>),
}

struct Done<'r> {
    lines: Vec<u8>,
    children: Vec<Arc<Block<'r>>>,
}

/// A walk over the blocks in order: each block on the way down with the index of its next
/// child, and whether it was passed (its lines printed, or its turn come and gone).
type Stack<'r> = Vec<(Arc<Block<'r>>, usize, bool)>;

/// The two cursors: `gate` passes every block finished, in order (a block it reaches has its
/// turn to delete); `print` follows it, printing each block once its deletions are made.
struct Cursor<'r> {
    gate: Stack<'r>,
    print: Stack<'r>,
    failed: bool,
    first_failure: Option<Vec<u8>>,
}

/// Deletions whose turn came, to be made outside the lock (by any worker): the block, whether
/// they may be made, and they. Once made, [`Printer::made`] is told.
pub(super) type Due<'r> = Vec<(Arc<Block<'r>>, bool, Deferred<'r>)>;

/// Prints blocks in the walk's order as they become ready, and makes each directory's
/// deletions at its turn.
pub(super) struct Printer<'r> {
    cursor: Mutex<Cursor<'r>>,
}

impl<'r> Block<'r> {
    /// The block of the directory at `rel`.
    pub fn at(rel: Vec<u8>) -> Arc<Block<'r>> {
        Arc::new(Block {
            rel,
            ..Block::default()
        })
    }

    /// Reading the source failed here: no deletion from here on in the walk's order.
    pub fn source_error(&self) {
        self.source_error.store(true, Ordering::Relaxed);
    }
}

impl<'r> Printer<'r> {
    /// A printer whose first block is `root`'s.
    pub fn new() -> (Printer<'r>, Arc<Block<'r>>) {
        let root = Block::at(Vec::new());
        let printer = Printer {
            cursor: Mutex::new(Cursor {
                gate: vec![(root.clone(), 0, false)],
                print: vec![(root.clone(), 0, false)],
                failed: false,
                first_failure: None,
            }),
        };
        (printer, root)
    }

    /// `block` is done: its `lines`, then the blocks of its subdirectories (`children`, in
    /// order). Prints every block that is now next in order, and returns the deletions whose
    /// turn came.
    #[must_use]
    pub fn finish(
        &self,
        out: &Output,
        block: &Block<'r>,
        lines: Vec<u8>,
        children: Vec<Arc<Block<'r>>>,
    ) -> Due<'r> {
        *block.done.lock().expect("block") = Some(Done { lines, children });
        self.advance(out, false)
    }

    /// `block`'s deletions, handed out by [`Printer::finish`], were made (their `lines`):
    /// prints what is now ready, and returns the deletions whose turn came.
    #[must_use]
    pub fn made(&self, out: &Output, block: &Block<'r>, lines: Vec<u8>) -> Due<'r> {
        if let Some((_, state)) = block.deletion.lock().expect("deletion").as_mut() {
            *state = Deletion::Made(lines);
        }
        self.advance(out, false)
    }

    /// `block`'s deletions (their lines at `at` in its block): handed back with whether they
    /// may be made when it is the block's turn now (so they are made at once, before its
    /// entries), else kept until its turn comes. `idle`: there is nothing to delete, so at
    /// its turn the deletion is handed out only should deletion stop there.
    pub fn claim(
        &self,
        block: &Arc<Block<'r>>,
        at: usize,
        deletion: Deferred<'r>,
        idle: bool,
    ) -> Option<(Deferred<'r>, bool)> {
        let cursor = self.cursor.lock().expect("cursor");
        match cursor.gate.last() {
            Some((top, _, false)) if Arc::ptr_eq(top, block) => {
                let clean = !cursor.failed && !block.source_error.load(Ordering::Relaxed);
                Some((deletion, clean))
            }
            _ => {
                let waiting = Deletion::Waiting(deletion, idle);
                *block.deletion.lock().expect("deletion") = Some((at, waiting));
                None
            }
        }
    }

    /// The path of the first directory, in the walk's order, where reading the source failed.
    pub fn first_failure(&self) -> Option<Vec<u8>> {
        self.cursor.lock().expect("cursor").first_failure.clone()
    }

    /// At the end of the walk: what is still waiting is printed in order, and a block that
    /// never finished (the run was stopped) is passed over with everything below it (and
    /// deletions waiting there are not made).
    pub fn rest(&self, out: &Output, buf: &mut [MaybeUninit<u8>]) {
        let mut due = self.advance(out, true);
        while let Some((block, clean, delete)) = due.pop() {
            let lines = delete(clean, buf);
            due.extend(self.made(out, &block, lines));
        }
        self.advance(out, true);
    }

    /// Moves both cursors as far as they go; returns the deletions whose turn came (to be
    /// made outside the lock, so that the workers make them side by side).
    fn advance(&self, out: &Output, to_the_end: bool) -> Due<'r> {
        let mut cursor = self.cursor.lock().expect("cursor");
        let due = cursor.open_gate(to_the_end);
        cursor.print(out, to_the_end);
        due
    }
}

impl<'r> Cursor<'r> {
    /// Moves the gate over every finished block; each block it reaches has its turn: its
    /// waiting deletions are returned, to be made.
    fn open_gate(&mut self, to_the_end: bool) -> Due<'r> {
        let mut due = Vec::new();
        loop {
            let Some((block, next, passed)) = self.gate.last_mut() else {
                return due;
            };
            let done = block.done.lock().expect("block");
            if !*passed {
                let mut deletion = block.deletion.lock().expect("deletion");
                if done.is_none() && to_the_end {
                    // Never finished (the run was stopped): what waits here is not made.
                    deletion.take();
                } else if let Some((_, state @ Deletion::Waiting(..))) = deletion.as_mut() {
                    let clean = !self.failed && !block.source_error.load(Ordering::Relaxed);
                    match std::mem::replace(state, Deletion::Making) {
                        Deletion::Waiting(_, true) if clean => *state = Deletion::Made(Vec::new()),
                        Deletion::Waiting(delete, _) => due.push((block.clone(), clean, delete)),
                        _ => unreachable!("matched above"),
                    }
                }
            }
            let child = match done.as_ref() {
                None if !to_the_end => return due,
                None => None,
                Some(d) => {
                    if !*passed {
                        *passed = true;
                        if block.source_error.load(Ordering::Relaxed) && !self.failed {
                            self.failed = true;
                            self.first_failure = Some(block.rel.clone());
                        }
                    }
                    let child = d.children.get(*next).cloned();
                    *next += 1;
                    child
                }
            };
            drop(done);
            match child {
                Some(child) => self.gate.push((child, 0, false)),
                None => {
                    self.gate.pop();
                }
            }
        }
    }

    /// Prints every block that is next in order, finished and with its deletions made.
    fn print(&mut self, out: &Output, to_the_end: bool) {
        loop {
            let Some((block, next, printed)) = self.print.last_mut() else {
                return;
            };
            let mut done = block.done.lock().expect("block");
            let making = matches!(
                block.deletion.lock().expect("deletion").as_ref(),
                Some((_, Deletion::Making | Deletion::Waiting(..)))
            );
            let child = match done.as_mut() {
                None if !to_the_end => return,
                Some(_) if making && !*printed && !to_the_end => return,
                None => None,
                Some(done) => {
                    if !*printed {
                        let mut lines = std::mem::take(&mut done.lines);
                        if let Some((at, Deletion::Made(deleted))) =
                            block.deletion.lock().expect("deletion").take()
                        {
                            let at = at.min(lines.len());
                            lines.splice(at..at, deleted);
                        }
                        out.print(&lines);
                        *printed = true;
                    }
                    let child = done.children.get(*next).cloned();
                    *next += 1;
                    child
                }
            };
            drop(done);
            match child {
                Some(child) => self.print.push((child, 0, false)),
                None => {
                    self.print.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes the deletions handed out, and those their making hands out.
    fn settle<'r>(printer: &Printer<'r>, out: &Output, mut due: Due<'r>) {
        while let Some((block, clean, delete)) = due.pop() {
            let lines = delete(clean, &mut []);
            due.extend(printer.made(out, &block, lines));
        }
    }

    /// Blocks finished in any order come out depth first: a, a/x, a/x/p, a/y.
    #[test]
    fn blocks_come_out_in_the_walks_order() {
        let out = Output::new("t");
        let (printer, root) = Printer::new();
        let (x, y, p) = (
            Arc::<Block<'_>>::default(),
            Arc::<Block<'_>>::default(),
            Arc::<Block<'_>>::default(),
        );
        let text = |b: &Block<'_>| b.done.lock().unwrap().as_ref().map(|d| d.lines.clone());
        settle(
            &printer,
            &out,
            printer.finish(&out, &y, b"y\n".to_vec(), vec![]),
        );
        settle(
            &printer,
            &out,
            printer.finish(&out, &p, b"p\n".to_vec(), vec![]),
        );
        // Nothing is printed before the root: every block still holds its lines.
        assert_eq!(text(&y), Some(b"y\n".to_vec()));
        settle(
            &printer,
            &out,
            printer.finish(&out, &root, b"a\n".to_vec(), vec![x.clone(), y.clone()]),
        );
        assert_eq!(text(&root), Some(vec![]));
        // y waits for x, which is not done.
        assert_eq!(text(&y), Some(b"y\n".to_vec()));
        settle(
            &printer,
            &out,
            printer.finish(&out, &x, b"x\n".to_vec(), vec![p.clone()]),
        );
        assert_eq!(text(&p), Some(vec![]));
        assert_eq!(text(&y), Some(vec![]));
        assert!(printer.cursor.lock().unwrap().print.is_empty());
    }

    /// A block that never finishes holds back only what follows it, until the end.
    #[test]
    fn an_unfinished_block_is_passed_over_at_the_end() {
        let out = Output::new("t");
        let (printer, root) = Printer::new();
        let (x, y) = (Arc::<Block<'_>>::default(), Arc::<Block<'_>>::default());
        settle(
            &printer,
            &out,
            printer.finish(&out, &root, Vec::new(), vec![x.clone(), y.clone()]),
        );
        settle(
            &printer,
            &out,
            printer.finish(&out, &y, b"y\n".to_vec(), vec![]),
        );
        assert_eq!(y.done.lock().unwrap().as_ref().unwrap().lines, b"y\n");
        printer.rest(&out, &mut []);
        assert!(y.done.lock().unwrap().as_ref().unwrap().lines.is_empty());
        assert!(printer.cursor.lock().unwrap().print.is_empty());
    }

    /// Deletions claimed out of turn wait for it, and none is made after a source error
    /// in an earlier block (nor in the block itself): root, x (failed), x/p, y.
    #[test]
    fn deletions_wait_for_their_turn_and_stop_after_an_error() {
        use std::sync::atomic::AtomicUsize;
        let out = Output::new("t");
        let (printer, root) = Printer::new();
        let (x, y, p) = (
            Block::at(b"x".to_vec()),
            Block::at(b"y".to_vec()),
            Block::at(b"x/p".to_vec()),
        );
        let made = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let deletion = |name: &'static str| -> Deferred<'static> {
            let (made, calls) = (made.clone(), calls.clone());
            Box::new(move |clean, _| {
                calls.fetch_add(1, Ordering::Relaxed);
                if clean {
                    made.lock().unwrap().push(name);
                }
                Vec::new()
            })
        };
        // The root's turn is now: handed back to be made at once.
        let (now, clean) = printer
            .claim(&root, 0, deletion("root"), false)
            .expect("its turn");
        assert!(clean);
        now(clean, &mut []);
        settle(
            &printer,
            &out,
            printer.finish(&out, &root, Vec::new(), vec![x.clone(), y.clone()]),
        );
        // y is listed before x: its deletions wait.
        assert!(printer.claim(&y, 0, deletion("y"), false).is_none());
        settle(&printer, &out, printer.finish(&out, &y, Vec::new(), vec![]));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        x.source_error();
        assert!(printer
            .claim(&x, 0, deletion("x"), false)
            .is_some_and(|(_, clean)| !clean));
        settle(
            &printer,
            &out,
            printer.finish(&out, &x, Vec::new(), vec![p.clone()]),
        );
        assert!(printer
            .claim(&p, 0, deletion("p"), false)
            .is_some_and(|(_, clean)| !clean));
        settle(&printer, &out, printer.finish(&out, &p, Vec::new(), vec![]));
        // y's turn came after x's error: called, but not allowed.
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(*made.lock().unwrap(), vec!["root"]);
        assert_eq!(printer.first_failure(), Some(b"x".to_vec()));
    }
}
