//! A directory pair's source listing, compact: every name in one arena, each entry its stat
//! and where its names are. What a walk holds for a directory of N entries is about 150 bytes
//! an entry (rsync holds 170); an entry's own [`SrcEntry`] (its names and path allocated) is
//! made only while it is decided and carried out.

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use super::pair::{rsync_order, SrcEntry};
use crate::sys::{self, Kind, Stat};

/// An entry's stat before it is read.
const NO_STAT: Stat = Stat {
    mode: 0,
    size: 0,
    uid: 0,
    gid: 0,
    nlink: 0,
    ino: 0,
    dev: 0,
    rdev: 0,
    blocks: 0,
    atime: (0, 0),
    mtime: (0, 0),
};

/// No later source merges into the entry.
const NONE: u32 = u32::MAX;

/// One listed entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listed {
    pub stat: Stat,
    /// Where its name (NUL-terminated) starts in the arena and how long it is, and so for its
    /// name at the destination.
    name: usize,
    dst: usize,
    name_len: u32,
    dst_len: u32,
    /// The source (layer) it was listed in; [`Listed::DROPPED`] once left out.
    layer: u32,
    /// The later sources that merge into it (an index into [`Listing::more`]), or `NONE`.
    more: u32,
}

impl Listed {
    /// Marks an entry left out of the listing (removed by [`Listing::drop_marked`]).
    const DROPPED: u32 = u32::MAX;

    pub fn layer(&self) -> usize {
        self.layer as usize
    }

    pub fn drop_it(&mut self) {
        self.layer = Self::DROPPED;
    }

    pub fn is_dir(&self) -> bool {
        self.stat.kind() == Kind::Dir
    }
}

/// The entries of a pair's sources, with their names.
#[derive(Debug, Default)]
pub(super) struct Listing {
    names: Vec<u8>,
    pub entries: Vec<Listed>,
    more: Vec<Vec<usize>>,
    /// Some entry has another name at the destination (a single file synced to a new name).
    renamed: bool,
}

impl Listing {
    /// Adds the entry `name` of source `layer` (named `dst` at the destination when that
    /// differs), not yet stat'ed.
    pub fn push(&mut self, layer: usize, name: &CStr, dst: Option<&CStr>) {
        let at = self.add_name(name);
        let len = |n: &CStr| u32::try_from(n.to_bytes().len()).expect("a name under 4 GiB");
        let (dst, dst_len) = match dst.filter(|d| *d != name) {
            Some(dst) => {
                self.renamed = true;
                (self.add_name(dst), len(dst))
            }
            None => (at, len(name)),
        };
        self.entries.push(Listed {
            stat: NO_STAT,
            name: at,
            dst,
            name_len: len(name),
            dst_len,
            layer: u32::try_from(layer).expect("fewer than 2^32 sources"),
            more: NONE,
        });
    }

    fn add_name(&mut self, name: &CStr) -> usize {
        let at = self.names.len();
        self.names.extend_from_slice(name.to_bytes_with_nul());
        at
    }

    /// An entry's name in its source.
    pub fn name(&self, l: &Listed) -> &CStr {
        name_at(&self.names, l.name, l.name_len)
    }

    /// An entry's name at the destination.
    pub fn dst_name(&self, l: &Listed) -> &CStr {
        name_at(&self.names, l.dst, l.dst_len)
    }

