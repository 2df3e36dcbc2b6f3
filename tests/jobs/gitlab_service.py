"""The service and a real worker on the test's PostgreSQL database, beside the fake GitLab: what
every end-to-end GitLab job test runs against (the `gitlab_service` fixture of
tests/jobs/conftest.py).

`GitLabScene` (the `gitlab` fixture) is a comment or webhook job test's world: the fake and its
notes, the scripted provider, the service and the settings of a review by that provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from pr_review_api.settings import Settings
from tests.conftest import GITLAB_TOKEN, PROVIDER_KEY
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.provider_server import ScriptedProvider
from tests.jobs.forge_service import ForgeService, Result, scripted_without_github
from tests.jobs.test_gitlab_webhooks import TOKEN, deliver

BOT = "pr-review-bot"  # the username GITLAB_TOKEN speaks as


@dataclass
class GitLabService(ForgeService):
    """Settings for the service on the test's database and the fake GitLab, and the service
    running with a worker of two."""

    fake: FakeGitLab

    def settings(self, **extra: Any) -> Settings:
        """GITLAB_TOKEN (speaking as `BOT`), the webhook's secret and the database; `extra`
        adds or overrides settings."""
        self.fake.users.setdefault(GITLAB_TOKEN, BOT)
        values: dict[str, Any] = {
            "token": GITLAB_TOKEN,
            "opencode_api_key": SecretStr(PROVIDER_KEY),
            "pr_review_database_url": SecretStr(self.database_url),
            "pr_review_gitlab_webhook_secret": SecretStr(TOKEN),
        }
        return self.fake.settings(self.cache, **(values | extra))


async def note(client: httpx.AsyncClient, event: dict[str, Any], **kw: Any) -> httpx.Response:
    """A Note Hook delivery of `event` to the service."""
    return await deliver(client, event, kind="Note Hook", **kw)


def settings_for(gitlab: GitLabService, provider: ScriptedProvider, **extra: Any) -> Settings:
    """Reviews by the scripted provider; no GitHub identity (nothing listens where it points)."""
    return gitlab.settings(**(scripted_without_github(provider) | extra))


@dataclass
class GitLabScene:
    """The world of a GitLab comment or webhook job test (see the module docstring)."""

    fake: FakeGitLab
    notes: FakeNotes
    provider: ScriptedProvider
    service: GitLabService
    settings: Settings

    @classmethod
    def make(
        cls, fake: FakeGitLab, notes: FakeNotes, provider: ScriptedProvider, gitlab: GitLabService
    ) -> GitLabScene:
        return cls(fake, notes, provider, gitlab, settings_for(gitlab, provider))

    def run(self, scenario: Callable[[httpx.AsyncClient], Awaitable[Result]]) -> Result:
        """What `scenario` returns, run with the service and a worker on the scene's settings."""
        return self.service.run(self.settings, scenario)
