"""Progress lines (cli/progress.py): only on a terminal, naming the round, tool calls and tokens."""

from __future__ import annotations

import json
import sys

import pytest

from pr_review_api.cli import commands as cli
from pr_review_api.cli.progress import StatusLine, describe_progress
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


def test_the_wait_for_the_model_shows_the_seconds_it_has_lasted() -> None:
    now = [100.0]
    line = StatusLine(clock=lambda: now[0])
    line.update(Progress("waiting_for_model", 1, 0, Usage()))
    now[0] += 42.7
    assert str(line) == "Round 1: waiting for the model, 42 s · 0 tool calls · 0 tokens"
    line.update(Progress("waiting_for_model", 1, 0, Usage(total_tokens=10)))  # same wait
    now[0] += 83
    assert str(line).startswith("Round 1: waiting for the model, 2 min 05 s ·")
    line.update(Progress("running_tools", 1, 2, Usage(total_tokens=10)))
    now[0] += 30
    assert str(line) == "Round 1: running tool calls · 2 tool calls · 10 tokens"  # untimed
    line.update(Progress("waiting_for_model", 2, 2, Usage(total_tokens=10)))  # a new wait
    now[0] += 3
    assert str(line) == "Round 2: waiting for the model, 3 s · 2 tool calls · 10 tokens"


def test_the_status_line_is_plain_text_for_rich() -> None:
    line = StatusLine(clock=lambda: 0.0)
    line.update(Progress("waiting_for_model", 1, 0, Usage()))
    rendered = line.__rich__()
    assert rendered.plain == str(line)
    assert not rendered.spans
