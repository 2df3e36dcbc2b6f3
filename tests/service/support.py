"""What the service tests share: settings, a stand-in reviewer, an app and a client for it,
a live uvicorn server on loopback, and a real `pr-review serve` process.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.run import ReviewOptions
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import ReviewResult
from pr_review_api.service.app import create_app
from pr_review_api.service.dependencies import get_reviewer
from pr_review_api.settings import Settings, load_settings
from tests.conftest import PROVIDER_KEY
from tests.environment import process_environment, review_variables
from tests.results import PR_URL, review_result

SERVICE_KEY = "svc-key-SERVICE-SECRET-93c1"
SERVE_DEADLINE_SECONDS = 120
ERROR_KEYS = {"error", "termination_reason", "trace"}


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"opencode_api_key": PROVIDER_KEY}
    values.update(overrides)
    return load_settings(**values)


class FakeReviewer:
    """Stands in for run_review: records calls, then waits, fails or returns a review."""

    def __init__(
        self,
        result: ReviewResult | None = None,
        *,
        error: BaseException | None = None,
        delay: float = 0.0,
        gate: asyncio.Event | None = None,
        gather: int = 0,
    ) -> None:
        self.result = result or review_result()
        self.error = error
        self.delay = delay
        self.gate = gate
        self.calls: list[tuple[ChangeTarget, bool, ModelClient | None]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        # Each review waits until this many run at once (or 30 s pass): concurrency by count.
        self.gather = gather
        self._changed = asyncio.Condition()

    async def until_in_flight(self, count: int) -> None:
        """Wait until `count` reviews are running at once."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight >= count)

    async def __call__(
        self, target: ChangeTarget, settings: Settings, options: ReviewOptions
    ) -> ReviewResult:
        self.calls.append((target, options.include_trace, options.model))
        async with self._changed:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._changed.notify_all()
        try:
            if self.gather:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.until_in_flight(self.gather), timeout=30)
            if self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.error is not None:
                raise self.error
            return self.result
        finally:
            self.in_flight -= 1


def app_with(reviewer: FakeReviewer | None = None, **overrides: Any) -> Any:
    app = create_app(settings(**overrides))
    if reviewer is not None:
        app.dependency_overrides[get_reviewer] = lambda: reviewer
    return app


@asynccontextmanager
async def client_for(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def post_review(client: httpx.AsyncClient, body: Any = None, **kwargs: Any) -> httpx.Response:
    if body is None and "content" not in kwargs:
        body = {"pull_request_url": PR_URL}
    if body is not None:
        kwargs["json"] = body
    return await client.post("/v1/reviews", **kwargs)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the contract's error document with this status and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    document: dict[str, Any] = response.json()
    assert set(document) == ERROR_KEYS
    assert document["error"]["code"] == code
    assert isinstance(document["error"]["message"], str)
    assert document["error"]["message"]
    assert document["trace"] is None
    return document


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on an ephemeral loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn failed to start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def serve_data_dir() -> Iterator[Path]:
    """A data folder for a `serve` process's embedded PostgreSQL; stopped and removed after.
    Short, under /tmp: the server's socket lives in it."""
    folder = Path(tempfile.mkdtemp(prefix="prr-"))
    try:
        yield folder
    finally:
        EmbeddedPostgres(folder).stop()
        shutil.rmtree(folder, ignore_errors=True)


def serve_environment(data: Path, cache: Path, **settings: str) -> dict[str, str]:
    """The environment of a `serve` process: this one's without provider, forge and service
    settings, then `settings` (OPENCODE_API_KEY=..., and so on)."""
    return (
        process_environment(review_variables(cache=cache, PR_REVIEW_DATA_DIR=str(data))) | settings
    )


@contextmanager
def serve_process(environment: dict[str, str], log: Path) -> Iterator[str]:
    """A real `pr-review serve --port 0` (uvicorn, its embedded PostgreSQL and worker); yields
    its base URL once it listens, and stops it with SIGTERM after."""
    with log.open("wb") as output:
        serve = subprocess.Popen(
            [sys.executable, "-m", "pr_review_api.cli", "serve", "--port", "0"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{_listening_port(log, serve)}"
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def _listening_port(log: Path, process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + SERVE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("serve never said where it listens:\n" + log.read_text(errors="replace"))


def wait_until_jobs_answer(client: httpx.Client) -> None:
    """Wait until the job routes answer: the embedded database and the queue are up."""
    deadline = time.monotonic() + SERVE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        try:
            if client.get("/v1/review-jobs").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve's job routes never answered")
