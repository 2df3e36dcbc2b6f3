"""The live status line a review shows on stderr when stderr is a terminal (specification §4).

While the model is being waited for (a CPU model may take minutes a turn), the line counts the
seconds: it is re-drawn several times a second from the monotonic clock, not from the loop.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.text import Text

from pr_review_api.loop.run import Progress, ProgressCallback
from pr_review_api.model import Usage

_STAGES = {
    "preparing": "preparing the repository",
    "waiting_for_model": "waiting for the model",
    "running_tools": "running tool calls",
    "validating": "validating the final review",
    "verifying": "verifying the findings",
}
_TIMED_STAGES = frozenset({"waiting_for_model"})


def describe_progress(progress: Progress, waited: float | None = None) -> str:
    """One status line: the stage (with `waited`, the seconds spent in it), the round, tool
    calls and tokens so far."""
    stage = _STAGES.get(progress.stage, progress.stage)
    if waited is not None and progress.stage in _TIMED_STAGES:
        stage = f"{stage}, {elapsed(waited)}"
    if progress.round == 0:
        return f"Reviewing: {stage}"
    calls = "tool call" if progress.tool_calls == 1 else "tool calls"
    return (
        f"Round {progress.round}: {stage} · {progress.tool_calls} {calls} · "
        f"{progress.usage.total_tokens:,} tokens"
    )


def elapsed(seconds: float) -> str:
    """`42 s`, `3 min 05 s`: whole seconds, as a clock a person watches."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    return f"{whole // 60} min {whole % 60:02d} s"


class StatusLine:
    """What the status shows: the last progress, and how long its stage has lasted (rich
    renders it afresh at each refresh, so the seconds move while the loop waits)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.progress = Progress("preparing", 0, 0, Usage())
        self._since = clock()

    def update(self, progress: Progress) -> None:
        if (progress.stage, progress.round) != (self.progress.stage, self.progress.round):
            self._since = self._clock()
        self.progress = progress

    def __str__(self) -> str:
        return describe_progress(self.progress, waited=self._clock() - self._since)

    def __rich__(self) -> Text:
        return Text(str(self))  # plain text: nothing in it is markup


@contextmanager
def live_progress(*, enabled: bool) -> Iterator[ProgressCallback | None]:
    """A live status line on stderr while the block runs when `enabled`; nothing otherwise."""
    if not enabled:
        yield None
        return
    console = Console(file=sys.stderr)
    line = StatusLine()
    with console.status(line):
        yield line.update
