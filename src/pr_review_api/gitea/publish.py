"""Publishing a validated review on its Gitea pull request (specification §§10, 14, 19): Gitea's
steps of the one publication driver (`publishing/driver.py`).

1. In the service, its ledger (`ledger.py`, keyed `gitea:owner/repo#index`) of this head
   answers first. Then our earlier reviews are read (`gitea/history.py`): a review of ours that
   carries this head's marker means nothing is posted (`already_published`); the fingerprints
   already in our reviews and inline comments are not posted again (`duplicates_skipped`), nor
   a finding that an open (unresolved) comment of ours stands for, reported again after its
   line's text changed (publishing/threads.py).
2. Placement is every forge's (`publishing/placement.py`): inline when the line is an added or
   context line of a hunk from the merge base to the head, at most
   `PR_REVIEW_MAX_INLINE_COMMENTS`, most severe first. Gitea has no committable suggestion:
   each is a `diff` block (gitea/layout.py).
3. One review: `POST .../pulls/{index}/reviews` (`repoCreatePullReview`) with `event`
   `COMMENT`, `commit_id` our head, the body, and each inline finding as `{path, body,
   new_position: <line at the head>, old_position: 0}`. Gitea accepts a `new_position` off the
   diff and a stale `commit_id` and shows them out of place, so placement is the only guard:
   we never send either. An answer that refuses the review with inline comments (anything but
   a refusal of the token, a missing pull request or a server error without comments) makes
   one more attempt with every finding in the body, as GitHub's 422.
4. Our first review is the full one. Gitea's API cannot edit a review's body, so a later head
   with new findings gets its own short review (one line of counts, the findings not inline,
   the head's marker); a later head with nothing new posts nothing and answers `published`
   with our first review's id and URL (a second run of that head, without the service's
   ledger, asks the model again and again posts nothing).

Failures end `failed` with a fixed sentence and the code `gitea_publish_failed`; the review
itself is returned whatever happens here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.history import (
    GITEA_PUBLISH,
    MAX_LIST_PAGES,
    FindingComment,
    ReviewWire,
    read_history,
)
from pr_review_api.gitea.layout import render_inline, render_later_body, render_review_body
from pr_review_api.gitea.markdown import escape_inline
from pr_review_api.gitea.urls import PullRequestRef, ref_of
from pr_review_api.ledger import HeadKey
from pr_review_api.model import (
    Finding,
    Publication,
    ReviewResult,
)
from pr_review_api.publishing.driver import ChangePublisher, ForgeSteps, PostRequest, published
from pr_review_api.publishing.failures import PublishFailure, status_failure
from pr_review_api.publishing.markers import PriorState
from pr_review_api.publishing.placement import Placed, Placement, carried, moved_to_body
from pr_review_api.publishing.threads import same_finding

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

# Answers after which the same review is not tried again with its findings in the body: the
# token refused, the pull request gone, or Gitea's rate limit.
NOT_RETRIED: Final = frozenset({401, 403, 404, 429})
# A review's body and how many body findings it holds (gitea/layout.py).
Render = Callable[[ReviewResult, Placement], tuple[str, int]]


def pull_request_key(ref: PullRequestRef, identity: str, head_sha: str) -> HeadKey:
    """The ledger's key of a pull request's head: `gitea:owner/repo#index`, which no GitHub
    pull request's or GitLab merge request's key can equal."""
    return HeadKey(f"gitea:{ref.repo_path}#{ref.number}".lower(), identity.lower(), head_sha)


class _GiteaSteps(ForgeSteps[PullRequestRef, GiteaClient]):
    """A pull request's publication: our reviews listed, then one review (the first in full, a
    later head's short, none for a later head with nothing new)."""

    errors = (GiteaUnavailable, PullRequestNotFound)
    failed_code = "gitea_publish_failed"
    listing = ("pull request", "reviews", MAX_LIST_PAGES)

    def __init__(self, ref: PullRequestRef, gitea: GiteaClient, max_inline: int) -> None:
        super().__init__(ref, gitea, max_inline)
        self.comments: list[FindingComment] = []

    async def key(self, head_sha: str) -> HeadKey:
        return pull_request_key(self.ref, await self.client.login(), head_sha)

    async def prior_state(self, head_sha: str, wait_until: float) -> PriorState:
        history = await read_history(self.client, self.ref, head_sha=head_sha)
        self.comments = history.comments
        return history.state

    async def post(self, request: PostRequest) -> tuple[Publication, list[str]]:
        result, findings = request.result, request.findings
        matched = _in_open_comments(
            self.comments, findings.findings, findings.fingerprints, request.posted
        )
        placement = request.placed(self.max_inline, matched)
        first = request.state.summary
        if first is not None and not placement.inline and not placement.body:
            # Nothing new, and no body to edit: our first review stands for this head.
            return published(first.review_id, first.url, placement, 0), matched
        render = render_review_body if first is None else render_later_body
        created, placement = await _post_review(result, self.ref, self.client, placement, render)
        _, shown = await asyncio.to_thread(render, result, placement)
        publication = published(created.id, created.html_url, placement, shown)
        return publication, [*carried(placement, shown), *matched]


