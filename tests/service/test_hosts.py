"""A keyless `serve` answers only loopback `Host` names and PR_REVIEW_ALLOWED_HOSTS
(specification §5): a page that rebinds its own name to 127.0.0.1 gets 421 before any route."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError
from pr_review_api.service.hosts import answers_host, host_checked, is_loopback
from pr_review_api.settings import load_settings
from tests.conftest import PROVIDER_KEY
from tests.service.support import (
    SERVICE_KEY,
    app_with,
    assert_error,
    serve_data_dir,
    serve_environment,
    serve_process,
    wait_until_jobs_answer,
)

ALLOWED = frozenset({"review.example.com"})
REBOUND = "rebind.attacker.example"


@pytest.mark.parametrize(
    ("host", "answered"),
    [
        (b"127.0.0.1", True),
        (b"127.0.0.1:8000", True),
        (b"localhost", True),
        (b"LOCALHOST:8000", True),
        (b"localhost.:8000", True),
        (b"[::1]", True),
        (b"[::1]:8000", True),
        (b"review.example.com", True),
        (b"Review.Example.COM:443", True),
        (REBOUND.encode(), False),
        (b"rebind.attacker.example:8000", False),
        (b"localhost.attacker.example", False),
        (b"127.0.0.1.attacker.example", False),
        (b"review.example.com.attacker.example", False),
        (b"::1", False),  # not a Host value: IPv6 goes in brackets
        (b"localhost:80:80", False),
        (b"localhost@evil", False),
        (b"", False),
        (b"\xff", False),
    ],
)
def test_which_host_names_a_keyless_server_answers(host: bytes, answered: bool) -> None:
    assert answers_host([(b"host", host)], ALLOWED) is answered


def test_no_host_or_two_are_refused() -> None:
    assert not answers_host([], ALLOWED)
    assert not answers_host([(b"host", b"localhost"), (b"host", REBOUND.encode())], ALLOWED)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_allowed_hosts_are_names_without_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR_REVIEW_ALLOWED_HOSTS", " Review.Example.com. , ,[::2]")
    assert load_settings().pr_review_allowed_hosts == ("review.example.com", "[::2]")
    for bad in ("https://review.example.com", "review.example.com:443", "a/b", "*.example.com"):
        monkeypatch.setenv("PR_REVIEW_ALLOWED_HOSTS", bad)
        with pytest.raises(ConfigurationError, match="PR_REVIEW_ALLOWED_HOSTS"):
            load_settings()


@pytest.mark.anyio
async def test_with_service_keys_any_host_is_answered() -> None:
    app = app_with(pr_review_api_keys=[SecretStr(SERVICE_KEY)])
    assert host_checked(app, keys=True, allowed=()) is app
    transport = httpx.ASGITransport(app=host_checked(app, keys=True, allowed=()))
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{REBOUND}") as client:
        assert (await client.get("/healthz")).status_code == 200


@pytest.mark.anyio
async def test_a_refused_host_gets_the_contract_error_before_routing() -> None:
    app = host_checked(app_with(), keys=False, allowed=())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{REBOUND}") as client:
        for method, path in (
            ("GET", "/healthz"),
            ("GET", "/no/such/route"),
            ("POST", "/v1/reviews"),
        ):
            refused = await client.request(method, path)
            document = assert_error(refused, 421, "invalid_request")
            assert "PR_REVIEW_ALLOWED_HOSTS" in document["error"]["message"]
            assert REBOUND not in refused.text


# --- a real `serve` ----------------------------------------------------------------------------


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with serve_data_dir() as folder:
        yield folder


@pytest.mark.e2e  # a real `pr-review serve` with its embedded PostgreSQL: not --fast
def test_a_keyless_serve_refuses_a_rebound_host_and_answers_loopback_and_listed_names(
    data_dir: Path, tmp_path: Path
) -> None:
    environment = serve_environment(
        data_dir,
        tmp_path / "cache",
        OPENCODE_API_KEY=PROVIDER_KEY,
        PR_REVIEW_ALLOWED_HOSTS="review.example.com",
    )
    log = tmp_path / "serve.log"
    with serve_process(environment, log) as base, httpx.Client(base_url=base, timeout=30) as client:
        wait_until_jobs_answer(client)
        port = base.rsplit(":", 1)[1]
        rebound = {"Host": f"{REBOUND}:{port}"}
        body = {"pull_request_url": "https://github.com/acme/widget/pull/7", "post": True}
        queued = client.post("/v1/review-jobs", json=body, headers=rebound)
        assert_error(queued, 421, "invalid_request")
        for path in ("/ui", "/metrics", "/healthz", "/v1/review-jobs", "/openapi.json"):
            assert_error(client.get(path, headers=rebound), 421, "invalid_request")
        # Nothing was queued by the refused request.
        assert client.get("/v1/review-jobs").json()["jobs"] == []
        for host in (
            f"127.0.0.1:{port}",
            "localhost",
            f"localhost:{port}",
            "[::1]",
            "review.example.com",
        ):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
        assert client.get("/ui", headers={"Host": "review.example.com"}).status_code == 200
    text = log.read_text(errors="replace")
    assert "status=421" in text
    assert "code=invalid_request" in text
    assert REBOUND not in text
