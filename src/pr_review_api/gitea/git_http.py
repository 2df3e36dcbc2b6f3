"""How git reaches Gitea over HTTP: a fetch's configuration, the token as basic credentials.

Gitea's basic authentication (services/auth/basic.go) takes an access token as the user name
when the password is empty or `x-oauth-basic`, and then looks the user up by the token alone;
every Gitea and Forgejo version does so, whereas a token given as the password was checked
against the user name by older versions. So the credentials are `<token>:x-oauth-basic`. They
go to git as an `http.<origin>/.extraHeader` entry of `GitConfig.secret` (the environment's
`GIT_CONFIG_*`: never an argument, a file or a log), scoped to `GITEA_SERVER_URL`'s origin, and
redirects are not followed (github/git_http.py), so the header reaches no other host.
"""

from __future__ import annotations

from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError
from pr_review_api.fetch.git_http import basic_fetch_config, origin_of
from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings

TOKEN_PASSWORD = "x-oauth-basic"  # noqa: S105  (Gitea's marker that the user name is the token)


def server_origin(settings: Settings) -> str:
    """`scheme://host[:port]` of `GITEA_SERVER_URL` (a self-hosted one may have a path)."""
    if settings.gitea_server_url is None:
        raise ConfigurationError("No Gitea server is configured; set GITEA_SERVER_URL.")
    return origin_of(settings.gitea_server_url)


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from Gitea, `token` (None: anonymous) scoped to its origin."""
    return basic_fetch_config(
        server_origin(settings), token, lambda secret: f"{secret}:{TOKEN_PASSWORD}"
    )
