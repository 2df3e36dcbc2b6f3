"""A GitLab merge request behind the forge seam (specification §§10, 17): what loop/run.py and
loop/merge_request_post.py did on GitLab before the seam.

Before the model is asked: the preflight (gitlab/preflight.py: no GITLAB_TOKEN, or a token
GitLab refuses, fails here and costs no review), then the service's ledger and our notes'
markers: a head already published answers `already_published` without a provider request, as
on GitHub; a re-review names the files changed since our last reviewed head. After the review:
gitlab/publish.py posts the discussions and the note.

Dismissals (specification §15; gitlab/dismissals.py): in the service, the `thumbsdown` awards of
Developers on our findings' first notes are read at each review and stored for the project
(key `gitlab:group/project`, as the `ignore` replies the webhook stores); the first message
names the findings dismissed in the changed files, and a finding whose fingerprint was
dismissed is not published (`publication.suppressed`). Outside the service (no database), a
re-review with findings reads the merge request's own `ignore` replies and `thumbsdown` awards,
and suppresses those. After a re-review is published, the discussions of ours its new head
fixed are resolved (gitlab/resolve.py; `publication.resolved`).

The merge gate (specification §16) is a commit status `pr-review` on the head (gitlab/status.py); a
head published before completes it with the counts by severity our note states.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound, ReviewError
from pr_review_api.forge.base import ClientForge, DismissalRow, IssueAnswer, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.gitlab.checkout import open_merge_request
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import AccessLevels
from pr_review_api.gitlab.discussions import finding_discussions
from pr_review_api.gitlab.dismissals import dismissed_on_merge_request, thumbs_down
from pr_review_api.gitlab.history import our_note_body, prior_state
from pr_review_api.gitlab.issues import read_issue as read_gitlab_issue
from pr_review_api.gitlab.preflight import ensure_can_publish
from pr_review_api.gitlab.publish import PUBLISHER, merge_request_key
from pr_review_api.gitlab.resolve import resolve_fixed
from pr_review_api.gitlab.status import StatusReporter
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.ledger import PublishLedger
from pr_review_api.model import Forge, PullRequestInfo, ReviewResult
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.failures import PublishFailure
from pr_review_api.publishing.threads import NewHead


class GitLabForge(ClientForge[GitLabClient]):
    """GitLab, through its client of the review's identity."""

    name: Forge = "gitlab"
    publishing = PUBLISHER
    opener = open_merge_request

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        answer = await read_gitlab_issue(self.client, project, number)
        return self.issue_answer(answer)

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return StatusReporter(self.client, MergeRequestRef.of(info), head_sha)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.client)

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        key = merge_request_key(MergeRequestRef.of(info), await self.client.username(), head_sha)
        return await self.recorded_head(ledger, key)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        try:
            state = await prior_state(self.client, MergeRequestRef.of(info), head_sha=head_sha)
        except (PublishFailure, ReviewError):
            return PriorReview()  # publishing reads the notes again, and decides
        return await self.prior_of(state, git_dir, head_sha, force=force)

    async def posted_body(self, info: PullRequestInfo, review_id: int | None) -> str | None:
        return (
            None
            if review_id is None
            else await our_note_body(self.client, MergeRequestRef.of(info), review_id)
        )

    def dismissals_key(self, info: PullRequestInfo) -> str:
        return MergeRequestRef.of(info).dismissals_key

    async def dismissed_on_change(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> Collection[str]:
        """The `ignore` replies and `thumbsdown` awards of Developers on our findings'
        discussions of this merge request (specification §15; the CLI, a GitLab CI job)."""
        try:
            return await dismissed_on_merge_request(
                self.client, MergeRequestRef.of(info), AccessLevels(permissions)
            )
        except (GitLabUnavailable, PullRequestNotFound):
            return set()

    async def found_dismissals(
        self, info: PullRequestInfo, permissions: PermissionCache
    ) -> list[DismissalRow]:
        """The `thumbsdown` awards of Developers on our findings' first notes of this merge
        request (specification §15). `permissions` (the holder's) keeps GitLab's answers of who
        may dismiss."""
        ref = MergeRequestRef.of(info)
        try:
            discussions = await finding_discussions(self.client, ref)
            found = await thumbs_down(self.client, ref, discussions, AccessLevels(permissions))
        except (GitLabUnavailable, PullRequestNotFound):
            return []
        return [(d.fingerprint, d.first.finding_title(), d.first.path(), user) for d, user in found]

    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        new_head = NewHead.of(result, git_dir, await self.reported_fingerprints(result, git_dir))
        return await resolve_fixed(self.client, MergeRequestRef.of(info), new_head)
