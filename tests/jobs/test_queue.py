"""jobs/queue.py: a webhook's job is an automatic review (CONTRACT 16: the base's skip rules
apply), a job asked for through the API is not. Real embedded PostgreSQL, real worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pr_review_api.settings import Settings
from tests.jobs.test_jobs import pull, review_document, settings_for, wait_for, worker


class Recorder:
    """A runner that records each job's URL and whether it was automatic."""

    def __init__(self) -> None:
        self.calls: dict[str, bool] = {}

    async def __call__(
        self,
        url: str,
        settings: Settings,
        post: bool,
        installation_id: int | None,
        automatic: bool = False,
    ) -> dict[str, Any]:
        self.calls[url] = automatic
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
