"""Syntax errors counted per language by extension, for the suggestion check (specification §14)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.loop import syntax
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


# 1 MiB of JavaScript array: seconds of parsing, most of it after the last byte is read.
SLOW = b"var x = [" + b"1," * (512 * 1024 - 8) + b"];\n"


class _LateLooks:
    """The real time.monotonic, counting the looks at it that find `deadline` passed."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.late = 0

    def monotonic(self) -> float:
        now = time.monotonic()
        self.late += now > self.deadline
        return now


def test_the_deadline_holds_after_the_input_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _LateLooks(time.monotonic() + 0.5)
    monkeypatch.setattr(syntax, "time", clock)
    with pytest.raises(ParseTooSlow):
        syntax_errors("javascript", SLOW, deadline=clock.deadline)
    # The parse stopped at its first look past the deadline: one that went on to its end
    # (seconds) would have looked again at every step.
    assert clock.late == 1


class _Clock:
    """time.monotonic for a deadline of 1000: in time for `calls` calls, then past it."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def monotonic(self) -> float:
        self.calls -= 1
        return 0.0 if self.calls >= 0 else 2000.0


def test_the_deadline_is_checked_once_every_byte_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In time for twice as many looks at the clock as there are reads of 4 KiB (tree-sitter
    # reads a few chunks twice): a deadline checked only while reading lets this parse finish.
    reads = -(-len(SLOW) // 4096) + 1
    monkeypatch.setattr(syntax, "time", _Clock(2 * reads))
    with pytest.raises(ParseTooSlow):
        syntax_errors("javascript", SLOW, deadline=1000.0)


class _FailingClock:
    """time.monotonic that raises on its n-th call: a progress callback that fails."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def monotonic(self) -> float:
        self.calls -= 1
        if self.calls < 0:
            raise RuntimeError("clock")
        return time.monotonic()


@pytest.mark.parametrize("calls", [1, 2, 5, 50])
def test_a_failing_callback_is_a_parse_not_done_and_the_parser_starts_afresh(
    calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = b"def f(x):\n    return [x,\n" + b"    1,\n" * 20_000 + b"]\n"
    baseline = SyntaxBaseline("python", source)
    monkeypatch.setattr(syntax, "time", _FailingClock(calls))
    with pytest.raises(ParseTooSlow):
        baseline.errors_with(source.replace(b"[x,", b"(x,"), deadline=time.monotonic() + 60)
    monkeypatch.undo()
    # The halted parse is not resumed on other bytes: the next count is a fresh parse's.
    patched = source.replace(b"return", b"yield")
    assert baseline.errors_with(patched) == syntax_errors("python", patched) == 0


def test_every_failure_of_the_parser_is_a_parse_not_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # py-tree-sitter reports a callback that raises after the last read as SystemError.
    class Failing:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def parse(self, *_args: object, **_kwargs: object) -> object:
            raise self.error

        def reset(self) -> None:
            pass

    for error in (SystemError("result with an exception set"), ValueError("Parsing failed")):
        with pytest.raises(ParseTooSlow):
            syntax._parse(Failing(error), b"x = 1\n", time.monotonic() + 60)  # type: ignore[arg-type]
