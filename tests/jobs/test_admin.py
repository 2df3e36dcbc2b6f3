"""An operator's view of the jobs (jobs/admin.py): `GET /v1/review-jobs` pages through the real
application, cancel and retry change the real queue, and real workers show what they did.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from pydantic import SecretStr

from pr_review_api.errors import InvalidModelResponse
from pr_review_api.jobs import admin
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobRecord
from pr_review_api.settings import Settings
from tests.jobs.test_jobs import (
    FAST,
    SERVER,
    pull,
    review_document,
    rows,
    service,
    settings_for,
    wait_for,
    worker,
)

SERVICE_KEY = "svc-test-KEY-5c1d"


async def _create(client: httpx.AsyncClient, owner: str, repo: str, number: int) -> str:
    url = f"{SERVER}/{owner}/{repo}/pull/{number}"
    answer = await client.post("/v1/review-jobs", json={"pull_request_url": url})
    assert answer.status_code == 202, answer.text
    job_id: str = answer.json()["job_id"]
    return job_id


async def _walk(client: httpx.AsyncClient, first: str) -> tuple[list[dict[str, Any]], int]:
    """Every job a listing gives, following `next`; and how many pages it took."""
    jobs: list[dict[str, Any]] = []
    link: str | None = first
    pages = 0
    while link is not None:
        answer = await client.get(link)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert set(page) == {"jobs", "next_cursor", "next"}
        jobs.extend(page["jobs"])
        link = page["next"]
        assert (link is None) == (page["next_cursor"] is None)
        pages += 1
    return jobs, pages


def test_listing_pages_newest_first_and_filters_by_repository_and_status(
    database_url: str,
) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            created = []
            for number in range(1, 6):
                created.append(await _create(client, "acme", "widget", number))
            created.append(await _create(client, "Other", "Thing", 1))
            everything, pages = await _walk(client, "/v1/review-jobs?limit=2")
            assert [job["job_id"] for job in everything] == created[::-1]
            assert pages == 3
            single = (await client.get(f"/v1/review-jobs/{created[0]}")).json()
            assert next(j for j in everything if j["job_id"] == created[0]) == single

            widget, _ = await _walk(client, "/v1/review-jobs?repository=ACME/Widget&limit=2")
            assert [job["job_id"] for job in widget] == created[:5][::-1]
            other, _ = await _walk(client, "/v1/review-jobs?repository=other/thing")
            assert [job["job_id"] for job in other] == [created[5]]

            queue = JobQueue(settings_for(database_url), tuning=FAST)
            async with queue.opened():
                cancelled = await admin.cancel(queue, uuid.UUID(created[1]))
            assert cancelled.outcome == "cancelled"
            superseded, _ = await _walk(client, "/v1/review-jobs?status=superseded")
            assert [job["job_id"] for job in superseded] == [created[1]]
            queued, _ = await _walk(
                client, "/v1/review-jobs?status=queued&repository=acme/widget&limit=1"
            )
            assert len(queued) == 4
            none, _ = await _walk(client, "/v1/review-jobs?status=failed")
            assert none == []

    asyncio.run(scenario())


def test_listing_refuses_every_bad_query_with_invalid_request(database_url: str) -> None:
    bad = [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=+5",
        "limit=%EF%BC%95",  # a full-width digit
        "limit=",
        "status=done",
        "status=",
        "repository=acme",
        "repository=acme/widget/extra",
        "repository=-acme/widget",
        "repository=acme/..",
        "cursor=not-a-cursor",
        f"cursor={uuid.uuid4()}",  # well formed, but no job of this database
        "page=2",
        "status=queued&status=failed",
        "limit=1&limit=1",
        "repository=%FF/x",
        "limit",
        "a=1&b=2&c=3&d=4&e=5",
        "x=" + "y" * 3000,
    ]

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            for query in bad:
                answer = await client.get("/v1/review-jobs?" + query)
                assert answer.status_code == 422, query
                body = answer.json()
                assert body["error"]["code"] == "invalid_request", query
                assert "yyyy" not in body["error"]["message"]
            assert (await client.get("/v1/review-jobs?")).status_code == 200

    asyncio.run(scenario())


def test_listing_needs_a_service_key_when_keys_are_set(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_api_keys=[SecretStr(SERVICE_KEY)])

    async def scenario() -> None:
        async with service(settings) as client:
            refused = await client.get("/v1/review-jobs?limit=abc")  # the key is checked first
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            wrong = await client.get("/v1/review-jobs", headers={"Authorization": "Bearer no"})
            assert wrong.status_code == 401
            allowed = await client.get(
                "/v1/review-jobs", headers={"Authorization": f"Bearer {SERVICE_KEY}"}
            )
            assert allowed.status_code == 200
            assert allowed.json() == {"jobs": [], "next_cursor": None, "next": None}

    asyncio.run(scenario())


class CountingRunner:
    """Succeeds, or fails with `invalid_model_response` while `failing`; counts what ran."""

    def __init__(self, *, failing: bool) -> None:
        self.failing = failing
        self.ran: list[str] = []

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        self.ran.append(url)
        if self.failing:
            raise InvalidModelResponse()
        return review_document(url)


async def _status(queue: JobQueue, job_id: uuid.UUID) -> str:
    record = await queue.get(job_id)
    assert record is not None
    return record.status


def test_a_cancelled_job_never_runs_and_only_a_queued_job_can_be_cancelled(
    database_url: str,
) -> None:
    settings = settings_for(database_url)
    runner = CountingRunner(failing=False)

    async def scenario() -> None:
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            doomed = (await queue.enqueue(pull(1), source="api")).job_id
            kept = (await queue.enqueue(pull(2), source="api")).job_id
            result = await admin.cancel(queue, doomed)
            assert (result.outcome, result.status, result.changed) == (
                "cancelled",
                "superseded",
                True,
            )
            again = await admin.cancel(queue, doomed)
            assert (again.outcome, again.changed) == ("not_queued", False)
        async with worker(settings, runner) as running:
            await wait_for(lambda: _is(running, kept, "succeeded"), what="the kept job")
            # The worker also runs recovery: a cancelled job is not an orphan to queue again.
            await running.recover_orphans()
            await asyncio.sleep(1.0)
            assert await _status(running, doomed) == "superseded"
            late = await admin.cancel(running, kept)
            assert (late.outcome, late.status) == ("not_queued", "succeeded")
        assert runner.ran == [f"{SERVER}/acme/widget/pull/2"]

    asyncio.run(scenario())
    queue_jobs = rows(database_url, "SELECT status FROM procrastinate_jobs ORDER BY id")
    assert queue_jobs == [("cancelled",), ("succeeded",)]


async def _is(queue: JobQueue, job_id: uuid.UUID, status: str) -> bool:
    return await _status(queue, job_id) == status


def test_a_failed_job_is_retried_as_a_new_job_that_runs(database_url: str) -> None:
    settings = settings_for(database_url)
    runner = CountingRunner(failing=True)

    async def scenario() -> None:
        async with worker(settings, runner) as queue:
            failed = (await queue.enqueue(pull(7, head_sha="a" * 40), source="webhook")).job_id
            await wait_for(lambda: _is(queue, failed, "failed"), what="the failure")
            runner.failing = False
            retried = await admin.retry(queue, failed)
            assert (retried.outcome, retried.status) == ("queued", "queued")
            assert retried.job_id != failed
            await wait_for(lambda: _is(queue, retried.job_id, "succeeded"), what="the retry")
            assert await _status(queue, failed) == "failed"  # its error document is kept
            record = await queue.get(retried.job_id)
            assert record is not None
            # The same kind of job; its head is the one the review found (the document's).
            assert (record.source, record.post, record.head_sha) == ("webhook", True, "c" * 40)
            not_failed = await admin.retry(queue, retried.job_id)
            assert (not_failed.outcome, not_failed.changed) == ("not_failed", False)

    asyncio.run(scenario())
    assert len(runner.ran) == 2


def test_retry_answers_the_job_that_already_waits_for_the_pull_request(
    database_url: str,
) -> None:
    settings = settings_for(database_url)
    runner = CountingRunner(failing=True)

    async def scenario() -> None:
        async with worker(settings, runner) as queue:
            failed = (await queue.enqueue(pull(7), source="api")).job_id
            await wait_for(lambda: _is(queue, failed, "failed"), what="the failure")
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            waiting = (await queue.enqueue(pull(7, head_sha="b" * 40), source="webhook")).job_id
            result = await admin.retry(queue, failed)
            assert (result.job_id, result.outcome) == (waiting, "already_waiting")
            assert await _status(queue, waiting) == "queued"

    asyncio.run(scenario())
    count = rows(database_url, "SELECT count(*) FROM review_jobs WHERE status = 'queued'")
    assert count == [(1,)]
