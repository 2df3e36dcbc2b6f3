"""The forge clients a review speaks through, and who they speak as.

`ForgeClients`: the API clients a holder lends, at most one per forge, named by no field: the
process's one client per forge (a connection pool and the credentials each), which the HTTP
service opens for its life and lends to every review it runs (and to its webhook routes), or a
job's one client of its identity. A review reaches the one its change's URL names
(forge/select.py); a forge finds its own by its type (`of`).

`JobIdentities`: who a job is on the forges. Each job of a pull request gets a `GitHubClient`
bound to its identity (its App installation's token through `github.credentials.credentials_for`,
or `GITHUB_TOKEN`), and everything below it uses that client; a job of a GitLab merge request
gets a `GitLabClient` with `GITLAB_TOKEN` (no App installation token is asked for): each
forge's rule is its entry in forge/select.py.

With the App configured, a GitHub job without an installation (a delivery of a repository
webhook, a job queued through the API) is refused with `configuration_error`: it never runs as
`GITHUB_TOKEN` nor anonymously, so every job of an App deployment is its installation's bot,
and its permission checks and fairness are that installation's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

from pr_review_api.errors import ConfigurationError
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.credentials import credentials_for
from pr_review_api.http.api_client import ApiClient
from pr_review_api.settings import Settings

ClientT = TypeVar("ClientT", bound=ApiClient)
NO_INSTALLATION = (
    "The GitHub App is configured and this job names no App installation; it is not run "
    "with GITHUB_TOKEN. Queue it through the App's webhook delivery."
)


@dataclass(frozen=True)
class ForgeClients:
    """The clients a holder lends, at most one per forge (see the module docstring)."""

    clients: tuple[ApiClient, ...] = ()

    def of(self, kind: type[ClientT]) -> ClientT | None:
        """The lent client of the forge whose client `kind` is; None: none was lent."""
        for client in self.clients:
            if isinstance(client, kind):
                return client
        return None


class JobIdentities:
    """Who the jobs of a worker process are on the forges (see the module docstring): its
    GitHub App's credentials, whose installation tokens it mints and caches for its life, or
    none (`GITHUB_TOKEN`)."""

    def __init__(self, settings: Settings) -> None:
        self.app: AppCredentials | None = AppCredentials.from_settings(settings)

    def has_identity(self, installation_id: int | None) -> bool:
        """Whether a GitHub job of `installation_id` has someone to be: with the App, only
        an installation; without it, `GITHUB_TOKEN` (or anonymous) for every job."""
        return self.app is None or installation_id is not None

    @asynccontextmanager
    async def github(
        self, settings: Settings, installation_id: int | None
    ) -> AsyncIterator[GitHubClient]:
        """A GitHub client for one job: the one place an installation id becomes an identity.
        `ConfigurationError` for a job the App's deployment has no identity for."""
        if not self.has_identity(installation_id):
            raise ConfigurationError(NO_INSTALLATION)
        credentials = credentials_for(settings, installation_id, app=self.app)
        async with GitHubClient(settings, credentials=credentials) as github:
            yield github
