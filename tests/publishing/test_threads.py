"""Which finding an open thread of ours stands for (publishing/threads.py), shown with GitHub's
layout: same path, same title as our comment shows it, a line within three of the comment's;
and which threads a new head fixed, resolved through the forge's own request (counted here)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pr_review_api.github.layout import GITHUB_LAYOUT
from pr_review_api.model import Finding
from pr_review_api.publishing.layout import render_comment
from pr_review_api.publishing.placement import Placed
from pr_review_api.publishing.threads import (
    NEAR_LINES,
    Anchor,
    NewHead,
    OpenThread,
    resolve_fixed_threads,
    same_finding,
)
from tests.builders import finding_model
from tests.gitrepo import GitRepo
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


def fixed_head(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose second commit changes line 2 of a.py and leaves line 5: (git dir,
    the first commit, the second)."""
    repo = GitRepo(tmp_path / "repo")
    lines = [f"line {n}" for n in range(1, 7)]
    first = repo.commit_files({"a.py": "\n".join(lines) + "\n"})
    lines[1] = "line 2, fixed"
    return repo.git_dir, first, repo.commit_files({"a.py": "\n".join(lines) + "\n"})


def thread(n: int, line: int, posted_on: str, *, question_waits: bool = False) -> OpenThread[int]:
    body = comment_for(finding_model(title=f"finding {n}", path="a.py", line=line))
    anchor = Anchor.of("a.py", line, posted_on)
    return OpenThread(n, f"{n:032x}", "a.py", line, body, anchor, question_waits)


def resolve_all(
    threads: list[OpenThread[int]], new_head: NewHead, answers: dict[int, bool | None]
) -> tuple[int | None, list[int]]:
    asked: list[int] = []

    async def resolve(handle: int) -> bool | None:
        asked.append(handle)
        return answers.get(handle, True)

    shown_as = GITHUB_LAYOUT.escape_inline
    count = asyncio.run(
        resolve_fixed_threads(threads, new_head, shown_as=shown_as, resolve=resolve)
    )
    return count, asked


def test_only_a_thread_whose_line_changed_and_nobody_waits_on_is_resolved(tmp_path: Path) -> None:
    git_dir, first, head = fixed_head(tmp_path)
    reported_again = finding_model(title="finding 4", path="a.py", line=3)
    new_head = NewHead(git_dir, head, {f"{3:032x}"}, [reported_again])
    threads = [
        thread(1, 2, first),  # its line changed: resolved
        thread(2, 5, first),  # its line did not change
        thread(3, 2, first),  # reported again by its fingerprint
        thread(4, 2, first),  # the same finding near its line, its text changed
        thread(5, 2, first, question_waits=True),  # someone else waits on an answer
        OpenThread(6, f"{6:032x}", "a.py", 2, "x", Anchor.of("a.py", 2, None)),  # no anchor
    ]
    assert resolve_all(threads, new_head, {}) == (1, [1])


def test_a_forge_that_cannot_resolve_says_so_only_before_any_was_resolved(
    tmp_path: Path,
) -> None:
    git_dir, first, head = fixed_head(tmp_path)
    new_head = NewHead(git_dir, head, set(), [])
    threads = [thread(1, 2, first), thread(2, 2, first), thread(3, 2, first)]
    assert resolve_all(threads, new_head, {1: None}) == (None, [1])
    assert resolve_all(threads, new_head, {2: None, 3: False}) == (1, [1, 2, 3])
