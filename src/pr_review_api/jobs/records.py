"""The review-job records (`review_jobs`) and the documents built from them.

Statuses: `queued` (waiting in the queue, or waiting to be tried again), `running`,
`succeeded` (a review document), `failed` (an error document), `superseded` (a newer head of
the same pull request replaced it while it waited). The records are written only by
`jobs.queue`, always inside a transaction that holds the pull request's advisory lock, so the
queue and the records never disagree about which job of a pull request waits.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from pr_review_api.forge.urls import change_key, forge_of
from pr_review_api.model import RunRecord

JobKind = Literal["review", "answer", "dismiss", "help", "remember", "forget"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "superseded"]
FINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "superseded"})


@dataclass(frozen=True)
class JobRecord:
    """One row of `review_jobs`, as the queue needs it."""

    id: uuid.UUID
    source: str
    pull_request_url: str
    owner: str
    repo: str
    number: int
    pr_key: str
    head_sha: str | None
    installation_id: int | None
    post: bool
    status: JobStatus
    queue_job_id: int | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None
    # The comment commands (specification §15): `review` (also a pull request's own review),
    # `answer`, `dismiss`, `help`; `command` is what the comment asked (jobs/commands.py).
    kind: JobKind = "review"
    command: dict[str, Any] | None = None
    # What the review spent, also for one that ended with an error (whose document has none).
    total_tokens: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> JobRecord:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def document(self) -> dict[str, Any]:
        """`GET /v1/review-jobs/{id}` (specification §11)."""
        return {
            "job_id": str(self.id),
            "status": self.status,
            "pull_request": {
                "url": self.pull_request_url,
                "owner": self.owner,
                "repo": self.repo,
                "number": self.number,
                "forge": forge_of(self.pull_request_url),
            },
            "head_sha": self.head_sha,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "result": self.result,
        }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


# A constant column list, not input: the queries below are fixed strings.
_SELECT = "SELECT " + ", ".join(JobRecord.__dataclass_fields__) + " FROM review_jobs "  # noqa: S608


async def fetch(connection: AsyncConnection[Any], job_id: uuid.UUID) -> JobRecord | None:
    """The record, or None."""
    async with connection.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(_SELECT + "WHERE id = %s", (job_id,))
        row = await cursor.fetchone()
    return None if row is None else JobRecord.from_row(row)


async def fetch_for_update(connection: AsyncConnection[Any], job_id: uuid.UUID) -> JobRecord | None:
    """The record, locked until the transaction ends."""
    async with connection.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(_SELECT + "WHERE id = %s FOR UPDATE", (job_id,))
        row = await cursor.fetchone()
    return None if row is None else JobRecord.from_row(row)


@dataclass(frozen=True)
class JobFilter:
    """Which records a listing shows: a repository (case-insensitive, as GitHub's names
    are), a status, and the records after `after` (the last record of the previous page)."""

    owner: str | None = None
    repo: str | None = None
    status: str | None = None
    after: uuid.UUID | None = None


@dataclass(frozen=True)
class JobPage:
    """One page of records, newest first; `next_after` is None on the last page."""

    jobs: list[JobRecord]
    next_after: uuid.UUID | None


async def list_page(
    connection: AsyncConnection[Any], where: JobFilter, limit: int
) -> JobPage | None:
    """Records newest first (then by id, so that a page boundary never splits a tie), at most
    `limit`; None when `where.after` names no record (a stale or forged cursor)."""
    anchor: tuple[Any, Any] = (None, None)
    if where.after is not None:
        cursor = await connection.execute(
            "SELECT created_at, id FROM review_jobs WHERE id = %s", (where.after,)
        )
        row = await cursor.fetchone()
        if row is None:
            return None
        anchor = (row[0], row[1])
    parameters = {
        "owner": None if where.owner is None else where.owner.lower(),
        "repo": None if where.repo is None else where.repo.lower(),
        "status": where.status,
        "anchor_at": anchor[0],
        "anchor_id": anchor[1],
        "limit": limit + 1,
    }
    async with connection.cursor(row_factory=dict_row) as listing:
        await listing.execute(_LIST, parameters)
        rows = await listing.fetchall()
    jobs = [JobRecord.from_row(row) for row in rows[:limit]]
    more = len(rows) > limit
    return JobPage(jobs, jobs[-1].id if more and jobs else None)


# Every filter is a parameter that may be NULL ("any"): one fixed statement.
_LIST = (
    _SELECT + "WHERE (%(owner)s::text IS NULL OR lower(owner) = %(owner)s) "
    "AND (%(repo)s::text IS NULL OR lower(repo) = %(repo)s) "
    "AND (%(status)s::text IS NULL OR status = %(status)s) "
    "AND (%(anchor_at)s::timestamptz IS NULL "
    "OR (created_at, id) < (%(anchor_at)s::timestamptz, %(anchor_id)s::uuid)) "
    "ORDER BY created_at DESC, id DESC LIMIT %(limit)s"
)


async def by_delivery(connection: AsyncConnection[Any], delivery_id: str) -> uuid.UUID | None:
    cursor = await connection.execute(
        "SELECT job_id FROM webhook_deliveries WHERE delivery_id = %s", (delivery_id,)
    )
    row = await cursor.fetchone()
    return None if row is None else uuid.UUID(str(row[0]))


async def waiting_for(connection: AsyncConnection[Any], pr_key: str) -> list[JobRecord]:
    """The pull request's queued jobs (at most one, by construction), oldest first."""
    async with connection.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(
            # Only reviews wait one at a time; a command job never supersedes nor is superseded.
            _SELECT + "WHERE pr_key = %s AND status = 'queued' AND kind = 'review' "
            "ORDER BY created_at",
            (pr_key,),
        )
        rows = await cursor.fetchall()
    return [JobRecord.from_row(row) for row in rows]


