"""What a review needs from the forge of its change, as one interface: the forge seam
(docs/architecture.md).

loop/ speaks to a forge only through `ChangeForge`: open the change (its commits pinned in the
cache, its metadata), the preflight of publishing, what was published before (the service's
ledger, our own markers on the change), publishing, resolving our fixed threads, the check of
the merge gate and the findings the team dismissed. forge/github.py and forge/gitlab.py
implement it over github/ and gitlab/; forge/select.py picks one by the change's URL. What a
forge does not have is a method that does nothing, so the review's steps are the same on every
forge.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Collection, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol

from pr_review_api.errors import ReviewError, ServerBusy
from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.forge.checkout import unavailable_error
from pr_review_api.forge.clients import ClientT
from pr_review_api.forge.gate import GateReporter
from pr_review_api.forge.issue_references import IssueReference, closing_references, issue_server
from pr_review_api.ledger import DismissedFindings, HeadKey, PublishLedger
from pr_review_api.model import Forge, Publication, PullRequestInfo, ReviewResult, Severity
from pr_review_api.output.gate_outcome import severity_counts
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.driver import ChangePublisher, ForgeClient
from pr_review_api.publishing.markers import PriorState
from pr_review_api.publishing.placement import fingerprint_of, line_texts
from pr_review_api.publishing.re_review import re_review_of
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)


class ChangeMetadata(Protocol):
    """What the host says of a change that the review reads (untrusted `title` and `body`);
    the skip rules of .pr-review.toml read the author, the labels and the base branch."""

    @property
    def base_sha(self) -> str: ...
    @property
    def head_sha(self) -> str: ...
    @property
    def base_ref(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def labels(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class PostedHead:
    """Our review of this head, already on the change (its markers, or the ledger, say so)."""

    review_id: int | None
    url: str | None


@dataclass(frozen=True)
class PriorReview:
    """What our earlier reviews on the change say before the model is asked: this head's review
    (`posted`), or the files changed since our last reviewed head (`last_head`, `changed`)."""

    posted: PostedHead | None = None
    last_head: str | None = None
    changed: tuple[str, ...] = ()


@dataclass(frozen=True)
class IssueText:
    """An issue's title and body as its forge gave them (untrusted, not yet bounded)."""

    title: str
    body: str


@dataclass(frozen=True)
class DismissalQuery:
    """What the findings the team dismissed are asked with (specification §15): the change,
    the service's store of dismissals (None outside the service: the CLI, a CI job), the
    holder's cache of who may dismiss (None: the review keeps its own), and whether the change
    was reviewed by us before and this review has findings (outside the service, the change's
    own dismissals are read only then)."""

    info: PullRequestInfo
    dismissals: DismissedFindings | None
    permissions: PermissionCache | None
    reviewed_before: bool
    has_findings: bool


# One dismissal read on the change: (fingerprint, title, path, user).
DismissalRow = tuple[str, str, str | None, str]

# What reading a linked issue gave (specification §21): its text, a number that names a pull
# request, or nothing readable (missing, not visible to the review's identity, a failure).
IssueAnswer = IssueText | Literal["pull_request", "unreadable"]


