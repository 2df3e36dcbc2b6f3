"""Syntax errors counted per language by extension, for the suggestion check (CONTRACT 14)."""

from __future__ import annotations

import pytest

from pr_review_api.loop.syntax import language_of, syntax_errors

# (path, a file that parses, the same file broken)
SAMPLES = [
    ("a.py", "def f(x):\n    return x\n", "def f(x:\n    return x\n"),
    ("a.js", "function f(x) { return x; }\n", "function f(x) { return x; \n"),
    ("a.ts", "function f(x: number): number { return x; }\n", "function f(x: ): { return x\n"),
    ("a.tsx", "const a = <div>{x}</div>;\n", "const a = <div>{x</div>;\n"),
    ("a.go", "package a\n\nfunc f(x int) int { return x }\n", "package a\n\nfunc f(x int int {\n"),
    ("a.rs", "fn f(x: i32) -> i32 { x }\n", "fn f(x: i32) -> i32 { x \n"),
    ("A.java", "class A { int f(int x) { return x; } }\n", "class A { int f(int x { return x; }\n"),
    ("a.c", "int f(int x) { return x; }\n", "int f(int x { return x; }\n"),
    ("a.cpp", "template <class T> T f(T x) { return x; }\n", "template <class T T f(T x) {\n"),
    ("a.rb", "def f(x)\n  x\nend\n", "def f(x)\n  x.(\n"),
]


@pytest.mark.parametrize(("path", "good", "bad"), SAMPLES)
def test_each_language_counts_errors(path: str, good: str, bad: str) -> None:
    language = language_of(path)
    assert language is not None
    assert syntax_errors(language, good.encode()) == 0
    assert syntax_errors(language, bad.encode()) > 0


def test_other_files_are_not_parsed() -> None:
    assert language_of("README.md") is None
    assert language_of("Makefile") is None
    assert language_of("src/A.PY") == "python"  # extensions in any case


def test_a_missing_token_counts() -> None:
    # tree-sitter recovers from an unclosed call by inventing ")": a MISSING node.
    assert syntax_errors("javascript", b"f(1;\n") >= 1
