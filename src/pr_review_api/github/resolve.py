"""Fixed findings' threads resolved (specification §15).

When a new head is reviewed and published, each unresolved review thread of ours (its first
comment ours, with a finding's marker) is resolved with GraphQL `resolveReviewThread` when
publishing/threads.py's rule says the new head fixed it (not reported again, no question of
someone else waiting, its anchored line changed since the commit it was posted on).
`publication.resolved` counts them. A thread GitHub does not let us resolve is left as it is.
"""

from __future__ import annotations

import logging

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import Repository, ReviewComment, review_comments
from pr_review_api.github.threads import Thread, graphql, review_threads
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.publishing.threads import Anchor, NewHead, OpenThread, resolve_fixed_threads

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
    new_head: NewHead,
) -> int | None:
    """Resolve the review threads of ours that `new_head` fixed (module docstring); how many
    (none when GitHub does not list them)."""
    try:
        login = await github.login()
        comments = {c.id: c for c in await review_comments(github, repository, number)}
        threads = await review_threads(github, repository, number)
    except GitHubUnavailable:
        return 0
    ours = (_open_thread(thread, comments, login) for thread in threads[:MAX_THREADS])
    return await resolve_fixed_threads(
        (thread for thread in ours if thread is not None),
        new_head,
        shown_as=escape_inline,
        resolve=lambda node_id: _resolve(github, node_id),
    )


def _open_thread(
    thread: Thread, comments: dict[int, ReviewComment], login: str
) -> OpenThread[str] | None:
    """The thread as the rule reads it, when it is open and its first comment is one of our
    findings'."""
    first = comments.get(thread.comment_ids[0]) if thread.comment_ids else None
    if thread.resolved or first is None or first.author != login:
        return None
    fingerprint = first.finding_fingerprint()
    if fingerprint is None:
        return None
    replies = [comments[i] for i in thread.comment_ids[1:] if i in comments]
    return OpenThread(
        thread.node_id,
        fingerprint,
        first.path,
        first.line if first.line is not None else first.original_line,
        first.body,
        Anchor.of(
            first.path,
            first.original_line or first.line,
            first.original_commit_id or first.commit_id,
        ),
        question_waits=_question_waits(replies, login),
    )


def _question_waits(replies: list[ReviewComment], login: str) -> bool:
    """Someone else wrote after our last comment in the thread."""
    last_ours = max((r.id for r in replies if r.author == login), default=0)
    return any(r.author != login and r.id > last_ours for r in replies)


async def _resolve(github: GitHubClient, node_id: str) -> bool:
    try:
        data = await graphql(github, RESOLVE_MUTATION, {"threadId": node_id})
        return bool(data["resolveReviewThread"]["thread"]["isResolved"])
    except (GitHubUnavailable, KeyError, TypeError):
        logger.info("a fixed thread could not be resolved")
        return False
