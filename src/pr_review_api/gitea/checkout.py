"""A Gitea pull request's commits, fetched into the shared repository cache (specification §19).

`open_pull_request` is the Gitea twin of gitlab/checkout.py's `open_merge_request`: parse the
URL, read the metadata (gitea/metadata.py), then fetch `refs/pull/<index>/head` and the base
branch into the same hardened cache (`RepositoryCache.prepare_remote`) with the client's token
as basic credentials scoped to the server's origin (gitea/git_http.py), and hold both commits
until the context exits. The cache key hashes the forge, the server and the lower-cased
repository path (Gitea looks names up in lower case), so a Gitea repository never shares an
entry with another forge's.
"""

from __future__ import annotations

from typing import Final

from pydantic import SecretStr

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.fetch.cache import ChangeOpener
from pr_review_api.fetch.remote import ForgeWords, Remote
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.git_http import fetch_config
from pr_review_api.gitea.metadata import fetch_pull_request
from pr_review_api.gitea.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.settings import Settings

GITEA_WORDS: Final = ForgeWords("Gitea", "pull request", GiteaUnavailable)


def pull_request_remote(ref: PullRequestRef, settings: Settings, token: SecretStr | None) -> Remote:
    """Where the pull request's commits come from, fetched with `token` (None: anonymous)."""
    key_text = f"gitea\0{ref.server_url.lower()}\0{ref.repo_path.lower()}"
    return Remote(
        key_text=key_text,
        git_url=ref.git_url,
        head_ref=ref.head_ref,
        local_head_ref=f"refs/pr-review/pull/{ref.number}",
        config=fetch_config(settings, token),
        words=GITEA_WORDS,
        label=f"{ref.repo_path}#{ref.number}",
    )


# Opening a Gitea pull request: `open_pull_request(url, settings, gitea=None)`.
OPENER: ChangeOpener[PullRequestRef, GiteaClient] = ChangeOpener(
    parse_pull_request_url, GiteaClient, fetch_pull_request, pull_request_remote
)
open_pull_request = OPENER.open
