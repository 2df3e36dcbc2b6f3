"""How git reaches GitLab over HTTP: a fetch's configuration, the token as `oauth2` credentials.

GitLab takes a token over git's smart HTTP as basic credentials `oauth2:<token>`. They go to
git as an `http.<origin>/.extraHeader` entry of `GitConfig.secret` (the environment's
`GIT_CONFIG_*`: never an argument, a file or a log), scoped to `GITLAB_SERVER_URL`'s origin,
and redirects are not followed (github/git_http.py), so the header reaches no other host.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

from pydantic import SecretStr

from pr_review_api.fetch.git_http import scoped_fetch_config
from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings


def server_origin(settings: Settings) -> str:
    """`scheme://host[:port]` of `GITLAB_SERVER_URL` (a self-managed one may have a path)."""
    parts = urlsplit(settings.gitlab_server_url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from GitLab, `token` (None: anonymous) scoped to its origin."""
    authorization = None
    if token is not None:
        credentials = f"oauth2:{token.get_secret_value()}".encode()
        authorization = f"Authorization: Basic {base64.b64encode(credentials).decode('ascii')}"
    return scoped_fetch_config(server_origin(settings), authorization)