    fn bytes<'a>(names: &'a [u8], l: &Listed) -> &'a [u8] {
        &names[l.name..l.name + l.name_len as usize]
    }

    fn dst_bytes<'a>(names: &'a [u8], l: &Listed) -> &'a [u8] {
        &names[l.dst..l.dst + l.dst_len as usize]
    }

    /// Source `layer` holds the directory `at` too: its tree merges into it.
    pub fn merge(&mut self, at: usize, layer: usize) {
        let l = &mut self.entries[at];
        if l.more == NONE {
            l.more = u32::try_from(self.more.len()).expect("fewer than 2^32 merges");
            self.more.push(Vec::new());
        }
        self.more[l.more as usize].push(layer);
    }

    /// Removes the entries marked [`Listed::drop_it`], keeping the others' order.
    pub fn drop_marked(&mut self) {
        self.entries.retain(|l| l.layer != Listed::DROPPED);
    }

    /// Sorts the entries in rsync's order, in place.
    pub fn sort(&mut self) {
        let names = &self.names;
        self.entries.sort_unstable_by(|a, b| {
            rsync_order(
                (a.is_dir(), Self::bytes(names, a)),
                (b.is_dir(), Self::bytes(names, b)),
            )
        });
    }

    /// Whether some entry of the sorted listing has the destination name `name`: found in the
    /// files by name and in the directories by rsync's order; where some entry is renamed, in
    /// `index`, the entries' positions sorted by destination name ([`Listing::by_dst_name`]).
    pub fn holds(&self, index: Option<&[u32]>, name: &[u8]) -> bool {
        let names = &self.names;
        if let Some(index) = index {
            let dst = |i: u32| Self::dst_bytes(names, &self.entries[i as usize]);
            return index.binary_search_by(|&i| dst(i).cmp(name)).is_ok();
        }
        let (files, dirs) = self
            .entries
            .split_at(self.entries.partition_point(|l| !l.is_dir()));
        files
            .binary_search_by(|l| Self::bytes(names, l).cmp(name))
            .is_ok()
            || dirs
                .binary_search_by(|l| rsync_order((true, Self::bytes(names, l)), (true, name)))
                .is_ok()
    }

    /// What [`Listing::holds`] looks names up in: the entries' positions sorted by destination
    /// name where some entry is renamed (`None`: the listing itself, sorted, serves).
    pub fn by_dst_name(&self) -> Option<Vec<u32>> {
        if !self.renamed {
            return None;
        }
        let names = &self.names;
        let mut index: Vec<u32> = (0..self.entries.len() as u32).collect();
        index.sort_unstable_by(|&a, &b| {
            let dst = |i: u32| Self::dst_bytes(names, &self.entries[i as usize]);
            dst(a).cmp(dst(b))
        });
        Some(index)
    }

    /// The entry `l` of the pair whose path from the transfer root is `dir_rel`, made whole.
    pub fn entry(&self, dir_rel: &[u8], l: &Listed) -> SrcEntry {
        let mut e = SrcEntry::default();
        self.entry_into(dir_rel, l, &mut e);
        e
    }

    /// [`Listing::entry`] made in `e`, whose buffers are used again: a walk makes one entry
    /// after another, and allocates for a name only when it is longer than any before it.
    pub fn entry_into(&self, dir_rel: &[u8], l: &Listed, e: &mut SrcEntry) {
        let name = self.name(l);
        e.layer = l.layer();
        e.more.clear();
        if l.more != NONE {
            e.more.extend_from_slice(&self.more[l.more as usize]);
        }
        e.name.set(name);
        e.dst_name.set(self.dst_name(l));
        e.stat = l.stat;
        e.rel.clear();
        if !dir_rel.is_empty() {
            e.rel.extend_from_slice(dir_rel);
            e.rel.push(b'/');
        }
        e.rel.extend_from_slice(name.to_bytes());
    }

    /// The statx of the entries from `start` on, all of them in `dir` (`threads` at once
    /// where there are many: see `walk::stat_all`); the failures, by position.
    pub fn stat_from(
        &mut self,
        start: usize,
        stat: impl Fn(&CStr) -> io::Result<Stat> + Sync,
        threads: usize,
        batch: usize,
    ) -> Vec<(usize, io::Error)> {
        let names = &self.names;
        let part_stat = |part: &mut [Listed], base: usize| {
            let mut failed = Vec::new();
            for (i, l) in part.iter_mut().enumerate() {
                match stat(name_at(names, l.name, l.name_len)) {
                    Ok(s) => l.stat = s,
                    Err(e) => failed.push((base + i, e)),
                }
            }
            failed
        };
        let entries = &mut self.entries[start..];
        if threads < 2 || entries.len() <= 2 * batch {
            return part_stat(entries, start);
        }
        let chunk = entries.len().div_ceil(threads).max(batch);
        let parts: Vec<(usize, Mutex<&mut [Listed]>)> = entries
            .chunks_mut(chunk)
            .enumerate()
            .map(|(k, part)| (start + k * chunk, Mutex::new(part)))
            .collect();
        let part_stat = &part_stat;
        let run = |(base, part): &(usize, Mutex<&mut [Listed]>)| {
            part_stat(&mut part.lock().expect("a stat part"), *base)
        };
        let run = &run;
        std::thread::scope(|s| {
            // A part whose thread cannot be had (a thread limit) is stat'ed here instead.
            let others: Vec<_> = parts[1..]
                .iter()
                .map(|p| {
                    let thread = std::thread::Builder::new().spawn_scoped(s, move || run(p));
                    (thread.ok(), p)
                })
                .collect();
            let mut failed = run(&parts[0]);
            for (thread, p) in others {
                match thread {
                    Some(t) => failed.extend(t.join().expect("a stat thread does not panic")),
                    None => failed.extend(run(p)),
                }
            }
            failed
        })
    }
}

