"""A GitHub pull request behind the forge seam: github/'s functions, as the review used them.

Every step is what loop/run.py did on GitHub before the seam: the preflight
(github/preflight.py), the ledger's `HeadKey` under our login, our reviews' markers
(github/history.py), the check run (github/checks.py), dismissals by `-1` reaction and
`ignore` reply (github/comments.py), publishing (github/publish.py) and resolving our fixed
threads (github/resolve.py).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from pr_review_api.errors import GitHubUnavailable, ServerBusy
from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.forge.base import ChangeForge, IssueAnswer, IssueText, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.checks import CheckReporter
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import (
    Repository,
    dismissed_on_pull_request,
    downvoted,
)
from pr_review_api.github.history import PostWire, prior_state
from pr_review_api.github.issues import read_issue as read_github_issue
from pr_review_api.github.preflight import ensure_can_publish
from pr_review_api.github.publish import publish_result
from pr_review_api.github.resolve import resolve_fixed
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.ledger import DismissedFindings, HeadKey, PublishLedger
from pr_review_api.model import Forge, Publication, PullRequestInfo, ReviewResult, Severity
from pr_review_api.output.gate_outcome import severity_counts
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.placement import fingerprint_of, line_texts
from pr_review_api.publishing.re_review import re_review_of
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


def _ref(info: PullRequestInfo) -> PullRequestRef:
    return PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


class GitHubForge(ChangeForge):
    """GitHub, through `github` (the client of the review's identity)."""

    name: Forge = "github"

    def __init__(self, settings: Settings, github: GitHubClient) -> None:
        self.settings = settings
        self.github = github

    @asynccontextmanager
    async def open_change(self, url: str) -> AsyncIterator[PreparedChange]:
        async with open_pull_request(url, self.settings, self.github) as prepared:
            yield prepared

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        owner, _, repo = project.partition("/")
        answer = await read_github_issue(self.github, owner, repo, number)
        return answer if isinstance(answer, str) else IssueText(*answer)

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return CheckReporter(self.github, info.owner, info.repo, head_sha, info.number)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.github, _ref(info))

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        identity = await self.github.login()
        recorded = await ledger.find(HeadKey.of(_ref(info), identity, head_sha))
        return None if recorded is None else PostedHead(recorded.review_id, recorded.url)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        # `force` changes nothing here: this head's review, when found, is all that is said
        # (no re-review context), and the caller reviews again when forced.
        try:
            state = await prior_state(self.github, _ref(info), head_sha=head_sha)
        except (PublishFailure, GitHubUnavailable):
            return PriorReview()  # publishing decides again
        done = state.review_of(head_sha)
        if done is not None:
            return PriorReview(posted=PostedHead(*done))
        found = await re_review_of(state, git_dir, head_sha)
        if found is None:
            return PriorReview()
        return PriorReview(last_head=found.last_head, changed=found.changed)

    async def posted_counts(
        self, info: PullRequestInfo, review_id: int | None
    ) -> Counter[Severity] | None:
        body = await self._posted_body(info, review_id)
        return None if body is None else severity_counts(body)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        return await self._posted_body(info, review_id)

    async def _posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        if review_id is None:
            return None
        url = (
            f"{self.github.settings.github_api_url}/repos/{info.owner}/{info.repo}"
            f"/pulls/{info.number}/reviews/{review_id}"
        )
        try:
            response = await self.github.request("GET", url)
        except GitHubUnavailable:
            return None
        if response.status != 200:
            return None
        try:
            return PostWire.model_validate_json(response.body).body
        except ValidationError:
            return None

    async def dismissed_titles(
        self, info: PullRequestInfo, paths: list[str], dismissals: DismissedFindings
    ) -> tuple[str, ...] | None:
        try:
            return tuple(await dismissals.titles(f"{info.owner}/{info.repo}", paths))
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
        """The repository's dismissed fingerprints, after storing the `-1` reactions of writers
        on our findings' comments of this pull request (specification §15). `permissions` (the
        holder's) keeps GitHub's answers of who may dismiss, else the review keeps its own."""
        permissions = permissions or PermissionCache()
        repository = Repository(info.owner, info.repo)
        if dismissals is None:  # the CLI, the Action: what the pull request itself says
            if not reviewed_before or not has_findings:
                return set()  # no earlier review of ours to dismiss, or nothing to suppress
            try:
                return await dismissed_on_pull_request(
                    self.github, repository, info.number, permissions
                )
            except GitHubUnavailable:
                return set()
        try:
            found = await downvoted(self.github, repository, info.number, permissions)
        except GitHubUnavailable:
            found = []  # read again at the next review
        name = f"{info.owner}/{info.repo}"
        try:
            for comment, user in found:
                fingerprint = comment.finding_fingerprint()
                assert fingerprint is not None
                title = comment.finding_title()
                await dismissals.dismiss(name, fingerprint, title, comment.path, user)
            return await dismissals.fingerprints(name)
        except ServerBusy:  # the review is paid for: publish it, dismissals or not
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
        return await publish_result(
            result,
            self.github,
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
        texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
        reported = {fingerprint_of(f, texts) for f in findings}
        repository = Repository(info.owner, info.repo)
        return await resolve_fixed(
            self.github, repository, info.number, git_dir, head, reported, findings
        )
