"""Who may ask and our replies on GitLab (gitlab/comments.py) against the fake GitLab:
Developer (30) or higher may, inherited or not; a Reporter, a non-member (404), a blocked user
and an answer GitLab refuses to our token may not; a GitLab that fails is `gitlab_unavailable`;
answers are cached per project and user; a reply goes in the discussion or on the merge request.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import (
    AccessLevels,
    DiscussionNote,
    award,
    discussion_notes,
    post_note,
)
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.permissions import PermissionCache
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_members import Members
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab

PROJECT = "grp/sub/project"


def ref_of(fake: FakeGitLab, iid: int = 3) -> MergeRequestRef:
    settings = fake.settings(Path("/nonexistent"), token=GITLAB_TOKEN)
    return parse_merge_request_url(f"{fake.server_url}/{PROJECT}/-/merge_requests/{iid}", settings)


def client_of(fake: FakeGitLab, tmp_path: Path) -> GitLabClient:
    fake.users[GITLAB_TOKEN] = "pr-review-bot"
    return GitLabClient(fake.settings(tmp_path / "cache", token=GITLAB_TOKEN))


@pytest.mark.parametrize(
    ("level", "state", "allowed"),
    [
        (10, "active", False),  # Guest
        (20, "active", False),  # Reporter
        (30, "active", True),  # Developer
        (40, "active", True),  # Maintainer
        (50, "active", True),  # Owner
        (40, "blocked", False),
    ],
)
def test_developer_or_higher_may_ask(
    fake_gitlab: FakeGitLab, tmp_path: Path, level: int, state: str, allowed: bool
) -> None:
    Members.install(fake_gitlab).add(PROJECT, user_id=5, username="u", level=level, state=state)

    async def scenario() -> bool:
        async with client_of(fake_gitlab, tmp_path) as client:
            return await AccessLevels().may_ask(client, ref_of(fake_gitlab), 5)

    assert asyncio.run(scenario()) is allowed


def test_a_non_member_may_not_ask_and_answers_are_cached(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    members = Members.install(fake_gitlab)
    members.add(PROJECT, user_id=5, username="dev", level=30)
    access = AccessLevels()

    async def scenario() -> list[bool]:
        async with client_of(fake_gitlab, tmp_path) as client:
            ref = ref_of(fake_gitlab)
            return [await access.may_ask(client, ref, user) for user in (5, 6, 5, 6)]

    assert asyncio.run(scenario()) == [True, False, True, False]
    assert members.asked == [(PROJECT, 5), (PROJECT, 6)]
    (request, *_) = [r for r in fake_gitlab.api_requests() if "/members/all/" in r.path]
    assert request.path.endswith("/projects/grp%2Fsub%2Fproject/members/all/5")
    assert request.private_token == GITLAB_TOKEN


def test_a_holders_cache_is_shared_and_keeps_a_github_repositorys_answer_apart(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    """The job queue's `PermissionCache` serves the webhook route and the worker's reviews: a
    second `AccessLevels` over it asks GitLab nothing, and a GitHub answer for a repository of
    the same name and a user of the same name as the id is never taken for GitLab's."""
    members = Members.install(fake_gitlab)
    members.add(PROJECT, user_id=5, username="dev", level=30)
    cache = PermissionCache()

    async def github_says_no() -> bool:
        return False

    async def scenario() -> list[bool]:
        await cache.answer(PROJECT, "5", github_says_no)  # GitHub's key: "owner/repo", login
        async with client_of(fake_gitlab, tmp_path) as client:
            ref = ref_of(fake_gitlab)
            webhook, review = AccessLevels(cache), AccessLevels(cache)
            return [await webhook.may_ask(client, ref, 5), await review.may_ask(client, ref, 5)]

    assert asyncio.run(scenario()) == [True, True]
    assert members.asked == [(PROJECT, 5)]


@pytest.mark.parametrize("status", [401, 403])
def test_an_answer_refused_to_our_token_is_a_no(
    fake_gitlab: FakeGitLab, tmp_path: Path, status: int
) -> None:
    def refuse(fake: FakeGitLab, handler: object, record: object, *_: object) -> bool:
        handler.send_json(record, status, {"message": "no"})  # type: ignore[attr-defined]
        return True

    fake_gitlab.project(PROJECT)
    fake_gitlab.routes.append(refuse)

    async def scenario() -> bool:
        async with client_of(fake_gitlab, tmp_path) as client:
            return await AccessLevels().may_ask(client, ref_of(fake_gitlab), 5)

    assert asyncio.run(scenario()) is False


