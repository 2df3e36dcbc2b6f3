"""What an operator does to review jobs: list them, cancel a waiting one, retry a failed one.

`GET /v1/review-jobs` and `pr-review jobs list|show|retry|cancel` (docs/service.md) come here.
Cancelling and retrying change the queue, so each happens in one transaction that first takes
the pull request's advisory lock, as enqueueing and recovery do (`jobs.queue`):

- cancel: a `queued` job's queue job is cancelled (procrastinate `cancel`, while it is `todo`)
  and its record is marked `superseded` by nothing, a final status: no worker claims it, and
  recovery never queues it again. A job that already runs or ended is left as it is.
- retry: a `failed` job's pull request is queued again as a new job (the failed record keeps
  its error document, the new one gets its own id), with the same publication flag,
  installation and head. When a job of that pull request already waits, that job is the
  answer: at most one job of a pull request ever waits, and the waiting one reviews the
  newest head anyway.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import psycopg
from procrastinate import exceptions as queue_errors

from pr_review_api.errors import JobNotFound, ServerBusy
from pr_review_api.jobs import records
from pr_review_api.jobs.listing import MAX_PAGE_SIZE
from pr_review_api.jobs.records import JobFilter, JobPage, PullRequestJob

if TYPE_CHECKING:  # the queue imports this module
    from pr_review_api.jobs.queue import JobQueue

_DATABASE_DOWN = "The job database is not available; try again shortly."

Outcome = Literal["cancelled", "queued", "already_waiting", "not_queued", "not_failed"]


@dataclass(frozen=True)
class AdminResult:
    """What cancel or retry did: `job_id` is the job now concerned (for a retry, the new or
    the already waiting job), `status` its status, `outcome` what happened."""

    job_id: uuid.UUID
    status: str
    outcome: Outcome

    @property
    def changed(self) -> bool:
        return self.outcome in ("cancelled", "queued")


async def list_jobs(queue: JobQueue, where: JobFilter, limit: int) -> JobPage | None:
    """A page of records newest first; None when the cursor names no record."""
    assert 1 <= limit <= MAX_PAGE_SIZE
    try:
        async with queue.connector.pool.connection() as connection:
            return await records.list_page(connection, where, limit)
    except (psycopg.Error, queue_errors.ConnectorException):
        raise ServerBusy(_DATABASE_DOWN) from None


async def cancel(queue: JobQueue, job_id: uuid.UUID) -> AdminResult:
    """Mark a queued job so that it never runs (see the module docstring)."""
    async with queue.transaction() as connection:
        record = await records.fetch(connection, job_id)
        if record is None:
            raise JobNotFound()
        await queue.lock_pull_request(connection, record.pr_key)
        current = await records.fetch_for_update(connection, job_id)
        assert current is not None
        if current.status != "queued":
            return AdminResult(job_id, current.status, "not_queued")
        if current.queue_job_id is not None:
            # False when a worker already fetched it: its claim then finds a final status.
            await queue.cancel_waiting(connection, current)
        await records.supersede(connection, job_id, None)
        return AdminResult(job_id, "superseded", "cancelled")


async def retry(queue: JobQueue, job_id: uuid.UUID) -> AdminResult:
    """Queue a failed job's pull request again (see the module docstring)."""
    async with queue.transaction() as connection:
        record = await records.fetch(connection, job_id)
        if record is None:
            raise JobNotFound()
        if record.status != "failed":
            return AdminResult(job_id, record.status, "not_failed")
        await queue.lock_pull_request(connection, record.pr_key)
        waiting = await records.waiting_for(connection, record.pr_key)
        if waiting:
            return AdminResult(waiting[0].id, waiting[0].status, "already_waiting")
        job = PullRequestJob(
            url=record.pull_request_url,
            owner=record.owner,
            repo=record.repo,
            number=record.number,
            head_sha=record.head_sha,
            installation_id=record.installation_id,
            post=record.post,
        )
        enqueued = await queue.enqueue_locked(connection, job, record.source, None)
        return AdminResult(enqueued.job_id, enqueued.status, "queued")
