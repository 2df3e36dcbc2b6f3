"""The review a worker runs for one job: `run_review`, published when asked (CONTRACT 10/11).

A worker process keeps one `RepositoryStore` (indexes, `cat-file` readers, search text, git
threads) for every job it runs, so the second job of a repository starts warm. Each job of a
pull request gets a `GitHubClient` bound to its identity (`installation_client`: its App
installation's token through `github.credentials.credentials_for`, or `GITHUB_TOKEN`), and
everything below it uses that client; a job of a GitLab merge request (its URL's forge) gets a
`GitLabClient` with `GITLAB_TOKEN` instead (no App installation token is asked for). The queue
lends it the database's ledger of published heads, so a job of a head already published asks
no model, and the repository's dismissed findings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pr_review_api.forge.urls import forge_of
from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.conversation import PermissionCache
from pr_review_api.github.credentials import credentials_for
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.ledger import DismissedFindings, PublishLedger
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import PullRequestTarget, repository_store
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics


@asynccontextmanager
async def installation_client(
    settings: Settings, app: AppCredentials | None, installation_id: int | None
) -> AsyncIterator[GitHubClient]:
    """A GitHub client for one job: the one place an installation id becomes an identity."""
    credentials = credentials_for(settings, installation_id, app=app)
    async with GitHubClient(settings, credentials=credentials) as github:
        yield github


@asynccontextmanager
async def _review_clients(
    settings: Settings, app: AppCredentials | None, installation_id: int | None, url: str
) -> AsyncIterator[tuple[GitHubClient | None, GitLabClient | None]]:
    """The forge client a job's review speaks through: GitLab has no App installations, so
    every merge request is GITLAB_TOKEN's; a pull request is its installation's."""
    if forge_of(url) == "gitlab":
        async with GitLabClient(settings) as gitlab:
            yield None, gitlab
    else:
        async with installation_client(settings, app, installation_id) as github:
            yield github, None


class JobReviewer:
    """The default `ReviewRunner` of `JobQueue`; `close()` when the worker stops."""

    def __init__(
        self,
        app_credentials: AppCredentials | None,
        ledger: PublishLedger | None = None,
        metrics: Metrics | None = None,
        dismissals: DismissedFindings | None = None,
        permissions: PermissionCache | None = None,
    ) -> None:
        """`permissions`: the holder's answers of who may write (its own when not given)."""
        self._app_credentials = app_credentials
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
        clients = _review_clients(settings, self._app_credentials, installation_id, url)
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
            )
        return result.model_dump(mode="json")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
