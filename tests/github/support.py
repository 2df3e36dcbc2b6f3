"""What the GitHub tests share: a canonical pull-request URL, settings, and helpers that
look into the repository cache and count what git did; the git launches and where a token
may be are checked alike for every forge (tests/gitlab, tests/gitea).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pr_review_api.errors import GitHubUnavailable, PullRequestNotFound
from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import run_git
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.client import fetch_metadata
from pr_review_api.github.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.settings import Settings
from tests.fakes.forge_server import RecordedRequest
from tests.fakes.github_server import FakeGitHub

BASE = "a" * 40
HEAD = "b" * 40


def pull_ref(
    fake: FakeGitHub, owner: str = "acme", repo: str = "widget", number: int = 7
) -> PullRequestRef:
    return parse_pull_request_url(
        f"{fake.server_url}/{owner}/{repo}/pull/{number}", fake.settings(Path("unused"))
    )


async def metadata_error(fake: FakeGitHub, token: str | None = None) -> Exception:
    settings = fake.settings(Path("unused"), token=token)
    with pytest.raises((GitHubUnavailable, PullRequestNotFound)) as caught:
        await fetch_metadata(pull_ref(fake), settings)
    return caught.value


@dataclass
class Launch:
    """One process started during a test."""

    argv: list[str]
    env: dict[str, str]


def our_git(launches: list[Launch]) -> list[Launch]:
    """The git processes pr-review started (not the fake server's or the fixtures')."""
    return [
        launch
        for launch in launches
        if launch.argv[:1] == ["git"] and "GIT_CONFIG_COUNT" in launch.env
    ]


def config_of(launch: Launch) -> list[tuple[str, str]]:
    count = int(launch.env["GIT_CONFIG_COUNT"])
    return [
        (launch.env[f"GIT_CONFIG_KEY_{i}"], launch.env[f"GIT_CONFIG_VALUE_{i}"])
        for i in range(count)
    ]


async def review(url: str, settings: Settings) -> PreparedChange:
    async with open_pull_request(url, settings) as prepared:
        return prepared


def diff_of(prepared: PreparedChange) -> str:
    metadata = prepared.metadata
    pinned = PinnedRepository.open(prepared.git_dir, metadata.base_sha, metadata.head_sha)
    data, truncated = pinned.diff([], 10**6)
    assert not truncated
    return data.decode()


def has_object(git_dir: Path, sha: str) -> bool:
    done = run_git(git_dir, ["cat-file", "-e", f"{sha}^{{commit}}"], check=False)
    return done.returncode == 0


def files_under(folder: Path) -> list[Path]:
    """The regular files under `folder` (a link is left out: it points elsewhere)."""
    return [path for path in folder.rglob("*") if path.is_file() and not path.is_symlink()]


def assert_token_kept_out(
    forms: Sequence[str],
    *,
    origin: str,
    launches: list[Launch],
    records: Iterable[logging.LogRecord],
    cache: Path,
    requests: Iterable[RecordedRequest] = (),
    failures: Iterable[BaseException] = (),
) -> None:
    """No form of the token in a request's path or query, a failure's message or traceback,
    a log record, a process's command line or a file of the (not empty) cache; in our git's
    environment only as the header scoped to `origin`, for a fetch."""
    for request in requests:
        assert not any(form in request.path + request.query for form in forms)
    for failure in failures:
        rendered = "".join(traceback.format_exception(failure)) + repr(failure)
        assert not any(form in rendered for form in forms)
    for record in records:
        text = record.getMessage() + repr(record.args)
        assert not any(form in text for form in forms)
    assert our_git(launches)
    for launch in launches:  # never in a command line
        assert not any(form in arg for form in forms for arg in launch.argv)
    for launch in our_git(launches):
        for key, value in config_of(launch):
            if any(form in value for form in forms):
                assert (key, launch.argv[2]) == (f"http.{origin}/.extraHeader", "fetch")
    assert files_under(cache)
    for path in files_under(cache):
        assert not any(form.encode() in path.read_bytes() for form in forms), path.name
