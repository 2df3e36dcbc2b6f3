"""Jobs of GitLab merge requests run by a real worker (specification §§11, 17): the worker reviews a
merge request of the fake GitLab with `GITLAB_TOKEN` (no GitHub identity: the GitHub settings
point at a port where nothing listens), the job's document names the forge, and a webhook's
job publishes the review on the merge request.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.builders import final_turn
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_members import Members
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.gitlab.payloads import merge_request_hook, note_hook
from tests.jobs.forge_service import (
    assert_reviewed_unpublished,
    finished,
    review_job,
)
from tests.jobs.gitlab_service import BOT, GitLabScene, GitLabService, settings_for
from tests.jobs.test_gitlab_webhooks import deliver
from tests.jobs.test_jobs import rows

# Whole reviews through the service, a worker and the fakes: the default run, not --fast.
pytestmark = pytest.mark.e2e

PROJECT = "acme/platform/widget"
FINDING = {
    "severity": "medium",
    "title": "average() drops the last value",
    "explanation": "The slice stops one short.",
    "path": "a.py",
    "line": 2,
    "evidence": "v[:-1]",
    "recommendation": "Sum every value.",
}


def merge_request(fake: FakeGitLab, iid: int = 7) -> MergeRequestFixture:
    return fake.merge_request(
        PROJECT,
        iid,
        base={"a.py": "def average(v):\n    return 0\n"},
        head={"a.py": "def average(v):\n    return sum(v[:-1]) / len(v)\n"},
        private=True,
    )


def test_a_merge_request_job_is_reviewed_with_the_gitlab_token(
    database_url: str,
    fake_gitlab: FakeGitLab,
    scripted_provider: ScriptedProvider,
    gitlab_service: GitLabService,
) -> None:
    fixture = merge_request(fake_gitlab)
    scripted_provider.script(final_turn(FINDING, summary="One bug."))
    settings = settings_for(gitlab_service, scripted_provider)
    body = {"pull_request_url": fixture.url + "/diffs"}
    job = gitlab_service.run(settings, lambda client: review_job(client, body))
    assert_reviewed_unpublished(
        job,
        {
            "url": fixture.url,
            "owner": "acme/platform",
            "repo": "widget",
            "number": 7,
            "forge": "gitlab",
        },
        fixture.head_sha,
        FINDING["title"],
    )
    assert job["head_sha"] == fixture.head_sha
    scripted_provider.assert_complete()
    # Every request to GitLab carried the token; nothing was posted.
    requests = fake_gitlab.api_requests()
    assert requests
    assert all(request.private_token == GITLAB_TOKEN for request in requests)
    assert not [request for request in requests if request.method != "GET"]
    assert fake_gitlab.git_requests()
    assert rows(database_url, "SELECT tenant FROM review_jobs") == [("gitlab:acme",)]


def test_a_webhook_job_publishes_the_review_on_the_merge_request(gitlab: GitLabScene) -> None:
    fixture = merge_request(gitlab.fake)
    gitlab.provider.script(final_turn(FINDING, summary="One bug."))
    event = merge_request_hook("open", path=PROJECT, head=fixture.head_sha)

    async def scenario(client: httpx.AsyncClient) -> dict[str, Any]:
        answer = await deliver(client, event, uuid_header=str(uuid.uuid4()))
        assert answer.status_code == 202, answer.text
        assert answer.json()["status"] == "queued"
        return await finished(client, answer.json()["job_id"])

    job = gitlab.run(scenario)
    assert job["status"] == "succeeded", job["result"]
    publication = job["result"]["publication"]
    assert publication["status"] == "published"
    assert publication["inline_comments"] == 1
    (note,) = gitlab.notes.plain_notes(PROJECT, 7)
    assert note.author == BOT
    assert f"<!-- pr-review:head={fixture.head_sha} -->" in note.body
    (discussion,) = gitlab.notes.discussions(PROJECT, 7)
    assert discussion.position is not None
    assert discussion.position["new_path"] == "a.py"
    assert discussion.position["new_line"] == 2
    assert discussion.position["head_sha"] == fixture.head_sha
    assert gitlab.notes.quick_actions == []


def test_a_head_is_published_once_unless_a_developer_asks_for_review(
    database_url: str, gitlab: GitLabScene
) -> None:
    """A reopened merge request whose head we published asks no model; `/pr-review review`
    from a Developer reviews and publishes that head again, without repeating its finding."""
    fixture = merge_request(gitlab.fake)
    Members.install(gitlab.fake).add(PROJECT, user_id=51, username="alice", level=30)
    review = {"summary": "One bug.", "findings": [FINDING], "notes": []}
    gitlab.provider.script(stop_turn(review), stop_turn(review))

    async def scenario(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        jobs = []
        for event, kind in (
            (merge_request_hook("open", path=PROJECT, head=fixture.head_sha), None),
            (merge_request_hook("reopen", path=PROJECT, head=fixture.head_sha), None),
            (note_hook("/pr-review review", path=PROJECT), "Note Hook"),
        ):
            answer = await deliver(client, event, kind=kind or "Merge Request Hook")
            assert answer.json()["status"] == "queued", answer.text
            jobs.append(await finished(client, answer.json()["job_id"]))
        return jobs

    first, reopened, asked = gitlab.run(scenario)
    assert first["result"]["publication"]["status"] == "published"
    assert reopened["result"]["publication"]["status"] == "already_published"
    assert reopened["result"]["rounds"] == 0
    assert asked["status"] == "succeeded", asked["result"]
    assert asked["result"]["publication"]["status"] == "published"
    assert asked["result"]["publication"]["duplicates_skipped"] == 1
    gitlab.provider.assert_complete()  # two reviews paid for, not three
    notes = gitlab.notes.plain_notes(PROJECT, 7)
    assert len(notes) == 2
    assert len(gitlab.notes.discussions(PROJECT, 7)) == 1
    kinds = rows(database_url, "SELECT kind FROM review_jobs ORDER BY created_at")
    assert kinds == [("review",), ("review",), ("review",)]


def test_a_webhook_job_honours_the_bases_skip_rules(gitlab: GitLabScene) -> None:
    """A webhook's job is automatic (specification §16): the base's `.pr-review.toml` may skip it,
    with no provider request and nothing posted."""
    fixture = gitlab.fake.merge_request(
        PROJECT,
        9,
        base={".pr-review.toml": 'skip_title = ["[wip]"]\n', "a.py": "x = 0\n"},
        head={"a.py": "x = 1\n"},
        title="[WIP] try something",
    )
    event = merge_request_hook("open", path=PROJECT, iid=9, head=fixture.head_sha)

    async def scenario(client: httpx.AsyncClient) -> dict[str, Any]:
        answer = await deliver(client, event)
        return await finished(client, answer.json()["job_id"])

    job = gitlab.run(scenario)
    assert job["status"] == "succeeded", job["result"]
    assert job["result"]["termination_reason"] == "skipped"
    assert gitlab.provider.requests == []
    assert gitlab.notes.of(PROJECT, 9) == []
