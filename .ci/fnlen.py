#!/usr/bin/env python3
"""Fails on a Rust function longer than a limit (120 lines by default) under the given
directories: counted from the line of its `fn` to the line of its closing brace, as a reader
sees it. Comments, strings, raw strings and char literals are skipped when braces are matched.

Usage: python3 .ci/fnlen.py [--max N] [--list] DIR...   (CI: crates/copy/src/sync)
--list prints every function with its length, longest first, and fails on none.
"""
import os
import re
import sys

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def starts_word(text, i):
    """Whether a token starting at `i` is not the tail of an identifier."""
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def code_only(text):
    """The text with comments, strings and char literals blanked (newlines kept), so that
    braces and `fn` are found only in code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and starts_word(text, i - (text[i - 1:i] == "b")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}', '{'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, length in lines) of every function with a body."""
    code = code_only(text)
    found = []
    for m in FN.finditer(code):
        # The body opens at the first `{` after the signature, unless a `;` ends it first
        # (a trait's declaration); `where` clauses and return types hold no braces.
        j = m.end()
        depth_paren = 0
        while j < len(code):
            ch = code[j]
            if ch in "(<[":
                depth_paren += 1
            elif ch in ")>]":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                j = -1
                break
            elif ch == "{" and depth_paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def sources(dirs):
    for d in dirs:
        for base, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield os.path.join(base, f)


def main(argv):
    limit, listing, dirs = 120, False, []
    it = iter(argv)
    for a in it:
        if a == "--max":
            limit = int(next(it))
        elif a == "--list":
            listing = True
        else:
            dirs.append(a)
    rows = []
    for path in sources(dirs):
        with open(path, encoding="utf-8") as f:
            for name, line, length in functions(f.read()):
                rows.append((length, path, line, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if listing:
        for length, path, line, name in rows:
            print(f"{length:5} {path}:{line} {name}")
        return 0
    long = [r for r in rows if r[0] > limit]
    for length, path, line, name in long:
        print(f"{path}:{line}: fn {name} is {length} lines (at most {limit}): split it into named steps")
    if not long:
        print(f"no function over {limit} lines under {', '.join(dirs)}")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
