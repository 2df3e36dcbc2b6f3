"""Findings dismissed on a Gitea pull request (specification §15 on Gitea, section 19), and who may
dismiss one.

A dismissal is a `-1` reaction on one of our findings' inline comments by a user with write
access to the repository. Gitea sends no webhook for a reaction, and its comment listings
carry none: the reactions are read per comment (`GET /repos/{owner}/{repo}/issues/comments/
{id}/reactions`, `issueGetCommentReactions`, which answers any comment of the repository, a
review's inline comments included) when the pull request is next reviewed, for our
`MAX_REACTION_READS` most recent finding comments, at most `REACTION_READ_CONCURRENCY` at a
time. A comment whose reactions Gitea does not give is read again at the next review.

Who may dismiss: a writer, as gitea/permissions.py's lookup says (`write`, `admin` or `owner`;
with a token Gitea refuses it to, 403, nobody else is a writer here and nothing is dismissed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.history import FindingComment
from pr_review_api.gitea.permissions import may_write
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.permissions import PermissionCache

MAX_REACTION_READS = 100
REACTION_READ_CONCURRENCY = 4
MAX_REACTIONS_BYTES = 256 * 1024
DISMISSING_REACTION = "-1"


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    login: str


class _ReactionWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: str
    user: _UserWire


async def downvoted(
    gitea: GiteaClient,
    ref: PullRequestRef,
    comments: Sequence[FindingComment],
    cache: PermissionCache,
) -> list[tuple[FindingComment, str]]:
    """Our finding comments that a writer other than us gave a `-1`, each with that writer."""
    login = (await gitea.login()).lower()
    recent = list(comments[-MAX_REACTION_READS:])
    limit = asyncio.Semaphore(REACTION_READ_CONCURRENCY)

    async def read(comment: FindingComment) -> list[str]:
        async with limit:
            return await _downvoters(gitea, ref, comment.id)

    voters = await asyncio.gather(*(read(comment) for comment in recent))
    found: list[tuple[FindingComment, str]] = []
    for comment, users in zip(recent, voters, strict=True):
        for user in users:
            if user.lower() != login and await may_write(gitea, ref, user, cache):
                found.append((comment, user))
                break
    return found


async def _downvoters(gitea: GiteaClient, ref: PullRequestRef, comment_id: int) -> list[str]:
    url = ref.repo_api_url(f"/issues/comments/{comment_id}/reactions")
    try:
        response = await gitea.request("GET", url, limit=MAX_REACTIONS_BYTES)
    except (GiteaUnavailable, PullRequestNotFound):
        return []
    if response.status != 200:
        return []
    try:
        listed = response.json()
    except GiteaUnavailable:
        return []
    users: list[str] = []
    for item in listed if isinstance(listed, list) else []:
        try:
            reaction = _ReactionWire.model_validate(item)
        except ValidationError:
            continue
        if reaction.content == DISMISSING_REACTION:
            users.append(reaction.user.login)
    return users