def _in_open_comments(
    comments: Sequence[FindingComment],
    findings: Sequence[Finding],
    fingerprints: Sequence[str],
    posted: Collection[str],
) -> list[str]:
    """The fingerprints of findings not posted before that an unresolved comment of ours
    stands for (same path and title, within 3 lines): reported again after their line's text
    changed."""
    open_comments = [c for c in comments if not c.resolved]
    return [
        fingerprint
        for finding, fingerprint in zip(findings, fingerprints, strict=True)
        if fingerprint not in posted
        and any(
            same_finding(finding, c.path, c.line, c.body, shown_as=escape_inline)
            for c in open_comments
        )
    ]


async def _post_review(
    result: ReviewResult,
    ref: PullRequestRef,
    gitea: GiteaClient,
    placement: Placement,
    render: Render,
) -> tuple[ReviewWire, Placement]:
    """Post the review (one more attempt, every finding in the body, when Gitea refuses it
    with inline comments): the review created, and the placement it was posted with."""
    url = ref.api_url("/reviews")
    payload = await asyncio.to_thread(_payload, result, placement, render)
    response = await gitea.request("POST", url, json=payload)
    refused = not 200 <= response.status < 300 and response.status not in NOT_RETRIED
    if refused and placement.inline:
        logger.info("Gitea refused the review (%d); every finding in the body", response.status)
        placement = moved_to_body(placement, [], placement.inline)
        payload = await asyncio.to_thread(_payload, result, placement, render)
        response = await gitea.request("POST", url, json=payload)
    if not 200 <= response.status < 300:
        raise status_failure(response.status, "publish the review", GITEA_PUBLISH)
    try:
        return ReviewWire.model_validate_json(response.body), placement
    except ValidationError:
        raise PublishFailure("Gitea's answer to the review is not valid.") from None


def _payload(result: ReviewResult, placement: Placement, render: Render) -> dict[str, Any]:
    body, _ = render(result, placement)
    return {
        "event": "COMMENT",
        "commit_id": result.revisions.head_sha,
        "body": body,
        "comments": [_comment(p) for p in placement.inline],
    }


def _comment(placed: Placed) -> dict[str, Any]:
    """An inline comment on the head's side: `new_position` its line, `old_position` 0."""
    return {
        "path": placed.finding.path,
        "body": render_inline(placed),
        "new_position": placed.line,
        "old_position": 0,
    }


# Publishing on Gitea: `publish` on one change, `publish_pull_request` a finished review on its
# change (publishing/driver.py's `ChangePublisher`).
PUBLISHER: ChangePublisher[GiteaClient, PullRequestRef] = ChangePublisher(
    "gitea", _GiteaSteps, ref_of
)
publish = PUBLISHER.one
publish_pull_request = PUBLISHER.finished
