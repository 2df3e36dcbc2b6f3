"""How git reaches Gitea (gitea/git_http.py): a real `git fetch` of `refs/pull/<index>/head`
from the fake Gitea's private repository, with the token as basic credentials in git's
environment only, scoped to the server's origin, never in a command line, a URL or a file."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from pr_review_api.errors import ConfigurationError
from pr_review_api.git_runner import run_git
from pr_review_api.gitea.git_http import fetch_config, server_origin
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.github.support import Launch, config_of, files_under, our_git
from tests.gitrepo import git

PATH = "acme/secret"
CREDENTIALS = base64.b64encode(f"{GITEA_TOKEN}:x-oauth-basic".encode()).decode()
TOKEN_FORMS = (GITEA_TOKEN, CREDENTIALS, base64.b64encode(GITEA_TOKEN.encode()).decode()[:20])


def private_pull(fake: FakeGitea) -> PullFixture:
    fake.add_token(GITEA_TOKEN, "review-bot")
    fake.grant(PATH, "review-bot", "read")
    return fake.pull_request(PATH, 3, base={"a.py": "one\n"}, head={"a.py": "two\n"}, private=True)


def bare(tmp_path: Path) -> Path:
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    return git_dir


def test_the_pull_requests_head_is_fetched_with_the_token_in_the_environment_only(
    fake_gitea: FakeGitea, tmp_path: Path, launches: list[Launch]
) -> None:
    pull = private_pull(fake_gitea)
    settings = fake_gitea.settings(tmp_path / "cache", token=GITEA_TOKEN)
    git_dir = bare(tmp_path)
    refspec = "+refs/pull/3/head:refs/pr-review/pull/3"
    run_git(
        git_dir,
        ["fetch", "--no-tags", "--end-of-options", f"{fake_gitea.server_url}/{PATH}.git", refspec],
        config=fetch_config(settings, settings.gitea_token),
    )
    fetched = git(git_dir, "rev-parse", "refs/pr-review/pull/3")
    assert fetched == pull.head_sha
    # Sent to git as basic credentials `<token>:x-oauth-basic`, on every git request.
    requests = fake_gitea.git_requests()
    assert requests
    assert {r.authorization for r in requests} == {f"Basic {CREDENTIALS}"}
    assert all(GITEA_TOKEN not in r.path + r.query for r in requests)
    (launch,) = our_git(launches)
    assert not any(form in arg for form in TOKEN_FORMS for arg in launch.argv)
    secret = [(k, v) for k, v in config_of(launch) if any(f in v for f in TOKEN_FORMS)]
    assert secret == [
        (f"http.{fake_gitea.origin}/.extraHeader", f"Authorization: Basic {CREDENTIALS}")
    ]
    assert ("http.followRedirects", "false") in config_of(launch)
    for path in files_under(git_dir):
        assert not any(form.encode() in path.read_bytes() for form in TOKEN_FORMS), path.name


def test_the_header_is_scoped_to_the_servers_origin(fake_gitea: FakeGitea, tmp_path: Path) -> None:
    private_pull(fake_gitea)
    settings = fake_gitea.settings(tmp_path / "cache", token=GITEA_TOKEN)
    config = fetch_config(settings, settings.gitea_token)
    git_dir = bare(tmp_path)
    same_server = f"http://localhost:{fake_gitea.port}/git/{PATH}.git"  # another origin
    run_git(git_dir, ["ls-remote", "--end-of-options", same_server], config=config, check=False)
    run_git(
        git_dir,
        ["ls-remote", "--end-of-options", f"{fake_gitea.server_url}/{PATH}.git"],
        config=config,
    )
    first, second = [r for r in fake_gitea.git_requests() if r.path.endswith("/info/refs")]
    assert (first.authorization, first.status) == (None, 401)  # Gitea's challenge, nothing sent
    assert second.authorization == f"Basic {CREDENTIALS}"


def test_a_git_redirect_is_not_followed(fake_gitea: FakeGitea, tmp_path: Path) -> None:
    elsewhere = FakeGitea(tmp_path / "elsewhere")
    try:
        private_pull(fake_gitea)
        fake_gitea.git_redirect = elsewhere.server_url
        settings = fake_gitea.settings(tmp_path / "cache", token=GITEA_TOKEN)
        done = run_git(
            bare(tmp_path),
            ["ls-remote", "--end-of-options", f"{fake_gitea.server_url}/{PATH}.git"],
            config=fetch_config(settings, settings.gitea_token),
            check=False,
        )
        assert done.returncode != 0
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


def test_without_a_token_git_asks_anonymously(fake_gitea: FakeGitea, tmp_path: Path) -> None:
    fake_gitea.pull_request("acme/open", 3)
    settings = fake_gitea.settings(tmp_path / "cache")
    config = fetch_config(settings, None)
    assert config.secret == ()
    url = f"{fake_gitea.server_url}/acme/open.git"
    run_git(
        bare(tmp_path), ["ls-remote", "--end-of-options", url, "refs/pull/3/head"], config=config
    )
    assert {r.authorization for r in fake_gitea.git_requests()} == {None}


def test_the_origin_drops_the_path_prefix_and_keeps_the_port() -> None:
    settings = Settings(gitea_server_url="HTTP://Code.Example.test:3000/git")
    assert server_origin(settings) == "http://code.example.test:3000"
    with pytest.raises(ConfigurationError):
        server_origin(Settings())
