"""jobs/queue.py: a webhook's job is an automatic review (specification §16: the base's skip rules
apply), a job asked for through the API is not. Real embedded PostgreSQL, real worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pr_review_api.errors import InvalidModelResponse, ReviewError
from pr_review_api.jobs.figures import JobFigures
from pr_review_api.jobs.records import JobRecord
from pr_review_api.jobs.runner import job_options
from pr_review_api.model import RunRecord, Usage
from pr_review_api.settings import Settings
from tests.jobs.test_jobs import (
    _is,
    pull,
    review_document,
    rows,
    settings_for,
    wait_for,
    worker,
)


class Recorder:
    """A runner that records each job's URL and whether it was automatic; with an `error`,
    each review raises it."""

    def __init__(self, error: ReviewError | None = None) -> None:
        self.calls: dict[str, bool] = {}
        self.error = error

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        automatic = job_options(record).automatic
        self.calls[url] = automatic
        if self.error is not None:
            raise self.error
        return review_document(url)


def test_a_webhook_job_is_automatic_and_an_api_job_is_not(database_url: str) -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with worker(settings_for(database_url), recorder) as queue:
            await queue.enqueue(pull(7), source="webhook")
            await queue.enqueue(pull(8), source="api")

            async def both() -> bool:
                return len(recorder.calls) == 2

            await wait_for(both, within=30, what="both jobs")

    asyncio.run(scenario())
    assert recorder.calls == {
        "https://github.example/acme/widget/pull/7": True,
        "https://github.example/acme/widget/pull/8": False,
    }


def test_a_failed_job_keeps_what_its_review_spent(database_url: str) -> None:
    # The error document is specification §5's (no usage), but the record counts the tokens.
    spent = RunRecord(
        rounds=3, tool_calls=2, usage=Usage(prompt_tokens=20, completion_tokens=10, total_tokens=30)
    )
    error = InvalidModelResponse("The final review was not valid JSON.")
    error.run = spent
    runner = Recorder(error)

    async def scenario() -> JobRecord:
        async with worker(settings_for(database_url), runner) as queue:
            job = await queue.enqueue(pull(9), source="api")
            await wait_for(lambda: _is(queue, job.job_id, "failed"), what="the failed job")
            record = await queue.get(job.job_id)
            assert record is not None
            return record

    record = asyncio.run(scenario())
    assert record.result == InvalidModelResponse("The final review was not valid JSON.").to_body()
    assert record.total_tokens == 30
    assert JobFigures.of(record).total_tokens == 30
    (columns,) = rows(
        database_url,
        "SELECT prompt_tokens, completion_tokens, rounds, tool_calls, error_code "
        f"FROM review_jobs WHERE id = '{record.id}'",
    )
    assert columns == (20, 10, 3, 2, "invalid_model_response")
