"""Webhooks, review jobs and workers (specification §11) on a real embedded PostgreSQL.

Each rule of section 11 has a test named after it. Workers are real procrastinate workers
(in this process, or `pr-review worker` in another one); the HTTP side is the real
application, its lifespan entered as uvicorn would; the end-to-end test reviews a pull request
of the fake GitHub with the scripted provider.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import SecretStr

from pr_review_api.errors import (
    GitHubUnavailable,
    GitLabUnavailable,
    OpenCodeRateLimited,
    ReviewError,
)
from pr_review_api.jobs.queue import JobQueue, QueueTuning, ReviewRunner
from pr_review_api.jobs.records import JobRecord, PullRequestJob
from pr_review_api.jobs.schema import MIGRATIONS, apply_migrations
from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn

SECRET = "whsec-test-WEBHOOK-SECRET-90ab"
SERVER = "https://github.example"
FAST = QueueTuning(
    poll_interval=0.1,
    heartbeat_interval=0.5,
    stalled_after=2.0,
    stalled_check_interval=0.5,
    retry_base_seconds=0.2,
)
REVIEW = {"summary": "Looks fine.", "findings": [], "notes": []}


# --- helpers --------------------------------------------------------------------------------


def settings_for(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": SecretStr(PROVIDER_KEY),
        "github_server_url": SERVER,
        "github_api_url": SERVER + "/api/v3",
        "pr_review_database_url": SecretStr(database_url),
        "pr_review_webhook_secret": SecretStr(SECRET),
    }
    values.update(overrides)
    return Settings(**values)


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def pull_request_event(
    number: int = 7,
    head: str = "a" * 40,
    *,
    action: str = "synchronize",
    draft: bool = False,
    owner: str = "acme",
    repo: str = "widget",
    installation: int | None = 42,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "draft": draft,
            "state": "open",
            "head": {"sha": head},
        },
        "repository": {"name": repo, "owner": {"login": owner}},
    }
    if installation is not None:
        event["installation"] = {"id": installation}
    return event


async def deliver(
    client: httpx.AsyncClient,
    event: dict[str, Any] | bytes,
    *,
    kind: str = "pull_request",
    delivery: str | None = None,
    signature: str | None = None,
) -> httpx.Response:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": kind,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature if signature is not None else signed(body),
    }
    return await client.post("/v1/webhooks/github", content=body, headers=headers)


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real application with its lifespan entered, over an in-process transport."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client


@asynccontextmanager
async def worker(
    settings: Settings, runner: ReviewRunner | None, concurrency: int = 4
) -> AsyncIterator[JobQueue]:
    queue = JobQueue(settings, runner=runner, tuning=FAST)
    async with queue.opened():
        task = asyncio.create_task(queue.run_worker(concurrency, install_signal_handlers=False))
        try:
            yield queue
        finally:
            task.cancel()
            with_timeout = asyncio.wait_for(asyncio.shield(task), 10)
            with suppress(asyncio.CancelledError, TimeoutError):
                await with_timeout


async def wait_for(
    condition: Callable[[], Awaitable[bool]], within: float = 15.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def status_of(queue: JobQueue, job_id: str) -> str:
    record = await queue.get(uuid.UUID(job_id))
    assert record is not None
    return record.status


def rows(database_url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as connection:
        return connection.execute(query).fetchall()  # type: ignore[arg-type, unused-ignore]


def pull(
    number: int, owner: str = "acme", repo: str = "widget", server: str = SERVER, **kw: Any
) -> PullRequestJob:
    return PullRequestJob(
        url=f"{server}/{owner}/{repo}/pull/{number}", owner=owner, repo=repo, number=number, **kw
    )


def review_document(url: str) -> dict[str, Any]:
    return {
        "termination_reason": "final_review",
        "pull_request": None,
        "revisions": {"base_sha": "b" * 40, "head_sha": "c" * 40, "merge_base_sha": "b" * 40},
        "review": {"summary": url, "findings": [], "notes": []},
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        "rounds": 1,
        "tool_calls": 0,
        "publication": None,
    }


class Gate:
    """A runner that records what runs and waits until each pull request is released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running: dict[str, int] = {}
        self.max_running: dict[str, int] = {}
        self.released: set[str] = set()

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        self.started.append(url)
        self.running[url] = self.running.get(url, 0) + 1
        self.max_running[url] = max(self.max_running.get(url, 0), self.running[url])
        try:
            while url not in self.released:  # noqa: ASYNC110 (released from the test's side)
                await asyncio.sleep(0.02)
        finally:
            self.running[url] -= 1
        return review_document(url)


