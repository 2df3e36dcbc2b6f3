"""A GitHub pull request's two commits, fetched into the repository cache (fetch/cache.py).

`open_pull_request` is the entry point a review uses: parse the URL, read the metadata, then
fetch and pin the two commits under the repository's locks, as the GitHub client's identity
(its credentials' token; `github/credentials.py`). The repository stays protected from
eviction until the context exits. GitHub's names are case-insensitive: the cache key lower-cases
the owner and the repository.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from pydantic import SecretStr

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.fetch.cache import PreparedChange, RepositoryCache, pinned_change
from pr_review_api.fetch.files import Lease
from pr_review_api.fetch.metadata import PullRequestMetadata
from pr_review_api.fetch.remote import (
    BASE_MISSING_TEMPLATE,
    FETCH_FAILED_TEMPLATE,
    FETCH_TIMEOUT_TEMPLATE,
    HEAD_MOVED_TEMPLATE,
    INVALID_METADATA_TEMPLATE,
    ForgeWords,
    Remote,
)
from pr_review_api.github.client import GitHubClient, fetch_metadata
from pr_review_api.github.credentials import credentials_for
from pr_review_api.github.git_http import fetch_config
from pr_review_api.github.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.settings import Settings

GITHUB_WORDS: Final = ForgeWords("GitHub", "pull request", GitHubUnavailable)

HEAD_MOVED = GITHUB_WORDS.failure(HEAD_MOVED_TEMPLATE).message
BASE_MISSING = GITHUB_WORDS.failure(BASE_MISSING_TEMPLATE).message
FETCH_FAILED = GITHUB_WORDS.failure(FETCH_FAILED_TEMPLATE).message
FETCH_TIMEOUT = GITHUB_WORDS.failure(FETCH_TIMEOUT_TEMPLATE).message
INVALID_METADATA = GITHUB_WORDS.failure(INVALID_METADATA_TEMPLATE).message


class GitHubCache(RepositoryCache):
    """The repository cache, addressed by GitHub pull requests."""

    def key(self, ref: PullRequestRef) -> str:
        """The cache key of the pull request's repository: a hash, never a path from the URL."""
        return self.key_of(self.github_key_text(ref))

    def github_key_text(self, ref: PullRequestRef) -> str:
        # GitHub's names are case-insensitive: one repository, one cache entry.
        return f"{self.settings.github_server_url.lower()}\0{ref.owner.lower()}\0{ref.repo.lower()}"

    def remote(self, ref: PullRequestRef, token: SecretStr | None) -> Remote:
        """A GitHub pull request's remote, fetched with `token` (None: anonymous)."""
        return Remote(
            key_text=self.github_key_text(ref),
            git_url=ref.git_url(self.settings),
            head_ref=f"refs/pull/{ref.number}/head",
            local_head_ref=f"refs/pr-review/pull/{ref.number}",
            config=fetch_config(self.settings, token),
            words=GITHUB_WORDS,
            label=f"{ref.owner}/{ref.repo}#{ref.number}",
        )

    def repository(self, ref: PullRequestRef) -> Path:
        """The folder holding the repository's bare git directory (`git/`)."""
        return self.layout.repository(self.key(ref))

    def prepare(
        self, ref: PullRequestRef, metadata: PullRequestMetadata, *, token: SecretStr | None
    ) -> Lease:
        """Hold the repository shared, make sure both pinned commits are in it (fetched with
        `token`, None: anonymous), return the hold."""
        return self.prepare_remote(self.remote(ref, token), metadata)


@asynccontextmanager
async def open_pull_request(
    url: str, settings: Settings, github: GitHubClient | None = None
) -> AsyncIterator[PreparedChange]:
    """Parse the URL, read the metadata, fetch and pin both commits; hold them until exit.

    `github` is the API client of the review's identity (None: a short-lived one with the
    settings' token); the fetch uses the same identity's token.
    """
    ref = parse_pull_request_url(url, settings)
    metadata = await fetch_metadata(ref, settings, github)
    credentials = credentials_for(settings) if github is None else github.credentials
    prepare = functools.partial(
        GitHubCache(settings).prepare, ref, metadata, token=await credentials.token()
    )
    async with pinned_change(prepare, ref.info, metadata) as prepared:
        yield prepared
