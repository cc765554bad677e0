#!/usr/bin/env python3
"""Fails on an import cycle between the modules (files) of any crate under crates/.

Edges are read from the text of each file: `use crate::...`, `use super::...`, `use self::...`
and inline `crate::a::b` / `super::a` paths, each resolved to the longest module file it names.
A module's own `mod x; use x::...` lines (parent to child) are how a parent exposes its
children and are not edges. Test modules (`mod tests { use super::*; }`) are skipped: their
`super` is the file itself. Prints each cycle and exits 1 if there is any.

With --layers (and no cycle), prints each crate's modules by layer instead: layer 0 imports no
other module of its crate, and a module sits one layer above the highest module it imports.
docs/ARCHITECTURE.md's layer drawings are this output; with --check-doc FILE, fails (printing
the difference) unless FILE's fenced block that ends with the "module cycle(s)" line is exactly
this output, so the drawing cannot drift from the code, and fails when a module file of any
crate is named nowhere else in FILE (as `name.rs`, `dir/name.rs` or, for `dir/mod.rs`, `dir/`),
so every module has its line in the module tables.

--check-doc also fails on every name in docs/*.md (not docs/bench/, which records history) that
no longer names anything in the tree, printing FILE:LINE and the name (see `doc_names`):
- a backticked path (a source extension or a `/` in it), resolved against the repository root,
  crates/*/ and crates/*/src/ (the docs write `sync/order.rs` for crates/copy/src/sync/order.rs
  and `tests/all/` for crates/ringio/tests/all/); a bare file name anywhere in the tree;
- a backticked Rust item: `fn name`, `name()`, `Type::name`, `module::name` (the item defined in
  that module's file or re-exported there) and bare snake_case names, each looked up among the
  items the Rust sources define (fn, struct, enum, trait, type, const, static, mod, macro_rules!,
  fields, variants).
Not names: options (`--delete`), commands and anything with spaces, absolute and relative
(`../x`) paths, placeholders (`SRC/`), globs, ALL_CAPS constants, other crates' paths
(`rustix::...`), and the names of other projects: a name right after "rsync's", "GNU's" and the
like, or one in FOREIGN. .ci/test_modcycles.py tests this check.

Usage: .ci/modcycles.py [--layers | --check-doc FILE] [REPO_ROOT]
"""
import contextlib
import difflib
import io
import os
import re
import sys


