"""Commit statuses on the fake GitLab: `POST /projects/:id/statuses/:sha`, with GitLab's rules.

`FakeStatuses` plugs a route into `FakeGitLab` (tests/fakes/gitlab_server.py). As
lib/api/commit_statuses.rb does:

- a token is needed (401 without one), and its user must be a Developer (30) or more of the
  project (403 "403 Forbidden" otherwise); `levels` sets a user's level, `default_level` (30)
  is everyone else's;
- the sha must be a commit of the project's repository (404 "404 Commit Not Found");
- `state` is one of pending, running, success, failed, canceled, skipped (400 otherwise);
  `name` (or `context`) defaults to `default`; `description` and `target_url` are at most 255
  characters and a `target_url` must be an http(s) URL (400 otherwise);
- the status a request moves is the newest of that sha and name still `pending` or `running`;
  a finished one (or none) makes a new status. The move is GitLab's state machine: a status
  `running` cannot run again (400 "Cannot transition status via :run from :running"), nor a
  `pending` one be enqueued again, nor a `running` one be enqueued or skipped.

Every request is recorded in `attempts` (the payload and the answer's status); `statuses`
holds the statuses as GitLab keeps them, oldest first. `answer` forces one status for every
request (a test of a GitLab outage).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING, Any

import pytest

from tests.gitrepo import git

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.gitlab_server import FakeGitLab, Project, _Handler

STATES = ("pending", "running", "success", "failed", "canceled", "skipped")
ACTIVE = ("pending", "running")
DEVELOPER = 30
MAX_CHARS = 255
# (the active status's state, the state asked) -> GitLab's event, for the moves it refuses.
_REFUSED = {
    ("pending", "pending"): "enqueue",
    ("running", "pending"): "enqueue",
    ("running", "running"): "run",
    ("running", "skipped"): "skip",
}


@dataclass
class StoredStatus:
    """A commit status as the fake keeps it."""

    id: int
    sha: str
    name: str
    status: str
    description: str | None
    target_url: str | None
    author: str

    def document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sha": self.sha,
            "ref": "main",
            "status": self.status,
            "name": self.name,
            "description": self.description,
            "target_url": self.target_url,
            "author": {"id": 7, "username": self.author},
            "allow_failure": False,
        }


@dataclass
class Attempt:
    """One request to the endpoint: the sha, the payload sent and the status answered."""

    sha: str
    payload: Any
    answer: int = 0


@dataclass
class FakeStatuses:
    """The commit statuses of the fake's projects (see the module docstring)."""

    fake: FakeGitLab
    levels: dict[str, int] = field(default_factory=dict)  # username -> access level
    default_level: int = DEVELOPER
    answer: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    statuses: list[StoredStatus] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: count(501))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def install(cls, fake: FakeGitLab) -> FakeStatuses:
        statuses = cls(fake)
        fake.routes.append(statuses.route)
        return statuses

    def on(self, sha: str, name: str = "pr-review") -> list[StoredStatus]:
        """The statuses of `sha` named `name`, oldest first."""
        with self._lock:
            return [s for s in self.statuses if s.sha == sha and s.name == name]

    def route(
        self,
        fake: FakeGitLab,
        handler: _Handler,
        record: RecordedRequest,
        project: Project,
        tail: list[str],
        body: bytes,
    ) -> bool:
        if len(tail) != 2 or tail[0] != "statuses" or record.method != "POST":
            return False
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        attempt = Attempt(tail[1], payload)
        with self._lock:
            self.attempts.append(attempt)
        status, document = self._answer(fake, record, project, tail[1], payload)
        attempt.answer = status
        handler.send_json(record, status, document)
        return True

    def _answer(  # noqa: PLR0911  (one return per rule)
        self,
        fake: FakeGitLab,
        record: RecordedRequest,
        project: Project,
        sha: str,
        payload: Any,
    ) -> tuple[int, Any]:
        if self.answer is not None:
            return self.answer, {"message": f"{self.answer} canned"}
        token = record.private_token
        if token is None:
            return 401, {"message": "401 Unauthorized"}
        user = fake.users[token]
        if self.levels.get(user, self.default_level) < DEVELOPER:
            return 403, {"message": "403 Forbidden"}
        if not _is_commit(project, sha):
            return 404, {"message": "404 Commit Not Found"}
        if not isinstance(payload, dict) or payload.get("state") not in STATES:
            return 400, {"error": "state does not have a valid value"}
        problem = _invalid_fields(payload)
        if problem is not None:
            return 400, {"message": problem}
        return self._move(sha, user, payload)

    def _move(self, sha: str, user: str, payload: dict[str, Any]) -> tuple[int, Any]:
        name = payload.get("name") or payload.get("context") or "default"
        state = payload["state"]
        with self._lock:
            active = [s for s in self.statuses if (s.sha, s.name) == (sha, name)]
            current = active[-1] if active and active[-1].status in ACTIVE else None
            if current is not None and (current.status, state) in _REFUSED:
                event = _REFUSED[(current.status, state)]
                message = (
                    f"Cannot transition status via :{event} from :{current.status} "
                    f'(Reason(s): Status cannot transition via "{event}")'
                )
                return 400, {"message": message}
            if current is None:
                current = StoredStatus(next(self._ids), sha, name, state, None, None, user)
                self.statuses.append(current)
            current.status = state
            current.description = payload.get("description", current.description)
            current.target_url = payload.get("target_url", current.target_url)
            current.author = user
            return 201, current.document()


def _is_commit(project: Project, sha: str) -> bool:
    if len(sha) != 40 or not all(c in "0123456789abcdef" for c in sha):
        return False
    try:
        git(project.bare, "cat-file", "-e", f"{sha}^{{commit}}")
    except RuntimeError:  # git: not an object of the repository, or not a commit
        return False
    return True


def _invalid_fields(payload: dict[str, Any]) -> dict[str, list[str]] | None:
    for name in ("description", "target_url", "name"):
        value = payload.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_CHARS):
            return {name: [f"is too long (maximum is {MAX_CHARS} characters)"]}
    url = payload.get("target_url")
    if url is not None and not url.startswith(("http://", "https://")):
        return {"target_url": ["is blocked: Only allowed schemes are http, https"]}
    return None


@pytest.fixture
def fake_gitlab_statuses(fake_gitlab: FakeGitLab) -> FakeStatuses:
    """The commit statuses of the running fake GitLab."""
    return FakeStatuses.install(fake_gitlab)
