"""The service and a real worker on the test's PostgreSQL database, beside the fake Gitea: what
every end-to-end Gitea job test runs against (the `gitea_service` fixture of
tests/jobs/conftest.py), and signed deliveries to its `POST /v1/webhooks/gitea`."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN, GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.fakes.provider_server import ScriptedProvider
from tests.gitea.payloads import SECRET, sign
from tests.gitea.test_review import BASE, FINDING, HEAD, REVIEW
from tests.jobs.test_gitlab_jobs import finished, nothing_listening
from tests.jobs.test_jobs import FAST, service

BOT = "review-bot"  # the login GITEA_TOKEN speaks as
PATH = "acme/widget"
__all__ = ["BASE", "FINDING", "HEAD", "REVIEW", "finished"]


@dataclass
class GiteaService:
    """Settings for the service on the test's database and the fake Gitea, and the service
    running with a worker of two."""

    database_url: str
    fake: FakeGitea
    cache: Path

    def settings(self, provider: ScriptedProvider, **extra: Any) -> Settings:
        """GITEA_TOKEN (speaking as `BOT`, `bot_access` on PATH), the webhook's secret, the
        database and the scripted provider; no GitHub identity (nothing listens there)."""
        access = extra.pop("bot_access", "write")
        self.fake.add_token(GITEA_TOKEN, BOT)
        self.fake.grant(PATH, BOT, access)
        nowhere = nothing_listening()
        values: dict[str, Any] = {
            "token": GITEA_TOKEN,
            "opencode_api_key": SecretStr(PROVIDER_KEY),
            "opencode_base_url": provider.base_url,
            "opencode_max_retries": 0,
            "github_server_url": nowhere,
            "github_api_url": nowhere + "/api/v3",
            "github_token": SecretStr(GITHUB_TOKEN),
            "pr_review_database_url": SecretStr(self.database_url),
            "pr_review_gitea_webhook_secret": SecretStr(SECRET),
            "pr_review_job_max_attempts": 1,
            "review_timeout_seconds": 60,
        }
        return self.fake.settings(self.cache, **(values | extra))

    @asynccontextmanager
    async def running(
        self, settings: Settings
    ) -> AsyncIterator[tuple[httpx.AsyncClient, JobQueue]]:
        """The service (a client to it) and its queue, with a worker running jobs."""
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened(), service(settings) as client:
            task = asyncio.create_task(queue.run_worker(2, install_signal_handlers=False))
            try:
                yield client, queue
            finally:
                task.cancel()
                with suppress(asyncio.CancelledError, TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), 10)


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