@pytest.mark.parametrize("status", [500, 502, 429])
def test_a_gitlab_that_fails_is_unavailable(
    fake_gitlab: FakeGitLab, tmp_path: Path, status: int
) -> None:
    def failing(fake: FakeGitLab, handler: object, record: object, *_: object) -> bool:
        handler.send_json(record, status, {"message": "down"})  # type: ignore[attr-defined]
        return True

    fake_gitlab.project(PROJECT)
    fake_gitlab.routes.append(failing)

    async def scenario() -> bool:
        async with client_of(fake_gitlab, tmp_path) as client:
            return await AccessLevels().may_ask(client, ref_of(fake_gitlab), 5)

    with pytest.raises(GitLabUnavailable) as caught:
        asyncio.run(scenario())
    assert "down" not in caught.value.message


def test_a_reply_goes_in_the_discussion_or_on_the_merge_request(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    fake_gitlab.merge_request(PROJECT, 3)
    seen: list[tuple[str, str]] = []

    def notes(
        fake: FakeGitLab,
        handler: object,
        record: object,
        project: object,
        tail: list[str],
        body: bytes,
    ) -> bool:
        seen.append(("/".join(tail), json.loads(body)["body"]))
        handler.send_json(record, 201, {"id": 77})  # type: ignore[attr-defined]
        return True

    fake_gitlab.routes.append(notes)

    async def scenario() -> list[int | None]:
        async with client_of(fake_gitlab, tmp_path) as client:
            ref = ref_of(fake_gitlab)
            return [
                await post_note(client, ref, "one", discussion_id="abc123"),
                await post_note(client, ref, "two"),
            ]

    assert asyncio.run(scenario()) == [77, 77]
    assert seen == [
        ("merge_requests/3/discussions/abc123/notes", "one"),
        ("merge_requests/3/notes", "two"),
    ]


def test_a_refused_reply_is_a_contract_error(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    fake_gitlab.project(PROJECT)  # no merge request 3: its notes are 404

    async def scenario() -> None:
        async with client_of(fake_gitlab, tmp_path) as client:
            await post_note(client, ref_of(fake_gitlab), "text")

    with pytest.raises(PullRequestNotFound):
        asyncio.run(scenario())


def test_a_discussion_is_read_and_our_award_is_given_once_however_often_asked(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, tmp_path: Path
) -> None:
    """The discussion's notes, oldest first, with our finding's marker and the head its
    position names; an unknown discussion is None; an award GitLab says we already gave is no
    failure (a job run twice), a note of another merge request is."""
    fake_gitlab.merge_request(PROJECT, 3, base={"a.py": "x = 0\n"}, head={"a.py": "x = 1\n"})
    ref = ref_of(fake_gitlab)
    fingerprint = "ab" * 16

    async def scenario() -> None:
        async with client_of(fake_gitlab, tmp_path) as client:
            first = fake_gitlab_notes.add(
                PROJECT,
                3,
                f"**low** · x\n\n<!-- pr-review:finding={fingerprint} -->",
                "pr-review-bot",
            )
            first.discussion_id = "c" * 40
            first.position = {"head_sha": "d" * 40, "new_path": "a.py", "new_line": 1}
            reply = fake_gitlab_notes.reply(PROJECT, 3, "c" * 40, "why?", "alice")
            notes = await discussion_notes(client, ref, "c" * 40)
            assert notes is not None
            assert [n.id for n in notes] == [first.id, reply.id]
            assert notes[0].finding_fingerprint() == fingerprint
            assert notes[0].posted_head() == "d" * 40
            assert (notes[0].path(), notes[0].line()) == ("a.py", 1)
            assert notes[1].username == "alice"
            assert await discussion_notes(client, ref, "e" * 40) is None
            await award(client, ref, reply.id, "thumbsup")
            await award(client, ref, reply.id, "thumbsup")
            with pytest.raises(PullRequestNotFound):
                await award(client, ref, 999_999, "eyes")

    asyncio.run(scenario())
    assert fake_gitlab_notes.awards == [
        (fake_gitlab_notes.of(PROJECT, 3)[1].id, "thumbsup", "pr-review-bot")
    ]


def test_a_marker_counts_unescaped_and_the_original_position_names_the_head() -> None:
    escaped = DiscussionNote(id=1, body="\\<!-- pr-review:finding=" + "ab" * 16 + " -->")
    assert escaped.finding_fingerprint() is None
    moved = DiscussionNote.model_validate(
        {
            "id": 2,
            "body": "<!-- pr-review:answer=17 -->\\<!-- pr-review:answer=18 -->",
            "position": {"head_sha": "b" * 40},
            "original_position": {"head_sha": "a" * 40},
        }
    )
    assert moved.posted_head() == "a" * 40
    assert moved.answers() == {17}
    assert (
        DiscussionNote.model_validate({"id": 3, "position": {"head_sha": "../x"}}).posted_head()
        is None
    )
