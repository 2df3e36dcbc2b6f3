"""A fair turn between tenants for every free worker slot (jobs/fairness.py, docs/service.md).

One tenant floods the queue with webhook deliveries; another's single job must start in the
first slot that frees, whatever the worker concurrency and the number of workers. The review is
a gate the test opens job by job, so the order of starts is exact: the tests count starts, never
time. Workers are real procrastinate workers on the embedded PostgreSQL; deliveries go through
the real application.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobRecord, PullRequestJob
from pr_review_api.settings import Settings
from tests.jobs.test_jobs import (
    SERVER,
    deliver,
    pull,
    pull_request_event,
    review_document,
    rows,
    service,
    settings_for,
    wait_for,
    worker,
)

FLOOD = 12  # one installation's burst of deliveries


class Turnstile:
    """A review that records its start and waits until the test lets that pull request end."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running: dict[str, int] = {}
        self.most_running: dict[str, int] = {}
        self._release: dict[str, asyncio.Event] = {}

    def _event(self, url: str) -> asyncio.Event:
        return self._release.setdefault(url, asyncio.Event())

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        owner = url.split("/")[3].lower()  # GitHub owners are case-insensitive
        self.started.append(url)
        self.running[owner] = self.running.get(owner, 0) + 1
        self.most_running[owner] = max(self.most_running.get(owner, 0), self.running[owner])
        try:
            await self._event(url).wait()
        finally:
            self.running[owner] -= 1
        return review_document(url)

    def release(self, url: str) -> None:
        self._event(url).set()

    def release_all(self) -> None:
        for url in self.started:
            self.release(url)

    def unreleased(self) -> list[str]:
        return [url for url in self.started if not self._event(url).is_set()]


def url_of(owner: str, number: int) -> str:
    return f"{SERVER}/{owner}/widget/pull/{number}"


@asynccontextmanager
async def workers(
    settings: Settings, gate: Turnstile, count: int, concurrency: int
) -> AsyncIterator[JobQueue]:
    async with AsyncExitStack() as stack:
        queues = [
            await stack.enter_async_context(worker(settings, gate, concurrency))
            for _ in range(count)
        ]
        yield queues[0]


async def started(gate: Turnstile, count: int) -> None:
    await wait_for(lambda: _at_least(gate, count), what=f"{count} starts")


async def _at_least(gate: Turnstile, count: int) -> bool:
    return len(gate.started) >= count


async def release_until_all_succeeded(gate: Turnstile, database_url: str, count: int) -> None:
    """Let each started job end, one start at a time, until all `count` jobs succeeded."""
    while len(gate.started) < count:
        gate.release_all()
        await started(gate, len(gate.started) + 1)
    gate.release_all()
    await succeeded(database_url, count)


async def succeeded(database_url: str, count: int) -> None:
    async def done() -> bool:
        found = rows(database_url, "SELECT count(*) FROM review_jobs WHERE status = 'succeeded'")
        return found == [(count,)]

    await wait_for(done, within=60, what=f"{count} jobs succeeded")


async def flood_then_one(
    database_url: str, *, installations: bool, worker_count: int, concurrency: int
) -> list[str]:
    """Deliver the flood, wait until it holds every slot, deliver the other tenant's job, then
    end the flood's jobs one at a time, oldest first, until the other's job has started."""
    gate = Turnstile()
    settings = settings_for(database_url)
    slots = worker_count * concurrency
    other = url_of("other", 1)
    async with service(settings) as client, workers(settings, gate, worker_count, concurrency):
        for number in range(1, FLOOD + 1):
            event = pull_request_event(
                number, owner="flood", installation=10 if installations else None
            )
            assert (await deliver(client, event)).status_code == 202
        await started(gate, slots)
        event = pull_request_event(1, owner="other", installation=20 if installations else None)
        assert (await deliver(client, event)).status_code == 202
        while other not in gate.started:
            count = len(gate.started)
            gate.release(gate.unreleased()[0])
            await started(gate, count + 1)
        gate.release_all()
        while len(gate.started) < FLOOD + 1:
            await started(gate, len(gate.started) + 1)
            gate.release_all()
        await succeeded(database_url, FLOOD + 1)
    return gate.started


@pytest.mark.parametrize(
    ("worker_count", "concurrency"),
    [(1, 1), (1, 2), (1, 4), (2, 1)],
    ids=["1x1", "1x2", "1x4", "2x1"],
)
def test_flooding_installation_delays_another_by_at_most_one_job(
    database_url: str, worker_count: int, concurrency: int
) -> None:
    order = asyncio.run(
        flood_then_one(
            database_url, installations=True, worker_count=worker_count, concurrency=concurrency
        )
    )
    slots = worker_count * concurrency
    other = order.index(url_of("other", 1))
    # The flood held every slot when the other job arrived; the first slot that freed took it.
    assert other == slots, order
    assert sorted(order) == sorted(
        [url_of("flood", n) for n in range(1, FLOOD + 1)] + [order[other]]
    )


