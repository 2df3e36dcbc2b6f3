"""Whether an anchored line changed between two commits (git/line_changes.py), on a real
repository: a line rewritten, removed, or with lines inserted right above or below it
changed; a line only moved by an edit elsewhere, the same commit, or a commit git does not
have did not."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr_review_api.git.line_changes import line_changed
from tests.gitrepo import GitRepo

TEXT = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.mark.parametrize(
    ("after", "line", "changed"),
    [
        (TEXT.replace("line 5\n", "line five\n"), 5, True),  # rewritten
        (TEXT.replace("line 5\n", ""), 5, True),  # removed
        (TEXT.replace("line 5\n", "new\nline 5\n"), 5, True),  # inserted right above it
        (TEXT + "line 11\n", 10, True),  # inserted right below it
        (TEXT.replace("line 5\n", "line five\n"), 4, False),  # its neighbour changed
        (TEXT.replace("line 1\n", "new\nline 1\n"), 5, False),  # only moved down
        (TEXT + "line 11\n", 9, False),
    ],
)
def test_a_line_changed_when_a_hunk_covers_it(
    tmp_path: Path, after: str, line: int, changed: bool
) -> None:
    repo = GitRepo(tmp_path / "repo")
    posted_on = repo.commit_files({"a.py": TEXT, "b.py": "x\n"})
    head = repo.commit_files({"a.py": after, "b.py": "y\n"})
    assert line_changed(repo.git_dir, "a.py", line, posted_on, head) is changed


def test_the_same_commit_or_an_unknown_one_is_no_change(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    head = repo.commit_files({"a.py": TEXT})
    assert line_changed(repo.git_dir, "a.py", 1, head, head) is False
    assert line_changed(repo.git_dir, "a.py", 1, "e" * 40, head) is False
