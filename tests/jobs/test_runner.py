"""How a job's review runs, read from its record in one place (jobs/runner.py's
`job_options`): a webhook's job is automatic, an API job is not, and the `review` command in
a comment publishes past a head already published and is never automatic."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from pr_review_api.jobs.records import JobRecord
from pr_review_api.jobs.runner import job_options
from pr_review_api.loop.run import ReviewOptions
from pr_review_api.permissions import PermissionCache


def record(source: str, *, post: bool, command: dict[str, Any] | None = None) -> JobRecord:
    return JobRecord(
        id=uuid.uuid4(),
        source=source,
        pull_request_url="https://github.com/acme/widget/pull/7",
        owner="acme",
        repo="widget",
        number=7,
        pr_key="github.com/acme/widget#7",
        head_sha=None,
        installation_id=None,
        post=post,
        status="queued",
        queue_job_id=None,
        attempts=0,
        created_at=datetime.now(UTC),
        started_at=None,
        finished_at=None,
        result=None,
        command=command,
    )


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (record("webhook", post=True), ReviewOptions(post=True, automatic=True, force=False)),
        (record("api", post=False), ReviewOptions(post=False, automatic=False, force=False)),
        (record("api", post=True), ReviewOptions(post=True, automatic=False, force=False)),
        (
            record("webhook", post=False, command={"comment_id": 5}),
            ReviewOptions(post=True, automatic=False, force=True),
        ),
    ],
)
def test_a_jobs_review_options_come_from_its_record(
    job: JobRecord, expected: ReviewOptions
) -> None:
    assert job_options(job) == expected


def test_a_jobs_options_keep_what_the_worker_lends_every_review() -> None:
    shared = ReviewOptions(permissions=PermissionCache(), include_trace=True)
    options = job_options(record("webhook", post=True), shared)
    assert options.permissions is shared.permissions
    assert (options.post, options.automatic, options.include_trace) == (True, True, True)
