"""What every webhook route (GitHub's, service/webhooks.py; GitLab's, service/gitlab_webhooks.py;
Gitea's, service/gitea_webhooks.py) answers alike: one header read once, the delivery's JSON
object, its delivery id, the `ignored` and `queued` answers, queueing a review or a command
within the time a forge waits (who may ask a command asked of the forge within a few seconds),
the forge's client (the application's, else one of our own), and the delivery counted.

A forge waits a few seconds for an answer and counts a slow one as a failure; the queueing is
one short transaction, given under a second, and a database that does not answer in that time
makes the answer `server_busy` (the delivery can be redelivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from pr_review_api.errors import InvalidRequest, ReviewError, ServerBusy
from pr_review_api.forge.clients import ClientT, ForgeClients
from pr_review_api.jobs.command_jobs import CommandJob, enqueue_command
from pr_review_api.jobs.queue import Enqueued, JobQueue
from pr_review_api.jobs.records import PullRequestJob
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.ledger import NumberedChange
from pr_review_api.metrics import Metrics
from pr_review_api.service.dependencies import get_jobs, get_metrics, get_settings
from pr_review_api.service.errors import ContractJSONResponse
from pr_review_api.settings import Settings

ENQUEUE_TIMEOUT_SECONDS = 0.9
# Who may ask and our identity: two short forge requests, each cached.
COMMAND_CHECK_TIMEOUT_SECONDS = 3.0
DELIVERY_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_NOT_AN_OBJECT = "The delivery's body is not a JSON object."
# A forge's answer to one delivery, and its outcome for the metrics (`queued`, `ignored`).
Answered = tuple[Response, str]
Answer = Callable[[Request, Settings, JobQueue], Awaitable[Answered]]


class ChangeRef(NumberedChange, Protocol):
    """A change as a forge's delivery named it (on our server, its URL canonical)."""

    @property
    def url(self) -> str: ...


def delivery_route(
    path: str, summary: str, label_of: Callable[[Request], str | None], answer: Answer
) -> APIRouter:
    """A forge's webhook route at `path`: no service-key dependency (the forge's signature or
    secret token guards it); `answer`'s response, counted under the event label `label_of`
    reads off the request's headers."""
    router = APIRouter()

    @router.post(path, response_model=None, summary=summary)
    async def receive(
        request: Request,
        settings: Annotated[Settings, Depends(get_settings)],
        queue: Annotated[JobQueue, Depends(get_jobs)],
        metrics: Annotated[Metrics | None, Depends(get_metrics)],
    ) -> Response:
        return await counted(metrics, label_of(request), answer(request, settings, queue))

    return router


def one_header(request: Request, name: str) -> str | None:
    """The header's value when it was sent exactly once; else None."""
    values = request.headers.getlist(name)
    return values[0] if len(values) == 1 else None


def delivery_id(request: Request, name: str, prefix: str = "") -> str | None:
    """The delivery id a forge sent in header `name`, prefixed (so that two forges' ids never
    meet), or None when it sent none that is safe to store."""
    value = one_header(request, name)
    if value is None or not DELIVERY_ID.match(value):
        return None
    return prefix + value


async def json_event(body: bytes) -> dict[str, Any]:
    """The delivery's body as one strict JSON object; `InvalidRequest` otherwise."""
    try:
        # Up to a few MiB through Python hooks: off the loop that serves every other request.
        event = await asyncio.to_thread(loads_strict, body)
    except StrictJSONError:
        raise InvalidRequest(_NOT_AN_OBJECT) from None
    if not isinstance(event, dict):
        raise InvalidRequest(_NOT_AN_OBJECT)
    return event


def ignored() -> Answered:
    """The answer to a delivery that asks for nothing."""
    return ContractJSONResponse({"status": "ignored"}, status_code=202), "ignored"


def addressed(body: str) -> bool:
    """Whether a comment may be a command: its first character is `@` or `/` (anything else is
    addressed to no one, and costs no request to the forge)."""
    return body.strip()[:1] in ("@", "/")


def change_job(ref: ChangeRef, head_sha: str | None) -> PullRequestJob:
    """A published review of the change (a forge with no App installations: its token's)."""
    return PullRequestJob(
        url=ref.url, owner=ref.owner, repo=ref.repo, number=ref.number, head_sha=head_sha
    )


async def review_queued(queue: JobQueue, job: PullRequestJob, delivery: str | None) -> Answered:
    """The review a delivery asks for, queued."""
    return await queued(queue.enqueue(job, source="webhook", delivery_id=delivery)), "queued"


async def command_queued(
    permitted: Awaitable[CommandJob | None],
    queue: JobQueue,
    delivery: str | None,
    *,
    failures: tuple[type[Exception], ...],
    busy: str,
) -> Answered:
    """The command job `permitted` gives (who may ask, asked of the forge within
    `COMMAND_CHECK_TIMEOUT_SECONDS`), queued; ignored when there is none. A forge that does
    not answer in time, or fails (`failures`), makes the answer `ServerBusy` with the forge's
    sentence `busy` (the delivery can be redelivered)."""
    unanswered: tuple[type[Exception], ...] = (TimeoutError, *failures)
    try:
        async with asyncio.timeout(COMMAND_CHECK_TIMEOUT_SECONDS):
            command = await permitted
    except unanswered:
        raise ServerBusy(busy) from None
    if command is None:
        return ignored()
    return await queued(enqueue_command(queue, command, delivery_id=delivery)), "queued"


async def queued(enqueueing: Awaitable[Enqueued]) -> Response:
    """Queue within `ENQUEUE_TIMEOUT_SECONDS` and answer 202 with the job; `ServerBusy` when
    the queue did not answer in time."""
    try:
        async with asyncio.timeout(ENQUEUE_TIMEOUT_SECONDS):
            enqueued = await enqueueing
    except TimeoutError:
        raise ServerBusy("The job queue did not answer in time; redeliver shortly.") from None
    answer = {"job_id": str(enqueued.job_id), "status": enqueued.status}
    return ContractJSONResponse(answer, status_code=202)


def shared_or_own(
    request: Request, kind: type[ClientT], own: Callable[[], AbstractAsyncContextManager[ClientT]]
) -> AbstractAsyncContextManager[ClientT]:
    """The application's client of the forge whose client `kind` is (one pool; our identity
    asked once), else `own()`, closed after the delivery. A client opens no connection before
    its first request: one of our own costs nothing for a delivery that asks the forge nothing."""
    forges: ForgeClients | None = getattr(request.app.state, "forges", None)
    shared = None if forges is None else forges.of(kind)
    if shared is not None:
        return contextlib.nullcontext(shared)
    return own()


async def counted(
    metrics: Metrics | None, label: str | None, answering: Awaitable[Answered]
) -> Response:
    """The delivery's answer, counted in pr_review_webhook_deliveries_total under `label`: by
    its outcome (`queued`, `ignored`, ...), or by the contract error code it raised."""
    try:
        response, outcome = await answering
    except ReviewError as exc:
        if metrics is not None:
            metrics.webhook_delivery(label, exc.code)
        raise
    if metrics is not None:
        metrics.webhook_delivery(label, outcome)
    return response
