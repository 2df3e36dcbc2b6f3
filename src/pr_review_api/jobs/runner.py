"""The review a worker runs for one job: `run_review`, published when asked (CONTRACT 10/11).

A worker process keeps one `RepositoryStore` (indexes, `cat-file` readers, search text, git
threads) for every job it runs, so the second job of a repository starts warm. Each job's
review speaks through a client of the job's identity on its change's forge (forge/clients.py's
`JobIdentities`: a pull request's App installation, or a token). The queue lends it the
database's ledger of published heads, so a job of a head already published asks no model, and
the repository's dismissed findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pr_review_api.forge.clients import JobIdentities
from pr_review_api.git.store import RepositoryStore
from pr_review_api.ledger import DismissedFindings, Learnings, PublishLedger
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import PullRequestTarget, repository_store
from pr_review_api.permissions import PermissionCache
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


class JobReviewer:
    """The default `ReviewRunner` of `JobQueue`; `close()` when the worker stops."""

    def __init__(
        self,
        identities: JobIdentities,
        ledger: PublishLedger | None = None,
        metrics: Metrics | None = None,
        dismissals: DismissedFindings | None = None,
        permissions: PermissionCache | None = None,
        learnings: Learnings | None = None,
    ) -> None:
        """`permissions`: the holder's answers of who may write (its own when not given);
        `learnings`: the repositories' learnings, given to every review (CONTRACT 20)."""
        self._learnings = learnings
        self._identities = identities
        self._ledger = ledger
        self._dismissals = dismissals
        self._permissions = permissions or PermissionCache()
        self._metrics = metrics
        self._store: RepositoryStore | None = None

    def store_for(self, settings: Settings) -> RepositoryStore:
        """The worker's one repository store (made on first use)."""
        if self._store is None:
            self._store = repository_store(settings)
        return self._store

    async def __call__(
        self,
        url: str,
        settings: Settings,
        post: bool,
        installation_id: int | None,
        automatic: bool = False,
        *,
        force: bool = False,
    ) -> dict[str, Any]:
        """`force`: the `review` command (CONTRACT 15), past a head already published."""
        target = PullRequestTarget(url)
        store = self.store_for(settings)
        clients = self._identities.review_clients(settings, installation_id, url)
        async with clients as (github, gitlab):
            result = await run_review(
                target,
                settings,
                post=post,
                github=github,
                gitlab=gitlab,
                store=store,
                ledger=self._ledger,
                metrics=self._metrics,
                automatic=automatic,
                force=force,
                dismissals=self._dismissals,
                permissions=self._permissions,
                learnings=self._learnings,
            )
        return result.model_dump(mode="json")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
