"""Jobs go where the cache is (jobs/affinity.py).

The choice of a queue is a pure function, tested first. Then real procrastinate workers with
different host ids on the embedded PostgreSQL: each host runs its own repositories' jobs, a
busy owner spills to the second home and then to the shared queue, a dead host's waiting jobs
(and, with a `pr-review worker` process SIGKILLed mid-review, its running one) are run by
another host, the fairness between tenants holds across hosts, and one host is the shared
queue of before. Every test counts rows and starts, never time.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from pr_review_api.jobs import affinity
from pr_review_api.jobs.affinity import HostLoad, choose_queue, host_queue, ranked, repository_of
from pr_review_api.jobs.queue import JobQueue, QueueTuning
from pr_review_api.jobs.records import JobRecord
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn
from tests.jobs.test_fairness import (
    Turnstile,
    release_until_all_succeeded,
    started,
    succeeded,
)
from tests.jobs.test_jobs import (
    FAST,
    REVIEW,
    pull,
    review_document,
    rows,
    settings_for,
    wait_for,
    worker,
)

HOSTS = ("host-a", "host-b")
# A host process's heartbeat every 2 s (a `pr-review worker`'s default) is well inside this,
# even on a loaded machine.
SLOW_HEARTBEATS = QueueTuning(
    poll_interval=0.1, heartbeat_interval=0.5, stalled_after=10.0, stalled_check_interval=0.5
)
# What an enqueueing process sees as live: every host that ever beat in this test, however
# slow the machine (a worker's own recovery still uses its short bound).
LIVE_LONG = replace(SLOW_HEARTBEATS, stalled_after=3600.0)


def loads(*hosts: tuple[str, int, int]) -> list[HostLoad]:
    return [HostLoad(host, slots, waiting) for host, slots, waiting in hosts]


def owned_by(host: str, count: int, hosts: tuple[str, ...] = HOSTS) -> list[str]:
    """`count` owners whose repository `<owner>/widget` has `host` as its rendezvous owner."""
    names = (f"team{n}" for n in range(1000))
    return [name for name in names if ranked(f"{name}/widget", hosts)[0] == host][:count]


# --- the choice, a pure function -------------------------------------------------------------


def test_one_host_or_none_is_the_shared_queue_of_before() -> None:
    assert choose_queue("acme/widget", []) == affinity.SHARED_QUEUE
    assert choose_queue("acme/widget", loads(("only", 4, 0))) == affinity.SHARED_QUEUE
    assert choose_queue("acme/widget", loads(("only", 4, 99))) == affinity.SHARED_QUEUE


def test_the_owner_is_stable_and_a_gone_host_moves_only_its_own_repositories() -> None:
    repositories = [f"team{n}/repo{n}" for n in range(100)]
    four = ["w1", "w2", "w3", "w4"]
    owners = {repo: ranked(repo, four)[0] for repo in repositories}
    # Asked again, or with the hosts listed in another order: the same owner.
    assert owners == {repo: ranked(repo, reversed(four))[0] for repo in repositories}
    assert all(list(owners.values()).count(host) >= 12 for host in four)  # a fair spread
    after = {repo: ranked(repo, four[:3])[0] for repo in repositories}
    moved = [repo for repo in repositories if after[repo] != owners[repo]]
    assert moved == [repo for repo in repositories if owners[repo] == "w4"]
    # Each moved to its second-ranked host: the second home it spilled to already.
    assert all(after[repo] == ranked(repo, four)[1] for repo in moved)


def test_a_busy_owner_spills_to_the_second_home_then_to_the_shared_queue() -> None:
    repo = "acme/widget"
    first, second = ranked(repo, ["x", "y", "z"])[:2]
    free = {host: (host, 2, 0) for host in ("x", "y", "z")}
    assert choose_queue(repo, loads(*free.values())) == host_queue(first)
    busy_owner = {**free, first: (first, 2, 2)}
    assert choose_queue(repo, loads(*busy_owner.values())) == host_queue(second)
    both_busy = {**busy_owner, second: (second, 2, 5)}
    assert choose_queue(repo, loads(*both_busy.values())) == affinity.SHARED_QUEUE
    # `place` counts each job it places, so a burst fills the owner, then the second home.
    hosts = loads(*free.values())
    burst = [affinity.place(repo, hosts) for _ in range(6)]
    assert burst == [host_queue(first)] * 2 + [host_queue(second)] * 2 + ["reviews"] * 2


def test_a_changes_repository_is_its_key_without_the_number() -> None:
    assert repository_of("acme/widget#7") == "acme/widget"
    assert repository_of("gitlab:group/sub/project!12") == "gitlab:group/sub/project"
    assert repository_of("gitea:o/r#3") == "gitea:o/r"
    assert repository_of("a#b/c#9") == "a#b/c"


# --- real workers on the embedded database ---------------------------------------------------


class Recorder:
    """A review that records which host ran which pull request."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        self.ran.append((settings.pr_review_worker_host, record.pull_request_url))
        return review_document(record.pull_request_url)


