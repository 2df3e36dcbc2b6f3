"""A Gitea (or Forgejo) pull request behind the forge seam (CONTRACT 19): reviewed, not yet
published.

A review reads the pull request through gitea/checkout.py (metadata, then the commits in the
shared cache). Publishing on Gitea (specification §19) is not built yet: until it is, a review asked
to publish (`--post`, `"post": true`) is refused by the preflight, before the model is asked, so
no review is paid for that cannot be published. With nothing published, there is no earlier
review to read, no gate mark, no dismissal and no thread to resolve: those methods answer
"none", as the seam asks of a forge that lacks something.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pr_review_api.errors import PublishNotPossible
from pr_review_api.fetch.cache import PreparedPullRequest
from pr_review_api.forge.base import ChangeForge, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.gitea.checkout import open_pull_request
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.ledger import DismissedFindings, PublishLedger
from pr_review_api.model import Forge, Publication, PullRequestInfo, ReviewResult, Severity
from pr_review_api.permissions import PermissionCache
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

NOT_YET_PUBLISHED: Final = (
    "Publishing a review on Gitea is not supported yet; nothing was reviewed."
)


class GiteaForge(ChangeForge):
    """Gitea, through `gitea` (the client of the review's identity)."""

    name: Forge = "gitea"

    def __init__(self, settings: Settings, gitea: GiteaClient) -> None:
        self.settings = settings
        self.gitea = gitea

    @asynccontextmanager
    async def open_change(self, url: str) -> AsyncIterator[PreparedPullRequest]:
        async with open_pull_request(url, self.settings, self.gitea) as prepared:
            yield prepared

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        return None  # the commit status lands with publishing

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        raise PublishNotPossible(NOT_YET_PUBLISHED)

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        return None

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        return PriorReview()

    async def posted_counts(
        self, info: PullRequestInfo, review_id: int | None
    ) -> Counter[Severity] | None:
        return None

    async def dismissed_titles(
        self, info: PullRequestInfo, paths: list[str], dismissals: DismissedFindings
    ) -> tuple[str, ...] | None:
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
        raise PublishNotPossible(NOT_YET_PUBLISHED)  # the preflight refused it before

    async def resolve_fixed(
        self, result: ReviewResult, info: PullRequestInfo, git_dir: Path
    ) -> int | None:
        return None
