"""What `pr-review serve` and `pr-review worker` need of the database (specification §11).

`service_database(settings)`: with `PR_REVIEW_DATABASE_URL`, the settings as they are
(migrations run when the application opens its queue). Without it, an embedded PostgreSQL
under `PR_REVIEW_DATA_DIR` is started, migrated, and a worker runs in a process of its own
against it; on exit the worker is asked to stop (SIGTERM: jobs in flight finish) and then the
database is stopped, whatever ended `serve`: a return, an exception, or `StopRequested` from
`serve`'s signal handlers.

Should `serve` die without running that (SIGKILL, say), the worker cleans up: it is started
with `STOP_WITH_PARENT_VARIABLE` naming its parent, and `ending_with_parent()` asks the kernel
for a SIGTERM when that parent goes (Linux `PR_SET_PDEATHSIG`; elsewhere a thread watches the
parent). Its jobs in flight finish, then the orphaned worker stops the embedded database
(`ORPHAN_STOPS_DATABASE_VARIABLE` names its folder) and exits.

A restarted `serve` must not adopt a database that such a worker is about to stop: `serve`
holds an exclusive lock on `PR_REVIEW_DATA_DIR/serve.lock` for as long as it runs, and its
worker inherits the lock's file, so the lock is free only once both are gone. A `serve` that
finds it taken waits for it (as long as a worker may take to stop), then gives up with a
configuration error: one data folder serves one `serve` at a time.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, NoReturn

from pydantic import SecretStr

from pr_review_api.jobs.embedded import EmbeddedPostgres, EmbeddedPostgresError
from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.metrics import fresh_worker_directory, worker_environment
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

EMBEDDED_WORKER_CONCURRENCY = 2
WORKER_STOP_SLACK_SECONDS = 15
# Set by `serve` for its worker: the parent's process id, whose end must end the worker too,
# and the embedded database's folder, which the worker stops if it outlives that parent.
STOP_WITH_PARENT_VARIABLE = "PR_REVIEW_STOP_WITH_PARENT"
ORPHAN_STOPS_DATABASE_VARIABLE = "PR_REVIEW_ORPHAN_STOPS_DATABASE"
LOCK_FILE_NAME = "serve.lock"
_LOCK_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1
_PARENT_POLL_SECONDS = 1.0


@contextmanager
def service_database(settings: Settings) -> Iterator[Settings]:
    """The settings `serve` runs with: a database URL always set (see the module docstring)."""
    if settings.pr_review_database_url is not None:
        yield settings
        return
    database = EmbeddedPostgres(settings.pr_review_data_dir)
    lock = _lock_data_dir(database.data_dir, settings.review_timeout_seconds)
    try:
        try:
            database.start()
        except (EmbeddedPostgresError, OSError):
            _configuration_error("the embedded PostgreSQL could not start under PR_REVIEW_DATA_DIR")
        url = database.url()
        asyncio.run(apply_migrations(url))
        # Under the lock: no worker of an earlier serve writes there any more.
        metrics_folder = fresh_worker_directory(database.data_dir)
        worker = start_worker_process(
            url,
            EMBEDDED_WORKER_CONCURRENCY,
            database=database.data_dir,
            lock=lock,
            metrics_folder=metrics_folder,
        )
        try:
            yield settings.model_copy(update={"pr_review_database_url": SecretStr(url)})
        finally:
            stop_worker_process(worker, settings.review_timeout_seconds)
    finally:
        try:
            database.stop()
        finally:
            lock.close()


def _configuration_error(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message} (configuration_error)\n")
    sys.exit(2)


def _lock_data_dir(data_dir: Path, review_timeout: float) -> IO[bytes]:
    """The data folder's lock, held (see the module docstring); waits for a previous `serve`'s
    orphaned worker to finish, as long as a worker may take to stop."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        # 0600: flock needs only an open file, and no one else may hold ours.
        path = data_dir / LOCK_FILE_NAME
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)
        lock = os.fdopen(descriptor, "ab")
    except OSError:
        _configuration_error("PR_REVIEW_DATA_DIR cannot be created or written")
    deadline = time.monotonic() + review_timeout + WORKER_STOP_SLACK_SECONDS
    waited = False
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                _configuration_error("another pr-review serve uses PR_REVIEW_DATA_DIR")
            if not waited:
                logger.warning("PR_REVIEW_DATA_DIR is held by another serve or its worker: waiting")
                waited = True
            time.sleep(_LOCK_POLL_SECONDS)


def start_worker_process(
    url: str,
    concurrency: int,
    *,
    database: Path,
    lock: IO[bytes],
    metrics_folder: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`pr-review worker` in a process of its own, against `url`: it ends with this process,
    stopping the embedded database in `database` if it outlives it, and holds `lock` too.
    With `metrics_folder`, it keeps its metrics there for `serve`'s /metrics to add up."""
    environment = dict(
        os.environ,
        PR_REVIEW_DATABASE_URL=url,
        **{
            STOP_WITH_PARENT_VARIABLE: str(os.getpid()),
            ORPHAN_STOPS_DATABASE_VARIABLE: str(database),
        },
    )
    if metrics_folder is not None:
        environment.update(worker_environment(metrics_folder))
    return subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--concurrency", str(concurrency)],
        env=environment,
        stdin=subprocess.DEVNULL,
        pass_fds=(lock.fileno(),),
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


@contextmanager
def ending_with_parent() -> Iterator[None]:
    """Around a worker `serve` started: SIGTERM (jobs in flight finish, then the worker exits)
    when `serve` is gone, however it went, and then the embedded database stopped. Does
    nothing around a worker started by hand."""
    named = os.environ.pop(STOP_WITH_PARENT_VARIABLE, "")
    database = os.environ.pop(ORPHAN_STOPS_DATABASE_VARIABLE, "")
    if not named.isdigit():
        yield
        return
    parent = int(named)
    try:
        # Until the worker's own handlers take over, SIGTERM unwinds the start-up so that the
        # `finally` below runs; the default would end the process on the spot.
        signal.signal(signal.SIGTERM, _exit_now)
        if not _ask_kernel_for_sigterm_on_parent_death():
            threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
        if os.getppid() != parent:  # gone before the request above took effect
            raise SystemExit(128 + signal.SIGTERM)
        yield
    finally:
        if database and os.getppid() != parent:
            logger.warning("serve is gone: stopping its embedded database")
            EmbeddedPostgres(Path(database)).stop()


def _exit_now(number: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + number)


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
