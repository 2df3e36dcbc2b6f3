"""Fixed findings' threads resolved (specification §15).

When a new head is reviewed and published, each unresolved review thread of ours (its first
comment ours, with a finding's marker) is resolved with GraphQL `resolveReviewThread` when
  - the new review does not report its fingerprint, nor the same finding near its line
    (github/threads.py: its line's text changed, and its fingerprint with it),
  - its anchored line changed between the commit it was posted on and the new head, and
  - nobody else's reply in it waits for an answer of ours (a later comment of ours).
`publication.resolved` counts them. A thread GitHub does not let us resolve is left as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from pathlib import Path

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.git.line_changes import line_changed
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import Repository, ReviewComment, review_comments
from pr_review_api.github.threads import graphql, review_threads
from pr_review_api.model import Finding
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.publishing.threads import same_finding

logger = logging.getLogger(__name__)

MAX_THREADS = 100
RESOLVE_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


async def resolve_fixed(
    github: GitHubClient,
    repository: Repository,
    number: int,
    git_dir: Path,
    head_sha: str,
    reported: Collection[str],
    findings: Sequence[Finding],
) -> int:
    """Resolve the threads of ours the new head fixed (module docstring); how many.
    `reported` are the new review's fingerprints, `findings` its findings."""
    try:
        login = await github.login()
        comments = {c.id: c for c in await review_comments(github, repository, number)}
        threads = await review_threads(github, repository, number)
    except GitHubUnavailable:
        return 0
    resolved = 0
    for thread in threads[:MAX_THREADS]:
        first = comments.get(thread.comment_ids[0]) if thread.comment_ids else None
        if thread.resolved or first is None or first.author != login:
            continue
        fingerprint = first.finding_fingerprint()
        if fingerprint is None or fingerprint in reported:
            continue
        line = first.line if first.line is not None else first.original_line
        if any(
            same_finding(f, first.path, line, first.body, shown_as=escape_inline) for f in findings
        ):
            continue  # reported again, its line's text changed (publishing/threads.py)
        replies = [comments[i] for i in thread.comment_ids[1:] if i in comments]
        if _question_waits(replies, login):
            continue
        if not await asyncio.to_thread(_line_changed, git_dir, first, head_sha):
            continue
        if await _resolve(github, thread.node_id):
            resolved += 1
    return resolved


def _question_waits(replies: list[ReviewComment], login: str) -> bool:
    """Someone else wrote after our last comment in the thread."""
    last_ours = max((r.id for r in replies if r.author == login), default=0)
    return any(r.author != login and r.id > last_ours for r in replies)


def _line_changed(git_dir: Path, comment: ReviewComment, head_sha: str) -> bool:
    """Whether the line the comment was anchored on changed between its commit and the head."""
    posted_on = comment.original_commit_id or comment.commit_id
    line = comment.original_line or comment.line
    if posted_on is None or line is None or comment.path is None:
        return False
    return line_changed(git_dir, comment.path, line, posted_on, head_sha)


async def _resolve(github: GitHubClient, node_id: str) -> bool:
    try:
        data = await graphql(github, RESOLVE_MUTATION, {"threadId": node_id})
        return bool(data["resolveReviewThread"]["thread"]["isResolved"])
    except (GitHubUnavailable, KeyError, TypeError):
        logger.info("a fixed thread could not be resolved")
        return False
