"""Which waiting job a free worker slot takes: a fair turn between tenants (docs/service.md).

procrastinate hands out jobs in arrival order, so one installation that sends twelve
deliveries holds every slot until its twelfth job has started, whatever the number of slots.
Here every job belongs to a tenant (`review_jobs.tenant`, schema migration 4):

    installation:<id>   a job with an App installation (a webhook delivery of the App)
    owner:<login>       a job without one (a plain webhook, the API), by the pull request's
                        owner, lower-cased: the account an installation would be
    gitlab:<group>      a merge request's job (specification §17), by its top-level group,
                        lower-cased, whatever subgroup holds the project (migration 6)
    gitea:<owner>       a Gitea pull request's job (specification §19), by its owner on the
                        Gitea server, lower-cased (migration 9)

Each forge's accounts are its own: a GitHub owner, a GitLab group and a Gitea owner of one
name are three tenants, each with its own turn and its own cap.

and a free slot takes, among the jobs procrastinate itself would run now (status, schedule,
the pull request's lock), a job of the tenant with the fewest jobs running, then of the tenant
whose last start is the oldest, then the oldest job. A tenant running
`PR_REVIEW_INSTALLATION_MAX_RUNNING` jobs is skipped until one ends. The database holds every
count and every turn, and one advisory lock serialises the fetches, so the rule holds across
any number of workers and slots: a job of a tenant that runs nothing starts in the first slot
that frees, at most one job's time after it arrives. With several worker hosts
(jobs/affinity.py) a worker sees its own host's queue and the shared one, and a job waiting in
another host's queue once it has waited `spill_after` seconds: the rule holds among those.
"""

from __future__ import annotations

from collections.abc import Iterable

from procrastinate import jobs as jobs_module
from procrastinate import manager
from procrastinate.connector import BaseConnector

from pr_review_api.jobs.affinity import SPILL_AFTER_SECONDS

# The columns procrastinate's own `fetch_job` query selects (its `Job.from_row` reads them).
_FETCH_FAIRLY = (
    "SELECT id, status, task_name, priority, lock, queueing_lock, args, scheduled_at, "
    "queue_name, attempts, worker_id "
    "FROM pr_review_fetch_job(%(queues)s::varchar[], %(worker_id)s, %(tenant_cap)s, "
    "%(spill_after)s)"
)


class FairJobManager(manager.JobManager):
    """procrastinate's job manager, whose workers fetch through `pr_review_fetch_job`."""

    def __init__(
        self,
        connector: BaseConnector,
        *,
        tenant_cap: int,
        spill_after: float = SPILL_AFTER_SECONDS,
    ) -> None:
        """`spill_after`: seconds a job waits in another worker host's queue before this
        worker may take it (jobs/affinity.py)."""
        super().__init__(connector)
        self.tenant_cap = tenant_cap
        self.spill_after = spill_after

    async def fetch_job(
        self, queues: Iterable[str] | None, worker_id: int
    ) -> jobs_module.Job | None:
        row = await self.connector.execute_query_one_async(
            query=_FETCH_FAIRLY,
            queues=None if queues is None else list(queues),
            worker_id=worker_id,
            tenant_cap=self.tenant_cap,
            spill_after=self.spill_after,
        )
        if row["id"] is None:  # the function returns one row of nulls when nothing is due
            return None
        return jobs_module.Job.from_row(row)
