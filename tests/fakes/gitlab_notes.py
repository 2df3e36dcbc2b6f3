"""Notes and discussions on the fake GitLab's merge requests, with GitLab's rules.

`FakeNotes` plugs a route into `FakeGitLab` (tests/fakes/gitlab_server.py):

- `GET  .../merge_requests/:iid/notes` lists every note, discussions' notes included, newest
  first unless `sort=asc` (`order_by` created_at or updated_at), paginated as GitLab does
  (`X-Page`, `X-Next-Page`, ...); each note has `author` (`id`, `username`), `system`, `type`,
  and `resolvable` (a discussion's note, not a system note), `resolved`, `resolved_by`.
  `GET .../discussions` lists the discussions oldest first, each with its notes (a plain note
  is an `individual_note` discussion of one).
- `POST .../merge_requests/:iid/notes` `{"body"}` and `POST .../discussions` `{"body",
  "position"}` need a token (401 without one); the author is the token's user. A body must
  be 1 to 1,000,000 characters (400 otherwise).
- A discussion's `position` is checked as GitLab checks it: `position_type` `text`, the three
  SHAs equal to the merge request's `diff_refs`, `new_path`/`old_path` a file of the diff from
  `base_sha` to `head_sha`, and the line one GitLab can compute a line code for: `new_line`
  alone an added line, `old_line` and `new_line` together the two sides of one unchanged line,
  `old_line` alone a removed line. Anything else is 400 with GitLab's "line_code" message.
  The diff is read here with its own small parser, not the code under test.

Replies, single notes and award emoji, as GitLab enforces them:

- `GET .../merge_requests/:iid/notes/:note_id` gives one note of that merge request; 404
  ("404 Note Not Found") for any other id.
- `GET .../merge_requests/:iid/discussions/:discussion_id` gives one discussion with its notes,
  oldest first; 404 ("404 Discussion Not Found") for an id that is not a discussion of that
  merge request.
- `POST .../discussions/:discussion_id/notes` `{"body"}` replies in it (a token needed; the same
  404 for an unknown discussion; the reply of a diff discussion is a `DiffNote` with the
  discussion's position, else a `DiscussionNote`).
- `POST .../notes/:note_id/award_emoji` `{"name"}` awards the token's user's emoji on a note of
  that merge request: 404 "404 Not found" for another note, 400 without a name, and GitLab's
  404 "Award Emoji Name has already been taken" for an emoji that user already gave it
  (lib/api/award_emoji.rb answers every refusal of AwardEmojis::AddService with not_found!).

Every posted body is also read as GitLab's quick-action extractor reads it, a little more
strictly: each line that starts with `/` and a word, after blanks (case-insensitive, carriage
returns deleted first, as GitLab deletes them), is recorded in `quick_actions`, so a test can
assert that nothing we post would run a command.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from itertools import count
from typing import Any
from urllib.parse import parse_qs

import pytest

from tests.fakes.forge_server import RecordedRequest
from tests.fakes.gitlab_server import FakeGitLab, Project
from tests.gitrepo import git

MAX_NOTE_CHARS = 1_000_000
_LINE_CODE_ERRORS = ["can't be blank", "must be a valid line code"]
LINE_CODE_REFUSED = {
    "message": f"400 Bad request - Note {{:line_code=>{json.dumps(_LINE_CODE_ERRORS)}}}"
}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_COMMAND = re.compile(r"^\s*/([a-z_]+)", re.IGNORECASE | re.MULTILINE)


@dataclass
class StoredNote:
    """A note as the fake keeps it."""

    id: int
    body: str
    author: str
    system: bool = False
    discussion_id: str | None = None
    position: dict[str, Any] | None = None
    author_id: int = 7
    resolved_by: tuple[int, str] | None = None  # (user id, username)

    @property
    def resolvable(self) -> bool:
        """GitLab's rule: a DiffNote or DiscussionNote on a merge request, not a system note."""
        return self.discussion_id is not None and not self.system

    def document(self, iid: int) -> dict[str, Any]:
        kind = "DiscussionNote" if self.discussion_id is not None else None
        by = self.resolved_by
        return {
            "id": self.id,
            "type": "DiffNote" if self.position is not None else kind,
            "body": self.body,
            "author": {"id": self.author_id, "username": self.author},
            "system": self.system,
            "resolvable": self.resolvable,
            "resolved": self.resolvable and by is not None,
            "resolved_by": None if by is None else {"id": by[0], "username": by[1]},
            "noteable_type": "MergeRequest",
            "noteable_iid": iid,
            "created_at": f"2026-01-01T00:00:{self.id % 60:02d}Z",
            "position": self.position,
        }


