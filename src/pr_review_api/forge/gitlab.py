"""A GitLab merge request behind the forge seam (CONTRACT 10, 17): what loop/run.py and
loop/merge_request_post.py did on GitLab before the seam.

Before the model is asked: the preflight (gitlab/preflight.py: no GITLAB_TOKEN, or a token
GitLab refuses, fails here and costs no review), then the service's ledger and our notes'
markers: a head already published answers `already_published` without a provider request, as
on GitHub; a re-review names the files changed since our last reviewed head. After the review:
gitlab/publish.py posts the discussions and the note.

With the service's dismissals (CONTRACT 15; the project's key is `gitlab:group/project`), the
first message names the findings dismissed in the changed files, and a finding whose
fingerprint was dismissed is not published (`publication.suppressed`).

What GitHub has and a merge request does not have here: check runs (section 16's gate has no
reporter; `--check-file` still gets the outcome), resolving our fixed threads, and dismissals
by reaction (read from GitHub at each review): those methods do nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pr_review_api.errors import ReviewError, ServerBusy
from pr_review_api.forge.base import ChangeForge, PostedHead, PriorReview
from pr_review_api.github.checkout import PreparedPullRequest
from pr_review_api.github.checks import CheckReporter
from pr_review_api.github.history import PublishFailure, re_review_of
from pr_review_api.gitlab.checkout import open_merge_request
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.history import prior_state
from pr_review_api.gitlab.preflight import ensure_can_publish
from pr_review_api.gitlab.publish import merge_request_key, publish_merge_request
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.ledger import DismissedFindings, PublishLedger
from pr_review_api.model import Forge, Publication, PullRequestInfo, ReviewResult, Severity
from pr_review_api.permissions import PermissionCache
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)


def _ref(info: PullRequestInfo) -> MergeRequestRef:
    return MergeRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


class GitLabForge(ChangeForge):
    """GitLab, through `gitlab` (the client of the review's identity)."""

    name: Forge = "gitlab"

    def __init__(self, settings: Settings, gitlab: GitLabClient) -> None:
        self.settings = settings
        self.gitlab = gitlab

    @asynccontextmanager
    async def open_change(self, url: str) -> AsyncIterator[PreparedPullRequest]:
        async with open_merge_request(url, self.settings, self.gitlab) as prepared:
            yield prepared

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> CheckReporter | None:
        return None  # no check run on a merge request (yet): the outcome still reaches on_outcome

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        await ensure_can_publish(self.gitlab)

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        try:
            key = merge_request_key(_ref(info), await self.gitlab.username(), head_sha)
            recorded = await ledger.find(key)
        except ServerBusy:
            logger.warning("the ledger of published reviews could not be read")
            return None
        return None if recorded is None else PostedHead(recorded.review_id, recorded.url)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        try:
            state = await prior_state(self.gitlab, _ref(info), head_sha=head_sha)
        except (PublishFailure, ReviewError):
            return PriorReview()  # publishing reads the notes again, and decides
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
        # No check run to complete from the posted counts: the outcome, for --check-file, is
        # the gate's "unknown" of a head published before.
        return None

    async def dismissed_titles(
        self, info: PullRequestInfo, paths: list[str], dismissals: DismissedFindings
    ) -> tuple[str, ...] | None:
        try:
            return tuple(await dismissals.titles(_ref(info).dismissals_key, paths))
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
        """The project's dismissed fingerprints (no reactions to read: a dismissal on GitLab
        is an `ignore` in our discussion, stored when its webhook arrives)."""
        if dismissals is None:
            return set()
        try:
            return await dismissals.fingerprints(_ref(info).dismissals_key)
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
        return await publish_merge_request(
            result,
            self.gitlab,
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
        return None
