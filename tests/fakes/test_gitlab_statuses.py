"""The fake GitLab's commit statuses hold GitLab's rules (tests/fakes/gitlab_statuses.py): a
lenient fake would let a Reporter's token, an unknown commit, an overlong description or a
repeated `running` pass the merge gate's tests."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_statuses import FakeStatuses

PATH = "grp/widget"


@pytest.fixture
def mr(fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses) -> MergeRequestFixture:
    fake_gitlab.users[GITLAB_TOKEN] = "bot"
    return fake_gitlab.merge_request(PATH, 1)


def post(
    fake: FakeGitLab, sha: str, document: dict[str, Any], token: str | None = GITLAB_TOKEN
) -> httpx.Response:
    headers = {} if token is None else {"PRIVATE-TOKEN": token}
    return httpx.post(
        f"{fake.api_url}/projects/grp%2Fwidget/statuses/{sha}", json=document, headers=headers
    )


def test_who_may_set_a_status_and_on_what(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, mr: MergeRequestFixture
) -> None:
    running = {"state": "running", "name": "pr-review"}
    assert post(fake_gitlab, mr.head_sha, running, token=None).status_code == 401
    fake_gitlab_statuses.levels["bot"] = 20
    assert post(fake_gitlab, mr.head_sha, running).json() == {"message": "403 Forbidden"}
    fake_gitlab_statuses.levels["bot"] = 30
    assert post(fake_gitlab, "f" * 40, running).json() == {"message": "404 Commit Not Found"}
    assert post(fake_gitlab, mr.head_sha, running).status_code == 201
    assert [s.status for s in fake_gitlab_statuses.on(mr.head_sha)] == ["running"]


@pytest.mark.parametrize(
    "document",
    [
        {"state": "done"},
        {"name": "pr-review"},
        {"state": "success", "description": "x" * 256},
        {"state": "success", "target_url": "javascript:alert(1)"},
        {"state": "success", "target_url": "https://e.x/" + "y" * 250},
    ],
)
def test_invalid_fields_are_400(
    fake_gitlab: FakeGitLab,
    fake_gitlab_statuses: FakeStatuses,
    mr: MergeRequestFixture,
    document: dict[str, Any],
) -> None:
    assert post(fake_gitlab, mr.head_sha, document).status_code == 400
    assert fake_gitlab_statuses.statuses == []


def test_the_state_machine_refuses_a_repeated_active_state_and_starts_anew_after_a_finish(
    fake_gitlab: FakeGitLab, fake_gitlab_statuses: FakeStatuses, mr: MergeRequestFixture
) -> None:
    def send(state: str) -> int:
        return post(fake_gitlab, mr.head_sha, {"state": state, "name": "pr-review"}).status_code

    assert [send("pending"), send("pending")] == [201, 400]
    assert [send("running"), send("running"), send("pending")] == [201, 400, 400]
    assert [send("success"), send("success"), send("running"), send("failed")] == [201] * 4
    # pending -> running -> success moved one status; then a new one finished, and a third.
    assert [s.status for s in fake_gitlab_statuses.on(mr.head_sha)] == [
        "success",
        "success",
        "failed",
    ]
    other = post(fake_gitlab, mr.head_sha, {"state": "failed", "name": "x"})
    assert other.status_code == 201  # another name is another status
    body = post(fake_gitlab, mr.head_sha, {"state": "running", "name": "x"}).json()
    assert body["status"] == "running"  # `x` had finished: a new status
    again = post(fake_gitlab, mr.head_sha, {"state": "running", "name": "x"}).json()
    assert again["message"].startswith("Cannot transition status via :run from :running")
