//! One directory entry on its way ([`EntryJob`]): what every step of the shared per-entry path
//! takes.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use crate::node::DirHold;
use crate::sys::Stat;

/// One entry on its way from the walk to its copy: where it is, its names on both sides, what
/// the source is, and how it is reached. Every step below the dispatch (the rules for an
/// existing destination, open, copy, chunk, finish) takes it.
pub(crate) struct EntryJob<'j, 'a> {
    /// The directory pair it is in (held by the caller).
    pub dir: &'j DirHold<'a>,
    /// Its name in the source directory.
    pub src: CString,
    /// Its name in the destination directory (a command-line operand may take another).
    pub dst: CString,
    /// The source's statx, following a symlink where `follow`.
    pub stat: Stat,
    /// Whether a symlink at the source name is followed.
    pub follow: bool,
    /// The source, when it was opened already and stated through this descriptor (the
    /// in-place path opens first, so the file it hands on needs no second open).
    pub opened: Option<OwnedFd>,
}

impl<'j, 'a> EntryJob<'j, 'a> {
    /// The entry `name` of `dir`, the same name on both sides, stated (not followed) as `stat`.
    pub fn new(dir: &'j DirHold<'a>, name: CString, stat: Stat) -> Self {
        EntryJob {
            dir,
            src: name.clone(),
            dst: name,
            stat,
            follow: false,
            opened: None,
        }
    }

    /// The source as the user would name it (built only for messages).
    pub fn src_path(&self) -> PathBuf {
        self.dir.src_path(Some(&self.src))
    }

    /// The destination as the user would name it (built only for messages).
    pub fn dst_path(&self) -> PathBuf {
        self.dir.dst_path(Some(&self.dst))
    }
}
