//! What happened to one entry, and the lines rsync prints for it: `-i`'s 11 characters
//! (`YXcstpoguax`, exactly as rsync writes them), `-v`'s names, and `--out-format`'s escapes.

use std::fmt::Write as _;

use crate::policy::sync::Changes;
use crate::sys::{Kind, Stat};

/// How an entry came to be as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Its data was written (`>`).
    Transfer,
    /// It was made or changed without moving data: a directory, a symlink, a device (`c`).
    LocalChange,
    /// It was hard-linked to an earlier name (`h`).
    HardLink,
    /// Only its attributes were looked at (`.`).
    Attributes,
    /// It was deleted (`*deleting`).
    Deleted,
}

/// One entry's event.
#[derive(Debug, Clone)]
pub struct Item {
    /// What was done.
    pub action: Action,
    /// Its kind.
    pub kind: Kind,
    /// A device (`D`) rather than a FIFO or socket (`S`).
    pub device: bool,
    /// Nothing was there before.
    pub new: bool,
    /// A symlink's target or a device number changed, or (`-c`) a file's content.
    pub changed: bool,
    /// A file's size differs.
    pub size: bool,
    /// Attributes that differ.
    pub attrs: Changes,
    /// Times are kept (`-t`): a time change shows as `t`, else as `T`.
    pub times_kept: bool,
    /// The path from the transfer root, `/` after a directory's.
    pub name: Vec<u8>,
    /// A symlink's target (`%L` shows ` -> TARGET`), or a hard link's first name (` => NAME`).
    pub link: Option<Vec<u8>>,
    /// The source's size.
    pub len: u64,
    /// It matched an entry of a `--*-dest` tree (rsync's "matched"): listed only when all
    /// are, unless an attribute differs.
    pub matched: bool,
    /// How long making it took (a transferred file's `--progress` line gives its rate).
    pub took: Option<std::time::Duration>,
}

impl Item {
    /// An event for the source entry `src` at `name` (with `/` added for a directory).
    pub fn new(action: Action, src: &Stat, name_of: &[u8]) -> Self {
        let mut name = Vec::with_capacity(name_of.len() + 1);
        name.extend_from_slice(name_of);
        let kind = src.kind();
        if kind == Kind::Dir && !name.ends_with(b"/") {
            name.push(b'/');
        }
        let fmt = src.mode & libc::S_IFMT;
        Item {
            action,
            kind,
            device: fmt == libc::S_IFCHR || fmt == libc::S_IFBLK,
            new: false,
            changed: false,
            size: false,
            attrs: Changes::default(),
            times_kept: true,
            name,
            link: None,
            len: src.size,
            matched: false,
            took: None,
        }
    }

    /// True when `-i` prints it without being asked twice (`-ii`): something was done or
    /// differs.
    pub fn significant(&self) -> bool {
        // A hard link to an earlier name (a symlink's `link` is its target instead).
        let linked_to =
            self.action == Action::HardLink && self.link.is_some() && self.kind != Kind::Symlink;
        if self.matched {
            return self.changed || self.size || !self.attrs.none();
        }
        self.new || self.changed || self.size || !self.attrs.none() || {
            match self.action {
                Action::Attributes => false,
                // A name that already is the link: nothing done.
                Action::HardLink => linked_to,
                Action::Transfer | Action::LocalChange | Action::Deleted => true,
            }
        }
    }

    /// rsync's `%i`: `YXcstpoguax`, or `*deleting  ` (11 characters).
    pub fn itemized(&self) -> String {
        if self.action == Action::Deleted {
            return "*deleting  ".to_string();
        }
        let y = match self.action {
            Action::Transfer => '>',
            Action::LocalChange => 'c',
            Action::HardLink => 'h',
            Action::Attributes | Action::Deleted => '.',
        };
        let x = match self.kind {
            Kind::File => 'f',
            Kind::Dir => 'd',
            Kind::Symlink => 'L',
            Kind::Special if self.device => 'D',
            Kind::Special => 'S',
        };
        let flag = |on: bool, c: char| if on { c } else { '.' };
        let time = if self.times_kept { 't' } else { 'T' };
        let mut rest = [
            flag(self.changed, 'c'),
            flag(self.size && self.kind != Kind::Symlink, 's'),
            flag(self.attrs.time, time),
            flag(self.attrs.perms, 'p'),
            flag(self.attrs.owner, 'o'),
            flag(self.attrs.group, 'g'),
            '.',
            flag(self.attrs.acl, 'a'),
            flag(self.attrs.xattr, 'x'),
        ];
        if self.new {
            rest = ['+'; 9];
        } else if y != '>' && rest.iter().all(|&c| c == '.') {
            rest = [' '; 9];
        }
        std::iter::once(y)
            .chain(std::iter::once(x))
            .chain(rest)
            .collect()
    }
}

/// The parts of an `--out-format` string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// `%X` with an optional width (`%-10n`).
    Escape {
        code: char,
        left: bool,
        width: usize,
    },
}

/// A parsed `--out-format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFormat {
    parts: Vec<Part>,
    /// It shows `%i`: every itemized event is printed, not only transfers.
    pub itemizes: bool,
}

