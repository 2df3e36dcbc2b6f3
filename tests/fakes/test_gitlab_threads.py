"""The fake GitLab's award listings and resolution hold GitLab's rules
(tests/fakes/gitlab_threads.py): a lenient fake would let a resolution by a Reporter, of a plain
note, or of an unknown discussion pass the resolving tests."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.gitlab_threads import FakeThreads

PATH = "grp/widget"
OTHER_TOKEN = "glpat-test-other-token"


@pytest.fixture
def threads(fake_gitlab: FakeGitLab, fake_gitlab_threads: FakeThreads) -> FakeThreads:
    fake_gitlab.users[GITLAB_TOKEN] = "bot"
    fake_gitlab.users[OTHER_TOKEN] = "alice"  # the merge request's author (merge_request_json)
    fake_gitlab.merge_request(PATH, 1)
    return fake_gitlab_threads


def url(fake: FakeGitLab, tail: str) -> str:
    return f"{fake.api_url}/projects/grp%2Fwidget/merge_requests/1/{tail}"


def started(notes: FakeNotes) -> str:
    """A discussion `bot` started on the merge request; its id."""
    note = notes.add(PATH, 1, "a thought", "bot")
    note.discussion_id = f"{note.id:040x}"
    return note.discussion_id


def resolve(
    fake: FakeGitLab, discussion: str, token: str | None, query: str = "?resolved=true"
) -> httpx.Response:
    headers = {} if token is None else {"PRIVATE-TOKEN": token}
    return httpx.put(url(fake, f"discussions/{discussion}{query}"), headers=headers)


def test_developers_and_the_authors_resolve_others_may_not(threads: FakeThreads) -> None:
    fake, notes = threads.fake, threads.notes
    discussion = started(notes)
    threads.members.add(PATH, user_id=61, username="bot", level=20)  # a Reporter
    assert resolve(fake, discussion, GITLAB_TOKEN).status_code == 403
    assert resolve(fake, discussion, None).status_code == 401
    author = resolve(fake, discussion, OTHER_TOKEN)  # alice wrote the merge request
    assert author.status_code == 200
    assert author.json()["notes"][0]["resolved"] is True
    assert author.json()["notes"][0]["resolved_by"]["username"] == "alice"
    threads.members.add(PATH, user_id=61, username="bot", level=30)  # now a Developer
    assert resolve(fake, discussion, GITLAB_TOKEN, "?resolved=false").status_code == 200
    assert notes.of(PATH, 1)[0].resolved_by is None
    assert threads.resolutions == [(discussion, "alice", True), (discussion, "bot", False)]


def test_unknown_plain_and_malformed_resolutions_are_refused(threads: FakeThreads) -> None:
    fake, notes = threads.fake, threads.notes
    threads.members.add(PATH, user_id=61, username="bot", level=40)
    plain = notes.add(PATH, 1, "a plain note", "bot")
    assert resolve(fake, "f" * 40, GITLAB_TOKEN).status_code == 404
    assert resolve(fake, f"{plain.id:040x}", GITLAB_TOKEN).status_code == 403  # not resolvable
    discussion = started(notes)
    assert resolve(fake, discussion, GITLAB_TOKEN, "").status_code == 400
    assert resolve(fake, discussion, GITLAB_TOKEN, "?resolved=maybe").status_code == 400
    assert threads.resolutions == []
    listed = httpx.get(url(fake, "discussions"), headers={"PRIVATE-TOKEN": GITLAB_TOKEN}).json()
    assert [(d["individual_note"], d["notes"][0]["resolvable"]) for d in listed] == [
        (True, False),
        (False, True),
    ]


def test_awards_are_listed_per_note_with_their_user(threads: FakeThreads) -> None:
    fake, notes = threads.fake, threads.notes
    note = notes.add(PATH, 1, "first", "bot")
    other = notes.add(PATH, 1, "second", "bot")
    threads.award(note.id, "thumbsdown", "dev")
    threads.award(other.id, "thumbsup", "dev")
    headers = {"PRIVATE-TOKEN": GITLAB_TOKEN}
    listed = httpx.get(url(fake, f"notes/{note.id}/award_emoji"), headers=headers)
    assert listed.status_code == 200
    assert [(a["name"], a["user"]["username"], a["user"]["id"]) for a in listed.json()] == [
        ("thumbsdown", "dev", fake.user_id("dev"))
    ]
    assert httpx.get(url(fake, "notes/999999/award_emoji"), headers=headers).status_code == 404
    assert threads.award_reads == [note.id]
