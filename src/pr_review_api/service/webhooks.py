"""`POST /v1/webhooks/github`: GitHub deliveries become review jobs (specification §11).

Present only when `PR_REVIEW_WEBHOOK_SECRET` is set. The signature, not a service key, guards
it: `X-Hub-Signature-256` must be `sha256=` and the HMAC-SHA256 of the raw body under the
secret, compared in constant time; anything else is 401 `invalid_signature`, before the body
is parsed. Then:

    ping                                                   200 {"status": "ok"}
    pull_request opened/synchronize/reopened/ready_for_review, not a draft, still open
                                                           202 {"job_id": ..., "status": ...}
    pull_request edited (title or base changed), labeled, unlabeled: the skip rules' inputs
    changed (specification §16), evaluated again on the head     202 {"job_id": ..., "status": ...}
    check_run rerequested, our check on a pull request's head (github/gate_events.py)
                                                           202 {"job_id": ..., "status": ...}
    issue_comment / pull_request_review_comment created, addressed to us by a user who may
    ask it (specification §15; `remember` and `forget`, writers only: specification §20)
                                                           202 {"job_id": ..., "status": ...}
    anything else                                          202 {"status": "ignored"}

A comment is read from the delivery only (jobs/commands.py); our own comments and `[bot]`
authors are ignored before any request; who may ask is the collaborator-permission API's
answer (github/comments.py, cached briefly), never the comment's own claims.

Every job carries its delivery's `installation.id`: with the GitHub App configured, that is who
the job is on GitHub (forge/clients.py refuses a GitHub job without one, and a comment without
one is ignored before any request); the installation is also the job's tenant for fairness.

A repeated `X-GitHub-Delivery` answers the job the first one queued. Queueing is one short
transaction; it is given under a second, and a database that does not answer in that time
makes the answer `server_busy` (GitHub shows it, and the delivery can be redelivered). What both
webhook routes answer alike is service/deliveries.py.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from fastapi import APIRouter, Request

from pr_review_api.errors import (
    GitHubUnavailable,
    InvalidPullRequestUrl,
    InvalidSignature,
)
from pr_review_api.github.comments import Repository, may_write
from pr_review_api.github.gate_events import rerequested_run, skip_inputs_changed
from pr_review_api.github.urls import parse_pull_request_url
from pr_review_api.jobs.command_jobs import CommandJob
from pr_review_api.jobs.commands import (
    Comment,
    addressed_command,
    comment_of,
    is_bot,
    kind_of,
    pull_number,
)
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import PullRequestJob
from pr_review_api.service import deliveries
from pr_review_api.service.body import read_capped
from pr_review_api.service.errors import ContractJSONResponse
from pr_review_api.settings import Settings

WEBHOOK_PATH = "/v1/webhooks/github"
# GitHub caps payloads at 25 MB; a pull_request event is a few tens of KiB, its body at most
# 65,536 characters. 1 MiB leaves room without letting anyone make us buffer much.
MAX_WEBHOOK_BODY_BYTES = 1024 * 1024
COMMENT_EVENTS = ("issue_comment", "pull_request_review_comment")
# Every event a delivery may carry that becomes a job; an App subscribes to exactly these
# (docs/github-app-manifest.json; `ping` is sent to every webhook unasked).
HANDLED_EVENTS = ("pull_request", "check_run", *COMMENT_EVENTS)
REVIEWED_ACTIONS = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})
_SHA = re.compile(r"^[0-9a-f]{40}$")
_BUSY = "GitHub did not say who may ask in time; redeliver shortly."


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether `header` is `sha256=<hex HMAC-SHA256 of body>`; constant time."""
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    if header is None:
        return False
    return hmac.compare_digest(expected.encode("ascii"), header.strip().encode("utf-8"))


def _job_of(event: dict[str, Any], settings: Settings) -> PullRequestJob | None:
    """The job a pull_request delivery asks for, or None when it asks for none."""
    pull = event.get("pull_request")
    asks = event.get("action") in REVIEWED_ACTIONS or skip_inputs_changed(event)
    if not asks or not isinstance(pull, dict):
        return None
    if pull.get("draft") is not False or pull.get("state", "open") != "open":
        return None  # drafts are reviewed once they are ready_for_review
    head = pull.get("head")
    sha = head.get("sha") if isinstance(head, dict) else None
    if not isinstance(sha, str) or not _SHA.match(sha):
        return None
    return _pull_job(event, settings, pull.get("number"), sha)


