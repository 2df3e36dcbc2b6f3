"""A Gitea (or Forgejo) pull request behind the forge seam (specification §§10, 15, 16, 19).

Before the model is asked: the preflight (gitea/preflight.py: no GITEA_TOKEN, a token Gitea
refuses, or one without write access fails here and costs no review), then the service's
ledger and our reviews' markers: a head already published answers `already_published` without
a provider request; a re-review names the files changed since our last reviewed head. After the
review: gitea/publish.py posts one review (a later head's short; none when nothing is new).

Dismissals (specification §15; gitea/dismissals.py): the `-1` reactions of writers on our findings'
inline comments are read at each review; in the service they are stored for the repository
(key `gitea:owner/repo`), and outside it (the CLI, a workflow: no database) a re-review with
findings suppresses those of this pull request. After a re-review is published, the comments
of ours its new head fixed are resolved where the server can (gitea/resolve.py).

The merge gate (specification §16) is a commit status `pr-review` on the head (gitea/status.py); a
head published before completes it with the counts by severity our review states.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound, ReviewError, ServerBusy
from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.forge.base import ChangeForge, IssueAnswer, IssueText, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.gitea.checkout import open_pull_request
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.dismissals import downvoted
from pr_review_api.gitea.history import FindingComment, our_review_body, read_history
from pr_review_api.gitea.issues import read_issue as read_gitea_issue
from pr_review_api.gitea.preflight import ensure_can_publish
from pr_review_api.gitea.publish import publish_pull_request, pull_request_key
from pr_review_api.gitea.resolve import resolve_fixed
from pr_review_api.gitea.status import StatusReporter
from pr_review_api.gitea.urls import PullRequestRef, ref_of
from pr_review_api.ledger import DismissedFindings, PublishLedger
from pr_review_api.model import Forge, Publication, PullRequestInfo, ReviewResult, Severity
from pr_review_api.output.gate_outcome import severity_counts
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.markers import marked_heads, shown_title
from pr_review_api.publishing.placement import fingerprint_of, line_texts
from pr_review_api.publishing.re_review import re_review_of
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)
HISTORY_FAILURES = (PublishFailure, GiteaUnavailable, PullRequestNotFound)


class GiteaForge(ChangeForge):
    """Gitea, through `gitea` (the client of the review's identity)."""

    name: Forge = "gitea"

    def __init__(self, settings: Settings, gitea: GiteaClient) -> None:
        self.settings = settings
        self.gitea = gitea
        # The head this review asked about (the ledger, our markers): a posted review is read
        # back only when it carries that head's marker. A later head with nothing new is
        # published as our first review, whose counts are its own head's, not this one's.
        self.head_sha: str | None = None

    def _ref(self, info: PullRequestInfo) -> PullRequestRef:
        return ref_of(info, self.settings)

    @asynccontextmanager
    async def open_change(self, url: str) -> AsyncIterator[PreparedChange]:
        async with open_pull_request(url, self.settings, self.gitea) as prepared:
            yield prepared

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        answer = await read_gitea_issue(self.gitea, project, number)
        return answer if isinstance(answer, str) else IssueText(*answer)

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return StatusReporter(self.gitea, self._ref(info), head_sha)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.gitea, self._ref(info))

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        self.head_sha = head_sha
        try:
            key = pull_request_key(self._ref(info), await self.gitea.login(), head_sha)
            recorded = await ledger.find(key)
        except ServerBusy:
            logger.warning("the ledger of published reviews could not be read")
            return None
        return None if recorded is None else PostedHead(recorded.review_id, recorded.url)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        self.head_sha = head_sha
        try:
            state = (await read_history(self.gitea, self._ref(info), head_sha=head_sha)).state
        except HISTORY_FAILURES:
            return PriorReview()  # publishing reads the reviews again, and decides
        done = state.review_of(head_sha)
        if done is not None and not force:
            return PriorReview(posted=PostedHead(*done))
        found = await re_review_of(state, git_dir, head_sha)
        if found is None:
            return PriorReview()
        return PriorReview(last_head=found.last_head, changed=found.changed)

    async def posted_counts(
        self, info: PullRequestInfo, review_id: int | None
    ) -> Counter[Severity] | None:
        body = await self.posted_body(info, review_id)
        return None if body is None else severity_counts(body)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        if review_id is None:
            return None
        body = await our_review_body(self.gitea, self._ref(info), review_id)
        if body is None or (self.head_sha is not None and self.head_sha not in marked_heads(body)):
            return None  # not ours, or of another head: unknown (the gate fails closed)
        return body

    async def dismissed_titles(
        self, info: PullRequestInfo, paths: list[str], dismissals: DismissedFindings
    ) -> tuple[str, ...] | None:
        try:
            return tuple(await dismissals.titles(self._ref(info).dismissals_key, paths))
        except ServerBusy:
            return None

    async def dismissed(
        self,
        info: PullRequestInfo,
        dismissals: DismissedFindings | None,
        permissions: PermissionCache | None,
        *,
        reviewed_before: bool,
        has_findings: bool,
    ) -> Collection[str]:
        """The repository's dismissed fingerprints, after reading the `-1` reactions of writers
        on our findings' comments of this pull request (specification §15). `permissions` (the
        holder's) keeps Gitea's answers of who may write, else the review keeps its own."""
        if dismissals is None and (not reviewed_before or not has_findings):
            return set()  # no earlier review of ours to dismiss, or nothing to suppress
        ref = self._ref(info)
        try:
            history = await read_history(self.gitea, ref)
            found = await downvoted(
                self.gitea, ref, history.comments, permissions or PermissionCache()
            )
        except (*HISTORY_FAILURES, ReviewError):
            found = []  # read again at the next review
        if dismissals is None:  # the CLI, a workflow: what the pull request itself says
            return {comment.fingerprint for comment, _ in found}
        try:
            for comment, user in found:
                await _store(dismissals, ref.dismissals_key, comment, user)
            return await dismissals.fingerprints(ref.dismissals_key)
        except ServerBusy:  # the review is paid for: publish it, dismissals or not
            logger.warning("the dismissed findings could not be read")
            return set()

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
        return await publish_pull_request(
            result,
            self.gitea,
            git_dir,
            deadline=deadline,
            ledger=ledger,
            metrics=metrics,
            force=force,
            dismissed=dismissed,
        )

    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        head, findings = result.revisions.head_sha, result.review.findings
        ref = self._ref(info)
        try:
            comments = (await read_history(self.gitea, ref)).comments
        except HISTORY_FAILURES:
            return 0
        texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
        reported = {fingerprint_of(f, texts) for f in findings}
        return await resolve_fixed(self.gitea, ref, git_dir, head, comments, reported, findings)


async def _store(
    dismissals: DismissedFindings, key: str, comment: FindingComment, user: str
) -> None:
    title = shown_title(comment.body)
    await dismissals.dismiss(key, comment.fingerprint, title, comment.path or None, user)
