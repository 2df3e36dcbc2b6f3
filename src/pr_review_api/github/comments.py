"""The GitHub requests of the comment commands (specification §15).

Who may ask (`GET /repos/{o}/{r}/collaborators/{user}/permission`, kept briefly by the
`permissions.PermissionCache` its holder owns: never the comment's own claims), a review
comment and its thread, a reply in a thread (GitHub takes replies only to a top-level review
comment), a comment on the pull request, and a reaction. Our answers carry
`<!-- pr-review:answer=<question id> -->`, read only from our own comments, so that a job run
again after its worker died never answers one question twice.
Every request goes through the `GitHubClient` of the job's identity.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.markers import MarkedPost

logger = logging.getLogger(__name__)

MAX_COMMENT_BYTES = 1024 * 1024
MAX_THREAD_PAGES = 5
PAGE_BYTES = 8 * MAX_COMMENT_BYTES  # a page of 100 review comments
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
MAX_DOWNVOTE_READS = 30

Reaction = Literal["+1", "eyes"]


class _User(BaseModel):
    model_config = ConfigDict(extra="ignore")

    login: Annotated[str, StringConstraints(min_length=1, max_length=100)]


class ReviewComment(MarkedPost):
    """A review comment as GitHub lists it (the fields the comments seam reads)."""

    model_config = ConfigDict(extra="ignore")

    id: int
    user: _User | None = None
    in_reply_to_id: int | None = None
    path: str | None = None
    line: int | None = None
    original_line: int | None = None
    commit_id: str | None = None
    original_commit_id: str | None = None

    @property
    def author(self) -> str | None:
        return None if self.user is None else self.user.login


class _PermissionWire(BaseModel):
    model_config = ConfigDict(extra="ignore")

    permission: str = "none"
    role_name: str | None = None


@dataclass(frozen=True)
class Repository:
    owner: str
    repo: str

    def path(self, tail: str) -> str:
        return f"/repos/{self.owner}/{self.repo}{tail}"


async def may_write(
    github: GitHubClient, repository: Repository, user: str, permissions: PermissionCache
) -> bool:
    """Whether `user` has write (or maintain, or admin) permission on the repository, as
    `permissions` kept it or GitHub says now. An answer GitHub does not give is a no."""
    name = f"{repository.owner}/{repository.repo}"
    return await permissions.answer(name, user, lambda: _asked_may_write(github, repository, user))


async def _asked_may_write(github: GitHubClient, repository: Repository, user: str) -> bool:
    url = github.api_url(repository.path(f"/collaborators/{user}/permission"))
    response = await github.request("GET", url, limit=64 * 1024)
    if response.status == 200:
        try:
            wire = _PermissionWire.model_validate_json(response.body)
        except ValidationError:
            wire = _PermissionWire()
        return wire.permission in WRITE_PERMISSIONS or wire.role_name in WRITE_PERMISSIONS
    if response.status >= 500:
        raise GitHubUnavailable("GitHub did not say who may ask.")
    return False


async def review_comment(
    github: GitHubClient, repository: Repository, comment_id: int
) -> ReviewComment | None:
    """The review comment, or None when GitHub has none by that id."""
    url = github.api_url(repository.path(f"/pulls/comments/{comment_id}"))
    response = await github.request("GET", url, limit=MAX_COMMENT_BYTES)
    if response.status == 404:
        return None
    if response.status != 200:
        raise GitHubUnavailable("GitHub did not give the review comment.")
    try:
        return ReviewComment.model_validate_json(response.body)
    except ValidationError:
        return None


async def thread(
    github: GitHubClient,
    repository: Repository,
    number: int,
    top_id: int,
) -> list[ReviewComment]:
    """The replies to the top-level comment `top_id`, oldest first (a few pages at most)."""
    listed = await review_comments(github, repository, number, since_id=top_id)
    return [c for c in listed if c.in_reply_to_id == top_id]


async def review_comments(
    github: GitHubClient, repository: Repository, number: int, *, since_id: int = 0
) -> list[ReviewComment]:
    """The pull request's review comments, oldest first: the newest `MAX_THREAD_PAGES` pages
    of 100 (GitHub's `sort=created&direction=desc`), so that on a pull request with more, what
    is read is the latest (a question, our answer to it, our last review's findings), never
    the oldest. `since_id`: nothing created before that comment is wanted (a thread's
    replies), so the reading stops at the page that reaches it."""
    found: list[ReviewComment] = []
    for page in range(1, MAX_THREAD_PAGES + 1):
        url = github.api_url(repository.path(f"/pulls/{number}/comments"))
        query = {"sort": "created", "direction": "desc", "per_page": "100", "page": str(page)}
        response = await github.request("GET", url.copy_merge_params(query), limit=PAGE_BYTES)
        if response.status != 200:
            raise GitHubUnavailable("GitHub did not list the review comments.")
        items = _items(response.body)
        found += items
        if len(items) < 100 or any(c.id <= since_id for c in items):
            break
    return sorted({c.id: c for c in found}.values(), key=lambda c: c.id)


async def downvoted(
    github: GitHubClient, repository: Repository, number: int, permissions: PermissionCache
) -> list[tuple[ReviewComment, str]]:
    """Our findings' comments with a `-1` reaction by a user with write permission, and that
    user (specification §15: GitHub sends no webhook for reactions; read at the next review)."""
    login = await github.login()
    listed = await review_comments(github, repository, number)
    return await _downvoted_in(github, repository, listed, login, permissions)


async def _downvoted_in(
    github: GitHubClient,
    repository: Repository,
    listed: list[ReviewComment],
    login: str,
    permissions: PermissionCache,
) -> list[tuple[ReviewComment, str]]:
    ours = [c for c in listed if _our_finding(c, login)]
    found: list[tuple[ReviewComment, str]] = []
    for ours_one in ours[-MAX_DOWNVOTE_READS:]:
        for user in await _downvoters(github, repository, ours_one.id):
            if user != login and await may_write(github, repository, user, permissions):
                found.append((ours_one, user))
                break
    return found


def _our_finding(comment: ReviewComment, login: str) -> bool:
    return (
        comment.author == login
        and comment.in_reply_to_id is None
        and comment.finding_fingerprint() is not None
    )


def _asks_ignore(body: str, login: str) -> bool:
    """`/pr-review ignore` or `@<our login> ignore` (as jobs/commands.py reads commands)."""
    words = body.strip().lower().split()
    names = {"/pr-review", f"@{login.lower()}", f"@{login.lower().removesuffix('[bot]')}"}
    return len(words) == 2 and words[0] in names and words[1] == "ignore"


async def dismissed_on_pull_request(
    github: GitHubClient, repository: Repository, number: int, permissions: PermissionCache
) -> set[str]:
    """Outside service mode (the CLI, the Action: no database), the fingerprints dismissed on
    this pull request itself: an `ignore` reply, or a `-1` reaction, by a user with write
    permission on one of our findings' comments (specification §15)."""
    login = await github.login()
    listed = await review_comments(github, repository, number)
    ours = {c.id: c for c in listed if _our_finding(c, login)}
    found: set[str] = set()
    for reply in listed:
        top = ours.get(reply.in_reply_to_id or 0)
        author = reply.author
        if top is None or author is None or author == login or author.endswith("[bot]"):
            continue
        if _asks_ignore(reply.body, login) and await may_write(
            github, repository, author, permissions
        ):
            found.add(str(top.finding_fingerprint()))
    for comment, _ in await _downvoted_in(github, repository, listed, login, permissions):
        found.add(str(comment.finding_fingerprint()))
    return found


async def _downvoters(github: GitHubClient, repository: Repository, comment_id: int) -> list[str]:
    url = github.api_url(repository.path(f"/pulls/comments/{comment_id}/reactions"))
    url = url.copy_merge_params({"content": "-1", "per_page": "100"})
    response = await github.request("GET", url, limit=MAX_COMMENT_BYTES)
    if response.status != 200:
        return []
    try:
        raw = json.loads(response.body)
    except ValueError:
        return []
    users = []
    for item in raw if isinstance(raw, list) else []:
        user = item.get("user") if isinstance(item, dict) else None
        login = user.get("login") if isinstance(user, dict) else None
        if item.get("content") == "-1" and isinstance(login, str) and not login.endswith("[bot]"):
            users.append(login)
    return users


def _items(body: bytes) -> list[ReviewComment]:
    try:
        raw = json.loads(body)
    except ValueError:
        return []
    items: list[ReviewComment] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            items.append(ReviewComment.model_validate(item))
        except ValidationError:
            continue
    return items


async def reply(
    github: GitHubClient,
    repository: Repository,
    number: int,
    top_id: int,
    body: str,
) -> int | None:
    """Reply in the thread of the top-level review comment `top_id`; the new comment's id."""
    url = github.api_url(repository.path(f"/pulls/{number}/comments/{top_id}/replies"))
    return await _created(github, url, {"body": body})


async def comment(
    github: GitHubClient,
    repository: Repository,
    number: int,
    body: str,
) -> int | None:
    """A comment on the pull request's conversation; the new comment's id."""
    url = github.api_url(repository.path(f"/issues/{number}/comments"))
    return await _created(github, url, {"body": body})


async def react(
    github: GitHubClient,
    repository: Repository,
    comment_id: int,
    content: Reaction,
    *,
    review_comment: bool,
) -> None:
    """A reaction on a comment (GitHub answers 200 for one already there)."""
    kind = "pulls" if review_comment else "issues"
    url = github.api_url(repository.path(f"/{kind}/comments/{comment_id}/reactions"))
    await _created(github, url, {"content": content})


async def _created(github: GitHubClient, url: Any, payload: dict[str, Any]) -> int | None:
    response = await github.request("POST", url, json_body=payload)
    if response.status not in (200, 201):
        logger.info("GitHub refused a comments request (%d)", response.status)
        raise GitHubUnavailable(f"GitHub refused the request ({response.status}).")
    try:
        return ReviewComment.model_validate_json(response.body).id
    except ValidationError:
        return None
