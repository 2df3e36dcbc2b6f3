"""Who the service is on GitHub: `credentials_for` decides it, once, for a client to be bound to.

`credentials_for(settings, installation_id, app=...)` is the one place that chooses between the
configured token and a GitHub App installation's token. A `GitHubClient` is made with the
`Credentials` it returns and every request, the pull request's fetch and the publishing
identity follow from them, so no caller below the job passes an installation id.

`Credentials` is the interface every provider implements:

- `token()`: the bearer token for a request, or None (anonymous, public repositories only).
  A personal or workflow token is fixed; an App installation's (`InstallationCredentials`) is
  minted and cached by the process's `AppCredentials` until shortly before it expires.
- `app_login()`: the App's bot login, `<slug>[bot]`, which is the publishing identity whose
  markers count (specification §10); None for a plain token, whose identity the client asks
  `GET /user` for.

Tokens are `SecretStr` until the one line that builds a header, and reach only
`GITHUB_API_URL`'s origin (the client refuses any other) or `GITHUB_SERVER_URL`'s for a fetch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import SecretStr

from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.settings import Settings


@runtime_checkable
class Credentials(Protocol):
    """A source of GitHub API tokens for one identity (see the module docstring)."""

    async def token(self) -> SecretStr | None:
        """The token of this identity's requests; None: anonymous."""
        ...

    async def app_login(self) -> str | None:
        """`<slug>[bot]` when the tokens are a GitHub App's; None otherwise."""
        ...


@dataclass(frozen=True)
class TokenCredentials:
    """One fixed token (`GITHUB_TOKEN`: a personal or a workflow token), or none at all."""

    secret: SecretStr | None

    async def token(self) -> SecretStr | None:
        return self.secret

    async def app_login(self) -> str | None:
        return None

    def __repr__(self) -> str:
        return "TokenCredentials(secret=" + ("'**********'" if self.secret else "None") + ")"


@dataclass(frozen=True)
class InstallationCredentials:
    """One installation of the GitHub App: its token, minted and cached by the process's App."""

    app: AppCredentials
    installation_id: int

    async def token(self) -> SecretStr | None:
        return await self.app.token(self.installation_id)

    async def app_login(self) -> str | None:
        return await self.app.app_login()


def credentials_for(
    settings: Settings, installation_id: int | None = None, *, app: AppCredentials | None = None
) -> Credentials:
    """Who a client is on GitHub: the App `installation_id` (a webhook's job, when the process
    has the App's credentials), else `GITHUB_TOKEN` (or anonymous without one)."""
    if app is not None and installation_id is not None:
        return InstallationCredentials(app, installation_id)
    return TokenCredentials(settings.github_token)
