"""How git reaches GitHub over HTTP: the token as basic credentials (`x-access-token`), in the
header fetch/git_http.py scopes to the configured server's origin.
"""

from __future__ import annotations

import base64

from pydantic import SecretStr

from pr_review_api.fetch.git_http import scoped_fetch_config
from pr_review_api.git_runner import GitConfig
from pr_review_api.settings import Settings


def fetch_config(settings: Settings, token: SecretStr | None) -> GitConfig:
    """Configuration for a fetch from the configured server, `token` (None: anonymous) scoped
    to its origin."""
    authorization = None
    if token is not None:
        secret_value = token.get_secret_value()
        basic = base64.b64encode(f"x-access-token:{secret_value}".encode()).decode("ascii")
        authorization = f"Authorization: Basic {basic}"
    return scoped_fetch_config(settings.github_server_url, authorization)
