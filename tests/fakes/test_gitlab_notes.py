"""The fake GitLab's notes hold GitLab's rules (tests/fakes/gitlab_notes.py): a lenient fake would
let a wrong position, a missing `old_line` or an anonymous post pass the publishing tests."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_notes import MAX_NOTE_CHARS, FakeNotes
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture

PATH = "grp/widget"
TEN = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.fixture
def mr(fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes) -> MergeRequestFixture:
    fake_gitlab.users[GITLAB_TOKEN] = "bot"
    # Line 6 is added; the head's 3-5 and 7-9 are context (the base's 3-5 and 6-8).
    head = {"a.py": TEN.replace("line 5\n", "line 5\nnew\n")}
    return fake_gitlab.merge_request(PATH, 1, base={"a.py": TEN}, head=head)


def post(
    fake: FakeGitLab, tail: str, document: dict[str, Any], token: str | None = GITLAB_TOKEN
) -> httpx.Response:
    headers = {} if token is None else {"PRIVATE-TOKEN": token}
    url = f"{fake.api_url}/projects/grp%2Fwidget/merge_requests/1/{tail}"
    return httpx.post(url, json=document, headers=headers)


def position(mr: MergeRequestFixture, **lines: int) -> dict[str, Any]:
    return {
        "position_type": "text",
        "base_sha": mr.base_sha,
        "start_sha": mr.start_sha,
        "head_sha": mr.head_sha,
        "new_path": "a.py",
        "old_path": "a.py",
        **lines,
    }


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        ({"new_line": 6}, 201),  # added
        ({"new_line": 7, "old_line": 6}, 201),  # context, both sides
        ({"new_line": 7}, 400),  # context without old_line
        ({"new_line": 7, "old_line": 7}, 400),  # the wrong base line
        ({"new_line": 6, "old_line": 5}, 400),  # an added line has no base line
        ({"new_line": 1}, 400),  # outside every hunk
        ({}, 400),
    ],
)
def test_a_position_must_name_a_line_of_the_diff_as_gitlab_does(
    fake_gitlab: FakeGitLab, mr: MergeRequestFixture, lines: dict[str, int], status: int
) -> None:
    response = post(fake_gitlab, "discussions", {"body": "x", "position": position(mr, **lines)})
    assert response.status_code == status, response.text
    if status == 400:
        assert "line_code" in response.text


def test_a_position_must_carry_the_merge_requests_diff_refs(
    fake_gitlab: FakeGitLab, mr: MergeRequestFixture
) -> None:
    stale = {**position(mr, new_line=6), "head_sha": mr.start_sha}
    assert post(fake_gitlab, "discussions", {"body": "x", "position": stale}).status_code == 400
    renamed = {**position(mr, new_line=6), "new_path": "b.py", "old_path": "b.py"}
    assert post(fake_gitlab, "discussions", {"body": "x", "position": renamed}).status_code == 400


def test_notes_need_a_token_and_a_body_of_gitlabs_size(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, mr: MergeRequestFixture
) -> None:
    assert post(fake_gitlab, "notes", {"body": "x"}, token=None).status_code == 401
    assert post(fake_gitlab, "notes", {"body": " "}).status_code == 400
    assert post(fake_gitlab, "notes", {"body": "x" * (MAX_NOTE_CHARS + 1)}).status_code == 400
    created = post(fake_gitlab, "notes", {"body": "x" * MAX_NOTE_CHARS})
    assert created.status_code == 201
    assert created.json()["author"]["username"] == "bot"
    assert [n.author for n in fake_gitlab_notes.of(PATH, 1)] == ["bot"]


def test_notes_are_listed_newest_first_in_pages(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, mr: MergeRequestFixture
) -> None:
    for n in range(5):
        fake_gitlab_notes.add(PATH, 1, f"note {n}", "alice")
    url = f"{fake_gitlab.api_url}/projects/grp%2Fwidget/merge_requests/1/notes"
    first = httpx.get(url, params={"per_page": "2"})
    assert [n["body"] for n in first.json()] == ["note 4", "note 3"]
    assert first.headers["X-Next-Page"] == "2"
    last = httpx.get(url, params={"per_page": "2", "page": "3"})
    assert [n["body"] for n in last.json()] == ["note 0"]
    assert last.headers["X-Next-Page"] == ""
    oldest = httpx.get(url, params={"sort": "asc", "per_page": "1"})
    assert [n["body"] for n in oldest.json()] == ["note 0"]
    assert httpx.get(url, params={"sort": "sideways"}).status_code == 400


def test_every_quick_action_a_body_would_run_is_recorded(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, mr: MergeRequestFixture
) -> None:
    # GitLab deletes carriage returns first: "now\r/close" is no line of its own.
    post(fake_gitlab, "notes", {"body": "hello\n/merge\n  /Approve now\r/close\n\\/lock"})
    assert fake_gitlab_notes.quick_actions == ["merge", "Approve"]


def test_an_unknown_merge_request_is_404(fake_gitlab: FakeGitLab, mr: MergeRequestFixture) -> None:
    url = f"{fake_gitlab.api_url}/projects/grp%2Fwidget/merge_requests/9/notes"
    response = httpx.post(url, json={"body": "x"}, headers={"PRIVATE-TOKEN": GITLAB_TOKEN})
    assert response.status_code == 404
    assert json.loads(response.text)["message"].startswith("404")


def test_a_reply_needs_a_discussion_of_that_merge_request(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, mr: MergeRequestFixture
) -> None:
    started = post(fake_gitlab, "discussions", {"body": "x", "position": position(mr, new_line=6)})
    discussion = started.json()["id"]
    other = fake_gitlab.merge_request(PATH, 2, base={"a.py": TEN}, head={"a.py": TEN + "z\n"})
    assert other.iid == 2
    assert (
        post(fake_gitlab, f"discussions/{discussion}/notes", {"body": "r"}, None).status_code == 401
    )
    assert post(fake_gitlab, f"discussions/{'f' * 40}/notes", {"body": "r"}).status_code == 404
    elsewhere = httpx.post(
        f"{fake_gitlab.api_url}/projects/grp%2Fwidget/merge_requests/2/discussions/{discussion}/notes",
        json={"body": "r"},
        headers={"PRIVATE-TOKEN": GITLAB_TOKEN},
    )
    assert elsewhere.status_code == 404
    replied = post(fake_gitlab, f"discussions/{discussion}/notes", {"body": "r"})
    assert replied.status_code == 201
    assert replied.json()["type"] == "DiffNote"
    url = f"{fake_gitlab.api_url}/projects/grp%2Fwidget/merge_requests/1/discussions/{discussion}"
    shown = httpx.get(url).json()
    assert [n["body"] for n in shown["notes"]] == ["x", "r"]
    assert httpx.get(url.replace(discussion, "0" * 40)).status_code == 404


def test_an_award_emoji_needs_a_note_of_that_merge_request_and_is_given_once(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, mr: MergeRequestFixture
) -> None:
    note = fake_gitlab_notes.add(PATH, 1, "/pr-review ignore", "alice")
    tail = f"notes/{note.id}/award_emoji"
    assert post(fake_gitlab, tail, {"name": "thumbsup"}, None).status_code == 401
    assert post(fake_gitlab, "notes/999999/award_emoji", {"name": "thumbsup"}).status_code == 404
    assert post(fake_gitlab, tail, {}).status_code == 400
    assert post(fake_gitlab, tail, {"name": "thumbsup"}).status_code == 201
    again = post(fake_gitlab, tail, {"name": "thumbsup"})
    assert again.status_code == 404
    assert "Name has already been taken" in again.json()["message"]
    assert post(fake_gitlab, tail, {"name": "eyes"}).status_code == 201
    assert fake_gitlab_notes.awards == [(note.id, "thumbsup", "bot"), (note.id, "eyes", "bot")]
