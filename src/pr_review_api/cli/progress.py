"""The live status line a review shows on stderr when stderr is a terminal (CONTRACT 4)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from pr_review_api.loop.run import Progress, ProgressCallback
from pr_review_api.model import Usage

_STAGES = {
    "preparing": "preparing the repository",
    "waiting_for_model": "waiting for the model",
    "running_tools": "running tool calls",
    "validating": "validating the final review",
    "verifying": "verifying the findings",
}


def describe_progress(progress: Progress) -> str:
    """One status line: the stage, the round, tool calls and tokens so far."""
    stage = _STAGES.get(progress.stage, progress.stage)
    if progress.round == 0:
        return f"Reviewing: {stage}"
    calls = "tool call" if progress.tool_calls == 1 else "tool calls"
    return (
        f"Round {progress.round}: {stage} · {progress.tool_calls} {calls} · "
        f"{progress.usage.total_tokens:,} tokens"
    )


@contextmanager
def live_progress(*, enabled: bool) -> Iterator[ProgressCallback | None]:
    """A live status line on stderr while the block runs when `enabled`; nothing otherwise."""
    if not enabled:
        yield None
        return
    console = Console(file=sys.stderr)
    with console.status(describe_progress(Progress("preparing", 0, 0, Usage()))) as status:

        def update(progress: Progress) -> None:
            status.update(describe_progress(progress))

        yield update
