"""Commands in merge-request notes (specification §15 on GitLab, section 17): Note Hook deliveries
to the real service, a real worker on PostgreSQL, and the fake GitLab that says who is a member.

`review` and `help` addressed to `@<our username>` or `/pr-review` by a Developer (30) or higher
become jobs of their kind; our own notes, bots, Reporters and non-members, notes addressed to
no one, and `ignore` or a question outside a discussion are ignored; a help job posts one note
in the command's discussion.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from pr_review_api.forge.gitlab_comments import GITLAB_HELP_TEXT
from pr_review_api.jobs.queue import JobQueue
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_members import Members
from tests.fakes.gitlab_server import FakeGitLab
from tests.gitlab.payloads import PROJECT, note_hook
from tests.jobs.gitlab_service import BOT, GitLabService, note
from tests.jobs.test_jobs import rows, service

DEVELOPER = ("alice", 51)
REPORTER = ("rita", 52)
OUTSIDER = ("mallory", 53)
BLOCKED = ("bob", 54)


def members_of(fake: FakeGitLab) -> Members:
    members = Members.install(fake)
    members.add(PROJECT, user_id=DEVELOPER[1], username=DEVELOPER[0], level=30)
    members.add(PROJECT, user_id=REPORTER[1], username=REPORTER[0], level=20)
    members.add(PROJECT, user_id=BLOCKED[1], username=BLOCKED[0], level=40, state="blocked")
    return members


def by(user: tuple[str, int], note: str, **fields: Any) -> dict[str, Any]:
    return note_hook(note, username=user[0], user_id=user[1], **fields)


def test_review_and_help_from_a_developer_become_jobs_of_their_kind(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    members = members_of(fake_gitlab)
    settings = gitlab_service.settings()

    async def scenario() -> None:
        async with service(settings) as client:
            for text in ("/pr-review review", f"@{BOT} help", f"@{BOT.upper()}  Review"):
                answer = await note(client, by(DEVELOPER, text, note_id=len(text)))
                assert answer.status_code == 202, answer.text
                assert answer.json()["status"] == "queued"
                job = (await client.get(f"/v1/review-jobs/{answer.json()['job_id']}")).json()
                assert job["pull_request"]["forge"] == "gitlab"
                assert (
                    job["pull_request"]["url"]
                    == f"{fake_gitlab.server_url}/{PROJECT}/-/merge_requests/7"
                )

    asyncio.run(scenario())
    kinds = rows(
        database_url, "SELECT kind, post, command->>'author' FROM review_jobs ORDER BY created_at"
    )
    assert kinds == [("review", True, "alice"), ("help", True, "alice"), ("review", True, "alice")]
    # Asked once: the answer is cached for the route's life.
    assert members.asked == [(PROJECT, DEVELOPER[1])]


def test_who_may_not_ask_and_what_is_not_a_command_are_ignored(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    members = members_of(fake_gitlab)
    settings = gitlab_service.settings()
    ignored = [
        by(REPORTER, "/pr-review review"),  # Reporter (20): below Developer
        by(OUTSIDER, "/pr-review review"),  # not a member (404)
        by(BLOCKED, "/pr-review review"),  # a blocked Maintainer
        by((BOT, 99), "/pr-review review"),  # our own note
        by(("project_15_bot_9f2a", 98), "/pr-review review"),  # a project access token's bot
        by(("renovate-bot", 97), "@pr-review-bot review"),
        by(DEVELOPER, "please review this"),  # addressed to no one
        by(DEVELOPER, "@someone-else review"),
        by(DEVELOPER, "/approve"),
        by(DEVELOPER, "/pr-review review now please"),
        by(DEVELOPER, "/pr-review ignore"),  # not in a discussion
        by(DEVELOPER, "/pr-review why is this a bug?"),  # a question outside a discussion
        by(REPORTER, "/pr-review ignore", note_type="DiffNote"),  # a Reporter may not dismiss
        by(REPORTER, "/pr-review why?", note_type="DiscussionNote"),  # nor ask (not the author)
        {
            **by(("helper", 60), "/pr-review ignore", note_type="DiffNote"),  # GitLab's bot flag
            "user": {"id": 60, "username": "helper", "bot": True},
        },
        by(("ci_bot", 61), "/pr-review why?", note_type="DiscussionNote"),
        by(DEVELOPER, "/pr-review review", noteable_type="Issue"),
        by(DEVELOPER, "/pr-review review", system=True),
    ]

    async def scenario() -> None:
        async with service(settings) as client:
            for event in ignored:
                answer = await note(client, event)
                assert answer.status_code == 202, answer.text
                assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(0,)]
    # Only the people whose notes were addressed to us and asked a command were looked up
    # (the Reporter's answer is cached).
    assert sorted(user for _, user in members.asked) == [REPORTER[1], OUTSIDER[1], BLOCKED[1]]


def test_a_repeated_note_delivery_answers_the_same_job(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    members_of(fake_gitlab)
    settings = gitlab_service.settings()

    async def scenario() -> None:
        async with service(settings) as client:
            event = by(DEVELOPER, f"@{BOT} help")
            first = await note(client, event, uuid_header="note-delivery-1")
            again = await note(client, event, uuid_header="note-delivery-1")
            assert first.json()["job_id"] == again.json()["job_id"]

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(1,)]


def test_a_gitlab_that_does_not_answer_makes_the_delivery_server_busy(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    """Who may ask is GitLab's to say; without an answer the delivery is 503 (GitLab may
    deliver it again), never a 500 and never a job."""
    settings = gitlab_service.settings()
    fake_gitlab.api_redirect = "https://elsewhere.example/"

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await note(client, by(DEVELOPER, "/pr-review review"))
            assert answer.status_code == 503
            assert answer.json()["error"]["code"] == "server_busy"
            assert GITLAB_TOKEN not in answer.text

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(0,)]


def test_hostile_notes_are_refused_or_ignored_never_a_500(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    members_of(fake_gitlab)
    settings = gitlab_service.settings()
    hostile: list[dict[str, Any]] = [
        by(DEVELOPER, "/pr-review review", path="../../admin"),
        by(DEVELOPER, "/pr-review review", iid="7"),
        by(DEVELOPER, "/pr-review review", iid=2**64),
        by(DEVELOPER, "/pr-review help", discussion_id="../../../../user"),
        {**by(DEVELOPER, "/pr-review review"), "user": {"username": ["alice"], "id": 51}},
        {**by(DEVELOPER, "/pr-review review"), "merge_request": None},
        {"object_kind": "note"},
    ]

    async def scenario() -> None:
        async with service(settings) as client:
            for event in hostile:
                answer = await note(client, event)
                assert answer.status_code in (202, 422), answer.text
                if answer.status_code == 422:
                    assert answer.json()["error"]["code"] == "invalid_request"
                else:
                    assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(0,)]


async def finished(queue: JobQueue, job_id: str) -> dict[str, Any]:
    for _ in range(600):  # the test's own bound: 30 s
        record = await queue.get(uuid.UUID(job_id))
        assert record is not None
        if record.status in ("succeeded", "failed"):
            return {"status": record.status, "result": record.result}
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not finish")


def notes_posted(fake: FakeGitLab) -> list[tuple[str, dict[str, Any]]]:
    return [
        (request.path, json.loads(request.body))
        for request in fake.api_requests()
        if request.method == "POST" and request.path.endswith("/notes")
    ]


def accept_notes(fake: FakeGitLab) -> None:
    """The merge request's notes endpoints, as far as a help job needs them: 201 and an id."""

    def route(
        fake: FakeGitLab, handler: Any, record: Any, project: Any, tail: list[str], body: bytes
    ) -> bool:
        if record.method != "POST" or tail[:1] != ["merge_requests"] or tail[-1:] != ["notes"]:
            return False
        handler.send_json(record, 201, {"id": 9000 + len(fake.requests), "body": "x"})
        return True

    fake.routes.append(route)


