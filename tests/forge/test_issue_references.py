"""forge/issue_references.py: the closing references of a description in each forge's syntax
(specification §21), and `ChangeForge.closing_references`, which loop/ reads them through."""

from __future__ import annotations

import asyncio

import pytest

from pr_review_api.forge.issue_references import IssueReference, closing_references
from pr_review_api.forge.select import open_forge
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


@pytest.mark.parametrize(
    ("url", "text", "expected"),
    [
        (
            f"{GITHUB}/acme/widget/pull/7",
            f"Fixes {GITEA}/acme/widget/issues/2",
            [IssueReference(None, 0, True)],
        ),
        (
            f"{GITHUB}/acme/widget/pull/7",
            f"Fixes {GITHUB}/acme/widget/issues/2",
            [IssueReference("acme/widget", 2)],
        ),
        (
            f"{GITLAB}/grp/app/-/merge_requests/7",
            "Closes #4 and #5",
            [IssueReference(None, 4), IssueReference(None, 5)],
        ),
        (f"{GITEA}/acme/widget/pulls/7", "Closes #4 and #5", [IssueReference(None, 4)]),
        (
            f"{GITEA}/acme/widget/pulls/7",
            f"Fixes {GITEA}/acme/widget/issues/12",
            [IssueReference("acme/widget", 12)],
        ),
        (
            f"{GITEA}/acme/widget/pulls/7",
            f"Fixes {GITHUB}/acme/widget/issues/12",
            [IssueReference(None, 0, True)],
        ),
    ],
)
def test_each_forge_reads_its_own_syntax_on_its_own_server(
    url: str, text: str, expected: list[IssueReference]
) -> None:
    """What loop/ asks (`ChangeForge.closing_references`): the forge of the change's URL parses
    with its own syntax, and an issue URL is its own only on its own configured server."""
    settings = load_settings(
        github_server_url=GITHUB, gitlab_server_url=GITLAB, gitea_server_url=GITEA
    )

    async def parse() -> list[IssueReference]:
        async with open_forge(url, settings) as forge:
            return forge.closing_references(text, settings)

    assert asyncio.run(parse()) == expected
