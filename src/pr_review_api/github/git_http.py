"""How git reaches the forge over HTTP: the configuration of a fetch from the configured server.

The token goes to git as an `http.<server>/.extraHeader` entry of `GitConfig.secret` (the
environment's `GIT_CONFIG_*`, never an argument, a file or a log), scoped to the server's
origin, and redirects are not followed, so the header never reaches another host.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

from pydantic import SecretStr

from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings

HTTP_LOW_SPEED_LIMIT = 1000  # bytes per second ...
HTTP_LOW_SPEED_TIME = 60  # ... for this many seconds, and the fetch is abandoned


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from the configured server, `token` (None: anonymous) scoped
    to its origin."""
    authorization = None
    if token is not None:
        secret_value = token.get_secret_value()
        basic = base64.b64encode(f"x-access-token:{secret_value}".encode()).decode("ascii")
        authorization = f"Authorization: Basic {basic}"
    return scoped_fetch_config(settings.github_server_url, authorization)


def scoped_fetch_config(server: str, authorization: str | None) -> GitConfig:
    """Configuration for a fetch from `server` (a forge's web URL), with the `authorization`
    header (None: anonymous) sent only to URLs under `server`, and never after a redirect."""
    values = (
        ("http.followRedirects", "false"),  # a redirect could carry the header elsewhere
        ("http.proxy", ""),
        ("http.lowSpeedLimit", str(HTTP_LOW_SPEED_LIMIT)),
        ("http.lowSpeedTime", str(HTTP_LOW_SPEED_TIME)),
        ("protocol.version", "2"),
        ("fetch.writeCommitGraph", "false"),
        ("fetch.showForcedUpdates", "false"),
        ("core.logAllRefUpdates", "false"),
    )
    secret: tuple[tuple[str, str], ...] = ()
    if authorization is not None:
        secret = ((f"http.{server}/.extraHeader", authorization),)
    scheme = urlsplit(server).scheme.lower()
    return GitConfig(values=values, secret=secret, allowed_protocols=(scheme,))
