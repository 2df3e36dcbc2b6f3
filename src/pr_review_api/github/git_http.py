"""How git reaches GitHub over HTTP: the token as basic credentials (`x-access-token`), in the
header fetch/git_http.py scopes to the configured server's origin.
"""

from __future__ import annotations

from pydantic import SecretStr

from pr_review_api.fetch.git_http import basic_fetch_config
from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from the configured server, `token` (None: anonymous) scoped
    to its origin."""
    return basic_fetch_config(
        settings.github_server_url, token, lambda secret: f"x-access-token:{secret}"
    )
