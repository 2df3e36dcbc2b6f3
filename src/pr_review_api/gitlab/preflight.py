"""Whether a review may be published on a merge request, asked before the model is (specification
§§10, 17), as github/preflight.py asks it of GitHub.

No token at all is a configuration error. A token GitLab refuses (`GET /user` answers 401), or
one without the scope to read the user (403: a token with the `api` scope, which posting notes
needs, may always read it) cannot publish: a publication failure, before any review is paid for.
"""

from __future__ import annotations

from pr_review_api.errors import ConfigurationError, GitLabPublishNotPossible
from pr_review_api.gitlab.client import GitLabClient

NEEDS_CREDENTIALS = (
    "Publishing on a GitLab merge request needs GITLAB_TOKEN with the api scope; "
    "nothing was reviewed."
)
REFUSED = "GitLab refused the token (401); nothing was reviewed or published."
NO_SCOPE = (
    "The token may not post on GitLab (403: it needs the api scope); nothing was reviewed or "
    "published."
)
MAX_USER_BYTES = 256 * 1024


async def ensure_can_publish(gitlab: GitLabClient) -> None:
    """Raise `ConfigurationError` (no token) or `GitLabPublishNotPossible` (refused) before any
    provider request; return when publishing may work (GitLab decides at the end)."""
    if gitlab.anonymous:
        raise ConfigurationError(NEEDS_CREDENTIALS)
    user = await gitlab.request("GET", gitlab.api_url("/user"), limit=MAX_USER_BYTES)
    if user.status == 401:
        raise GitLabPublishNotPossible(REFUSED)
    if user.status == 403:
        raise GitLabPublishNotPossible(NO_SCOPE)