def _rerun_job(event: dict[str, Any], settings: Settings) -> PullRequestJob | None:
    """The review a press of our check's re-run button asks for (specification §16): the pull
    request's head reviewed again, as a webhook job (skip rules evaluated again, a head already
    published not reviewed twice), with the delivery's installation like every other job."""
    rerun = rerequested_run(event, settings.github_app_id)
    if rerun is None:
        return None
    return _pull_job(event, settings, rerun.number, rerun.head_sha)


def _pull_job(
    event: dict[str, Any], settings: Settings, number: object, sha: str | None
) -> PullRequestJob | None:
    """The pull request a delivery names, as a published job; None when it names none."""
    repository = event.get("repository")
    if not isinstance(repository, dict):
        return None
    owner = repository.get("owner")
    login = owner.get("login") if isinstance(owner, dict) else None
    name = repository.get("name")
    if not isinstance(login, str) or not isinstance(name, str):
        return None
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    try:
        ref = parse_pull_request_url(
            f"{settings.github_server_url}/{login}/{name}/pull/{number}", settings
        )
    except InvalidPullRequestUrl:
        return None
    installation = event.get("installation")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    if (
        not isinstance(installation_id, int)
        or isinstance(installation_id, bool)
        or installation_id <= 0
    ):
        installation_id = None
    return PullRequestJob(
        url=ref.url,
        owner=ref.owner,
        repo=ref.repo,
        number=ref.number,
        head_sha=sha,
        post=True,
        installation_id=installation_id,
    )


def webhook_router() -> APIRouter:
    """The webhook route: no service-key dependency, the signature guards it."""
    return deliveries.delivery_route(
        WEBHOOK_PATH,
        "Receive a GitHub webhook delivery",
        _event_name,
        lambda request, settings, queue: _answer(request, settings, queue, _event_name(request)),
    )


def _event_name(request: Request) -> str | None:
    return deliveries.one_header(request, "x-github-event")


async def _command_answer(
    event_name: str,
    event: dict[str, Any],
    settings: Settings,
    queue: JobQueue,
    delivery: str | None,
) -> deliveries.Answered:
    """A comment delivery: the command job it asks for (specification §15), or ignored."""
    the_comment = comment_of(event_name, event)
    if (
        the_comment is None
        or is_bot(the_comment.author)
        or not deliveries.addressed(the_comment.body)
    ):
        return deliveries.ignored()  # a bot's, or addressed to no one: no request to GitHub
    job = _pull_job(event, settings, pull_number(event_name, event), None)
    if job is None or not queue.identities.has_identity(job.installation_id):
        # With the App, a delivery without its installation has no one to ask as.
        return deliveries.ignored()
    return await deliveries.command_queued(
        _permitted_command(the_comment, job, settings, queue),
        queue,
        delivery,
        failures=(GitHubUnavailable,),
        busy=_BUSY,
    )


async def _permitted_command(
    the_comment: Comment, job: PullRequestJob, settings: Settings, queue: JobQueue
) -> CommandJob | None:
    """The command, when it is addressed to us and its author may ask it; else None."""
    iid = job.installation_id
    async with queue.identities.github(settings, iid) as github:
        asked = addressed_command(
            the_comment.body,
            the_comment.author,
            await github.login(),
            lambda t: kind_of(t, the_comment),
        )
        if asked is None:
            return None
        text, kind = asked
        # The pull request's author may ask questions, nothing else.
        author_asks = kind == "answer" and the_comment.author == the_comment.pull_author
        repository = Repository(job.owner, job.repo)
        author = the_comment.author
        if not author_asks and not await may_write(github, repository, author, queue.permissions):
            return None
    return CommandJob(job, kind, the_comment.command(kind, text))


async def _answer(
    request: Request, settings: Settings, queue: JobQueue, event_name: str | None
) -> deliveries.Answered:
    """The answer to one delivery, and its outcome for the metrics (`ok`, `ignored`, `queued`)."""
    secret = settings.pr_review_webhook_secret
    assert secret is not None
    body = await read_capped(request, MAX_WEBHOOK_BODY_BYTES)
    header = deliveries.one_header(request, "x-hub-signature-256")
    if not signature_valid(secret.get_secret_value().encode("utf-8"), body, header):
        raise InvalidSignature()
    if event_name == "ping":
        return ContractJSONResponse({"status": "ok"}, status_code=200), "ok"
    if event_name not in HANDLED_EVENTS:
        return deliveries.ignored()
    event = await deliveries.json_event(body)
    delivery = deliveries.delivery_id(request, "x-github-delivery")
    if event_name in COMMENT_EVENTS:
        assert event_name is not None
        return await _command_answer(event_name, event, settings, queue, delivery)
    job = _rerun_job(event, settings) if event_name == "check_run" else _job_of(event, settings)
    if job is None:
        return deliveries.ignored()
    return await deliveries.review_queued(queue, job, delivery)
