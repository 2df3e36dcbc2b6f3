"""github/issues.py against the fake GitHub: an issue's title and body, a pull request's number
(GitHub answers it as an issue with a `pull_request` key), and what cannot be read."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pr_review_api.fetch.issues import IssueRead
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.issues import read_issue
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub


def read(fake: FakeGitHub, cache: Path, owner: str, repo: str, number: int) -> IssueRead:
    async def main() -> IssueRead:
        async with GitHubClient(fake.settings(cache, token=GITHUB_TOKEN)) as github:
            return await read_issue(github, owner, repo, number)

    return asyncio.run(main())


def test_issues_pull_requests_and_refusals(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_issue("acme", "widget", 3, "A bug", "It breaks.")
    fake_github.add_issue("acme", "widget", 4, "No body")
    fake_github.pull_request("acme", "widget", 5)
    fake_github.add_issue("acme", "private", 1, "Hidden")
    fake_github.hidden_repos.add(("acme", "private"))
    assert read(fake_github, tmp_path, "acme", "widget", 3) == ("A bug", "It breaks.")
    assert read(fake_github, tmp_path, "acme", "widget", 4) == ("No body", "")  # body null
    assert read(fake_github, tmp_path, "acme", "widget", 5) == "pull_request"
    assert read(fake_github, tmp_path, "acme", "private", 1) == "unreadable"
    assert read(fake_github, tmp_path, "acme", "widget", 99) == "unreadable"
    reads = [r for r in fake_github.requests if "/issues/" in r.path]
    assert {r.authorization for r in reads} == {f"Bearer {GITHUB_TOKEN}"}  # the review's identity