def module_files(src):
    """Module path (tuple of names) -> file, for every .rs file under src/."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            parts = os.path.relpath(os.path.join(dirpath, name), src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            mods[tuple(parts)] = os.path.join(dirpath, name)
    return mods


def flatten(path):
    """'a::{b, c::{d, e}}' -> ['a::b', 'a::c::d', 'a::c::e']."""
    m = re.match(r"^(.*?)\{(.*)\}$", path.strip(), re.S)
    if not m:
        return [path.strip()]
    head, body, items, depth, cur = m.group(1), m.group(2), [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    return [p for item in items if item.strip() for p in flatten(head + item.strip())]


def edges(text, me, mods):
    text = re.sub(r"//[^\n]*", "", text)
    paths = []
    for m in re.finditer(r"(?m)^([ \t]*)(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        if m.group(1):  # indented: inside an inner module such as `mod tests`
            continue
        paths += [re.sub(r"\s+as\s+\w+$", "", p) for p in flatten(m.group(2))]
    paths += [m.group(0) for m in re.finditer(r"(?<![\w:])(?:crate|super)::(?:\w+::)*\w+", text)]
    out = set()
    for path in paths:
        parts = [p for p in path.split("::") if p]
        if not parts:
            continue
        if parts[0] == "crate":
            base, rest = (), parts[1:]
        elif parts[0] == "super":
            base, rest = me[:-1], parts[1:]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif parts[0] == "self":
            base, rest = me, parts[1:]
        else:
            continue
        for k in range(len(rest), -1, -1):
            target = base + tuple(rest[:k])
            if target in mods:
                if target not in (me, ()):
                    out.add(target)
                break
    return out


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def layers(graph):
    """Module -> layer: 0 for a module that imports none, else 1 + the highest it imports."""
    level = {}

    def visit(v):
        if v not in level:
            level[v] = 0  # no cycles, so never read before it is set below
            level[v] = 1 + max((visit(w) for w in graph[v]), default=-1)
        return level[v]

    for v in graph:
        visit(v)
    return level


def print_layers(crate, graph):
    level = layers(graph)
    name = lambda m: "::".join(m) or "(crate root)"
    print(f"{crate}:")
    for n in range(max(level.values(), default=-1), -1, -1):
        for m in sorted(v for v in level if level[v] == n):
            uses = ", ".join(sorted(name(w) for w in graph[m]))
            print(f"  {n}  {name(m):<18} {'<- ' + uses if uses else ''}".rstrip())


def main(root, show_layers=False):
    bad = 0
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        mods = module_files(src)
        graph = {me: edges(open(f, errors="replace").read(), me, mods) for me, f in mods.items()}
        found = cycles(graph)
        for comp in found:
            bad += 1
            print(f"{crate}: modules import each other in a cycle: "
                  + ", ".join("::".join(m) for m in comp))
        if show_layers and not found:
            print_layers(crate, graph)
    print(f"{bad} module cycle(s)")
    return 1 if bad else 0


def drawing_in(doc):
    """The lines of the fenced block in `doc` whose last line is the cycle count."""
    blocks = re.findall(r"^```\n(.*?)^```$", open(doc).read(), re.S | re.M)
    for block in blocks:
        lines = block.rstrip("\n").split("\n")
        if lines and lines[-1].endswith("module cycle(s)"):
            return lines
    return []


def unnamed_modules(root, doc):
    """Module files of any crate that `doc` (outside the layer drawing) names nowhere: a file
    is named as `name.rs` or `dir/name.rs`, a folder module (`dir/mod.rs`) as `dir/`."""
    text = open(doc).read()
    drawn = "\n".join(drawing_in(doc))
    text = text.replace(drawn, "")
    missing = []
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        for parts, path in sorted(module_files(src).items()):
            if not parts:
                continue
            rel = os.path.relpath(path, src)
            if os.path.basename(rel) == "mod.rs":
                names = [os.path.dirname(rel) + "/", parts[-1] + "/"]
            else:
                names = [rel, os.path.basename(rel)]
            if not any(re.search(r"(?<![\w./-])" + re.escape(n) + r"(?![\w-])", text) for n in names):
                missing.append(f"{crate}: {rel}")
    return missing

# --- Names the docs cite: every backticked path and Rust item must exist in the tree. ---

# Names of other projects that the docs cite without "rsync's"/"GNU's" right before them.
# Each is someone else's, so it is never looked up in this tree.
FOREIGN = {
    "delete_in_dir",  # rsync 3.2.7 generator.c: the deletion pass of one directory
    "recv_generator",  # rsync 3.2.7 generator.c: the generator's per-entry function
    "same_file_ok",  # GNU coreutils src/copy.c: cp's same-file judgement
    "tests/cp/",  # GNU coreutils' cp test directory
    "testsuite/",  # rsync's test directory
    "runtests.sh",  # rsync's test driver
    "wildtest.txt",  # rsync's wildmatch test table
    "src/cp",  # coreutils' build tree: the binary GNU's tests run as cp
    "src/cp.gnu",  # coreutils' build tree: GNU's cp set aside by tests/gnu/run.sh
    "target/",  # cargo's build output: absent from a clean clone
    "t_unsafe",  # rsync's testsuite helper (t_unsafe.c)
    "match_gid",  # rsync 3.2.7 uidlist.c: whether a group is the user's
    "io_uring_enter",  # Linux system call
    "io_uring_setup",  # Linux system call
    "preadv2",  # Linux system call
    "d_type",  # Linux: struct linux_dirent64's type field
    "submit_and_wait",  # the io-uring crate's Submitter::submit_and_wait
    "YXcstpoguax",  # rsync's itemize (-i) letters
    "sub/",  # CONFORMANCE.md: an operand's spelling in a list of spellings, not a path here
}
# Rust's prelude and the std traits the docs name: used everywhere, defined nowhere here.
PRELUDE = {"Option", "Some", "None", "Result", "Ok", "Err", "Vec", "String", "Box", "Drop",
           "Display", "FromStr"}
# "rsync's `x`", "GNU cp's `x`", "std's `x`": a name of that project, not of this tree; and
# "DEST's `ascmhl/`": a name under an operand, not in this tree.
FOREIGN_OWNER = re.compile(
    r"(?:\brsync|\bGNU(?: cp| coreutils)?|\bcoreutils|\bgnulib|\bglibc|\blibc|\bstd|\brustix"
    r"|\bthe kernel|\bLinux|\bpopt|\bclap|\bxxhsum|\bb3sum|\bsha256sum"
    r"|\b[A-Z][A-Z0-9]+)(?:'s|’s|')"
    r"(?: [\w-]+){0,2}\s*$")
SOURCE_EXT = (".rs", ".c", ".h", ".py", ".sh", ".toml", ".md", ".json", ".txt", ".lock")
ITEM = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+(?:r#)?([A-Za-z_]\w*)"
                  r"|\bmacro_rules!\s*([A-Za-z_]\w*)")
FIELD = re.compile(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?([a-z_]\w*)\s*:(?!:)")
VARIANT = re.compile(r"(?m)^\s*([A-Z]\w*)\s*(?:[,({=]|$)")


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def tree_paths(root):
    """Every file and directory of the tree (no .git, no target/), relative, with '/'."""
    paths = set()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "target")]
        rel = os.path.relpath(dirpath, root)
        base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        paths.update(base + d + "/" for d in dirs)
        paths.update(base + f for f in files)
    return paths


def rust_names(root, paths):
    """One pass over the Rust sources (comments removed): (names, by_module, modules, externs,
    by_type, by_file). names: every item any .rs file defines, and the names it imports from
    other crates (theirs to keep); by_module: per module path (a tuple of names), what its file
    defines or re-exports; modules: every module name; externs: the crates the workspace
    depends on (their paths are not ours); by_type: per type, what the files that define or
    implement it define; by_file: per .rs file, what it defines."""
    names, by_module, modules, imports, by_type, by_file = set(PRELUDE), {}, set(), [], {}, {}
    externs = {"std", "core", "alloc"}
    for path in sorted(paths):
        if path.endswith("Cargo.toml"):
            text = read(os.path.join(root, path))
            for section in re.findall(r"(?ms)^\[[\w.-]*dependencies\]\n(.*?)(?=^\[|\Z)", text):
                deps = re.findall(r"(?m)^([\w-]+)\s*=", section)
                externs.update(d.replace("-", "_") for d in deps)
        if not path.endswith(".rs"):
            continue
        text = read(os.path.join(root, path))
        text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)
        here = {a or b for a, b in ITEM.findall(text)}
        modules.update(re.findall(r"\bmod\s+(\w+)", text))
        here.update(FIELD.findall(text), VARIANT.findall(text))
        names |= here
        by_file[path] = set(here)
        owned = re.findall(r"\b(?:struct|enum|trait|union)\s+(\w+)", text)
        owned += re.findall(r"\bimpl\b(?:\s*<[^{]*?>)?\s+(?:[\w:]+(?:<[^{]*?>)?\s+for\s+)?"
                            r"(?:\w+::)*(\w+)", text)
        for t in owned:
            by_type.setdefault(t, set()).update(here)
        for m in re.finditer(r"(?m)^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
            for used in flatten(m.group(2)):
                used = re.split(r"\s+as\s+", used.strip())
                leaf = used[-1].split("::")[-1]
                imports.append((used[0].split("::")[0], leaf))
                if m.group(1):
                    here.add(leaf)
        parts = path[:-3].split("/")
        if "src" in parts:
            parts = parts[parts.index("src") + 1:]
        if parts and parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        modules.update(parts)
        by_module.setdefault(tuple(parts), set()).update(here)
    names.update(leaf for first, leaf in imports if first in externs and first not in modules)
    return names, by_module, modules, externs, by_type, by_file


def resolve(span, paths):
    """The files and directories of the tree a doc's path names: from the root, from a crate
    (`tests/all/`), from a crate's src/ (`sync/order.rs`), or, for a bare name, anywhere."""
    want = span.rstrip("/")
    if "/" not in want:
        return [p for p in paths if p.rstrip("/").split("/")[-1] == want]
    crates = {p.split("/")[1] for p in paths if p.startswith("crates/") and p.count("/") >= 2}
    bases = [""] + [f"crates/{c}/{sub}" for c in sorted(crates) for sub in ("", "src/")]
    return [b + want + end for b in bases for end in ("", "/") if b + want + end in paths]


