"""Who a job is on the forges (forge/clients.py): with the GitHub App configured, a GitHub job
without an installation has no identity and is refused before any request; GitLab's jobs and a
deployment without the App are unchanged."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError
from pr_review_api.forge.clients import JobIdentities
from pr_review_api.github.credentials import InstallationCredentials, TokenCredentials
from pr_review_api.settings import Settings
from tests.fakes.github_app import app_key

TOKEN = SecretStr("ghp_x")


def app_settings(tmp_path: Path) -> Settings:
    _, pem = app_key(tmp_path)
    return Settings(github_app_id=1, github_app_private_key_file=pem, github_token=TOKEN)


def test_with_the_app_a_github_job_without_an_installation_is_refused(tmp_path: Path) -> None:
    settings = app_settings(tmp_path)
    identities = JobIdentities(settings)
    assert identities.has_identity(4242)
    assert not identities.has_identity(None)

    async def without() -> None:
        async with identities.github(settings, None):
            raise AssertionError("a client was made")

    with pytest.raises(ConfigurationError, match="no App installation"):
        asyncio.run(without())

    async def review_clients(url: str, installation: int | None) -> tuple[object, object]:
        async with identities.review_clients(settings, installation, url) as (github, gitlab):
            return (github and github.credentials), gitlab

    credentials, _ = asyncio.run(review_clients("https://github.com/a/b/pull/1", 4242))
    assert isinstance(credentials, InstallationCredentials)
    assert credentials.installation_id == 4242
    # GitLab has no installations: its jobs speak as GITLAB_TOKEN, App or not.
    _, gitlab = asyncio.run(review_clients("https://gitlab.com/a/b/-/merge_requests/1", None))
    assert gitlab is not None


def test_without_the_app_every_github_job_is_github_tokens() -> None:
    settings = Settings(github_token=TOKEN)
    identities = JobIdentities(settings)
    assert identities.has_identity(None)
    assert identities.has_identity(7)  # a delivery's installation without the App: no token

    async def credentials() -> object:
        async with identities.github(settings, 7) as github:
            return github.credentials

    assert isinstance(asyncio.run(credentials()), TokenCredentials)