@dataclass
class DiffLines:
    """One file of a diff: which (old line, new line) pairs GitLab can give a line code."""

    old_path: str
    new_path: str
    lines: set[tuple[int | None, int | None]] = field(default_factory=set)


class _DiffReader:
    """`git diff`'s output, line by line, into `DiffLines`."""

    def __init__(self) -> None:
        self.files: list[DiffLines] = []
        self.old = self.new = self.old_left = self.new_left = 0

    def feed(self, line: str) -> None:
        if self.old_left > 0 or self.new_left > 0:  # inside a hunk: every line is content
            self._content(line[:1])
        elif line.startswith("diff --git "):
            self.files.append(DiffLines("", ""))
        elif line.startswith(("rename from ", "rename to ")):
            side, path = line.split(" ", 2)[1:]
            setattr(self.files[-1], "old_path" if side == "from" else "new_path", path)
        elif line.startswith("--- a/"):
            self.files[-1].old_path = line.removeprefix("--- a/")
        elif line.startswith("+++ b/"):
            self.files[-1].new_path = line.removeprefix("+++ b/")
        elif line.startswith("@@ "):
            match = _HUNK.match(line)
            assert match is not None
            self.old, self.new = int(match[1]), int(match[3])
            self.old_left = 1 if match[2] is None else int(match[2])
            self.new_left = 1 if match[4] is None else int(match[4])

    def _content(self, tag: str) -> None:
        pair = {"+": (None, self.new), "-": (self.old, None), " ": (self.old, self.new)}.get(tag)
        if pair is None:
            return  # "\ No newline at end of file"
        self.files[-1].lines.add(pair)
        if tag in ("-", " "):
            self.old, self.old_left = self.old + 1, self.old_left - 1
        if tag in ("+", " "):
            self.new, self.new_left = self.new + 1, self.new_left - 1


def diff_files(project: Project, base: str, head: str) -> list[DiffLines]:
    """The files of `git diff base head` (renames found), line pairs per file."""
    out = git(project.bare, "diff", "--no-color", "--no-ext-diff", "-M", "--unified=3", base, head)
    reader = _DiffReader()
    for line in out.split("\n"):
        reader.feed(line)
    for file in reader.files:  # a new or deleted file names one path on both sides, as GitLab
        file.old_path = file.old_path or file.new_path
        file.new_path = file.new_path or file.old_path
    return reader.files


