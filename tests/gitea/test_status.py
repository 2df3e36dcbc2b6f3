"""gitea/status.py: the merge gate's commit status on a pull request's head (specification §§16,
19), against the fake Gitea's statuses endpoint (write access to the code, Gitea's five states).
Whole reviews: tests/gitea/test_review.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.status import GITEA_STATUS, MAX_DESCRIPTION_CHARS, StatusReporter
from pr_review_api.model import Coverage
from pr_review_api.output.gate_outcome import (
    GateFinding,
    ended_outcome,
    review_outcome,
    skipped_outcome,
)
from pr_review_api.publishing.commit_status import RUNNING_DESCRIPTION
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.gitea.support import PATH, REVIEWER, pull_ref

HIGH = GateFinding("high", "a.py", 3, "Validation after write", "m", "f1")
COVERAGE = Coverage(changed_files=2, inspected_files=2)

Step = Callable[[StatusReporter], Awaitable[None]]


def pull_request(fake: FakeGitea, access: str = "write") -> PullFixture:
    fake.add_token(GITEA_TOKEN, REVIEWER)
    fake.grant(PATH, REVIEWER, access)  # type: ignore[arg-type]
    return fake.pull_request(PATH, 3, head={"a.py": "x = 1\n"})


def drive(fake: FakeGitea, pull: PullFixture, *steps: Step) -> None:
    settings = fake.settings(Path("unused"), token=GITEA_TOKEN)

    async def go() -> None:
        async with GiteaClient(settings) as gitea:
            reporter = StatusReporter(gitea, pull_ref(fake), pull.head_sha)
            for step in steps:
                await step(reporter)

    asyncio.run(go())


def posted(writes: GiteaWrites, pull: PullFixture) -> list[dict[str, Any]]:
    return writes.statuses.get((pull.repo.id, pull.head_sha), [])


def start() -> Step:
    async def step(reporter: StatusReporter) -> None:
        await reporter.start()

    return step


def complete(outcome: Any, url: str | None = None) -> Step:
    async def step(reporter: StatusReporter) -> None:
        await reporter.complete(outcome, url)

    return step


def test_pending_then_failure_at_fail_on_with_our_review_linked(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    outcome = review_outcome([HIGH], "high", (), COVERAGE, None)
    drive(fake_gitea, pull, start(), complete(outcome, pull.url + "#issuecomment-1"))

    first, last = posted(fake_gitea_writes, pull)
    assert (first["status"], first["context"], first["description"]) == (
        "pending",
        "pr-review",
        RUNNING_DESCRIPTION,
    )
    assert (last["status"], last["context"]) == ("failure", "pr-review")
    assert last["description"] == outcome.brief
    assert last["target_url"] == pull.url + "#issuecomment-1"


@pytest.mark.parametrize(
    ("outcome", "state", "starts"),
    [
        (review_outcome([HIGH], "none", (), COVERAGE, None), "success", ""),
        (ended_outcome("max_rounds", "none"), "success", "Neutral"),
        (ended_outcome("max_rounds", "high"), "failure", "Failed closed"),
        (ended_outcome("review_timeout", "high"), "failure", "Failed closed"),
        (skipped_outcome("skip_title", "none", True), "success", "Neutral"),
        (skipped_outcome("skip_title", "high", True), "failure", "Action required"),
    ],
)
def test_every_outcome_has_a_gitea_state_and_says_which_it_is(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites, outcome: Any, state: str, starts: str
) -> None:
    pull = pull_request(fake_gitea)
    drive(fake_gitea, pull, complete(outcome))

    [status] = posted(fake_gitea_writes, pull)
    assert status["status"] == state
    assert status["description"].startswith(starts)


def test_a_token_without_write_access_gives_the_gate_up_after_one_request(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea, "read")
    outcome = review_outcome([], "high", (), COVERAGE, None)
    drive(fake_gitea, pull, start(), complete(outcome))

    sent = [r for r in fake_gitea.api_requests() if "/statuses/" in r.path]
    assert [r.status for r in sent] == [403]
    assert posted(fake_gitea_writes, pull) == []


def test_an_unreachable_gitea_does_not_fail_the_review(fake_gitea: FakeGitea) -> None:
    pull = pull_request(fake_gitea)
    settings = fake_gitea.settings(Path("unused"), token=GITEA_TOKEN)
    fake_gitea.close()

    async def go() -> None:
        async with GiteaClient(settings) as gitea:
            reporter = StatusReporter(gitea, pull_ref(fake_gitea), pull.head_sha)
            await reporter.start()
            await reporter.complete(ended_outcome("max_rounds", "high"))

    asyncio.run(go())  # nothing raised


def test_the_description_is_one_line_of_bounded_size() -> None:
    payload = GITEA_STATUS.payload("success", "a\nb\x1b[31m " + "x" * 400, "u" * 3000)
    assert payload["description"].startswith("a b [31m x")
    assert len(payload["description"]) == MAX_DESCRIPTION_CHARS
    assert payload["description"].endswith("…")
    assert "target_url" not in payload