/// The escapes ringio fills in.
const CODES: &str = "nfiLlbcoBMUGpt%";

impl OutFormat {
    /// Parses FORMAT; an unknown escape is an error naming it.
    pub fn parse(format: &str) -> Result<OutFormat, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = format.chars().peekable();
        let mut itemizes = false;
        while let Some(c) = chars.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            let left = chars.next_if_eq(&'-').is_some();
            let mut width = 0usize;
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                width = width
                    .saturating_mul(10)
                    .saturating_add(d as usize - '0' as usize);
            }
            // rsync's apostrophe (thousands separators) is accepted and shown plainly.
            while chars.next_if_eq(&'\'').is_some() {}
            // rsync prints an escape it does not know (and a '%' at the end) as it is
            // written; the daemon's %a %h %P %u among them, in a local transfer.
            let Some(code) = chars.next_if(|c| CODES.contains(*c)) else {
                text.push('%');
                if left {
                    text.push('-');
                }
                if width > 0 {
                    text.push_str(&width.to_string());
                }
                continue;
            };
            if code == '%' {
                text.push('%');
                continue;
            }
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            itemizes |= code == 'i';
            parts.push(Part::Escape { code, left, width });
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(OutFormat { parts, itemizes })
    }

    /// The line for `item` (without the newline). `src` is the source's stat for `%p`-like
    /// escapes of ownership; `when` the local time text for `%t`.
    pub fn render(&self, item: &Item, src: Option<&Stat>) -> Vec<u8> {
        let mut out = Vec::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                Part::Escape { code, left, width } => {
                    let value: Vec<u8> = match code {
                        'n' | 'f' => escaped(&item.name),
                        'i' => item.itemized().into_bytes(),
                        'L' => match (&item.link, item.action) {
                            (Some(t), _) if item.kind == Kind::Symlink => {
                                [b" -> ".as_slice(), &escaped(t)].concat()
                            }
                            (Some(t), Action::HardLink) => {
                                [b" => ".as_slice(), &escaped(t)].concat()
                            }
                            (Some(t), _) => [b" -> ".as_slice(), t].concat(),
                            (None, _) => Vec::new(),
                        },
                        'l' => item.len.to_string().into_bytes(),
                        'b' | 'c' => match item.action {
                            Action::Transfer => item.len.to_string().into_bytes(),
                            _ => b"0".to_vec(),
                        },
                        // A local rsync's lines come from its sending side.
                        'o' => match item.action {
                            Action::Deleted => b"del.".to_vec(),
                            _ => b"send".to_vec(),
                        },
                        'B' => {
                            let mode = src.map_or(0, |s| s.perm());
                            permission_string(mode).into_bytes()
                        }
                        'M' => src.map_or_else(Vec::new, |s| {
                            local_time(s.mtime.0, "%Y/%m/%d-%H:%M:%S").into_bytes()
                        }),
                        't' => {
                            let now = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_secs() as i64);
                            local_time(now, TIME).into_bytes()
                        }
                        'U' => src.map_or_else(Vec::new, |s| s.uid.to_string().into_bytes()),
                        'G' => src.map_or_else(Vec::new, |s| s.gid.to_string().into_bytes()),
                        'p' => std::process::id().to_string().into_bytes(),
                        _ => Vec::new(),
                    };
                    let pad = width.saturating_sub(value.len());
                    if *left {
                        out.extend_from_slice(&value);
                        out.extend(std::iter::repeat_n(b' ', pad));
                    } else {
                        out.extend(std::iter::repeat_n(b' ', pad));
                        out.extend_from_slice(&value);
                    }
                }
            }
        }
        out
    }
}

/// A name as rsync prints it: a control character, and a byte that does not print in the
/// locale (any non-ASCII byte but in a UTF-8 locale, where only invalid sequences), as
/// `\#ooo`, so that one entry is one line.
pub fn escaped(name: &[u8]) -> Vec<u8> {
    let utf8 = crate::quote::utf8_locale();
    let mut out = Vec::with_capacity(name.len());
    let mut rest = name;
    while !rest.is_empty() {
        // A valid multibyte character prints as it is in a UTF-8 locale.
        if utf8 && rest[0] >= 0x80 {
            let valid = match std::str::from_utf8(rest) {
                Ok(_) => rest.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                let take = std::str::from_utf8(&rest[..valid])
                    .ok()
                    .and_then(|t| t.chars().next())
                    .map_or(1, char::len_utf8);
                out.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                continue;
            }
        }
        let b = rest[0];
        if b < 0x20 || b == 0x7f || b >= 0x80 {
            out.extend_from_slice(format!("\\#{b:03o}").as_bytes());
        } else {
            out.push(b);
        }
        rest = &rest[1..];
    }
    out
}