class FakeNotes:
    """The notes and discussions of the fake's merge requests (see the module docstring)."""

    def __init__(self, fake: FakeGitLab) -> None:
        self.fake = fake
        self.notes: dict[tuple[int, int], list[StoredNote]] = {}
        self.quick_actions: list[str] = []  # every command a posted body would have run
        self.awards: list[tuple[int, str, str]] = []  # (note id, emoji name, user)
        self.refuse_discussions = False  # answer every discussion 400, whatever its position
        self._ids = count(1001)
        self._lock = threading.Lock()
        fake.routes.append(self.route)

    # --- what tests set and read ---

    def add(
        self, path: str, iid: int, body: str, author: str, *, system: bool = False
    ) -> StoredNote:
        """A note someone (or GitLab itself) wrote earlier."""
        project = self.fake.project(path)
        note = StoredNote(next(self._ids), body, author, system=system)
        note.author_id = self.fake.user_id(author)
        with self._lock:
            self.notes.setdefault((project.id, iid), []).append(note)
        return note

    def of(self, path: str, iid: int) -> list[StoredNote]:
        """The merge request's notes, oldest first."""
        with self._lock:
            return list(self.notes.get((self.fake.project(path).id, iid), []))

    def of_key(self, key: tuple[int, int]) -> list[StoredNote]:
        """The notes of the merge request (project id, iid), oldest first."""
        with self._lock:
            return list(self.notes.get(key, []))

    def reply(self, path: str, iid: int, discussion_id: str, body: str, author: str) -> StoredNote:
        """A reply someone wrote in a discussion of the merge request."""
        project = self.fake.project(path)
        with self._lock:
            notes = self.notes.get((project.id, iid), [])
            first = next(n for n in notes if n.discussion_id == discussion_id)
            note = StoredNote(next(self._ids), body, author, discussion_id=discussion_id)
            note.author_id = self.fake.user_id(author)
            note.position = first.position
            notes.append(note)
        return note

    def discussions(self, path: str, iid: int) -> list[StoredNote]:
        return [n for n in self.of(path, iid) if n.discussion_id is not None]

    def plain_notes(self, path: str, iid: int) -> list[StoredNote]:
        return [n for n in self.of(path, iid) if n.discussion_id is None and not n.system]

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
        if len(tail) < 3 or tail[0] != "merge_requests" or tail[2] not in ("notes", "discussions"):
            return False
        if len(tail) not in (3, 4, 5):
            return False
        document = fake.documents.get((project.id, int(tail[1]))) if tail[1].isdigit() else None
        if document is None:
            handler.send_json(record, 404, {"message": "404 Not found"})
            return True
        key = (project.id, int(tail[1]))
        if len(tail) > 3:
            self._one(handler, record, key, tail[2:], body)
        elif handler.command == "GET":
            self._list(handler, record, key, tail[2])
        elif handler.command == "POST":
            self._create(handler, record, project, document, key, tail[2], body)
        else:
            handler.send_json(record, 405, {"message": "405 Method Not Allowed"})
        return True

    def _list(self, handler: Any, record: RecordedRequest, key: tuple[int, int], kind: str) -> None:
        query = parse_qs(record.query)
        sort = query.get("sort", ["desc"])[0]
        order_by = query.get("order_by", ["created_at"])[0]
        if sort not in ("asc", "desc") or order_by not in ("created_at", "updated_at"):
            handler.send_json(record, 400, {"error": "sort, order_by does not have a valid value"})
            return
        with self._lock:
            notes = list(self.notes.get(key, []))
        if kind == "discussions":  # oldest first, each with its notes; a plain note alone
            threads: dict[str, list[StoredNote]] = {}
            for n in notes:
                threads.setdefault(n.discussion_id or f"{n.id:040x}", []).append(n)
            items = [
                {
                    "id": thread_id,
                    "individual_note": thread[0].discussion_id is None,
                    "notes": [n.document(key[1]) for n in thread],
                }
                for thread_id, thread in threads.items()
            ]
        else:
            items = [n.document(key[1]) for n in (notes if sort == "asc" else notes[::-1])]
        handler.send_page(record, items)

    def _create(
        self,
        handler: Any,
        record: RecordedRequest,
        project: Project,
        document: dict[str, Any],
        key: tuple[int, int],
        kind: str,
        body: bytes,
    ) -> None:
        token = handler.signed_in(record)
        if token is None:
            return
        try:
            payload = json.loads(body)
        except ValueError:
            handler.send_json(record, 400, {"error": "body is invalid"})
            return
        text = payload.get("body") if isinstance(payload, dict) else None
        if not isinstance(text, str) or not text.strip():
            handler.send_json(record, 400, {"message": {"note": ["can't be blank"]}})
            return
        if len(text) > MAX_NOTE_CHARS:
            too_long = f"is too long (maximum is {MAX_NOTE_CHARS} characters)"
            handler.send_json(record, 400, {"message": {"note": [too_long]}})
            return
        position = None
        if kind == "discussions":
            position = payload.get("position")
            if self.refuse_discussions or not _valid_position(project, document, position):
                handler.send_json(record, 400, LINE_CODE_REFUSED)
                return
        note = StoredNote(next(self._ids), text, self.fake.users[token], position=position)
        note.author_id = self.fake.user_id(note.author)
        if kind == "discussions":
            note.discussion_id = f"{note.id:040x}"
        with self._lock:
            self.quick_actions += _COMMAND.findall(text.replace("\r", ""))
            self.notes.setdefault(key, []).append(note)
        answer = _discussion(note, key[1]) if kind == "discussions" else note.document(key[1])
        handler.send_json(record, 201, answer)

    def _one(
        self,
        handler: Any,
        record: RecordedRequest,
        key: tuple[int, int],
        tail: list[str],
        body: bytes,
    ) -> None:
        """A discussion (`discussions/:id`), a reply in it (`discussions/:id/notes`), a note
        (`notes/:id`), or an award emoji on a note (`notes/:id/award_emoji`)."""
        with self._lock:
            notes = list(self.notes.get(key, []))
        shape = (tail[0], len(tail), tail[-1], handler.command)
        if shape == ("discussions", 2, tail[1], "GET"):
            thread = [n for n in notes if n.discussion_id == tail[1]]
            if not thread:
                handler.send_json(record, 404, {"message": "404 Discussion Not Found"})
                return
            document = _discussion(thread[0], key[1])
            document["notes"] = [n.document(key[1]) for n in thread]
            handler.send_json(record, 200, document)
        elif shape == ("notes", 2, tail[1], "GET"):
            found = [n for n in notes if str(n.id) == tail[1]]
            if not found:
                handler.send_json(record, 404, {"message": "404 Note Not Found"})
                return
            handler.send_json(record, 200, found[0].document(key[1]))
        elif shape == ("discussions", 3, "notes", "POST"):
            self._reply(handler, record, key, notes, tail[1], body)
        elif shape == ("notes", 3, "award_emoji", "POST"):
            self._award(handler, record, notes, tail[1], body)
        else:
            handler.send_json(record, 404, {"error": "404 Not Found"})

    def _reply(
        self,
        handler: Any,
        record: RecordedRequest,
        key: tuple[int, int],
        notes: list[StoredNote],
        discussion_id: str,
        body: bytes,
    ) -> None:
        token = handler.signed_in(record)
        if token is None:
            return
        thread = [n for n in notes if n.discussion_id == discussion_id]
        if not thread:
            handler.send_json(record, 404, {"message": "404 Discussion Not Found"})
            return
        text = _body_text(body)
        if text is None:
            handler.send_json(record, 400, {"message": {"note": ["can't be blank"]}})
            return
        note = StoredNote(next(self._ids), text, self.fake.users[token])
        note.author_id = self.fake.user_id(note.author)
        note.discussion_id, note.position = discussion_id, thread[0].position
        with self._lock:
            self.quick_actions += _COMMAND.findall(text.replace("\r", ""))
            self.notes.setdefault(key, []).append(note)
        handler.send_json(record, 201, note.document(key[1]))

    def _award(
        self,
        handler: Any,
        record: RecordedRequest,
        notes: list[StoredNote],
        note_id: str,
        body: bytes,
    ) -> None:
        token = handler.signed_in(record)
        if token is None:
            return
        if not note_id.isdigit() or int(note_id) not in {n.id for n in notes}:
            handler.send_json(record, 404, {"message": "404 Not found"})
            return
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        name = payload.get("name") if isinstance(payload, dict) else None
        if not isinstance(name, str) or not name:
            handler.send_json(record, 400, {"error": "name is missing"})
            return
        user = self.fake.users[token]
        with self._lock:
            if (int(note_id), name, user) in self.awards:
                taken = "404 Award Emoji Name has already been taken Not Found"
                handler.send_json(record, 404, {"message": taken})
                return
            self.awards.append((int(note_id), name, user))
            award_id = len(self.awards)
        document = {
            "id": award_id,
            "name": name,
            "user": {"id": self.fake.user_id(user), "username": user},
            "awardable_id": int(note_id),
            "awardable_type": "Note",
        }
        handler.send_json(record, 201, document)


