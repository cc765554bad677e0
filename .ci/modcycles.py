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


def check_doc(root, doc):
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
