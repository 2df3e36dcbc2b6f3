"""How git reaches GitLab over HTTP: a fetch's configuration, the token as `oauth2` credentials.

GitLab takes a token over git's smart HTTP as basic credentials `oauth2:<token>`. They go to
git as an `http.<origin>/.extraHeader` entry of `GitConfig.secret` (the environment's
`GIT_CONFIG_*`: never an argument, a file or a log), scoped to `GITLAB_SERVER_URL`'s origin,
and redirects are not followed (github/git_http.py), so the header reaches no other host.
"""

from __future__ import annotations

from pydantic import SecretStr

from pr_review_api.fetch.git_http import basic_fetch_config, origin_of
from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings


def server_origin(settings: Settings) -> str:
    """`scheme://host[:port]` of `GITLAB_SERVER_URL` (a self-managed one may have a path)."""
    return origin_of(settings.gitlab_server_url)


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from GitLab, `token` (None: anonymous) scoped to its origin."""
    return basic_fetch_config(server_origin(settings), token, lambda secret: f"oauth2:{secret}")
