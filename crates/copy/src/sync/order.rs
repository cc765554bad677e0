//! rsync's order for the lines of a parallel walk. rsync prints a directory's block (its own
//! line, its deletions, its entries) and then each subdirectory's, in order: a depth-first
//! walk. Here directories finish on any worker in any order, so each one's block waits in a
//! [`Block`] until every block before it is printed; the [`Printer`] follows the walk's order
//! and prints whatever is ready. The walk's shared stack hands out the most recently found
//! directories first, so the workers stay near the printed edge and few blocks wait.

use std::sync::{Arc, Mutex};

use super::output::Output;

/// One directory's lines and, once it is listed, its subdirectories' blocks in order.
#[derive(Debug, Default)]
pub(super) struct Block {
    done: Mutex<Option<Done>>,
}

#[derive(Debug)]
struct Done {
    lines: Vec<u8>,
    children: Vec<Arc<Block>>,
}

/// Prints blocks in the walk's order as they become ready.
#[derive(Debug)]
pub(super) struct Printer {
    /// The walk's position: each block on the way down with the index of its next child, and
    /// whether its own lines are out.
    cursor: Mutex<Vec<(Arc<Block>, usize, bool)>>,
}

impl Printer {
    /// A printer whose first block is `root`'s.
    pub fn new() -> (Printer, Arc<Block>) {
        let root = Arc::new(Block::default());
        let printer = Printer {
            cursor: Mutex::new(vec![(root.clone(), 0, false)]),
        };
        (printer, root)
    }

    /// `block` is done: its `lines`, then the blocks of its subdirectories (`children`, in
    /// order). Prints every block that is now next in order.
    pub fn finish(&self, out: &Output, block: &Block, lines: Vec<u8>, children: Vec<Arc<Block>>) {
        *block.done.lock().expect("block") = Some(Done { lines, children });
        self.advance(out, false);
    }

    /// At the end of the walk: what is still waiting is printed in order, and a block that
    /// never finished (the run was stopped) is passed over with everything below it.
    pub fn rest(&self, out: &Output) {
        self.advance(out, true);
    }

    fn advance(&self, out: &Output, to_the_end: bool) {
        let mut cursor = self.cursor.lock().expect("cursor");
        loop {
            let Some((block, next, printed)) = cursor.last_mut() else {
                return;
            };
            let mut done = block.done.lock().expect("block");
            let child = match done.as_mut() {
                None if !to_the_end => return,
                None => None,
                Some(done) => {
                    if !*printed {
                        out.print(&std::mem::take(&mut done.lines));
                        *printed = true;
                    }
                    let child = done.children.get(*next).cloned();
                    *next += 1;
                    child
                }
            };
            drop(done);
            match child {
                Some(child) => cursor.push((child, 0, false)),
                None => {
                    cursor.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks finished in any order come out depth first: a, a/x, a/x/p, a/y.
    #[test]
    fn blocks_come_out_in_the_walks_order() {
        let out = Output::new("t");
        let (printer, root) = Printer::new();
        let (x, y, p) = (
            Arc::<Block>::default(),
            Arc::<Block>::default(),
            Arc::<Block>::default(),
        );
        let text = |b: &Block| b.done.lock().unwrap().as_ref().map(|d| d.lines.clone());
        printer.finish(&out, &y, b"y\n".to_vec(), vec![]);
        printer.finish(&out, &p, b"p\n".to_vec(), vec![]);
        // Nothing is printed before the root: every block still holds its lines.
        assert_eq!(text(&y), Some(b"y\n".to_vec()));
        printer.finish(&out, &root, b"a\n".to_vec(), vec![x.clone(), y.clone()]);
        assert_eq!(text(&root), Some(vec![]));
        // y waits for x, which is not done.
        assert_eq!(text(&y), Some(b"y\n".to_vec()));
        printer.finish(&out, &x, b"x\n".to_vec(), vec![p.clone()]);
        assert_eq!(text(&p), Some(vec![]));
        assert_eq!(text(&y), Some(vec![]));
        assert!(printer.cursor.lock().unwrap().is_empty());
    }

    /// A block that never finishes holds back only what follows it, until the end.
    #[test]
    fn an_unfinished_block_is_passed_over_at_the_end() {
        let out = Output::new("t");
        let (printer, root) = Printer::new();
        let (x, y) = (Arc::<Block>::default(), Arc::<Block>::default());
        printer.finish(&out, &root, Vec::new(), vec![x.clone(), y.clone()]);
        printer.finish(&out, &y, b"y\n".to_vec(), vec![]);
        assert_eq!(y.done.lock().unwrap().as_ref().unwrap().lines, b"y\n");
        printer.rest(&out);
        assert!(y.done.lock().unwrap().as_ref().unwrap().lines.is_empty());
        assert!(printer.cursor.lock().unwrap().is_empty());
    }
}
