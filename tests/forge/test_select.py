"""forge/select.py: a change's URL picks its forge, which speaks through the caller's client
(never closed here) or through one of its own, closed when the review ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pr_review_api.errors import GitHubUnavailable, GitLabUnavailable
from pr_review_api.forge.github import GitHubForge
from pr_review_api.forge.gitlab import GitLabForge
from pr_review_api.forge.select import open_forge
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
            async with open_forge(MERGE, settings, github=github, gitlab=gitlab) as merge:
                assert isinstance(merge, GitLabForge)
                assert merge.gitlab is gitlab
                assert merge.name == "gitlab"
                assert merge.unavailable is GitLabUnavailable
            async with open_forge(PULL, settings, github=github, gitlab=gitlab) as pull:
                assert isinstance(pull, GitHubForge)
                assert pull.github is github
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
            async with open_forge(url, settings, github=shared) as forge:
                assert isinstance(forge, GitHubForge)
                assert await forge.github.login() == "pr-review-bot"
            # Still open: the caller's pool outlives the forge.
            assert shared._http is not None  # the pool itself
        async with open_forge(url, settings) as own:
            assert isinstance(own, GitHubForge)
            assert own.github is not shared
            response = await own.github.request("GET", f"{settings.github_api_url}/user")
            assert response.status == 200
        assert own.github._http is None  # the own pool: closed with the forge

    asyncio.run(main())
