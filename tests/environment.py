"""The settings a test gives the program through its environment, as a user would.

`review_variables()` names them, `process_environment()` adds them to the rest of this
process's environment for a process a test starts; the `environment` fixture sets them on this
process for one test (pytest's monkeypatch undoes it), and `github_cli` sets those of a review
of the fake GitHub's pull requests with the scripted provider. The autouse
`clean_environment` of tests/conftest.py has already cleared every variable of ours, so what a
test sets is all there is. Registered in tests/conftest.py's `pytest_plugins`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import pytest

from tests.conftest import (
    BOT,
    GITEA_TOKEN,
    GITHUB_TOKEN,
    GITLAB_TOKEN,
    OUR_VARIABLES,
    PROVIDER_KEY,
)
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider

# Not ours, but read by the metrics of whichever process inherits it.
_INHERITED_NEVER = (*OUR_VARIABLES, "PROMETHEUS_")


class Provider(Protocol):
    """The scripted provider (tests/fakes/provider_server.py), as far as settings go."""

    @property
    def base_url(self) -> str: ...


class Forge(Protocol):
    """A fake forge (GitHub, GitLab, Gitea), as far as settings go."""

    server_url: str
    api_url: str


def review_variables(
    provider: Provider | None = None,
    *,
    github: Forge | None = None,
    gitlab: Forge | None = None,
    gitea: Forge | None = None,
    cache: Path | None = None,
    retries: int | None = None,
    timeout: int | None = None,
    **variables: str | None,
) -> dict[str, str]:
    """The provider's key and URL, a fake forge's URLs and our token on it, the cache folder,
    the provider's retries and the review's deadline, then any `variables` by their names
    (`REVIEW_SUGGESTIONS="true"`; None leaves one out)."""
    values: dict[str, str | None] = {}
    if provider is not None:
        values |= {"OPENCODE_API_KEY": PROVIDER_KEY, "OPENCODE_BASE_URL": provider.base_url}
    if retries is not None:
        values["OPENCODE_MAX_RETRIES"] = str(retries)
    if timeout is not None:
        values["REVIEW_TIMEOUT_SECONDS"] = str(timeout)
    if github is not None:
        values |= {
            "GITHUB_TOKEN": GITHUB_TOKEN,
            "GITHUB_SERVER_URL": github.server_url,
            "GITHUB_API_URL": github.api_url,
        }
    if gitlab is not None:
        values |= {"GITLAB_SERVER_URL": gitlab.server_url, "GITLAB_TOKEN": GITLAB_TOKEN}
    if gitea is not None:
        values |= {"GITEA_SERVER_URL": gitea.server_url, "GITEA_TOKEN": GITEA_TOKEN}
    if cache is not None:
        values["PR_REVIEW_CACHE_DIR"] = str(cache)
    values |= variables
    return {name: value for name, value in values.items() if value is not None}


def process_environment(variables: Mapping[str, str]) -> dict[str, str]:
    """The environment of a process a test starts: this one's without any variable of ours (nor
    the metrics' folder), then `variables` (`review_variables()`, say)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_NEVER)}
    return kept | dict(variables)


class Environment:
    """Sets `review_variables()` on this process for one test; a None unsets a variable."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch

    def __call__(
        self,
        provider: Provider | None = None,
        *,
        github: Forge | None = None,
        gitlab: Forge | None = None,
        gitea: Forge | None = None,
        cache: Path | None = None,
        retries: int | None = None,
        timeout: int | None = None,
        **variables: str | None,
    ) -> dict[str, str]:
        values = review_variables(
            provider,
            github=github,
            gitlab=gitlab,
            gitea=gitea,
            cache=cache,
            retries=retries,
            timeout=timeout,
        )
        return self.set(values | variables)

    def set(self, variables: Mapping[str, str | None]) -> dict[str, str]:
        """Set `variables` as they are (a None unsets one); those set."""
        for name, value in variables.items():
            if value is None:
                self._monkeypatch.delenv(name, raising=False)
            else:
                self._monkeypatch.setenv(name, value)
        return {name: value for name, value in variables.items() if value is not None}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Environment:
    """`environment(scripted_provider, github=fake_github, REVIEW_SUGGESTIONS="true")`."""
    return Environment(monkeypatch)


@pytest.fixture
def github_cli(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> FakeGitHub:
    """The fake GitHub, where our token is `BOT`'s, and the settings of a `pr-review` run in this
    process pointed at it and at the scripted provider (one request per failure, 30 s a review)."""
    fake_github.users.setdefault(GITHUB_TOKEN, BOT)
    environment(
        scripted_provider, github=fake_github, cache=tmp_path / "cache", retries=0, timeout=30
    )
    return fake_github
