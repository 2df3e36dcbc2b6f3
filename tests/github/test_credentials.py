"""GitHub credentials (github/credentials.py): who a client is on GitHub, decided once; the
token never shows, and the API requests and the git fetch both follow the client's identity."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.client import GitHubClient, fetch_metadata
from pr_review_api.github.credentials import (
    Credentials,
    InstallationCredentials,
    TokenCredentials,
    credentials_for,
)
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.github.support import BASE, HEAD, pull_ref

BOUND_TOKEN = "ghs_bound-installation-token"


class Installation:
    """A bound identity other than the settings' token, counting the tokens it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def token(self) -> SecretStr | None:
        self.asked += 1
        return SecretStr(BOUND_TOKEN)

    async def app_login(self) -> str | None:
        return "pr-review[bot]"


@pytest.mark.anyio
async def test_credentials_come_from_the_provider_object(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    installation = Installation()
    assert isinstance(installation, Credentials)
    async with GitHubClient(settings, credentials=installation) as client:
        await fetch_metadata(pull_ref(fake_github), settings, client)
        assert await client.login() == "pr-review[bot]"
    assert installation.asked == 1
    assert fake_github.api_requests()[0].authorization == f"Bearer {BOUND_TOKEN}"
    assert not any(r.path.endswith("/user") for r in fake_github.api_requests())


@pytest.mark.anyio
async def test_the_fetch_uses_the_clients_identity_not_the_settings_token(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    async with (
        GitHubClient(settings, credentials=Installation()) as client,
        open_pull_request(pull.url, settings, client) as prepared,
    ):
        assert prepared.metadata.head_sha == pull.head_sha
    basic = base64.b64encode(f"x-access-token:{BOUND_TOKEN}".encode()).decode("ascii")
    fetches = fake_github.git_requests()
    assert fetches
    assert {r.authorization for r in fetches} == {f"Basic {basic}"}
    assert {r.authorization for r in fake_github.api_requests()} == {f"Bearer {BOUND_TOKEN}"}


@pytest.mark.anyio
async def test_token_credentials_never_show_the_token() -> None:
    credentials = TokenCredentials(SecretStr(GITHUB_TOKEN))
    assert GITHUB_TOKEN not in repr(credentials)
    assert GITHUB_TOKEN not in str(credentials)
    token = await credentials.token()
    assert token is not None
    assert token.get_secret_value() == GITHUB_TOKEN


def test_credentials_for_chooses_the_installation_only_with_the_app() -> None:
    settings = Settings(github_token=SecretStr(GITHUB_TOKEN))
    app = AppCredentials(1, rsa.generate_private_key(65537, 2048), settings.github_api_url)
    assert credentials_for(settings) == TokenCredentials(settings.github_token)
    assert credentials_for(settings, 42) == TokenCredentials(settings.github_token)
    assert credentials_for(settings, None, app=app) == TokenCredentials(settings.github_token)
    assert credentials_for(settings, 42, app=app) == InstallationCredentials(app, 42)
    assert credentials_for(Settings(), 42) == TokenCredentials(None)
