"""`pr-review jobs list|show|retry|cancel`: the review jobs in the database, for an operator.

The database is `PR_REVIEW_DATABASE_URL`, or else the embedded PostgreSQL under
`PR_REVIEW_DATA_DIR` that `pr-review serve` keeps: used as it runs, or started for the
command and stopped after it when `serve` is not running. `--format table` is for people,
`--format json` prints what the HTTP API answers (`GET /v1/review-jobs`, `GET
/v1/review-jobs/{id}`) or, for retry and cancel, `{"job_id", "status", "outcome"}`.

Exit status: 0 done; 1 the job was not in a state for it (cancel: not queued; retry: not
failed), or the database failed; 2 bad input or configuration (no such job included).

The database driver and the queue library load only when a `jobs` command runs: every other
`pr-review` command starts without them.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click
from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError, InvalidRequest, JobNotFound, ReviewError
from pr_review_api.jobs.listing import DEFAULT_PAGE_SIZE, JOB_STATUSES, MAX_PAGE_SIZE
from pr_review_api.jsonutil import dumps_compact
from pr_review_api.settings import Settings, load_settings

if TYPE_CHECKING:
    from pr_review_api.jobs.admin import AdminResult
    from pr_review_api.jobs.records import JobRecord

EXIT_NOT_APPLICABLE = 1
EXIT_BAD_INPUT = 2
_BAD_INPUT_CODES = frozenset({"invalid_request", "configuration_error", "job_not_found"})
_HEAD_CHARS = 12

Format = Literal["table", "json"]
T = TypeVar("T")

_format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for people, json for scripts.",
)


@click.group("jobs")
def jobs_command() -> None:
    """Review jobs in the database: list, show, retry a failed one, cancel a queued one.

    The database is PR_REVIEW_DATABASE_URL, or the embedded one under PR_REVIEW_DATA_DIR.
    """


@jobs_command.command("list")
@click.option("--repository", metavar="OWNER/REPO", help="Only jobs of this repository.")
@click.option("--status", type=click.Choice(JOB_STATUSES), help="Only jobs in this status.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE_SIZE),
    default=DEFAULT_PAGE_SIZE,
    show_default=True,
    help="Jobs on one page.",
)
@click.option("--cursor", metavar="CURSOR", help="The next page's cursor a listing printed.")
@_format_option
def list_jobs(
    repository: str | None,
    status: str | None,
    limit: int,
    cursor: str | None,
    output_format: Format,
) -> None:
    """Jobs newest first: pull request, head, status, findings, tokens and duration."""
    from pr_review_api.jobs import admin  # noqa: PLC0415
    from pr_review_api.jobs.records import JobFilter  # noqa: PLC0415
    from pr_review_api.service.job_listing import (  # noqa: PLC0415
        page_document,
        parse_cursor,
        parse_repository,
    )

    try:
        owner, repo = parse_repository(repository) if repository else (None, None)
        after = parse_cursor(cursor) if cursor else None
    except ReviewError as exc:
        _fail(exc, output_format)
    where = JobFilter(owner=owner, repo=repo, status=status, after=after)
    page = _with_queue(lambda queue: admin.list_jobs(queue, where, limit), output_format)
    if page is None:
        _fail(InvalidRequest("cursor is not a cursor this listing gave."), output_format)
    if output_format == "json":
        click.echo(dumps_compact(page_document(page, where, limit)))
        return
    click.echo(jobs_table(page.jobs))
    if page.next_after is not None:
        click.echo(f"more: pr-review jobs list --cursor {page.next_after} (same filters)")


@jobs_command.command("show")
@click.argument("job_id")
@_format_option
def show_job(job_id: str, output_format: Format) -> None:
    """One job: its pull request, status, figures, and its findings or error."""
    parsed = _job_id(job_id, output_format)

    async def fetch(queue: Any) -> JobRecord:
        record: JobRecord | None = await queue.get(parsed)
        if record is None:
            raise JobNotFound()
        return record

    record = _with_queue(fetch, output_format)
    if output_format == "json":
        click.echo(dumps_compact(record.document()))
    else:
        click.echo(job_details(record))


@jobs_command.command("retry")
@click.argument("job_id")
@_format_option
def retry_job(job_id: str, output_format: Format) -> None:
    """Queue a failed job's pull request again (a new job; a job already waiting answers)."""
    from pr_review_api.jobs import admin  # noqa: PLC0415

    parsed = _job_id(job_id, output_format)
    result = _with_queue(lambda queue: admin.retry(queue, parsed), output_format)
    _print_action(result, output_format)


@jobs_command.command("cancel")
@click.argument("job_id")
@_format_option
def cancel_job(job_id: str, output_format: Format) -> None:
    """Mark a queued job so that it never runs (its status becomes superseded)."""
    from pr_review_api.jobs import admin  # noqa: PLC0415

    parsed = _job_id(job_id, output_format)
    result = _with_queue(lambda queue: admin.cancel(queue, parsed), output_format)
    _print_action(result, output_format)


# --- the database ---------------------------------------------------------------------------


