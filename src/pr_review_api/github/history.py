"""What our own earlier posts on a pull request say: markers by the publishing identity, and
the files changed since our last reviewed head for a re-review's first message (CONTRACT 10).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.git.runner import GitError, run_git
from pr_review_api.github.client import GitHubClient, is_rate_limited, rate_limit_wait
from pr_review_api.github.markers import (
    Post,
    PriorState,
    read_markers,
)
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.model import (
    PullRequestInfo,
)

MAX_LIST_PAGES = 30  # 100 per page
MAX_RATE_LIMIT_WAITS = 3
DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
_NEXT_LINK = re.compile(r'<([^<>\s]+)>\s*;\s*rel="?next"?')


class PublishFailure(Exception):
    """Publishing failed; `message` is a fixed sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def status_failure(status: int, what: str) -> PublishFailure:
    if status in (401, 403):
        return PublishFailure(
            f"GitHub refused to let us {what} (status {status}); the token needs write "
            "access to pull requests."
        )
    if status == 404:
        return PublishFailure(f"GitHub did not find the pull request when we tried to {what}.")
    if status >= 500:
        return PublishFailure(f"GitHub answered with a server error (status {status}).")
    return PublishFailure(f"GitHub answered with an unexpected status ({status}).")


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str | None = None


class PostWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    user: _UserWire | None = None
    body: str | None = None
    html_url: str | None = None


def _next_link(headers: Any) -> str | None:
    match = _NEXT_LINK.search(headers.get("link", ""))
    return None if match is None else match[1]


async def _list_posts(
    github: GitHubClient,
    url: str,
    login: str,
    installation_id: int | None,
    wait_until: float | None,
) -> list[Post]:
    """Every post of `login` under `url`, page by page (`Link: rel="next"`). Others' posts are
    dropped as they are read. A secondary rate limit is waited out when the wait ends before
    `wait_until` (a loop.time() value; None: never waited for)."""
    posts: list[Post] = []
    next_url: str | None = url + "?per_page=100"
    ours = login.lower()
    pages = 0
    for _ in range(MAX_LIST_PAGES + MAX_RATE_LIMIT_WAITS):
        if next_url is None or pages >= MAX_LIST_PAGES:
            break
        response = await github.request("GET", next_url, installation_id=installation_id)
        if is_rate_limited(response.status, response.headers) and await _waited(
            response.headers, wait_until
        ):
            continue
        if response.status != 200:
            raise status_failure(response.status, "read the pull request's reviews")
        pages += 1
        try:
            page = [PostWire.model_validate(item) for item in _json_list(response.body)]
        except (ValueError, ValidationError):
            raise PublishFailure("GitHub returned review data that is not valid.") from None
        for item in page:
            author = None if item.user is None else item.user.login
            if author is not None and author.lower() == ours:
                posts.append(Post(author, item.body or "", item.id, item.html_url, len(posts)))
        next_url = _next_link(response.headers)
    return posts


async def _waited(headers: Any, wait_until: float | None) -> bool:
    """Sleep out a rate limit when it ends before `wait_until`; False when it does not."""
    if wait_until is None:
        return False
    wait = rate_limit_wait(headers)
    seconds = DEFAULT_RATE_LIMIT_WAIT_SECONDS if wait is None else max(wait, 1)
    if asyncio.get_running_loop().time() + seconds > wait_until:
        return False
    await asyncio.sleep(seconds)
    return True


def _json_list(body: bytes) -> list[Any]:
    document = json.loads(body)
    if not isinstance(document, list):
        raise ValueError("not a list")
    return document


async def prior_state(
    github: GitHubClient,
    ref: PullRequestRef,
    installation_id: int | None = None,
    *,
    wait_until: float | None = None,
) -> PriorState:
    """The markers of our own reviews and review comments on the pull request."""
    login = await github.login(installation_id)
    settings = github.settings
    reviews = await _list_posts(
        github, ref.api_url(settings, "/reviews"), login, installation_id, wait_until
    )
    comments = await _list_posts(
        github, ref.api_url(settings, "/comments"), login, installation_id, wait_until
    )
    state = read_markers(reviews, login, reviews=True)
    state.fingerprints |= read_markers(comments, login, reviews=False).fingerprints
    return state


@dataclass(frozen=True)
class ReReview:
    """Our last reviewed head, an ancestor of this one, and the files changed since."""

    last_head: str
    changed: tuple[str, ...]


async def re_review(
    github: GitHubClient,
    info: PullRequestInfo,
    git_dir: Path,
    head_sha: str,
    installation_id: int | None = None,
) -> ReReview | None:
    """What the first user message of a re-review names (CONTRACT 10), or None.

    None when we never reviewed this pull request, when our last reviewed head is this one or
    not an ancestor of it (a force-push), when its commit is not in the cache, or when GitHub
    fails: the review goes on as a first review, and publishing decides again.
    """
    ref = PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    try:
        state = await prior_state(github, ref, installation_id)
    except (PublishFailure, GitHubUnavailable):
        return None
    last = state.last_head
    if last is None or last == head_sha:
        return None
    return await asyncio.to_thread(_changed_since, git_dir, last, head_sha)


def _changed_since(git_dir: Path, last: str, head: str) -> ReReview | None:
    try:
        ancestor = run_git(
            git_dir, ["merge-base", "--is-ancestor", last, head], timeout=60, check=False
        )
        if ancestor.returncode != 0:
            return None
        names = run_git(
            git_dir,
            ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", last, head],
            timeout=120,
        ).stdout
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    paths = [p.decode("utf-8", "replace") for p in names.split(b"\0") if p]
    return ReReview(last, tuple(sorted(paths)))
