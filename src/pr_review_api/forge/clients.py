"""The process's one API client per forge (a connection pool and the credentials each).

The HTTP service opens them for its life and lends them to every review it runs (and to its
webhook routes); a review reaches the one its change's URL names (forge/select.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pr_review_api.github.client import GitHubClient
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.settings import Settings


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
