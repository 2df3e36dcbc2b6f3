"""Recovering jobs that lost their worker or their queue job (specification §11: no job is lost).

Any live worker runs these every few seconds (`JobQueue.run_worker`). Each recovery happens in
one transaction that first takes the pull request's advisory lock, as enqueueing does, so the
queue and the records keep agreeing on which job waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

import procrastinate
from procrastinate import sql as queue_sql
from psycopg import AsyncConnection

from pr_review_api.errors import OpenCodeRateLimited, ReviewError
from pr_review_api.jobs import affinity, records
from pr_review_api.jobs.records import FINAL_STATUSES, JobRecord
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

DEFAULT_RATE_LIMIT_DELAY_SECONDS = 30
MAX_RETRY_DELAY_SECONDS = 15 * 60


class Queue(Protocol):
    """What recovery needs of the job queue (`jobs.queue.JobQueue`, which runs it): its
    procrastinate parts, its settings and its locked transactions."""

    app: procrastinate.App
    connector: procrastinate.PsycopgConnector
    settings: Settings

    @property
    def task(self) -> procrastinate.tasks.Task[Any, Any, Any]: ...

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]: ...

    async def lock_pull_request(self, connection: AsyncConnection[Any], key: str) -> None: ...

    async def finish_queue_job(
        self, connection: AsyncConnection[Any], queue_job_id: int, status: str
    ) -> None: ...

    async def defer(
        self,
        connection: AsyncConnection[Any],
        key: str,
        job_id: uuid.UUID,
        schedule_in: float | None = None,
        *,
        queueing: bool = True,
    ) -> int: ...


class Tuning(Protocol):
    """The timings recovery reads (`jobs.queue.QueueTuning`)."""

    stalled_after: float
    stalled_check_interval: float


async def recover_forever(queue: Queue, tuning: Tuning) -> None:
    """Every few seconds, in any live worker: the jobs of stalled workers, the records that
    lost their queue job, and the jobs waiting on a dead host's queue (jobs/affinity.py)."""
    while True:
        await asyncio.sleep(tuning.stalled_check_interval)
        try:
            await recover_stalled(queue, tuning.stalled_after)
            await recover_orphans(queue)
            async with queue.transaction() as connection:
                await affinity.rehome(connection, tuning.stalled_after)
        except Exception as exc:  # the database restarting, say: try again next time
            logger.warning("stalled-job check failed: %s", type(exc).__name__)


async def recover_stalled(queue: Queue, stalled_after: float) -> int:
    """Put jobs of workers that sent no heartbeat for `stalled_after` seconds back in the
    queue."""
    # Every queue: the shared one and each worker host's (jobs/affinity.py).
    stalled = await queue.app.job_manager.get_stalled_jobs(
        queue=None,
        task_name=queue.task.name,
        seconds_since_heartbeat=stalled_after,
    )
    recovered = 0
    for job in stalled:
        raw_id = job.task_kwargs.get("job_id")
        if job.id is None or job.lock is None or not isinstance(raw_id, str):
            continue
        async with queue.transaction() as connection:
            await queue.lock_pull_request(connection, job.lock)
            record = await records.fetch_for_update(connection, uuid.UUID(raw_id))
            newer = [
                other
                for other in await records.waiting_for(connection, job.lock)
                if record is None or other.id != record.id
            ]
            if record is None or record.status in FINAL_STATUSES or newer:
                await queue.finish_queue_job(connection, job.id, "failed")
                if record is not None and newer:
                    await records.supersede(connection, record.id, newer[0].id)
                continue
            await queue.connector.execute_query_one_async_with_connection(
                connection,
                query=queue_sql.queries["retry_job"],
                job_id=job.id,
                retry_at=datetime.now(UTC),
                new_priority=None,
                new_queue_name=None,
                new_lock=None,
            )
            await records.requeue(connection, record.id)
            recovered += 1
            logger.info("job %s of a stalled worker was queued again", record.id)
    return recovered


async def recover_orphans(queue: Queue) -> int:
    """Queue again the records whose queue job ended without them (their worker lost the
    database while it stored the outcome, say): no job is ever left waiting forever."""
    async with queue.connector.pool.connection() as connection:
        cursor = await connection.execute(
            "SELECT r.id FROM review_jobs r JOIN procrastinate_jobs q "
            "ON q.id = r.queue_job_id WHERE r.status IN ('queued', 'running') "
            "AND q.status IN ('succeeded', 'failed', 'cancelled', 'aborted')"
        )
        orphans = [uuid.UUID(str(row[0])) for row in await cursor.fetchall()]
    for record_id in orphans:
        async with queue.transaction() as connection:
            record = await records.fetch_for_update(connection, record_id)
            if record is None or record.status in FINAL_STATUSES:
                continue
            await queue.lock_pull_request(connection, record.pr_key)
            state = await connection.execute(
                "SELECT status FROM procrastinate_jobs WHERE id = %s", (record.queue_job_id,)
            )
            row = await state.fetchone()
            if row is None or row[0] in ("todo", "doing"):
                continue
            newer = [
                other
                for other in await records.waiting_for(connection, record.pr_key)
                if other.id != record.id
            ]
            if newer:
                await records.supersede(connection, record.id, newer[0].id)
            elif record.attempts >= queue.settings.pr_review_job_max_attempts:
                body = ReviewError("The review job could not be completed.").to_body()
                await records.finish(connection, record.id, status="failed", document=body)
            else:
                queue_job_id = await queue.defer(
                    connection, record.pr_key, record.id, queueing=record.kind == "review"
                )
                await records.set_queue_job(connection, record.id, queue_job_id)
            logger.info("job %s had lost its queue job and was recovered", record.id)
    return len(orphans)


def retry_delay(exc: ReviewError, attempts: int, base_seconds: float) -> float:
    """How long a job waits before its next attempt: a rate limit's own wait, else an
    exponential backoff with jitter; never more than MAX_RETRY_DELAY_SECONDS."""
    if isinstance(exc, OpenCodeRateLimited):
        wait = exc.retry_after or DEFAULT_RATE_LIMIT_DELAY_SECONDS
        return float(min(wait, MAX_RETRY_DELAY_SECONDS))
    base = float(base_seconds * 2 ** max(0, attempts - 1))
    jitter = random.uniform(1.0, 1.5)  # noqa: S311 (not security)
    return float(min(base, MAX_RETRY_DELAY_SECONDS) * jitter)


async def defer_again(queue: Queue, record: JobRecord, delay: float) -> None:
    """The job waits in the queue for `delay` seconds; a newer head supersedes it."""
    async with queue.transaction() as connection:
        await queue.lock_pull_request(connection, record.pr_key)
        current = await records.fetch_for_update(connection, record.id)
        if current is None or current.status in FINAL_STATUSES:
            return
        newer = [
            r
            for r in await records.waiting_for(connection, record.pr_key)
            if r.id != record.id and record.kind == "review"
        ]
        if newer:
            await records.supersede(connection, record.id, newer[0].id)
            return
        queue_job_id = await queue.defer(
            connection, record.pr_key, record.id, delay, queueing=record.kind == "review"
        )
        await records.set_queue_job(connection, record.id, queue_job_id)
    logger.info("job %s deferred for %.0f s", record.id, delay)
