"""The syntax proof of one review's suggestions, in a child process (specification §14).

A tree-sitter tree of 1 MiB of dense code takes hundreds of megabytes (bench/syntax.py), and a
review may change many such files: kept in the review's own process, their trees once peaked at
gigabytes. The parses run instead in a child (`loop/syntax_worker.py`) whose address space is
limited to MAX_SYNTAX_CHECK_MEMORY and which holds one file's tree at a time. The review's one
syntax budget holds twice: every parse in the child stops at the deadline, and a watchdog kills
the child shortly after it, whatever it is doing. A child that dies (out of memory, killed)
leaves its file's parses not done, which the check reports as `syntax_time`; the next file
gets a new child while the budget lasts.

Not shared between threads: one review's check uses one, on its worker thread.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from pr_review_api.loop.syntax import edit_span
from pr_review_api.loop.syntax_worker import write_frame
from pr_review_api.settings import MAX_SYNTAX_CHECK_MEMORY

# The child stops its own parses at the deadline; the watchdog waits this much longer before
# it kills it, so that a child that answers in time is never cut mid-answer.
_KILL_GRACE_SECONDS = 1.0
_CLOSE_SECONDS = 5.0

Counts = tuple[int | None, list[int | None]]


class SyntaxProcess:
    """The child process of one review's syntax checks: started on first use, ended on exit."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # time.monotonic()
        self.started = 0  # children started, for the tests
        self._child: subprocess.Popen[bytes] | None = None
        self._watchdog: threading.Timer | None = None

    def __enter__(self) -> SyntaxProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def errors(self, language: str, head: bytes, patched: Sequence[bytes]) -> Counts:
        """The error count of the head and of each patched version of it; None for a parse
        that did not finish (the budget spent, or the child out of memory)."""
        child = self._running()
        lines: list[bytes] = []
        if child is not None:
            assert child.stdin is not None
            assert child.stdout is not None
            spans = [edit_span(head, version) for version in patched]
            header = {"language": language, "edits": spans}
            try:
                write_frame(child.stdin, json.dumps(header).encode())
                write_frame(child.stdin, head)
                for version, (prefix, suffix) in zip(patched, spans, strict=True):
                    write_frame(child.stdin, version[prefix : len(version) - suffix])
                child.stdin.flush()
                lines = [child.stdout.readline() for _ in range(len(patched) + 1)]
            except OSError:  # the child is gone: killed, or out of memory
                lines = []
            if len(lines) <= len(patched) or not lines[-1].endswith(b"\n"):
                self._stop()  # a child that failed once is not trusted with the next file
        counts = [_count(line) for line in lines]
        counts += [None] * (len(patched) + 1 - len(counts))
        return counts[0], counts[1:]

    def _running(self) -> subprocess.Popen[bytes] | None:
        """The child, started when there is none and the budget is not spent."""
        remaining = self.deadline - time.monotonic()
        if self._child is None and remaining > 0:
            try:
                self._child = subprocess.Popen(  # our own module, no shell
                    worker_command(remaining, MAX_SYNTAX_CHECK_MEMORY),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # tree-sitter's word on a failed allocation
                    env={},  # nothing of the review's settings, keys included
                )
            except OSError:  # no interpreter to start (an embedded one), no process left
                return None
            self.started += 1
            self._watchdog = threading.Timer(remaining + _KILL_GRACE_SECONDS, self._child.kill)
            self._watchdog.daemon = True
            self._watchdog.start()
        return self._child

    def _stop(self) -> None:
        """End the child, if any: its input closed, killed when it does not end in time."""
        child, self._child = self._child, None
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if child is None:
            return
        try:
            assert child.stdin is not None
            child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(timeout=_CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()


def worker_command(seconds: float, memory: int) -> list[str]:
    """The child's command line: this interpreter, isolated (no environment variables, no
    user site, no working folder on the path), running `loop/syntax_worker.py`."""
    module = "pr_review_api.loop.syntax_worker"
    return [sys.executable, "-I", "-m", module, f"{seconds:.3f}", str(memory)]


def _count(line: bytes) -> int | None:
    """A count from the child's line; None for `-` (NOT_PARSED) or anything else."""
    text = line.strip()
    return int(text) if text.isdigit() else None
