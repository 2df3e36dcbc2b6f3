"""What a route needs, as FastAPI dependencies: each one can be replaced in a test with
`app.dependency_overrides[get_x] = ...`.

The application keeps its settings, review slots and pooled model client on `app.state`
(set by `create_app` and its lifespan); routes never read `app.state` themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from fastapi import Request

from pr_review_api.errors import ServerBusy
from pr_review_api.forge.clients import ForgeClients
from pr_review_api.git.store import RepositoryStore
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.metrics import Metrics
from pr_review_api.model import ReviewResult
from pr_review_api.settings import Settings

if TYPE_CHECKING:  # the queue's libraries load only when a database is configured
    from pr_review_api.jobs.queue import JobQueue

# The job queue's place on app.state, set by the job routes' lifespan (service/app.py).
QUEUE_STATE_KEY = "review_jobs"


class Reviewer(Protocol):
    """What the service calls to review a pull request: `run_review`, or a test's stand-in."""

    def __call__(
        self, target: ChangeTarget, settings: Settings, options: ReviewOptions
    ) -> Awaitable[ReviewResult]: ...


class ReviewSlots:
    """At most `limit` reviews in flight; one more is refused at once, never queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Take a slot for the block, or raise ServerBusy."""
        # One event loop: nothing can run between the check and the increment.
        if self.in_flight >= self.limit:
            raise ServerBusy()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


def get_reviewer(request: Request) -> Reviewer:
    """The review function; tests swap it with `app.dependency_overrides[get_reviewer]`.
    Reviews share the repository store of the application's lifespan (git/store.py)."""
    store: RepositoryStore | None = getattr(request.app.state, "store", None)
    # One API client per forge (a connection pool, the credentials each) per service, too.
    forges: ForgeClients | None = getattr(request.app.state, "forges", None)
    # The application's metrics count every review it runs (specification §18).
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)

    def review(
        target: ChangeTarget, settings: Settings, options: ReviewOptions
    ) -> Awaitable[ReviewResult]:
        lent = replace(options, store=store, clients=forges, metrics=metrics)
        return run_review(target, settings, lent)

    return review


def get_settings(request: Request) -> Settings:
    """The settings the application was created with."""
    settings: Settings = request.app.state.settings
    return settings


def get_model(request: Request) -> ModelClient | None:
    """The pooled model client of the application's lifespan (None outside of one)."""
    model: ModelClient | None = getattr(request.app.state, "model", None)
    return model


def get_slots(request: Request) -> ReviewSlots:
    """The application's review slots."""
    slots: ReviewSlots = request.app.state.slots
    return slots


def get_metrics(request: Request) -> Metrics | None:
    """The application's `Metrics` (None for an app a test built without them)."""
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    return metrics


def get_jobs(request: Request) -> JobQueue:
    """The application's job queue (opened by the lifespan)."""
    queue: JobQueue | None = getattr(request.app.state, QUEUE_STATE_KEY, None)
    if queue is None:
        raise ServerBusy("The job queue is not ready yet; try again shortly.")
    return queue
