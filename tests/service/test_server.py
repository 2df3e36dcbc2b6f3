"""How `pr-review serve` runs (service/server.py): the slow-client guard, descriptors,
and a graceful SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.results import PR_URL, as_json, review_result
from tests.service.support import FakeReviewer, app_with, settings

pytestmark = pytest.mark.anyio
REPO_ROOT = Path(__file__).resolve().parents[2]


# --- slow clients (the load test is tests/hostile/test_load.py) -----------------------------


@contextmanager
def guarded_server(app: Any, **bounds: Any) -> Iterator[int]:
    """Serve `app` with `server_config` (the guard included) on loopback; yield the port."""
    from pr_review_api.service.server import server_config

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = server_config(app, settings(), host="127.0.0.1", port=port, **bounds)
    config.timeout_graceful_shutdown = 5
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn failed to start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _closed_within(connection: socket.socket, seconds: float) -> bool:
    connection.settimeout(seconds)
    try:
        return connection.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_request_head_that_never_ends_is_closed_at_the_read_deadline() -> None:
    with guarded_server(app_with(FakeReviewer()), read_timeout=0.5) as port:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert _closed_within(slow, 5)
            assert 0.4 < time.monotonic() - started < 3
        with socket.create_connection(("127.0.0.1", port)) as silent:  # not one byte
            assert _closed_within(silent, 5)


def test_a_slow_review_is_not_cut_by_the_read_deadline() -> None:
    reviewer = FakeReviewer(delay=1.0)
    with guarded_server(app_with(reviewer), read_timeout=0.3) as port:
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/reviews", json={"pull_request_url": PR_URL}, timeout=10
        )
    assert response.status_code == 200


def test_past_the_cap_the_longest_waiting_connection_makes_room() -> None:
    with guarded_server(app_with(), max_connections=4, read_timeout=30) as port:
        waiting = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            for connection in waiting:
                connection.sendall(b"GET /healthz HTTP/1.1\r\n")
                time.sleep(0.05)
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            assert response.json() == {"status": "ok"}
            assert _closed_within(waiting[0], 2)  # the oldest one made room
            assert not _closed_within(waiting[-1], 0.2)
        finally:
            for connection in waiting:
                connection.close()


def test_running_out_of_descriptors_is_one_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import errno

    from pr_review_api.service.server import _ResourceErrorLog

    handler = _ResourceErrorLog()
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.DEBUG):
            for _ in range(500):
                error = OSError(errno.EMFILE, "Too many open files")
                handler(
                    loop, {"message": "socket.accept() out of system resource", "exception": error}
                )
    finally:
        loop.close()
    records = [r for r in caplog.records if "EMFILE" in r.getMessage()]
    assert len(records) == 1
    assert records[0].exc_info is None  # no traceback
    assert handler.suppressed == 499


# --- graceful shutdown --------------------------------------------------------------------------

SHUTDOWN_SERVER = textwrap.dedent(
    """
    import asyncio, pathlib, sys
    import uvicorn
    from pr_review_api.service.app import create_app
    from pr_review_api.service.dependencies import get_reviewer
    from pr_review_api.service.server import server_config
    from pr_review_api.settings import load_settings
    from tests.results import review_result

    async def slow(target, settings, options):
        pathlib.Path("in-flight").touch()  # the test signals only once a review runs
        await asyncio.sleep(1.5)
        return review_result()

    settings = load_settings(opencode_api_key="k")
    app = create_app(settings)
    app.dependency_overrides[get_reviewer] = lambda: slow
    uvicorn.Server(server_config(app, settings, host="127.0.0.1", port=int(sys.argv[1]))).run()
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_healthy(base_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("the server did not start")


@pytest.mark.e2e
def test_sigterm_lets_a_review_in_flight_finish(tmp_path: Path) -> None:
    script = tmp_path / "serve_slow.py"
    script.write_text(SHUTDOWN_SERVER)
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_healthy(base_url, process)
        answers: list[httpx.Response] = []
        request = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{base_url}/v1/reviews", json={"pull_request_url": PR_URL}, timeout=20)
            )
        )
        request.start()
        in_flight = tmp_path / "in-flight"
        # No wall-clock bound (a loaded machine may take long to start the review): wait while
        # the server and the request live; pytest-timeout ends a hang.
        while not in_flight.exists() and process.poll() is None and request.is_alive():
            time.sleep(0.02)
        assert in_flight.exists(), "the review never started"
        process.send_signal(signal.SIGTERM)
        request.join(timeout=20)
        # uvicorn re-raises the signal once it has shut down, as a well-behaved daemon does.
        assert process.wait(timeout=20) in {0, -signal.SIGTERM}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    [answer] = answers
    assert answer.status_code == 200
    assert answer.json() == as_json(review_result())
