"""Award emoji listings and resolving discussions on the fake GitLab, with GitLab's rules.

`FakeThreads` plugs a route into `FakeGitLab` ahead of the notes' (tests/fakes/gitlab_notes.py,
whose notes and awards it shares), and a `Members` (tests/fakes/gitlab_members.py) for who may
resolve:

- `GET .../merge_requests/:iid/notes/:note_id/award_emoji` lists the note's award emoji, oldest
  first, paginated as GitLab does; each has `name`, `user` (`id`, `username`), `awardable_id`,
  `awardable_type` `Note`. 404 "404 Not found" for a note that is not one of that merge
  request's.
- `PUT .../merge_requests/:iid/discussions/:discussion_id` with `resolved` (query or JSON
  body: `true`/`false`) resolves, or unresolves, every resolvable note of the discussion, and
  answers the discussion. A token is needed (401); 404 "404 Discussion Not Found" for an
  unknown id; 400 "resolved is missing" (or invalid); 403 "403 Forbidden" for a discussion that
  is not resolvable (a plain note's) and for a user who is neither a member with Developer (30)
  or higher access (active) nor the merge request's author (`Discussion#can_resolve?`).

Every resolution GitLab made is recorded in `resolutions` (discussion id, user, resolved), every
award listing in `award_reads` (and the most listings served at once); `award` gives a note an
award emoji as someone did earlier.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from urllib.parse import parse_qs

import pytest

from tests.fakes.forge_server import RecordedRequest
from tests.fakes.gitlab_members import Members
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab, Project

DEVELOPER = 30
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class FakeThreads:
    """Awards listed per note, and discussions resolved (see the module docstring)."""

    def __init__(self, notes: FakeNotes, members: Members) -> None:
        self.fake = notes.fake
        self.notes = notes
        self.members = members
        self.resolutions: list[tuple[str, str, bool]] = []  # (discussion id, user, resolved)
        self.award_reads: list[int] = []  # note ids whose awards were listed
        self.award_delay = 0.0  # seconds each award listing takes, to see reads overlap
        self.most_awards_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self.fake.routes.insert(0, self.route)

    # --- what tests set and read ---

    def award(self, note_id: int, name: str, user: str) -> None:
        """`user` gave the note this award emoji earlier."""
        self.fake.user_id(user)
        with self._lock:
            self.notes.awards.append((note_id, name, user))

    # --- the route ---

    def route(
        self,
        fake: FakeGitLab,
        handler: Any,
        record: RecordedRequest,
        project: Project,
        tail: list[str],
        body: bytes,
    ) -> bool:
        if len(tail) < 4 or tail[0] != "merge_requests" or not tail[1].isdigit():
            return False
        key = (project.id, int(tail[1]))
        document = fake.documents.get(key)
        shape = (tail[2], len(tail), handler.command)
        if shape == ("notes", 5, "GET") and tail[4] == "award_emoji" and document is not None:
            self._awards(handler, record, key, tail[3])
            return True
        if shape == ("discussions", 4, "PUT") and document is not None:
            self._resolve(handler, record, project, document, key, tail[3], body)
            return True
        return False

    def _awards(
        self, handler: Any, record: RecordedRequest, key: tuple[int, int], note_id: str
    ) -> None:
        ids = {n.id for n in self.notes.of_key(key)}
        if not note_id.isdigit() or int(note_id) not in ids:
            handler.send_json(record, 404, {"message": "404 Not found"})
            return
        with self._lock:
            self.award_reads.append(int(note_id))
            self._in_flight += 1
            self.most_awards_in_flight = max(self.most_awards_in_flight, self._in_flight)
            given = [(i, a) for i, a in enumerate(self.notes.awards, 1) if a[0] == int(note_id)]
        time.sleep(self.award_delay)
        with self._lock:
            self._in_flight -= 1
        items = [
            {
                "id": award_id,
                "name": name,
                "user": {"id": self.fake.user_id(user), "username": user, "state": "active"},
                "created_at": "2026-01-01T00:00:00Z",
                "awardable_id": int(note_id),
                "awardable_type": "Note",
            }
            for award_id, (_, name, user) in given
        ]
        handler.send_page(record, items)

    def _resolve(
        self,
        handler: Any,
        record: RecordedRequest,
        project: Project,
        document: dict[str, Any],
        key: tuple[int, int],
        discussion_id: str,
        body: bytes,
    ) -> None:
        token = handler.signed_in(record)
        if token is None:
            return
        # A plain note is a discussion of its own (`individual_note`), never resolvable.
        thread = [
            n
            for n in self.notes.of_key(key)
            if (n.discussion_id or f"{n.id:040x}") == discussion_id
        ]
        if not thread:
            handler.send_json(record, 404, {"message": "404 Discussion Not Found"})
            return
        resolved = _resolved_parameter(record.query, body)
        if resolved is None:
            handler.send_json(record, 400, {"error": "resolved is missing"})
            return
        user = self.fake.users[token]
        author = document.get("author", {}).get("username")
        may = self.members.level_of(project.path, user) >= DEVELOPER or user == author
        if not any(n.resolvable for n in thread) or not may:
            handler.send_json(record, 403, {"message": "403 Forbidden"})
            return
        for note in thread:
            if note.resolvable:
                note.resolved_by = (self.fake.user_id(user), user) if resolved else None
        with self._lock:
            self.resolutions.append((discussion_id, user, resolved))
        answer = {
            "id": discussion_id,
            "individual_note": False,
            "notes": [n.document(key[1]) for n in thread],
        }
        handler.send_json(record, 200, answer)


def _resolved_parameter(query: str, body: bytes) -> bool | None:
    """`resolved` from the query, else the JSON body; None when absent or not a boolean."""
    given = parse_qs(query).get("resolved")
    value: Any = given[0] if given else None
    if value is None and body:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        value = payload.get("resolved") if isinstance(payload, dict) else None
    if isinstance(value, bool):
        return value
    return _BOOLEANS.get(value.lower()) if isinstance(value, str) else None


@pytest.fixture
def fake_gitlab_threads(fake_gitlab_notes: FakeNotes) -> FakeThreads:
    """Award listings and resolution on the running fake GitLab, with its members."""
    return FakeThreads(fake_gitlab_notes, Members.install(fake_gitlab_notes.fake))
