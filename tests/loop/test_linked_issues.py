"""loop/linked_issues.py: closing references in each forge's syntax (specification §21), what is
read and what is only named in notes, and the check of the model's verdicts."""

from __future__ import annotations

import asyncio

import pytest

from pr_review_api.forge.base import IssueAnswer, IssueText
from pr_review_api.forge.github import GitHubForge
from pr_review_api.github.client import GitHubClient
from pr_review_api.loop.linked_issues import (
    MAX_ISSUE_TEXT_BYTES,
    IssueReference,
    closing_references,
    linked_issues_problem,
    read_linked_issues,
)
from pr_review_api.model import LinkedIssue, PullRequestInfo
from pr_review_api.settings import load_settings

GITHUB = "https://github.example"
GITLAB = "https://gitlab.example/gl"
GITEA = "http://127.0.0.1:3000/git"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fixes #12", [IssueReference(None, 12)]),
        ("fixed: #12.", [IssueReference(None, 12)]),
        ("This CLOSES acme/other#3", [IssueReference("acme/other", 3)]),
        (f"Resolves {GITHUB}/acme/widget/issues/9", [IssueReference("acme/widget", 9)]),
        (
            f"Fixes {GITHUB}/acme/widget/pull/4",
            [IssueReference("acme/widget", 4, pull_request=True)],
        ),
        ("Fixes https://elsewhere.example/acme/widget/issues/9", [IssueReference(None, 0, True)]),
        (f"Fixes {GITHUB}/acme/widget/wiki", [IssueReference(None, 0)]),
        ("prefixes #3, see #4, refs #5", []),
        ("Fixes #1, #2", [IssueReference(None, 1)]),  # GitHub wants a keyword for each
        ("Fixes a/b/c#1", []),  # no GitHub repository has three parts
    ],
)
def test_github_references(text: str, expected: list[IssueReference]) -> None:
    assert closing_references(text, "github", GITHUB) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Closes #4", [IssueReference(None, 4)]),
        (
            "Implements #4, #5 and grp/sub/proj#6",
            [IssueReference(None, 4), IssueReference(None, 5), IssueReference("grp/sub/proj", 6)],
        ),
        (f"Closing {GITLAB}/grp/proj/-/issues/7", [IssueReference("grp/proj", 7)]),
        (f"Fixes {GITLAB}/grp/proj/-/merge_requests/7", [IssueReference(None, 0)]),
        ("Resolves https://gitlab.com/grp/proj/-/issues/7", [IssueReference(None, 0, True)]),
    ],
)
def test_gitlab_references(text: str, expected: list[IssueReference]) -> None:
    assert closing_references(text, "gitlab", GITLAB) == expected


class Issues(GitHubForge):
    """GitHub whose issues are answered from a dict; every read is counted (nothing else of the
    forge is used, so its client never connects)."""

    def __init__(self, answers: dict[tuple[str, int], IssueAnswer]) -> None:
        settings = load_settings(github_server_url=GITHUB)
        super().__init__(settings, GitHubClient(settings))
        self.answers = answers
        self.reads: list[tuple[str, int]] = []

    async def read_issue(self, project: str, number: int) -> IssueAnswer:
        self.reads.append((project, number))
        return self.answers.get((project, number), "unreadable")


INFO = PullRequestInfo(url=f"{GITHUB}/acme/widget/pull/7", owner="acme", repo="widget", number=7)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fixes #12", [IssueReference(None, 12)]),
        ("closes: acme/other#3", [IssueReference("acme/other", 3)]),
        (f"Fixes {GITEA}/acme/widget/issues/12.", [IssueReference("acme/widget", 12)]),
        (
            f"Resolves {GITEA}/acme/widget/pulls/4",
            [IssueReference("acme/widget", 4, pull_request=True)],
        ),
        (f"Fixes {GITEA}/acme/widget/pull/4", [IssueReference(None, 0)]),  # GitHub's path
        ("Fixes http://127.0.0.1:3000/acme/widget/issues/1", [IssueReference(None, 0, True)]),
        (f"Fixes {GITHUB}/acme/widget/issues/1", [IssueReference(None, 0, True)]),
        ("Fixes #1, #2", [IssueReference(None, 1)]),  # a keyword for each, as GitHub
        ("Fixes a/b/c#1", []),  # no Gitea repository has three parts
    ],
)
def test_gitea_references(text: str, expected: list[IssueReference]) -> None:
    """Gitea's closing references (modules/references): GitHub's keywords and `owner/repo#N`,
    its URLs under the server's own path (`ROOT_URL`), `/pulls/` for a pull request."""
    assert closing_references(text, "gitea", GITEA) == expected


def test_the_first_three_are_read_and_the_rest_named() -> None:
    forge = Issues(
        {
            ("acme/widget", n): IssueText(f"t{n}", "b" * (2 * MAX_ISSUE_TEXT_BYTES))
            for n in range(1, 6)
        }
    )
    settings = load_settings(github_server_url=GITHUB)
    text = "Fixes #1. Fixes #1. Fixes ACME/widget#2. Fixes #3. Fixes #4. Fixes #5."
    linked = asyncio.run(read_linked_issues(INFO, text, forge, settings))
    assert linked.refs == ("#1", "#2", "#3")  # the same repository's issue, however spelled
    assert forge.reads == [("acme/widget", 1), ("acme/widget", 2), ("acme/widget", 3)]
    assert linked.notes == ("2 closing reference(s) past the first 3 were not read.",)
    body = linked.issues[0].body
    assert body.endswith(" [truncated]")
    assert len(body.encode()) <= MAX_ISSUE_TEXT_BYTES + len(" [truncated]")


def test_a_local_review_or_no_description_reads_nothing() -> None:
    forge = Issues({})
    settings = load_settings(github_server_url=GITHUB)
    assert asyncio.run(read_linked_issues(None, "Fixes #1", forge, settings)).issues == ()
    assert asyncio.run(read_linked_issues(INFO, "", forge, settings)).issues == ()
    assert forge.reads == []


def test_verdicts_are_one_per_issue_read() -> None:
    def verdict(ref: str) -> LinkedIssue:
        return LinkedIssue(ref=ref, addressed="yes", explanation="x")

    refs = ("#1", "acme/other#2")
    assert linked_issues_problem([verdict("#1"), verdict("acme/other#2")], refs) is None
    missing = linked_issues_problem([verdict("#1")], refs)
    assert missing is not None
    assert missing[0] == "The linked-issue verdicts leave out 1 issue(s)."
    assert "acme/other#2" in missing[1]
    unknown = linked_issues_problem([verdict("#3")], refs)
    assert unknown is not None
    assert unknown[0] == "Linked-issue entry 1 names an issue that was not given."
    repeated = linked_issues_problem([verdict("#1"), verdict("#1")], refs)
    assert repeated is not None
    assert repeated[0] == "Linked-issue entry 2 repeats an issue."
