"""Publishing a validated review on its pull request (specification §10): GitHub's steps of
the one publication driver (`publishing/driver.py`).

1. In the service, its ledger (`ledger.py`) of this head answers first. Then read our
   own earlier reviews and review comments, newest first (`github/history.py`), and keep the
   markers of those whose author is the publishing identity (`GitHubClient.login`). A review
   of ours that carries this head's marker means nothing is posted (`already_published`); the
   fingerprints already posted are not posted again (`duplicates_skipped`), nor a finding that
   an open thread of ours stands for, reported again after its line's text changed
   (`github/threads.py`). When the reviews outrun the listing budget without this head's
   marker, the CLI publishes nothing (it cannot tell); the service goes on, its ledger knowing
   every head it published.
2. Place each finding: inline when its line is an added or context line of a hunk of its file's
   diff from the merge base to the head (`git/hunks.py`), at most
   `PR_REVIEW_MAX_INLINE_COMMENTS`, most severe first, then path, then line; every other one in
   the body with its path and line.
3. Publish (`github/review_requests.py`). Our first review on the pull request is the full
   one: summary, counts, the findings not inline, notes, model, rounds and tokens. On a later
   head, new findings go in a short review (one line, the findings not inline, the head's
   marker), and our first review's body is rewritten to carry the current summary and this
   head's marker (`github/summary.py`); a head with nothing new posts no review at all. A
   failure ends `failed` with a fixed sentence; the review itself is never lost: the caller
   returns it whatever happens here.

Every piece of model text goes through `markdown.escape`, so it cannot mention, reference, link,
embed or inject HTML, and cannot forge a marker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import Repository
from pr_review_api.github.history import MAX_LIST_PAGES, PostWire, prior_state
from pr_review_api.github.layout import render_review_body, render_short_body
from pr_review_api.github.review_requests import post_review, send_review
from pr_review_api.github.summary import updated_body
from pr_review_api.github.threads import open_thread_matches
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.ledger import HeadKey
from pr_review_api.model import Publication, PullRequestInfo, ReviewResult
from pr_review_api.publishing.driver import ChangePublisher, ForgeSteps, PostRequest, published
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.markers import Post, PriorState
from pr_review_api.publishing.placement import Placement, carried
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


class _GitHubSteps(ForgeSteps[PullRequestRef, GitHubClient]):
    """A pull request's publication: our reviews listed, then one review with the inline
    comments (the first in full, a later head's short), and our first review rewritten."""

    errors = (GitHubUnavailable,)
    failed_code = "github_publish_failed"
    listing = ("pull request", "reviews", MAX_LIST_PAGES)

    async def key(self, head_sha: str) -> HeadKey:
        return HeadKey.of(self.ref, await self.client.login(), head_sha)

    async def prior_state(self, head_sha: str, wait_until: float) -> PriorState:
        return await prior_state(self.client, self.ref, wait_until=wait_until, head_sha=head_sha)

    async def post(self, request: PostRequest) -> tuple[Publication, list[str]]:
        ref, github, result, deadline = self.ref, self.client, request.result, request.deadline
        matched = await _in_open_threads(github, ref, request)
        placement = request.placed(self.max_inline, matched)
        summary = request.state.summary
        if summary is None:
            publication, carried = await _first_review(result, ref, github, placement, deadline)
        else:
            publication, carried = await _later_review(
                result, ref, github, placement, summary, matched, deadline
            )
        return publication, [*carried, *matched]


async def _in_open_threads(
    github: GitHubClient, ref: PullRequestRef, request: PostRequest
) -> list[str]:
    """The fingerprints of findings not posted before that an open thread of ours stands for
    (github/threads.py): reported again after their line's text changed."""
    findings, fingerprints = request.findings.findings, request.findings.fingerprints
    fresh = [i for i, fingerprint in enumerate(fingerprints) if fingerprint not in request.posted]
    comments = request.state.finding_comments
    if not fresh or not comments:
        return []
    repository = Repository(ref.owner, ref.repo)
    found = await open_thread_matches(
        github, repository, ref.number, comments, [findings[i] for i in fresh]
    )
    return [fingerprints[fresh[i]] for i in found]


async def _first_review(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    deadline: float,
) -> tuple[Publication, list[str]]:
    """Our first review on the pull request, in full; the publication and the fingerprints
    it carries."""
    created, placement = await post_review(
        result, ref, github, placement, render_review_body, deadline=deadline
    )
    _, shown = await asyncio.to_thread(render_review_body, result, placement)
    return _published(created, placement, shown), carried(placement, shown)


async def _later_review(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    summary: Post,
    matched: list[str],
    deadline: float,
) -> tuple[Publication, list[str]]:
    """A later head (github/summary.py): its new findings, if any, in a short review; then
    our first review's body rewritten for this head. With nothing new, the rewritten first
    review is the publication; when GitHub refuses to rewrite it, a short review marks the
    head instead, so that it is never reviewed twice."""
    created: PostWire | None = None
    if placement.inline or placement.body:
        created, placement = await post_review(
            result, ref, github, placement, render_short_body, deadline=deadline
        )
    edited = await _edit_summary(
        result,
        ref,
        github,
        placement,
        summary,
        matched,
        new_review=created is not None,
        deadline=deadline,
    )
    if created is None and edited is not None:
        return _published(edited, placement, 0), []
    if created is None:  # GitHub did not take the rewrite: a short review marks the head
        created, placement = await post_review(
            result, ref, github, placement, render_short_body, deadline=deadline
        )
    _, shown = await asyncio.to_thread(render_short_body, result, placement)
    return _published(created, placement, shown), carried(placement, shown)


async def _edit_summary(  # noqa: PLR0913  (what the rewritten body is made of)
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    summary: Post,
    matched: list[str],
    *,
    new_review: bool,
    deadline: float,
) -> PostWire | None:
    """Rewrite our first review's body for this head; the review, or None when GitHub did
    not take it (the head's publication then does without it)."""
    body = await asyncio.to_thread(
        updated_body, summary.body, result, placement, new_review=new_review, matched=matched
    )
    if body is None or summary.review_id is None:
        logger.info("our first review's summary does not fit in a review body")
        return None
    url = ref.api_url(github.settings, f"/reviews/{summary.review_id}")
    try:
        status, edited = await send_review(github, "PUT", url, {"body": body}, deadline=deadline)
    except (PublishFailure, GitHubUnavailable):
        status, edited = 0, None
    if status != 200:
        logger.info("GitHub did not let us update our first review (%d)", status)
        return None
    return edited or PostWire(id=summary.review_id, html_url=summary.url)


def _published(review: PostWire, placement: Placement, shown: int) -> Publication:
    return published(review.id, review.html_url, placement, shown)


def _ref_of(info: PullRequestInfo, settings: Settings) -> PullRequestRef:
    del settings  # a GitHub pull request's reference is the review's own
    return PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


# Publishing on GitHub: `publish` on one change, `publish_result` a finished review on its
# change (publishing/driver.py's `ChangePublisher`).
PUBLISHER: ChangePublisher[GitHubClient, PullRequestRef] = ChangePublisher(
    "github", _GitHubSteps, _ref_of
)
publish = PUBLISHER.one
publish_result = PUBLISHER.finished