# --- schema ---------------------------------------------------------------------------------


def test_migrations_are_versioned_and_applied_once(database_url: str) -> None:
    first = asyncio.run(apply_migrations(database_url))
    again = asyncio.run(apply_migrations(database_url))
    assert first == [migration.version for migration in MIGRATIONS]
    assert again == []
    tables = {row[0] for row in rows(database_url, "SELECT tablename FROM pg_tables")}
    assert {"procrastinate_jobs", "review_jobs", "webhook_deliveries"} <= tables


# --- webhooks -------------------------------------------------------------------------------


def test_webhook_without_a_valid_signature_is_invalid_signature(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            event = pull_request_event()
            body = json.dumps(event).encode()
            for signature in ("", "sha256=" + "0" * 64, signed(body, "other"), signed(b"{}")):
                answer = await deliver(client, body, signature=signature)
                assert answer.status_code == 401
                assert answer.json()["error"]["code"] == "invalid_signature"
                assert SECRET not in answer.text
            assert await deliver(client, body) is not None

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(1,)]


def test_webhook_ping_answers_200(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            answer = await deliver(client, {"zen": "Keep it simple."}, kind="ping")
            assert answer.status_code == 200

    asyncio.run(scenario())


def test_webhook_pull_request_actions_enqueue_a_published_review(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            for number, action in enumerate(
                ("opened", "synchronize", "reopened", "ready_for_review"), start=1
            ):
                answer = await deliver(client, pull_request_event(number, action=action))
                assert answer.status_code == 202
                document = answer.json()
                assert document["status"] == "queued"
                job = await client.get(f"/v1/review-jobs/{document['job_id']}")
                assert job.status_code == 200
                assert job.json()["pull_request"]["number"] == number
                assert job.json()["head_sha"] == "a" * 40
                assert job.json()["result"] is None

    asyncio.run(scenario())
    assert rows(database_url, "SELECT bool_and(post), count(*) FROM review_jobs") == [(True, 4)]


def test_webhook_drafts_and_other_events_are_ignored(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            ignored = [
                await deliver(client, pull_request_event(draft=True, action="opened")),
                await deliver(client, pull_request_event(action="closed")),
                await deliver(client, pull_request_event(action="assigned")),
                # A description edit changes nothing the skip rules read (specification §16).
                await deliver(
                    client, {**pull_request_event(action="edited"), "changes": {"body": {}}}
                ),
                await deliver(client, {"action": "created"}, kind="issue_comment"),
                await deliver(client, pull_request_event(owner="../etc")),
                await deliver(client, pull_request_event(head="not-a-sha")),
            ]
            for answer in ignored:
                assert answer.status_code == 202
                assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(0,)]


def test_webhook_repeated_delivery_answers_the_same_job(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            first = await deliver(client, pull_request_event(), delivery="d-1")
            again = await deliver(client, pull_request_event(), delivery="d-1")
            assert first.json()["job_id"] == again.json()["job_id"]

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(1,)]
    assert rows(database_url, "SELECT count(*) FROM procrastinate_jobs") == [(1,)]


def test_webhook_needs_no_service_key_but_job_routes_do(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_api_keys=(SecretStr("svc-key"),))

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await deliver(client, pull_request_event())
            assert answer.status_code == 202
            job_id = answer.json()["job_id"]
            refused = await client.get(f"/v1/review-jobs/{job_id}")
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            allowed = await client.get(
                f"/v1/review-jobs/{job_id}", headers={"Authorization": "Bearer svc-key"}
            )
            assert allowed.status_code == 200

    asyncio.run(scenario())


def test_webhook_endpoint_exists_only_with_a_secret(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_webhook_secret=None)

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await deliver(client, pull_request_event())
            assert answer.status_code == 404

    asyncio.run(scenario())


def test_webhook_answers_within_githubs_timeout_whatever_the_queue_holds(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            slowest = 0.0
            for number in range(1, 101):
                started = time.perf_counter()
                answer = await deliver(client, pull_request_event(number))
                slowest = max(slowest, time.perf_counter() - started)
                assert answer.status_code == 202
            assert slowest < 10.0  # GitHub's own deadline for a delivery: generous, not a speed

    asyncio.run(scenario())


# --- the job routes -------------------------------------------------------------------------


def test_review_jobs_post_and_get(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            url = f"{SERVER}/acme/widget/pull/9/files"
            created = await client.post("/v1/review-jobs", json={"pull_request_url": url})
            assert created.status_code == 202
            assert created.json()["status"] == "queued"
            job = (await client.get(f"/v1/review-jobs/{created.json()['job_id']}")).json()
            assert set(job) == {
                "job_id",
                "status",
                "pull_request",
                "head_sha",
                "created_at",
                "started_at",
                "finished_at",
                "result",
            }
            assert job["pull_request"]["url"] == f"{SERVER}/acme/widget/pull/9"
            assert job["status"] == "queued"
            bad_url = await client.post(
                "/v1/review-jobs", json={"pull_request_url": "https://elsewhere.example/a/b/pull/1"}
            )
            assert bad_url.status_code == 422
            assert bad_url.json()["error"]["code"] == "invalid_pull_request_url"
            extra = await client.post(
                "/v1/review-jobs", json={"pull_request_url": url, "include_trace": True}
            )
            assert extra.status_code == 422
            assert extra.json()["error"]["code"] == "invalid_request"
            for unknown in (str(uuid.uuid4()), "not-a-uuid", "%00"):
                missing = await client.get(f"/v1/review-jobs/{unknown}")
                assert missing.status_code == 404
                assert missing.json()["error"]["code"] == "job_not_found"

    asyncio.run(scenario())


# --- queue rules ----------------------------------------------------------------------------


def test_newer_head_supersedes_the_waiting_job(database_url: str) -> None:
    async def scenario() -> None:
        queue = JobQueue(settings_for(database_url), tuning=FAST)
        async with queue.opened():
            first = await queue.enqueue(pull(7, head_sha="1" * 40), source="webhook")
            second = await queue.enqueue(pull(7, head_sha="2" * 40), source="webhook")
            other = await queue.enqueue(pull(8, head_sha="1" * 40), source="webhook")
            assert await status_of(queue, str(first.job_id)) == "superseded"
            assert await status_of(queue, str(second.job_id)) == "queued"
            assert await status_of(queue, str(other.job_id)) == "queued"
            record = await queue.get(first.job_id)
            assert record is not None
            assert record.finished_at is not None

    asyncio.run(scenario())
    waiting = rows(database_url, "SELECT lock FROM procrastinate_jobs WHERE status = 'todo'")
    assert sorted(waiting) == [("acme/widget#7",), ("acme/widget#8",)]


def test_jobs_of_one_pull_request_never_run_at_the_same_time(database_url: str) -> None:
    gate = Gate()
    settings = settings_for(database_url)
    url = f"{SERVER}/acme/widget/pull/7"

    async def scenario() -> None:
        async with worker(settings, gate, concurrency=4) as queue:
            first = await queue.enqueue(pull(7, head_sha="1" * 40), source="webhook")
            await wait_for(lambda: _is(queue, first.job_id, "running"), what="first running")
            second = await queue.enqueue(pull(7, head_sha="2" * 40), source="webhook")
            await asyncio.sleep(1.0)  # four slots free: only the lock keeps the second waiting
            assert await status_of(queue, str(second.job_id)) == "queued"
            assert gate.started == [url]
            gate.released.add(url)
            await wait_for(lambda: _is(queue, second.job_id, "succeeded"), what="second done")
            assert await status_of(queue, str(first.job_id)) == "succeeded"

    asyncio.run(scenario())
    assert gate.started == [url, url]
    assert gate.max_running[url] == 1


async def _is(queue: JobQueue, job_id: uuid.UUID, status: str) -> bool:
    return await status_of(queue, str(job_id)) == status


def test_rate_limited_job_is_retried_later_not_slept_on(database_url: str) -> None:
    calls: list[str] = []

    async def runner(record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        calls.append(url)
        if url.endswith("/7"):
            raise OpenCodeRateLimited(retry_after=120)
        return review_document(url)

    async def scenario() -> None:
        async with worker(settings_for(database_url), runner, concurrency=1) as queue:
            limited = await queue.enqueue(pull(7), source="api")
            await wait_for(lambda: _rescheduled(database_url, limited.job_id), what="deferral")
            # The one worker slot is free at once: another pull request's job runs now.
            other = await queue.enqueue(pull(8), source="api")
            await wait_for(lambda: _is(queue, other.job_id, "succeeded"), within=5)
            assert await status_of(queue, str(limited.job_id)) == "queued"

    asyncio.run(scenario())
    assert calls.count(f"{SERVER}/acme/widget/pull/7") == 1
    (delay,) = rows(
        database_url,
        "SELECT extract(epoch FROM q.scheduled_at - now()) FROM procrastinate_jobs q "
        "JOIN review_jobs r ON r.queue_job_id = q.id WHERE r.number = 7",
    )
    assert 100 < float(delay[0]) <= 121


@pytest.mark.parametrize("outage", [GitHubUnavailable, GitLabUnavailable])
def test_any_forges_outage_defers_the_job_to_a_later_attempt(
    database_url: str, outage: type[ReviewError]
) -> None:
    """Every forge's error derives from ForgeUnavailable, which the queue retries."""

    async def runner(record: JobRecord, settings: Settings) -> dict[str, Any]:
        raise outage()

    async def scenario() -> None:
        async with worker(settings_for(database_url), runner, concurrency=1) as queue:
            job = await queue.enqueue(pull(9), source="api")
            await wait_for(lambda: _rescheduled(database_url, job.job_id), what="deferral")
            assert await status_of(queue, str(job.job_id)) == "queued"

    asyncio.run(scenario())


async def _rescheduled(database_url: str, job_id: uuid.UUID) -> bool:
    found = rows(
        database_url,
        "SELECT q.status FROM review_jobs r JOIN procrastinate_jobs q ON q.id = r.queue_job_id "
        f"WHERE r.id = '{job_id}' AND r.status = 'queued' AND q.scheduled_at IS NOT NULL",
    )
    return found == [("todo",)]


def test_installation_running_limit_leaves_room_for_other_installations(
    database_url: str,
) -> None:
    gate = Gate()
    settings = settings_for(database_url, pr_review_installation_max_running=1)

    async def scenario() -> None:
        async with worker(settings, gate, concurrency=4) as queue:
            busy_a = await queue.enqueue(pull(1, installation_id=10), source="webhook")
            busy_b = await queue.enqueue(pull(2, installation_id=10), source="webhook")
            other = await queue.enqueue(pull(3, installation_id=20), source="webhook")
            await wait_for(lambda: _is(queue, other.job_id, "running"), what="other running")
            await wait_for(
                lambda: _any_running(queue, busy_a.job_id, busy_b.job_id), what="one running"
            )
            await asyncio.sleep(1.0)
            states = {
                await status_of(queue, str(busy_a.job_id)),
                await status_of(queue, str(busy_b.job_id)),
            }
            assert states == {"running", "queued"}
            gate.released.update(gate.started)
            gate.released.update(f"{SERVER}/acme/widget/pull/{n}" for n in (1, 2, 3))
            for job in (busy_a, busy_b, other):
                await wait_for(partial(_is, queue, job.job_id, "succeeded"), within=20)

    asyncio.run(scenario())


async def _any_running(queue: JobQueue, *job_ids: uuid.UUID) -> bool:
    return any([await _is(queue, job_id, "running") for job_id in job_ids])


# --- end to end: a real review, a worker that dies ------------------------------------------


def _publish(fake: FakeGitHub) -> tuple[str, Settings]:
    fake.users.setdefault(GITHUB_TOKEN, "pr-review-bot")  # GET /user: the publishing identity
    fixture = fake.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})
    return fixture.head_sha, fake.settings(Path("cache"), token=GITHUB_TOKEN)


def test_end_to_end_webhook_review_is_published_once_per_head(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    head, github = _publish(fake_github)
    settings = settings_for(
        database_url,
        github_server_url=github.github_server_url,
        github_api_url=github.github_api_url,
        github_token=github.github_token,
        pr_review_cache_dir=Path("cache").resolve(),
        opencode_base_url=scripted_provider.base_url,
    )
    # One model turn: the second job finds the head in published_heads and asks no model.
    scripted_provider.script(stop_turn(REVIEW))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with service(settings) as client, worker(settings, None) as queue:
            event = pull_request_event(7, head, installation=None)
            answer = await deliver(client, event)
            job_id = answer.json()["job_id"]
            await wait_for(lambda: _is(queue, uuid.UUID(job_id), "succeeded"), within=30)
            document: dict[str, Any] = (await client.get(f"/v1/review-jobs/{job_id}")).json()
            # The same head again (a job run twice, say): nothing is published twice.
            again = await client.post(
                "/v1/review-jobs",
                json={"pull_request_url": document["pull_request"]["url"], "post": True},
            )
            again_id = again.json()["job_id"]
            await wait_for(lambda: _is(queue, uuid.UUID(again_id), "succeeded"), within=30)
            second: dict[str, Any] = (await client.get(f"/v1/review-jobs/{again_id}")).json()
            return document, second

    document, second = asyncio.run(scenario())
    scripted_provider.assert_complete()
    assert document["result"]["publication"]["status"] == "published", document["result"]
    assert second["result"]["publication"]["status"] == "already_published"
    posted = [
        r for r in fake_github.api_requests() if r.method == "POST" and r.path.endswith("/reviews")
    ]
    assert len(posted) == 1
    assert document["result"]["termination_reason"] == "final_review"
    assert document["result"]["review"]["summary"] == "Looks fine."
    assert document["head_sha"] == head
    assert document["started_at"] is not None
    assert document["finished_at"] is not None
    dump = json.dumps(rows(database_url, "SELECT row_to_json(r)::text FROM review_jobs r"))
    assert "15" in dump  # total tokens are recorded for the operator
    for secret in (GITHUB_TOKEN, PROVIDER_KEY, SECRET):
        assert secret not in dump


def test_job_of_a_dead_worker_runs_again(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    head, github = _publish(fake_github)
    cache = Path("cache").resolve()
    # The first worker's provider request hangs; SIGKILL ends it there.
    scripted_provider.script(Fault.delay(60, stop_turn(REVIEW)), stop_turn(REVIEW))
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "GITHUB_"))},
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": scripted_provider.base_url,
        "GITHUB_SERVER_URL": github.github_server_url,
        "GITHUB_API_URL": github.github_api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PR_REVIEW_CACHE_DIR": str(cache),
        "PR_REVIEW_DATABASE_URL": database_url,
    }
    settings = settings_for(
        database_url,
        github_server_url=github.github_server_url,
        github_api_url=github.github_api_url,
        github_token=github.github_token,
        pr_review_cache_dir=cache,
        opencode_base_url=scripted_provider.base_url,
    )

    async def enqueue() -> uuid.UUID:
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            job = pull(7, server=fake_github.server_url, head_sha=head)
            return (await queue.enqueue(job, source="webhook")).job_id

    job_id = asyncio.run(enqueue())
    process = subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--concurrency", "1"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while len(scripted_provider.requests) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        if not scripted_provider.requests:
            process.kill()
            results = rows(database_url, "SELECT result::text FROM review_jobs")
            raise AssertionError(f"the first worker never asked the provider: {results}")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    stderr = process.stderr.read().decode() if process.stderr else ""
    for secret in (GITHUB_TOKEN, PROVIDER_KEY):
        assert secret not in stderr

    async def recover() -> None:
        async with worker(settings, None, concurrency=1) as queue:
            await wait_for(lambda: _is(queue, job_id, "succeeded"), within=40)
            record = await queue.get(job_id)
            assert record is not None
            assert record.attempts == 2

    asyncio.run(recover())
    assert len(scripted_provider.requests) == 2
