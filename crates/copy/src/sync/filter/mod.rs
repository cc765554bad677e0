//! rsync's filter rules: include/exclude/filter, merge and per-directory merge files, and the
//! wildmatch matcher, with rsync's semantics (its `exclude.c` and `lib/wildmatch.c`).
//!
//! [`FilterRules`] is the run's rule list, built in command-line order. A [`Scope`] is the rules
//! in force in one directory: the global list plus the per-directory (`dir-merge`) files read on
//! the way down, kept as Arc-linked chains so that a scope is cheap to clone and memory grows with
//! depth only. [`Scope::excluded`] answers for one name, first matching rule winning.
//!
//! Names are bytes, relative to the transfer root, without a leading slash. Where rsync matches
//! against an absolute path (the `/` modifier), the name is prefixed with the transfer root's
//! absolute path, which [`Scope::enter`] learns from the root's descriptor (`/proc/self/fd`) when
//! a rule needs it. Anchored rules of a per-directory file are anchored at that file's
//! directory, as rsync's are.
//!
//! What is not here: rsync's daemon filters, the implied includes of its remote arguments,
//! `--files-from`, and xattr-name filtering (`x` rules are kept and never match a file name).
//! Rules are never sent anywhere: sides are honoured by [`Side`] at match time.

mod merge;
mod rule;
mod scope;
#[cfg(test)]
mod tests;
mod wildmatch;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use scope::Scope;
pub use wildmatch::wildmatch;

use merge::{read_path, Env, ListBuilder};
use rule::{fl, xf, Kind, Origin, Rule};

/// rsync's built-in CVS ignore list (its `--cvs-exclude` documentation, in order).
const DEFAULT_CVSIGNORE: &[u8] = b"RCS SCCS CVS CVS.adm RCSLOG cvslog.* tags TAGS .make.state \
    .nse_depinfo *~ #* .#* ,* _$* *$ *.old *.bak *.BAK *.orig *.rej .del-* *.a *.olb *.o *.obj \
    *.so *.exe *.Z *.elc *.ln core .svn/ .git/ .hg/ .bzr/";

/// What a rules file passed to [`FilterRules::read_from`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// `--exclude-from`: one pattern a line, excluded unless the line starts with "+ ".
    Exclude,
    /// `--include-from`: one pattern a line, included unless the line starts with "- ".
    Include,
    /// A merge file: full filter-rule syntax on each line.
    Filter,
}

/// Which side a name is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// "Is it transferred": exclude/include/hide/show rules.
    Sender,
    /// "Is a destination name protected from deletion": exclude/include/protect/risk rules.
    Receiver,
}

