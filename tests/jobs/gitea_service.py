"""The service and a real worker on the test's PostgreSQL database, beside the fake Gitea: what
every end-to-end Gitea job test runs against (the `gitea_service` fixture of
tests/jobs/conftest.py), and signed deliveries to its `POST /v1/webhooks/gitea`.

`GiteaScene` (the `gitea` fixture) is a comment or webhook job test's world: the fake and its
writes, the scripted provider, the service with a writer and a reader known, and the pull
request #3; with our finding as publishing posts it and replies in its conversation."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from pr_review_api.model import Finding
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN, PROVIDER_KEY
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.fakes.provider_server import ScriptedProvider
from tests.gitea.payloads import SECRET, comment_event, sign
from tests.gitea.test_review import BASE, HEAD
from tests.jobs.forge_service import (
    ForgeService,
    Result,
    finished,
    job_of,
    scripted_without_github,
)
from tests.reviewed import FINDING, REVIEW

BOT = "review-bot"  # the login GITEA_TOKEN speaks as
PATH = "acme/widget"
WRITER, READER, AUTHOR = "wendy", "rita", "alice"  # alice opened the pull request
FINGERPRINT = Finding.model_validate(FINDING).fingerprint("    validate(w)")
__all__ = ["BASE", "FINDING", "HEAD", "REVIEW", "finished"]


@dataclass
class GiteaService(ForgeService):
    """Settings for the service on the test's database and the fake Gitea, and the service
    running with a worker of two."""

    fake: FakeGitea

    def settings(self, provider: ScriptedProvider, **extra: Any) -> Settings:
        """GITEA_TOKEN (speaking as `BOT`, `bot_access` on PATH), the webhook's secret, the
        database and the scripted provider; no GitHub identity (nothing listens there)."""
        access = extra.pop("bot_access", "write")
        self.fake.add_token(GITEA_TOKEN, BOT)
        self.fake.grant(PATH, BOT, access)
        values: dict[str, Any] = {
            "token": GITEA_TOKEN,
            "opencode_api_key": SecretStr(PROVIDER_KEY),
            "pr_review_database_url": SecretStr(self.database_url),
            "pr_review_gitea_webhook_secret": SecretStr(SECRET),
        }
        return self.fake.settings(
            self.cache, **(values | scripted_without_github(provider) | extra)
        )


def pull(fake: FakeGitea, index: int = 3, **fields: Any) -> PullFixture:
    """A private pull request of PATH by `alice`, whose head adds a line after a write."""
    values: dict[str, Any] = {"title": "Validate widgets", "author": "alice"}
    return fake.pull_request(PATH, index, base=BASE, head=HEAD, private=True, **(values | fields))


async def deliver(
    client: httpx.AsyncClient,
    event: dict[str, Any] | bytes,
    *,
    kind: str = "pull_request",
    family: str | None = None,
    delivery: str | None = None,
    signature: str | None = None,
    forgejo: bool = False,
) -> httpx.Response:
    """A delivery as Gitea (or, `forgejo`, Forgejo) sends it, signed with the test's secret."""
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    prefix = "X-Forgejo" if forgejo else "X-Gitea"
    family = family or ("issue_comment" if "comment" in kind else "pull_request")
    headers = {
        "Content-Type": "application/json",
        f"{prefix}-Event": family,
        f"{prefix}-Event-Type": kind,
        f"{prefix}-Delivery": delivery or str(uuid.uuid4()),
        f"{prefix}-Signature": signature if signature is not None else sign(body),
    }
    return await client.post("/v1/webhooks/gitea", content=body, headers=headers)


async def jobs_of(
    client: httpx.AsyncClient, events: Iterable[dict[str, Any]], kind: str = "pull_request_comment"
) -> list[dict[str, Any]]:
    """The ended job of each event, delivered one after another (each accepted: 202)."""
    return [await job_of(client, await deliver(client, event, kind=kind)) for event in events]


@dataclass
class GiteaScene:
    """The world of a Gitea comment or webhook job test (see the module docstring)."""

    fake: FakeGitea
    writes: GiteaWrites
    provider: ScriptedProvider
    service: GiteaService
    settings: Settings  # the bot an admin of PATH, WRITER a writer, READER a reader
    pull: PullFixture  # #3, private

    @classmethod
    def make(
        cls, fake: FakeGitea, writes: GiteaWrites, provider: ScriptedProvider, gitea: GiteaService
    ) -> GiteaScene:
        return cls(fake, writes, provider, gitea, settings_for(gitea, provider), pull(fake))

    def run(self, scenario: Callable[[httpx.AsyncClient], Awaitable[Result]]) -> Result:
        """What `scenario` returns, run with the service and a worker on the scene's settings."""
        return self.service.run(self.settings, scenario)

    def our_finding(self) -> tuple[int, int]:
        """Our review of the head as publishing posts it, through the API as the bot: one
        comment on the finding's line with its marker. (review id, comment id)"""
        comment = "\n\n".join(
            [
                f"**high** · {FINDING['title']}",
                str(FINDING["explanation"]),
                f"<!-- pr-review:finding={FINGERPRINT} -->",
            ]
        )
        review = {
            "event": "COMMENT",
            "commit_id": self.pull.head_sha,
            "body": "### pr-review\n\nOne problem.",
            "comments": [
                {"path": "src/service.py", "body": comment, "new_position": 3, "old_position": 0}
            ],
        }
        answer = httpx.post(
            f"{self.fake.api_url}/repos/{PATH}/pulls/{self.pull.index}/reviews",
            json=review,
            headers={"Authorization": f"token {GITEA_TOKEN}"},
        )
        assert answer.status_code == 200, answer.text
        review_id = answer.json()["id"]
        return review_id, review_id + 1  # the fake numbers the comment right after its review

    def reply(
        self, finding: tuple[int, int], login: str, body: str, delivered: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """A reply in our finding's conversation, and its delivery (`delivered`: what it
        carries)."""
        stored = self.writes.reply(finding[0], finding[1], self.fake.user(login), body)
        event = comment_event(delivered if delivered is not None else body)
        event["comment"]["id"] = stored["id"]
        event["comment"]["user"] = {"id": self.fake.user(login).id, "login": login}
        event["sender"] = event["comment"]["user"]
        return stored["id"], event

    def our_reviews(self, index: int = 3) -> list[dict[str, Any]]:
        return [
            r
            for (_, i), rs in self.writes.reviews.items()
            if i == index
            for r in rs
            if r["user"]["login"] == BOT
        ]


def settings_for(gitea: GiteaService, provider: ScriptedProvider, **extra: Any) -> Settings:
    """The service's settings with the bot an admin of PATH, WRITER a writer and READER a
    reader there."""
    gitea.fake.grant(PATH, WRITER, "write")
    gitea.fake.grant(PATH, READER, "read")
    return gitea.settings(provider, bot_access="admin", **extra)
