"""A hostile provider over real HTTP: every network and HTTP fault, in the first round and
after a tool round, ends the review with its contract code.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from pr_review_api.errors import ReviewError
from pr_review_api.llm.envelope import turn_from_envelope
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.llm.turn import Turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import ReviewResult
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import (
    Fault,
    Reply,
    ScriptedProvider,
    body_reply,
    closed_port_url,
    json_reply,
)
from tests.hostile.provider_support import FINAL_BODY, TOOL_BODY, review_settings
from tests.hostile.support import FIGURES

# --- Faults over real HTTP ----------------------------------------------------------------

CAP = MAX_PROVIDER_RESPONSE_BYTES


FAULTS: dict[str, tuple[Callable[[], Reply], str]] = {
    "close-without-answer": (Fault.close, "opencode_unavailable"),
    "reset-mid-body": (Fault.reset_mid_body, "opencode_unavailable"),
    "body-short-of-length": (Fault.truncated_body, "opencode_unavailable"),
    "truncated-json": (Fault.truncated_json, "invalid_model_response"),
    "2-MiB-plus-1": (Fault.oversized, "upstream_response_too_large"),
    "2-MiB-plus-1-gzip": (
        lambda: Fault.oversized(1, content_encoding="gzip"),
        "upstream_response_too_large",
    ),
    "2-MiB-plus-1-deflate": (
        lambda: Fault.oversized(1, content_encoding="deflate"),
        "upstream_response_too_large",
    ),
    "content-length-over-cap": (Fault.content_length_over_cap, "upstream_response_too_large"),
    "gzip-bomb": (Fault.gzip_bomb, "upstream_response_too_large"),
    "slow-drip": (lambda: Fault.slow_drip(interval=0.05), "review_timeout"),
    "no-answer-in-time": (lambda: Fault.delay(30), "review_timeout"),
    "401": (
        lambda: Fault.status(401, body=PROVIDER_KEY.encode()),
        "opencode_authentication_failed",
    ),
    "403": (lambda: Fault.status(403), "opencode_authentication_failed"),
    "429": (lambda: Fault.rate_limited("7"), "opencode_rate_limited"),
    "429-no-hint": (lambda: Fault.rate_limited(None), "opencode_rate_limited"),
    "500": (lambda: Fault.status(500), "opencode_unavailable"),
    "502": (lambda: Fault.status(502), "opencode_unavailable"),
    "503": (lambda: Fault.status(503, headers={"Retry-After": "5"}), "opencode_unavailable"),
    "504": (lambda: Fault.status(504), "opencode_unavailable"),
    "404": (lambda: Fault.status(404), "opencode_unavailable"),
    "302": (
        lambda: Fault.status(302, headers={"Location": "http://127.0.0.1:9/"}),
        "opencode_unavailable",
    ),
    "text/html": (Fault.wrong_content_type, "invalid_model_response"),
    "no-content-type": (lambda: Fault.wrong_content_type(None), "invalid_model_response"),
    "unknown-encoding": (
        lambda: body_reply(FINAL_BODY, content_encoding="br"),
        "invalid_model_response",
    ),
}


TIMED = {"slow-drip", "no-answer-in-time"}


@pytest.mark.parametrize("after_tools", [False, True], ids=["round-1", "round-2"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_ends_the_review_with_its_contract_code(
    widget: LocalTarget, fault: str, after_tools: bool
) -> None:
    build, expected = FAULTS[fault]
    # Long enough for a tool round first, short enough to keep the suite quick.
    overrides = {"review_timeout_seconds": 2.0 if after_tools else 1.0} if fault in TIMED else {}
    with ScriptedProvider() as provider:
        if after_tools:
            provider.script(json_reply(json.loads(TOOL_BODY)))
        provider.script(build())
        with pytest.raises(ReviewError) as raised:
            asyncio.run(run_review(widget, review_settings(provider.base_url, **overrides)))
        assert len(provider.requests) == (2 if after_tools else 1)
    error = raised.value
    assert error.code == expected
    assert PROVIDER_KEY not in error.message
    if fault == "429":
        assert getattr(error, "retry_after", None) == 7
    FIGURES["faults injected"] += 1


class ToolsThenRealProvider(ProviderClient):
    """Answers the first turn in process, then sends every later turn over real HTTP."""

    turns = 0

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        self.turns += 1
        if self.turns == 1:
            return turn_from_envelope(json.loads(TOOL_BODY))
        return await super().complete(messages, tools, deadline=deadline)


@pytest.mark.parametrize("after_tools", [False, True], ids=["round-1", "round-2"])
def test_refused_connection_is_unavailable(widget: LocalTarget, after_tools: bool) -> None:
    settings_ = review_settings(closed_port_url())

    async def review() -> ReviewResult:
        if not after_tools:
            return await run_review(widget, settings_)
        async with ToolsThenRealProvider(settings_) as provider:
            return await run_review(widget, settings_, ReviewOptions(model=provider))

    with pytest.raises(ReviewError) as raised:
        asyncio.run(review())
    assert raised.value.code == "opencode_unavailable"
    FIGURES["faults injected"] += 1


def test_gzip_bomb_memory_stays_near_the_cap(widget: LocalTarget) -> None:
    with ScriptedProvider() as provider:
        provider.script(Fault.gzip_bomb())
        tracemalloc.start()
        try:
            with pytest.raises(ReviewError) as raised:
                asyncio.run(run_review(widget, review_settings(provider.base_url)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert raised.value.code == "upstream_response_too_large"
    assert peak < 4 * CAP, f"peak {peak} bytes while refusing a 64 MiB bomb"
    FIGURES["faults injected"] += 1
