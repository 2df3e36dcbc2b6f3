"""What our own earlier reviews on a Gitea pull request say (specification §§10, 19), and the fixed
sentences a Gitea publication fails with.

Gitea lists a pull request's reviews (`GET .../pulls/{index}/reviews`, `repoListPullReviews`,
oldest first, `page`/`limit`), each with its body and `comments_count`; a review's inline
comments are read per review (`GET .../reviews/{id}/comments`, `repoGetPullReviewComments`,
one answer with all of them). Markers count only in reviews and comments whose `user.login` is
our identity (`GET /user`, publishing/markers.py's rule); reviews by anyone else are not even
opened. At most `MAX_LIST_PAGES` pages of reviews are read, and the comments of our
`MAX_COMMENT_READS` most recent reviews that have any.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import ReviewError
from pr_review_api.gitea.client import GiteaClient, status_error
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.publishing.failures import PublishFailure, PublishWords
from pr_review_api.publishing.markers import (
    Post,
    PriorState,
    finding_in,
    marked_heads,
    read_markers,
)

logger = logging.getLogger(__name__)

MAX_LIST_PAGES = 20  # of 50 reviews: our own are found whatever the others posted
MAX_COMMENT_READS = 30  # our most recent reviews with inline comments, read one request each
MAX_REVIEW_BYTES = 1024 * 1024

GITEA_PUBLISH = PublishWords(
    "Gitea", "pull request", "write access to the repository (the write:repository scope)"
)


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str | None = None


class ReviewWire(BaseModel):
    """A review as Gitea's API returns it (`PullReview`: the fields we read)."""

    model_config = ConfigDict(extra="ignore")
    id: int
    user: _UserWire | None = None
    body: str | None = None
    html_url: str | None = None
    commit_id: str | None = None
    comments_count: int = 0


class CommentWire(BaseModel):
    """An inline comment as Gitea's API returns it (`PullReviewComment`): `position` is its
    line on the new side (0 on the old side), `resolver` null while unresolved."""

    model_config = ConfigDict(extra="ignore")
    id: int
    user: _UserWire | None = None
    body: str | None = None
    path: str | None = None
    position: int | None = None
    commit_id: str | None = None
    original_commit_id: str | None = None
    resolver: _UserWire | None = None
    html_url: str | None = None


@dataclass(frozen=True)
class FindingComment:
    """One of our inline comments that carries a finding's marker."""

    id: int
    fingerprint: str
    path: str
    line: int | None  # on the new side, where Gitea anchors it
    posted_on: str | None  # the head it was posted on (Gitea never moves its line)
    body: str
    resolved: bool


@dataclass
class History:
    """Our reviews' markers (`state`) and our findings' inline comments."""

    state: PriorState
    comments: list[FindingComment] = field(default_factory=list)


def _login(user: _UserWire | None) -> str | None:
    return None if user is None else user.login


def _reviews(items: list[Any]) -> list[ReviewWire]:
    try:
        return [ReviewWire.model_validate(item) for item in items]
    except ValidationError:
        raise PublishFailure("Gitea returned review data that is not valid.") from None


async def read_history(
    gitea: GiteaClient, ref: PullRequestRef, *, head_sha: str | None = None
) -> History:
    """The markers of our reviews and inline comments on the pull request.

    `state.complete` is False when the listing outran its budget without our review of
    `head_sha`: it may lie in the pages not read, and only the caller knows whether that may be
    risked."""
    login = (await gitea.login()).lower()
    items, complete = await gitea.paginated(ref.api_url("/reviews"), max_pages=MAX_LIST_PAGES)
    ours = [r for r in _reviews(items) if (_login(r.user) or "").lower() == login]
    posts = [Post(_login(r.user), r.body or "", r.id, r.html_url, i) for i, r in enumerate(ours)]
    state = read_markers(posts, login, reviews=True)
    this_head = head_sha is not None and any(head_sha in marked_heads(p.body) for p in posts)
    state.complete = complete or this_head
    comments: list[FindingComment] = []
    for review in [r for r in ours if r.comments_count > 0][-MAX_COMMENT_READS:]:
        comments += await _finding_comments(gitea, ref, review.id, login)
    state.fingerprints |= {c.fingerprint for c in comments}
    return History(state, comments)


async def prior_state(
    gitea: GiteaClient, ref: PullRequestRef, *, head_sha: str | None = None
) -> PriorState:
    """`read_history`'s markers alone."""
    return (await read_history(gitea, ref, head_sha=head_sha)).state


async def _finding_comments(
    gitea: GiteaClient, ref: PullRequestRef, review_id: int, login: str
) -> list[FindingComment]:
    url = ref.api_url(f"/reviews/{review_id}/comments")
    response = await gitea.request("GET", url)
    if response.status == 404:
        return []  # deleted since the listing
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=gitea.anonymous)
    document = response.json()
    if not isinstance(document, list):
        raise PublishFailure("Gitea returned review comments that are not a list.")
    found: list[FindingComment] = []
    for item in document:
        try:
            comment = CommentWire.model_validate(item)
        except ValidationError:
            raise PublishFailure("Gitea returned review comment data that is not valid.") from None
        body = comment.body or ""
        fingerprint = finding_in(body)
        if (_login(comment.user) or "").lower() != login or fingerprint is None:
            continue
        found.append(
            FindingComment(
                id=comment.id,
                fingerprint=fingerprint,
                path=comment.path or "",
                line=comment.position or None,
                posted_on=comment.commit_id or comment.original_commit_id,
                body=body,
                resolved=comment.resolver is not None,
            )
        )
    return found


async def our_review_body(gitea: GiteaClient, ref: PullRequestRef, review_id: int) -> str | None:
    """The body of our review `review_id` (`GET .../reviews/{id}`, `repoGetPullReview`), or
    None when it cannot be read or is not ours (only our reviews' lines count, as markers)."""
    try:
        response = await gitea.request(
            "GET", ref.api_url(f"/reviews/{review_id}"), limit=MAX_REVIEW_BYTES
        )
        if response.status != 200:
            return None
        login = await gitea.login()
    except ReviewError:
        return None
    try:
        review = ReviewWire.model_validate_json(response.body)
    except ValidationError:
        return None
    author = _login(review.user) or ""
    return review.body if author.lower() == login.lower() else None
