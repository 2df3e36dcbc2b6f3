"""`POST /v1/webhooks/gitea`: Gitea and Forgejo deliveries become review jobs (specification §§19,
11, 15 and 20).

Present only when `PR_REVIEW_GITEA_WEBHOOK_SECRET` (and `GITEA_SERVER_URL`) are set. The
signature, not a service key, guards it: the body's HMAC-SHA256 must equal `X-Gitea-Signature`
(or `X-Forgejo-Signature`), compared in constant time before the body is parsed, else 401
`invalid_signature` (gitea/hooks.py's `read_delivery` does it all, in that order). Then, by the
kind `X-Gitea-Event-Type` names (else `X-Gitea-Event`'s family):

    pull_request, pull_request_sync  `opened`, `reopened`, `synchronized`, and `edited` of the
    (and pull_request_label)         title or base (the skip rules evaluated again, specification
                                     §16); not a draft, still open
                                                         202 {"job_id": ..., "status": ...}
    pull_request_comment,            a comment created on a pull request whose first word is
    issue_comment                    `@<our login>` or `/pr-review`, then `review`, `help`,
                                     `remember`/`forget`, `ignore` or a question, by a user
                                     with write access (a question also from the pull
                                     request's author)
                                                         202 {"job_id": ..., "status": ...}
    anything else                                        202 {"status": "ignored"}
    a malformed payload                                  422 invalid_request

Gitea's comment delivery does not say whether a comment is a reply in a review's conversation
(its `comment` has no path, line or review), so `ignore` and questions are queued for anyone who
may ask them, and the job finds out whether the comment is in one of our findings' threads
(forge/gitea_comments.py). Who may ask is Gitea's collaborator-permission API
(gitea/permissions.py, cached briefly), never the comment's own claims; our own comments and
`[bot]` authors are ignored before it is asked.

A repeated `X-Gitea-Delivery` (or `X-Forgejo-Delivery`) answers the job the first one queued
(stored as `gitea:<uuid>`, so it never meets another forge's id). The answer comes within a
second whatever the queue holds (service/deliveries.py); a Gitea that does not say who may ask
within a few seconds makes the answer `server_busy`, and Gitea may deliver again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Request

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound
from pr_review_api.gitea import hooks
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.permissions import may_write
from pr_review_api.jobs.command_jobs import CommandJob
from pr_review_api.jobs.commands import addressed_command, command_kind, is_bot
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobKind
from pr_review_api.permissions import PermissionCache
from pr_review_api.service import deliveries
from pr_review_api.service.body import read_capped
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

GITEA_WEBHOOK_PATH = "/v1/webhooks/gitea"
# Read whole before the signature is checked (it signs the body). A pull request's body may be
# long and a delivery carries it with the repository's and users' documents: 4 MiB holds that.
MAX_GITEA_WEBHOOK_BODY_BYTES = 4 * 1024 * 1024
DELIVERY_PREFIX = "gitea:"
_BUSY = "Gitea did not say who may ask in time; redeliver shortly."


def gitea_webhook_router() -> APIRouter:
    """The Gitea webhook route: no service-key dependency, the signature guards it."""
    return deliveries.delivery_route(
        GITEA_WEBHOOK_PATH,
        "Receive a Gitea or Forgejo delivery",
        lambda request: event_label(_event_kind(_headers(request))),
        lambda request, settings, queue: _opened(request, _headers(request), settings, queue),
    )


def _event_kind(headers: dict[str, str]) -> str | None:
    return next((headers[name] for name in hooks.EVENT_HEADERS if name in headers), None)


def event_label(kind: str | None) -> str:
    """The `event` label of pr_review_webhook_deliveries_total: the kind's family (metrics.py
    bounds anything else to `other`)."""
    if kind in hooks.PULL_REQUEST_KINDS:
        return "pull_request"
    if kind in hooks.COMMENT_KINDS:
        return "issue_comment"
    return kind or ""


def _headers(request: Request) -> dict[str, str]:
    """The headers gitea/hooks.py reads, each when it was sent exactly once."""
    names = (*hooks.SIGNATURE_HEADERS, *hooks.EVENT_HEADERS, *hooks.DELIVERY_HEADERS)
    found = {name: deliveries.one_header(request, name) for name in names}
    return {name: value for name, value in found.items() if value is not None}


async def _opened(
    request: Request, headers: dict[str, str], settings: Settings, queue: JobQueue
) -> deliveries.Answered:
    """`_answer` with the Gitea client it may ask who may ask."""
    async with deliveries.shared_or_own(
        request, GiteaClient, lambda: GiteaClient(settings)
    ) as gitea:
        return await _answer(request, headers, settings, queue, gitea)


async def _answer(
    request: Request,
    headers: dict[str, str],
    settings: Settings,
    queue: JobQueue,
    gitea: GiteaClient,
) -> deliveries.Answered:
    """The answer to one delivery, and its outcome for the metrics (`queued`, `ignored`)."""
    secret = settings.pr_review_gitea_webhook_secret
    assert secret is not None
    body = await read_capped(request, MAX_GITEA_WEBHOOK_BODY_BYTES)
    # Off the loop: up to a few MiB of JSON through Python hooks.
    delivery = await asyncio.to_thread(hooks.read_delivery, body, headers, secret, settings)
    delivery_id = None if delivery.delivery_id is None else DELIVERY_PREFIX + delivery.delivery_id
    asks = delivery.asks
    if isinstance(asks, hooks.PullRequestPush):
        # Gitea has no installations: every job is GITEA_TOKEN's.
        return await deliveries.review_queued(
            queue, deliveries.change_job(asks.ref, asks.head_sha), delivery_id
        )
    if isinstance(asks, hooks.PullRequestComment):
        return await _comment_answer(asks, settings, queue, gitea, delivery_id)
    return deliveries.ignored()


async def _comment_answer(
    comment: hooks.PullRequestComment,
    settings: Settings,
    queue: JobQueue,
    gitea: GiteaClient,
    delivery_id: str | None,
) -> deliveries.Answered:
    """A comment delivery: the command job it asks for (specification §15), or ignored."""
    if is_bot(comment.author) or not deliveries.addressed(comment.body):
        return deliveries.ignored()  # a bot's, or addressed to no one: no request to Gitea
    if settings.gitea_token is None:
        logger.warning("a Gitea comment asked for pr-review, but GITEA_TOKEN is not set")
        return deliveries.ignored()
    return await deliveries.command_queued(
        _permitted_command(comment, gitea, queue.permissions),
        queue,
        delivery_id,
        failures=(GiteaUnavailable, PullRequestNotFound),
        busy=_BUSY,
    )


async def _permitted_command(
    comment: hooks.PullRequestComment, gitea: GiteaClient, permissions: PermissionCache
) -> CommandJob | None:
    """The command, when it is addressed to us and its author may ask it; else None."""
    asked = addressed_command(comment.body, comment.author, await gitea.login(), kind_of)
    if asked is None:
        return None
    text, kind = asked
    opener = comment.pull_request_author
    # The pull request's author may ask questions, nothing else (specification §15).
    author_asks = (
        kind == "answer" and opener is not None and opener.lower() == comment.author.lower()
    )
    if not author_asks and not await may_write(gitea, comment.ref, comment.author, permissions):
        return None
    return CommandJob(
        deliveries.change_job(comment.ref, None), kind, command_of(comment, kind, text)
    )


def kind_of(text: str) -> JobKind | None:
    """The job a comment's command asks for (jobs/commands.py's reading). Gitea's delivery does
    not say whether a comment is in a thread: `ignore` and questions are the job's to place in
    one of our findings' threads."""
    return command_kind(text, in_thread=True)


def command_of(comment: hooks.PullRequestComment, kind: JobKind, text: str) -> dict[str, Any]:
    """The job's `command` column: this comment and what it asks (forge/gitea_comments.py
    reads it)."""
    return {
        "forge": "gitea",
        "comment_id": comment.comment_id,
        "body": comment.body,
        "author": comment.author,
        "pull_request_author": comment.pull_request_author,
        "kind": kind,
        "text": text,
        "force": kind == "review",
    }
