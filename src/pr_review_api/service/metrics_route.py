"""`GET /metrics` (specification §18): the process's `Metrics` in Prometheus's text format.

Behind the service keys when they are set, with the same dependency as /v1. The job gauge is
read from the database at scrape time, within `JOBS_READ_TIMEOUT_SECONDS`: a database that is
slow or down leaves the gauge out of that scrape rather than holding Prometheus up.

`pr-review worker --metrics-port N` serves the same route from a small app of its own
(`worker_metrics_server`), on loopback unless told otherwise. A worker's scrape has no job
gauge: the gauge is the shared database's, and `serve` reports it once; repeating it from
every worker would multiply it in any sum over instances.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated

import psycopg
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from procrastinate import exceptions as queue_errors

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.metrics import CONTENT_TYPE, Metrics
from pr_review_api.service.auth import require_service_key
from pr_review_api.service.dependencies import QUEUE_STATE_KEY, get_metrics
from pr_review_api.service.errors import install_error_handlers
from pr_review_api.service.server import server_config
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

JOBS_READ_TIMEOUT_SECONDS = 1.0
METRICS_PATH = "/metrics"


def install_metrics_route(app: FastAPI, *, secured: bool) -> None:
    """`GET /metrics` on `app`; with `secured`, it requires a service key."""
    dependencies = [Depends(require_service_key)] if secured else []

    @app.get(METRICS_PATH, include_in_schema=False, dependencies=dependencies)
    async def metrics_route(
        request: Request, metrics: Annotated[Metrics | None, Depends(get_metrics)]
    ) -> Response:
        own = metrics if metrics is not None else Metrics()
        queue: JobQueue | None = getattr(request.app.state, QUEUE_STATE_KEY, None)
        jobs = await job_counts(queue) if queue is not None else None
        return Response(own.exposition(jobs), media_type=CONTENT_TYPE)


async def job_counts(queue: JobQueue) -> dict[str, int] | None:
    """Rows of `review_jobs` by status, or None when the database does not answer in time."""
    try:
        async with asyncio.timeout(JOBS_READ_TIMEOUT_SECONDS):
            return await queue.count_by_status()
    except (TimeoutError, psycopg.Error, queue_errors.ConnectorException) as exc:
        logger.warning("metrics: the job counts were not read (%s)", type(exc).__name__)
        return None


def worker_metrics_app(settings: Settings, metrics: Metrics) -> FastAPI:
    """The worker's own `/metrics` (and nothing else), guarded like `serve`'s."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.metrics = metrics
    install_error_handlers(app)
    install_metrics_route(app, secured=bool(settings.pr_review_api_keys))
    return app


class _WorkerSideServer(uvicorn.Server):
    """uvicorn inside the worker's event loop: the worker owns SIGINT and SIGTERM."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def worker_metrics_server(
    settings: Settings, metrics: Metrics, listener: socket.socket
) -> AsyncIterator[None]:
    """Serve the worker's metrics on `listener` (already bound) for the block's duration."""
    app = worker_metrics_app(settings, metrics)
    host, port = listener.getsockname()[:2]
    server = _WorkerSideServer(server_config(app, settings, host=host, port=port))
    server.config.timeout_graceful_shutdown = 1  # a scrape is quick; a review is not waiting
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
