"""Fixed findings' discussions resolved on a merge request (specification §15 on GitLab, section
17).

When a new head is reviewed and published, each unresolved, resolvable discussion of one of our
findings (gitlab/discussions.py) is resolved
(`PUT .../merge_requests/:iid/discussions/:discussion_id?resolved=true`) when, as on GitHub,
publishing/threads.py's rule says the new head fixed it (not reported again, with GitLab's
escape of the title; no question of someone else waiting, GitLab's system notes aside; its
anchored line changed since the head it was posted on).
The head it was posted on is its first note's original position's, else its position's:
GitLab moves `position` to a later head when the line could be traced through the push, and
leaves it (the line "outdated") when the line changed. At most `MAX_THREADS` discussions, the
most recent. GitLab lets a Developer (or higher) or the merge request's author resolve; a
discussion GitLab does not let us resolve is left as it is.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.discussions import (
    DiscussionWire,
    FindingDiscussion,
    finding_discussions,
    is_resolved,
)
from pr_review_api.gitlab.markdown import escape_inline
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.publishing.threads import Anchor, NewHead, OpenThread, resolve_fixed_threads

logger = logging.getLogger(__name__)

MAX_THREADS = 100


async def resolve_fixed(gitlab: GitLabClient, ref: MergeRequestRef, new_head: NewHead) -> int:
    """Resolve our findings' discussions that `new_head` fixed (module docstring), the
    `MAX_THREADS` most recent; how many (none when GitLab does not list them)."""
    try:
        username = await gitlab.username()
        discussions = await finding_discussions(gitlab, ref)
    except (GitLabUnavailable, PullRequestNotFound):
        return 0
    resolved = await resolve_fixed_threads(
        (_open_thread(d, username) for d in discussions[-MAX_THREADS:] if _open(d)),
        new_head,
        shown_as=escape_inline,
        resolve=lambda discussion_id: _resolve(gitlab, ref, discussion_id),
    )
    return resolved or 0  # GitLab's `resolve` never says it cannot resolve at all


def _open(discussion: FindingDiscussion) -> bool:
    return discussion.resolvable and not discussion.resolved


def _open_thread(discussion: FindingDiscussion, username: str) -> OpenThread[str]:
    """The discussion as the rule reads it: its first note where GitLab shows it now (as
    GitHub's `line`), and anchored on the new-side line it was posted on (a note on a removed
    line only is never ours, and never resolved here)."""
    first = discussion.first
    shown = first.position or first.original_position
    posted = first.original_position or first.position
    return OpenThread(
        discussion.id,
        discussion.fingerprint,
        first.path(),
        None if shown is None else shown.new_line,
        first.body,
        Anchor.of(first.path(), None if posted is None else posted.new_line, first.posted_head()),
        question_waits=_question_waits(discussion, username),
    )


def _question_waits(discussion: FindingDiscussion, username: str) -> bool:
    """Someone else (not GitLab's system notes) wrote after our last note in the discussion."""
    ours = username.lower()
    replies = [note for note in discussion.replies if not note.system]
    last_ours = max((n.id for n in replies if (n.username or "").lower() == ours), default=0)
    return any((n.username or "").lower() != ours and n.id > last_ours for n in replies)


async def _resolve(gitlab: GitLabClient, ref: MergeRequestRef, discussion_id: str) -> bool:
    url = ref.api_url(gitlab.settings, f"/discussions/{discussion_id}")
    try:
        response = await gitlab.request("PUT", url, params={"resolved": "true"})
    except GitLabUnavailable:
        logger.info("a fixed discussion could not be resolved")
        return False
    if not 200 <= response.status < 300:
        logger.info("GitLab refused to resolve a fixed discussion (%d)", response.status)
        return False
    try:
        return is_resolved(DiscussionWire.model_validate_json(response.body))
    except ValidationError:
        return False
