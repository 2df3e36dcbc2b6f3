"""Where a forge is registered, and the forge of a change chosen by its URL (forge/urls.py's
rule) with its client.

`FORGES` holds one `RegisteredForge` per forge: its API client's type, its `ChangeForge`, the
client a job of its changes speaks through, and its `ChangeComments`. Everything below
picks from it by the change's URL, so a new forge is its own modules, an entry here and its URL
rule in forge/urls.py; loop/, jobs/ and service/ name none.

The callers (the CLI, the service, a job) hold clients for the review's identity and lend them
(`ForgeClients`, at most one per forge); where the change's forge has none, it gets a client of
its own with the settings' token, closed when the review ends. A lent client is never closed
here. A command job's comments (`open_comments`) and a job's review (`job_clients`) get
a client of the job's identity (forge/clients.py's `JobIdentities`), closed when the job ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pr_review_api.forge.base import ChangeForge
from pr_review_api.forge.clients import ForgeClients, JobIdentities
from pr_review_api.forge.comments import ChangeComments, CommandRecord
from pr_review_api.forge.gitea import GiteaForge
from pr_review_api.forge.gitea_comments import GiteaComments
from pr_review_api.forge.github import GitHubForge
from pr_review_api.forge.github_comments import GitHubComments
from pr_review_api.forge.gitlab import GitLabForge
from pr_review_api.forge.gitlab_comments import GitLabComments
from pr_review_api.forge.urls import forge_of, route
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import parse_pull_request_url as parse_gitea_url
from pr_review_api.github.client import GitHubClient
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.http.api_client import ApiClient
from pr_review_api.model import Forge
from pr_review_api.settings import Settings


@dataclass(frozen=True)
class RegisteredForge:
    """What forge/ knows of one forge. Each callable takes the forge's own client type."""

    name: Forge
    client_type: type[ApiClient]  # made with the settings' token: `client_type(settings)`
    change_forge: Callable[[Settings, Any], ChangeForge]
    # The client of a job's identity: (identities, settings, installation id).
    job_client: Callable[
        [JobIdentities, Settings, int | None], AbstractAsyncContextManager[ApiClient]
    ]
    # A command job's comments: (client, record, settings, the delivery's command).
    comments: Callable[[Any, CommandRecord, Settings, dict[str, Any]], ChangeComments]
    # Whether the settings name this forge's server: a client is made only then.
    configured: Callable[[Settings], bool] = lambda settings: True


def _github_comments(
    github: GitHubClient, record: CommandRecord, settings: Settings, command: dict[str, Any]
) -> ChangeComments:
    return GitHubComments(github, record.owner, record.repo, record.number, command)


def _gitlab_comments(
    gitlab: GitLabClient, record: CommandRecord, settings: Settings, command: dict[str, Any]
) -> ChangeComments:
    ref = parse_merge_request_url(record.pull_request_url, settings)
    return GitLabComments(gitlab, ref, command)


def _gitea_comments(
    gitea: GiteaClient, record: CommandRecord, settings: Settings, command: dict[str, Any]
) -> ChangeComments:
    ref = parse_gitea_url(record.pull_request_url, settings)
    return GiteaComments(gitea, ref, command)


FORGES: tuple[RegisteredForge, ...] = (
    RegisteredForge(
        "github",
        GitHubClient,
        GitHubForge,
        # A pull request's job is its App installation's, or GITHUB_TOKEN's.
        lambda identities, settings, installation: identities.github(settings, installation),
        _github_comments,
    ),
    RegisteredForge(
        "gitlab",
        GitLabClient,
        GitLabForge,
        # GitLab has no App installations: every merge request's job is GITLAB_TOKEN's.
        lambda identities, settings, installation: GitLabClient(settings),
        _gitlab_comments,
    ),
    RegisteredForge(
        "gitea",
        GiteaClient,
        GiteaForge,
        # Gitea has no App installations: every pull request's job is GITEA_TOKEN's.
        lambda identities, settings, installation: GiteaClient(settings),
        _gitea_comments,
        # Unset GITEA_SERVER_URL: no URL is routed to Gitea, and no client is made.
        lambda settings: settings.gitea_server_url is not None,
    ),
)


def registered(url: str, settings: Settings | None = None) -> RegisteredForge:
    """The registered forge of a URL: of any URL as forge/urls.py's `route` sends it (with
    `settings`), else of one that passed `parse_change_url` (a job's stored URL)."""
    name = forge_of(url) if settings is None else route(url, settings)
    return next(forge for forge in FORGES if forge.name == name)


@asynccontextmanager
async def open_clients(settings: Settings) -> AsyncIterator[ForgeClients]:
    """One client per registered forge with the settings' tokens, closed at exit. A pool opens
    on its forge's first request, so a service without GitLab never connects to it; a forge
    whose server the settings do not name (Gitea's) gets none."""
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(f.client_type(settings))
            for f in FORGES
            if f.configured(settings)
        ]
        yield ForgeClients(tuple(clients))


@asynccontextmanager
async def job_clients(
    identities: JobIdentities, settings: Settings, installation_id: int | None, url: str
) -> AsyncIterator[ForgeClients]:
    """The client a job's review of `url` speaks through: its forge's, of the job's identity."""
    async with registered(url).job_client(identities, settings, installation_id) as client:
        yield ForgeClients((client,))


@asynccontextmanager
async def open_forge(
    url: str,
    settings: Settings,
    *,
    clients: ForgeClients | None = None,
) -> AsyncIterator[ChangeForge]:
    """The forge `url` names, speaking through the caller's client or one of its own."""
    forge = registered(url, settings)
    lent = (clients or ForgeClients()).of(forge.client_type)
    if lent is not None:
        yield forge.change_forge(settings, lent)
        return
    async with forge.client_type(settings) as own:
        yield forge.change_forge(settings, own)


@asynccontextmanager
async def open_comments(
    record: CommandRecord, settings: Settings, identities: JobIdentities
) -> AsyncIterator[ChangeComments]:
    """The comments of a command job's change, through a client of the job's identity."""
    forge = registered(record.pull_request_url)
    async with forge.job_client(identities, settings, record.installation_id) as client:
        yield forge.comments(client, record, settings, record.command or {})
