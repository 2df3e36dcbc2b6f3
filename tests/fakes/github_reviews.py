"""The fake GitHub's reviews, as GitHub keeps them: creating one (the whole request refused with
422 when any comment is off the diff), reading one, editing its body, and review comments as
GitHub lists them after later pushes. `tests/fakes/github_server.py` routes to them.

- `POST .../pulls/{n}/reviews`: `event` COMMENT, `commit_id` the head, a body of at most 65,536
  characters, every comment on a RIGHT-side line of one hunk (`range_problem`).
- `GET .../pulls/{n}/reviews/{id}`: a review of that pull request, else 404.
- `PUT .../pulls/{n}/reviews/{id}` with `body`: only a review of that pull request (404), only
  by its author (403), a string body of at most 65,536 characters (422).
- A review comment's `line` follows its line to the current head; once that line changed it is
  `null` (the comment is outdated), while `original_line` and `original_commit_id` keep where
  it was posted.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from typing import TYPE_CHECKING, Any

from tests.fakes.github_documents import range_problem

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.github_server import FakeGitHub, PullRequestFixture, _Handler

MAX_BODY_CHARS = 65536
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def create_review(
    fake: FakeGitHub,
    handler: _Handler,
    record: RecordedRequest,
    key: tuple[str, str, int],
    body: bytes,
) -> None:
    try:
        payload = json.loads(body)
    except ValueError:
        handler.send_json(record, 400, {"message": "Problems parsing JSON"})
        return
    fake.review_posts.append(payload)
    if fake.review_faults:
        canned = fake.review_faults.pop(0)
        handler.send(record, canned.status, canned.body, canned.headers)
        return
    author = handler._author(fake, record)
    if author is None:
        handler.send_json(record, 403, {"message": "Resource not accessible by integration"})
        return
    pull = fake._pulls.get(key)
    if pull is None:
        handler.send_json(record, 404, {"message": "Not Found"})
        return
    problem = _review_problem(fake, key, pull, payload)
    if problem is not None:
        handler.send_json(record, 422, {"message": "Unprocessable Entity", "errors": [problem]})
        return
    review = fake._new_review(*key, author, payload["body"], payload["commit_id"])
    for comment in payload.get("comments", []):
        stored = {
            "id": fake._id(),
            "user": {"login": author},
            "pull_request_review_id": review["id"],
            "commit_id": payload["commit_id"],
            "original_commit_id": payload["commit_id"],
            "original_line": comment["line"],
            **comment,
        }
        review["comments"].append(stored)
        fake.review_comments.setdefault(key, []).append(stored)
    fake.reviews.setdefault(key, []).append(review)
    handler.send_json(record, 200, _shown(review))


def reviews(
    fake: FakeGitHub, handler: _Handler, record: RecordedRequest, pieces: list[str], body: bytes
) -> bool:
    """`GET` and `PUT` of `/repos/{o}/{r}/pulls/{n}/reviews/{id}`; False for any other path."""
    if not (
        len(pieces) == 8
        and handler.command in ("GET", "PUT")
        and pieces[1] == "repos"
        and pieces[4] == "pulls"
        and pieces[5].isdigit()
        and pieces[6] == "reviews"
        and pieces[7].isdigit()
    ):
        return False
    key = (pieces[2], pieces[3], int(pieces[5]))
    found = [r for r in fake.reviews.get(key, []) if r["id"] == int(pieces[7])]
    if not found:
        handler.send_json(record, 404, {"message": "Not Found"})
    elif handler.command == "GET":
        handler.send_json(record, 200, _shown(found[0]))
    else:
        _edit(fake, handler, record, found[0], body)
    return True


def _edit(
    fake: FakeGitHub,
    handler: _Handler,
    record: RecordedRequest,
    review: dict[str, Any],
    body: bytes,
) -> None:
    try:
        payload = json.loads(body)
    except ValueError:
        handler.send_json(record, 400, {"message": "Problems parsing JSON"})
        return
    if fake.edit_faults:
        canned = fake.edit_faults.pop(0)
        handler.send(record, canned.status, canned.body, canned.headers)
        return
    author = handler._author(fake, record)
    if author is None or author.lower() != review["user"]["login"].lower():
        handler.send_json(record, 403, {"message": "Resource not accessible by integration"})
        return
    text = payload.get("body") if isinstance(payload, dict) else None
    if not isinstance(text, str) or len(text) > MAX_BODY_CHARS:
        problem = "body is too long (maximum is 65536 characters)"
        handler.send_json(record, 422, {"message": "Validation Failed", "errors": [problem]})
        return
    review["body"] = text
    fake.review_edits.append((review["id"], text))
    handler.send_json(record, 200, _shown(review))


def _shown(review: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in review.items() if k != "comments"}


def _review_problem(  # noqa: PLR0911  (one return per rule GitHub checks)
    fake: FakeGitHub,
    key: tuple[str, str, int],
    pull: PullRequestFixture,
    payload: Any,
) -> str | None:
    """GitHub's rules for a review, checked for the whole request."""
    if not isinstance(payload, dict) or payload.get("event") != "COMMENT":
        return "event must be COMMENT"
    if payload.get("commit_id") != pull.head_sha:
        return "commit_id is not the head"
    if not isinstance(payload.get("body"), str) or len(payload["body"]) > MAX_BODY_CHARS:
        return "body is too long (maximum is 65536 characters)"
    comments = payload.get("comments", [])
    if not comments:
        return None
    hunks = fake.right_hunks(*key)
    for comment in comments:
        line = comment.get("line")
        if comment.get("side") != "RIGHT" or not isinstance(line, int):
            return "side and line are required"
        if len(comment.get("body", "")) > MAX_BODY_CHARS:
            return "comment body is too long"
        problem = range_problem(comment, hunks.get(comment.get("path"), []))
        if problem is not None:
            return problem
    return None


def comment_view(
    fake: FakeGitHub, key: tuple[str, str, int], comment: dict[str, Any]
) -> dict[str, Any]:
    """A review comment as GitHub answers it now: its `line` moved with the lines inserted or
    deleted above it since it was posted, `null` once its own line changed (then `commit_id`
    stays the commit it was posted on)."""
    pull = fake._pulls.get(key)
    posted_on, line = comment.get("original_commit_id"), comment.get("original_line")
    if pull is None or not isinstance(line, int) or not posted_on or "path" not in comment:
        return comment
    if posted_on == pull.head_sha:
        return comment
    moved = _moved_line(str(pull.origin.bare), posted_on, pull.head_sha, comment["path"], line)
    if moved is None:
        return {**comment, "line": None, "commit_id": posted_on}
    return {**comment, "line": moved, "commit_id": pull.head_sha}


def comment_now(fake: FakeGitHub, comment_id: int) -> dict[str, Any] | None:
    """The review comment `comment_id` as GitHub answers it now (`comment_view`), or None."""
    for key, comments in fake.review_comments.items():
        for comment in comments:
            if comment["id"] == comment_id:
                return comment_view(fake, key, comment)
    return None


@functools.lru_cache(maxsize=1024)
def _moved_line(bare: str, old: str, new: str, path: str, line: int) -> int | None:
    done = subprocess.run(
        ["git", "--git-dir", bare, "diff", "--no-ext-diff", "-U0", old, new, "--", path],
        capture_output=True,
        check=False,
        text=True,
        env={"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    shift = 0
    for match in _HUNK.finditer(done.stdout if done.returncode == 0 else ""):
        start, count = int(match[1]), 1 if match[2] is None else int(match[2])
        added = 1 if match[4] is None else int(match[4])
        if count and start <= line < start + count:
            return None  # its own line was changed or deleted
        if (count and start + count <= line) or (not count and start < line):
            shift += added - count  # lines above it came or went
    return line + shift
