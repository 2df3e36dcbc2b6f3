"""Whether a review may be published on a Gitea pull request, asked before the model is
(specification §§10, 19), as github/preflight.py asks it of GitHub.

No token at all is a configuration error. A token Gitea refuses (`GET /user` answers 401), or
one whose user may not write to the repository (`GET /repos/{owner}/{repo}`, `repoGet`: its
`permissions.push` is false; reviews and the commit status both need write access) cannot
publish: `gitea_publish_failed`, before any review is paid for. Any other answer lets the
review go on: Gitea decides at the end.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import ConfigurationError, GiteaPublishNotPossible
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef

NEEDS_CREDENTIALS = (
    "Publishing on a Gitea pull request needs GITEA_TOKEN with write access to the "
    "repository; nothing was reviewed."
)
REFUSED = "Gitea refused the token (401); nothing was reviewed or published."
NO_WRITE = (
    "The token's user may not write to the repository on Gitea (it needs write access); "
    "nothing was reviewed or published."
)
MAX_ANSWER_BYTES = 256 * 1024


class _Permissions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    push: bool = False


class _RepositoryWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    permissions: _Permissions | None = None


async def ensure_can_publish(gitea: GiteaClient, ref: PullRequestRef) -> None:
    """Raise `ConfigurationError` (no token) or `GiteaPublishNotPossible` (refused, or no
    write access) before any provider request; return when publishing may work."""
    if gitea.anonymous:
        raise ConfigurationError(NEEDS_CREDENTIALS)
    user = await gitea.request("GET", gitea.api_url("/user"), limit=MAX_ANSWER_BYTES)
    if user.status == 401:
        raise GiteaPublishNotPossible(REFUSED)
    repository = await gitea.request("GET", ref.repo_api_url(), limit=MAX_ANSWER_BYTES)
    if repository.status != 200:
        return
    try:
        permissions = _RepositoryWire.model_validate_json(repository.body).permissions
    except ValidationError:
        return
    if permissions is not None and not permissions.push:
        raise GiteaPublishNotPossible(NO_WRITE)
