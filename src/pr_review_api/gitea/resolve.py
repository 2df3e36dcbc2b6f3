"""Fixed findings' comments resolved on a Gitea pull request (specification §15 on Gitea, section
19).

When a new head is reviewed and published, each unresolved inline comment of ours that carries
a finding (gitea/history.py) is resolved (`POST /repos/{owner}/{repo}/pulls/comments/{id}/
resolve`, `repoResolvePullReviewComment`, answered 204) when, as on GitHub and GitLab:
  - the new review does not report its fingerprint, nor the same finding near its line
    (publishing/threads.py's `same_finding`, with Gitea's escape of the title), and
  - its anchored line changed between the head it was posted on and the new head
    (git/line_changes.py).
Gitea resolves comment by comment (a conversation is its first comment). The endpoint is recent
(Gitea 1.26); a server without it (older Gitea, Forgejo) answers 404 or 405 to the first
request: then nothing is resolved and `publication.resolved` stays unset. At most
`MAX_COMMENTS`, the most recent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.history import FindingComment
from pr_review_api.gitea.markdown import escape_inline
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.publishing.threads import Anchor, NewHead, OpenThread, resolve_fixed_threads

logger = logging.getLogger(__name__)

MAX_COMMENTS = 100
NO_ENDPOINT = (404, 405)


async def resolve_fixed(
    gitea: GiteaClient,
    ref: PullRequestRef,
    comments: Sequence[FindingComment],
    new_head: NewHead,
) -> int | None:
    """Resolve the comments of ours the new head fixed (module docstring): how many, or None
    when the server cannot resolve a comment through its API."""
    resolved = await resolve_fixed_threads(
        (_open_thread(comment) for comment in comments[-MAX_COMMENTS:] if not comment.resolved),
        new_head,
        shown_as=escape_inline,
        resolve=lambda comment_id: _resolve(gitea, ref, comment_id),
    )
    if resolved is None:
        logger.info("this Gitea server cannot resolve a comment through its API")
    return resolved


def _open_thread(comment: FindingComment) -> OpenThread[int]:
    """The comment as the rule reads it: Gitea never moves its line, and no reply of someone
    else keeps it open."""
    anchor = Anchor.of(comment.path, comment.line, comment.posted_on)
    return OpenThread(
        comment.id, comment.fingerprint, comment.path, comment.line, comment.body, anchor
    )


async def _resolve(gitea: GiteaClient, ref: PullRequestRef, comment_id: int) -> bool | None:
    """Whether Gitea resolved the comment; None when the server has no such endpoint."""
    try:
        response = await gitea.request(
            "POST", ref.repo_api_url(f"/pulls/comments/{comment_id}/resolve")
        )
    except GiteaUnavailable:
        logger.info("a fixed comment could not be resolved")
        return False
    if response.status in NO_ENDPOINT:
        return None
    if not 200 <= response.status < 300:
        logger.info("Gitea refused to resolve a fixed comment (%d)", response.status)
        return False
    return True
