"""What the Gitea tests share: a client of the fake Gitea and the pull request's URLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef, parse_pull_request_url
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea

PATH = "acme/widget"
REVIEWER = "review-bot"


def client_for(fake: FakeGitea, token: str | None = GITEA_TOKEN, **overrides: Any) -> GiteaClient:
    """A client of `fake`; GITEA_TOKEN signs in as REVIEWER, a writer of PATH."""
    fake.add_token(GITEA_TOKEN, REVIEWER)
    fake.grant(PATH, REVIEWER, "write")
    return GiteaClient(fake.settings(Path("unused"), token=token, **overrides))


def pull_ref(fake: FakeGitea, index: int = 3, path: str = PATH) -> PullRequestRef:
    settings = fake.settings(Path("unused"))
    return parse_pull_request_url(f"{fake.server_url}/{path}/pulls/{index}", settings)