async def insert(  # noqa: PLR0913  (one keyword per column of the row)
    connection: AsyncConnection[Any],
    *,
    job_id: uuid.UUID,
    source: str,
    url: str,
    owner: str,
    repo: str,
    number: int,
    pr_key: str,
    head_sha: str | None,
    installation_id: int | None,
    post: bool,
    kind: JobKind = "review",
    command: dict[str, Any] | None = None,
) -> None:
    await connection.execute(
        "INSERT INTO review_jobs (id, source, pull_request_url, owner, repo, "
        "number, pr_key, head_sha, installation_id, post, status, kind, command) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'queued', %s, %s)",
        (
            job_id,
            source,
            url,
            owner,
            repo,
            number,
            pr_key,
            head_sha,
            installation_id,
            post,
            kind,
            None if command is None else json.dumps(command),
        ),
    )


async def answers_in_the_last_hour(connection: AsyncConnection[Any], pr_key: str) -> int:
    """Answers posted on the pull request in the last hour (PR_REVIEW_MAX_ANSWERS_PER_HOUR)."""
    cursor = await connection.execute(
        "SELECT count(*) FROM review_jobs WHERE pr_key = %s AND kind = 'answer' "
        "AND status = 'succeeded' AND result->>'outcome' = 'answered' "
        "AND finished_at > now() - interval '1 hour'",
        (pr_key,),
    )
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def remember_delivery(
    connection: AsyncConnection[Any], delivery_id: str, job_id: uuid.UUID
) -> None:
    await connection.execute(
        "INSERT INTO webhook_deliveries (delivery_id, job_id) VALUES (%s, %s)",
        (delivery_id, job_id),
    )


async def set_queue_job(
    connection: AsyncConnection[Any], job_id: uuid.UUID, queue_job_id: int
) -> None:
    await connection.execute(
        "UPDATE review_jobs SET queue_job_id = %s, status = 'queued', queued_at = now() "
        "WHERE id = %s",
        (queue_job_id, job_id),
    )


async def supersede(
    connection: AsyncConnection[Any], job_id: uuid.UUID, by: uuid.UUID | None
) -> None:
    await connection.execute(
        "UPDATE review_jobs SET status = 'superseded', superseded_by = %s, finished_at = now() "
        "WHERE id = %s AND status NOT IN ('succeeded', 'failed', 'superseded')",
        (by, job_id),
    )