def host_settings(database_url: str, host: str, **overrides: Any) -> Settings:
    return settings_for(database_url, pr_review_worker_host=host, **overrides)


@asynccontextmanager
async def host_workers(
    database_url: str,
    runner: Any,
    concurrency: int,
    hosts: tuple[str, ...] = HOSTS,
    **overrides: Any,
) -> AsyncIterator[None]:
    """One in-process worker per host, each with its own host id (and `overrides`); yields
    once every host's heartbeat is in the database (so that enqueueing sees them all)."""
    async with AsyncExitStack() as stack:
        for host in hosts:
            settings = host_settings(database_url, host, **overrides)
            await stack.enter_async_context(worker(settings, runner, concurrency))

        async def all_beating() -> bool:
            found = rows(database_url, "SELECT count(DISTINCT host) FROM pr_review_worker_hosts")
            return found == [(len(hosts),)]

        await wait_for(all_beating, what="every host's heartbeat")
        yield


async def enqueue_all(settings: Settings, owners: list[str]) -> None:
    queue = JobQueue(settings, tuning=LIVE_LONG)
    async with queue.opened():
        for owner in owners:
            await queue.enqueue(pull(1, owner=owner, installation_id=None), source="api")


def queues_by_owner(database_url: str) -> dict[str, str]:
    found = rows(
        database_url,
        "SELECT r.owner, q.queue_name FROM review_jobs r JOIN procrastinate_jobs q "
        "ON q.id = r.queue_job_id",
    )
    return {str(owner): str(queue) for owner, queue in found}


def test_two_hosts_each_run_their_own_repositories_jobs(database_url: str) -> None:
    recorder = Recorder()
    mine = {host: owned_by(host, 3) for host in HOSTS}
    owners = [owner for pair in zip(*mine.values(), strict=True) for owner in pair]

    async def scenario() -> None:
        # 4 slots a host, at most 3 of its jobs waiting: no host is ever busy, none spills.
        async with host_workers(database_url, recorder, concurrency=4):
            await enqueue_all(settings_for(database_url), owners)
            await succeeded(database_url, len(owners))

    asyncio.run(scenario())
    expected = {owner: host_queue(host) for host, names in mine.items() for owner in names}
    assert queues_by_owner(database_url) == expected
    ran = {url.split("/")[3]: host for host, url in recorder.ran}
    assert ran == {owner: host for host, names in mine.items() for owner in names}
    assert sorted(rows(database_url, "SELECT owner, worker_host FROM review_jobs")) == sorted(
        ran.items()
    )


def test_one_host_is_the_shared_queue_of_before(database_url: str) -> None:
    recorder = Recorder()
    owners = [f"team{n}" for n in range(5)]

    async def scenario() -> None:
        async with host_workers(database_url, recorder, concurrency=2, hosts=("solo",)):
            await enqueue_all(settings_for(database_url), owners)
            await succeeded(database_url, len(owners))

    asyncio.run(scenario())
    assert set(queues_by_owner(database_url).values()) == {"reviews"}
    assert {host for host, _ in recorder.ran} == {"solo"}
    assert len(recorder.ran) == len(owners)


async def beat(settings: Settings, host: str, slots: int) -> uuid.UUID:
    """A heartbeat row of a process of `host` that runs no worker (yet)."""
    process = uuid.uuid4()
    queue = JobQueue(settings, tuning=FAST)
    async with queue.opened(), queue.transaction() as connection:
        await affinity.heartbeat(connection, process, host, slots)
    return process