def is_path(span, paths):
    """A span read as a path of this tree: no space; a source extension, a closing '/', or a
    '/' after a top-level folder of the tree (`crates/base`); and no option, absolute or
    relative path, placeholder (`SRC/`), glob, URL or variable in it. So `files/s` (a unit)
    and `-L/-H` (a pair of options) are not paths."""
    if re.search(r"[\s*?{}<>$%=:|,;~\\]", span) or span.startswith(("-", "/", "./", "../")):
        return False
    if "/" not in span and not span.endswith(SOURCE_EXT):
        return False
    parts = span.rstrip("/").split("/")
    if any(p in ("", ".", "..") or re.fullmatch(r"[A-Z][A-Z0-9_]*", p) for p in parts):
        return False
    return span.endswith(("/",) + SOURCE_EXT) or parts[0] + "/" in paths


def item_missing(span, known):
    """The Rust name a span cites that the sources do not define, or None."""
    names, by_module, modules, externs, by_type, _ = known
    m = re.match(r"^fn\s+([A-Za-z_]\w*)\b", span)
    if m:
        return None if m.group(1) in names else m.group(1)
    m = re.fullmatch(r"((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)(\(.*\)|\s*\{.*\})?(?:\s*->.*)?", span)
    if not m or re.fullmatch(r"\(\d\w*\)", m.group(2) or ""):  # not an item; `statx(2)`
        return None
    segs = m.group(1).split("::")
    if segs[0] in ("crate", "self", "super") or segs[0].startswith("ringio_"):
        segs = segs[1:]
    elif segs[0] in externs and segs[0] not in modules:
        return None
    if len(segs) == 1:
        name = segs[0]
        if re.fullmatch(r"[A-Z0-9_]+", name):  # a constant of the C library or an env variable
            return None
        snake_or_camel = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z]\w*[a-z]\w*"
        if not m.group(2) and not re.fullmatch(snake_or_camel, name):
            return None  # a lowercase word: an option's value, a command, a word of prose
        return None if name in names else name
    *prefix, name = segs
    for seg in prefix:
        if seg not in modules and seg not in names:
            return seg
    if prefix[-1][0].islower():  # module::name: defined in that module's file
        scoped = [v for k, v in by_module.items() if k[-len(prefix):] == tuple(prefix)]
        if not scoped:
            return "::".join(prefix)
        return None if any(name in v for v in scoped) else "::".join(segs)
    if prefix[-1] in by_type:  # Type::name: defined where Type is defined or implemented
        return None if name in by_type[prefix[-1]] else "::".join(segs)
    return None if name in names else "::".join(segs)