def test_a_help_job_answers_in_the_commands_discussion_or_on_the_merge_request(
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    members_of(fake_gitlab)
    fake_gitlab.merge_request(PROJECT, 7)
    accept_notes(fake_gitlab)
    settings = gitlab_service.settings()
    thread = "6a9c1750b37d513a43987b574953fceb50b03ce7"

    async def scenario() -> None:
        async with gitlab_service.running(settings) as (client, queue):
            in_thread = await note(
                client, by(DEVELOPER, f"@{BOT} help", note_type="DiscussionNote", note_id=1)
            )
            alone = await note(client, by(DEVELOPER, "/pr-review help", note_id=2))
            for answer in (in_thread, alone):
                assert answer.status_code == 202, answer.text
                done = await finished(queue, answer.json()["job_id"])
                assert done == {
                    "status": "succeeded",
                    "result": {"kind": "help", "outcome": "replied"},
                }

    asyncio.run(scenario())
    posted = notes_posted(fake_gitlab)
    base = "/gitlab/api/v4/projects/acme%2Fplatform%2Fwidget/merge_requests/7"
    assert posted == [
        (f"{base}/discussions/{thread}/notes", {"body": GITLAB_HELP_TEXT}),
        (f"{base}/notes", {"body": GITLAB_HELP_TEXT}),
    ]
    # No line of it may start a GitLab quick action.
    assert not [line for line in GITLAB_HELP_TEXT.splitlines() if line.lstrip().startswith("/")]


def test_without_a_gitlab_token_commands_are_ignored_without_asking_gitlab(
    database_url: str,
    fake_gitlab: FakeGitLab,
    gitlab_service: GitLabService,
) -> None:
    """Without GITLAB_TOKEN nothing could be posted, and GitLab could not say who we are."""
    members = members_of(fake_gitlab)
    settings = gitlab_service.settings().model_copy(update={"gitlab_token": None})

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await note(client, by(DEVELOPER, "/pr-review review"))
            assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert members.asked == []
    assert fake_gitlab.api_requests() == []
    assert rows(database_url, "SELECT count(*) FROM review_jobs") == [(0,)]
