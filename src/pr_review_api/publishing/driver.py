"""The one publication driver of every forge (specification §10): what a publication does in the
same order whatever the forge, with the forge's own steps (`ForgeSteps`) in between.

1. Within the review's deadline (less a margin), the service's ledger (`ledger.py`) of
   this head answers first; a ledger that cannot be read is done without, as in the CLI.
2. Then the forge's listing of our earlier posts (`ForgeSteps.prior_state`): a post of ours
   that carries this head's marker means nothing is posted (`already_published`, unless
   `force`). A listing that outran its budget without that marker publishes nothing when no
   ledger knows better: our post of this head may lie in the pages not read.
3. The findings are read off the repository once (`read_findings`): the ones the repository
   dismissed are left out (`suppressed`), the others fingerprinted, with the diff's hunks and
   the head's text each suggestion replaces.
4. The forge posts them (`ForgeSteps.post`); the ledger records the publication and the
   fingerprints it carried.

A failure ends `failed` with a fixed sentence, never an exception: the review itself is
returned by the caller whatever happens here. GitHub's steps are in `github/publish.py`,
GitLab's in `gitlab/publish.py`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pr_review_api.errors import ReviewError, ServerBusy
from pr_review_api.git.hunks import FileHunks, diff_hunks
from pr_review_api.ledger import HeadKey, PublishLedger
from pr_review_api.model import (
    Finding,
    Forge,
    Publication,
    PublicationError,
    PublishFailedCode,
    PullRequestInfo,
    ReviewResult,
)
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.markers import PriorState
from pr_review_api.publishing.placement import (
    Placement,
    fingerprint_of,
    line_texts,
    place,
    suggestion_texts,
)
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)

DEADLINE_MARGIN_SECONDS = 0.5


class ForgeClient(Protocol):
    """A forge's API client, as publishing sees it: the settings it was made with."""

    @property
    def settings(self) -> Settings: ...


C = TypeVar("C", bound=ForgeClient)
R = TypeVar("R")


@dataclass(frozen=True)
class Findings:
    """The review's findings to publish, read off the repository once."""

    findings: list[Finding]  # those the repository did not dismiss, in the review's order
    fingerprints: list[str]  # one a finding
    hunks: dict[str, FileHunks]  # the diff's, from the merge base to the head, by path
    replaced: dict[str, list[str]]  # the head's lines each suggestion replaces (placement)
    suppressed: int  # how many findings the repository dismissed

    def placed(self, already: set[str], max_inline: int) -> Placement:
        """Where each finding not `already` posted goes (`place`): inline, or in the body."""
        return place(
            self.findings, self.hunks, self.fingerprints, already, max_inline, texts=self.replaced
        )


@dataclass(frozen=True)
class PostRequest:
    """What a forge's `ForgeSteps.post` posts: the review, what our earlier posts say, the
    fingerprints already posted (theirs and the ledger's), the findings, and the deadline."""

    result: ReviewResult
    state: PriorState
    posted: set[str]
    findings: Findings
    deadline: float

    def placed(self, max_inline: int, matched: Collection[str] = ()) -> Placement:
        """Where each finding neither posted nor `matched` (an open thread of ours stands
        for it) goes."""
        return self.findings.placed(self.posted | set(matched), max_inline)