def doc_names(root, docs):
    """FILE:LINE: NAME for every backticked path or Rust item in `docs` that the tree lacks.
    Fenced blocks are skipped: they hold commands, output and the layer drawing."""
    paths = tree_paths(root)
    known = rust_names(root, paths)
    by_file = known[-1]
    bad = []
    for doc in docs:
        text = read(doc)
        text = re.sub(r"(?ms)^```.*?^```[ \t]*$", lambda f: "\n" * f.group(0).count("\n"), text)
        files, end = [], 0  # the .rs files the last path named, and where it ended
        for m in re.finditer(r"(`+)((?:(?!\n\s*\n).)+?)\1", text, re.S):
            span = " ".join(m.group(2).split())
            before = text[max(0, m.start() - 60):m.start()].split("\n\n")[-1]
            line = text.count("\n", 0, m.start()) + 1
            if span in FOREIGN or FOREIGN_OWNER.search(" ".join(before.split())):
                continue
            if any(span.startswith(f) for f in FOREIGN if f.endswith("/")):
                continue
            # `file.rs` `name`, `other` and `last`: the names right after a file are its own.
            if (files and re.fullmatch(r"\w+", span)
                    and re.fullmatch(r"[\s,]*(?:and\s+)?", text[end:m.start()])):
                end = m.end()
                if not any(span in by_file[f] for f in files):
                    bad.append(f"{doc}:{line}: `{span}`: not defined in {', '.join(files)}")
                continue
            files = []
            # A command that runs a script of the tree (`tests/gnu/run.sh --passes ...`), a
            # place in a file (`sync/walk.rs:120`).
            if " " in span and is_path(span.split()[0], paths):
                span = span.split()[0]
            span = re.sub(r"(\.\w+):\d+(?:-\d+)?$", r"\1", span)
            if is_path(span, paths):
                found = resolve(span, paths)
                if not found:
                    bad.append(f"{doc}:{line}: `{span}`: no such file or directory")
                files, end = [f for f in found if f in by_file], m.end()
                continue
            missing = item_missing(span, known)
            if missing and missing not in FOREIGN:
                bad.append(f"{doc}:{line}: `{span}`: no Rust item `{missing}` in the sources")
    return bad


def docs_of(root):
    """The documents whose names must exist: docs/*.md, not docs/bench/ (history)."""
    folder = os.path.join(root, "docs")
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".md")]


def check_names(root, docs):
    bad = doc_names(root, docs)
    for line in bad:
        print(line)
    print(f"{len(bad)} name(s) in {', '.join(docs)} that the tree lacks")
    return 1 if bad else 0


def check_doc(root, doc):
    names = check_names(root, docs_of(root))
    return check_drawing(root, doc) or names


def check_drawing(root, doc):
    missing = unnamed_modules(root, doc)
    if missing:
        print(f"{doc} names no line for these modules (add one to its module tables):")
        for m in missing:
            print(f"  {m}")
        return 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(root, True)
    code = out.getvalue().rstrip("\n").split("\n")
    drawn = drawing_in(doc)
    if status or drawn == code:
        print(code[-1] if status else f"{doc}: the layer drawing matches the code")
        return status
    print(f"{doc}: the layer drawing differs from the code (- drawn, + code); "
          f"paste `.ci/modcycles.py --layers` there:")
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(drawn, code, lineterm=""))
    return 1


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--check-doc" in argv:
        i = argv.index("--check-doc")
        doc = argv[i + 1]
        rest = argv[:i] + argv[i + 2:]
        sys.exit(check_doc(rest[0] if rest else ".", doc))
    args = [a for a in argv if a != "--layers"]
    sys.exit(main(args[0] if args else ".", "--layers" in argv))
