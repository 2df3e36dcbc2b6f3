"""Who may ask a command on a Gitea (or Forgejo) pull request (CONTRACT 15, 19).

`GET /repos/{owner}/{repo}/collaborators/{user}/permission` (routers/api/v1/repo/collaborators.go,
`GetRepoPermissions`) answers `{"permission": "none" | "read" | "write" | "admin" | "owner"}`;
`write` or higher may ask. Gitea answers it only to a repository admin (or to a user asking
about itself): any other token gets 403. So a 403 is "unknown", never a yes: every command but
the pull request author's questions is then ignored, and docs/gitea.md says to give the bot's
account admin access to the repository (or to make it a member of an organisation team with
admin access) for commands to work. A 404 (no such user) and a 401 are a no as well; any other
failure is `GiteaUnavailable`.

The answers are kept briefly in the holder's `PermissionCache` (permissions.py) under the
repository's `gitea:` key, so a GitHub repository of the same name never shares them.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.permissions import PermissionCache

logger = logging.getLogger(__name__)

WRITERS = frozenset({"write", "admin", "owner"})
MAX_PERMISSION_BYTES = 64 * 1024


class Collaborators:
    """`may_ask` with its answers kept in a `PermissionCache`: the holder's (the job queue's,
    shared by the webhook route and the worker), else one of its own."""

    def __init__(self, cache: PermissionCache | None = None) -> None:
        self.cache = cache or PermissionCache()

    async def may_ask(self, client: GiteaClient, ref: PullRequestRef, login: str) -> bool:
        """Whether `login` has write access (or more) to the pull request's repository, as
        Gitea says; a lookup Gitea refuses (403: our token is not a repository admin) is no."""
        return await self.cache.answer(
            ref.dismissals_key, login, lambda: _may_ask(client, ref, login)
        )


async def _may_ask(client: GiteaClient, ref: PullRequestRef, login: str) -> bool:
    url = ref.repo_api_url(f"/collaborators/{quote(login, safe='')}/permission")
    response = await client.request("GET", url, limit=MAX_PERMISSION_BYTES)
    if response.status == 403:
        logger.warning(
            "Gitea refused the collaborator-permission lookup: the token's account is not an "
            "admin of the repository, so only the pull request author's questions are answered"
        )
        return False
    if response.status in (401, 404):
        return False
    if not 200 <= response.status < 300:
        raise GiteaUnavailable("Gitea did not say who may ask.")
    document = response.json()
    permission = document.get("permission") if isinstance(document, dict) else None
    return isinstance(permission, str) and permission.lower() in WRITERS
