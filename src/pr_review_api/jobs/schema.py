"""Versioned database migrations, applied at start by every process that uses the database.

Migration 1 is procrastinate's own schema (the queue); the others are ours (the review-job
records, in 4 the tenants and the fair fetch of `jobs.fairness`, in 6 GitLab's tenants, in 8
the worker hosts of `jobs.affinity`). Each runs in its own transaction and is recorded in
`pr_review_migrations`; a transaction-level advisory lock makes concurrent starts (a server
and several workers) apply each migration exactly once. A later
schema change appends a migration; none is ever edited.

`review_jobs` holds what an operator needs ("what did we review today, and what did it cost")
and what `GET /v1/review-jobs/{id}` answers. It never holds a token, a key or a provider body:
`result` is the review or error document of specification §5, which carries none.
`published_heads` (migration 3) is the service's ledger of published reviews, one per head; it
holds the same review documents, and fingerprints, ids and URLs: no secret either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

# Any constant: it names the lock that serialises migrations across processes.
_MIGRATION_LOCK = 0x7072_7276_6A6F_6273  # "prrvjobs"


@dataclass(frozen=True)
class Migration:
    """One schema change: a version, a name, and the SQL (or a function giving it)."""

    version: int
    name: str
    statements: Callable[[], str]


def _procrastinate_schema() -> str:
    from procrastinate.schema import SchemaManager  # noqa: PLC0415

    return SchemaManager.get_schema()


_REVIEW_JOBS = """
CREATE TABLE review_jobs (
    id uuid PRIMARY KEY,
    source text NOT NULL CHECK (source IN ('webhook', 'api')),
    pull_request_url text NOT NULL,
    owner text NOT NULL,
    repo text NOT NULL,
    number integer NOT NULL CHECK (number > 0),
    pr_key text NOT NULL,
    head_sha text,
    installation_id bigint,
    post boolean NOT NULL,
    status text NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'superseded')),
    queue_job_id bigint,
    superseded_by uuid REFERENCES review_jobs (id),
    attempts integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    termination_reason text,
    error_code text,
    prompt_tokens integer,
    completion_tokens integer,
    total_tokens integer,
    rounds integer,
    tool_calls integer,
    findings integer,
    publication_status text,
    published_review_id bigint,
    published_url text,
    result jsonb
);
CREATE INDEX review_jobs_pr_status ON review_jobs (pr_key, status);
CREATE INDEX review_jobs_installation_running ON review_jobs (installation_id)
    WHERE status = 'running';
CREATE INDEX review_jobs_created_at ON review_jobs (created_at);
CREATE TABLE webhook_deliveries (
    delivery_id text PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES review_jobs (id),
    received_at timestamptz NOT NULL DEFAULT now()
);
"""

# One row per head the service published a review of (jobs/published_heads.py), written as
# soon as GitHub accepts the review: a later job of the head reads it before the model runs.
_PUBLISHED_HEADS = """
CREATE TABLE published_heads (
    pull_request text NOT NULL,
    identity text NOT NULL,
    head_sha text NOT NULL CHECK (head_sha ~ '^[0-9a-f]{40}$'),
    review_id bigint,
    url text,
    fingerprints text[] NOT NULL,
    result jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pull_request, identity, head_sha)
);
"""

# Fairness (docs/service.md): every job has a tenant: its App installation, or, for a job without
# one (a plain webhook, the API), the pull request's owner: the account an installation would
# be. `pr_review_fetch_job` is procrastinate's `procrastinate_fetch_job_v2` with the same
# eligibility (status, queue, schedule, the pull request's lock) and a fair order: the tenant
# with the fewest jobs running first, then the tenant whose last start is the oldest (round
# robin), then the oldest job; a tenant already running `tenant_cap` jobs is skipped. One
# advisory lock serialises the fetches of every worker, so each sees the starts before it.
_FAIR_FETCH = """
ALTER TABLE review_jobs ADD COLUMN tenant text GENERATED ALWAYS AS (
    CASE WHEN installation_id IS NOT NULL THEN 'installation:' || installation_id::text
         ELSE 'owner:' || lower(owner) END
) STORED;
CREATE INDEX review_jobs_queue_job ON review_jobs (queue_job_id);
CREATE SEQUENCE pr_review_tenant_turn;
CREATE TABLE pr_review_tenants (
    tenant text PRIMARY KEY,
    last_turn bigint NOT NULL
);
CREATE FUNCTION pr_review_fetch_job(
    target_queue_names character varying[],
    p_worker_id bigint,
    tenant_cap integer
)
    RETURNS procrastinate_jobs
    LANGUAGE plpgsql
