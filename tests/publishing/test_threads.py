"""Which finding an open thread of ours stands for (publishing/threads.py), shown with GitHub's
layout: same path, same title as our comment shows it, a line within three of the comment's."""

from __future__ import annotations

import pytest

from pr_review_api.github.layout import GITHUB_LAYOUT
from pr_review_api.model import Finding
from pr_review_api.publishing.layout import render_comment
from pr_review_api.publishing.placement import Placed
from pr_review_api.publishing.threads import NEAR_LINES, same_finding
from tests.builders import finding_model
from tests.results import HOSTILE

TITLE = "average() drops the last [value] of @octocat's #12 <list>"


def same(found: Finding, path: str | None, line: int | None, body: str) -> bool:
    return same_finding(found, path, line, body, shown_as=GITHUB_LAYOUT.escape_inline)


def comment_for(found: Finding) -> str:
    return render_comment(Placed(found, "a" * 32), GITHUB_LAYOUT)


@pytest.mark.parametrize("title", [TITLE, HOSTILE[:120], "plain"])
def test_the_same_title_near_the_line_is_the_same(title: str) -> None:
    posted = finding_model(title=title, path="src/stats.py", line=10)
    body = comment_for(posted)
    for line in (10 - NEAR_LINES, 10, 10 + NEAR_LINES):
        again = finding_model("low", title=title, path="src/stats.py", line=line, explanation="new")
        assert same(again, "src/stats.py", 10, body)


def test_another_title_path_or_a_farther_line_is_another_finding() -> None:
    body = comment_for(finding_model(title=TITLE, path="src/stats.py", line=10))
    assert not same(
        finding_model(title=TITLE + ".", path="src/stats.py", line=10), "src/stats.py", 10, body
    )
    assert not same(
        finding_model(title=TITLE, path="src/other.py", line=10), "src/stats.py", 10, body
    )
    assert not same(
        finding_model(title=TITLE, path="src/stats.py", line=14), "src/stats.py", 10, body
    )
    assert not same(
        finding_model(title=TITLE, path="src/stats.py", line=None), "src/stats.py", 10, body
    )
    assert not same(
        finding_model(title=TITLE, path="src/stats.py", line=10), "src/stats.py", None, body
    )


def test_a_comment_that_shows_no_title_matches_nothing() -> None:
    assert not same(finding_model(title="T", path="a.py", line=1), "a.py", 1, "T")
