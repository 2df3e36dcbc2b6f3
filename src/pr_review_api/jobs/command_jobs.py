"""Queueing a command of a comment (specification §15) as a job of its pull request.

A forced `review` waits as every review does (a newer head supersedes it); an `answer`, a
`dismiss` or a `help` job never supersedes a waiting review nor is superseded, and still runs
one at a time per pull request like every job (procrastinate's `lock`). A repeated delivery id
answers the job it queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from pr_review_api.jobs import records
from pr_review_api.jobs.queue import Enqueued, JobQueue
from pr_review_api.jobs.records import JobKind, PullRequestJob


@dataclass(frozen=True)
class CommandJob:
    """A command in a comment: what the pull request job is, its kind, and the command as the
    delivery gave it (jobs/commands.py reads it)."""

    job: PullRequestJob
    kind: JobKind
    command: dict[str, Any]


async def enqueue_command(
    queue: JobQueue, command: CommandJob, *, delivery_id: str | None
) -> Enqueued:
    """Queue a command of a comment; `ServerBusy` when the database cannot take it."""
    async with queue.enqueueing() as connection:
        if command.kind == "review":
            return await queue.enqueue_locked(
                connection, command.job, "webhook", delivery_id, command.command
            )
        return await _enqueue(queue, connection, command, delivery_id)


async def _enqueue(
    queue: JobQueue,
    connection: AsyncConnection[Any],
    command: CommandJob,
    delivery_id: str | None,
) -> Enqueued:
    job = command.job
    await queue.lock_pull_request(connection, job.key)
    if (known := await queue.known_delivery(connection, delivery_id)) is not None:
        return known
    job_id = await records.insert_job(
        connection, job, "webhook", kind=command.kind, command=command.command
    )
    queue_job_id = await queue.defer(connection, job.key, job_id, queueing=False)
    await records.set_queue_job(connection, job_id, queue_job_id)
    if delivery_id is not None:
        await records.remember_delivery(connection, delivery_id, job_id)
    return Enqueued(job_id, "queued")
