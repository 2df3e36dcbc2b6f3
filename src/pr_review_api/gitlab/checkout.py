"""A merge request's two commits, fetched into the shared repository cache (specification §17).

`open_merge_request` is the GitLab twin of github/checkout.py's `open_pull_request`: parse the
URL, read the metadata (gitlab/metadata.py), then fetch `refs/merge-requests/<iid>/head` and the
target branch into the same hardened cache (`RepositoryCache.prepare_remote`) with the client's
token as `oauth2` credentials (gitlab/git_http.py), and hold both commits until the context
exits. The cache key hashes the forge, the server and the lower-cased project path (GitLab's
paths are case-insensitive), so a GitLab project never shares an entry with a GitHub
repository.
"""

from __future__ import annotations

from typing import Final

from pydantic import SecretStr

from pr_review_api.errors import GitLabUnavailable
from pr_review_api.fetch.cache import ChangeOpener
from pr_review_api.fetch.remote import ForgeWords, Remote
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.git_http import fetch_config
from pr_review_api.gitlab.metadata import fetch_merge_request
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.settings import Settings

GITLAB_WORDS: Final = ForgeWords("GitLab", "merge request", GitLabUnavailable)


def merge_request_remote(
    ref: MergeRequestRef, settings: Settings, token: SecretStr | None
) -> Remote:
    """Where the merge request's commits come from, fetched with `token` (None: anonymous)."""
    key_text = f"gitlab\0{settings.gitlab_server_url.lower()}\0{ref.project_path.lower()}"
    return Remote(
        key_text=key_text,
        git_url=ref.git_url(settings),
        head_ref=f"refs/merge-requests/{ref.number}/head",
        local_head_ref=f"refs/pr-review/merge-requests/{ref.number}",
        config=fetch_config(settings, token),
        words=GITLAB_WORDS,
        label=f"{ref.project_path}!{ref.number}",
    )


# Opening a merge request: `open_merge_request(url, settings, gitlab=None)`.
OPENER: ChangeOpener[MergeRequestRef, GitLabClient] = ChangeOpener(
    parse_merge_request_url, GitLabClient, fetch_merge_request, merge_request_remote
)
open_merge_request = OPENER.open