class ChangeForge(ABC):
    """One forge, speaking as the review's identity (its client)."""

    name: Forge

    @property
    def unavailable(self) -> type[ReviewError]:
        """The error a failure of this forge (or of git reading what was fetched from it) is."""
        return unavailable_error(self.name)

    @abstractmethod
    def open_change(self, url: str) -> AbstractAsyncContextManager[PreparedChange]:
        """Parse the URL, read the metadata, fetch and pin both commits until exit."""

    @abstractmethod
    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        """The merge gate's mark on the head (specification §16), or None: the forge has none."""

    @abstractmethod
    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        """Fail before the model is asked when publishing cannot succeed (no or refused token)."""

    @abstractmethod
    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        """The review the service already published of this head, from its ledger."""

    @abstractmethod
    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        """What our reviews on the change say (one read of them); empty when it fails."""

    async def posted_counts(
        self, info: PullRequestInfo, review_id: int | None
    ) -> Counter[Severity] | None:
        """The counts by severity our posted review's body states, or None (unknown)."""
        body = await self.posted_body(info, review_id)
        return None if body is None else severity_counts(body)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        """Our posted review's body (its custom checks are read back from it, specification §20), or
        None: unknown (a forge that cannot read it back says None, and the gate fails closed
        on its `error` checks)."""
        return None

    @abstractmethod
    def dismissals_key(self, info: PullRequestInfo) -> str:
        """The key under which the repository's dismissed findings are stored."""

    async def dismissed_titles(
        self, info: PullRequestInfo, paths: list[str], dismissals: DismissedFindings
    ) -> tuple[str, ...] | None:
        """The titles the team dismissed in these files, or None: none to name."""
        try:
            return tuple(await dismissals.titles(self.dismissals_key(info), paths))
        except ServerBusy:
            return None

    async def dismissed(self, asked: DismissalQuery) -> Collection[str]:
        """The fingerprints dismissed in the repository, after storing the change's new
        dismissals; outside the service, what the change itself says, read only when our
        earlier review may have been dismissed and there is something to suppress."""
        permissions = asked.permissions or PermissionCache()
        if asked.dismissals is None:
            if not asked.reviewed_before or not asked.has_findings:
                return set()  # no earlier review of ours to dismiss, or nothing to suppress
            return await self.dismissed_on_change(asked.info, permissions)
        found = await self.found_dismissals(asked.info, permissions)
        return await self.store_dismissals(asked.dismissals, self.dismissals_key(asked.info), found)

    @abstractmethod
    async def dismissed_on_change(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> Collection[str]:
        """The fingerprints the change itself dismisses (no store: the CLI, a CI job); none
        when the forge fails."""

    @abstractmethod
    async def found_dismissals(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> list[DismissalRow]:
        """The dismissals on the change's threads of our findings by users who may dismiss;
        none when the forge fails (they are read again at the next review)."""

    @abstractmethod
    def publisher(self) -> tuple[ChangePublisher[Any, Any], ForgeClient]:
        """The forge's publishing and the client it publishes with."""

    async def publish(
        self,
        result: ReviewResult,
        git_dir: Path,
        *,
        deadline: float,
        ledger: PublishLedger | None,
        metrics: Metrics | None,
        force: bool,
        dismissed: Collection[str],
    ) -> Publication | None:
        """Publish the review on the change; what happened."""
        publisher, client = self.publisher()
        return await publisher.finished(
            result,
            client,
            git_dir,
            deadline=deadline,
            ledger=ledger,
            metrics=metrics,
            force=force,
            dismissed=dismissed,
        )

    @abstractmethod
    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        """After publishing a re-review, resolve the threads of ours the new head fixed: how
        many, or None when the forge resolves none."""

    def closing_references(self, description: str, settings: Settings) -> list[IssueReference]:
        """The issues `description` says the change closes, in this forge's syntax, an issue URL
        being one on this forge's server (specification §21)."""
        return closing_references(description, self.name, issue_server(self.name, settings))

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        """The issue `number` of `project` (`owner/repo`, or GitLab's full path) on this forge,
        read with the review's identity (specification §21); a forge that reads none:
        "unreadable"."""
        del project, number
        return "unreadable"

    @staticmethod
    def issue_answer(read: tuple[str, str] | Literal["pull_request", "unreadable"]) -> IssueAnswer:
        """A forge's reading of an issue (its title and body, or why none): the answer."""
        return read if isinstance(read, str) else IssueText(*read)

    @staticmethod
    async def recorded_head(ledger: PublishLedger, key: HeadKey) -> PostedHead | None:
        """The review the ledger says was published of this head; None when it says none or
        cannot be read (publishing reads our markers again, and decides)."""
        try:
            recorded = await ledger.find(key)
        except ServerBusy:
            logger.warning("the ledger of published reviews could not be read")
            return None
        return None if recorded is None else PostedHead(recorded.review_id, recorded.url)

    @staticmethod
    async def prior_of(
        state: PriorState, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        """What our markers on the change (`state`) say of this head: its review, unless `force`
        asks again, else the files changed since our last reviewed head."""
        done = state.review_of(head_sha)
        if done is not None and not force:
            return PriorReview(posted=PostedHead(*done))
        found = await re_review_of(state, git_dir, head_sha)
        if found is None:
            return PriorReview()
        return PriorReview(last_head=found.last_head, changed=found.changed)

    @staticmethod
    async def store_dismissals(
        dismissals: DismissedFindings, key: str, found: Iterable[DismissalRow]
    ) -> Collection[str]:
        """Store each dismissal found on the change (fingerprint, title, path, user) under `key`,
        and give every fingerprint dismissed there; none when the store cannot be reached (the
        review is paid for: it is published, dismissals or not)."""
        try:
            for fingerprint, title, path, user in found:
                await dismissals.dismiss(key, fingerprint, title, path, user)
            return await dismissals.fingerprints(key)
        except ServerBusy:
            logger.warning("the dismissed findings could not be read")
            return set()

    @staticmethod
    async def reported_fingerprints(result: ReviewResult, git_dir: Path) -> set[str]:
        """The fingerprints of the review's findings on its head (what it still reports)."""
        head, findings = result.revisions.head_sha, result.review.findings
        texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
        return {fingerprint_of(f, texts) for f in findings}


class ChangeOpening(Protocol):
    """A forge's opening of a change: the URL parsed, metadata read, both commits pinned."""

    def __call__(
        self, url: str, settings: Settings, client: Any, /
    ) -> AbstractAsyncContextManager[PreparedChange]: ...


class ClientForge(ChangeForge, Generic[ClientT]):
    """A forge speaking through its API client of the review's identity, publishing with its
    own `publishing` (its words, limits and requests)."""

    publishing: ClassVar[ChangePublisher[Any, Any]]
    opener: ClassVar[ChangeOpening]  # the forge's own opening of a change

    def __init__(self, settings: Settings, client: ClientT) -> None:
        self.settings = settings
        self.client = client

    def open_change(self, url: str) -> AbstractAsyncContextManager[PreparedChange]:
        return type(self).opener(url, self.settings, self.client)

    def publisher(self) -> tuple[ChangePublisher[Any, Any], ForgeClient]:
        return self.publishing, self.client
