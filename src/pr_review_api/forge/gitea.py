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

from collections.abc import Collection
from pathlib import Path

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound, ReviewError
from pr_review_api.forge.base import ClientForge, DismissalRow, IssueAnswer, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.gitea.checkout import open_pull_request
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.dismissals import downvoted
from pr_review_api.gitea.history import our_review_body, read_history
from pr_review_api.gitea.issues import read_issue as read_gitea_issue
from pr_review_api.gitea.preflight import ensure_can_publish
from pr_review_api.gitea.publish import PUBLISHER, pull_request_key
from pr_review_api.gitea.resolve import resolve_fixed
from pr_review_api.gitea.status import StatusReporter
from pr_review_api.gitea.urls import PullRequestRef, ref_of
from pr_review_api.ledger import PublishLedger
from pr_review_api.model import Forge, PullRequestInfo, ReviewResult
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.markers import marked_heads, shown_title
from pr_review_api.publishing.threads import NewHead
from pr_review_api.settings import Settings

HISTORY_FAILURES = (PublishFailure, GiteaUnavailable, PullRequestNotFound)


class GiteaForge(ClientForge[GiteaClient]):
    """Gitea, through its client of the review's identity."""

    name: Forge = "gitea"
    publishing = PUBLISHER
    opener = open_pull_request

    def __init__(self, settings: Settings, client: GiteaClient) -> None:
        super().__init__(settings, client)
        # The head this review asked about (the ledger, our markers): a posted review is read
        # back only when it carries that head's marker. A later head with nothing new is
        # published as our first review, whose counts are its own head's, not this one's.
        self.head_sha: str | None = None

    def _ref(self, info: PullRequestInfo) -> PullRequestRef:
        return ref_of(info, self.settings)

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        answer = await read_gitea_issue(self.client, project, number)
        return self.issue_answer(answer)

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return StatusReporter(self.client, self._ref(info), head_sha)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.client, self._ref(info))

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        self.head_sha = head_sha
        key = pull_request_key(self._ref(info), await self.client.login(), head_sha)
        return await self.recorded_head(ledger, key)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        self.head_sha = head_sha
        try:
            state = (await read_history(self.client, self._ref(info), head_sha=head_sha)).state
        except HISTORY_FAILURES:
            return PriorReview()  # publishing reads the reviews again, and decides
        return await self.prior_of(state, git_dir, head_sha, force=force)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        if review_id is None:
            return None
        body = await our_review_body(self.client, self._ref(info), review_id)
        if body is None or (self.head_sha is not None and self.head_sha not in marked_heads(body)):
            return None  # not ours, or of another head: unknown (the gate fails closed)
        return body

    def dismissals_key(self, info: PullRequestInfo) -> str:
        return self._ref(info).dismissals_key

    async def dismissed_on_change(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> Collection[str]:
        """What the pull request itself says (the CLI, a workflow): its writers' `-1`s."""
        return {fingerprint for fingerprint, *_ in await self.found_dismissals(info, permissions)}

    async def found_dismissals(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> list[DismissalRow]:
        """The `-1` reactions of writers on our findings' comments of this pull request
        (specification §15). `permissions` (the holder's) keeps Gitea's answers of who may
        write."""
        ref = self._ref(info)
        try:
            history = await read_history(self.client, ref)
            found = await downvoted(self.client, ref, history.comments, permissions)
        except (*HISTORY_FAILURES, ReviewError):
            return []
        return [
            (comment.fingerprint, shown_title(comment.body), comment.path or None, user)
            for comment, user in found
        ]

    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        ref = self._ref(info)
        try:
            comments = (await read_history(self.client, ref)).comments
        except HISTORY_FAILURES:
            return 0
        new_head = NewHead.of(result, git_dir, await self.reported_fingerprints(result, git_dir))
        return await resolve_fixed(self.client, ref, comments, new_head)
