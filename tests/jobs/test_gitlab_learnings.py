"""Learnings on GitLab (specification §§20, 17): a Developer's `remember` note on one merge request,
through the Note Hook route and a real worker, shapes the first message of the next merge
request's review of the project; a Reporter's stores nothing; `forget` removes it (one
`thumbsup` each, no text)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.builders import final_turn
from tests.fakes.gitlab_members import Members
from tests.fakes.gitlab_notes import FakeNotes
from tests.gitlab.payloads import note_hook
from tests.jobs.forge_service import finished
from tests.jobs.gitlab_service import BOT, GitLabScene, note
from tests.jobs.test_gitlab_jobs import PROJECT, merge_request
from tests.jobs.test_jobs import rows

pytestmark = pytest.mark.e2e

DEVELOPER = ("alice", 51)
REPORTER = ("rita", 52)
LESSON = "Scripts under tools/ may use bare except: do not flag them."


def _note(notes: FakeNotes, user: tuple[str, int], body: str) -> tuple[int, dict[str, Any]]:
    stored = notes.add(PROJECT, 7, body, user[0])
    return stored.id, note_hook(body, username=user[0], user_id=user[1], note_id=stored.id)


def test_a_developers_remember_shapes_the_next_merge_request_and_forget_removes_it(
    database_url: str, gitlab: GitLabScene
) -> None:
    members = Members.install(gitlab.fake)
    members.add(PROJECT, user_id=DEVELOPER[1], username=DEVELOPER[0], level=30)
    members.add(PROJECT, user_id=REPORTER[1], username=REPORTER[0], level=20)
    merge_request(gitlab.fake, 7)
    second = merge_request(gitlab.fake, 8)
    _, by_reporter = _note(gitlab.notes, REPORTER, f"/pr-review remember {LESSON}")
    told_id, told = _note(gitlab.notes, DEVELOPER, f"@{BOT} remember {LESSON}")
    gitlab.provider.script(final_turn(summary="S"))

    async def scenario(
        client: httpx.AsyncClient,
    ) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any]]:
        refused = (await note(client, by_reporter)).json()
        stored = await finished(client, (await note(client, told)).json()["job_id"])
        created = await client.post(
            "/v1/review-jobs", json={"pull_request_url": second.url, "post": True}
        )
        reviewed = await finished(client, created.json()["job_id"])
        learning_id = stored["result"]["learning_id"]
        forget_id, forget = _note(gitlab.notes, DEVELOPER, f"/pr-review forget {learning_id}")
        forgotten = await finished(client, (await note(client, forget)).json()["job_id"])
        assert (forget_id, "thumbsup", BOT) in gitlab.notes.awards
        return refused, stored, reviewed, forgotten

    refused, stored, reviewed, forgotten = gitlab.run(scenario)
    assert refused == {"status": "ignored"}
    assert stored["result"]["outcome"] == "remembered"
    assert reviewed["status"] == "succeeded", reviewed["result"]
    assert forgotten["result"]["outcome"] == "forgotten"
    assert gitlab.notes.awards[0] == (told_id, "thumbsup", BOT)
    messages = gitlab.provider.requests[-1].json["messages"]
    block = messages[1]["content"].split("<repository_instructions>\n")[1].split("\n</repo")[0]
    learning = {"id": stored["result"]["learning_id"], "text": LESSON}
    assert json.loads(block)["learnings"] == [learning]
    assert LESSON not in messages[0]["content"]
    assert rows(database_url, "SELECT count(*) FROM learnings") == [(0,)]
    asked = rows(database_url, "SELECT command->>'author' FROM review_jobs WHERE kind = 'remember'")
    assert asked == [(DEVELOPER[0],)]
