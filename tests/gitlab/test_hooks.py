"""Reading GitLab webhook payloads (gitlab/hooks.py, specification §17): which merge-request events
ask for a review, which notes are commands, and every hostile payload refused as
`invalid_request` or ignored, with the merge request always on OUR configured server."""

from __future__ import annotations

from typing import Any

import pytest

from pr_review_api.errors import InvalidRequest
from pr_review_api.gitlab.hooks import (
    MergeRequestNote,
    MergeRequestPush,
    is_bot,
    merge_request_note,
    merge_request_push,
)
from pr_review_api.settings import Settings
from tests.gitlab.payloads import HEAD, OLDREV, PROJECT, merge_request_hook, note_hook

SERVER = "https://gitlab.example/prefix"
SETTINGS = Settings(gitlab_server_url=SERVER)
URL = f"{SERVER}/{PROJECT}/-/merge_requests/7"


def push(event: dict[str, Any]) -> MergeRequestPush | None:
    return merge_request_push(event, SETTINGS)


def note(event: dict[str, Any]) -> MergeRequestNote | None:
    return merge_request_note(event, SETTINGS)


@pytest.mark.parametrize("action", ["open", "reopen"])
def test_an_opened_merge_request_asks_for_a_review_of_its_head(action: str) -> None:
    found = push(merge_request_hook(action))
    assert found is not None
    assert found.ref.url == URL
    assert (found.ref.owner, found.ref.repo, found.ref.number) == ("acme/platform", "widget", 7)
    assert found.head_sha == HEAD


def test_an_update_that_moved_the_head_asks_for_a_review() -> None:
    found = push(merge_request_hook("update", oldrev=OLDREV))
    assert found is not None
    assert found.head_sha == HEAD


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"assignees": {"previous": [], "current": [{"id": 2}]}},
        {"description": {"previous": "a", "current": "b"}},
        {"title": "not an object"},
    ],
)
def test_an_update_without_oldrev_that_changes_nothing_the_review_reads_is_ignored(
    changes: dict[str, object],
) -> None:
    """An assignee or the description changed: GitLab sends no `oldrev`, the head is the same."""
    assert push(merge_request_hook("update", changes=changes)) is None


@pytest.mark.parametrize("field", ["title", "labels", "target_branch"])
def test_an_update_of_what_the_skip_rules_read_asks_for_the_review_again(field: str) -> None:
    """specification §16: the skip rules are evaluated again on the same head (no `oldrev`)."""
    changes = {field: {"previous": "a", "current": "b"}}
    found = push(merge_request_hook("update", changes=changes))
    assert found is not None
    assert found.head_sha == HEAD


def test_an_update_that_marks_a_draft_ready_asks_for_a_review() -> None:
    """As GitHub's ready_for_review: the head did not move, but it was never reviewed."""
    changes = {"draft": {"previous": True, "current": False}}
    found = push(merge_request_hook("update", changes=changes))
    assert found is not None
    assert found.head_sha == HEAD


@pytest.mark.parametrize("field", ["draft", "work_in_progress"])
def test_a_draft_is_skipped(field: str) -> None:
    for event in (merge_request_hook("open"), merge_request_hook("update", oldrev=OLDREV)):
        event["object_attributes"]["draft"] = False
        event["object_attributes"]["work_in_progress"] = False
        event["object_attributes"][field] = True
        assert push(event) is None


@pytest.mark.parametrize(
    "action", ["close", "merge", "approved", "unapproved", "approval", "unapproval", None]
)
def test_other_actions_are_ignored(action: str | None) -> None:
    event = merge_request_hook("open")
    event["object_attributes"]["action"] = action
    assert push(event) is None


@pytest.mark.parametrize("state", ["closed", "merged", "locked"])
def test_a_merge_request_that_is_not_open_is_ignored(state: str) -> None:
    assert push(merge_request_hook("reopen", state=state)) is None


def test_another_object_kind_is_ignored() -> None:
    event = merge_request_hook("open")
    event["object_kind"] = "push"
    assert push(event) is None


def test_the_payloads_own_urls_are_never_used() -> None:
    """Every URL in the payload names evil.example; the job's URL is on our server."""
    found = push(merge_request_hook("open"))
    assert found is not None
    assert found.ref.url.startswith(SERVER + "/")
    assert "evil" not in found.ref.url


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "acme/../widget",
        "acme/./widget",
        "widget",  # no namespace
        "acme//widget",
        "/acme/widget",
        "acme/widget/",
        "acme/widget/-/merge_requests/99",  # another merge request smuggled into the path
        "acme/widget?x=1",
        "acme/widget#x",
        "acme/widget.git",
        "acme/-widget",
        "acme/wid get",
        "acme/wïdget",
        "acme%2F..%2Fwidget",
        "https://evil.example/acme/widget",
        "a/" * 30 + "widget",  # deeper than GitLab's 20 subgroups
        "a" * 300 + "/widget",
        "",
    ],
)
def test_a_hostile_project_path_is_invalid(path: str) -> None:
    with pytest.raises(InvalidRequest):
        push(merge_request_hook("open", path=path))
    with pytest.raises(InvalidRequest):
        note(note_hook(path=path))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("iid", "7"),
        ("iid", 7.0),
        ("iid", True),
        ("iid", 0),
        ("iid", -7),
        ("iid", 2**31),
        ("iid", 10**400),
        ("iid", None),
        ("path", 7),
        ("path", ["acme", "widget"]),
        ("path", None),
        ("head", "not-a-sha"),
        ("head", "A" * 40),
        ("head", 12),
        ("oldrev", "xyz"),
        ("oldrev", 12),
        ("draft", "yes"),
        ("state", 1),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_invalid(field: str, value: object) -> None:
    arguments: dict[str, Any] = {field: value}
    with pytest.raises(InvalidRequest):
        push(merge_request_hook("update" if field == "oldrev" else "open", **arguments))


