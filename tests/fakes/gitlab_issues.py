"""Project issues on the fake GitLab: `GET /projects/:id/issues/:iid`, as GitLab answers it.

`FakeIssues` plugs a route into `FakeGitLab` (tests/fakes/gitlab_server.py). As
lib/api/issues.rb does: the project's issue by its iid, `{"id", "iid", "project_id", "title",
"description" (null when empty), "state", "web_url", ...}`; an iid the project does not have is
404 `{"message": "404 Not found"}`, and so is a confidential issue the token's user may not see
(GitLab hides it rather than refuse it). Every read is counted in `reads`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.gitlab_server import FakeGitLab, Project, _Handler


@dataclass
class FakeIssues:
    """The issues of every project of one fake GitLab."""

    fake: FakeGitLab
    # (project path, lower case; iid) -> (title, description, confidential)
    issues: dict[tuple[str, int], tuple[str, str | None, bool]] = field(default_factory=dict)
    readers: set[str] = field(default_factory=set)  # tokens that may see confidential issues
    reads: list[tuple[str, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def install(cls, fake: FakeGitLab) -> FakeIssues:
        issues = cls(fake)
        fake.routes.append(issues.route)
        return issues

    def add(
        self,
        path: str,
        iid: int,
        title: str,
        description: str | None = "",
        *,
        confidential: bool = False,
    ) -> None:
        self.fake.project(path)
        self.issues[(path.lower(), iid)] = (title, description, confidential)

    def route(
        self,
        fake: FakeGitLab,
        handler: _Handler,
        record: RecordedRequest,
        project: Project,
        tail: list[str],
        body: bytes,
    ) -> bool:
        if len(tail) != 2 or tail[0] != "issues" or record.method != "GET":
            return False
        iid = int(tail[1]) if tail[1].isdigit() else 0
        with self._lock:
            self.reads.append((project.path, iid))
        found = self.issues.get((project.path.lower(), iid))
        hidden = found is not None and found[2] and record.private_token not in self.readers
        if found is None or hidden:
            handler.send_json(record, 404, {"message": "404 Not found"})
            return True
        title, description, confidential = found
        document: dict[str, Any] = {
            "id": 5000 + iid,
            "iid": iid,
            "project_id": project.id,
            "title": title,
            "description": description or None,
            "state": "opened",
            "confidential": confidential,
            "web_url": f"{fake.server_url}/{project.path}/-/issues/{iid}",
        }
        handler.send_json(record, 200, document)
        return True


@pytest.fixture
def fake_gitlab_issues(fake_gitlab: FakeGitLab) -> FakeIssues:
    """The project issues of the running fake GitLab."""
    return FakeIssues.install(fake_gitlab)
