"""Progress lines (cli/progress.py): only on a terminal, naming the round, tool calls and tokens."""

from __future__ import annotations

import json
import sys

import pytest

from pr_review_api.cli import commands as cli
from pr_review_api.cli.progress import describe_progress
from pr_review_api.loop.run import Progress
from pr_review_api.model import Usage
from tests.cli.support import FakeRunReview, run
from tests.results import PR_URL, review_result


@pytest.mark.usefixtures("with_key")
def test_progress_is_reported_only_when_stderr_is_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRunReview(review_result())
    monkeypatch.setattr(cli, "run_review", fake)
    monkeypatch.setattr(cli, "_is_terminal", lambda stream: stream is sys.stderr)
    result = run("review", PR_URL, "--format", "json")
    assert result.exit_code == 0
    assert callable(fake.calls[0]["progress"])
    assert json.loads(result.stdout)["termination_reason"] == "final_review"  # stdout stays clean


def test_progress_lines_name_the_round_tool_calls_and_tokens() -> None:
    assert describe_progress(Progress("preparing", 0, 0, Usage())) == (
        "Reviewing: preparing the repository"
    )
    assert describe_progress(Progress("running_tools", 2, 1, Usage(total_tokens=4380))) == (
        "Round 2: running tool calls · 1 tool call · 4,380 tokens"
    )
    assert describe_progress(Progress("waiting_for_model", 3, 5, Usage())) == (
        "Round 3: waiting for the model · 5 tool calls · 0 tokens"
    )
