"""What the repository cache fetches a change from: a forge-neutral `Remote`, and its words.

The cache (fetch/cache.py) fetches any forge's change through a `Remote`: the text its
cache key hashes, the git URL, the server's ref holding the head, the fetch's git configuration
(the token only in its secret) and the `ForgeWords` its failures are told in, so a merge
request's failure says "GitLab" and is `gitlab_unavailable` where a pull request's says
"GitHub" and is `github_unavailable`, from the same sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from pr_review_api.errors import ReviewError
from pr_review_api.git_runner import GitConfig

# A failure's sentence names the change and its forge ({change}, {forge}; see `ForgeWords`).
HEAD_MOVED_TEMPLATE = "The {change}'s head moved while fetching; retry the review."
BASE_MISSING_TEMPLATE = (
    "The {change}'s base commit is no longer on its base branch; retry the review."
)
FETCH_FAILED_TEMPLATE = "Fetching the {change}'s commits from {forge} failed."
FETCH_TIMEOUT_TEMPLATE = "Fetching the {change}'s commits from {forge} did not finish in time."
INVALID_METADATA_TEMPLATE = "{forge} returned {change} data that is not valid."
CACHE_BUSY = "Another review is still fetching this repository; try again shortly."
CACHE_BROKEN = "The repository cache could not be prepared."


@dataclass(frozen=True)
class ForgeWords:
    """How a forge's fetch failures are told: its name, what it calls a change, its error."""

    forge: str
    change: str
    error: type[ReviewError]

    def failure(self, sentence: str) -> ReviewError:
        """The forge's error with `sentence` (a template of this module, or a fixed one)."""
        return self.error(sentence.format(forge=self.forge, change=self.change))


@dataclass(frozen=True)
class Remote:
    """Where one change's two commits are fetched from, as its forge says."""

    key_text: str  # hashed into the repository's cache key: no part of it becomes a path
    git_url: str
    head_ref: str  # the server's ref holding the head: refs/pull/N/head
    local_head_ref: str  # where the fetch keeps it in the cache: refs/pr-review/pull/N
    config: GitConfig  # the fetch's git configuration (the token only in its secret)
    words: ForgeWords
    label: str  # for the log: owner/repo#N, never a URL


class CacheFailure(Exception):
    """A failure inside the cache, told in the remote's words by `prepare_remote`."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence
