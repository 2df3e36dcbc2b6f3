"""`POST /v1/webhooks/gitlab`: GitLab deliveries become review jobs (specification §§17, 11 and 15).

Present only when `PR_REVIEW_GITLAB_WEBHOOK_SECRET` is set. The secret token, not a service key,
guards it: `X-Gitlab-Token` must equal the secret (compared in constant time), else 401
`invalid_signature`, before the body is read. Then:

    Merge Request Hook  open, reopen, or update that moved the head, marked it ready or changed
                        the title, labels or target branch (the skip rules evaluated again,
                        specification §16); not a draft; open  202 {"job_id": ..., "status": ...}
    Note Hook           a note on a merge request whose first word is `@<our username>` or
                        `/pr-review`, then `review` or `help`, or (in a discussion) `ignore` or
                        a question, by a user with Developer (30) or higher access (a question
                        also from the merge request's author)
                                                         202 {"job_id": ..., "status": ...}
    anything else                                        202 {"status": "ignored"}
    a malformed payload                                  422 invalid_request

What a payload asks for is read by gitlab/hooks.py (the merge request is always one on OUR
`GITLAB_SERVER_URL`); who may ask is GitLab's member API (gitlab/comments.py, cached
briefly), never the note's own claims; our own notes and bots (`user.bot`, or a bot's
username) are ignored before it is asked. Whether a discussion is one of our findings' is the
job's to find out (jobs/comments.py, forge/gitlab_comments.py): a delivery is
answered within a second.

A repeated `X-Gitlab-Event-UUID` answers the job the first one queued (stored as
`gitlab:<uuid>`, so it can never meet a GitHub delivery id). The answer comes within a second
whatever the queue holds (service/deliveries.py); a GitLab that does not say who may ask within
a few seconds makes the answer `server_busy`, and GitLab may deliver again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass

from fastapi import APIRouter, Request

from pr_review_api.errors import GitLabUnavailable, InvalidSignature, PullRequestNotFound
from pr_review_api.gitlab import hooks
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import AccessLevels
from pr_review_api.jobs.command_jobs import CommandJob
from pr_review_api.jobs.commands import addressed_command, command_kind
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobKind
from pr_review_api.service import deliveries
from pr_review_api.service.body import read_capped
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

GITLAB_WEBHOOK_PATH = "/v1/webhooks/gitlab"
# Read only once the token matched. A merge request's description may be 1,000,000 characters
# and an update carries it twice (`changes`): 4 MiB holds that without an outside sender ever
# making us buffer a byte.
MAX_GITLAB_WEBHOOK_BODY_BYTES = 4 * 1024 * 1024
# The `event` label of pr_review_webhook_deliveries_total (metrics.WEBHOOK_EVENTS).
_EVENT_LABELS = {hooks.MERGE_REQUEST_HOOK: "merge_request", hooks.NOTE_HOOK: "note"}
_TOKEN_INVALID = "The webhook delivery's X-Gitlab-Token is missing or not valid."  # noqa: S105
_BUSY = "GitLab did not say who may ask in time; redeliver shortly."


def token_valid(secret: bytes, header: str | None) -> bool:
    """Whether `header` equals the secret; constant time, and (both hashed first) whatever
    their lengths."""
    if header is None:
        return False
    given = hashlib.sha256(header.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(hashlib.sha256(secret).digest(), given)


def gitlab_webhook_router() -> APIRouter:
    """The GitLab webhook route: no service-key dependency, the secret token guards it."""
    return deliveries.delivery_route(
        GITLAB_WEBHOOK_PATH,
        "Receive a GitLab webhook delivery",
        lambda request: _label(_event_name(request)),
        lambda request, settings, queue: _opened(request, settings, queue, _event_name(request)),
    )


def _event_name(request: Request) -> str | None:
    return deliveries.one_header(request, "x-gitlab-event")


def _label(event_name: str | None) -> str | None:
    return _EVENT_LABELS.get(event_name or "", event_name)


@dataclass(frozen=True)
class _Checks:
    """What tells who may ask: the GitLab client and the cache of access levels."""

    gitlab: GitLabClient
    access: AccessLevels


async def _opened(
    request: Request, settings: Settings, queue: JobQueue, event_name: str | None
) -> deliveries.Answered:
    """`_answer` with the GitLab client it may ask who may ask."""
    async with deliveries.shared_or_own(
        request, GitLabClient, lambda: GitLabClient(settings)
    ) as gitlab:
        checks = _Checks(gitlab, AccessLevels(queue.permissions))
        return await _answer(request, settings, queue, event_name, checks)


async def _answer(
    request: Request,
    settings: Settings,
    queue: JobQueue,
    event_name: str | None,
    checks: _Checks,
) -> deliveries.Answered:
    """The answer to one delivery, and its outcome for the metrics (`queued`, `ignored`)."""
    secret = settings.pr_review_gitlab_webhook_secret
    assert secret is not None
    header = deliveries.one_header(request, "x-gitlab-token")
    if not token_valid(secret.get_secret_value().encode("utf-8"), header):
        raise InvalidSignature(_TOKEN_INVALID)
    body = await read_capped(request, MAX_GITLAB_WEBHOOK_BODY_BYTES)
    if event_name not in (hooks.MERGE_REQUEST_HOOK, hooks.NOTE_HOOK):
        return deliveries.ignored()
    event = await deliveries.json_event(body)
    delivery = deliveries.delivery_id(request, "x-gitlab-event-uuid", prefix="gitlab:")
    if event_name == hooks.NOTE_HOOK:
        return await _note_answer(event, settings, queue, delivery, checks)
    push = hooks.merge_request_push(event, settings)
    if push is None:
        return deliveries.ignored()
    # GitLab has no installations: every job is GITLAB_TOKEN's.
    return await deliveries.review_queued(
        queue, deliveries.change_job(push.ref, push.head_sha), delivery
    )


async def _note_answer(
    event: dict[str, object],
    settings: Settings,
    queue: JobQueue,
    delivery: str | None,
    checks: _Checks,
) -> deliveries.Answered:
    """A Note Hook: the command job it asks for (specification §15), or ignored."""
    note = hooks.merge_request_note(event, settings)
    if (
        note is None
        or note.by_bot
        or hooks.is_bot(note.author)
        or not deliveries.addressed(note.body)
    ):
        return deliveries.ignored()  # a bot's, or addressed to no one: no request to GitLab
    if settings.gitlab_token is None:
        logger.warning("a GitLab note asked for pr-review, but GITLAB_TOKEN is not set")
        return deliveries.ignored()
    return await deliveries.command_queued(
        _permitted_command(note, checks),
        queue,
        delivery,
        failures=(GitLabUnavailable, PullRequestNotFound),
        busy=_BUSY,
    )


async def _permitted_command(note: hooks.MergeRequestNote, checks: _Checks) -> CommandJob | None:
    """The command, when it is addressed to us and its author may ask it; else None."""
    username = await checks.gitlab.username()
    asked = addressed_command(note.body, note.author, username, lambda t: kind_of(t, note))
    if asked is None:
        return None
    text, kind = asked
    # The merge request's author may ask questions, nothing else (specification §15).
    author_asks = kind == "answer" and note.author_id == note.merge_request_author_id
    if not author_asks and not await checks.access.may_ask(checks.gitlab, note.ref, note.author_id):
        return None
    return CommandJob(deliveries.change_job(note.ref, None), kind, note.command(kind, text))


def kind_of(text: str, note: hooks.MergeRequestNote) -> JobKind | None:
    """The job a note's command asks for (jobs/commands.py's reading): in a discussion, where
    `ignore` and questions count."""
    return command_kind(text, in_thread=note.in_discussion)
