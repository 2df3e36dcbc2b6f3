"""A Gitea pull request fetched into the shared repository cache (gitea/checkout.py): the
pull request's revisions from its metadata, `refs/pull/N/head` over smart HTTP on a server under
a path prefix and a port, the token as basic credentials in git's environment and nowhere else.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from pr_review_api.errors import InvalidPullRequestUrl, PullRequestNotFound
from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.git_runner import run_git
from pr_review_api.gitea.checkout import open_pull_request
from pr_review_api.gitea.git_http import TOKEN_PASSWORD
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea
from tests.gitea.support import PATH, REVIEWER
from tests.github.support import Launch, assert_token_kept_out

BASIC = base64.b64encode(f"{GITEA_TOKEN}:{TOKEN_PASSWORD}".encode()).decode()
TOKEN_FORMS = (GITEA_TOKEN, BASIC)


async def opened(url: str, settings: Settings) -> PreparedChange:
    async with open_pull_request(url, settings) as prepared:
        return prepared


@pytest.mark.anyio
async def test_the_token_reaches_the_api_and_git_and_nothing_else(
    fake_gitea: FakeGitea,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    launches: list[Launch],
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_gitea.add_token(GITEA_TOKEN, REVIEWER)
    fake_gitea.grant(PATH, REVIEWER, "read")
    pull = fake_gitea.pull_request(
        PATH, 3, base={"a.py": "one\n"}, head={"a.py": "two\n"}, private=True
    )
    cache_dir = tmp_path / "cache"
    settings = fake_gitea.settings(cache_dir, token=GITEA_TOKEN)
    prepared = await opened(pull.url + "/files", settings)
    assert prepared.info.forge == "gitea"
    assert prepared.info.url == pull.url
    metadata = prepared.metadata
    assert (metadata.base_sha, metadata.head_sha) == (pull.base_sha, pull.head_sha)
    assert metadata.diff_base_sha == pull.merge_base
    for sha in (pull.base_sha, pull.head_sha):
        found = run_git(prepared.git_dir, ["cat-file", "-e", f"{sha}^{{commit}}"], check=False)
        assert found.returncode == 0
    with pytest.raises(PullRequestNotFound):
        await opened(pull.url.replace("/pulls/3", "/pulls/9"), settings)
    # Sent: as `token` to the API, as basic credentials to git, in no path or query.
    assert {r.authorization for r in fake_gitea.api_requests()} == {f"token {GITEA_TOKEN}"}
    assert {r.authorization for r in fake_gitea.git_requests()} == {f"Basic {BASIC}"}
    assert_token_kept_out(
        TOKEN_FORMS,
        origin=fake_gitea.origin,
        launches=launches,
        records=caplog.records,
        cache=cache_dir,
        requests=fake_gitea.requests,
    )


@pytest.mark.anyio
async def test_a_url_on_another_host_is_refused_before_any_request(
    fake_gitea: FakeGitea, tmp_path: Path
) -> None:
    settings = fake_gitea.settings(tmp_path / "cache", token=GITEA_TOKEN)
    elsewhere = f"http://127.0.0.2:{fake_gitea.port}/git/{PATH}/pulls/3"
    with pytest.raises(InvalidPullRequestUrl):
        await opened(elsewhere, settings)
    assert fake_gitea.requests == []
