"""What `pr-review serve` and `pr-review worker` need of the database (CONTRACT 11).

`service_database(settings)`: with `PR_REVIEW_DATABASE_URL`, the settings as they are
(migrations run when the application opens its queue). Without it, an embedded PostgreSQL
under `PR_REVIEW_DATA_DIR` is started, migrated, and a worker runs in a process of its own
against it; on exit the worker is asked to stop (SIGTERM: jobs in flight finish) and then the
database is stopped, whatever ended `serve`: a return, an exception, or `StopRequested` from
`serve`'s signal handlers (issue 22 item 1).

Should `serve` die without running that (SIGKILL, say), the worker goes too: it is started
with `STOP_WITH_PARENT_VARIABLE` naming its parent, and `stop_with_parent()` asks the kernel
for a SIGTERM when that parent goes (Linux `PR_SET_PDEATHSIG`; elsewhere a thread watches the
parent). The database then stays up until the next `serve` on the same folder adopts it.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import SecretStr

from pr_review_api.jobs.embedded import EmbeddedPostgres, EmbeddedPostgresError
from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

EMBEDDED_WORKER_CONCURRENCY = 2
WORKER_STOP_SLACK_SECONDS = 15
# Set by `serve` for its worker: the parent's process id, whose end must end the worker too.
STOP_WITH_PARENT_VARIABLE = "PR_REVIEW_STOP_WITH_PARENT"
_PR_SET_PDEATHSIG = 1
_PARENT_POLL_SECONDS = 1.0


@contextmanager
def service_database(settings: Settings) -> Iterator[Settings]:
    """The settings `serve` runs with: a database URL always set (see the module docstring)."""
    if settings.pr_review_database_url is not None:
        yield settings
        return
    database = EmbeddedPostgres(settings.pr_review_data_dir)
    try:
        try:
            database.start()
        except (EmbeddedPostgresError, OSError):
            sys.stderr.write(
                "error: the embedded PostgreSQL could not start under PR_REVIEW_DATA_DIR "
                "(configuration_error)\n"
            )
            sys.exit(2)
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
    environment = dict(
        os.environ, PR_REVIEW_DATABASE_URL=url, **{STOP_WITH_PARENT_VARIABLE: str(os.getpid())}
    )
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


def stop_with_parent() -> None:
    """In a worker `serve` started: receive SIGTERM (jobs in flight finish, then the worker
    exits) when `serve` is gone, however it went. Does nothing in a worker started by hand."""
    named = os.environ.pop(STOP_WITH_PARENT_VARIABLE, "")
    if not named.isdigit():
        return
    parent = int(named)
    if not _ask_kernel_for_sigterm_on_parent_death():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # gone before the request above took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _ask_kernel_for_sigterm_on_parent_death() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)
