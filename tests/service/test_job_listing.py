"""The query of `GET /v1/review-jobs` and its page (service/job_listing.py), without a database;
tests/jobs/test_admin.py drives the route itself on PostgreSQL.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.errors import InvalidRequest
from pr_review_api.jobs.records import JobFilter, JobPage, JobRecord
from pr_review_api.service.job_listing import page_document, parse_listing_query
from tests.conftest import examples

FIXED_MESSAGES = {
    "The query string is too long.",
    "The query may hold only repository, status, limit and cursor, each once.",
    "repository must be owner/repo.",
    "status must be one of queued, running, succeeded, failed, superseded.",
    "limit must be a whole number from 1 to 100.",
    "cursor is not a cursor this listing gave.",
}


def test_an_empty_query_lists_everything_twenty_at_a_time() -> None:
    assert parse_listing_query(b"") == (JobFilter(), 20)


def test_every_parameter_is_read() -> None:
    cursor = uuid.uuid4()
    query = f"repository=Acme/Widget.js&status=failed&limit=100&cursor={cursor}".encode()
    where, limit = parse_listing_query(query)
    assert where == JobFilter(owner="Acme", repo="Widget.js", status="failed", after=cursor)
    assert limit == 100


@pytest.mark.parametrize(
    "query",
    [b"limit=0", b"limit=1e2", b"limit=0x10", b"limit=%20%31", b"status=FAILED", b"a&b", b"&&"],
)
def test_values_out_of_their_rule_are_invalid_request(query: bytes) -> None:
    with pytest.raises(InvalidRequest):
        parse_listing_query(query)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_with_invalid_request(raw: bytes) -> None:
    refused: InvalidRequest | None = None
    try:
        where, limit = parse_listing_query(raw)
    except InvalidRequest as exc:
        refused = exc
    if refused is not None:
        # One of the fixed sentences: nothing of the query comes back.
        assert refused.message in FIXED_MESSAGES
        return
    assert 1 <= limit <= 100
    assert where.status in (None, "queued", "running", "succeeded", "failed", "superseded")


def _record(number: int) -> JobRecord:
    moment = datetime(2026, 12, 2, tzinfo=UTC)
    return JobRecord(
        id=uuid.UUID(int=number),
        source="api",
        pull_request_url=f"https://github.com/acme/widget/pull/{number}",
        owner="acme",
        repo="widget",
        number=number,
        pr_key=f"acme/widget#{number}",
        head_sha=None,
        installation_id=None,
        post=False,
        status="queued",
        queue_job_id=1,
        attempts=0,
        created_at=moment,
        started_at=None,
        finished_at=None,
        result=None,
    )


def test_the_next_link_keeps_the_filters() -> None:
    where = JobFilter(owner="acme", repo="widget", status="queued")
    page = JobPage([_record(1), _record(2)], uuid.UUID(int=2))
    document = page_document(page, where, 2)
    assert document["next_cursor"] == str(uuid.UUID(int=2))
    assert document["next"] == (
        f"/v1/review-jobs?repository=acme%2Fwidget&status=queued&limit=2&cursor={uuid.UUID(int=2)}"
    )
    assert [job["job_id"] for job in document["jobs"]] == [
        str(uuid.UUID(int=1)),
        str(uuid.UUID(int=2)),
    ]
    last = page_document(JobPage([_record(3)], None), where, 2)
    assert (last["next_cursor"], last["next"]) == (None, None)
