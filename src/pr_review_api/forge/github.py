"""A GitHub pull request behind the forge seam: github/'s functions, as the review used them.

Every step is what loop/run.py did on GitHub before the seam: the preflight
(github/preflight.py), the ledger's `HeadKey` under our login, our reviews' markers
(github/history.py), the check run (github/checks.py), dismissals by `-1` reaction and
`ignore` reply (github/comments.py), publishing (github/publish.py) and resolving our fixed
threads (github/resolve.py).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pydantic import ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.forge.base import ClientForge, DismissalRow, IssueAnswer, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.checks import CheckReporter
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import (
    Repository,
    ReviewComment,
    dismissed_on_pull_request,
    downvoted,
)
from pr_review_api.github.history import PostWire, prior_state
from pr_review_api.github.issues import read_issue as read_github_issue
from pr_review_api.github.preflight import ensure_can_publish
from pr_review_api.github.publish import PUBLISHER
from pr_review_api.github.resolve import resolve_fixed
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.ledger import HeadKey, PublishLedger
from pr_review_api.model import Forge, PullRequestInfo, ReviewResult
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.threads import NewHead


class GitHubForge(ClientForge[GitHubClient]):
    """GitHub, through its client of the review's identity."""

    name: Forge = "github"
    publishing = PUBLISHER
    opener = staticmethod(open_pull_request)  # a function: never bound to the forge

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        owner, _, repo = project.partition("/")
        answer = await read_github_issue(self.client, owner, repo, number)
        return self.issue_answer(answer)

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return CheckReporter(self.client, info.owner, info.repo, head_sha, info.number)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.client, PullRequestRef.of(info))

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        identity = await self.client.login()
        recorded = await ledger.find(HeadKey.of(PullRequestRef.of(info), identity, head_sha))
        return None if recorded is None else PostedHead(recorded.review_id, recorded.url)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        # `force` changes nothing here: this head's review, when found, is all that is said
        # (no re-review context), and the caller reviews again when forced.
        try:
            state = await prior_state(self.client, PullRequestRef.of(info), head_sha=head_sha)
        except (PublishFailure, GitHubUnavailable):
            return PriorReview()  # publishing decides again
        return await self.prior_of(state, git_dir, head_sha, force=False)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        if review_id is None:
            return None
        url = (
            f"{self.client.settings.github_api_url}/repos/{info.owner}/{info.repo}"
            f"/pulls/{info.number}/reviews/{review_id}"
        )
        try:
            response = await self.client.request("GET", url)
        except GitHubUnavailable:
            return None
        if response.status != 200:
            return None
        try:
            return PostWire.model_validate_json(response.body).body
        except ValidationError:
            return None

    def dismissals_key(self, info: PullRequestInfo) -> str:
        return f"{info.owner}/{info.repo}"

    async def dismissed_on_change(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> Collection[str]:
        """The `-1` reactions and `ignore` replies of writers on our findings' comments of this
        pull request (specification §15; the CLI, the Action)."""
        repository = Repository(info.owner, info.repo)
        try:
            return await dismissed_on_pull_request(
                self.client, repository, info.number, permissions
            )
        except GitHubUnavailable:
            return set()

    async def found_dismissals(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> list[DismissalRow]:
        """The `-1` reactions of writers on our findings' comments of this pull request
        (specification §15). `permissions` (the holder's) keeps GitHub's answers of who may
        dismiss."""
        repository = Repository(info.owner, info.repo)
        try:
            found = await downvoted(self.client, repository, info.number, permissions)
        except GitHubUnavailable:
            return []
        return [
            (_fingerprint(comment), comment.finding_title(), comment.path, user)
            for comment, user in found
        ]

    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        new_head = NewHead.of(result, git_dir, await self.reported_fingerprints(result, git_dir))
        repository = Repository(info.owner, info.repo)
        return await resolve_fixed(self.client, repository, info.number, new_head)


def _fingerprint(comment: ReviewComment) -> str:
    fingerprint = comment.finding_fingerprint()
    assert fingerprint is not None  # `downvoted` gives our findings' comments only
    return fingerprint
