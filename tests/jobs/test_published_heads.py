"""The service's ledger of published heads (`published_heads`, specification §10) on a real embedded
PostgreSQL, a real procrastinate worker, the fake GitHub and the scripted provider.

Three jobs of one head under a flood of others' reviews publish one review and ask the model
once; the later jobs list nothing on GitHub. The ledger's own rules (identity, pull request,
fingerprints of every head, a second record of a head ignored) are tested on it directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from pydantic import SecretStr

from pr_review_api.github.urls import PullRequestRef
from pr_review_api.jobs.published_heads import DatabaseLedger
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import PullRequestJob
from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.ledger import HeadKey
from pr_review_api.model import Publication, ReviewResult
from pr_review_api.settings import Settings
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.jobs.test_comments import FAST

fake_github = github_server.fake_github

BOT = "pr-review-bot"
FLOOD = 3_000
FINDING = {
    "severity": "medium",
    "title": "T",
    "explanation": "Explained.",
    "path": "a.py",
    "line": 2,
    "evidence": "e",
    "recommendation": "r",
}
REVIEW = {"summary": "One finding.", "findings": [FINDING], "notes": []}


def settings_for(database_url: str, fake: FakeGitHub, provider: ScriptedProvider) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    return fake.settings(
        Path("cache").resolve(),
        token=GITHUB_TOKEN,
        opencode_api_key=SecretStr(PROVIDER_KEY),
        opencode_base_url=provider.base_url,
        pr_review_database_url=SecretStr(database_url),
        review_timeout_seconds=120,
    )


@asynccontextmanager
async def worker(settings: Settings) -> AsyncIterator[JobQueue]:
    """A queue with its default runner (the one that keeps the ledger) and a worker."""
    queue = JobQueue(settings, tuning=FAST)
    async with queue.opened():
        task = asyncio.create_task(queue.run_worker(1, install_signal_handlers=False))
        try:
            yield queue
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 10)


async def run_job(queue: JobQueue, job: PullRequestJob) -> dict[str, Any]:
    """Queue the job and wait (up to 60 s, the test's own bound) for its result."""
    enqueued = await queue.enqueue(job, source="api")
    for _ in range(1200):
        record = await queue.get(enqueued.job_id)
        assert record is not None
        if record.status in ("succeeded", "failed", "superseded"):
            assert record.status == "succeeded", record.result
            assert record.result is not None
            return record.result
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not end")


def listings(fake: FakeGitHub) -> int:
    return sum(
        1
        for r in fake.api_requests()
        if r.method == "GET" and r.path.endswith(("/reviews", "/comments"))
    )


def test_three_jobs_of_one_flooded_head_publish_once_and_ask_the_model_once(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "one\ntwo\n"}, head={"a.py": "one\nTWO\n"}
    )
    for _ in range(FLOOD):
        fake_github.add_review("acme", "widget", 7, "flooder", "LGTM")
    settings = settings_for(database_url, fake_github, scripted_provider)
    scripted_provider.script(stop_turn(REVIEW))  # one model turn for the three jobs
    job = PullRequestJob(url=pull.url, owner="acme", repo="widget", number=7, post=True)
    listed: list[int] = []

    async def scenario() -> list[dict[str, Any]]:
        results = []
        async with worker(settings) as queue:
            for _ in range(3):
                results.append(await run_job(queue, job))
                listed.append(listings(fake_github))
        return results

    first, second, third = asyncio.run(scenario())
    scripted_provider.assert_complete()
    assert len(scripted_provider.requests) == 1
    assert first["publication"]["status"] == "published"
    for again in (second, third):
        assert again["publication"]["status"] == "already_published"
        assert again["publication"]["review_id"] == first["publication"]["review_id"]
        # specification §15: no findings, no rounds, no usage; the publication says where it is.
        assert again["termination_reason"] == "already_published"
        assert again["review"]["findings"] == []
        assert (again["rounds"], again["usage"]["total_tokens"]) == (0, 0)
    assert len(fake_github.review_posts) == 1
    assert listed[1] == listed[0] == listed[2]  # the later jobs listed nothing
    rows = _rows(database_url)
    assert len(rows) == 1
    pull_request, identity, head_sha, review_id, fingerprints, dump = rows[0]
    assert (pull_request, identity, head_sha) == ("acme/widget#7", BOT, pull.head_sha)
    assert review_id == first["publication"]["review_id"]
    assert len(fingerprints) == 1
    for secret in (GITHUB_TOKEN, PROVIDER_KEY):
        assert secret not in dump


