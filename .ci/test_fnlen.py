#!/usr/bin/env python3
"""Tests of .ci/fnlen.py: a function's length is counted from its `fn` line to its closing
brace, braces in comments, strings, raw strings and char literals not counted, a trait's
declaration without a body not counted, and the check fails only past the limit.

Usage: python3 .ci/test_fnlen.py (CI runs it before the check itself).
"""
import os
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fnlen  # noqa: E402

SOURCE = textwrap.dedent(
    r'''
    trait T {
        fn declared(&self) -> u32;
    }

    /// fn in_a_comment() { {
    fn braces<'a>(s: &'a str) -> char {
        let _ = "}}} fn not_a_function() {";
        let _ = r#"}" } "#;
        let _ = br"\";
        /* } /* nested } */ } */
        if s.is_empty() { '{' } else { '}' }
    }

    fn outer() {
        fn inner() {}
        inner();
    }
    '''
).lstrip("\n")


class Lengths(unittest.TestCase):
    def test_functions_and_their_lengths(self):
        found = {name: (line, length) for name, line, length in fnlen.functions(SOURCE)}
        self.assertEqual(found, {"braces": (6, 7), "outer": (14, 4), "inner": (15, 1)})

    def test_the_limit(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "a.rs"), "w") as f:
                f.write(SOURCE)
            with open(os.devnull, "w") as null:
                out, sys.stdout = sys.stdout, null
                try:
                    self.assertEqual(fnlen.main(["--max", "7", d]), 0)
                    self.assertEqual(fnlen.main(["--max", "6", d]), 1)
                finally:
                    sys.stdout = out


if __name__ == "__main__":
    unittest.main()
