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

import base64
from urllib.parse import urlsplit

from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError
from pr_review_api.git_runner import GitConfig
from pr_review_api.github.git_http import scoped_fetch_config
from pr_review_api.settings import Settings

TOKEN_PASSWORD = "x-oauth-basic"  # noqa: S105  (Gitea's marker that the user name is the token)


def server_origin(settings: Settings) -> str:
    """`scheme://host[:port]` of `GITEA_SERVER_URL` (a self-hosted one may have a path)."""
    if settings.gitea_server_url is None:
        raise ConfigurationError("No Gitea server is configured; set GITEA_SERVER_URL.")
    parts = urlsplit(settings.gitea_server_url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from Gitea, `token` (None: anonymous) scoped to its origin."""
    authorization = None
    if token is not None:
        credentials = f"{token.get_secret_value()}:{TOKEN_PASSWORD}".encode()
        authorization = f"Authorization: Basic {base64.b64encode(credentials).decode('ascii')}"
    return scoped_fetch_config(server_origin(settings), authorization)
