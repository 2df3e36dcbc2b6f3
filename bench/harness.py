"""Whole reviews against the scripted provider of the test suite (a real HTTP server).

`Script` answers every review the same way: one round per entry of `plan` (the tool calls of
that round), then a final review. The provider learns which round a request is by counting
the assistant messages it carries, so any number of reviews can share one provider.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.provider_server import RecordedRequest, Scripted, stop_turn, tool_call_turn

from pr_review_api.result import ReviewResult
from pr_review_api.review import LocalTarget, run_review
from pr_review_api.settings import Settings, load_settings

FINAL_REVIEW = {"summary": "Looks fine.", "findings": [], "notes": ["bench"]}

Call = tuple[str, dict[str, Any]]  # (tool name, arguments)


@dataclass
class Script:
    """A responder: the rounds of `plan`, then a final review; it notes arrival times."""

    plan: Sequence[Sequence[Call]]
    arrivals: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            self.arrivals.append(time.perf_counter())
        messages = request.json["messages"]
        round_ = sum(1 for message in messages if message["role"] == "assistant")
        if round_ >= len(self.plan):
            return stop_turn(FINAL_REVIEW)
        calls = [
            (f"call_{round_}_{number}", name, arguments)
            for number, (name, arguments) in enumerate(self.plan[round_])
        ]
        return tool_call_turn(calls)


def bench_settings(base_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": "bench-key",
        "opencode_base_url": base_url,
        "review_timeout_seconds": 3600,
        "review_max_rounds": 100,
        "review_max_tool_calls": 1000,
        "review_max_tool_calls_per_round": 100,
    }
    values.update(overrides)
    return load_settings(**values)


def review(target: LocalTarget, settings: Settings) -> ReviewResult:
    """One review, run to its end in a new event loop."""
    return asyncio.run(run_review(target, settings))
