"""The suggestion check's parses in a child process: its counts, its memory limit and its
deadline (specification §14). Each test starts real child processes."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pr_review_api.loop import syntax_process
from pr_review_api.loop.syntax import syntax_errors
from pr_review_api.loop.syntax_process import SyntaxProcess

HEAD = b"def f(x):\n    return x\n"
BROKEN = b"def f(x:\n    return x\n"
FIXED = b"def f(x):\n    return x + 1\n"
# 256 KiB of one-letter lines: a tree of about 80 MB, however few bytes it has.
DENSE = b"a\n" * (128 * 1024)
# 1 MiB of JavaScript array: seconds of parsing, most of it after the last byte is read.
SLOW = b"var x = [" + b"1," * (512 * 1024 - 8) + b"];\n"


def later(seconds: float) -> float:
    return time.monotonic() + seconds


def test_counts_are_the_in_process_counts_for_each_file() -> None:
    with SyntaxProcess(later(60)) as parser:
        first = parser.errors("python", HEAD, [BROKEN, FIXED])
        second = parser.errors("c", b"int f(void) { return 1; }\n", [b"int f(void) { return 1 }\n"])
        assert parser.started == 1  # one child for the whole review
    assert first == (0, [syntax_errors("python", BROKEN), 0])
    assert first[1][0] is not None
    assert first[1][0] > 0
    assert second[0] == 0
    assert second[1][0] is not None
    assert second[1][0] > 0


def test_a_file_with_no_suggestion_left_is_not_sent() -> None:
    with SyntaxProcess(later(60)) as parser:
        assert parser.errors("python", HEAD, []) == (0, [])


def test_a_tree_past_the_memory_limit_is_not_parsed_and_the_next_file_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(syntax_process, "MAX_SYNTAX_CHECK_MEMORY", 64 * 1024 * 1024)
    with SyntaxProcess(later(120)) as parser:
        dense = parser.errors("python", DENSE, [DENSE + b"b\n"])
        small = parser.errors("python", HEAD, [BROKEN])
        started = parser.started
    assert dense == (None, [None])  # the child died out of memory
    assert small[0] == 0  # a new child answered
    assert small[1][0] is not None
    assert started == 2


def test_the_deadline_holds_after_the_input_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # The watchdog waits a minute past the deadline, and counts its kills: a parse not done
    # can then only be the child stopping its own parse (a full one of SLOW takes seconds).
    monkeypatch.setattr(syntax_process, "_KILL_GRACE_SECONDS", 60.0)
    kills: list[int] = []
    timer = threading.Timer

    def watchdog(seconds: float, kill: Callable[[], None]) -> threading.Timer:
        def counted_kill() -> None:
            kills.append(1)
            kill()

        return timer(seconds, counted_kill)

    monkeypatch.setattr(threading, "Timer", watchdog)
    with SyntaxProcess(later(0.5)) as parser:
        counts = parser.errors("javascript", SLOW, [SLOW + b"x;\n"])
    assert counts == (None, [None])
    assert kills == []


def test_a_child_that_does_not_answer_is_killed_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def silent(_seconds: float, _memory: int) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(600)"]

    monkeypatch.setattr(syntax_process, "worker_command", silent)
    budget = 0.5
    started = time.monotonic()
    with SyntaxProcess(later(budget)) as parser:
        counts = parser.errors("python", HEAD, [FIXED])
        assert parser.started == 1
    assert counts == (None, [None])
    assert time.monotonic() - started < budget + 30  # the watchdog, not the 600 s sleep


def test_a_spent_budget_starts_no_child() -> None:
    with SyntaxProcess(later(-1)) as parser:
        assert parser.errors("python", HEAD, [FIXED]) == (None, [None])
        assert parser.started == 0


def test_an_answer_that_is_not_a_count_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def babbling(_seconds: float, _memory: int) -> list[str]:
        script = "import sys; sys.stdin.buffer.read(4); print('oops'); print('-1')"
        return [sys.executable, "-c", script]

    monkeypatch.setattr(syntax_process, "worker_command", babbling)
    with SyntaxProcess(later(60)) as parser:
        assert parser.errors("python", HEAD, [FIXED]) == (None, [None])


def test_a_child_that_cannot_start_is_a_parse_not_done(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def missing(_seconds: float, _memory: int) -> list[str]:
        return [str(tmp_path / "no-python")]

    monkeypatch.setattr(syntax_process, "worker_command", missing)
    with SyntaxProcess(later(60)) as parser:
        assert parser.errors("python", HEAD, [FIXED]) == (None, [None])
        assert parser.started == 0