def test_a_busy_owner_spills_and_every_job_still_runs(database_url: str) -> None:
    recorder = Recorder()
    settings = settings_for(database_url)
    repo = "acme/widget"
    owner, second = ranked(repo, HOSTS)

    async def scenario() -> None:
        for host in HOSTS:  # one slot each, no worker running yet: every job waits
            await beat(settings, host, 1)
        queue = JobQueue(settings, tuning=LIVE_LONG)
        async with queue.opened():
            for number in (1, 2, 3):
                await queue.enqueue(pull(number, installation_id=None), source="api")
        placed = rows(
            database_url,
            "SELECT r.number, q.queue_name FROM review_jobs r JOIN procrastinate_jobs q "
            "ON q.id = r.queue_job_id ORDER BY r.number",
        )
        assert placed == [(1, host_queue(owner)), (2, host_queue(second)), (3, "reviews")]
        async with host_workers(database_url, recorder, concurrency=1):
            await succeeded(database_url, 3)

    asyncio.run(scenario())
    ran = {url.rsplit("/", 1)[1]: host for host, url in recorder.ran}
    assert ran["1"] == owner
    assert ran["2"] == second
    assert sorted(ran) == ["1", "2", "3"]


def test_jobs_waiting_on_a_dead_hosts_queue_are_run_by_another(database_url: str) -> None:
    recorder = Recorder()
    dead, alive = HOSTS
    theirs = owned_by(dead, 4)
    settings = settings_for(database_url)

    async def scenario() -> None:
        await beat(settings, dead, 8)  # a host that beat once, then died
        await beat(settings, alive, 8)
        await enqueue_all(settings, theirs)
        assert set(queues_by_owner(database_url).values()) == {host_queue(dead)}
        # The living host's worker: once the dead one's heartbeat is older than the stalled
        # bound, its recovery moves the jobs to a queue it takes from.
        async with worker(host_settings(database_url, alive), recorder, 2):
            await succeeded(database_url, len(theirs))

    asyncio.run(scenario())
    assert sorted(recorder.ran) == sorted(
        (alive, f"https://github.example/{owner}/widget/pull/1") for owner in theirs
    )
    # With a single live host, its shared queue of before.
    assert set(queues_by_owner(database_url).values()) == {"reviews"}


def test_a_job_held_by_a_busy_host_is_taken_by_another_after_the_spill_bound(
    database_url: str,
) -> None:
    """A host whose heartbeat is fresh but takes nothing (busy, or stuck): once its jobs have
    waited `spill_after`, the other host's fair fetch takes them where they are."""
    recorder = Recorder()
    stuck, free = HOSTS
    theirs = owned_by(stuck, 3)
    settings = settings_for(database_url)

    async def scenario() -> None:
        await beat(settings, stuck, 8)
        await beat(settings, free, 8)
        queue = JobQueue(settings, tuning=LIVE_LONG)
        async with queue.opened():
            for owner in theirs:
                await queue.enqueue(pull(1, owner=owner, installation_id=None), source="api")
        assert set(queues_by_owner(database_url).values()) == {host_queue(stuck)}
        stealing = replace(LIVE_LONG, spill_after=0.5)
        queue = JobQueue(host_settings(database_url, free), runner=recorder, tuning=stealing)
        async with queue.opened():
            task = asyncio.create_task(queue.run_worker(2, install_signal_handlers=False))
            try:
                await succeeded(database_url, len(theirs))
            finally:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task

    asyncio.run(scenario())
    assert {host for host, _ in recorder.ran} == {free}
    assert len(recorder.ran) == len(theirs)
    # Taken from the stuck host's queue, not moved off it: that host still counts as live.
    assert set(queues_by_owner(database_url).values()) == {host_queue(stuck)}


def test_a_waiting_tenant_starts_within_one_job_of_each_host(database_url: str) -> None:
    """A tenant's flood across two hosts: the flood and the other tenant's job all wait before
    any worker starts; the other job is among the first starts of the two hosts (each host's
    first fetch may be the flood's oldest job, never its second)."""
    gate = Turnstile()
    settings = settings_for(database_url)
    other = "https://github.example/other/widget/pull/1"

    async def scenario() -> None:
        for host in HOSTS:
            await beat(settings, host, 1)
        queue = JobQueue(settings, tuning=LIVE_LONG)
        async with queue.opened():
            for number in range(1, 13):
                await queue.enqueue(pull(number, owner="flood", installation_id=10), source="api")
            await queue.enqueue(pull(1, owner="other", installation_id=20), source="api")
        async with host_workers(database_url, gate, concurrency=1):
            await started(gate, 2)
            await release_until_all_succeeded(gate, database_url, 13)

    asyncio.run(scenario())
    assert other in gate.started[:2], gate.started
    hosts = {host for (host,) in rows(database_url, "SELECT worker_host FROM review_jobs")}
    assert hosts == set(HOSTS)  # both hosts ran jobs: the flood did not pin itself to one


