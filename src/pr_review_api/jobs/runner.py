"""The review a worker runs for one job: `run_review`, published when asked (CONTRACT 10/11).

A worker process keeps one `RepositoryStore` (indexes, `cat-file` readers, search text, git
threads) for every job it runs, so the second job of a repository starts warm, and under a
GitHub App each job talks to GitHub with its own installation's token. The queue lends it the
database's ledger of published heads, so a job of a head already published asks no model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.ledger import DismissedFindings, PublishLedger
from pr_review_api.loop.run import PullRequestTarget, run_review
from pr_review_api.loop.workspace import repository_store
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


@dataclass(frozen=True)
class _InstallationCredentials:
    """`github.credentials.Credentials` for one job: its installation's App token."""

    app: AppCredentials
    installation_id: int

    async def token(self, installation_id: int | None = None) -> SecretStr | None:
        return await self.app.token(self.installation_id)

    async def app_login(self) -> str | None:
        return await self.app.app_login()


@asynccontextmanager
async def installation_client(
    settings: Settings, app: AppCredentials | None, installation_id: int | None
) -> AsyncIterator[GitHubClient]:
    """A GitHub client for one job: its installation's App token, else the settings' token."""
    if app is None or installation_id is None:
        async with GitHubClient(settings) as github:
            yield github
        return
    credentials = _InstallationCredentials(app, installation_id)
    async with GitHubClient(settings, credentials=credentials) as github:
        yield github


class JobReviewer:
    """The default `ReviewRunner` of `JobQueue`; `close()` when the worker stops."""

    def __init__(
        self,
        app_credentials: AppCredentials | None,
        ledger: PublishLedger | None = None,
        metrics: Metrics | None = None,
        dismissals: DismissedFindings | None = None,
    ) -> None:
        self._app_credentials = app_credentials
        self._ledger = ledger
        self._dismissals = dismissals
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
        if self._app_credentials is None or installation_id is None:
            result = await run_review(
                target,
                settings,
                post=post,
                store=store,
                ledger=self._ledger,
                metrics=self._metrics,
                automatic=automatic,
                force=force,
                dismissals=self._dismissals,
            )
        else:
            credentials = _InstallationCredentials(self._app_credentials, installation_id)
            async with GitHubClient(settings, credentials=credentials) as github:
                result = await run_review(
                    target,
                    settings,
                    post=post,
                    github=github,
                    installation_id=installation_id,
                    store=store,
                    ledger=self._ledger,
                    metrics=self._metrics,
                    automatic=automatic,
                    force=force,
                    dismissals=self._dismissals,
                )
        return result.model_dump(mode="json")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
