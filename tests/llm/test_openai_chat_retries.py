"""The provider client (llm/openai_chat.py): the deadline, and retries (OPENCODE_MAX_RETRIES)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pr_review_api.errors import (
    OpenCodeRateLimited,
    OpenCodeUnavailable,
    ReviewError,
    ReviewTimeout,
)
from tests.fakes.provider_server import Fault, ScriptedProvider
from tests.llm.support import PLANTED, TURN, complete, failure, settings_for, timed

# --- The deadline -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_slow_drip_is_stopped_by_the_deadline(scripted_provider: ScriptedProvider) -> None:
    drip = Fault.slow_drip(interval=0.05)  # about 15 s for the whole body
    assert len(drip.body) * 0.05 > 10
    scripted_provider.script(drip)
    error, elapsed = await timed(scripted_provider.base_url, seconds=0.5)
    assert isinstance(error, ReviewTimeout)
    # Cut at the 0.5 s deadline the test sets, never the body's 15 s: a bound a slow machine keeps.
    assert 0.4 < elapsed < 10


@pytest.mark.anyio
async def test_delay_before_headers_is_stopped_by_the_deadline(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.delay(30))
    error, elapsed = await timed(scripted_provider.base_url, seconds=0.3)
    assert isinstance(error, ReviewTimeout)
    assert elapsed < 10  # the 0.3 s deadline the test sets, never the 30 s delay


@pytest.mark.anyio
async def test_a_deadline_already_past_is_a_timeout(scripted_provider: ScriptedProvider) -> None:
    error = await failure(scripted_provider.base_url, seconds=-1)
    assert isinstance(error, ReviewTimeout)
    assert scripted_provider.requests == []


# --- retries (specification §12: OPENCODE_MAX_RETRIES) -------------------------------------------


async def with_retries(
    base_url: str, retries: int = 2, *, seconds: float = 10.0
) -> tuple[dict[str, Any] | ReviewError, float]:
    settings = settings_for(base_url, opencode_max_retries=retries)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        answer: dict[str, Any] | ReviewError = await complete(
            base_url, seconds=seconds, settings=settings
        )
    except ReviewError as exc:
        answer = exc
    return answer, loop.time() - started


@pytest.mark.anyio
async def test_a_500_then_success_is_retried(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.status(500, body=PLANTED.encode()), TURN)
    answer, _ = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    assert len(scripted_provider.requests) == 2
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_network_failures_are_retried(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.close(), Fault.reset_mid_body(), TURN)
    answer, _ = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_retries_stop_after_opencode_max_retries(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(*(Fault.status(503) for _ in range(3)))
    answer, _ = await with_retries(scripted_provider.base_url, retries=2)
    assert isinstance(answer, OpenCodeUnavailable)
    assert type(answer).__module__ == "pr_review_api.errors"
    assert answer.__cause__ is None
    assert answer.__suppress_context__
    assert len(scripted_provider.requests) == 3
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_no_retries_with_opencode_max_retries_zero(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.status(500))
    answer, _ = await with_retries(scripted_provider.base_url, retries=0)
    assert isinstance(answer, OpenCodeUnavailable)
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_short_retry_after_is_waited_for(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.rate_limited("1"), TURN)
    answer, seconds = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    assert seconds >= 1.0
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_429_with_a_long_retry_after_fails_fast_with_retry_after(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.rate_limited("11"))
    answer, seconds = await with_retries(scripted_provider.base_url, seconds=60)
    assert isinstance(answer, OpenCodeRateLimited)
    assert answer.retry_after == 11
    assert answer.to_body()["error"] == {
        "code": "opencode_rate_limited",
        "message": OpenCodeRateLimited.default_message,
        "retry_after": 11,
    }
    assert seconds < 11  # not waited: a bound on the Retry-After the test sets
    assert len(scripted_provider.requests) == 1
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_retry_after_longer_than_the_time_left_is_not_waited_for(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.rate_limited("5"))
    answer, seconds = await with_retries(scripted_provider.base_url, seconds=3)
    assert isinstance(answer, OpenCodeRateLimited)
    assert answer.retry_after == 5
    assert seconds < 3  # not waited: a bound on the deadline the test sets
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_backoff_past_the_deadline_returns_the_error_at_once(
    scripted_provider: ScriptedProvider,
) -> None:
    # Retry-After 2 is under 10 s but past the 1.5 s left: the error comes back, not a timeout.
    scripted_provider.script(Fault.status(503, headers={"Retry-After": "2"}))
    answer, seconds = await with_retries(scripted_provider.base_url, retries=2, seconds=1.5)
    assert isinstance(answer, OpenCodeUnavailable)
    assert seconds < 1.5  # not waited: a bound on the deadline the test sets
    scripted_provider.assert_complete()


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 404, 302])
async def test_other_statuses_are_never_retried(
    scripted_provider: ScriptedProvider, status: int
) -> None:
    scripted_provider.script(Fault.status(status))
    answer, _ = await with_retries(scripted_provider.base_url)
    assert isinstance(answer, ReviewError)
    assert len(scripted_provider.requests) == 1
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_404_hints_at_opencode_base_url(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.status(404, body=PLANTED.encode()))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeUnavailable)
    assert "OPENCODE_BASE_URL" in error.message
    assert "/v1" in error.message
    assert "/chat/completions" in error.message
    assert PLANTED not in error.message
