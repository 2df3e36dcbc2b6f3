"""Where the GitHub client's token comes from: a provider object, never settings read inline.

`Credentials` is the interface every provider implements:

- `token(installation_id)`: the bearer token for a request, or None (anonymous, public
  repositories only). A personal or workflow token ignores `installation_id`; a GitHub App
  provider (issue 12) returns that installation's token, minted and cached until shortly
  before it expires.
- `app_login()`: the App's bot login, `<slug>[bot]`, which is the publishing identity whose
  markers count (CONTRACT section 10); None for a plain token, whose identity the client asks
  `GET /user` for.

Tokens are `SecretStr` until the one line that builds the Authorization header, and reach only
`GITHUB_API_URL`'s origin (the client refuses any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import SecretStr

from pr_review_api.settings import Settings


@runtime_checkable
class Credentials(Protocol):
    """A source of GitHub API tokens (see the module docstring)."""

    async def token(self, installation_id: int | None = None) -> SecretStr | None:
        """The token for requests made on behalf of `installation_id` (None: the default)."""
        ...

    async def app_login(self) -> str | None:
        """`<slug>[bot]` when the tokens are a GitHub App's; None otherwise."""
        ...


@dataclass(frozen=True)
class TokenCredentials:
    """One fixed token (`GITHUB_TOKEN`: a personal or a workflow token), or none at all."""

    secret: SecretStr | None

    async def token(self, installation_id: int | None = None) -> SecretStr | None:
        return self.secret

    async def app_login(self) -> str | None:
        return None

    def __repr__(self) -> str:
        return "TokenCredentials(secret=" + ("'**********'" if self.secret else "None") + ")"


def credentials_from_settings(settings: Settings) -> Credentials:
    """The provider the settings describe: `GITHUB_TOKEN` today (App credentials: issue 12)."""
    return TokenCredentials(settings.github_token)
