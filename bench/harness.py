"""Whole reviews against the scripted provider of the test suite (a real HTTP server).

`Script` answers every review the same way: one round per entry of `plan` (the tool calls of
that round), then a final review. The provider learns which round a request is by counting
the assistant messages it carries, so any number of reviews can share one provider.
`provider_process` runs that provider in a process of its own, as a real provider is: its
work then takes no time from the reviews being measured. `scripted_provider` is the one way
the bench starts a provider (see its note on stopping).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.provider_server import (
    RecordedRequest,
    Responder,
    Scripted,
    ScriptedProvider,
    stop_turn,
    tool_call_turn,
)

from bench.common import bench_store, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import ReviewResult
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


# How long stopping a provider waits for the server to see its clients' connections closed.
CLOSE_WAIT_SECONDS = 2.0


@contextmanager
def scripted_provider(responder: Responder, latency: float = 0.0) -> Iterator[ScriptedProvider]:
    """A scripted provider that, when the block ends, stops once it has seen every client
    connection close.

    Stopping the fake cancels the connections it still holds open, and on Python 3.11 asyncio
    prints a traceback for each (its stream callback asks a cancelled task for its exception).
    Our clients have closed their connections by the time the block ends, but the server's
    thread may not have read that end of file yet; waiting for it removes the race. A client
    that really left a connection open still shows after CLOSE_WAIT_SECONDS.
    """
    provider = ScriptedProvider(responder=responder, latency=latency).start()
    try:
        yield provider
    finally:
        deadline = time.monotonic() + CLOSE_WAIT_SECONDS
        while provider._connections and time.monotonic() < deadline:
            time.sleep(0.002)
        provider.stop()


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


def shared_store() -> dict[str, Any]:
    """`store=` for run_review: the bench process's one store, as a service or a worker keeps
    one (nothing on a source from before the store existed)."""
    store = bench_store()
    return {} if store is None else {"store": store}


def review(target: LocalTarget, settings: Settings) -> ReviewResult:
    """One review, run to its end in a new event loop."""
    result: ReviewResult = asyncio.run(run_review(target, settings, **shared_store()))
    return result


@contextmanager
def provider_process(plan: Sequence[Sequence[Call]], latency: float) -> Iterator[str]:
    """A scripted provider answering `plan` after `latency` seconds, in a new process; yields
    its base URL and stops it when the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.harness", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(json.dumps(plan).encode() + b"\n")
        process.stdin.flush()
        yield process.stdout.readline().decode().strip()
    finally:
        process.stdin.close()  # the server stops at end of input
        process.wait(timeout=30)


def _serve(latency: float) -> None:
    """The provider process: read the plan, print the base URL, serve until stdin closes."""
    plan = json.loads(sys.stdin.readline())
    with scripted_provider(Script(plan=plan), latency) as provider:
        print(provider.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    _serve(float(sys.argv[1]))
