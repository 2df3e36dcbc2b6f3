"""What `pr-review serve` and `pr-review worker` need of the database (CONTRACT 11).

`service_database(settings)`: with `PR_REVIEW_DATABASE_URL`, the settings as they are
(migrations run when the application opens its queue). Without it, an embedded PostgreSQL
under `PR_REVIEW_DATA_DIR` is started, migrated, and a worker runs in a process of its own
against it; on exit the worker is asked to stop (SIGTERM: jobs in flight finish) and then the
database is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import SecretStr

from pr_review_api.jobs.embedded import EmbeddedPostgres, EmbeddedPostgresError
from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

EMBEDDED_WORKER_CONCURRENCY = 2
WORKER_STOP_SLACK_SECONDS = 15


@contextmanager
def service_database(settings: Settings) -> Iterator[Settings]:
    """The settings `serve` runs with: a database URL always set (see the module docstring)."""
    if settings.pr_review_database_url is not None:
        yield settings
        return
    try:
        database = EmbeddedPostgres(settings.pr_review_data_dir).start()
    except (EmbeddedPostgresError, OSError):
        sys.stderr.write(
            "error: the embedded PostgreSQL could not start under PR_REVIEW_DATA_DIR "
            "(configuration_error)\n"
        )
        sys.exit(2)
    try:
        url = database.url()
        asyncio.run(apply_migrations(url))
        worker = start_worker_process(url, EMBEDDED_WORKER_CONCURRENCY)
        try:
            yield settings.model_copy(update={"pr_review_database_url": SecretStr(url)})
        finally:
            stop_worker_process(worker, settings.review_timeout_seconds)
    finally:
        database.stop()


def start_worker_process(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    """`pr-review worker` in a process of its own, against `url`."""
    environment = dict(os.environ, PR_REVIEW_DATABASE_URL=url)
    return subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--concurrency", str(concurrency)],
        env=environment,
        stdin=subprocess.DEVNULL,
    )


def stop_worker_process(worker: subprocess.Popen[bytes], review_timeout: float) -> None:
    """SIGTERM (jobs in flight finish), then SIGKILL if it outlasts a review."""
    if worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=review_timeout + WORKER_STOP_SLACK_SECONDS)
    except subprocess.TimeoutExpired:
        logger.warning("the worker did not stop in time and was killed")
        worker.kill()
        worker.wait()
