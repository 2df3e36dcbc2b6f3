"""What loop/ needs of the repository cache and of a forge's failure, named without a forge.

`unavailable_error` is the error a forge's failure (or git reading what was fetched from it)
is; `cache_trimmer` is what a search-index build calls first to make room in the cache of
fetched changes (fetch/cache.py's `RepositoryCache`, shared by every forge).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pr_review_api.errors import GiteaUnavailable, GitHubUnavailable, GitLabUnavailable, ReviewError
from pr_review_api.fetch.cache import RepositoryCache
from pr_review_api.model import Forge
from pr_review_api.settings import Settings


def unavailable_error(forge: Forge) -> type[ReviewError]:
    """The error a forge's failure is (`github_unavailable`, `gitlab_unavailable`,
    `gitea_unavailable`: 502)."""
    if forge == "gitea":
        return GiteaUnavailable
    return GitLabUnavailable if forge == "gitlab" else GitHubUnavailable


def cache_trimmer(settings: Settings) -> Callable[[Path], None]:
    """What a search-index build calls first: the repository cache trimmed to make room."""
    return RepositoryCache(settings).trim_for_index