/// `rwxr-xr-x` for the permission bits, as rsync's `%B`.
/// `ls -l`'s mode: the type's letter, then the permission bits with setuid, setgid and the
/// sticky bit (`drwxr-sr-x`, `-rwsr-xr-t`), as `--list-only` shows them.
pub fn mode_string(mode: u32) -> String {
    let kind = match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        libc::S_IFIFO => 'p',
        libc::S_IFSOCK => 's',
        _ => '-',
    };
    let mut s: Vec<char> = std::iter::once(kind)
        .chain(permission_string(mode).chars())
        .collect();
    for (bit, at, set, unset) in [
        (libc::S_ISUID, 3, 's', 'S'),
        (libc::S_ISGID, 6, 's', 'S'),
        (libc::S_ISVTX, 9, 't', 'T'),
    ] {
        if mode & bit != 0 {
            s[at] = if s[at] == 'x' { set } else { unset };
        }
    }
    s.into_iter().collect()
}

fn permission_string(mode: u32) -> String {
    let mut s = String::new();
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        let bit = 1 << (8 - i);
        let _ = write!(s, "{}", if mode & bit != 0 { c } else { '-' });
    }
    s
}

/// How rsync writes a time: `YYYY/MM/DD HH:MM:SS`.
pub(super) const TIME: &str = "%Y/%m/%d %H:%M:%S";

/// `secs` since the epoch in local time (the zone of TZ, else /etc/localtime, as the C library
/// reads them), as strftime writes it with `format`; empty out of the years -9999 to 9999.
pub(super) fn local_time(secs: i64, format: &str) -> String {
    let Ok(at) = jiff::Timestamp::from_second(secs) else {
        return String::new();
    };
    let local = at.to_zoned_datetime(jiff::tz::TimeZone::system());
    jiff::fmt::strtime::format(format, &local).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(kind: u32) -> Stat {
        Stat {
            mode: kind | 0o644,
            size: 5,
            uid: 0,
            gid: 0,
            nlink: 1,
            ino: 1,
            dev: 1,
            rdev: 0,
            blocks: 0,
            atime: (0, 0),
            mtime: (0, 0),
        }
    }

    #[test]
    fn itemized_strings_are_rsyncs() {
        let file = stat(libc::S_IFREG);
        let mut new = Item::new(Action::Transfer, &file, b"a");
        new.new = true;
        assert_eq!(new.itemized(), ">f+++++++++");
        let mut sent = Item::new(Action::Transfer, &file, b"a");
        sent.size = true;
        sent.attrs.time = true;
        assert_eq!(sent.itemized(), ">f.st......");
        let mut dir = Item::new(Action::LocalChange, &stat(libc::S_IFDIR), b"d");
        dir.new = true;
        assert_eq!(dir.itemized(), "cd+++++++++");
        assert_eq!(dir.name, b"d/");
        let mut touched = Item::new(Action::Attributes, &stat(libc::S_IFDIR), b"d");
        touched.attrs.time = true;
        assert_eq!(touched.itemized(), ".d..t......");
        let same = Item::new(Action::Attributes, &file, b"a");
        assert_eq!(same.itemized(), ".f         ");
        assert!(!same.significant());
        let mut link = Item::new(Action::LocalChange, &stat(libc::S_IFLNK), b"l");
        link.changed = true;
        link.attrs.time = true;
        assert_eq!(link.itemized(), "cLc.t......");
        let mut untimed = Item::new(Action::Transfer, &file, b"a");
        untimed.attrs.time = true;
        untimed.times_kept = false;
        assert_eq!(untimed.itemized(), ">f..T......");
        let fifo = Item::new(Action::Attributes, &stat(libc::S_IFIFO), b"p");
        assert_eq!(&fifo.itemized()[..2], ".S");
        let dev = Item::new(Action::Attributes, &stat(libc::S_IFCHR), b"c");
        assert_eq!(&dev.itemized()[..2], ".D");
        let gone = Item::new(Action::Deleted, &file, b"x");
        assert_eq!(gone.itemized(), "*deleting  ");
    }

    #[test]
    fn names_print_on_one_line() {
        assert_eq!(escaped(b"a\nb"), b"a\\#012b");
        assert_eq!(escaped(b"tab\there"), b"tab\\#011here");
        assert_eq!(escaped(b"plain name"), b"plain name");
    }

    #[test]
    fn out_format_escapes_and_widths() {
        let file = stat(libc::S_IFREG);
        let mut item = Item::new(Action::Transfer, &file, b"dir/a");
        item.new = true;
        let f = OutFormat::parse("%i %n%L").unwrap();
        assert!(f.itemizes);
        assert_eq!(f.render(&item, Some(&file)), b">f+++++++++ dir/a");
        let f = OutFormat::parse("[%-6n] %l %B 100%%").unwrap();
        assert!(!f.itemizes);
        assert_eq!(f.render(&item, Some(&file)), b"[dir/a ] 5 rw-r--r-- 100%");
        let mut link = Item::new(Action::LocalChange, &stat(libc::S_IFLNK), b"l");
        link.link = Some(b"target".to_vec());
        let f = OutFormat::parse("%n%L").unwrap();
        assert_eq!(f.render(&link, None), b"l -> target");
        // rsync prints what it does not know as written.
        let f = OutFormat::parse("%q %a 5%").unwrap();
        assert_eq!(f.parts, vec![Part::Text("%q %a 5%".into())]);
    }
}
