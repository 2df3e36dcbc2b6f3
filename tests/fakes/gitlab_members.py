"""Project members on the fake GitLab: `GET /projects/:id/members/all/:user_id`.

GitLab answers a member (direct, or inherited from any group above the project) with its
`access_level` (10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner) and `state`, and
404 for a user who is not a member; the id must be a number. `Members.add` makes a member:

    members = Members.install(fake_gitlab)
    members.add("grp/sub/project", user_id=51, username="alice", level=30)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.gitlab_server import FakeGitLab, Project, _Handler


@dataclass
class Members:
    """Who is a member of which project, at which level."""

    fake: FakeGitLab
    levels: dict[tuple[str, int], tuple[str, int, str]] = field(default_factory=dict)
    asked: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def install(cls, fake: FakeGitLab) -> Members:
        members = cls(fake)
        fake.routes.append(members.route)
        return members

    def add(
        self, project: str, *, user_id: int, username: str, level: int, state: str = "active"
    ) -> None:
        self.fake.project(project)
        self.fake.user_ids[username] = user_id  # the id GitLab gives the user everywhere
        self.levels[(project, user_id)] = (username, level, state)

    def level_of(self, project: str, username: str) -> int:
        """The user's access level on the project, 0 for a non-member or a blocked user."""
        for (path, _), (name, level, state) in self.levels.items():
            if path.lower() == project.lower() and name == username and state == "active":
                return level
        return 0

    def route(
        self,
        fake: FakeGitLab,
        handler: _Handler,
        record: RecordedRequest,
        project: Project,
        tail: list[str],
        body: bytes,
    ) -> bool:
        if len(tail) != 3 or tail[:2] != ["members", "all"] or record.method != "GET":
            return False
        if not tail[2].isdigit():
            handler.send_json(record, 404, {"message": "404 Not found"})
            return True
        user_id = int(tail[2])
        self.asked.append((project.path, user_id))
        member = self.levels.get((project.path, user_id))
        if member is None:
            handler.send_json(record, 404, {"message": "404 Not found"})
            return True
        username, level, state = member
        document = {"id": user_id, "username": username, "access_level": level, "state": state}
        handler.send_json(record, 200, document)
        return True