class ForgeSteps(ABC, Generic[R, C]):
    """What one forge does in a publication on the change `ref` through `client`, at most
    `max_inline` findings inline; `publish_with` does the rest, in one order."""

    # The forge's errors that end a publication `failed` with their own sentence.
    errors: tuple[type[ReviewError], ...]
    # The code of a failed publication's `error` on this forge.
    failed_code: PublishFailedCode
    # What the change and our posts on it are called, and how many pages of them are read:
    # ("pull request", "reviews", 30).
    listing: tuple[str, str, int]

    @property
    def too_many_posts(self) -> str:
        """Why nothing was published when the listing outran its budget."""
        change, posts, pages = self.listing
        return (
            f"The {change} has more {posts} than the {pages} pages read; nothing was "
            "published, so that no head is reviewed twice."
        )

    def __init__(self, ref: R, client: C, max_inline: int) -> None:
        self.ref = ref
        self.client = client
        self.max_inline = max_inline

    @abstractmethod
    async def key(self, head_sha: str) -> HeadKey:
        """The ledger's key of this head, under the publishing identity."""

    @abstractmethod
    async def prior_state(self, head_sha: str, wait_until: float) -> PriorState:
        """What our earlier posts say; rate limits waited out until `wait_until` at most."""

    @abstractmethod
    async def post(self, request: PostRequest) -> tuple[Publication, list[str]]:
        """Post the findings not in `request.posted`: the publication, and the fingerprints
        it carries for the ledger."""


async def publish_with(
    steps: ForgeSteps[Any, Any],
    result: ReviewResult,
    git_dir: Path,
    *,
    deadline: float,
    ledger: PublishLedger | None,
    force: bool,
    dismissed: Collection[str],
) -> Publication:
    """Publish `result` with the forge's `steps`; never raises for a forge's failure."""
    try:
        async with asyncio.timeout_at(deadline - DEADLINE_MARGIN_SECONDS):
            return await _publish(steps, result, git_dir, deadline, ledger, force, dismissed)
    except PublishFailure as failure:
        message = failure.message
    except steps.errors as exc:
        message = exc.message
    except TimeoutError:
        message = "Publishing did not finish before the review's deadline."
    logger.info("publishing the review failed: %s", message)
    error = PublicationError(code=steps.failed_code, message=message)
    return Publication(status="failed", error=error)


async def publish_finished(
    result: ReviewResult,
    forge: Forge,
    publish_on: Callable[[PullRequestInfo], Awaitable[Publication]],
    metrics: Metrics | None,
) -> Publication | None:
    """A finished review published on its change by its forge's `publish_on`; None when there
    is nothing to publish (a local review, another forge's change, or no final review from the
    model). `metrics` counts each outcome, on every forge alike."""
    info = result.pull_request
    if info is None or info.forge != forge or result.termination_reason != "final_review":
        return None
    publication = await publish_on(info)
    if metrics is not None:
        metrics.publication(publication.status)
    return publication


class ChangePublisher(Generic[C, R]):
    """A forge's publishing, made of its steps (`steps(ref, client, max_inline)`) and how a
    change's reference is made from the review's (`ref_of(info, settings)`): `one` publishes on
    one change, `finished` a finished review on its change."""

    def __init__(
        self,
        forge: Forge,
        steps: Callable[[R, C, int], ForgeSteps[R, C]],
        ref_of: Callable[[PullRequestInfo, Settings], R],
    ) -> None:
        self.forge = forge
        self._steps = steps
        self._ref_of = ref_of

    async def one(  # noqa: PLR0913  (what one publication needs: the review, where, how, and what the repository dismissed)
        self,
        result: ReviewResult,
        ref: R,
        client: C,
        git_dir: Path,
        *,
        deadline: float,
        max_inline: int,
        ledger: PublishLedger | None = None,
        force: bool = False,
        dismissed: Collection[str] = frozenset(),
    ) -> Publication:
        """Publish `result` on the change `ref`; never raises for the forge's failure.

        A finding whose fingerprint the repository dismissed (`dismissed`, specification §15)
        is not posted; `suppressed` counts them. With a `ledger` (the service), its record of
        this head answers first, and a publication is recorded there as soon as the forge
        accepts it. `force` (the `review` command) posts even when this head is published
        already; the fingerprints already posted are still skipped."""
        steps = self._steps(ref, client, max_inline)
        return await publish_with(
            steps,
            result,
            git_dir,
            deadline=deadline,
            ledger=ledger,
            force=force,
            dismissed=dismissed,
        )

    async def finished(  # noqa: PLR0913  (as `one`)
        self,
        result: ReviewResult,
        client: C,
        git_dir: Path,
        *,
        deadline: float,
        ledger: PublishLedger | None = None,
        metrics: Metrics | None = None,
        force: bool = False,
        dismissed: Collection[str] = frozenset(),
    ) -> Publication | None:
        """Publish a finished review on its change (`publish_finished`: None when there is
        nothing to publish; `metrics` counts each outcome)."""
        settings = client.settings

        async def publish_on(info: PullRequestInfo) -> Publication:
            return await self.one(
                result,
                self._ref_of(info, settings),
                client,
                git_dir,
                deadline=deadline,
                max_inline=settings.pr_review_max_inline_comments,
                ledger=ledger,
                force=force,
                dismissed=dismissed,
            )

        return await publish_finished(result, self.forge, publish_on, metrics)


