"""Publishing a validated review on its pull request (CONTRACT section 10).

One `POST /repos/{o}/{r}/pulls/{n}/reviews` with `event: COMMENT` and `commit_id` the head:

1. In the service, its ledger (`github/ledger.py`) of this head answers first. Then read our
   own earlier reviews and review comments, newest first (`github/history.py`), and keep the
   markers of those whose author is the publishing identity (`GitHubClient.login`). A review
   of ours that carries this head's marker means nothing is posted (`already_published`); the
   fingerprints already posted are not posted again (`duplicates_skipped`). When the reviews
   outrun the listing budget without this head's marker, the CLI publishes nothing (it cannot
   tell); the service goes on, its ledger knowing every head it published.
2. Place each finding: inline when its line is an added or context line of a hunk of its file's
   diff from the merge base to the head (`git/hunks.py`), at most
   `PR_REVIEW_MAX_INLINE_COMMENTS`, most severe first, then path, then line; every other one in
   the body with its path and line.
3. Post. A 422 (GitHub refusing a comment's line) makes one more attempt with every finding in
   the body; a secondary rate limit (403/429 with `Retry-After` or `x-ratelimit-reset`) is
   waited out when the wait ends before the deadline; anything else ends `failed` with a fixed
   sentence. The review itself is never lost: the caller returns it whatever happens here.

Every piece of model text goes through `markdown.escape`, so it cannot mention, reference, link,
embed or inject HTML, and cannot forge a marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pr_review_api.errors import GitHubUnavailable, ServerBusy
from pr_review_api.git.hunks import diff_hunks
from pr_review_api.github.client import GitHubClient, is_rate_limited, rate_limit_wait
from pr_review_api.github.history import (
    MAX_LIST_PAGES,
    PostWire,
    PublishFailure,
    prior_state,
    status_failure,
)
from pr_review_api.github.ledger import HeadKey, PublishLedger
from pr_review_api.github.placement import (
    Placed,
    Placement,
    fingerprint_of,
    line_texts,
    place,
    placed_order,
    suggestion_texts,
)
from pr_review_api.github.review_text import render_body, render_comment
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.model import (
    Publication,
    PublicationError,
    ReviewResult,
)

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)

MAX_POST_ATTEMPTS = 5
DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
DEADLINE_MARGIN_SECONDS = 0.5


async def _post(
    github: GitHubClient,
    ref: PullRequestRef,
    payload: dict[str, Any],
    *,
    deadline: float,
) -> tuple[int, PostWire | None]:
    """(status, created review) after waiting out secondary rate limits within the deadline."""
    loop = asyncio.get_running_loop()
    url = ref.api_url(github.settings, "/reviews")
    for _ in range(MAX_POST_ATTEMPTS):
        response = await github.request("POST", url, json_body=payload)
        if response.status in (200, 201):
            try:
                return response.status, PostWire.model_validate_json(response.body)
            except ValidationError:
                return response.status, None
        if not is_rate_limited(response.status, response.headers):
            return response.status, None
        wait = rate_limit_wait(response.headers)
        wait = DEFAULT_RATE_LIMIT_WAIT_SECONDS if wait is None else max(wait, 1)
        if loop.time() + wait > deadline:
            raise PublishFailure("GitHub's rate limit lasts past the review's deadline.")
        logger.info("GitHub rate limit on publishing; waiting %d s", wait)
        await asyncio.sleep(wait)
    raise PublishFailure("GitHub kept answering with its rate limit.")


async def publish(  # noqa: PLR0913  (what one publication needs: the review, where, how, and what the repository dismissed)
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    ledger: PublishLedger | None = None,
    force: bool = False,
    dismissed: Collection[str] = frozenset(),
) -> Publication:
    """Publish `result` on the pull request; never raises for a GitHub failure.

    A finding whose fingerprint the repository dismissed (`dismissed`, CONTRACT 15) is not
    posted; `suppressed` counts them.

    With a `ledger` (the service), its record of this head answers first, and a publication
    is recorded there as soon as GitHub accepts it. `force` (the `review` command) posts even
    when this head is published already; the fingerprints already posted are still skipped."""
    try:
        async with asyncio.timeout_at(deadline - DEADLINE_MARGIN_SECONDS):
            return await _publish(
                result,
                ref,
                github,
                git_dir,
                deadline=deadline,
                max_inline=max_inline,
                ledger=ledger,
                force=force,
                dismissed=dismissed,
            )
    except PublishFailure as failure:
        return _failed(failure.message)
    except GitHubUnavailable as exc:
        return _failed(exc.message)
    except TimeoutError:
        return _failed("Publishing did not finish before the review's deadline.")


def _failed(message: str) -> Publication:
    logger.info("publishing the review failed: %s", message)
    return Publication(status="failed", error=PublicationError(message=message))


async def _publish(  # noqa: PLR0913  (as publish)
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    ledger: PublishLedger | None,
    force: bool = False,
    dismissed: Collection[str] = frozenset(),
) -> Publication:
    head = result.revisions.head_sha
    key = HeadKey.of(ref, await github.login(), head)
    try:
        recorded = None if ledger is None else await ledger.find(key)
    except ServerBusy:
        # The review is paid for: publish on the markers alone, as the CLI does.
        logger.warning("the ledger of published reviews could not be read")
        recorded, ledger = None, None
    if recorded is not None and not force:
        return _already(recorded.review_id, recorded.url)
    state = await prior_state(
        github, ref, wait_until=deadline - DEADLINE_MARGIN_SECONDS, head_sha=head
    )
    done = state.review_of(head)
    if done is not None and not force:
        return _already(*done)
    if not state.complete and ledger is None:
        # Our review of this head may be in the pages not read: posting could post it twice.
        raise PublishFailure(
            f"The pull request has more reviews than the {MAX_LIST_PAGES} pages read; nothing "
            "was published, so that no head is reviewed twice."
        )
    posted = state.fingerprints | await _ledger_fingerprints(ledger, key)
    findings = result.review.findings
    wanted = {f.path for f in findings}
    merge_base = result.revisions.merge_base_sha
    hunks = await asyncio.to_thread(diff_hunks, git_dir, merge_base, head, wanted)
    texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
    fingerprints = [fingerprint_of(f, texts) for f in findings]
    kept = [i for i, fingerprint in enumerate(fingerprints) if fingerprint not in dismissed]
    suppressed = len(findings) - len(kept)
    findings = [findings[i] for i in kept]
    fingerprints = [fingerprints[i] for i in kept]
    replaced = await asyncio.to_thread(suggestion_texts, git_dir, head, findings)
    placement = place(findings, hunks, fingerprints, posted, max_inline, texts=replaced)
    status, created, placement = await _attempts(result, ref, github, placement, deadline=deadline)
    if created is None or status not in (200, 201):
        raise status_failure(status, "publish the review")
    _, shown = await asyncio.to_thread(render_body, result, placement)
    publication = Publication(
        status="published",
        review_id=created.id,
        url=created.html_url,
        inline_comments=len(placement.inline),
        body_findings=shown,
        duplicates_skipped=placement.skipped,
        suppressed=suppressed,
    )
    if ledger is not None:
        carried = [p.fingerprint for p in [*placement.inline, *placement.body[:shown]]]
        await ledger.record(key, publication, carried, result)
    return publication


async def _ledger_fingerprints(ledger: PublishLedger | None, key: HeadKey) -> set[str]:
    try:
        return set() if ledger is None else await ledger.fingerprints(key)
    except ServerBusy:
        logger.warning("the ledger of published reviews could not be read")
        return set()


def _already(review_id: int | None, url: str | None) -> Publication:
    return Publication(status="already_published", review_id=review_id, url=url)


async def _attempts(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    *,
    deadline: float,
) -> tuple[int, PostWire | None, Placement]:
    # Rendering escapes up to megabytes of model text: on a worker thread, off the event loop.
    payload = await asyncio.to_thread(_payload, result, placement)
    status, created = await _post(github, ref, payload, deadline=deadline)
    if status == 422 and placement.inline:
        # GitHub refused a comment's line (it never says which): everything in the body.
        logger.info("GitHub refused the inline comments; posting every finding in the body")
        placement = Placement(
            body=sorted([*placement.inline, *placement.body], key=placed_order),
            skipped=placement.skipped,
        )
        payload = await asyncio.to_thread(_payload, result, placement)
        status, created = await _post(github, ref, payload, deadline=deadline)
    return status, created, placement


def _payload(result: ReviewResult, placement: Placement) -> dict[str, Any]:
    body, _ = render_body(result, placement)
    return {
        "commit_id": result.revisions.head_sha,
        "event": "COMMENT",
        "body": body,
        "comments": [_comment(p) for p in placement.inline],
    }


def _comment(placed: Placed) -> dict[str, Any]:
    """An inline comment; a committable suggestion's spans its lines (CONTRACT 14)."""
    comment: dict[str, Any] = {"path": placed.finding.path}
    if placed.start_line is not None:
        comment |= {"start_line": placed.start_line, "start_side": "RIGHT"}
    return comment | {"line": placed.line, "side": "RIGHT", "body": render_comment(placed)}


async def publish_result(  # noqa: PLR0913  (as publish)
    result: ReviewResult,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    ledger: PublishLedger | None = None,
    metrics: Metrics | None = None,
    force: bool = False,
    dismissed: Collection[str] = frozenset(),
) -> Publication | None:
    """Publish a finished review of a pull request; None when there is nothing to publish
    (a local review, or no final review from the model). `metrics` counts each outcome."""
    info = result.pull_request
    if info is None or result.termination_reason != "final_review":
        return None
    ref = PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    publication = await publish(
        result,
        ref,
        github,
        git_dir,
        deadline=deadline,
        max_inline=github.settings.pr_review_max_inline_comments,
        ledger=ledger,
        force=force,
        dismissed=dismissed,
    )
    if metrics is not None and publication is not None:
        metrics.publication(publication.status)
    return publication
