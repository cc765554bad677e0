//! Building a rule list from rule strings and files: rsync's `parse_filter_str` and
//! `parse_filter_file`, with `merge` files read in place, `dir-merge` rules recorded, `e`'s
//! self-exclude, and `!` clearing. The same builder serves the global list (command line, merge
//! files relative to the working directory) and a directory's per-directory files (read relative
//! to the directory's descriptor).

use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::rule::{basename, fl, is_space, parse_token, xf, Base, Kind, MergeSpec, Origin, Rule};
use super::{FilterError, FilterRules};

/// rsync's limit on merge files merging merge files.
const MAX_MERGE_DEPTH: usize = 32;

/// Where the builder reads `merge` files and how it anchors rules.
pub(crate) struct Env<'a> {
    /// The run's rules: the CVS list is built through them, once.
    pub shared: &'a FilterRules,
    /// Per-directory files: a leading "/" anchors here.
    pub base: Option<Arc<Base>>,
    /// Per-directory files: `merge` files are opened relative to this directory.
    pub dir: Option<BorrowedFd<'a>>,
    /// Set while reading a file in a parent of the transfer: relative dir-merge names are
    /// resolved in this absolute directory.
    pub origin: Option<Arc<[u8]>>,
    /// Basenames of the dir-merge files already active: a rule naming one again is dropped.
    pub taken: Vec<Box<[u8]>>,
    pub depth: usize,
    pub from0: bool,
}

/// A list under construction: the rules after the last `!`, and whether a `!` was seen (which
/// also drops whatever the list inherited).
#[derive(Default)]
pub(crate) struct ListBuilder {
    pub rules: Vec<Rule>,
    pub cleared: bool,
}

impl ListBuilder {
    /// rsync's `parse_filter_str`: every rule in `text` under `template`.
    pub fn parse_str(
        &mut self,
        env: &mut Env<'_>,
        mut text: &[u8],
        template: u32,
        xflags: u32,
        origin: &Origin,
    ) -> Result<(), FilterError> {
        while let Some(tok) = parse_token(&mut text, template, xflags, origin)? {
            let flags = tok.flags;
            let mut pat = tok.pat;
            if flags & fl::CLEAR_LIST != 0 {
                self.rules.clear();
                self.cleared = true;
                continue;
            }
            if flags & fl::MERGE_FILE != 0 {
                if pat.is_empty() {
                    pat = b".cvsignore";
                }
                if flags & fl::EXCLUDE_SELF != 0 {
                    self.rules
                        .push(Rule::new(basename(pat), 0, None, Kind::Pattern));
                }
                let flags = flags & !fl::EXCLUDE_SELF;
                if flags & fl::PERDIR_MERGE != 0 {
                    let name = basename(pat);
                    let dup = env.taken.iter().any(|t| **t == *name)
                        || self.rules.iter().any(|r| match &r.kind {
                            Kind::DirMerge(m) => m.basename() == name,
                            _ => false,
                        });
                    if !dup {
                        let spec = MergeSpec {
                            name: pat.into(),
                            flags,
                            origin: env.origin.clone(),
                        };
                        let kind = Kind::DirMerge(Arc::new(spec));
                        self.rules.push(Rule::new(pat, flags, None, kind));
                    }
                } else {
                    self.merge_file(env, pat, flags)?;
                }
                continue;
            }
            let kind = if flags & fl::CVS_IGNORE != 0 {
                env.shared.cvs_list(flags);
                Kind::Cvs
            } else {
                Kind::Pattern
            };
            let base = if xflags & xf::ANCHORED2ABS != 0 {
                env.base.clone()
            } else {
                None
            };
            self.rules.push(Rule::new(pat, flags, base, kind));
        }
        Ok(())
    }

    /// A `merge` (`.`) rule: the file is read now, its rules take the merge rule's place.
    fn merge_file(
        &mut self,
        env: &mut Env<'_>,
        name: &[u8],
        flags: u32,
    ) -> Result<(), FilterError> {
        let shown = String::from_utf8_lossy(name).into_owned();
        let open_err = |source| FilterError::Open {
            kind: if flags & fl::INCLUDE != 0 {
                "include"
            } else {
                "exclude"
            },
            path: shown.clone(),
            source,
        };
        let data = match env.dir {
            Some(dir) if name != b"-" => read_at(dir, name).map_err(open_err)?,
            _ => read_path(Path::new(std::ffi::OsStr::from_bytes(name))).map_err(open_err)?,
        };
        // rsync reads a merged file's rules without per-directory anchoring, wherever the
        // merge rule was: a leading "/" in them anchors at the transfer root.
        self.parse_file(env, &data, &shown, flags, 0)
    }

    /// rsync's `parse_filter_file` on a file's contents already read: lines (or NUL-separated
    /// records, or words), comments and empty lines skipped.
    pub fn parse_file(
        &mut self,
        env: &mut Env<'_>,
        data: &[u8],
        path: &str,
        template: u32,
        xflags: u32,
    ) -> Result<(), FilterError> {
        if env.depth >= MAX_MERGE_DEPTH {
            return Err(FilterError::TooDeep { path: path.into() });
        }
        env.depth += 1;
        let word_split = template & fl::WORD_SPLIT != 0;
        let result = (|| {
            for (n, item) in records(data, env.from0, word_split).enumerate() {
                if item.is_empty() || (!word_split && matches!(item[0], b';' | b'#')) {
                    continue;
                }
                let origin = Origin::File {
                    path: path.into(),
                    line: (!word_split).then_some(n + 1),
                };
                self.parse_str(env, item, template, xflags, &origin)?;
            }
            Ok(())
        })();
        env.depth -= 1;
        result
    }
}

/// A file's records as rsync reads them: words when word-splitting (any whitespace separates;
/// NUL too under `--from0`), else NUL-terminated records under `--from0`, else lines ended by
/// "\n", "\r" or "\r\n". Numbering is by record, as rsync counts lines.
fn records(data: &[u8], from0: bool, word_split: bool) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    let mut done = data.is_empty();
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let end = rest.iter().position(|&c| {
            (word_split && is_space(c))
                || if from0 {
                    c == 0
                } else {
                    c == b'\n' || c == b'\r'
                }
        });
        match end {
            None => {
                done = true;
                Some(rest)
            }
            Some(i) => {
                let item = &rest[..i];
                let mut next = i + 1;
                if !from0 && rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    next += 1;
                }
                rest = &rest[next..];
                if rest.is_empty() {
                    done = true;
                }
                Some(item)
            }
        }
    })
}

/// Reads a file named relative to the working directory, or standard input for "-".
pub(crate) fn read_path(path: &Path) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    if path.as_os_str() == "-" {
        io::stdin().lock().read_to_end(&mut data)?;
    } else {
        data = crate::sys::read_regular_path(path)?;
    }
    Ok(data)
}

/// Reads `name` relative to the directory `dir` (openat, never a whole path).
pub(crate) fn read_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let name =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // A merge file is read as rsync reads it (a symlink followed), but only a regular one: a
    // FIFO in its place must not hang the walk.
    crate::sys::read_regular(dir, &name, true)
}
