"""Jobs that go where the cache is: one queue per worker host.

Each worker host keeps its own repository cache (fetched packs, search indexes), so a job run
on a host that has never seen its repository pays the whole fetch and the index build again.
Here every worker host has a stable id (`PR_REVIEW_WORKER_HOST`, the host name by default) and
its workers take jobs from two procrastinate queues: the shared one (`reviews`, as before)
and their host's own (`reviews@<host>`). Every worker process writes a heartbeat row
(`pr_review_worker_hosts`, schema migration 8) every few seconds; a host is live while one of
its processes was seen within the stalled-worker bound.

Whoever defers a job (the webhook, the API, a retry, a recovery) puts it, in the same
transaction, in the queue `choose_queue` names for its repository:

- fewer than two live hosts: the shared queue, exactly as a single-host deployment always did;
- else the repository's owner, the live host ranked first by rendezvous hashing (the highest
  SHA-256 of host and repository: when a host comes or goes only its own repositories move);
- the owner busy (as many due jobs waiting in its queue as it has slots): the second-ranked
  host, the repository's second home, when that one is not busy itself;
- both busy: the shared queue, which every host takes from.

Which job a free slot takes is still the fairness rule of `jobs.fairness` (the tenant with
the fewest jobs running, then the oldest turn, under the per-tenant cap, all hosts together),
among the jobs of its two queues and those that have waited `SPILL_AFTER_SECONDS` in another
host's (schema migration 8), so affinity never lets a tenant starve: it chooses where a job
waits first, and a busy or stuck host holds a job back for a bounded time.
A job never stays on a dead host's queue: any live worker's recovery (`rehome`) moves the
waiting jobs of hosts without a heartbeat to the queue `choose_queue` names among the live
ones, and a dead host's running jobs, put back by the stalled-job recovery, follow the same
way. `bench/affinity.py` simulates this very function (it imports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

SHARED_QUEUE = "reviews"
HOST_QUEUE_PREFIX = "reviews@"
# A host is busy when this many due jobs per slot wait in its own queue: a job placed behind
# them would wait about one review, longer than another host takes to fetch most repositories.
BACKLOG_PER_SLOT = 1
# The homes a repository has: its owner, then the host its jobs spill to when the owner is busy.
HOMES = 2
# A job that waited this long in its host's queue may be taken by any host (the fair fetch of
# jobs/fairness.py): a busy or stuck host delays a job by at most this, plus a fair turn.
SPILL_AFTER_SECONDS = 60.0
# Heartbeat rows of processes gone this long are deleted (a clean stop deletes its own at once).
FORGET_AFTER_SECONDS = 24 * 3600

# A change's key (forge/urls.py's `change_key`) ends in its number: `#7` or, on GitLab, `!7`.
_NUMBER_SUFFIX = re.compile(r"[#!][0-9]+$")


@dataclass(frozen=True)
class HostLoad:
    """A live worker host: its id, the job slots of its live processes, and the due jobs
    waiting in its own queue."""

    host: str
    slots: int
    waiting: int


def host_queue(host: str) -> str:
    """The procrastinate queue of one worker host."""
    return HOST_QUEUE_PREFIX + host


def repository_of(pr_key: str) -> str:
    """The repository of a change's key: what a host's cache holds, whatever the change."""
    return _NUMBER_SUFFIX.sub("", pr_key)


def _score(host: str, repository: str) -> bytes:
    return hashlib.sha256(f"{host}\0{repository}".encode()).digest()


def ranked(repository: str, hosts: Iterable[str]) -> list[str]:
    """The hosts in rendezvous order for `repository`, its owner first."""
    return sorted(set(hosts), key=lambda host: _score(host, repository), reverse=True)


def choose_queue(
    repository: str,
    hosts: Sequence[HostLoad],
    *,
    homes: int = HOMES,
    backlog_per_slot: float = BACKLOG_PER_SLOT,
) -> str:
    """The queue a job of `repository` waits in, given the live hosts and their loads (the
    keywords are the service's constants; `bench/affinity.py` tries others)."""
    if len(hosts) < 2:  # one host (or none yet): nothing to choose, as it always was
        return SHARED_QUEUE
    by_name = {load.host: load for load in hosts}
    for host in ranked(repository, by_name)[:homes]:
        load = by_name[host]
        if load.waiting < load.slots * backlog_per_slot:
            return host_queue(host)
    return SHARED_QUEUE


def place(
    repository: str,
    hosts: list[HostLoad],
    *,
    homes: int = HOMES,
    backlog_per_slot: float = BACKLOG_PER_SLOT,
) -> str:
    """`choose_queue`, counting the job in its host's waiting ones (for the next choice)."""
    queue = choose_queue(repository, hosts, homes=homes, backlog_per_slot=backlog_per_slot)
    for number, load in enumerate(hosts):
        if host_queue(load.host) == queue:
            hosts[number] = replace(load, waiting=load.waiting + 1)
    return queue


# --- the database side ---------------------------------------------------------------------

_LIVE_HOSTS = """
SELECT h.host, sum(h.slots)::int AS slots,
    (SELECT count(*) FROM procrastinate_jobs AS q
        WHERE q.status = 'todo' AND q.queue_name = %(prefix)s || h.host
        AND (q.scheduled_at IS NULL OR q.scheduled_at <= now()))::int AS waiting
FROM pr_review_worker_hosts AS h
WHERE h.seen_at > now() - make_interval(secs => %(within)s)
GROUP BY h.host
"""


async def live_hosts(connection: AsyncConnection[Any], within: float) -> list[HostLoad]:
    """The hosts with a process seen in the last `within` seconds, with their loads."""
    cursor = await connection.execute(_LIVE_HOSTS, {"prefix": HOST_QUEUE_PREFIX, "within": within})
    return [
        HostLoad(str(host), int(slots), int(waiting))
        for host, slots, waiting in await cursor.fetchall()
    ]


async def queue_for(connection: AsyncConnection[Any], pr_key: str, within: float) -> str:
    """The queue a job of the change `pr_key` is deferred to now."""
    return choose_queue(repository_of(pr_key), await live_hosts(connection, within))


async def heartbeat(
    connection: AsyncConnection[Any], process: uuid.UUID, host: str, slots: int
) -> None:
    """This worker process is alive on `host` with `slots` job slots."""
    await connection.execute(
        "INSERT INTO pr_review_worker_hosts (process, host, slots, seen_at) "
        "VALUES (%s, %s, %s, now()) ON CONFLICT (process) DO UPDATE SET seen_at = now()",
        (process, host, slots),
    )
    await connection.execute(
        "DELETE FROM pr_review_worker_hosts WHERE seen_at < now() - make_interval(secs => %s)",
        (FORGET_AFTER_SECONDS,),
    )


class Worker(Protocol):
    """What the heartbeat needs of a worker process (`jobs.queue.JobQueue`)."""

    host: str
    process: uuid.UUID

    @property
    def tuning(self) -> _Tuning: ...

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]: ...