/// The name of `len` bytes at `at` in the arena (each name is followed by its NUL).
fn name_at(names: &[u8], at: usize, len: u32) -> &CStr {
    let with_nul = &names[at..=at + len as usize];
    // SAFETY: `add_name` wrote a CStr's bytes there: no NUL but the last, at `at + len`.
    unsafe { CStr::from_bytes_with_nul_unchecked(with_nul) }
}

/// The statx of `name` in `dir`, for [`Listing::stat_from`].
pub(super) fn statx_in(
    dir: BorrowedFd<'_>,
    follow: bool,
) -> impl Fn(&CStr) -> io::Result<Stat> + Sync + '_ {
    move |name| sys::statx_at(dir, name, follow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(kind: u32) -> Stat {
        Stat {
            mode: kind,
            ..NO_STAT
        }
    }

    #[test]
    fn a_listing_sorts_in_rsyncs_order_and_finds_destination_names() {
        let mut l = Listing::default();
        for (name, kind) in [
            (c"b", libc::S_IFREG),
            (c"14", libc::S_IFDIR),
            (c"14.0.6", libc::S_IFDIR),
            (c"a", libc::S_IFREG),
        ] {
            l.push(0, name, None);
            l.entries.last_mut().unwrap().stat = stat(kind);
        }
        l.push(1, c"single", Some(c"renamed"));
        l.entries.last_mut().unwrap().stat = stat(libc::S_IFREG);
        l.entries[0].drop_it();
        l.drop_marked();
        l.sort();
        let names: Vec<_> = l.entries.iter().map(|e| l.name(e).to_owned()).collect();
        assert_eq!(
            names,
            [c"a", c"single", c"14.0.6", c"14"].map(CStr::to_owned)
        );
        let index = l.by_dst_name();
        let holds = |name: &[u8]| l.holds(index.as_deref(), name);
        assert!(holds(b"renamed") && holds(b"14") && holds(b"14.0.6") && holds(b"a"));
        assert!(!holds(b"single") && !holds(b"b") && !holds(b"14.0"));
        let mut plain = Listing::default();
        for (name, kind) in [
            (c"x", libc::S_IFDIR),
            (c"y", libc::S_IFREG),
            (c"x.y", libc::S_IFDIR),
        ] {
            plain.push(0, name, None);
            plain.entries.last_mut().unwrap().stat = stat(kind);
        }
        plain.sort();
        assert!(plain.by_dst_name().is_none());
        for (name, held) in [
            (&b"x"[..], true),
            (b"y", true),
            (b"x.y", true),
            (b"z", false),
        ] {
            assert_eq!(plain.holds(None, name), held, "{name:?}");
        }
        l.merge(3, 1);
        let e = l.entry(b"dir", &l.entries[3]);
        assert_eq!(
            (e.rel.as_slice(), e.more.as_slice()),
            (&b"dir/14"[..], &[1][..])
        );
    }
}
