"""Signed Gitea deliveries run by a real worker, published (specification §§11, 16, 19, 15): an
`opened` delivery yields one review and the `pr-review` commit status (pending, then the
outcome); the same head delivered again publishes nothing more; a writer's `ignore` in our
finding's conversation is remembered when the next pull request of the repository is reviewed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.gitea.payloads import pull_request_event
from tests.jobs.gitea_service import (
    FINDING,
    REVIEW,
    GiteaService,
    deliver,
    finished,
    pull,
)
from tests.jobs.test_gitea_comments import (
    FINGERPRINT,
    WRITER,
    our_reviews,
    reply,
    settings_for,
)
from tests.jobs.test_jobs import rows

pytestmark = pytest.mark.e2e


def opened(fixture: PullFixture) -> dict[str, Any]:
    event = pull_request_event("opened", number=fixture.index)
    event["pull_request"]["head"]["sha"] = fixture.head_sha
    return event


def statuses(writes: GiteaWrites, fixture: PullFixture) -> list[tuple[str, str]]:
    posted = writes.statuses.get((fixture.repo.id, fixture.head_sha), [])
    return [(s["status"], s["context"]) for s in posted]


def test_an_opened_delivery_publishes_one_review_and_its_status(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    gitea_service: GiteaService,
) -> None:
    settings = settings_for(gitea_service, scripted_provider)
    fixture = pull(fake_gitea)
    scripted_provider.script(stop_turn(REVIEW))

    async def scenario() -> list[dict[str, Any]]:
        async with gitea_service.running(settings) as (client, _):
            first = await deliver(client, opened(fixture), delivery="o-1")
            again = await deliver(client, opened(fixture), delivery="o-1")
            assert again.json()["job_id"] == first.json()["job_id"]
            jobs = [await finished(client, first.json()["job_id"])]
            # A new delivery of the same head (a redelivery with a new id): no model, no post.
            other = await deliver(client, opened(fixture), delivery="o-2")
            jobs.append(await finished(client, other.json()["job_id"]))
            return jobs

    first, second = asyncio.run(scenario())
    assert first["status"] == "succeeded", first["result"]
    publication = first["result"]["publication"]
    assert publication["status"] == "published", publication
    assert publication["inline_comments"] == 1
    (review,) = our_reviews(fake_gitea_writes)
    assert review["commit_id"] == fixture.head_sha
    (comment,) = fake_gitea_writes.review_comments[review["id"]]
    assert (comment["path"], comment["position"]) == (FINDING["path"], FINDING["line"])
    assert f"pr-review:finding={FINGERPRINT}" in comment["body"]
    posted = statuses(fake_gitea_writes, fixture)
    assert posted[:2] == [("pending", "pr-review"), ("success", "pr-review")]
    # The second job of the head completes the status again from our review's counts.
    assert posted[2:] == [("success", "pr-review")]
    assert second["status"] == "succeeded", second["result"]
    assert second["result"]["termination_reason"] == "already_published"
    assert len(our_reviews(fake_gitea_writes)) == 1
    assert fake_gitea_writes.misplaced == []
    assert fake_gitea_writes.stale_commits == []
    scripted_provider.assert_complete()


def test_a_writers_ignore_is_remembered_on_the_next_pull_request(
    database_url: str,
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    gitea_service: GiteaService,
) -> None:
    settings = settings_for(gitea_service, scripted_provider)
    first_pull = pull(fake_gitea)
    scripted_provider.script(stop_turn(REVIEW), stop_turn(REVIEW))

    async def scenario() -> list[dict[str, Any]]:
        async with gitea_service.running(settings) as (client, _):
            sent = await deliver(client, opened(first_pull))
            published = await finished(client, sent.json()["job_id"])
            (review,) = our_reviews(fake_gitea_writes)
            (ours,) = fake_gitea_writes.review_comments[review["id"]]
            _, ignore = reply(
                fake_gitea,
                fake_gitea_writes,
                (review["id"], ours["id"]),
                WRITER,
                "/pr-review ignore",
            )
            sent = await deliver(client, ignore, kind="pull_request_comment")
            dismissed = await finished(client, sent.json()["job_id"])
            # The next pull request of the repository, with the same finding.
            next_pull = pull(fake_gitea, 4)
            sent = await deliver(client, opened(next_pull))
            return [published, dismissed, await finished(client, sent.json()["job_id"])]

    published, dismissed, suppressing = asyncio.run(scenario())
    assert published["result"]["publication"]["status"] == "published", published["result"]
    assert dismissed["result"]["outcome"] == "dismissed", dismissed["result"]
    assert rows(database_url, "SELECT repository, fingerprint FROM dismissals") == [
        ("gitea:acme/widget", FINGERPRINT)
    ]
    publication = suppressing["result"]["publication"]
    assert publication["suppressed"] == 1, publication
    assert publication["inline_comments"] == 0
    for review in our_reviews(fake_gitea_writes, 4):
        assert fake_gitea_writes.review_comments[review["id"]] == []
    scripted_provider.assert_complete()


def test_a_review_job_of_a_gitea_url_asked_to_post_is_published(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    gitea_service: GiteaService,
) -> None:
    settings = settings_for(gitea_service, scripted_provider)
    fixture = pull(fake_gitea)
    scripted_provider.script(stop_turn(REVIEW))

    async def scenario() -> dict[str, Any]:
        async with gitea_service.running(settings) as (client, _):
            body = {"pull_request_url": fixture.url, "post": True}
            created = await client.post("/v1/review-jobs", json=body)
            assert created.status_code == 202, created.text
            return await finished(client, created.json()["job_id"])

    job = asyncio.run(scenario())
    assert job["status"] == "succeeded", job["result"]
    assert job["result"]["publication"]["status"] == "published"
    assert len(our_reviews(fake_gitea_writes)) == 1
    assert statuses(fake_gitea_writes, fixture) == [
        ("pending", "pr-review"),
        ("success", "pr-review"),
    ]
