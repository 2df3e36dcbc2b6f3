"""Durable review jobs on procrastinate over PostgreSQL (specification §11).

One procrastinate task, `review_pull_request(job_id)`, runs one record of `review_jobs`. Every
job of a pull request is deferred with that pull request's key as both locks:

    queueing_lock   at most one job of the pull request waits in the queue
    lock            jobs of one pull request never run at the same time

Enqueueing, superseding, retrying later and recovering the job of a dead worker each happen in
one transaction that first takes the pull request's advisory lock, so the queue and the
records always agree on which job waits:

- a new head cancels the waiting job (procrastinate `cancel`, only while it is `todo`) and marks
  its record `superseded`; a repeated delivery id answers the job it created;
- a provider 429 or a transient failure does not sleep in the worker: the job is deferred
  again with `schedule_in` (same locks) and the worker moves on;
- a free worker slot takes the next job by a fair turn between installations (and owners
  without one), not by arrival order, and never a job of a tenant at its running cap
  (`jobs.fairness`);
- a job whose worker stopped sending heartbeats is put back to `todo` (or superseded, when a
  newer head already waits) by any live worker.

A review is never published twice for one head: the default runner records every publication
in `published_heads` (jobs/published_heads.py) as GitHub accepts it, and a later job of that
head answers `already_published` from it before asking the model; the markers on GitHub
(specification §10) stand behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import uuid
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import procrastinate
import psycopg
from procrastinate import exceptions as queue_errors
from procrastinate import sql as queue_sql
from psycopg import AsyncConnection

from pr_review_api.errors import (
    ForgeUnavailable,
    OpenCodeRateLimited,
    OpenCodeUnavailable,
    ReviewError,
    ServerBusy,
)
from pr_review_api.forge.clients import JobIdentities
from pr_review_api.jobs import affinity, records, recovery
from pr_review_api.jobs.comments import CommentJobs
from pr_review_api.jobs.dismissals import DatabaseDismissals
from pr_review_api.jobs.fairness import FairJobManager
from pr_review_api.jobs.learnings import DatabaseLearnings
from pr_review_api.jobs.published_heads import DatabaseLedger
from pr_review_api.jobs.records import FINAL_STATUSES, JobRecord, PullRequestJob
from pr_review_api.jobs.runner import JobReviewer
from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.model import RunRecord
from pr_review_api.permissions import PermissionCache
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)

TASK_NAME = "pr_review.review_pull_request"
QUEUE_NAME = affinity.SHARED_QUEUE  # each worker host also has its own (jobs/affinity.py)
# A forge's outage (any forge's) passes: the job is tried again later.
RETRYABLE_ERRORS = (
    OpenCodeRateLimited,
    OpenCodeUnavailable,
    ForgeUnavailable,
    ServerBusy,
)
WORKER_RESTART_SECONDS = 1.0
DATABASE_DOWN = "The job database is not available; try again shortly."

CommentRunner = Callable[[JobRecord, Settings], Awaitable[dict[str, Any]]]
"""Runs one command job of a comment (jobs/comments.py) -> its result document."""
ReviewRunner = Callable[[JobRecord, Settings], Awaitable[dict[str, Any]]]
"""Runs one job's review from its record -> the review document (specification §5): its change's
URL, whether it publishes, who it is (the installation id), and whether it is automatic (a
webhook's job honours the base's skip rules, specification §16; jobs/runner.py's `job_options`).
Raises `ReviewError` for a review that ended without one. The runner decides who it is on the
forge from the installation id (forge/clients.py, with the queue's `identities`); the settings
are the queue's own."""


@dataclass(frozen=True)
class Enqueued:
    job_id: uuid.UUID
    status: str


@dataclass
class QueueTuning:
    """Timings; tests shorten them."""

    poll_interval: float = 1.0
    heartbeat_interval: float = 2.0
    stalled_after: float = 15.0
    stalled_check_interval: float = 5.0
    retry_base_seconds: float = 2.0
    # A job waiting in another worker host's queue this long may run here (jobs/affinity.py).
    spill_after: float = affinity.SPILL_AFTER_SECONDS


class JobQueue:
    """The queue of review jobs in one PostgreSQL database."""

    def __init__(
        self,
        settings: Settings,
        *,
        runner: ReviewRunner | None = None,
        tuning: QueueTuning | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`metrics` (the worker's) counts the reviews the default runner runs."""
        if settings.pr_review_database_url is None:
            raise ValueError("JobQueue needs PR_REVIEW_DATABASE_URL")
        self.settings = settings
        self.conninfo = settings.pr_review_database_url.get_secret_value()
        self.tuning = tuning or QueueTuning()
        # Who its jobs are on the forges: the GitHub App's installation tokens, cached.
        self.identities = JobIdentities(settings)
        # The default runner keeps one repository store for the life of this worker process.
        self.connector = procrastinate.PsycopgConnector(
            conninfo=self.conninfo, min_size=1, max_size=10
        )
        # Who may write, as GitHub said lately: for this process's webhooks and reviews.
        self.permissions = PermissionCache()
        self._own_runner: JobReviewer | None = None
        if runner is None:
            # The pool exists once the app is opened: look it up on each use, not now.
            ledger = DatabaseLedger(lambda: self.connector.pool.connection())  # noqa: PLW0108
            dismissals = DatabaseDismissals(lambda: self.connector.pool.connection())  # noqa: PLW0108
            learnings = DatabaseLearnings(lambda: self.connector.pool.connection())  # noqa: PLW0108
            runner = self._own_runner = JobReviewer(
                self.identities, ledger, metrics, dismissals, self.permissions, learnings
            )
        self.runner: ReviewRunner = runner
        # Command jobs of comments (specification §15); reviews forced by `review` go through the
        # default reviewer (a queue given its own runner still runs them with it).
        reviewer = self._own_runner or JobReviewer(
            self.identities, None, metrics, permissions=self.permissions
        )
        self.comments: CommentRunner = CommentJobs(
            lambda: self.connector.pool.connection(),  # noqa: PLW0108
            self.identities,
            reviewer,
        )
        self.app = procrastinate.App(connector=self.connector)
        # Workers fetch through it: the next job is a fair turn between tenants.
        self.app.job_manager = FairJobManager(
            self.connector,
            tenant_cap=settings.pr_review_installation_max_running,
            spill_after=self.tuning.spill_after,
        )
        # This worker process on its host (jobs/affinity.py): its heartbeat row's key.
        self.host, self.process = settings.pr_review_worker_host, uuid.uuid4()
        self.task = self.app.task(name=TASK_NAME, queue=QUEUE_NAME, pass_context=True)(
            self._run_job
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def migrate(self) -> list[int]:
        """Apply the schema's migrations (procrastinate's and ours) not yet applied."""
        return await apply_migrations(self.conninfo)

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[JobQueue]:
        """Migrate, then hold the connection pool open."""
        await self.migrate()
        async with self.app.open_async():
            yield self

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with self.connector.pool.connection() as connection, connection.transaction():
            yield connection

    async def lock_pull_request(self, connection: AsyncConnection[Any], key: str) -> None:
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("pr:" + key,)
        )

    async def enqueue(
        self, job: PullRequestJob, *, source: str, delivery_id: str | None = None
    ) -> Enqueued:
        """Queue a review of `job`; a repeated delivery id answers the job it queued."""
        async with self.enqueueing() as connection:
            return await self.enqueue_locked(connection, job, source, delivery_id)

    @contextlib.asynccontextmanager
    async def enqueueing(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A transaction to queue jobs in; a database that cannot take them is `ServerBusy`."""
        try:
            async with self.transaction() as connection:
                yield connection
        except queue_errors.AlreadyEnqueued:  # records and queue disagree: the client may retry
            logger.error("a job of a pull request was already waiting outside the records")
            raise ServerBusy() from None
        except (psycopg.Error, queue_errors.ConnectorException):
            raise ServerBusy(DATABASE_DOWN) from None

    async def known_delivery(
        self, connection: AsyncConnection[Any], delivery_id: str | None
    ) -> Enqueued | None:
        if delivery_id is None:
            return None
        known = await records.by_delivery(connection, delivery_id)
        if known is None:
            return None
        record = await records.fetch(connection, known)
        assert record is not None
        return Enqueued(known, record.status)

    async def enqueue_locked(
        self,
        connection: AsyncConnection[Any],
        job: PullRequestJob,
        source: str,
        delivery_id: str | None,
        command: dict[str, Any] | None = None,
    ) -> Enqueued:
        """Queue a review of `job` inside the caller's transaction, under the pull request's
        lock: the waiting review of an older head is superseded."""
        await self.lock_pull_request(connection, job.key)
        if (known := await self.known_delivery(connection, delivery_id)) is not None:
            return known
        waiting = await records.waiting_for(connection, job.key)
        for record in waiting:
            # The same head, asked for again (reopened, ready_for_review): one job does, unless
            # only the new one names the App installation it must run as.
            same_identity = job.installation_id in (None, record.installation_id)
            if (
                same_identity
                and job.head_sha is not None
                and record.head_sha == job.head_sha
                and record.post
            ):
                if delivery_id is not None:
                    await records.remember_delivery(connection, delivery_id, record.id)
                return Enqueued(record.id, record.status)
        job_id = await records.insert_job(connection, job, source, command=command)
        for record in waiting:
            if record.queue_job_id is not None and await self.cancel_waiting(connection, record):
                await records.supersede(connection, record.id, job_id)
        queue_job_id = await self.defer(connection, job.key, job_id)
        await records.set_queue_job(connection, job_id, queue_job_id)
        if delivery_id is not None:
            await records.remember_delivery(connection, delivery_id, job_id)
        return Enqueued(job_id, "queued")

    async def cancel_waiting(self, connection: AsyncConnection[Any], record: JobRecord) -> bool:
        """Cancel the record's queue job if it still waits (`todo`)."""
        row = await self.connector.execute_query_one_async_with_connection(
            connection,
            query=queue_sql.queries["cancel_job"],
            job_id=record.queue_job_id,
            abort=False,
            delete_job=False,
        )
        return row["id"] is not None

    async def defer(
        self,
        connection: AsyncConnection[Any],
        key: str,
        job_id: uuid.UUID,
        schedule_in: float | None = None,
        *,
        queueing: bool = True,
    ) -> int:
        """`queueing` False (a command job): not counted as the pull request's one waiting
        review; it still never runs beside another job of the pull request."""
        # The queue of the host whose cache holds the repository (or the shared one).
        queue = await affinity.queue_for(connection, key, self.tuning.stalled_after)
        options: dict[str, Any] = {"lock": key, "connection": connection, "queue": queue}
        if queueing:
            options["queueing_lock"] = key
        if schedule_in is not None and schedule_in > 0:
            options["schedule_in"] = {"seconds": schedule_in}
        return await self.task.configure(**options).defer_async(job_id=str(job_id))

    async def get(self, job_id: uuid.UUID) -> JobRecord | None:
        """The record of `job_id`, or None."""
        try:
            async with self.connector.pool.connection() as connection:
                return await records.fetch(connection, job_id)
        except (psycopg.Error, queue_errors.ConnectorException):
            raise ServerBusy(DATABASE_DOWN) from None

    async def count_by_status(self) -> dict[str, int]:
        """How many jobs each status has (the metrics' job gauge reads it at scrape time)."""
        async with self.connector.pool.connection() as connection:
            return await records.count_by_status(connection)

    # --- the worker side ------------------------------------------------------------------

    async def run_worker(
        self, concurrency: int = 1, *, install_signal_handlers: bool = True
    ) -> None:
        """Run jobs until SIGINT/SIGTERM (or cancellation); jobs in flight finish first.

        A worker that stops on its own (its database restarted, say) is started again after a
        second: jobs are never left without a worker because PostgreSQL blinked."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        signals = (signal.SIGINT, signal.SIGTERM) if install_signal_handlers else ()
        for number in signals:
            loop.add_signal_handler(number, stopping.set)
        # Recovery sweeps, and this process's heartbeat on its host (jobs/affinity.py).
        sweeping = asyncio.create_task(recovery.recover_forever(self, self.tuning))
        beating = asyncio.create_task(affinity.keep_alive(self, concurrency))
        run: asyncio.Task[None] | None = None
        try:
            while not stopping.is_set():
                run = asyncio.create_task(self._run_worker_once(concurrency))
                stop_wait = asyncio.create_task(stopping.wait())
                done, _ = await asyncio.wait({run, stop_wait}, return_when=FIRST_COMPLETED)
                stop_wait.cancel()
                if run not in done:
                    break
                failure = None if run.cancelled() else run.exception()
                logger.warning(
                    "the worker stopped (%s); starting it again",
                    type(failure).__name__ if failure else "no error",
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), WORKER_RESTART_SECONDS)
        finally:
            if run is not None and not run.done():
                run.cancel()  # procrastinate stops gracefully: jobs in flight finish
                await asyncio.gather(run, return_exceptions=True)
            for number in signals:
                loop.remove_signal_handler(number)
            for task in (sweeping, beating):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if self._own_runner is not None:
                self._own_runner.close()

    async def _run_worker_once(self, concurrency: int) -> None:
        await self.app.run_worker_async(
            queues=[QUEUE_NAME, affinity.host_queue(self.host)],
            concurrency=concurrency,
            wait=True,
            install_signal_handlers=False,
            fetch_job_polling_interval=self.tuning.poll_interval,
            update_heartbeat_interval=self.tuning.heartbeat_interval,
            stalled_worker_timeout=self.tuning.stalled_after,
            shutdown_graceful_timeout=self.settings.review_timeout_seconds + 10,
        )

    async def recover_stalled(self) -> int:
        """Put jobs of workers that stopped sending heartbeats back in the queue."""
        return await recovery.recover_stalled(self, self.tuning.stalled_after)

    async def recover_orphans(self) -> int:
        """Queue again the records whose queue job ended without them."""
        return await recovery.recover_orphans(self)

    async def finish_queue_job(
        self, connection: AsyncConnection[Any], queue_job_id: int, status: str
    ) -> None:
        await self.connector.execute_query_one_async_with_connection(
            connection,
            query=queue_sql.queries["finish_job"],
            job_id=queue_job_id,
            status=status,
            delete_job=False,
        )

    async def _run_job(self, context: procrastinate.JobContext, job_id: str) -> None:
        """The task: claim the record, review, store the outcome (or defer again)."""
        record_id = uuid.UUID(job_id)
        queue_job_id = context.job.id
        record = await self._claim(record_id, queue_job_id)
        if record is None:
            return
        try:
            settings = self.settings
            if record.command is not None:  # a command in a comment (specification §15)
                document = await self.comments(record, settings)
            else:
                document = await self.runner(record, settings)
        except ReviewError as exc:
            if isinstance(exc, RETRYABLE_ERRORS) and record.attempts < (
                self.settings.pr_review_job_max_attempts
            ):
                delay = recovery.retry_delay(exc, record.attempts, self.tuning.retry_base_seconds)
                await recovery.defer_again(self, record, delay)
                return
            await self._finish(record, "failed", exc.to_body(), exc.run)
            return
        except Exception as exc:
            logger.error("review job failed unexpectedly: %s", type(exc).__name__)
            body = ReviewError("The review job failed unexpectedly.").to_body()
            await self._finish(record, "failed", body)
            return
        await self._finish(record, "succeeded", document)

    async def _claim(self, record_id: uuid.UUID, queue_job_id: int | None) -> JobRecord | None:
        """Mark the record running, or None when there is nothing to run now."""
        async with self.transaction() as connection:
            record = await records.fetch_for_update(connection, record_id)
            if record is None or record.status in FINAL_STATUSES:
                return None
            if record.queue_job_id != queue_job_id:
                return None  # a stale queue job: the record moved on to another
            # The fetch already kept the tenant under its cap (jobs.fairness).
            await records.mark_running(connection, record.id, host=self.host)
            return await records.fetch(connection, record.id)

    async def _finish(
        self,
        record: JobRecord,
        status: str,
        document: dict[str, Any],
        spent: RunRecord | None = None,
    ) -> None:
        assert status in ("succeeded", "failed")
        async with self.transaction() as connection:
            current = await records.fetch_for_update(connection, record.id)
            if current is None or current.status in FINAL_STATUSES:
                return
            await records.finish(
                connection,
                record.id,
                status="succeeded" if status == "succeeded" else "failed",
                document=document,
                spent=spent,
            )
