"""The forge of a review's change, chosen by its URL (forge/urls.py's rule), with its client.

The callers (the CLI, the service, a job) hold clients for the review's identity and lend them
(`ForgeClients`, at most one per forge); where the change's forge has none, it gets a client of
its own with the settings' token, closed when the review ends. A lent client is never closed
here. This module is where a forge is registered: its URL's rule (forge/urls.py's `forge_of`),
its `ChangeForge` and its `ChangeConversation`.

A command job's conversation (`open_conversation`) is chosen the same way, with a client of
the job's identity (forge/clients.py's `JobIdentities`), closed when the job ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pr_review_api.forge.base import ChangeForge
from pr_review_api.forge.clients import ForgeClients, JobIdentities
from pr_review_api.forge.conversation import ChangeConversation, CommandRecord
from pr_review_api.forge.github import GitHubForge
from pr_review_api.forge.github_conversation import GitHubConversation
from pr_review_api.forge.gitlab import GitLabForge
from pr_review_api.forge.gitlab_conversation import GitLabConversation
from pr_review_api.forge.urls import forge_of
from pr_review_api.github.client import GitHubClient
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.settings import Settings


@asynccontextmanager
async def open_forge(
    url: str,
    settings: Settings,
    *,
    clients: ForgeClients | None = None,
) -> AsyncIterator[ChangeForge]:
    """The forge `url` names, speaking through the caller's client or one of its own."""
    lent = clients or ForgeClients()
    github, gitlab = lent.of(GitHubClient), lent.of(GitLabClient)
    if forge_of(url) == "gitlab":
        if gitlab is not None:
            yield GitLabForge(settings, gitlab)
            return
        async with GitLabClient(settings) as own_gitlab:
            yield GitLabForge(settings, own_gitlab)
        return
    if github is not None:
        yield GitHubForge(settings, github)
        return
    async with GitHubClient(settings) as own_github:
        yield GitHubForge(settings, own_github)


@asynccontextmanager
async def open_conversation(
    record: CommandRecord, settings: Settings, identities: JobIdentities
) -> AsyncIterator[ChangeConversation]:
    """The conversation of a command job's change, through a client of the job's identity."""
    command = record.command or {}
    url = record.pull_request_url
    if forge_of(url) == "gitlab":
        ref = parse_merge_request_url(url, settings)
        async with GitLabClient(settings) as gitlab:
            yield GitLabConversation(gitlab, ref, command)
        return
    async with identities.github(settings, record.installation_id) as github:
        yield GitHubConversation(github, record.owner, record.repo, record.number, command)
