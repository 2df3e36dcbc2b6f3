"""`pr-review worker [--concurrency N] [--metrics-port N]`: run review jobs from the database
(specification §11).

Any number of workers, on any machine, may run against one `PR_REVIEW_DATABASE_URL`.
SIGINT or SIGTERM stops fetching new jobs and lets the ones in flight finish.

With `--metrics-port`, the worker serves its own `GET /metrics` (specification §18) on loopback
(`--metrics-host` to change that; another address needs `PR_REVIEW_API_KEYS`, whose keys the
endpoint then requires, as `serve`'s does).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import click

from pr_review_api.errors import ConfigurationError, ReviewError
from pr_review_api.service.hosts import is_loopback
from pr_review_api.settings import Settings, load_settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


@click.command()
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Jobs this worker runs at the same time.",
)
@click.option(
    "--metrics-port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Serve this worker's Prometheus metrics at /metrics on this port.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address for --metrics-port; other than loopback needs PR_REVIEW_API_KEYS.",
)
def worker(concurrency: int, metrics_port: int | None, metrics_host: str) -> None:
    """Run review jobs from PR_REVIEW_DATABASE_URL until stopped (SIGTERM lets jobs finish)."""
    from pr_review_api.jobs.serve_database import ending_with_parent  # noqa: PLC0415

    # A worker of `serve` ends with it, and then stops its embedded database (SECURITY.md).
    with ending_with_parent():
        _run_worker(concurrency, metrics_port, metrics_host)


def _run_worker(concurrency: int, metrics_port: int | None, metrics_host: str) -> None:
    from pr_review_api.jobs.queue import JobQueue  # noqa: PLC0415
    from pr_review_api.metrics import Metrics  # noqa: PLC0415

    try:
        settings = load_settings()
        settings.require_provider_key()
        if settings.pr_review_database_url is None:
            raise ConfigurationError(
                "PR_REVIEW_DATABASE_URL is not set: a worker needs the jobs database."
            )
        # One Metrics for the life of this process; with `serve`'s worker it writes to the
        # folder serve reads (PROMETHEUS_MULTIPROC_DIR, pr_review_api.metrics).
        metrics = Metrics()
        queue = JobQueue(settings, metrics=metrics)
        listener = _metrics_listener(settings, metrics_host, metrics_port)
    except ReviewError as exc:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
        sys.exit(2)
    # The service's log rules: our events at INFO, third-party records only from WARNING.
    from pr_review_api.service.server import configure_service_logging  # noqa: PLC0415

    configure_service_logging()

    async def run() -> None:
        async with queue.opened(), _serving_metrics(settings, metrics, listener):
            await queue.run_worker(concurrency)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the database unreachable, say: one line, no traceback
        click.echo(f"error: the worker stopped: {type(exc).__name__}", err=True)
        sys.exit(1)


def _metrics_listener(settings: Settings, host: str, port: int | None) -> socket.socket | None:
    """The bound socket of `--metrics-port`, or None without it (a clear error when taken)."""
    from pr_review_api.service.server import listen_socket  # noqa: PLC0415

    if port is None:
        return None
    if not settings.pr_review_api_keys and not is_loopback(host):
        raise ConfigurationError(
            "PR_REVIEW_API_KEYS is not set: set it to serve metrics on a non-loopback address, "
            "or use --metrics-host 127.0.0.1."
        )
    try:
        return listen_socket(host, port)
    except ConfigurationError:
        raise ConfigurationError(f"--metrics-port {port} cannot be used on {host}.") from None


@asynccontextmanager
async def _serving_metrics(
    settings: Settings, metrics: Metrics, listener: socket.socket | None
) -> AsyncIterator[None]:
    if listener is None:
        yield
        return
    from pr_review_api.service.metrics_route import worker_metrics_server  # noqa: PLC0415

    host, port = listener.getsockname()[:2]
    logging.getLogger("pr_review_api.service").info(
        "worker metrics on http://%s:%d/metrics", host, port
    )
    async with worker_metrics_server(settings, metrics, listener):
        yield