async def mark_running(
    connection: AsyncConnection[Any], job_id: uuid.UUID, *, host: str | None = None
) -> None:
    """`host`: the worker host that runs it (jobs/affinity.py)."""
    await connection.execute(
        "UPDATE review_jobs SET status = 'running', attempts = attempts + 1, "
        "started_at = coalesce(started_at, now()), worker_host = %s WHERE id = %s",
        (host, job_id),
    )


async def finish(
    connection: AsyncConnection[Any],
    job_id: uuid.UUID,
    *,
    status: Literal["succeeded", "failed"],
    document: dict[str, Any],
    spent: RunRecord | None = None,
) -> None:
    """Store the outcome: the document and the figures an operator sums up. An error's
    document has no usage (specification §5): `spent` gives what its review spent."""
    review = document.get("review")
    usage = document.get("usage") if isinstance(document.get("usage"), dict) else {}
    rounds, tool_calls = document.get("rounds"), document.get("tool_calls")
    if spent is not None and not usage:
        usage = spent.usage.model_dump()
        rounds, tool_calls = spent.rounds, spent.tool_calls
    publication = document.get("publication")
    publication = publication if isinstance(publication, dict) else {}
    error = document.get("error") if isinstance(document.get("error"), dict) else {}
    revisions = document.get("revisions") if isinstance(document.get("revisions"), dict) else {}
    assert isinstance(usage, dict)
    assert isinstance(error, dict)
    assert isinstance(revisions, dict)
    await connection.execute(
        "UPDATE review_jobs SET status = %s, finished_at = now(), result = %s, "
        "termination_reason = %s, error_code = %s, prompt_tokens = %s, completion_tokens = %s, "
        "total_tokens = %s, rounds = %s, tool_calls = %s, findings = %s, "
        "publication_status = %s, published_review_id = %s, published_url = %s, "
        "head_sha = coalesce(%s, head_sha) WHERE id = %s",
        (
            status,
            json.dumps(document),
            document.get("termination_reason"),
            error.get("code"),
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            usage.get("total_tokens"),
            rounds,
            tool_calls,
            len(review.get("findings", [])) if isinstance(review, dict) else None,
            publication.get("status"),
            publication.get("review_id"),
            publication.get("url"),
            revisions.get("head_sha"),
            job_id,
        ),
    )


async def requeue(connection: AsyncConnection[Any], job_id: uuid.UUID) -> None:
    """Back to waiting (a worker that died)."""
    await connection.execute(
        "UPDATE review_jobs SET status = 'queued' WHERE id = %s AND status = 'running'", (job_id,)
    )


async def count_by_status(connection: AsyncConnection[Any]) -> dict[str, int]:
    """How many records each status has (statuses without one are absent)."""
    async with connection.cursor(row_factory=dict_row) as cursor:
        await cursor.execute("SELECT status, count(*) AS n FROM review_jobs GROUP BY status")
        return {str(row["status"]): int(row["n"]) for row in await cursor.fetchall()}


@dataclass(frozen=True)
class PullRequestJob:
    """What a new job reviews."""

    url: str  # canonical
    owner: str
    repo: str
    number: int
    head_sha: str | None = None
    installation_id: int | None = None
    post: bool = True

    @property
    def key(self) -> str:
        """The change's key (`review_jobs.pr_key`, its lock and its one waiting job), as its
        forge makes it (forge/urls.py's `change_key`)."""
        return change_key(self.url, self.owner, self.repo, self.number)


async def insert_job(
    connection: AsyncConnection[Any],
    job: PullRequestJob,
    source: str,
    *,
    kind: JobKind = "review",
    command: dict[str, Any] | None = None,
) -> uuid.UUID:
    """A new record of `job`, queued; its id. A command of a comment is always published."""
    job_id = uuid.uuid4()
    await insert(
        connection,
        job_id=job_id,
        source=source,
        url=job.url,
        owner=job.owner,
        repo=job.repo,
        number=job.number,
        pr_key=job.key,
        head_sha=job.head_sha,
        installation_id=job.installation_id,
        post=job.post or kind != "review",
        kind=kind,
        command=command,
    )
    return job_id