def test_the_tenant_cap_holds_across_hosts(database_url: str) -> None:
    gate = Turnstile()
    settings = settings_for(database_url, pr_review_installation_max_running=1)
    floods = [pull(n, owner="flood", installation_id=None) for n in range(1, 5)]

    async def scenario() -> None:
        async with host_workers(
            database_url, gate, concurrency=2, pr_review_installation_max_running=1
        ):
            queue = JobQueue(settings, tuning=FAST)
            async with queue.opened():
                for job in floods:
                    await queue.enqueue(job, source="api")
                await queue.enqueue(pull(1, owner="other", installation_id=None), source="api")
            await started(gate, 2)
            await release_until_all_succeeded(gate, database_url, len(floods) + 1)

    asyncio.run(scenario())
    # Four slots over two hosts, and never two of the flood's jobs at once.
    assert gate.most_running == {"flood": 1, "other": 1}


# --- a `pr-review worker` process killed mid-review --------------------------------------------


def _worker_process(environment: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--concurrency", "1"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_a_killed_hosts_running_and_waiting_jobs_are_run_by_another(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    heads = {
        n: fake_github.pull_request("acme", "widget", n, head={f"f{n}.py": "x = 1\n"}).head_sha
        for n in (7, 8)
    }
    github = fake_github.settings(Path("cache"), token=GITHUB_TOKEN)
    doomed, survivor = ranked("acme/widget", HOSTS)  # the repository's owner dies
    # The doomed host's provider request hangs until SIGKILL; the survivor's answer.
    scripted_provider.script(
        Fault.delay(60, stop_turn(REVIEW)), stop_turn(REVIEW), stop_turn(REVIEW)
    )
    cache = Path("cache").resolve()
    environment = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENCODE_", "GITHUB_", "PR_REVIEW_"))
        },
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": scripted_provider.base_url,
        "GITHUB_SERVER_URL": github.github_server_url,
        "GITHUB_API_URL": github.github_api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PR_REVIEW_CACHE_DIR": str(cache / doomed),
        "PR_REVIEW_DATABASE_URL": database_url,
        "PR_REVIEW_WORKER_HOST": doomed,
    }
    settings = settings_for(
        database_url,
        github_server_url=github.github_server_url,
        github_api_url=github.github_api_url,
        github_token=github.github_token,
        pr_review_cache_dir=cache / survivor,
        opencode_base_url=scripted_provider.base_url,
        pr_review_worker_host=survivor,
    )

    async def run() -> dict[int, tuple[Any, ...]]:
        queue = JobQueue(settings, tuning=SLOW_HEARTBEATS)
        await queue.migrate()
        process = _worker_process(environment)
        try:
            async with worker_on(settings, queue):

                async def both_beating() -> bool:
                    found = rows(database_url, "SELECT DISTINCT host FROM pr_review_worker_hosts")
                    return sorted(found) == sorted((host,) for host in HOSTS)

                await wait_for(both_beating, within=60, what="both hosts' heartbeats")
                first = await queue.enqueue(
                    pull(7, server=fake_github.server_url, head_sha=heads[7]), source="webhook"
                )
                await wait_for(lambda: _asked(scripted_provider), within=60, what="a review")
                # The doomed host runs job 7 (its one slot); job 8 waits in its queue.
                second = await queue.enqueue(
                    pull(8, server=fake_github.server_url, head_sha=heads[8]), source="webhook"
                )
                placed = rows(database_url, "SELECT queue_name FROM procrastinate_jobs")
                assert placed == [(host_queue(doomed),)] * 2
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=10)
                for job in (first, second):
                    done = functools.partial(_is_done, queue, job.job_id)
                    await wait_for(done, within=60, what="recovery")
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        found = rows(database_url, "SELECT number, status, worker_host, attempts FROM review_jobs")
        return {int(row[0]): row[1:] for row in found}

    outcome = asyncio.run(run())
    assert outcome == {7: ("succeeded", survivor, 2), 8: ("succeeded", survivor, 1)}
    assert len(scripted_provider.requests) == 3


async def _asked(provider: ScriptedProvider) -> bool:
    return len(provider.requests) >= 1


async def _is_done(queue: JobQueue, job_id: uuid.UUID) -> bool:
    record = await queue.get(job_id)
    return record is not None and record.status == "succeeded"


@asynccontextmanager
async def worker_on(settings: Settings, queue: JobQueue) -> AsyncIterator[None]:
    """`queue` (opened here) running one worker slot with the default reviewer."""
    async with queue.opened():
        task = asyncio.create_task(queue.run_worker(1, install_signal_handlers=False))
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 10)