AS $$
DECLARE
    chosen_id bigint;
    chosen_tenant text;
    found_job procrastinate_jobs;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('pr-review:fair-fetch', 0));
    WITH running AS (
        SELECT r.tenant, count(*) AS jobs
            FROM procrastinate_jobs AS q
            JOIN review_jobs AS r ON r.queue_job_id = q.id
            WHERE q.status = 'doing'
            GROUP BY r.tenant
    )
    SELECT jobs.id, r.tenant INTO chosen_id, chosen_tenant
        FROM procrastinate_jobs AS jobs
        LEFT JOIN review_jobs AS r ON r.queue_job_id = jobs.id
        LEFT JOIN running ON running.tenant = r.tenant
        LEFT JOIN pr_review_tenants AS turns ON turns.tenant = r.tenant
        WHERE
            NOT EXISTS (
                SELECT 1
                    FROM procrastinate_jobs AS other_jobs
                    WHERE
                        jobs.lock IS NOT NULL
                        AND other_jobs.lock = jobs.lock
                        AND (
                            other_jobs.status = 'doing'
                            OR (
                                other_jobs.status = 'todo'
                                AND (
                                    other_jobs.priority > jobs.priority
                                    OR (
                                        other_jobs.priority = jobs.priority
                                        AND other_jobs.id < jobs.id
                                    )
                                )
                            )
                        )
            )
            AND jobs.status = 'todo'
            AND (target_queue_names IS NULL OR jobs.queue_name = ANY(target_queue_names))
            AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
            AND coalesce(running.jobs, 0) < tenant_cap
        ORDER BY jobs.priority DESC, coalesce(running.jobs, 0),
            turns.last_turn NULLS FIRST, jobs.id
        LIMIT 1
        FOR UPDATE OF jobs SKIP LOCKED;
    IF chosen_id IS NULL THEN
        RETURN found_job;
    END IF;
    UPDATE procrastinate_jobs SET status = 'doing', worker_id = p_worker_id
        WHERE id = chosen_id
        RETURNING * INTO found_job;
    IF chosen_tenant IS NOT NULL THEN
        INSERT INTO pr_review_tenants (tenant, last_turn)
            VALUES (chosen_tenant, nextval('pr_review_tenant_turn'))
            ON CONFLICT (tenant) DO UPDATE SET last_turn = excluded.last_turn;
    END IF;
    RETURN found_job;
END;
$$;
"""

# The review conversation (specification §15): a job's kind and the comment that asked for it (the
# delivery's own words, never re-fetched), and the findings a repository dismissed.
_CONVERSATION = """
ALTER TABLE review_jobs
    ADD COLUMN kind text NOT NULL DEFAULT 'review'
        CHECK (kind IN ('review', 'answer', 'dismiss', 'help')),
    ADD COLUMN command jsonb;
CREATE INDEX review_jobs_answers ON review_jobs (pr_key, finished_at) WHERE kind = 'answer';
CREATE TABLE dismissals (
    repository text NOT NULL,
    fingerprint text NOT NULL,
    title text NOT NULL,
    path text,
    dismissed_by text NOT NULL,
    dismissed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository, fingerprint)
);
"""

# GitLab merge requests (specification §17): a merge request's job belongs to its top-level group,
# the account an installation would be on GitHub (`owner` is the full namespace path there, and
# every subgroup of one group is one customer). Its `pr_key` starts with `gitlab:`
# (records.PullRequestJob.key), so a GitLab group and a GitHub owner of the same name are two
# tenants. PostgreSQL before 17 cannot change a generated column's expression: it is made again.
_GITLAB_TENANTS = """
ALTER TABLE review_jobs DROP COLUMN tenant;
ALTER TABLE review_jobs ADD COLUMN tenant text GENERATED ALWAYS AS (
    CASE WHEN installation_id IS NOT NULL THEN 'installation:' || installation_id::text
         WHEN left(pr_key, 7) = 'gitlab:' THEN 'gitlab:' || lower(split_part(owner, '/', 1))
         ELSE 'owner:' || lower(owner) END
) STORED;
"""

# Team knowledge (specification §20): `remember` and `forget` are command jobs, and a repository's
# learnings are rows (jobs/learnings.py). `origin` names the comment that stored a learning, so
# a job run again after its worker died stores it once. Repository keys are the dismissals'.
_LEARNINGS = """
ALTER TABLE review_jobs DROP CONSTRAINT review_jobs_kind_check;
ALTER TABLE review_jobs ADD CONSTRAINT review_jobs_kind_check
    CHECK (kind IN ('review', 'answer', 'dismiss', 'help', 'remember', 'forget'));
