"""Syntax errors counted per language by extension, for the suggestion check (CONTRACT 14)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.loop.syntax import ParseTooSlow, SyntaxBaseline, language_of, syntax_errors
from tests.conftest import examples

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


_PIECES = ["x = 1\n", "y = (\n", ")\n", "def f():\n", "    return 1\n", "é = 'ü'\n", "\n", "[1,\n"]


@settings(max_examples=examples(150), deadline=None)
@given(
    head=st.lists(st.sampled_from(_PIECES), max_size=30),
    start=st.integers(min_value=0, max_value=30),
    removed=st.integers(min_value=0, max_value=5),
    inserted=st.lists(st.sampled_from(_PIECES), max_size=4),
)
def test_an_incremental_parse_counts_as_a_fresh_one(
    head: list[str], start: int, removed: int, inserted: list[str]
) -> None:
    start = min(start, len(head))
    patched = [*head[:start], *inserted, *head[start + removed :]]
    source, after = "".join(head).encode(), "".join(patched).encode()
    baseline = SyntaxBaseline("python", source)
    assert baseline.errors == syntax_errors("python", source)
    assert baseline.errors_with(after) == syntax_errors("python", after)


def test_the_same_baseline_counts_many_edits() -> None:
    baseline = SyntaxBaseline("c", b"int f(void) {\n  return 1;\n}\n")
    assert baseline.errors == 0
    assert baseline.errors_with(b"int f(void) {\n  return 1\n}\n") > 0
    assert baseline.errors_with(b"int f(void) {\n  return 2;\n}\n") == 0


def test_a_parse_past_its_deadline_stops() -> None:
    with pytest.raises(ParseTooSlow):
        syntax_errors("python", b"x = 1\n" * 10, deadline=time.monotonic() - 1)
    baseline = SyntaxBaseline("python", b"x = 1\n")
    with pytest.raises(ParseTooSlow):
        baseline.errors_with(b"x = 2\n", deadline=time.monotonic() - 1)
