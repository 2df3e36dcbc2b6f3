"""The service and a real worker on the test's PostgreSQL database: what the job tests of every
forge share (GitHub's in tests/jobs/test_comments.py, GitLab's in gitlab_service.py, Gitea's in
gitea_service.py).

`running` starts the service (a client to it) and a worker of two; `ForgeService` is a forge's
fixture value, whose `run` runs one scenario against them; `job_of` and `finished` wait for a
job through the service's own `GET /v1/review-jobs/{id}`. `scripted_without_github` is the
settings of a review by the scripted provider with no GitHub identity (GitHub's URLs point at
a port where nothing listens), as a GitLab or Gitea job runs.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue, QueueTuning
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.provider_server import ScriptedProvider
from tests.jobs.test_jobs import FAST, service

Result = TypeVar("Result")


@asynccontextmanager
async def running(
    settings: Settings, tuning: QueueTuning = FAST
) -> AsyncIterator[tuple[httpx.AsyncClient, JobQueue]]:
    """The service (a client to it) and its queue, with a worker of two running jobs."""
    queue = JobQueue(settings, tuning=tuning)
    async with queue.opened(), service(settings) as client:
        task = asyncio.create_task(queue.run_worker(2, install_signal_handlers=False))
        try:
            yield client, queue
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 10)


async def finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job's document once it has ended, as the service reports it."""
    for _ in range(1200):  # the test's own bound: 60 s
        job: dict[str, Any] = (await client.get(f"/v1/review-jobs/{job_id}")).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not finish")


async def job_of(client: httpx.AsyncClient, sent: httpx.Response) -> dict[str, Any]:
    """The ended job of an accepted request (202, else the test fails here)."""
    assert sent.status_code == 202, sent.text
    return await finished(client, sent.json()["job_id"])


def nothing_listening() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def scripted_without_github(provider: ScriptedProvider) -> dict[str, Any]:
    """Reviews by the scripted provider, one attempt each; no GitHub identity (nothing
    listens where it points)."""
    nowhere = nothing_listening()
    return {
        "opencode_base_url": provider.base_url,
        "opencode_max_retries": 0,
        "github_server_url": nowhere,
        "github_api_url": nowhere + "/api/v3",
        "github_token": SecretStr(GITHUB_TOKEN),
        "pr_review_job_max_attempts": 1,
        "review_timeout_seconds": 60,
    }


@dataclass
class ForgeService:
    """The service on the test's database beside a fake forge (the forge's subclass says
    how its settings are made)."""

    database_url: str
    cache: Path

    def running(
        self, settings: Settings
    ) -> AbstractAsyncContextManager[tuple[httpx.AsyncClient, JobQueue]]:
        """The service (a client to it) and its queue, with a worker running jobs."""
        return running(settings)

    def run(
        self, settings: Settings, scenario: Callable[[httpx.AsyncClient], Awaitable[Result]]
    ) -> Result:
        """What `scenario` returns, run with a client to the service while a worker runs."""

        async def main() -> Result:
            async with self.running(settings) as (client, _):
                return await scenario(client)

        return asyncio.run(main())


async def review_job(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """The ended job of `POST /v1/review-jobs` with `body` (accepted: 202)."""
    return await job_of(client, await client.post("/v1/review-jobs", json=body))


def assert_reviewed_unpublished(
    job: dict[str, Any], pull_request: dict[str, Any], head_sha: str, title: object
) -> None:
    """The job reviewed `pull_request` (its document as the job names it) at `head_sha`, found
    `title` first, and published nothing."""
    assert job["status"] == "succeeded", job["result"]
    assert job["pull_request"] == pull_request
    result = job["result"]
    assert result["termination_reason"] == "final_review"
    assert result["pull_request"]["forge"] == pull_request["forge"]
    assert result["revisions"]["head_sha"] == head_sha
    assert result["review"]["findings"][0]["title"] == title
    assert result["publication"] is None


def assert_asked_as_data(
    provider: ScriptedProvider, *, delivered: str, edited: str, head_sha: str
) -> None:
    """The model's last request carried the delivered words (`delivered`, not the comment as
    `edited` after its delivery) as data, at the head the finding was posted on; and every
    scripted turn was used."""
    first_user = provider.requests[-1].json["messages"][1]["content"]
    assert "<untrusted_thread_data>" in first_user
    assert delivered in first_user
    assert edited not in first_user
    assert f"posted on commit {head_sha}" in first_user
    provider.assert_complete()


async def redelivered(
    client: httpx.AsyncClient, send: Callable[[str], Awaitable[httpx.Response]]
) -> tuple[httpx.Response, httpx.Response, dict[str, Any], dict[str, Any]]:
    """A delivery (`send` with its delivery id), the same delivery again and its job; then
    another delivery of the same event (a new id: its job run again) and that job."""
    first = await send("delivery-1")
    again = await send("delivery-1")
    job = await finished(client, first.json()["job_id"])
    other = await send("delivery-2")
    return first, again, job, await finished(client, other.json()["job_id"])


def assert_answered_once(
    first: httpx.Response, again: httpx.Response, job: dict[str, Any], rerun: dict[str, Any]
) -> None:
    """A question's delivery was accepted and, delivered again with the same id, deduplicated;
    its job answered, and a later job of the same comment found that answer, asking nothing."""
    assert first.status_code == 202, first.text
    assert again.json()["job_id"] == first.json()["job_id"]
    assert job["status"] == "succeeded", job["result"]
    assert job["result"]["outcome"] == "answered"
    assert rerun["status"] == "succeeded", rerun["result"]
    assert rerun["result"] == {"kind": "answer", "outcome": "answered"}
