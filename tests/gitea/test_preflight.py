"""gitea/preflight.py: whether `--post` can publish, asked before the model (specification §§10,
19), against the fake Gitea: no token, a token Gitea refuses, a token whose user may only read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pr_review_api.errors import ConfigurationError, GiteaPublishNotPossible
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.preflight import NO_WRITE, REFUSED, ensure_can_publish
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea
from tests.gitea.support import PATH, REVIEWER, pull_ref


def preflight(fake: FakeGitea, settings: Settings) -> None:
    async def go() -> None:
        async with GiteaClient(settings) as gitea:
            await ensure_can_publish(gitea, pull_ref(fake))

    asyncio.run(go())


@pytest.fixture
def fake(fake_gitea: FakeGitea) -> FakeGitea:
    fake_gitea.add_token(GITEA_TOKEN, REVIEWER)
    fake_gitea.pull_request(PATH, 3)
    return fake_gitea


def test_a_writer_may_publish(fake: FakeGitea, fake_gitea_writes: object) -> None:
    fake.grant(PATH, REVIEWER, "write")
    preflight(fake, fake.settings(Path("unused"), token=GITEA_TOKEN))
    assert [r.path.rsplit("/api/v1", 1)[1] for r in fake.api_requests()] == [
        "/user",
        f"/repos/{PATH}",
    ]


def test_no_token_is_a_configuration_error(fake: FakeGitea) -> None:
    with pytest.raises(ConfigurationError):
        preflight(fake, fake.settings(Path("unused")))
    assert fake.requests == []


def test_a_token_gitea_refuses(fake: FakeGitea) -> None:
    with pytest.raises(GiteaPublishNotPossible) as refused:
        preflight(fake, fake.settings(Path("unused"), token="not-a-token"))
    assert (refused.value.code, refused.value.message) == ("gitea_publish_failed", REFUSED)
    assert "not-a-token" not in refused.value.message


def test_a_token_that_may_only_read(fake: FakeGitea, fake_gitea_writes: object) -> None:
    fake.grant(PATH, REVIEWER, "read")
    with pytest.raises(GiteaPublishNotPossible) as reader:
        preflight(fake, fake.settings(Path("unused"), token=GITEA_TOKEN))
    assert (reader.value.status, reader.value.message) == (422, NO_WRITE)