class _Tuning(Protocol):
    heartbeat_interval: float


async def keep_alive(worker: Worker, slots: int) -> None:
    """The worker process's heartbeat with its `slots`, every few seconds until cancelled;
    then its row goes, so that its host is gone (and its queue moves) as soon as no other
    process of it is seen."""
    try:
        while True:
            try:
                async with worker.transaction() as connection:
                    await heartbeat(connection, worker.process, worker.host, slots)
            except Exception as exc:  # the database restarting, say: try again next time
                logger.warning("worker heartbeat failed: %s", type(exc).__name__)
            await asyncio.sleep(worker.tuning.heartbeat_interval)
    finally:
        with contextlib.suppress(Exception):  # a dead database: the row simply ages out
            async with worker.transaction() as connection:
                await connection.execute(
                    "DELETE FROM pr_review_worker_hosts WHERE process = %s", (worker.process,)
                )


_HOMELESS = """
SELECT q.id, q.lock FROM procrastinate_jobs AS q
WHERE q.status = 'todo' AND q.queue_name LIKE %(pattern)s
AND NOT (q.queue_name = ANY(%(live)s))
ORDER BY q.id
"""


async def rehome(connection: AsyncConnection[Any], within: float) -> int:
    """Move the jobs waiting in the queues of hosts gone (no heartbeat for `within` s) to the
    queues `choose_queue` names among the live hosts; how many moved."""
    hosts = await live_hosts(connection, within)
    cursor = await connection.execute(
        _HOMELESS,
        {
            "pattern": HOST_QUEUE_PREFIX + "%",
            "live": [host_queue(load.host) for load in hosts],
        },
    )
    moved = 0
    for job_id, lock in await cursor.fetchall():
        queue = place(repository_of(str(lock or "")), hosts)
        # Only while it still waits: a worker that took it meanwhile keeps it.
        done = await connection.execute(
            "UPDATE procrastinate_jobs SET queue_name = %s WHERE id = %s AND status = 'todo'",
            (queue, job_id),
        )
        moved += done.rowcount
    return moved