def test_jobs_without_an_installation_take_turns_by_owner(database_url: str) -> None:
    order = asyncio.run(
        flood_then_one(database_url, installations=False, worker_count=1, concurrency=2)
    )
    assert order.index(url_of("other", 1)) == 2, order


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_queue_already_full_serves_each_tenant_in_turn(
    database_url: str, concurrency: int
) -> None:
    """The flood and the other job all wait before any worker starts: the other job is the
    second to start, after the flood's first, at any concurrency."""
    gate = Turnstile()
    settings = settings_for(database_url)

    async def scenario() -> None:
        queue = JobQueue(settings)
        async with queue.opened():
            for number in range(1, FLOOD + 1):
                await queue.enqueue(pull(number, owner="flood", installation_id=10), source="api")
            await queue.enqueue(pull(1, owner="other", installation_id=20), source="api")
        async with worker(settings, gate, concurrency):
            await started(gate, concurrency)
            await release_until_all_succeeded(gate, database_url, FLOOD + 1)

    asyncio.run(scenario())
    assert gate.started[0] == url_of("flood", 1)
    assert gate.started[1] == url_of("other", 1), gate.started


def test_running_cap_applies_to_an_owner_without_installation(database_url: str) -> None:
    """Jobs without an installation are one tenant per owner (case-insensitive), held to
    PR_REVIEW_INSTALLATION_MAX_RUNNING like an installation, while free slots serve others."""
    gate = Turnstile()
    settings = settings_for(database_url, pr_review_installation_max_running=1)
    floods = [pull(n, owner="Flood" if n % 2 else "flood") for n in range(1, 5)]

    async def scenario() -> None:
        async with worker(settings, gate, concurrency=4) as queue:
            for job in floods:
                await queue.enqueue(job, source="api")
            await queue.enqueue(pull(1, owner="other"), source="api")
            await started(gate, 2)
            await asyncio.sleep(1.0)  # ten polls: no second job of the flood's owner starts
            assert len(gate.started) == 2, gate.started
            await release_until_all_succeeded(gate, database_url, len(floods) + 1)

    asyncio.run(scenario())
    assert gate.most_running == {"flood": 1, "other": 1}
    assert url_of("other", 1) in gate.started[:2]
    tenants = rows(database_url, "SELECT DISTINCT tenant FROM review_jobs ORDER BY tenant")
    assert tenants == [("owner:flood",), ("owner:other",)]


def test_an_owner_of_one_name_on_two_forges_is_two_tenants(database_url: str) -> None:
    """A GitHub owner `acme` and a Gitea owner `acme` are different accounts on different
    servers: each has its own cap of one running job (migration 9), so one of each runs at once
    and neither waits for the other's turn."""
    gate = Turnstile()
    gitea = "https://gitea.example"
    settings = settings_for(
        database_url, pr_review_installation_max_running=1, gitea_server_url=gitea
    )
    github_jobs = [pull(n) for n in (1, 2)]
    gitea_jobs = [
        PullRequestJob(url=f"{gitea}/acme/widget/pulls/{n}", owner="acme", repo="widget", number=n)
        for n in (1, 2)
    ]

    async def scenario() -> None:
        async with worker(settings, gate, concurrency=4) as queue:
            for job in github_jobs + gitea_jobs:
                await queue.enqueue(job, source="api")
            await started(gate, 2)
            await asyncio.sleep(1.0)  # ten polls: no second job of either tenant starts
            assert len(gate.started) == 2, gate.started
            await release_until_all_succeeded(gate, database_url, 4)

    asyncio.run(scenario())
    assert sorted(gate.started[:2]) == [f"{gitea}/acme/widget/pulls/1", url_of("acme", 1)]
    assert gate.most_running == {"acme": 2}  # one per forge, under a cap of one per tenant
    tenants = rows(database_url, "SELECT DISTINCT tenant FROM review_jobs ORDER BY tenant")
    assert tenants == [("gitea:acme",), ("owner:acme",)]


def test_jobs_of_one_pull_request_still_wait_for_each_other(database_url: str) -> None:
    """The fair fetch keeps procrastinate's lock rule: a pull request's second job waits for
    its first, even when its tenant is the least served."""
    gate = Turnstile()
    settings = settings_for(database_url)
    url = url_of("acme", 7)

    async def scenario() -> None:
        async with worker(settings, gate, concurrency=4) as queue:
            first = await queue.enqueue(pull(7, head_sha="1" * 40), source="api")
            await started(gate, 1)
            second = await queue.enqueue(pull(7, head_sha="2" * 40), source="api")
            await asyncio.sleep(1.0)  # ten polls with three free slots
            assert gate.started == [url]
            gate.release(url)
            await started(gate, 2)
            gate.release_all()
            await succeeded(database_url, 2)
            for job in (first, second):
                record = await queue.get(uuid.UUID(str(job.job_id)))
                assert record is not None
                assert record.status == "succeeded"

    asyncio.run(scenario())
    assert gate.started == [url, url]
