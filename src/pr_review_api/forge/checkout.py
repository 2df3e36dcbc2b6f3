"""A change's two commits, pinned in the repository cache by the forge its URL names.

`open_change` is what the review's workspace calls: a merge request's URL (its shape,
`forge/urls.py`) goes to gitlab/checkout.py, any other URL to github/checkout.py exactly as
before. Both yield the same `PreparedPullRequest`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pr_review_api.errors import GitHubUnavailable, GitLabUnavailable, ReviewError
from pr_review_api.github.checkout import PreparedPullRequest, open_pull_request
from pr_review_api.github.client import GitHubClient
from pr_review_api.gitlab.checkout import open_merge_request
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import is_merge_request_url
from pr_review_api.model import Forge
from pr_review_api.settings import Settings


def unavailable_error(forge: Forge) -> type[ReviewError]:
    """The error a forge's failure is (`github_unavailable`, `gitlab_unavailable`: 502)."""
    return GitLabUnavailable if forge == "gitlab" else GitHubUnavailable


@asynccontextmanager
async def open_change(
    url: str,
    settings: Settings,
    github: GitHubClient | None = None,
    gitlab: GitLabClient | None = None,
) -> AsyncIterator[PreparedPullRequest]:
    """Parse the URL, read the metadata, fetch and pin both commits; hold them until exit.

    `github` and `gitlab` are the clients of the review's identity on each forge (None: a
    short-lived one with the settings' token); only the URL's forge's is used.
    """
    if is_merge_request_url(url):
        async with open_merge_request(url, settings, gitlab) as prepared:
            yield prepared
    else:
        async with open_pull_request(url, settings, github) as prepared:
            yield prepared
