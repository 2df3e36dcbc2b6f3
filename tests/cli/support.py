"""What the command-line tests share: a small repository, the provider's environment, and a
CliRunner call of `pr-review`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from pr_review_api.cli import commands as cli
from pr_review_api.loop.run import PLAIN, Progress, ReviewOptions
from pr_review_api.model import ReviewResult, Usage

CONSOLE_SCRIPT = Path(sys.executable).parent / "pr-review"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args), prog_name="pr-review")


def assert_one_error_line(result: Result, code: str) -> str:
    """stderr is exactly `error: <message> (<code>)`, and nothing went to stdout."""
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert lines[0].endswith(f" ({code})")
    assert "Traceback" not in result.output
    return lines[0]


class FakeRunReview:
    """Replaces run_review inside the CLI."""

    def __init__(self, outcome: ReviewResult | BaseException) -> None:
        self.outcome = outcome
        self.calls: list[dict[str, Any]] = []

    async def __call__(
        self, target: Any, settings: Any, options: ReviewOptions = PLAIN
    ) -> ReviewResult:
        self.calls.append({"target": target, **vars(options)})
        progress = options.progress
        if progress is not None:
            progress(Progress("preparing", 0, 0, Usage()))
            progress(Progress("waiting_for_model", 1, 0, Usage(total_tokens=10)))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome
