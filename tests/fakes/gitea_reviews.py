"""What a review writes on the fake Gitea: reviews, commit statuses, comments, reactions, and
who may ask (the collaborator-permission lookup), answered as Gitea answers them.

`GiteaWrites.install(fake)` adds these routes to a `FakeGitea` (tests/fakes/gitea_server.py);
the `fake_gitea_writes` fixture does it for a test. Gitea's rules kept here (docs/gitea.md
cites where each is defined):

- `POST /repos/{o}/{r}/pulls/{i}/reviews` (`CreatePullReviewOptions`: `event`, `body`,
  `commit_id`, `comments[{path, body, old_position, new_position}]`): a `COMMENT` review with
  neither a body nor a comment is refused (422); an empty `commit_id` means the head. Gitea
  ACCEPTS a comment whose `new_position` is on no line of the diff, or a `commit_id` that is
  not the head, and shows them out of place: the fake accepts them too and records them in
  `misplaced` and `stale_commits`, so a test can assert that we never send one;
- `GET .../pulls/{i}/reviews`, `GET .../reviews/{id}` and `GET .../reviews/{id}/comments`;
- `POST /repos/{o}/{r}/pulls/comments/{id}/resolve` (`repoResolvePullReviewComment`, Gitea
  1.26): 204, the comment's `resolver` set; `resolvable = False` answers 404 as a server
  without the endpoint does;
- `GET /repos/{o}/{r}` (`repoGet`): the repository with the asker's `permissions`;
- `GET /repos/{o}/{r}/issues/{i}` (`issueGetIssue`): an issue of `issues`, or a pull request
  (with its `pull_request` key);
- `POST /repos/{o}/{r}/statuses/{sha}` (`state` one of pending, success, error, failure,
  warning; else 422) and `GET /repos/{o}/{r}/commits/{ref}/statuses`;
- `POST` and `GET /repos/{o}/{r}/issues/{i}/comments`; reactions on a comment, a review's
  inline comments included (`GET`/`POST .../issues/comments/{id}/reactions`: 201 when new, 200
  when already there, 403 for a reaction the server does not allow);
- `GET /repos/{o}/{r}/collaborators/{user}/permission`: 403 unless the asker is an admin of
  the repository (or asks about itself).
Every write but a reaction (which any signed-in reader may add) needs a token with write
access (403 otherwise).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.fakes.forge_server import RecordedRequest
from tests.fakes.gitea_server import (
    ACCESS_ORDER,
    FakeGitea,
    GiteaHandler,
    Repository,
    User,
    user_json,
)
from tests.gitrepo import git

REVIEW_EVENTS = frozenset({"APPROVED", "REQUEST_CHANGES", "COMMENT", "PENDING"})
STATUS_STATES = frozenset({"pending", "success", "error", "failure", "warning"})
REACTIONS = frozenset({"+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"})
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


@dataclass
class Misplaced:
    """A review comment Gitea stored although it names no line of the diff."""

    review_id: int
    path: str
    new_position: int
    old_position: int


@dataclass
class GiteaWrites:
    """The state of what was written (see the module docstring)."""

    reviews: dict[tuple[int, int], list[dict[str, Any]]] = field(default_factory=dict)
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[tuple[int, int], list[dict[str, Any]]] = field(default_factory=dict)
    reactions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    misplaced: list[Misplaced] = field(default_factory=list)
    stale_commits: list[str] = field(default_factory=list)  # a review's commit_id not the head
    issues: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    resolvable: bool = True  # the server has Gitea 1.26's resolve endpoint
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1000))

    def install(self, fake: FakeGitea) -> None:
        fake.routes.append(self.route)

    def route(  # noqa: PLR0911  (one return per endpoint)
        self,
        fake: FakeGitea,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        tail: list[str],
        body: bytes,
    ) -> bool:
        method = record.method
        if not tail and method == "GET":
            self._repository(handler, record, repo)
            return True
        if tail[:2] == ["pulls", "comments"] and tail[3:] == ["resolve"] and method == "POST":
            self._resolve(handler, record, repo, tail[2])
            return True
        if tail[:1] == ["issues"] and len(tail) == 2 and tail[1].isdigit() and method == "GET":
            self._issue(fake, handler, record, repo, int(tail[1]))
            return True
        if tail[:1] == ["pulls"] and len(tail) >= 3 and tail[2] == "reviews":
            return self._reviews(fake, handler, record, repo, tail, body)
        if tail[:1] == ["statuses"] and len(tail) == 2 and method == "POST":
            self._post_status(handler, record, repo, tail[1], body)
            return True
        if tail[:1] == ["commits"] and tail[2:] == ["statuses"] and method == "GET":
            handler.send_page(record, list(reversed(self.statuses.get((repo.id, tail[1]), []))))
            return True
        if tail[:1] == ["issues"] and tail[2:] == ["comments"] and tail[1].isdigit():
            self._issue_comments(handler, record, repo, int(tail[1]), body)
            return True
        if tail[:2] == ["issues", "comments"] and tail[3:] == ["reactions"]:
            self._reactions(handler, record, repo, tail[2], body)
            return True
        if tail[:1] == ["collaborators"] and tail[2:] == ["permission"] and method == "GET":
            self._permission(fake, handler, record, repo, tail[1])
            return True
        return False

    # --- reviews ---

    def _reviews(
        self,
        fake: FakeGitea,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        tail: list[str],
        body: bytes,
    ) -> bool:
        index = int(tail[1]) if tail[1].isdigit() else 0
        head = fake.head_of(repo, index)
        if head is None:
            handler.send_json(record, 404, {"message": "pull request does not exist"})
            return True
        listing = self.reviews.setdefault((repo.id, index), [])
        if len(tail) == 3 and record.method == "GET":
            handler.send_page(record, listing)
            return True
        if len(tail) == 3 and record.method == "POST":
            user = handler.may_write(record, repo)
            if user is not None:
                self._create_review(fake, handler, record, (repo, index, head), user, body)
            return True
        if len(tail) == 4 and record.method == "GET":
            found = [review for review in listing if str(review["id"]) == tail[3]]
            if found:
                handler.send_json(record, 200, found[0])
            else:
                handler.send_json(record, 404, {"message": "review does not exist"})
            return True
        if len(tail) == 5 and tail[4] == "comments" and record.method == "GET":
            review_id = int(tail[3]) if tail[3].isdigit() else 0
            if not any(review["id"] == review_id for review in listing):
                handler.send_json(record, 404, {"message": "review does not exist"})
            else:
                handler.send_json(record, 200, self.review_comments.get(review_id, []))
            return True
        return False

    def _create_review(
        self,
        fake: FakeGitea,
        handler: GiteaHandler,
        record: RecordedRequest,
        pull: tuple[Repository, int, str],
        user: User,
        body: bytes,
    ) -> None:
        repo, index, head = pull
        options = _json_object(body)
        event = options.get("event") if options is not None else None
        comments = options.get("comments") or [] if options is not None else []
        if options is None or event not in REVIEW_EVENTS or not isinstance(comments, list):
            handler.send_json(record, 422, {"message": "invalid review options"})
            return
        text = options.get("body") or ""
        if event == "COMMENT" and not text and not comments:
            handler.send_json(
                record, 422, {"message": "review event COMMENT requires a body or comment"}
            )
            return
        commit_id = options.get("commit_id") or head
        if commit_id != head:
            self.stale_commits.append(str(commit_id))
        review_id = next(self._ids)
        url = f"{fake.server_url}/{repo.path}/pulls/{index}"
        stored = []
        for comment in comments:
            stored.append(
                self._review_comment(fake, repo, (review_id, commit_id, url), user, comment)
            )
        review = {
            "id": review_id,
            "user": user_json(user),
            "state": event,
            "body": text,
            "commit_id": commit_id,
            "stale": commit_id != head,
            "official": False,
            "dismissed": False,
            "comments_count": len(stored),
            "submitted_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "html_url": f"{url}#issuecomment-{review_id}",
            "pull_request_url": url,
        }
        self.reviews.setdefault((repo.id, index), []).append(review)
        self.review_comments[review_id] = stored
        handler.send_json(record, 200, review)

    def _review_comment(
        self,
        fake: FakeGitea,
        repo: Repository,
        review: tuple[int, str, str],
        user: User,
        comment: Any,
    ) -> dict[str, Any]:
        review_id, commit_id, url = review
        path = str(comment.get("path", "")) if isinstance(comment, dict) else ""
        new = int(comment.get("new_position") or 0) if isinstance(comment, dict) else 0
        old = int(comment.get("old_position") or 0) if isinstance(comment, dict) else 0
        index = int(url.rsplit("/", 1)[1])
        fixture = fake.fixture(repo.path, index) if (repo.id, index) in fake._pulls else None
        lines = new_side_lines(repo, fixture.merge_base, commit_id, path) if fixture else set()
        if old != 0 or new not in lines:
            self.misplaced.append(Misplaced(review_id, path, new, old))
        comment_id = next(self._ids)
        return {
            "id": comment_id,
            "body": str(comment.get("body", "")) if isinstance(comment, dict) else "",
            "user": user_json(user),
            "resolver": None,
            "pull_request_review_id": review_id,
            "path": path,
            "commit_id": commit_id,
            "original_commit_id": commit_id,
            "position": new,
            "original_position": old,
            "html_url": f"{url}/files#issuecomment-{comment_id}",
            "pull_request_url": url,
        }

    def reply(self, review_id: int, to_comment: int, user: User, body: str) -> dict[str, Any]:
        """A reply in the conversation of the review's comment `to_comment`, as the web UI's
        Reply button makes it (services/pull/review.go, `CreateCodeComment` with
        `replyReviewID`): a code comment of that same review on the same path and line."""
        replied = next(c for c in self.review_comments[review_id] if c["id"] == to_comment)
        comment = {**replied, "id": next(self._ids), "body": body, "user": user_json(user)}
        comment["html_url"] = replied["html_url"].rsplit("-", 1)[0] + f"-{comment['id']}"
        self.review_comments[review_id].append(comment)
        return comment

    # --- statuses, comments, reactions, permission ---

    def _post_status(
        self,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        sha: str,
        body: bytes,
    ) -> None:
        user = handler.may_write(record, repo)
        if user is None:
            return
        options = _json_object(body)
        if options is None or options.get("state") not in STATUS_STATES:
            handler.send_json(record, 422, {"message": "invalid commit status state"})
            return
        status = {
            "id": next(self._ids),
            "status": options["state"],
            "target_url": options.get("target_url", ""),
            "description": options.get("description", ""),
            "context": options.get("context", ""),
            "creator": user_json(user),
            "sha": sha,
        }
        self.statuses.setdefault((repo.id, sha), []).append(status)
        handler.send_json(record, 201, status)

    def _issue_comments(
        self,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        index: int,
        body: bytes,
    ) -> None:
        listing = self.comments.setdefault((repo.id, index), [])
        if record.method == "GET":
            handler.send_json(record, 200, listing)
            return
        user = handler.may_write(record, repo)
        if user is None:
            return
        options = _json_object(body)
        text = options.get("body") if options is not None else None
        if not isinstance(text, str) or not text:
            handler.send_json(record, 422, {"message": "body is required"})
            return
        comment_id = next(self._ids)
        comment = {
            "id": comment_id,
            "body": text,
            "user": user_json(user),
            "html_url": f"#issuecomment-{comment_id}",
        }
        listing.append(comment)
        handler.send_json(record, 201, comment)

    def _reactions(
        self,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        comment: str,
        body: bytes,
    ) -> None:
        comment_id = int(comment) if comment.isdigit() else 0
        known = (
            any(
                c["id"] == comment_id
                for (rid, _), cs in self.comments.items()
                if rid == repo.id
                for c in cs
            )
            or self._review_comment_of(repo, comment_id) is not None
        )
        if not known:
            handler.send_json(record, 404, {"message": "comment does not exist"})
            return
        listing = self.reactions.setdefault(comment_id, [])
        if record.method == "GET":
            handler.send_json(record, 200, listing)
            return
        # Any signed-in reader may react (changeIssueCommentReaction asks only read access,
        # and write access on a locked conversation).
        user = handler.signed_in(record)
        if not user:
            handler.send_json(record, 401, {"message": "token is required", "url": ""})
            return
        options = _json_object(body)
        content = options.get("content") if options is not None else None
        if content not in REACTIONS:
            handler.send_json(record, 403, {"message": f"'{content}' is not an allowed reaction"})
            return
        for reaction in listing:
            if reaction["content"] == content and reaction["user"]["id"] == user.id:
                handler.send_json(record, 200, reaction)
                return
        reaction = {
            "user": user_json(user),
            "content": content,
            "created_at": "2026-01-01T00:00:00Z",
        }
        listing.append(reaction)
        handler.send_json(record, 201, reaction)

    def _permission(
        self,
        fake: FakeGitea,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        login: str,
    ) -> None:
        asker = handler.signed_in(record)
        if not asker:
            handler.send_json(record, 401, {"message": "token is required"})
            return
        mine = repo.permission(asker.login)
        if (
            ACCESS_ORDER.index(mine) < ACCESS_ORDER.index("admin")
            and asker.login.lower() != login.lower()
        ):
            handler.send_json(
                record,
                403,
                {"message": "Only repository admins may look up other users' permissions"},
            )
            return
        user = fake.user(login)
        permission = repo.permission(user.login)
        shown = "admin" if permission == "owner" else permission
        handler.send_json(
            record, 200, {"permission": shown, "role_name": shown, "user": user_json(user)}
        )

    # --- the repository, issues, resolving ---

    def _repository(self, handler: GiteaHandler, record: RecordedRequest, repo: Repository) -> None:
        user = handler.signed_in(record)
        rank = ACCESS_ORDER.index(repo.permission(user.login if user else None))
        permissions = {
            "admin": rank >= ACCESS_ORDER.index("admin"),
            "push": rank >= ACCESS_ORDER.index("write"),
            "pull": rank >= ACCESS_ORDER.index("read"),
        }
        document = {
            "id": repo.id,
            "name": repo.name,
            "full_name": repo.path,
            "private": repo.private,
            "permissions": permissions,
        }
        handler.send_json(record, 200, document)

    def _issue(
        self,
        fake: FakeGitea,
        handler: GiteaHandler,
        record: RecordedRequest,
        repo: Repository,
        index: int,
    ) -> None:
        issue = self.issues.get((repo.id, index))
        if issue is None and fake.head_of(repo, index) is not None:
            issue = {"number": index, "title": "A pull request", "body": "", "pull_request": {}}
        if issue is None:
            handler.send_json(record, 404, {"message": "issue does not exist"})
        else:
            handler.send_json(record, 200, {"pull_request": None, **issue})

    def _review_comment_of(self, repo: Repository, comment_id: int) -> dict[str, Any] | None:
        reviews = {
            review["id"]
            for (rid, _), listing in self.reviews.items()
            if rid == repo.id
            for review in listing
        }
        for review_id in reviews:
            for comment in self.review_comments.get(review_id, []):
                if comment["id"] == comment_id:
                    return comment
        return None

    def _resolve(
        self, handler: GiteaHandler, record: RecordedRequest, repo: Repository, comment: str
    ) -> None:
        found = self._review_comment_of(repo, int(comment)) if comment.isdigit() else None
        if not self.resolvable or found is None:
            handler.send_json(record, 404, {"message": "Not Found"})
            return
        user = handler.may_write(record, repo)
        if user is None:
            return
        found["resolver"] = user_json(user)
        handler.send(record, 204, b"", {})


def new_side_lines(repo: Repository, base: str, head: str, path: str) -> set[int]:
    """The lines of `path` at `head` inside a hunk of the diff from `base` (added and context
    lines): where Gitea shows a comment in place."""
    if not path:
        return set()
    try:
        diff = git(repo.bare, "diff", "--no-color", "-U3", base, head, "--", path)
    except Exception:
        return set()
    lines: set[int] = set()
    for match in _HUNK.finditer(diff):
        start, count = int(match[1]), int(match[2]) if match[2] is not None else 1
        lines.update(range(start, start + count))
    return lines


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body or b"null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@pytest.fixture
def fake_gitea_writes(fake_gitea: FakeGitea) -> GiteaWrites:
    """The fake Gitea with its review, status, comment and reaction endpoints."""
    writes = GiteaWrites()
    writes.install(fake_gitea)
    return writes