@contextmanager
def jobs_database(settings: Settings) -> Iterator[Settings]:
    """The settings with a database URL: the configured one, or the embedded one (started for
    the command, and stopped after it, unless `serve` already runs it)."""
    if settings.pr_review_database_url is not None:
        yield settings
        return
    from pr_review_api.jobs.embedded import (  # noqa: PLC0415
        EmbeddedPostgres,
        EmbeddedPostgresError,
    )

    database = EmbeddedPostgres(settings.pr_review_data_dir)
    if not (database.pgdata / "PG_VERSION").exists():
        raise ConfigurationError(
            "There is no jobs database: set PR_REVIEW_DATABASE_URL, or run `pr-review serve` "
            "once with this PR_REVIEW_DATA_DIR."
        )
    started_here = not database.is_running()
    try:
        if started_here:
            database.start()
    except (EmbeddedPostgresError, OSError):
        raise ConfigurationError(
            "The embedded PostgreSQL under PR_REVIEW_DATA_DIR could not start."
        ) from None
    try:
        yield settings.model_copy(update={"pr_review_database_url": SecretStr(database.url())})
    finally:
        if started_here:
            database.stop()


def _with_queue(action: Callable[[Any], Awaitable[T]], output_format: Format) -> T:
    """Run `action(queue)` against the jobs database; every failure ends the command."""
    from pr_review_api.jobs.queue import JobQueue  # noqa: PLC0415

    async def run(settings: Settings) -> T:
        queue = JobQueue(settings, runner=_never_runs)
        async with queue.opened():
            return await action(queue)

    try:
        with jobs_database(load_settings()) as settings:
            return asyncio.run(run(settings))
    except ReviewError as exc:
        _fail(exc, output_format)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the database unreachable, say: one line, no traceback
        _fail(ReviewError(f"The jobs database failed ({type(exc).__name__})."), output_format)


async def _never_runs(*_: Any) -> dict[str, Any]:
    raise AssertionError("pr-review jobs never runs a review")  # pragma: no cover


def _job_id(value: str, output_format: Format) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        _fail(JobNotFound(), output_format)


def _fail(exc: ReviewError, output_format: Format) -> NoReturn:
    if output_format == "json":
        click.echo(dumps_compact(exc.to_body()))
    else:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
    sys.exit(EXIT_BAD_INPUT if exc.code in _BAD_INPUT_CODES else EXIT_NOT_APPLICABLE)


# --- output ---------------------------------------------------------------------------------

_ACTION_TEXT = {
    "cancelled": "job {job} cancelled: it will not run (status superseded)",
    "queued": "queued again as job {job}",
    "already_waiting": "job {job} of that pull request already waits; it will review it",
    "not_queued": "job {job} is {status}: only a queued job can be cancelled",
    "not_failed": "job {job} is {status}: only a failed job can be retried",
}


def _print_action(result: AdminResult, output_format: Format) -> None:
    if output_format == "json":
        document = {"job_id": str(result.job_id), "status": result.status}
        click.echo(dumps_compact({**document, "outcome": result.outcome}))
    else:
        text = _ACTION_TEXT[result.outcome].format(job=result.job_id, status=result.status)
        click.echo(text, err=not result.changed and result.outcome != "already_waiting")
    if not result.changed and result.outcome != "already_waiting":
        sys.exit(EXIT_NOT_APPLICABLE)


def _pull_request(record: JobRecord) -> str:
    return f"{record.owner}/{record.repo}#{record.number}"


def jobs_table(jobs: list[JobRecord]) -> str:
    """One line per job, columns aligned; `(no jobs)` for an empty page."""
    from pr_review_api.jobs.figures import JobFigures  # noqa: PLC0415

    if not jobs:
        return "(no jobs)"
    header = ["JOB", "STATUS", "PULL REQUEST", "HEAD", "CREATED", "FINDINGS", "TOKENS", "TIME"]
    rows = [header]
    for record in jobs:
        figures = JobFigures.of(record)
        rows.append(
            [
                str(record.id),
                record.status,
                _pull_request(record),
                (record.head_sha or "-")[:_HEAD_CHARS],
                record.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                figures.severity_text(),
                "-" if figures.total_tokens is None else str(figures.total_tokens),
                figures.duration_text(),
            ]
        )
    widths = [max(len(_plain(row[i])) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            _plain(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in rows
    )


def job_details(record: JobRecord) -> str:
    """One job for people: its figures, then its findings or its error."""
    from pr_review_api.jobs.figures import JobFigures  # noqa: PLC0415

    figures = JobFigures.of(record)
    lines = [
        f"job:          {record.id}",
        f"status:       {record.status}",
        f"pull request: {_plain(record.pull_request_url)}",
        f"head:         {record.head_sha or '-'}",
        f"created:      {record.created_at.isoformat()}",
        f"attempts:     {record.attempts}",
        f"duration:     {figures.duration_text()}",
        f"tokens:       {'-' if figures.total_tokens is None else figures.total_tokens}",
        f"findings:     {figures.severity_text()}",
    ]
    if figures.termination_reason is not None:
        lines.append(f"ended:        {figures.termination_reason}")
    if figures.error_code is not None:
        lines.append(f"error:        {figures.error_code}")
    if figures.publication_status is not None:
        published = figures.publication_status
        if figures.published_url is not None:
            published += f" {_plain(figures.published_url)}"
        lines.append(f"publication:  {published}")
    review = record.result.get("review") if isinstance(record.result, dict) else None
    for finding in review.get("findings", []) if isinstance(review, dict) else []:
        if isinstance(finding, dict):
            place = f"{finding.get('path')}:{finding.get('line') or '-'}"
            lines.append(f"  [{finding.get('severity')}] {place} {finding.get('title')}")
    return "\n".join(_plain(line) for line in lines)


def _plain(text: str) -> str:
    """Model and repository text on a terminal: no control characters (no escape sequences)."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)
