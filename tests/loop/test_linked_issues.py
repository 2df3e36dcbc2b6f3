"""loop/linked_issues.py (specification §21): what is read and what is only named in notes, and the
check of the model's verdicts. Each forge's syntax: tests/forge/test_issue_references.py."""

from __future__ import annotations

import asyncio

from pr_review_api.forge.base import IssueAnswer, IssueText
from pr_review_api.forge.github import GitHubForge
from pr_review_api.github.client import GitHubClient
from pr_review_api.loop.linked_issues import (
    MAX_ISSUE_TEXT_BYTES,
    linked_issues_problem,
    read_linked_issues,
)
from pr_review_api.model import LinkedIssue, PullRequestInfo
from pr_review_api.settings import load_settings

GITHUB = "https://github.example"


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
