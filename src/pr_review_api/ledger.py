"""What a service remembers of the reviews it published, one record per head (specification §10),
and the findings its repositories dismissed (specification §15): forge-neutral, so every forge's
publishing (github/publish.py, gitlab/publish.py), forge/ and jobs/ name them from here.

A forge's markers say which heads we reviewed, but only a listing of the change can read
them, and others' posts are in that listing too. The service keeps its own record: when a
review of a head is published, `record` stores it (review id, URL, the finding fingerprints
it carried, the review document); a later job of the same head finds it with `find` before
asking the model anything, and a re-review of a new head adds `fingerprints` to the ones read
from the forge. The CLI has no ledger and relies on the markers alone.

Records are per change (a pull or merge request), publishing identity (a different App or
account has its own markers) and head. They hold no token: the review document carries none
(specification §5).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol

from pr_review_api.model import Publication, PullRequestInfo, ReviewResult


class NumberedChange(Protocol):
    """A pull request's reference (github/urls.py's `PullRequestRef`), as `HeadKey.of` reads it."""

    @property
    def owner(self) -> str: ...
    @property
    def repo(self) -> str: ...
    @property
    def number(self) -> int: ...


@dataclass(frozen=True)
class HeadKey:
    """A head of a pull request as reviewed by one publishing identity."""

    pull_request: str  # "owner/repo#number", lower case: GitHub names are case-insensitive
    identity: str  # the publishing identity's login, lower case
    head_sha: str

    @classmethod
    def of(cls, ref: NumberedChange, identity: str, head_sha: str) -> HeadKey:
        return cls(f"{ref.owner}/{ref.repo}#{ref.number}".lower(), identity.lower(), head_sha)


@dataclass(frozen=True)
class PublishedHead:
    """A review we published: where it is, and the review document it was made from."""

    review_id: int | None
    url: str | None
    result: dict[str, Any]

    def already_published(self) -> ReviewResult:
        """The review document again, its publication `already_published`."""
        result = ReviewResult.model_validate(self.result)
        result.publication = Publication(
            status="already_published", review_id=self.review_id, url=self.url
        )
        return result


class PublishLedger(Protocol):
    """The service's record of what it published (see the module docstring)."""

    async def find(self, key: HeadKey) -> PublishedHead | None:
        """Our publication of this head, or None."""

    async def fingerprints(self, key: HeadKey) -> set[str]:
        """The fingerprints of every finding we published on the pull request (any head)."""

    async def record(
        self,
        key: HeadKey,
        publication: Publication,
        fingerprints: Collection[str],
        result: ReviewResult,
    ) -> None:
        """Remember a publication that GitHub just accepted; never raises for a database
        failure (the review is on GitHub whatever happens here)."""


class DismissedFindings(Protocol):
    """The findings a repository dismissed (specification §15; the service's
    `jobs/dismissals.py`)."""

    async def fingerprints(self, repository: str) -> set[str]:
        """The dismissed fingerprints of "owner/repo" (any case)."""

    async def titles(self, repository: str, paths: Collection[str]) -> list[str]:
        """The titles of the repository's dismissed findings in `paths`."""

    async def dismiss(
        self, repository: str, fingerprint: str, title: str, path: str | None, by: str
    ) -> None:
        """Store a dismissal (a `-1` reaction read at a review); one already there stays."""


def repository_key(info: PullRequestInfo) -> str:
    """A change's repository as the service's tables key it (dismissals, learnings): GitHub's
    `owner/repo`, another forge's `<forge>:<namespace>/<project>`, lower case (names are
    case-insensitive), so two forges' repositories never share a key."""
    name = f"{info.owner}/{info.repo}"
    return (name if info.forge == "github" else f"{info.forge}:{name}").lower()


class Learnings(Protocol):
    """What writers taught the reviewer of a repository (specification §20; jobs/learnings.py)."""

    async def given(self, repository: str) -> list[tuple[int, str]]:
        """The repository's newest learnings, (id, text), newest first."""