def _body_text(body: bytes) -> str | None:
    """A posted note's body when it is one GitLab takes (1 to 1,000,000 characters)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    text = payload.get("body") if isinstance(payload, dict) else None
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_NOTE_CHARS:
        return None
    return text


def _discussion(note: StoredNote, iid: int) -> dict[str, Any]:
    return {"id": note.discussion_id, "individual_note": False, "notes": [note.document(iid)]}


def _valid_position(project: Project, document: dict[str, Any], position: Any) -> bool:
    """GitLab's checks of a text position (see the module docstring)."""
    refs = document.get("diff_refs")
    if not isinstance(position, dict) or not isinstance(refs, dict):
        return False
    if position.get("position_type") != "text":
        return False
    if any(position.get(name) != refs[name] for name in ("base_sha", "start_sha", "head_sha")):
        return False
    old_line, new_line = position.get("old_line"), position.get("new_line")
    if not all(v is None or (isinstance(v, int) and v > 0) for v in (old_line, new_line)):
        return False
    for file in diff_files(project, refs["base_sha"], refs["head_sha"]):
        if (file.new_path, file.old_path) == (position.get("new_path"), position.get("old_path")):
            return (old_line, new_line) in file.lines
    return False


@pytest.fixture
def fake_gitlab_notes(fake_gitlab: FakeGitLab) -> FakeNotes:
    """The notes and discussions of the running fake GitLab."""
    return FakeNotes(fake_gitlab)
