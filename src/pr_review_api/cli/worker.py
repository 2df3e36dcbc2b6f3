"""`pr-review worker [--concurrency N]`: run review jobs from the database (CONTRACT 11).

Any number of workers, on any machine, may run against one `PR_REVIEW_DATABASE_URL`.
SIGINT or SIGTERM stops fetching new jobs and lets the ones in flight finish.
"""

from __future__ import annotations

import asyncio
import sys

import click

from pr_review_api.errors import ConfigurationError, ReviewError
from pr_review_api.settings import load_settings


@click.command()
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Jobs this worker runs at the same time.",
)
def worker(concurrency: int) -> None:
    """Run review jobs from PR_REVIEW_DATABASE_URL until stopped (SIGTERM lets jobs finish)."""
    from pr_review_api.jobs.service import ending_with_parent  # noqa: PLC0415

    # A worker of `serve` ends with it, and then stops its embedded database (issue 22 item 1).
    with ending_with_parent():
        _run_worker(concurrency)


def _run_worker(concurrency: int) -> None:
    from pr_review_api.jobs.queue import JobQueue  # noqa: PLC0415

    try:
        settings = load_settings()
        settings.require_provider_key()
        if settings.pr_review_database_url is None:
            raise ConfigurationError(
                "PR_REVIEW_DATABASE_URL is not set: a worker needs the jobs database."
            )
        queue = JobQueue(settings)
    except ReviewError as exc:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
        sys.exit(2)
    # The service's log rules: our events at INFO, third-party records only from WARNING.
    from pr_review_api.service.server import configure_service_logging  # noqa: PLC0415

    configure_service_logging()

    async def run() -> None:
        async with queue.opened():
            await queue.run_worker(concurrency)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the database unreachable, say: one line, no traceback
        click.echo(f"error: the worker stopped: {type(exc).__name__}", err=True)
        sys.exit(1)
