"""GitHub credentials (github/credentials.py): where the token comes from; it never shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from pr_review_api.github.client import GitHubClient, fetch_metadata
from pr_review_api.github.credentials import Credentials, TokenCredentials
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.github.support import BASE, HEAD, pull_ref


@pytest.mark.anyio
async def test_credentials_come_from_the_provider_object(fake_github: FakeGitHub) -> None:
    asked: list[int | None] = []

    class Installation:
        async def token(self, installation_id: int | None = None) -> SecretStr | None:
            asked.append(installation_id)
            return SecretStr(f"inst-{installation_id}")

        async def app_login(self) -> str | None:
            return "pr-review[bot]"

    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    assert isinstance(Installation(), Credentials)
    async with GitHubClient(settings, credentials=Installation()) as client:
        await fetch_metadata(pull_ref(fake_github), settings, client, installation_id=42)
        assert await client.login(42) == "pr-review[bot]"
    assert asked == [42]
    assert fake_github.api_requests()[0].authorization == "Bearer inst-42"
    assert not any(r.path.endswith("/user") for r in fake_github.api_requests())


@pytest.mark.anyio
async def test_token_credentials_never_show_the_token() -> None:
    credentials = TokenCredentials(SecretStr(GITHUB_TOKEN))
    assert GITHUB_TOKEN not in repr(credentials)
    assert GITHUB_TOKEN not in str(credentials)
    token = await credentials.token(7)
    assert token is not None
    assert token.get_secret_value() == GITHUB_TOKEN