@pytest.mark.parametrize("holder", ["object_attributes", "project"])
@pytest.mark.parametrize("value", [None, [], "x", 1])
def test_a_missing_or_wrong_object_is_invalid(holder: str, value: object) -> None:
    event = merge_request_hook("open")
    event[holder] = value
    with pytest.raises(InvalidRequest):
        push(event)


def test_an_action_of_the_wrong_type_is_invalid() -> None:
    event = merge_request_hook("open")
    event["object_attributes"]["action"] = ["open"]
    with pytest.raises(InvalidRequest):
        push(event)


def test_a_merge_request_without_a_last_commit_is_reviewed_at_the_head_gitlab_names() -> None:
    event = merge_request_hook("open")
    del event["object_attributes"]["last_commit"]
    found = push(event)
    assert found is not None
    assert found.head_sha is None


def test_a_note_on_a_merge_request_is_read_from_the_delivery() -> None:
    found = note(note_hook("@pr-review-bot help", note_type="DiscussionNote"))
    assert found is not None
    assert found.ref.url == URL
    assert (found.note_id, found.author, found.author_id) == (1244, "alice", 51)
    assert found.body == "@pr-review-bot help"
    assert found.discussion_id == "6a9c1750b37d513a43987b574953fceb50b03ce7"
    assert found.head_sha == HEAD
    command = found.command("help", "help")
    assert command["forge"] == "gitlab"
    assert command["kind"] == "help"
    assert command["force"] is False
    assert found.command("review", "review")["force"] is True


def test_a_note_names_the_merge_requests_author_and_gitlabs_bot_flag() -> None:
    """The author may ask questions without Developer access; `user.bot` is GitLab's word."""
    found = note(note_hook("/pr-review why?", note_type="DiffNote"))
    assert found is not None
    assert (found.merge_request_author_id, found.by_bot, found.in_discussion) == (77, False, True)
    assert found.command("answer", "why?")["merge_request_author_id"] == 77
    flagged = note_hook("/pr-review why?")
    flagged["user"]["bot"] = True
    found = note(flagged)
    assert found is not None
    assert found.by_bot
    assert not found.in_discussion


def test_a_standalone_note_has_no_discussion_to_answer_in() -> None:
    found = note(note_hook(note_type=None))
    assert found is not None
    assert found.discussion_id is None


@pytest.mark.parametrize("noteable", ["Issue", "Commit", "Snippet"])
def test_a_note_on_anything_but_a_merge_request_is_ignored(noteable: str) -> None:
    assert note(note_hook(noteable_type=noteable)) is None


def test_a_system_note_and_an_edited_note_are_ignored() -> None:
    assert note(note_hook(system=True)) is None
    edited = note_hook()
    edited["object_attributes"]["action"] = "update"
    assert note(edited) is None


def test_a_long_note_is_cut_to_what_a_command_needs() -> None:
    found = note(note_hook("/pr-review review " + "x" * 200_000))
    assert found is not None
    assert len(found.body) == 65_536


@pytest.mark.parametrize(
    ("where", "field", "value"),
    [
        ("object_attributes", "note", None),
        ("object_attributes", "note", 12),
        ("object_attributes", "id", "1244"),
        ("object_attributes", "id", 10**30),
        ("object_attributes", "discussion_id", "../../x"),
        ("object_attributes", "discussion_id", 5),
        ("object_attributes", "system", "false"),
        ("user", "username", None),
        ("user", "username", ""),
        ("user", "username", "x" * 300),
        ("user", "id", "51"),
        ("user", "id", -1),
        ("merge_request", "iid", None),
        ("merge_request", "iid", "7"),
        ("merge_request", "author_id", "77"),
        ("user", "bot", "true"),
    ],
)
def test_a_hostile_note_is_invalid(where: str, field: str, value: object) -> None:
    event = note_hook()
    event[where][field] = value
    with pytest.raises(InvalidRequest):
        note(event)


@pytest.mark.parametrize("holder", ["object_attributes", "user", "merge_request", "project"])
def test_a_note_without_an_object_it_needs_is_invalid(holder: str) -> None:
    event = note_hook()
    event[holder] = "x"
    with pytest.raises(InvalidRequest):
        note(event)


@pytest.mark.parametrize(
    "username",
    [
        "project_12_bot",
        "project_12_bot_0a1b2c3d",
        "group_3_bot_ffee",
        "alert-bot",
        "Support-Bot",
        "ghost",
        "renovate-bot",
        "dependabot[bot]",
        "ci_bot",
        "service_account_group_9_abc",
    ],
)
def test_gitlab_bots_are_recognised(username: str) -> None:
    assert is_bot(username)


@pytest.mark.parametrize("username", ["alice", "bot-builder", "robotics", "project_lead"])
def test_people_are_not_bots(username: str) -> None:
    assert not is_bot(username)