CREATE TABLE learnings (
    id bigserial PRIMARY KEY,
    repository text NOT NULL,
    text text NOT NULL CHECK (char_length(text) BETWEEN 1 AND 500),
    author text NOT NULL,
    url text,
    origin text UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX learnings_repository ON learnings (repository, id DESC);
"""


# Jobs go where the cache is (jobs/affinity.py): every worker process's heartbeat and host id, so
# that a job is deferred to the queue of the host whose cache holds its repository; the host
# that ran a job (for the operator and the tests); when a job was last deferred. The fair fetch
# of migration 4 gains one rule: a job waiting in another host's queue for `spill_after`
# seconds (since it was deferred or became due, whichever is later) may be taken by any worker,
# so a busy host holds a job back for a bounded time. Its text is migration 4's, changed in
# these two places only (`_stealing_fetch`); migration 4 itself is never edited, and its
# function (three arguments) stays for workers of an older release during a rolling upgrade.
def _stealing_fetch() -> str:
    function = _FAIR_FETCH[_FAIR_FETCH.index("CREATE FUNCTION") :]
    changes = {
        "    tenant_cap integer\n)": "    tenant_cap integer,\n    spill_after double precision\n)",
        "jobs.queue_name = ANY(target_queue_names))": (
            "jobs.queue_name = ANY(target_queue_names)\n"
            "                OR (jobs.queue_name LIKE 'reviews@%'\n"
            "                    AND greatest(r.queued_at, jobs.scheduled_at)\n"
            "                        <= now() - make_interval(secs => spill_after)))"
        ),
    }
    for old, new in changes.items():
        assert function.count(old) == 1, old
        function = function.replace(old, new)
    return (
        """
CREATE TABLE pr_review_worker_hosts (
    process uuid PRIMARY KEY,
    host text NOT NULL,
    slots integer NOT NULL CHECK (slots > 0),
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pr_review_worker_hosts_seen ON pr_review_worker_hosts (seen_at);
-- The waiting jobs of one queue, counted at every defer (procrastinate keeps ended jobs).
CREATE INDEX pr_review_waiting_by_queue ON procrastinate_jobs (queue_name) WHERE status = 'todo';
ALTER TABLE review_jobs ADD COLUMN worker_host text, ADD COLUMN queued_at timestamptz;
"""
        + function
    )


# Gitea pull requests (specification §19): a pull request's job belongs to its owner on the Gitea
# server, a different account from a GitHub owner or a GitLab group of the same name. Its
# `pr_key` starts with `gitea:` (forge/urls.py's `change_key`). GitHub's tenants and GitLab's
# stay as migrations 4 and 6 made them, so a running deployment keeps every turn it counted.
_GITEA_TENANTS = """
ALTER TABLE review_jobs DROP COLUMN tenant;
ALTER TABLE review_jobs ADD COLUMN tenant text GENERATED ALWAYS AS (
    CASE WHEN installation_id IS NOT NULL THEN 'installation:' || installation_id::text
         WHEN left(pr_key, 7) = 'gitlab:' THEN 'gitlab:' || lower(split_part(owner, '/', 1))
         WHEN left(pr_key, 6) = 'gitea:' THEN 'gitea:' || lower(owner)
         ELSE 'owner:' || lower(owner) END
) STORED;
"""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "procrastinate queue schema", _procrastinate_schema),
    Migration(2, "review_jobs records", lambda: _REVIEW_JOBS),
    Migration(3, "published_heads ledger", lambda: _PUBLISHED_HEADS),
    Migration(4, "fair fetch across tenants", lambda: _FAIR_FETCH),
    Migration(5, "conversation: job kinds and dismissals", lambda: _CONVERSATION),
    Migration(6, "gitlab: a merge request's tenant is its group", lambda: _GITLAB_TENANTS),
    Migration(7, "team knowledge: learnings and their command jobs", lambda: _LEARNINGS),
    Migration(8, "worker hosts: jobs go where the cache is", _stealing_fetch),
    Migration(9, "gitea: a pull request's tenant names its forge", lambda: _GITEA_TENANTS),
)


async def apply_migrations(conninfo: str) -> list[int]:
    """Apply every migration not yet recorded; returns the versions applied now."""
    applied_now: list[int] = []
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS pr_review_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        for migration in MIGRATIONS:
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                cursor = await connection.execute(
                    "SELECT 1 FROM pr_review_migrations WHERE version = %s", (migration.version,)
                )
                if await cursor.fetchone() is not None:
                    continue
                await connection.execute(sql.SQL(migration.statements()))  # type: ignore[arg-type, unused-ignore]
                await connection.execute(
                    "INSERT INTO pr_review_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
                applied_now.append(migration.version)
    return applied_now
