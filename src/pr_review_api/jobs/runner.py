"""The review a worker runs for one job: `run_review`, published when asked (specification §§10/11).

A worker process keeps one `RepositoryStore` (indexes, `cat-file` readers, search text, git
threads) for every job it runs, so the second job of a repository starts warm. Each job's
review speaks through a client of the job's identity on its change's forge (forge/clients.py's
`JobIdentities`: a pull request's App installation, or a token). The queue lends it the
database's ledger of published heads, so a job of a head already published asks no model, and
the repository's dismissed findings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pr_review_api.forge.clients import JobIdentities
from pr_review_api.forge.select import job_clients
from pr_review_api.git.store import RepositoryStore
from pr_review_api.jobs.records import JobRecord
from pr_review_api.ledger import DismissedFindings, Learnings, PublishLedger
from pr_review_api.loop.run import PLAIN, ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget, repository_store
from pr_review_api.permissions import PermissionCache
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


def job_options(record: JobRecord, shared: ReviewOptions = PLAIN) -> ReviewOptions:
    """How a job's review runs (`shared`: what the worker lends every review), read from its
    record in this one place: `post` publishes it;
    `automatic` (a webhook's job) honours the base's skip rules (specification §16); `force` (the
    `review` command in a comment, specification §15) publishes past a head already published,
    and is never automatic."""
    if record.command is not None:  # the `review` command in a comment
        return replace(shared, post=True, automatic=False, force=True)
    return replace(shared, post=record.post, automatic=record.source == "webhook", force=False)


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
        `learnings`: the repositories' learnings, given to every review (specification §20)."""
        self._identities = identities
        self._shared = ReviewOptions(
            metrics=metrics,
            ledger=ledger,
            dismissals=dismissals,
            permissions=permissions or PermissionCache(),
            learnings=learnings,
        )
        self._store: RepositoryStore | None = None

    def store_for(self, settings: Settings) -> RepositoryStore:
        """The worker's one repository store (made on first use)."""
        if self._store is None:
            self._store = repository_store(settings)
        return self._store

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        """The review of `record`'s change, as its `job_options` say, as its identity."""
        url, options = record.pull_request_url, job_options(record, self._shared)
        store = self.store_for(settings)
        clients = job_clients(self._identities, settings, record.installation_id, url)
        async with clients as lent:
            options = replace(options, clients=lent, store=store)
            result = await run_review(ChangeTarget(url), settings, options)
        return result.model_dump(mode="json")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
