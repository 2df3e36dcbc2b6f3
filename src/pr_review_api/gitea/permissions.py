"""Who may write on a Gitea (or Forgejo) repository (specification §§15, 19): the one lookup behind
both the comment commands (service/gitea_webhooks.py) and the dismissals (gitea/dismissals.py).

`GET /repos/{owner}/{repo}/collaborators/{user}/permission` (routers/api/v1/repo/collaborators.go,
`GetRepoPermissions`) answers `{"permission": "none" | "read" | "write" | "admin" | "owner"}`;
`write` or higher is a writer. Gitea answers it only to a repository admin (or to a user asking
about itself): any other token gets 403. So a 403 is "unknown", never a yes: nobody else is a
writer then (every command but the pull request author's questions is ignored, and no `-1`
dismisses), and docs/gitea.md says to give the bot's account admin access to the repository
(or a team with admin access to it). A 404 (no such user) and a 401 are a no as well; any other
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


async def may_write(
    gitea: GiteaClient, ref: PullRequestRef, login: str, cache: PermissionCache
) -> bool:
    """Whether `login` has write access (or more) to the pull request's repository, as Gitea
    says, kept in `cache`; a lookup Gitea refuses (403: our token is not a repository admin)
    is no."""
    return await cache.answer(
        ref.dismissals_key, login.lower(), lambda: _may_write(gitea, ref, login)
    )


async def _may_write(gitea: GiteaClient, ref: PullRequestRef, login: str) -> bool:
    # One escaped path piece, whatever the login holds.
    url = ref.repo_api_url(f"/collaborators/{quote(login, safe='')}/permission")
    response = await gitea.request("GET", url, limit=MAX_PERMISSION_BYTES)
    if response.status == 403:
        logger.warning(
            "Gitea refused the collaborator-permission lookup: the token's account is not an "
            "admin of the repository, so nobody counts as a writer"
        )
        return False
    if response.status in (401, 404):
        return False
    if not 200 <= response.status < 300:
        raise GiteaUnavailable("Gitea did not say who may write.")
    document = response.json()
    permission = document.get("permission") if isinstance(document, dict) else None
    return isinstance(permission, str) and permission.lower() in WRITERS
