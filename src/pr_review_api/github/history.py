"""What our own earlier posts on a pull request say: markers by the publishing identity, and
the files changed since our last reviewed head for a re-review's first message (specification §10).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient, is_rate_limited, rate_limit_wait
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.http.api_client import rate_limit_pause
from pr_review_api.http.body import bounded_decimal
from pr_review_api.model import (
    PullRequestInfo,
)
from pr_review_api.publishing.failures import PublishFailure, PublishWords, status_failure
from pr_review_api.publishing.markers import (
    Post,
    PriorState,
    marked_heads,
    read_markers,
)
from pr_review_api.publishing.re_review import ReReview, re_review_of

logger = logging.getLogger(__name__)

# Pages read per listing (100 posts each), newest first: our own posts are found among the
# newest whatever others posted before them; the budget bounds what a flood after them costs.
MAX_LIST_PAGES = 30
MAX_RATE_LIMIT_WAITS = 3
MAX_PAGE_NUMBER = 10**7
PAGE_SLOTS = 1000  # more than any page holds: orders posts by page, then place
_LINK = re.compile(r'<([^<>\s]+)>\s*;\s*rel="?([a-z]+)"?')


GITHUB_PUBLISH = PublishWords("GitHub", "pull request", "write access to pull requests")


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str | None = None


class PostWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    user: _UserWire | None = None
    body: str | None = None
    html_url: str | None = None
    # A review comment's anchor (absent from reviews).
    path: str | None = None
    line: int | None = None
    original_line: int | None = None
    in_reply_to_id: int | None = None


def _links(headers: Any) -> dict[str, str]:
    """`Link: <url>; rel="next", <url>; rel="last"` as {rel: url}."""
    return {rel: url for url, rel in _LINK.findall(headers.get("link", ""))}


def _page_number(url: str) -> int | None:
    try:
        value = httpx.URL(url).params.get("page")
    except httpx.InvalidURL:
        return None
    return None if value is None else bounded_decimal(value, MAX_PAGE_NUMBER)


@dataclass
class Listing:
    """Our posts under one listing, oldest first, and whether nothing of it went unread."""

    posts: list[Post]
    complete: bool


class _Walk:
    """One listing read newest first: page 1 (for `Link: rel="last"`), then the last page and
    back through `rel="prev"`, at most `MAX_LIST_PAGES` pages. Others' posts are dropped as
    they are read; `stop` ends the walk at the first post of ours it accepts."""

    def __init__(
        self,
        github: GitHubClient,
        login: str,
        wait_until: float | None,
        stop: Callable[[Post], bool] | None,
    ) -> None:
        self.github = github
        self.ours = login.lower()
        self.wait_until = wait_until
        self.stop = stop
        self.kept: list[Post] = []
        self.pages = 0

    async def run(self, url: str) -> Listing:
        first, links = await self._page(url + "?per_page=100")
        found = self._keep(first)
        previous = links.get("last")
        if previous is None and "next" in links:
            raise PublishFailure("GitHub's listing of the pull request named no last page.")
        while not found and previous is not None and _page_number(previous) != 1:
            if self.pages >= MAX_LIST_PAGES:
                return self._listing(complete=False)
            page, links = await self._page(previous)
            found = self._keep(page)
            previous = links.get("prev")
        return self._listing(complete=True)

    def _listing(self, *, complete: bool) -> Listing:
        posts = sorted(self.kept, key=lambda post: post.order)  # oldest first
        return Listing(posts, complete)

    def _keep(self, page: list[PostWire]) -> bool:
        """Keep our posts of the page (numbered by page and position); True when `stop` says
        one of them ends the walk."""
        found = False
        for index, item in enumerate(page):
            author = None if item.user is None else item.user.login
            if author is None or author.lower() != self.ours:
                continue
            # Page 1 (read first) is the oldest; then each page read is older than the last.
            rank = 0 if self.pages == 1 else MAX_LIST_PAGES + 2 - self.pages
            order = rank * PAGE_SLOTS + min(index, PAGE_SLOTS - 1)
            # GitHub's `line` is null once the comment's line changed: then where it was posted.
            line = item.line if item.line is not None else item.original_line
            post = Post(
                author,
                item.body or "",
                item.id,
                item.html_url,
                order,
                path=item.path,
                line=line,
                reply=item.in_reply_to_id is not None,
            )
            self.kept.append(post)
            found = found or (self.stop is not None and self.stop(post))
        return found

    async def _page(self, url: str) -> tuple[list[PostWire], dict[str, str]]:
        for _ in range(MAX_RATE_LIMIT_WAITS + 1):
            response = await self.github.request("GET", url)
            if is_rate_limited(response.status, response.headers) and await _waited(
                response.headers, self.wait_until
            ):
                continue
            if response.status != 200:
                raise status_failure(
                    response.status, "read the pull request's reviews", GITHUB_PUBLISH
                )
            self.pages += 1
            try:
                page = [PostWire.model_validate(item) for item in _json_list(response.body)]
            except (ValueError, ValidationError):
                raise PublishFailure("GitHub returned review data that is not valid.") from None
            return page, _links(response.headers)
        raise PublishFailure("GitHub kept answering with its rate limit.")


async def _waited(headers: Any, wait_until: float | None) -> bool:
    """Sleep out a rate limit when it ends before `wait_until`; False when it does not."""
    if wait_until is None:
        return False
    seconds = rate_limit_pause(rate_limit_wait(headers), wait_until)
    if seconds is None:
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
    *,
    wait_until: float | None = None,
    head_sha: str | None = None,
) -> PriorState:
    """The markers of our own reviews and review comments on the pull request.

    Both listings are read newest first; the reviews' walk ends at our review of `head_sha`.
    `complete` is False when the reviews' budget ran out first: then our review of this head
    may lie in the pages not read, and only the caller knows whether that may be risked.
    Review comments carry only finding markers; a budget that runs out there can only let a
    finding of ours be posted again on a new head, never a second review of one head.
    """
    login = await github.login()
    settings = github.settings

    def is_this_head(post: Post) -> bool:
        return head_sha is not None and head_sha in marked_heads(post.body)

    reviews = await _Walk(github, login, wait_until, is_this_head).run(
        str(ref.api_url(settings, "/reviews"))
    )
    comments = await _Walk(github, login, wait_until, None).run(
        str(ref.api_url(settings, "/comments"))
    )
    state = read_markers(reviews.posts, login, reviews=True)
    commented = read_markers(comments.posts, login, reviews=False)
    state.fingerprints |= commented.fingerprints
    state.finding_comments = commented.finding_comments
    state.complete = reviews.complete
    if not comments.complete:
        logger.info("the pull request's review comments outran the listing budget")
    return state


async def re_review(
    github: GitHubClient,
    info: PullRequestInfo,
    git_dir: Path,
    head_sha: str,
) -> ReReview | None:
    """What the first user message of a re-review names (specification §10), or None.

    None when we never reviewed this pull request, when our last reviewed head is this one or
    not an ancestor of it (a force-push), when its commit is not in the cache, or when GitHub
    fails: the review goes on as a first review, and publishing decides again.
    """
    ref = PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    try:
        state = await prior_state(github, ref, head_sha=head_sha)
    except (PublishFailure, GitHubUnavailable):
        return None
    return await re_review_of(state, git_dir, head_sha)
