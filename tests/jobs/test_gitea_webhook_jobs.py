"""Signed Gitea deliveries run by a real worker, published (specification §§11, 16, 19, 15): an
`opened` delivery yields one review and the `pr-review` commit status (pending, then the
outcome); the same head delivered again publishes nothing more; a writer's `ignore` in our
finding's conversation is remembered when the next pull request of the repository is reviewed.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import PullFixture
from tests.fakes.provider_server import stop_turn
from tests.gitea.payloads import pull_request_event
from tests.jobs.forge_service import review_job
from tests.jobs.gitea_service import (
    FINDING,
    FINGERPRINT,
    REVIEW,
    WRITER,
    GiteaScene,
    deliver,
    finished,
    jobs_of,
    pull,
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


def test_an_opened_delivery_publishes_one_review_and_its_status(gitea: GiteaScene) -> None:
    gitea.provider.script(stop_turn(REVIEW))

    async def scenario(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        first = await deliver(client, opened(gitea.pull), delivery="o-1")
        again = await deliver(client, opened(gitea.pull), delivery="o-1")
        assert again.json()["job_id"] == first.json()["job_id"]
        jobs = [await finished(client, first.json()["job_id"])]
        # A new delivery of the same head (a redelivery with a new id): no model, no post.
        other = await deliver(client, opened(gitea.pull), delivery="o-2")
        jobs.append(await finished(client, other.json()["job_id"]))
        return jobs

    first, second = gitea.run(scenario)
    assert first["status"] == "succeeded", first["result"]
    publication = first["result"]["publication"]
    assert publication["status"] == "published", publication
    assert publication["inline_comments"] == 1
    (review,) = gitea.our_reviews()
    assert review["commit_id"] == gitea.pull.head_sha
    (comment,) = gitea.writes.review_comments[review["id"]]
    assert (comment["path"], comment["position"]) == (FINDING["path"], FINDING["line"])
    assert f"pr-review:finding={FINGERPRINT}" in comment["body"]
    posted = statuses(gitea.writes, gitea.pull)
    assert posted[:2] == [("pending", "pr-review"), ("success", "pr-review")]
    # The second job of the head completes the status again from our review's counts.
    assert posted[2:] == [("success", "pr-review")]
    assert second["status"] == "succeeded", second["result"]
    assert second["result"]["termination_reason"] == "already_published"
    assert len(gitea.our_reviews()) == 1
    assert gitea.writes.misplaced == []
    assert gitea.writes.stale_commits == []
    gitea.provider.assert_complete()


def test_a_writers_ignore_is_remembered_on_the_next_pull_request(
    database_url: str, gitea: GiteaScene
) -> None:
    gitea.provider.script(stop_turn(REVIEW), stop_turn(REVIEW))

    async def scenario(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        (published,) = await jobs_of(client, [opened(gitea.pull)], kind="pull_request")
        (review,) = gitea.our_reviews()
        (ours,) = gitea.writes.review_comments[review["id"]]
        finding = (review["id"], ours["id"])
        _, ignore = gitea.reply(finding, WRITER, "/pr-review ignore")
        (dismissed,) = await jobs_of(client, [ignore])
        # The next pull request of the repository, with the same finding.
        next_pull = pull(gitea.fake, 4)
        return [published, dismissed, *await jobs_of(client, [opened(next_pull)], "pull_request")]

    published, dismissed, suppressing = gitea.run(scenario)
    assert published["result"]["publication"]["status"] == "published", published["result"]
    assert dismissed["result"]["outcome"] == "dismissed", dismissed["result"]
    assert rows(database_url, "SELECT repository, fingerprint FROM dismissals") == [
        ("gitea:acme/widget", FINGERPRINT)
    ]
    publication = suppressing["result"]["publication"]
    assert publication["suppressed"] == 1, publication
    assert publication["inline_comments"] == 0
    for review in gitea.our_reviews(4):
        assert gitea.writes.review_comments[review["id"]] == []
    gitea.provider.assert_complete()


def test_a_review_job_of_a_gitea_url_asked_to_post_is_published(gitea: GiteaScene) -> None:
    gitea.provider.script(stop_turn(REVIEW))
    body = {"pull_request_url": gitea.pull.url, "post": True}
    job = gitea.run(lambda client: review_job(client, body))
    assert job["status"] == "succeeded", job["result"]
    assert job["result"]["publication"]["status"] == "published"
    assert len(gitea.our_reviews()) == 1
    assert statuses(gitea.writes, gitea.pull) == [
        ("pending", "pr-review"),
        ("success", "pr-review"),
    ]
