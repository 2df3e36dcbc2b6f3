"""The requests that publish a review on a pull request (specification §10): create one, or edit the
body of one of ours.

`POST /repos/{o}/{r}/pulls/{n}/reviews` with `event: COMMENT`, `commit_id` the head, the body
and the inline comments; a 422 (GitHub refusing a comment's line, it never says which) makes
one more attempt with every finding in the body. `PUT .../reviews/{id}` with `body` edits a
review's body (github/summary.py). A secondary rate limit (403/429 with `Retry-After` or
`x-ratelimit-reset`) is waited out when the wait ends before the deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from pr_review_api.github.client import GitHubClient, is_rate_limited, rate_limit_wait
from pr_review_api.github.history import GITHUB_PUBLISH, PostWire
from pr_review_api.github.layout import GITHUB_LAYOUT
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.http.api_client import rate_limit_pause
from pr_review_api.model import ReviewResult
from pr_review_api.publishing.failures import PublishFailure, status_failure
from pr_review_api.publishing.layout import render_comment
from pr_review_api.publishing.placement import Placed, Placement, moved_to_body

logger = logging.getLogger(__name__)

MAX_POST_ATTEMPTS = 5
# A review's body and how many body findings it holds (publishing/layout.py).
Render = Callable[[ReviewResult, Placement], tuple[str, int]]


async def send_review(
    github: GitHubClient,
    method: str,
    url: str,
    payload: dict[str, Any],
    *,
    deadline: float,
) -> tuple[int, PostWire | None]:
    """(status, the review created or edited) after waiting out secondary rate limits within
    the deadline."""
    for _ in range(MAX_POST_ATTEMPTS):
        response = await github.request(method, url, json_body=payload)
        if response.status in (200, 201):
            try:
                return response.status, PostWire.model_validate_json(response.body)
            except ValidationError:
                return response.status, None
        if not is_rate_limited(response.status, response.headers):
            return response.status, None
        wait = rate_limit_pause(rate_limit_wait(response.headers), deadline)
        if wait is None:
            raise PublishFailure("GitHub's rate limit lasts past the review's deadline.")
        logger.info("GitHub rate limit on publishing; waiting %d s", wait)
        await asyncio.sleep(wait)
    raise PublishFailure("GitHub kept answering with its rate limit.")


async def post_review(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    render: Render,
    *,
    deadline: float,
) -> tuple[PostWire, Placement]:
    """Post the review (one more attempt, every finding in the body, after a 422): the review
    created, and the placement it was posted with; GitHub's refusal is a `PublishFailure`."""
    # Rendering escapes up to megabytes of model text: on a worker thread, off the event loop.
    url = ref.api_url(github.settings, "/reviews")
    payload = await asyncio.to_thread(_payload, result, placement, render)
    status, created = await send_review(github, "POST", url, payload, deadline=deadline)
    if status == 422 and placement.inline:
        # GitHub refused a comment's line (it never says which): everything in the body.
        logger.info("GitHub refused the inline comments; posting every finding in the body")
        placement = moved_to_body(placement, [], placement.inline)
        payload = await asyncio.to_thread(_payload, result, placement, render)
        status, created = await send_review(github, "POST", url, payload, deadline=deadline)
    if created is None or status not in (200, 201):
        raise status_failure(status, "publish the review", GITHUB_PUBLISH)
    return created, placement


def _payload(result: ReviewResult, placement: Placement, render: Render) -> dict[str, Any]:
    body, _ = render(result, placement)
    return {
        "commit_id": result.revisions.head_sha,
        "event": "COMMENT",
        "body": body,
        "comments": [_comment(p) for p in placement.inline],
    }


def _comment(placed: Placed) -> dict[str, Any]:
    """An inline comment; a committable suggestion's spans its lines (specification §14)."""
    comment: dict[str, Any] = {"path": placed.finding.path}
    if placed.start_line is not None:
        comment |= {"start_line": placed.start_line, "start_side": "RIGHT"}
    return comment | {
        "line": placed.line,
        "side": "RIGHT",
        "body": render_comment(placed, GITHUB_LAYOUT),
    }
