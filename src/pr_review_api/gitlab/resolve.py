"""Fixed findings' discussions resolved on a merge request (specification §15 on GitLab, section
17).

When a new head is reviewed and published, each unresolved, resolvable discussion of one of our
findings (gitlab/discussions.py) is resolved
(`PUT .../merge_requests/:iid/discussions/:discussion_id?resolved=true`) when, as on GitHub
(github/resolve.py):
  - the new review does not report its fingerprint, nor the same finding near its line
    (publishing/threads.py's `same_finding`, with GitLab's escape of the title),
  - its anchored line changed between the head it was posted on and the new head
    (git/line_changes.py), and
  - nobody else's reply in it waits for an answer of ours (a later note of ours).
The head it was posted on is its first note's original position's, else its position's:
GitLab moves `position` to a later head when the line could be traced through the push, and
leaves it (the line "outdated") when the line changed. At most `MAX_THREADS` discussions, the
most recent. GitLab lets a Developer (or higher) or the merge request's author resolve; a
discussion GitLab does not let us resolve is left as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from pathlib import Path

from pydantic import ValidationError

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.git.line_changes import line_changed
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import DiscussionNote
from pr_review_api.gitlab.discussions import (
    DiscussionWire,
    FindingDiscussion,
    finding_discussions,
    is_resolved,
)
from pr_review_api.gitlab.markdown import escape_inline
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.model import Finding
from pr_review_api.publishing.threads import same_finding

logger = logging.getLogger(__name__)

MAX_THREADS = 100


async def resolve_fixed(
    gitlab: GitLabClient,
    ref: MergeRequestRef,
    git_dir: Path,
    head_sha: str,
    reported: Collection[str],
    findings: Sequence[Finding],
) -> int:
    """Resolve the discussions of ours the new head fixed (module docstring); how many.
    `reported` are the new review's fingerprints, `findings` its findings."""
    try:
        username = await gitlab.username()
        discussions = await finding_discussions(gitlab, ref)
    except (GitLabUnavailable, PullRequestNotFound):
        return 0
    resolved = 0
    for discussion in discussions[-MAX_THREADS:]:
        if not discussion.resolvable or discussion.resolved:
            continue
        if discussion.fingerprint in reported or _reported_again(discussion.first, findings):
            continue
        if _question_waits(discussion, username):
            continue
        if not await asyncio.to_thread(_line_changed, git_dir, discussion.first, head_sha):
            continue
        if await _resolve(gitlab, ref, discussion.id):
            resolved += 1
    return resolved


def _reported_again(first: DiscussionNote, findings: Sequence[Finding]) -> bool:
    """A finding of the new review stands for this one (its line's text changed, and its
    fingerprint with it): the line GitLab shows the note on now, as GitHub's `line`."""
    position = first.position or first.original_position
    line = None if position is None else position.new_line
    path = first.path()
    return any(same_finding(f, path, line, first.body, shown_as=escape_inline) for f in findings)


def _question_waits(discussion: FindingDiscussion, username: str) -> bool:
    """Someone else (not GitLab's system notes) wrote after our last note in the discussion."""
    ours = username.lower()
    replies = [note for note in discussion.replies if not note.system]
    last_ours = max((n.id for n in replies if (n.username or "").lower() == ours), default=0)
    return any((n.username or "").lower() != ours and n.id > last_ours for n in replies)


def _line_changed(git_dir: Path, first: DiscussionNote, head_sha: str) -> bool:
    """Whether the new-side line the note was anchored on changed since the head it was
    posted on (a note on a removed line only is never ours, and never resolved here)."""
    posted_on, path = first.posted_head(), first.path()
    position = first.original_position or first.position
    line = None if position is None else position.new_line
    if posted_on is None or path is None or line is None:
        return False
    return line_changed(git_dir, path, line, posted_on, head_sha)


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
