"""The routes' dependencies (service/dependencies.py): overridable settings and model
client, and the review slots that bound how many reviews run at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from pr_review_api import errors
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.run import ReviewOptions
from pr_review_api.model import ReviewResult
from pr_review_api.service.dependencies import get_reviewer
from pr_review_api.settings import Settings
from tests.service.support import (
    FakeReviewer,
    app_with,
    assert_error,
    client_for,
    live_server,
    post_review,
    settings,
)

pytestmark = pytest.mark.anyio


async def test_the_shared_model_client_is_passed_to_each_review() -> None:
    reviewer = FakeReviewer()
    with live_server(app_with(reviewer)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as client:
            await post_review(client)
            await post_review(client)
    models = {id(model) for _, _, model in reviewer.calls}
    assert len(models) == 1
    assert isinstance(reviewer.calls[0][2], ProviderClient)


async def test_settings_and_the_model_client_are_dependencies_a_test_can_override() -> None:
    from pr_review_api.service.dependencies import get_model, get_settings

    reviewer = FakeReviewer()
    app = app_with(reviewer)
    other = settings(review_max_rounds=3)
    marker = object()
    app.dependency_overrides[get_settings] = lambda: other
    app.dependency_overrides[get_model] = lambda: marker
    seen: list[Settings] = []

    async def recording(target: Any, settings_: Settings, options: ReviewOptions) -> ReviewResult:
        seen.append(settings_)
        return await reviewer(target, settings_, options)

    app.dependency_overrides[get_reviewer] = lambda: recording
    async with client_for(app) as client:
        assert (await post_review(client)).status_code == 200
    assert seen == [other]
    assert reviewer.calls[0][2] is marker


# --- capacity and concurrency -------------------------------------------------------------------


async def test_a_full_server_answers_server_busy_at_once() -> None:
    gate = asyncio.Event()
    reviewer = FakeReviewer(gate=gate)
    app = app_with(reviewer, pr_review_max_concurrent_reviews=2)
    async with client_for(app) as client:
        running = [asyncio.create_task(post_review(client)) for _ in range(2)]
        await reviewer.until_in_flight(2)
        # Queued, it would wait for the gate forever: answered at all, it was refused.
        busy = await asyncio.wait_for(post_review(client), timeout=30)
        assert len(reviewer.calls) == 2  # the third never reached the reviewer
        assert_error(busy, 503, "server_busy")
        assert busy.headers["retry-after"] == "5"
        gate.set()
        assert [(await task).status_code for task in running] == [200, 200]
        assert (await post_review(client)).status_code == 200  # the slots were given back
    assert len(reviewer.calls) == 3


async def test_a_failed_review_gives_its_slot_back() -> None:
    reviewer = FakeReviewer(error=errors.MaxRounds())
    app = app_with(reviewer, pr_review_max_concurrent_reviews=1)
    async with client_for(app) as client:
        for _ in range(3):
            assert_error(await post_review(client), 502, "max_rounds")


async def test_ten_slow_reviews_run_concurrently_on_a_real_server() -> None:
    reviewer = FakeReviewer(delay=1.0)
    with live_server(app_with(reviewer)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            assert (await post_review(client)).status_code == 200
            reviewer.gather = 10  # each review now waits until ten run at once
            responses = await asyncio.gather(*(post_review(client) for _ in range(10)))
    assert [r.status_code for r in responses] == [200] * 10
    assert reviewer.peak_in_flight == 10