async def _publish(
    steps: ForgeSteps[Any, Any],
    result: ReviewResult,
    git_dir: Path,
    deadline: float,
    ledger: PublishLedger | None,
    force: bool,
    dismissed: Collection[str],
) -> Publication:
    head = result.revisions.head_sha
    key = await steps.key(head)
    try:
        recorded = None if ledger is None else await ledger.find(key)
    except ServerBusy:
        # The review is paid for: publish on the markers alone, as the CLI does.
        logger.warning("the ledger of published reviews could not be read")
        recorded, ledger = None, None
    if recorded is not None and not force:
        return _already(recorded.review_id, recorded.url)
    state = await steps.prior_state(head, deadline - DEADLINE_MARGIN_SECONDS)
    done = state.review_of(head)
    if done is not None and not force:
        return _already(*done)
    if not state.complete and ledger is None:
        # Our review of this head may be in the pages not read: posting could post it twice.
        raise PublishFailure(steps.too_many_posts)
    posted = state.fingerprints | await _ledger_fingerprints(ledger, key)
    findings = await read_findings(result, git_dir, dismissed)
    request = PostRequest(result, state, posted, findings, deadline)
    publication, carried = await steps.post(request)
    publication.suppressed = findings.suppressed
    if ledger is not None:
        await ledger.record(key, publication, carried, result)
    return publication


def published(
    review_id: int | None, url: str | None, placement: Placement, shown: int
) -> Publication:
    """A publication the forge took: where our post is, and what went where (`shown` of the
    body's findings fit in it)."""
    return Publication(
        status="published",
        review_id=review_id,
        url=url,
        inline_comments=len(placement.inline),
        body_findings=shown,
        duplicates_skipped=placement.skipped,
    )


def _already(review_id: int | None, url: str | None) -> Publication:
    return Publication(status="already_published", review_id=review_id, url=url)


async def _ledger_fingerprints(ledger: PublishLedger | None, key: HeadKey) -> set[str]:
    try:
        return set() if ledger is None else await ledger.fingerprints(key)
    except ServerBusy:
        logger.warning("the ledger of published reviews could not be read")
        return set()


async def read_findings(
    result: ReviewResult, git_dir: Path, dismissed: Collection[str]
) -> Findings:
    """The findings the repository did not dismiss (specification §15), with what placing them
    needs, read from git off the event loop."""
    head, findings = result.revisions.head_sha, result.review.findings
    wanted = {f.path for f in findings}
    merge_base = result.revisions.merge_base_sha
    hunks = await asyncio.to_thread(diff_hunks, git_dir, merge_base, head, wanted)
    texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
    fingerprints = [fingerprint_of(f, texts) for f in findings]
    kept = [i for i, fingerprint in enumerate(fingerprints) if fingerprint not in dismissed]
    findings = [findings[i] for i in kept]
    fingerprints = [fingerprints[i] for i in kept]
    replaced = await asyncio.to_thread(suggestion_texts, git_dir, head, findings)
    suppressed = len(result.review.findings) - len(kept)
    return Findings(findings, fingerprints, hunks, replaced, suppressed)