/// A rule that cannot be parsed or a rules file that cannot be read. Displays as rsync's
/// message; a rule read from a file is named by its place, not its text, as rsync does.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// The rule's first word is no rule rsync knows.
    #[error("Unknown filter rule: {rule}")]
    UnknownRule {
        /// The rule as given, or where it was read.
        rule: String,
    },
    /// A modifier the rule's kind does not take.
    #[error("invalid modifier{detail} in filter rule: {rule}")]
    InvalidModifier {
        /// The rule as given, or where it was read.
        rule: String,
        /// " 'c' at position N", for a command-line rule.
        detail: String,
    },
    /// `!` followed by something.
    #[error("'!' rule has trailing characters: {rule}")]
    ClearWithArgument {
        /// The rule as given, or where it was read.
        rule: String,
    },
    /// A rule that needs a pattern and has none.
    #[error("unexpected end of filter rule: {rule}")]
    UnexpectedEnd {
        /// The rule as given, or where it was read.
        rule: String,
    },
    /// A merge file with `s`/`r` holds a rule that names its own side.
    #[error("specified-side merge file contains specified-side filter: {rule}")]
    SidedRuleInSidedMerge {
        /// The rule as given, or where it was read.
        rule: String,
    },
    /// A rules file (`--exclude-from`, `--include-from`, `merge`) could not be read.
    #[error("failed to open {kind} file {path}: {source}")]
    Open {
        /// "exclude" or "include", as rsync words it.
        kind: &'static str,
        /// The file as named.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Merge files merging merge files, deeper than rsync allows (32).
    #[error("merge-file include depth limit (32) exceeded at {path}")]
    TooDeep {
        /// The file that would have been read.
        path: String,
    },
    /// The transfer root's absolute path, needed by an absolute-path rule or a per-directory
    /// merge file named with a path, could not be read from its descriptor.
    #[error("cannot find the absolute path of the transfer root: {source}")]
    RootPath {
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where `-C` finds `~/.cvsignore` and `$CVSIGNORE`, captured when the rules are made.
#[derive(Clone, Debug, Default)]
pub(crate) struct CvsEnv {
    pub home: Option<PathBuf>,
    pub var: Option<Vec<u8>>,
}

/// The run's filter rules, in command-line order.
#[derive(Debug)]
pub struct FilterRules {
    list: Vec<Rule>,
    cvs_option: bool,
    delete_excluded: bool,
    from0: bool,
    /// rsync's global CVS list, built the first time a `-C` rule needs it.
    cvs: OnceLock<Vec<Rule>>,
    cvs_env: CvsEnv,
}

impl Default for FilterRules {
    fn default() -> Self {
        Self::new()
    }
}

impl FilterRules {
    /// No rules yet. `$HOME` and `$CVSIGNORE` are read now, for `-C`.
    pub fn new() -> Self {
        use std::os::unix::ffi::OsStringExt;
        let env = CvsEnv {
            home: std::env::var_os("HOME").map(PathBuf::from),
            var: std::env::var_os("CVSIGNORE").map(|v| v.into_vec()),
        };
        Self::with_cvs_env(env)
    }

    pub(crate) fn with_cvs_env(cvs_env: CvsEnv) -> Self {
        FilterRules {
            list: Vec::new(),
            cvs_option: false,
            delete_excluded: false,
            from0: false,
            cvs: OnceLock::new(),
            cvs_env,
        }
    }

    /// One `-f`/`--filter` RULE in rsync's syntax: `+ PAT`, `- PAT`, `P PAT`, `R PAT`, `H PAT`,
    /// `S PAT`, `!`, the long names (`include`, `exclude`, `protect`, `risk`, `hide`, `show`,
    /// `clear`), the modifiers (`/ ! C s r p x e n w + -`), `merge FILE`/`. FILE` (read now,
    /// relative to the working directory, "-" for standard input) and `dir-merge FILE`/`: FILE`.
    pub fn add_rule(&mut self, rule: &[u8]) -> Result<(), FilterError> {
        self.parse(rule, 0, 0)
    }

    /// `--exclude=PATTERN`: a leading "- " or "+ " is honoured, and "!" clears the list. A
    /// prefix with nothing after it (which rsync rejects) is ignored: see
    /// [`try_add_exclude`](Self::try_add_exclude).
    pub fn add_exclude(&mut self, pattern: &[u8]) {
        let _ = self.try_add_exclude(pattern);
    }

    /// `--include=PATTERN`, as [`add_exclude`](Self::add_exclude) with "include" the default.
    pub fn add_include(&mut self, pattern: &[u8]) {
        let _ = self.try_add_include(pattern);
    }

    /// `--exclude=PATTERN`, failing as rsync does on "- " or "+ " alone.
    pub fn try_add_exclude(&mut self, pattern: &[u8]) -> Result<(), FilterError> {
        self.parse(pattern, 0, xf::OLD_PREFIXES)
    }

    /// `--include=PATTERN`, failing as rsync does on "- " or "+ " alone.
    pub fn try_add_include(&mut self, pattern: &[u8]) -> Result<(), FilterError> {
        self.parse(pattern, fl::INCLUDE, xf::OLD_PREFIXES)
    }

    /// `--exclude-from`, `--include-from`, or a merge file of full rules (`kind`): FILE, or "-"
    /// for standard input. `nul` is `-0`/`--from0`: NUL-separated. Empty lines and lines
    /// starting with `;` or `#` are skipped.
    pub fn read_from(&mut self, path: &Path, kind: ListKind, nul: bool) -> Result<(), FilterError> {
        let (template, xflags) = match kind {
            ListKind::Exclude => (0, xf::OLD_PREFIXES | xf::FATAL),
            ListKind::Include => (fl::INCLUDE, xf::OLD_PREFIXES | xf::FATAL),
            ListKind::Filter => (0, xf::FATAL),
        };
        let data = read_path(path).map_err(|source| FilterError::Open {
            kind: if kind == ListKind::Include {
                "include"
            } else {
                "exclude"
            },
            path: path.display().to_string(),
            source,
        })?;
        let shown = path.display().to_string();
        self.parse_with(nul, |b, env| {
            b.parse_file(env, &data, &shown, template, xflags)
        })
    }

    /// `-C`/`--cvs-exclude`: after all other rules (wherever the option was), a `:C` dir-merge of
    /// each directory's `.cvsignore` and a `-C` rule: rsync's default list (perishable), the
    /// words of `~/.cvsignore` and of `$CVSIGNORE`, as rsync adds them.
    pub fn cvs_exclude(&mut self) {
        self.cvs_option = true;
    }

    /// `--delete-excluded`: rules that name no side (plain include/exclude, and those read from
    /// per-directory files) apply to the sending side only, so excluded files on the receiver
    /// are not protected and get deleted.
    pub fn set_delete_excluded(&mut self, on: bool) {
        self.delete_excluded = on;
    }

    /// `-0`/`--from0` for the files merge and dir-merge rules read (rsync's `--from0` is global):
    /// their rules are separated by NUL bytes.
    pub fn set_from0(&mut self, on: bool) {
        self.from0 = on;
    }

    /// True when an extended attribute named `name` is left out of the transfer by an `x`
    /// rule (`-f '-x user.secret'`, `--filter='-x_system.*'`): the first matching xattr rule
    /// decides, as for names. Only the global list holds xattr rules (rsync reads none from
    /// per-directory files).
    pub fn xattr_excluded(&self, name: &[u8]) -> bool {
        for rule in self.list.iter().filter(|r| r.flags & rule::fl::XATTR != 0) {
            if wildmatch::wildmatch(&rule.pattern, name) != (rule.flags & rule::fl::NEGATE != 0) {
                return rule.flags & rule::fl::INCLUDE == 0;
            }
        }
        false
    }

    /// No rule at all (and no `-C`).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && !self.cvs_option
    }

    fn parse(&mut self, text: &[u8], template: u32, xflags: u32) -> Result<(), FilterError> {
        let from0 = self.from0;
        self.parse_with(from0, |b, env| {
            b.parse_str(env, text, template, xflags, &Origin::Arg)
        })
    }

    /// Runs `f` on a builder for the global list, then applies what it built.
    fn parse_with(
        &mut self,
        from0: bool,
        f: impl FnOnce(&mut ListBuilder, &mut Env<'_>) -> Result<(), FilterError>,
    ) -> Result<(), FilterError> {
        let mut b = ListBuilder::default();
        let mut env = Env {
            shared: &*self,
            base: None,
            dir: None,
            origin: None,
            taken: dir_merge_names(&self.list),
            depth: 0,
            from0,
        };
        f(&mut b, &mut env)?;
        if b.cleared {
            self.list.clear();
        }
        self.list.extend(b.rules);
        Ok(())
    }

    /// The rules `-C` appends after all others.
    pub(crate) fn cvs_tail(&self) -> Vec<Rule> {
        if !self.cvs_option {
            return Vec::new();
        }
        let mut b = ListBuilder::default();
        let mut env = Env {
            shared: self,
            base: None,
            dir: None,
            origin: None,
            taken: dir_merge_names(&self.list),
            depth: 0,
            from0: self.from0,
        };
        for rule in [&b":C"[..], b"-C"] {
            // Both parse: they are fixed texts.
            let _ = b.parse_str(&mut env, rule, 0, 0, &Origin::Arg);
        }
        b.rules
    }

    /// rsync's global CVS list (`get_cvs_excludes`): built once, from the first `-C` rule's
    /// flags.
    pub(crate) fn cvs_list(&self, flags: u32) -> &[Rule] {
        self.cvs.get_or_init(|| {
            let mut b = ListBuilder::default();
            let mut env = Env {
                shared: self,
                base: None,
                dir: None,
                origin: None,
                taken: Vec::new(),
                depth: 0,
                from0: false,
            };
            let origin = Origin::Arg;
            // The default list is perishable; ~/.cvsignore and $CVSIGNORE are not.
            let _ = b.parse_str(
                &mut env,
                DEFAULT_CVSIGNORE,
                flags | fl::PERISHABLE,
                0,
                &origin,
            );
            if let Some(home) = &self.cvs_env.home {
                let path = home.join(".cvsignore");
                if let Ok(data) = read_path(&path) {
                    let shown = path.display().to_string();
                    let _ = b.parse_file(&mut env, &data, &shown, flags, 0);
                }
            }
            if let Some(var) = &self.cvs_env.var {
                let _ = b.parse_str(&mut env, var, flags, 0, &origin);
            }
            b.rules
        })
    }

    pub(crate) fn rules(&self) -> &[Rule] {
        &self.list
    }

    pub(crate) fn cvs_rules(&self) -> &[Rule] {
        self.cvs.get().map(Vec::as_slice).unwrap_or_default()
    }

    pub(crate) fn delete_excluded(&self) -> bool {
        self.delete_excluded
    }

    pub(crate) fn from0(&self) -> bool {
        self.from0
    }
}

/// The basenames of the dir-merge rules in `rules`.
fn dir_merge_names(rules: &[Rule]) -> Vec<Box<[u8]>> {
    rules
        .iter()
        .filter_map(|r| match &r.kind {
            Kind::DirMerge(m) => Some(m.basename().into()),
            _ => None,
        })
        .collect()
}