def _rows(database_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as connection:
        cursor = connection.execute(
            "SELECT pull_request, identity, head_sha, review_id, fingerprints, "
            "row_to_json(p)::text FROM published_heads p"
        )
        return cursor.fetchall()


def _result(head: str) -> ReviewResult:
    return ReviewResult.model_validate(
        {
            "pull_request": {"url": "u", "owner": "Acme", "repo": "Widget", "number": 7},
            "revisions": {"base_sha": "a" * 40, "head_sha": head, "merge_base_sha": "a" * 40},
            "model": "m",
            "review": {"summary": "s", "findings": [], "notes": []},
            "usage": {},
            "rounds": 1,
            "tool_calls": 0,
            "trace": None,
        }
    )


def test_the_ledger_is_per_pull_request_identity_and_head(database_url: str) -> None:
    asyncio.run(apply_migrations(database_url))
    ref = PullRequestRef("Acme", "Widget", 7, "u")
    head, newer = "b" * 40, "c" * 40

    async def scenario() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as db:

            @asynccontextmanager
            async def connection() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
                yield db

            ledger = DatabaseLedger(connection)
            key = HeadKey.of(ref, "Pr-Review-Bot", head)
            published = Publication(status="published", review_id=11, url="https://x/11")
            before = await ledger.find(key)
            await ledger.record(key, published, ["f1", "f2"], _result(head))
            # The same head again (cannot happen, but must not fail or change the first).
            other = Publication(status="published", review_id=12, url="https://x/12")
            await ledger.record(key, other, ["f9"], _result(head))
            await ledger.record(HeadKey.of(ref, BOT, newer), other, ["f2", "f3"], _result(newer))
            stranger = HeadKey.of(ref, "someone-else", head)
            elsewhere = HeadKey.of(PullRequestRef("acme", "widget", 8, "u"), BOT, head)
            return [
                before,
                await ledger.find(HeadKey.of(PullRequestRef("acme", "WIDGET", 7, "u"), BOT, head)),
                await ledger.fingerprints(key),
                await ledger.find(stranger),
                await ledger.fingerprints(stranger),
                await ledger.find(elsewhere),
            ]

    before, found, fingerprints, stranger, stranger_fingerprints, elsewhere = asyncio.run(
        scenario()
    )
    assert before is None
    assert found is not None
    assert (found.review_id, found.url) == (11, "https://x/11")
    again = found.already_published()
    assert again.publication == Publication(
        status="already_published", review_id=11, url="https://x/11"
    )
    assert again.revisions.head_sha == head
    assert fingerprints == {"f1", "f2", "f3"}  # every head of the pull request, f9 never
    assert stranger is None
    assert stranger_fingerprints == set()
    assert elsewhere is None
    assert json.dumps(found.result)  # a plain document


def test_a_job_whose_review_was_published_answers_without_the_model_even_after_restart(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    # A worker that stops and a new one that starts: the record is in the database, not in
    # a process.
    pull = fake_github.pull_request("acme", "widget", 9, head={"a.py": "x\n"})
    settings = settings_for(database_url, fake_github, scripted_provider)
    scripted_provider.script(final_turn(summary="Fine."))
    job = PullRequestJob(url=pull.url, owner="acme", repo="widget", number=9, post=True)

    async def one() -> dict[str, Any]:
        async with worker(settings) as queue:
            return await run_job(queue, job)

    first = asyncio.run(one())
    second = asyncio.run(one())
    scripted_provider.assert_complete()
    assert first["publication"]["status"] == "published"
    assert second["publication"]["status"] == "already_published"
    assert len(fake_github.review_posts) == 1
