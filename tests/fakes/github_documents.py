"""What the fake GitHub answers and refuses, as GitHub does: a pull request's document, and the
rules of a review comment's lines."""

from __future__ import annotations

from typing import Any


def pull_json(  # noqa: PLR0913  (every field has a default)
    number: int,
    *,
    base_sha: str,
    head_sha: str,
    base_ref: str = "main",
    title: str = "A change",
    body: str | None = "Please review.",
    author: str = "octocat",
    labels: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A GitHub-shaped pull-request document (the fields a review reads, and some it ignores)."""
    return {
        "url": f"https://api.example.invalid/pulls/{number}",
        "id": 1000 + number,
        "number": number,
        "state": "open",
        "title": title,
        "body": body,
        "user": {"login": author, "id": 1},
        "labels": [{"id": 1 + i, "name": name, "color": "ededed"} for i, name in enumerate(labels)],
        "draft": False,
        "base": {"label": f"acme:{base_ref}", "ref": base_ref, "sha": base_sha},
        "head": {"label": "fork:feature", "ref": "feature", "sha": head_sha},
        "merged": False,
    }


def range_problem(comment: dict[str, Any], hunks: list[range]) -> str | None:
    """GitHub's rules for a comment's lines: `line` (and `start_line`, which must come before
    it, with `start_side` only beside it) on the RIGHT side of one hunk: no deleted line, no
    range across hunks."""
    line = comment["line"]
    start = comment.get("start_line", line)
    if "start_side" in comment and "start_line" not in comment:
        return "start_side requires start_line"
    if "start_line" in comment:
        if not isinstance(start, int) or start >= line:
            return "start_line must precede line"
        if comment.get("start_side") not in (None, "RIGHT"):
            return "start_side must be RIGHT here"
    if not any(start in hunk and line in hunk for hunk in hunks):
        if any(line in hunk for hunk in hunks):
            return "Pull request review thread start_line must be in the same hunk as line"
        return "Pull request review thread line must be part of the diff"
    return None
