"""Whether a review may be published at all, asked before the model is (specification §§10, 15).

A `--post` (or a published job) that cannot publish must not pay for a review first: no token
at all is a configuration error; a token GitHub refuses (`GET /user` answers 401), or a
repository answer whose `permissions` say no `push`, is a publication failure. A GitHub App's
installation token is the installation's own, so it is not asked about; a workflow token may
not read `/user` (403) and its repository answer may lack `permissions`: neither is a refusal.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import ConfigurationError, PublishNotPossible
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.urls import PullRequestRef

NEEDS_CREDENTIALS = (
    "Publishing needs GITHUB_TOKEN (or a GitHub App) with write access to pull requests; "
    "nothing was reviewed."
)
REFUSED = "GitHub refused the token (401); nothing was reviewed or published."
NO_WRITE = (
    "The token may not write to this repository's pull requests; nothing was reviewed or published."
)
MAX_REPOSITORY_BYTES = 1024 * 1024


class _Permissions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    push: bool = False
    maintain: bool = False
    admin: bool = False


class _RepositoryWire(BaseModel):
    model_config = ConfigDict(extra="ignore")

    permissions: _Permissions | None = None


async def ensure_can_publish(github: GitHubClient, ref: PullRequestRef) -> None:
    """Raise `ConfigurationError` (no token) or `PublishNotPossible` (refused) before any
    provider request; return when publishing may work (GitHub decides at the end)."""
    if await github.credentials.token() is None:
        raise ConfigurationError(NEEDS_CREDENTIALS)
    if await github.credentials.app_login() is not None:
        return
    user = await github.request("GET", github.api_url("/user"), limit=256 * 1024)
    if user.status == 401:
        raise PublishNotPossible(REFUSED)
    repository = await github.request(
        "GET",
        github.api_url(f"/repos/{ref.owner}/{ref.repo}"),
        limit=MAX_REPOSITORY_BYTES,
    )
    if repository.status == 401:
        raise PublishNotPossible(REFUSED)
    if repository.status != 200:
        return  # not known here: the pull request's own requests say what is wrong
    try:
        permissions = _RepositoryWire.model_validate_json(repository.body).permissions
    except ValidationError:
        return
    if permissions is not None and not (
        permissions.push or permissions.maintain or permissions.admin
    ):
        raise PublishNotPossible(NO_WRITE)
