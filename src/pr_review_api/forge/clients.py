"""The forge clients a review speaks through, and who they speak as.

`ForgeClients`: the process's one API client per forge (a connection pool and the credentials
each). The HTTP service opens them for its life and lends them to every review it runs (and to
its webhook routes); a review reaches the one its change's URL names (forge/select.py).

`JobIdentities`: who a job is on the forges. Each job of a pull request gets a `GitHubClient`
bound to its identity (its App installation's token through `github.credentials.credentials_for`,
or `GITHUB_TOKEN`), and everything below it uses that client; a job of a GitLab merge request
gets a `GitLabClient` with `GITLAB_TOKEN` (no App installation token is asked for).

With the App configured, a GitHub job without an installation (a delivery of a repository
webhook, a job queued through the API) is refused with `configuration_error`: it never runs as
`GITHUB_TOKEN` nor anonymously, so every job of an App deployment is its installation's bot,
and its permission checks and fairness are that installation's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pr_review_api.errors import ConfigurationError
from pr_review_api.forge.urls import forge_of
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.credentials import credentials_for
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.settings import Settings

NO_INSTALLATION = (
    "The GitHub App is configured and this job names no App installation; it is not run "
    "with GITHUB_TOKEN. Queue it through the App's webhook delivery."
)


@dataclass(frozen=True)
class ForgeClients:
    """One client per forge, shared by every review of the process."""

    github: GitHubClient
    gitlab: GitLabClient

    def shared(self) -> dict[str, object]:
        """`run_review`'s keyword arguments for them (`github=`, `gitlab=`)."""
        return {"github": self.github, "gitlab": self.gitlab}


@asynccontextmanager
async def open_clients(settings: Settings) -> AsyncIterator[ForgeClients]:
    """Both clients with the settings' tokens, closed at exit. GitLab's pool opens on a merge
    request's first read, so a service without GitLab never connects to it."""
    async with GitHubClient(settings) as github, GitLabClient(settings) as gitlab:
        yield ForgeClients(github, gitlab)


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

    @asynccontextmanager
    async def review_clients(
        self, settings: Settings, installation_id: int | None, url: str
    ) -> AsyncIterator[tuple[GitHubClient | None, GitLabClient | None]]:
        """The forge client a job's review of `url` speaks through: GitLab has no App
        installations, so every merge request is GITLAB_TOKEN's; a pull request is its
        installation's."""
        if forge_of(url) == "gitlab":
            async with GitLabClient(settings) as gitlab:
                yield None, gitlab
        else:
            async with self.github(settings, installation_id) as github:
                yield github, None
