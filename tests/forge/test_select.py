"""forge/select.py: a change's URL picks its forge, which speaks through the caller's client
(never closed here) or through one of its own, closed when the review ends; a command job's
comments are picked the same way, through a client of the job's identity."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr_review_api.errors import GitHubUnavailable, GitLabUnavailable
from pr_review_api.forge.clients import ForgeClients, JobIdentities
from pr_review_api.forge.comments import Command
from pr_review_api.forge.github import GitHubForge
from pr_review_api.forge.github_comments import GitHubComments
from pr_review_api.forge.gitlab import GitLabForge
from pr_review_api.forge.gitlab_comments import GitLabComments
from pr_review_api.forge.select import open_comments, open_forge
from pr_review_api.github.client import GitHubClient
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub

SERVER = "http://127.0.0.1:9000"
PULL = f"{SERVER}/acme/widget/pull/4"
MERGE = f"{SERVER}/acme/ui/widget/-/merge_requests/4"


def test_each_url_goes_to_its_forge_through_the_callers_client() -> None:
    settings = Settings(github_server_url=SERVER, gitlab_server_url=SERVER)

    async def main() -> None:
        async with GitHubClient(settings) as github, GitLabClient(settings) as gitlab:
            lent = ForgeClients((github, gitlab))
            async with open_forge(MERGE, settings, clients=lent) as merge:
                assert isinstance(merge, GitLabForge)
                assert merge.client is gitlab
                assert merge.name == "gitlab"
                assert merge.unavailable is GitLabUnavailable
            async with open_forge(PULL, settings, clients=lent) as pull:
                assert isinstance(pull, GitHubForge)
                assert pull.client is github
                assert pull.name == "github"
                assert pull.unavailable is GitHubUnavailable

    asyncio.run(main())


def test_a_shared_client_outlives_the_forge_and_an_own_one_is_closed(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.users[GITHUB_TOKEN] = "pr-review-bot"
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    url = f"{fake_github.server_url}/acme/widget/pull/4"

    async def main() -> None:
        async with GitHubClient(settings) as shared:
            async with open_forge(url, settings, clients=ForgeClients((shared,))) as forge:
                assert isinstance(forge, GitHubForge)
                assert await forge.client.login() == "pr-review-bot"
            # Still open: the caller's pool outlives the forge.
            assert shared._http is not None  # the pool itself
        async with open_forge(url, settings) as own:
            assert isinstance(own, GitHubForge)
            assert own.client is not shared
            response = await own.client.request("GET", f"{settings.github_api_url}/user")
            assert response.status == 200
        assert own.client._http is None  # the own pool: closed with the forge

    asyncio.run(main())


@dataclass(frozen=True)
class _Record:
    """What jobs/records.py's `JobRecord` carries for a command job."""

    pull_request_url: str
    owner: str
    repo: str
    number: int
    installation_id: int | None
    command: dict[str, Any] | None


def _comment(author: str, **extra: Any) -> dict[str, Any]:
    return {
        "comment_id": 31,
        "body": "/pr-review why?",
        "author": author,
        "review_comment": True,
        "in_reply_to_id": 30,
        "text": "why?",
        **extra,
    }


def test_a_command_job_speaks_through_its_changes_forge_and_ignores_ours_and_bots(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.users[GITHUB_TOKEN] = "pr-review-bot"
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    identities = JobIdentities(settings)  # no App configured: GITHUB_TOKEN's identity
    pull = f"{fake_github.server_url}/acme/widget/pull/4"

    async def command_of(raw: dict[str, Any] | None) -> Command | None:
        record = _Record(pull, "acme", "widget", 4, None, raw)
        async with open_comments(record, settings, identities) as comments:
            assert isinstance(comments, GitHubComments)
            assert comments.clients() == ForgeClients((comments.client,))
            assert comments.dismissals_key == "acme/widget"
            return await comments.command()

    async def main() -> list[Command | None]:
        return [
            await command_of(_comment("alice")),
            await command_of(_comment("pr-review-bot")),  # our own comment
            await command_of(_comment("Dependabot[bot]")),
            await command_of({"comment_id": "x", "author": "alice"}),  # not a delivery's
            await command_of(None),
        ]

    assert asyncio.run(main()) == [Command("alice", "why?"), None, None, None, None]
    # Each job asks who it is once, with its identity's token, before deciding to ignore.
    asked = [r for r in fake_github.requests if r.path.endswith("/user")]
    assert [r.authorization for r in asked] == [f"Bearer {GITHUB_TOKEN}"] * 5


def test_a_merge_requests_command_job_gets_gitlabs_comments() -> None:
    settings = Settings(github_server_url=SERVER, gitlab_server_url=SERVER)
    record = _Record(MERGE, "acme/ui", "widget", 4, 11, {"comment_id": 5})

    async def main() -> None:
        async with open_comments(record, settings, JobIdentities(settings)) as comments:
            assert isinstance(comments, GitLabComments)
            lent = comments.clients()
            gitlab = lent.of(GitLabClient)
            assert gitlab is comments.client
            assert lent.of(GitHubClient) is None  # no App installation on GitLab
            assert comments.dismissals_key == "gitlab:acme/ui/widget"
            assert gitlab._http is None  # no request asked: its pool opens on first use

    asyncio.run(main())
