"""How git reaches a forge over HTTP: the configuration of a fetch from a forge's server.

The credentials go to git as an `http.<server>/.extraHeader` entry of `GitConfig.secret` (the
environment's `GIT_CONFIG_*`, never an argument, a file or a log), scoped to the server's
origin, and redirects are not followed, so the header never reaches another host. Each forge
says how its token becomes the header (github/git_http.py, gitlab/git_http.py,
gitea/git_http.py; `basic_fetch_config` for basic credentials).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from urllib.parse import urlsplit

from pydantic import SecretStr

from pr_review_api.git_runner import GitConfig

HTTP_LOW_SPEED_LIMIT = 1000  # bytes per second ...


HTTP_LOW_SPEED_TIME = 60  # ... for this many seconds, and the fetch is abandoned


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


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url` (a self-hosted server's URL may have a path)."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def basic_fetch_config(
    server: str, token: SecretStr | None, credentials: Callable[[str], str]
) -> GitConfig:
    """`scoped_fetch_config` with `token` (None: anonymous) sent as basic credentials, which
    `credentials` makes of it in the forge's own form (`user:password`)."""
    authorization = None
    if token is not None:
        basic = base64.b64encode(credentials(token.get_secret_value()).encode()).decode("ascii")
        authorization = f"Authorization: Basic {basic}"
    return scoped_fetch_config(server, authorization)
