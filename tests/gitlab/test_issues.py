"""gitlab/issues.py against the fake GitLab: a project's issue by its iid (the project's full
path URL-encoded as its id), and what cannot be read."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.issues import IssueRead, read_issue
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_issues import FakeIssues
from tests.fakes.gitlab_server import FakeGitLab


def read(fake: FakeGitLab, cache: Path, project: str, iid: int) -> IssueRead:
    async def main() -> IssueRead:
        async with GitLabClient(fake.settings(cache, token=GITLAB_TOKEN)) as gitlab:
            return await read_issue(gitlab, project, iid)

    return asyncio.run(main())


def test_issues_and_refusals(
    fake_gitlab: FakeGitLab, fake_gitlab_issues: FakeIssues, tmp_path: Path
) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "bot"
    fake_gitlab_issues.add("grp/sub/app", 4, "Return 2", "run() must return 2.")
    fake_gitlab_issues.add("grp/sub/app", 5, "Empty", None)
    fake_gitlab_issues.add("grp/sub/app", 6, "Secret", "x", confidential=True)
    assert read(fake_gitlab, tmp_path, "grp/sub/app", 4) == ("Return 2", "run() must return 2.")
    assert read(fake_gitlab, tmp_path, "grp/sub/app", 5) == ("Empty", "")
    assert read(fake_gitlab, tmp_path, "grp/sub/app", 6) == "unreadable"  # GitLab hides it
    assert read(fake_gitlab, tmp_path, "grp/sub/app", 7) == "unreadable"
    assert read(fake_gitlab, tmp_path, "grp/none", 1) == "unreadable"
    paths = [r.path for r in fake_gitlab.requests if "/issues/" in r.path]
    assert paths[0].endswith("/projects/grp%2Fsub%2Fapp/issues/4")
