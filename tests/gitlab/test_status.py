"""gitlab/status.py: the merge gate's commit status on a merge request's head (specification §§16,
17), against the fake GitLab's statuses endpoint and its rules (Developer or more, a commit of the
project, GitLab's state machine). Whole reviews: tests/forge/test_gitlab.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.status import GITLAB_STATUS, MAX_DESCRIPTION_CHARS, StatusReporter
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.model import Coverage
from pr_review_api.output.gate_outcome import (
    CheckOutcome,
    GateFinding,
    ended_outcome,
    review_outcome,
    skipped_outcome,
)
from pr_review_api.publishing.commit_status import RUNNING_DESCRIPTION
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_statuses import FakeStatuses

BOT = "pr-review-bot"
PROJECT = "grp/sub/widget"
IID = 3
NOTE_URL = "note"  # a marker: the test replaces it with the merge request's note URL
HIGH = GateFinding("high", "a.py", 3, "Validation after write", "m", "f1")
LOW = GateFinding("low", "a.py", 4, "Returned unchecked", "m", "f2")
COVERAGE = Coverage(changed_files=2, inspected_files=2)

Step = Callable[[StatusReporter], Awaitable[None]]


def merge_request(fake: FakeGitLab) -> MergeRequestFixture:
    fake.users.setdefault(GITLAB_TOKEN, BOT)
    return fake.merge_request(PROJECT, IID, head={"a.py": "x = 1\n"})


def drive(
    fake: FakeGitLab, tmp_path: Path, mr: MergeRequestFixture, *steps: Step, head: str = ""
) -> None:
    """One reporter on the head (or `head`), through the steps in order."""
    settings = fake.settings(tmp_path / "cache", token=GITLAB_TOKEN)
    ref = parse_merge_request_url(mr.url, settings)

    async def go() -> None:
        async with GitLabClient(settings) as gitlab:
            reporter = StatusReporter(gitlab, ref, head or mr.head_sha)
            for step in steps:
                await step(reporter)

    asyncio.run(go())


def start() -> Step:
    async def step(reporter: StatusReporter) -> None:
        await reporter.start()

    return step


def complete(outcome: CheckOutcome, url: str | None = None) -> Step:
    async def step(reporter: StatusReporter) -> None:
        await reporter.complete(outcome, url)

    return step


def test_running_then_failed_with_counts_coverage_and_our_note(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, tmp_path: Path
) -> None:
    mr = merge_request(fake_gitlab)
    outcome = review_outcome([HIGH, LOW], "high", (), COVERAGE, None)
    note = f"{mr.url}#note_1001"
    drive(fake_gitlab, tmp_path, mr, start(), complete(outcome, note))
    assert [a.answer for a in fake_gitlab_statuses.attempts] == [201, 201]
    assert [a.payload["state"] for a in fake_gitlab_statuses.attempts] == ["running", "failed"]
    (status,) = fake_gitlab_statuses.on(mr.head_sha)  # GitLab moved the one running status
    assert status.status == "failed"
    assert status.author == BOT
    assert status.target_url == note
    assert status.description == (
        "Findings at or above high: 1 high, 1 low; inspected 2 of 2 changed files; "
        "the gate fails on high or above."
    )
    first = fake_gitlab_statuses.attempts[0].payload
    assert first == {"state": "running", "name": "pr-review", "description": RUNNING_DESCRIPTION}


def test_success_below_fail_on_and_neutral_is_success_saying_why(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, tmp_path: Path
) -> None:
    mr = merge_request(fake_gitlab)
    passed = review_outcome([LOW], "high", (), COVERAGE, None)
    drive(fake_gitlab, tmp_path, mr, start(), complete(passed))
    skipped = skipped_outcome("a label matches skip_labels", "none", author_controlled=True)
    drive(fake_gitlab, tmp_path, mr, complete(skipped))
    drive(fake_gitlab, tmp_path, mr, start(), complete(ended_outcome("review_timeout", "none")))
    statuses = fake_gitlab_statuses.on(mr.head_sha)
    assert [s.status for s in statuses] == ["success", "success", "success"]
    assert statuses[0].description is not None
    assert statuses[0].description.startswith("1 finding: 1 low;")
    assert statuses[1].description == (
        "Neutral, skipped: a label matches skip_labels (.pr-review.toml); no review ran."
    )
    assert statuses[2].description is not None
    assert statuses[2].description.startswith("Neutral: the review ended without a final review")
    assert all(s.target_url is None for s in statuses)  # no note: no link
    assert all(a.answer == 201 for a in fake_gitlab_statuses.attempts)


def test_the_gate_failing_closed_is_failed_saying_why(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, tmp_path: Path
) -> None:
    mr = merge_request(fake_gitlab)
    skipped = skipped_outcome("the title contains a skip_title string", "high", True)
    drive(fake_gitlab, tmp_path, mr, complete(skipped))
    drive(fake_gitlab, tmp_path, mr, start(), complete(ended_outcome("review_timeout", "high")))
    drive(fake_gitlab, tmp_path, mr, start(), complete(ended_outcome("max_tool_calls", "high")))
    statuses = fake_gitlab_statuses.on(mr.head_sha)
    assert [s.status for s in statuses] == ["failed", "failed", "failed"]
    descriptions = [s.description or "" for s in statuses]
    assert descriptions[0].startswith("Action required (failing), skipped: the title contains")
    assert descriptions[1].startswith("Failed closed: no validated review (review_timeout)")
    assert "max_tool_calls" in descriptions[2]
    assert "/pr-review review" in descriptions[2]


def test_the_same_state_twice_is_tolerated_and_the_status_still_completes(
    fake_gitlab: FakeGitLab,
    fake_gitlab_statuses: FakeStatuses,
    tmp_path: Path,
) -> None:
    mr = merge_request(fake_gitlab)
    outcome = review_outcome([], "high", (), COVERAGE, None)
    # A job run again on the same head: its reporter starts a status that is still running.
    drive(fake_gitlab, tmp_path, mr, start())
    drive(fake_gitlab, tmp_path, mr, start(), complete(outcome))
    assert [a.answer for a in fake_gitlab_statuses.attempts] == [201, 400, 201]
    (status,) = fake_gitlab_statuses.on(mr.head_sha)
    assert status.status == "success"


@pytest.mark.parametrize("refusal", ["reporter", "unknown commit", "anonymous"])
def test_a_refused_status_gives_the_gate_up_quietly(
    fake_gitlab: FakeGitLab,
    fake_gitlab_statuses: FakeStatuses,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    refusal: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    mr = merge_request(fake_gitlab)
    head = "f" * 40 if refusal == "unknown commit" else ""
    if refusal == "reporter":
        fake_gitlab_statuses.levels[BOT] = 20  # Reporter: may comment, may not set statuses
    if refusal == "anonymous":
        fake_gitlab_statuses.answer = 401
    outcome = review_outcome([HIGH], "high", (), COVERAGE, None)
    drive(fake_gitlab, tmp_path, mr, start(), complete(outcome), head=head)
    expected = {"reporter": 403, "unknown commit": 404, "anonymous": 401}[refusal]
    # One refusal, then nothing more is asked of GitLab for this review.
    assert [a.answer for a in fake_gitlab_statuses.attempts] == [expected]
    assert fake_gitlab_statuses.statuses == []
    ours = [r for r in caplog.records if r.name.startswith("pr_review_api")]
    logged = "\n".join(r.getMessage() for r in ours)
    assert f"GitLab refused the commit status (status {expected}" in logged
    assert GITLAB_TOKEN not in logged
    assert "Forbidden" not in logged  # GitLab's body stays out
    assert "Commit Not Found" not in logged


def test_an_outage_is_logged_and_each_step_still_tries(
    fake_gitlab: FakeGitLab,
    fake_gitlab_statuses: FakeStatuses,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    mr = merge_request(fake_gitlab)
    fake_gitlab_statuses.answer = 502
    outcome = review_outcome([], "none", (), COVERAGE, None)
    drive(fake_gitlab, tmp_path, mr, start(), complete(outcome))
    assert [a.answer for a in fake_gitlab_statuses.attempts] == [502, 502]
    assert "GitLab refused the commit status (status 502)" in caplog.text


def test_a_long_description_is_cut_to_255_and_a_long_url_left_out(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, tmp_path: Path
) -> None:
    mr = merge_request(fake_gitlab)
    long = CheckOutcome("success", "T", "S", brief="word " * 100 + "\x1b[31m\nend")
    url = f"{mr.url}#note_{'1' * 300}"
    drive(fake_gitlab, tmp_path, mr, complete(long, url))
    (attempt,) = fake_gitlab_statuses.attempts
    assert attempt.answer == 201  # the fake refuses a description or URL over 255
    assert len(attempt.payload["description"]) == MAX_DESCRIPTION_CHARS
    assert attempt.payload["description"].endswith("…")
    assert "target_url" not in attempt.payload


def description_text(text: str) -> str:
    description: str = GITLAB_STATUS.payload("success", text, None)["description"]
    return description


def test_description_text_is_one_clean_line_of_at_most_255() -> None:
    assert description_text("a\nb\tc\x00d\u202ee") == "a b c d e"
    assert description_text("x" * 255) == "x" * 255
    cut = description_text("é" * 300)
    assert len(cut) == 255
    assert cut == "é" * 254 + "…"
