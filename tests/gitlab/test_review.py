"""A GitLab merge request reviewed end to end (specification §17) without publishing: a nested group
on a self-managed server under a path prefix and a non-default port, real git, the fake GitLab
and the scripted provider, through the command line and the HTTP API. Publishing (--post):
tests/forge/test_gitlab.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import GitHubUnavailable, GitLabUnavailable, InvalidRepository
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.gitlab.client import TOKEN_NEEDED_MESSAGE
from pr_review_api.loop.workspace import Prepared
from pr_review_api.model import Forge, PullRequestInfo
from pr_review_api.tools.execute import REPOSITORY_UNREADABLE
from tests.conftest import GITLAB_TOKEN
from tests.environment import Environment
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.github.support import Launch, our_git
from tests.in_process import service
from tests.reviewed import (
    REVIEW,
    assert_diff_reached_the_model,
    assert_reviewed,
    review_cli,
    settings_for,
)
from tests.tools.git_failures import FAILURES, failing

# Whole reviews through the CLI, the service and the fakes: the default run, not --fast.
pytestmark = pytest.mark.e2e

PATH = "grp/sub/project"
BASE = {"src/service.py": "def save(w):\n    db.write(w)\n", "README.md": "# project\n"}
HEAD = {
    "src/service.py": "def save(w):\n    db.write(w)\n    validate(w)\n",
    "README.md": "# project\n",
}


def publish(fake: FakeGitLab, *, private: bool = True) -> MergeRequestFixture:
    fake.users[GITLAB_TOKEN] = "pr-review-bot"
    return fake.merge_request(
        PATH,
        3,
        base=BASE,
        head=HEAD,
        private=private,
        title="Validate widgets",
        description="Adds validation.",
        author="alice",
    )


def assert_reviewed_merge_request(document: dict[str, Any], mr: MergeRequestFixture) -> None:
    """The review of the merge request !3 of grp/sub/project, at the fixture's commits, of
    its one changed file."""
    named = {"url": mr.url, "owner": "grp/sub", "repo": "project", "number": 3, "forge": "gitlab"}
    revisions = {"base_sha": mr.start_sha, "head_sha": mr.head_sha, "merge_base_sha": mr.base_sha}
    assert_reviewed(document, named, revisions)
    assert document["coverage"]["changed_files"] == 1


def assert_no_token_anywhere(fake: FakeGitLab, *texts: str) -> None:
    for text in texts:
        assert GITLAB_TOKEN not in text
    for request in fake.requests:
        assert GITLAB_TOKEN not in request.path + request.query


# --- reviewed ---


def test_a_merge_request_is_reviewed_through_the_cli(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    launches: list[Launch],
    environment: Environment,
) -> None:
    mr = publish(fake_gitlab)
    assert fake_gitlab.port not in (80, 443)
    scripted_provider.script(tool_call_turn([("d1", "inspect_git_diff", {})]), stop_turn(REVIEW))
    environment(
        scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", REVIEW_TIMEOUT_SECONDS="60"
    )
    result = review_cli(mr.url + "/diffs?view=parallel", "--format", "json")
    assert result.exit_code == 0, result.output
    assert_reviewed_merge_request(json.loads(result.stdout), mr)
    assert_diff_reached_the_model(scripted_provider)
    scripted_provider.assert_complete()
    # GitLab saw the token where it belongs: the API's PRIVATE-TOKEN, git's oauth2 credentials.
    assert {r.private_token for r in fake_gitlab.api_requests()} == {GITLAB_TOKEN}
    assert all(r.authorization.startswith("Basic ") for r in fake_gitlab.git_requests())  # type: ignore[union-attr]
    assert our_git(launches)
    for launch in launches:  # no process's command line ever held it
        assert not any(GITLAB_TOKEN in arg for arg in launch.argv)
    assert_no_token_anywhere(fake_gitlab, result.stdout, result.stderr)


def test_a_public_merge_request_is_reviewed_without_a_token(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    mr = publish(fake_gitlab, private=False)
    scripted_provider.script(stop_turn(REVIEW))
    environment(
        scripted_provider,
        gitlab=fake_gitlab,
        cache=tmp_path / "cache",
        GITLAB_TOKEN=None,
        REVIEW_TIMEOUT_SECONDS="60",
    )
    result = review_cli(mr.url, "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "Validation after write" in result.stdout
    assert {r.private_token for r in fake_gitlab.requests} == {None}
    assert {r.authorization for r in fake_gitlab.requests} == {None}


@pytest.mark.anyio
async def test_a_merge_request_is_reviewed_through_the_http_api(
    fake_gitlab: FakeGitLab, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    mr = publish(fake_gitlab)
    scripted_provider.script(
        tool_call_turn([("d1", "inspect_git_diff", {})]),
        stop_turn(REVIEW),
        tool_call_turn([("d1", "inspect_git_diff", {})]),
        stop_turn(REVIEW),
    )
    async with service(
        settings_for(fake_gitlab, scripted_provider, tmp_path / "c", GITLAB_TOKEN)
    ) as client:
        first = await client.post("/v1/reviews", json={"pull_request_url": mr.url})
        second = await client.post("/v1/reviews", json={"pull_request_url": mr.url + "/"})
    assert first.status_code == 200, first.text
    assert_reviewed_merge_request(first.json(), mr)
    assert second.json() == first.json()  # the same review of the same pinned commits
    # The second review found both commits in the cache: one fetch, two metadata reads.
    assert sum(r.path.endswith("/info/refs") for r in fake_gitlab.git_requests()) == 1
    assert len(fake_gitlab.api_requests()) == 2
    assert_no_token_anywhere(fake_gitlab, first.text)


# --- refused, with the contract's codes ---


@pytest.mark.anyio
async def test_a_private_project_without_a_token_is_a_fixed_gitlab_unavailable(
    fake_gitlab: FakeGitLab, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    mr = publish(fake_gitlab)
    settings = settings_for(fake_gitlab, scripted_provider, tmp_path / "c", None)
    async with service(settings) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": mr.url})
    assert response.status_code == 502
    assert response.json() == {
        "error": {"code": "gitlab_unavailable", "message": TOKEN_NEEDED_MESSAGE},
        "termination_reason": None,
        "trace": None,
    }
    assert fake_gitlab.api_requests()[0].status == 401
    assert fake_gitlab.git_requests() == []
    assert scripted_provider.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("iid", "status", "code", "http_status"),
    [
        (9, None, "pull_request_not_found", 404),
        (3, 500, "gitlab_unavailable", 502),
        (3, 503, "gitlab_unavailable", 502),
    ],
)
async def test_gitlab_failures_answer_the_contracts_codes(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    iid: int,
    status: int | None,
    code: str,
    http_status: int,
) -> None:
    mr = publish(fake_gitlab)
    if status is not None:
        fake_gitlab.respond(PATH, 3, status, f'{{"message":"{GITLAB_TOKEN} /srv/secret"}}')
    url = mr.url.replace("/merge_requests/3", f"/merge_requests/{iid}")
    async with service(
        settings_for(fake_gitlab, scripted_provider, tmp_path / "c", GITLAB_TOKEN)
    ) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": url})
    assert response.status_code == http_status, response.text
    assert response.json()["error"]["code"] == code
    assert "/srv/secret" not in response.text
    assert_no_token_anywhere(fake_gitlab, response.text)
    assert fake_gitlab.git_requests() == []
    assert scripted_provider.requests == []


def test_a_missing_merge_request_exits_1_from_the_cli(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    mr = publish(fake_gitlab)
    environment(
        scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", REVIEW_TIMEOUT_SECONDS="60"
    )
    result = review_cli(mr.url.replace("/3", "/4"), "--format", "json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["code"] == "pull_request_not_found"
    assert scripted_provider.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "https://gitlab.com/grp/sub/project/-/merge_requests/3",  # not GITLAB_SERVER_URL
        "{server}/grp/-/merge_requests/3",  # no project
        "{server}/grp/sub/project/-/merge_requests/0",
        "{server}/grp/sub/-project/-/merge_requests/3",
    ],
)
def test_a_merge_request_url_off_the_server_is_refused_before_any_request(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    url: str,
    environment: Environment,
) -> None:
    environment(
        scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", REVIEW_TIMEOUT_SECONDS="60"
    )
    result = review_cli(url.format(server=fake_gitlab.server_url), "--format", "json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["code"] == "invalid_pull_request_url"
    assert fake_gitlab.requests == []


# --- git failures while a merge request is read ---


def test_a_merge_requests_git_failures_are_gitlabs() -> None:
    """`Prepared.unreadable`: what a git failure reading the pinned commits becomes."""
    kinds: dict[str, type[Exception]] = {}
    forges: tuple[Forge, ...] = ("github", "gitlab")
    for forge in forges:
        info = PullRequestInfo(url="u", owner="o", repo="r", number=1, forge=forge)
        kinds[forge] = Prepared(None, info, None).unreadable  # type: ignore[arg-type]
    kinds["local"] = Prepared(None, None, None).unreadable  # type: ignore[arg-type]
    assert kinds == {
        "github": GitHubUnavailable,
        "gitlab": GitLabUnavailable,
        "local": InvalidRepository,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["tool", "pinning"])
async def test_a_git_failure_during_a_merge_request_review_is_gitlab_unavailable(
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    mr = publish(fake_gitlab)
    if where == "tool":
        scripted_provider.script(tool_call_turn([("d1", "inspect_git_diff", {})]))
        monkeypatch.setattr(PinnedRepository, "diff", failing("diff", FAILURES["git_error"]))
    else:
        monkeypatch.setattr(PinnedRepository, "open", failing("open", FAILURES["os_error"]))
    async with service(
        settings_for(fake_gitlab, scripted_provider, tmp_path / "c", GITLAB_TOKEN)
    ) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": mr.url})
    assert response.status_code == 502, response.text
    assert response.json()["error"] == {
        "code": "gitlab_unavailable",
        "message": REPOSITORY_UNREADABLE,
    }
    assert str(tmp_path) not in response.text
    assert len(scripted_provider.requests) == (1 if where == "tool" else 0)
