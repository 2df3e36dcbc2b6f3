"""`pr-review serve` (cli/commands.py): which addresses it refuses, and its log."""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Iterator

import pytest
import uvicorn

from tests.cli.support import assert_one_error_line, run
from tests.conftest import PROVIDER_KEY

# --- serve -------------------------------------------------------------------------------------


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[uvicorn.Config]]:
    """Record the server `serve` would run instead of running it."""
    started: list[uvicorn.Config] = []
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: started.append(self.config)
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield started
    for handler in root.handlers[:]:  # serve configured the service log: undo it
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def test_serve_refuses_a_public_address_without_service_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    result = run("serve", "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "PR_REVIEW_API_KEYS" in assert_one_error_line(result, "configuration_error")
    assert no_server == []


def test_serve_refuses_to_start_without_a_provider_key(no_server: list[uvicorn.Config]) -> None:
    result = run("serve")
    assert result.exit_code == 2
    assert "OPENCODE_API_KEY" in assert_one_error_line(result, "configuration_error")
    assert no_server == []


@pytest.mark.e2e
def test_serve_on_loopback_without_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    result = run("serve", "--port", "8123")
    assert result.exit_code == 0, result.output
    [config] = no_server
    assert (config.host, config.port) == ("127.0.0.1", 8123)
    assert config.access_log is False  # ours replaces uvicorn's, which logs query strings
    assert config.timeout_graceful_shutdown is not None


@pytest.mark.e2e
def test_serve_on_a_public_address_with_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("PR_REVIEW_API_KEYS", "a-service-key")
    result = run("serve", "--host", "0.0.0.0")
    assert result.exit_code == 0, result.output
    assert no_server[0].host == "0.0.0.0"


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--port", str(port))
    assert result.exit_code == 2
    line = assert_one_error_line(result, "configuration_error")
    assert f"Port {port} is already in use" in line
    assert no_server == []


def test_the_service_log_keeps_ours_and_drops_third_party_chatter() -> None:
    from pr_review_api.service.server import configure_service_logging

    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_service_logging(stream)
    try:
        logging.getLogger("pr_review_api.access").info("method=GET path=/healthz status=200")
        logging.getLogger("pr_review_api.service.server").warning("out of EMFILE")
        logging.getLogger("uvicorn.error").info("Uvicorn running")
        logging.getLogger("httpx").info("HTTP Request: POST https://provider.example/v1/x")
        logging.getLogger("httpcore.connection").debug("connect_tcp.started host=github")
        logging.getLogger("httpx").warning("a third-party warning")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    logged = stream.getvalue()
    assert "path=/healthz" in logged
    assert "out of EMFILE" in logged
    assert "Uvicorn running" in logged
    assert "a third-party warning" in logged
    assert "provider.example" not in logged
    assert "connect_tcp" not in logged
