"""Metrics that need the jobs database (specification §18), on the real embedded PostgreSQL:
the job gauge read at scrape time (service/metrics_route.py), webhook deliveries counted by the
route (service/webhooks.py), a `pr-review worker --metrics-port` process serving its own
counts on loopback (cli/worker.py), and `serve`'s scrape covering its embedded worker."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.service import metrics_route
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.environment import process_environment, review_variables
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.jobs.test_jobs import (
    FAST,
    deliver,
    pull,
    pull_request_event,
    rows,
    service,
    settings_for,
    signed,
)
from tests.scrape import families, label_values, value

fake_github = github_server.fake_github

REVIEW = {"summary": "Looks fine.", "findings": [], "notes": []}
SERVICE_KEY = "svc-key-METRICS-SECRET-1c7e"
START_DEADLINE_SECONDS = 120.0
JOB_DEADLINE_SECONDS = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- the job gauge ---------------------------------------------------------------------------


def test_the_job_gauge_is_what_the_database_holds_at_scrape_time(database_url: str) -> None:
    settings = settings_for(database_url)

    async def scenario() -> tuple[str, str]:
        async with service(settings) as client:
            for number in (1, 2, 3, 1):  # pull request 1 twice: the newer supersedes
                url = f"https://github.example/acme/widget/pull/{number}"
                answer = await client.post("/v1/review-jobs", json={"pull_request_url": url})
                assert answer.status_code == 202
            first = (await client.get("/metrics")).text
            with psycopg.connect(database_url, autocommit=True) as connection:
                connection.execute(
                    "UPDATE review_jobs SET status = 'failed' "
                    "WHERE number = 2 AND status = 'queued'"
                )
            return first, (await client.get("/metrics")).text

    first, second = asyncio.run(scenario())
    expected = dict(rows(database_url, "SELECT status, count(*) FROM review_jobs GROUP BY status"))
    assert expected == {"queued": 2, "failed": 1, "superseded": 1}
    assert value(first, "pr_review_jobs", status="queued") == 3
    assert value(first, "pr_review_jobs", status="superseded") == 1
    for status in ("queued", "running", "succeeded", "failed", "superseded"):
        assert value(second, "pr_review_jobs", status=status) == expected.get(status, 0)
    assert label_values(second, "status") == {
        "queued",
        "running",
        "succeeded",
        "failed",
        "superseded",
    }


def test_a_database_that_does_not_answer_leaves_the_gauge_out_not_the_scrape(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_route, "JOBS_READ_TIMEOUT_SECONDS", 0.3)
    settings = settings_for(database_url)

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with service(settings) as client:
            with psycopg.connect(database_url) as blocker:
                # Holds the table: the gauge's count waits behind it, past its timeout.
                blocker.execute("LOCK TABLE review_jobs IN ACCESS EXCLUSIVE MODE")
                blocked = await client.get("/metrics")
                blocker.rollback()
            return blocked, await client.get("/metrics")

    blocked, after = asyncio.run(scenario())
    assert blocked.status_code == 200
    assert "pr_review_reviews" in families(blocked.text)
    assert "pr_review_jobs" not in families(blocked.text)
    assert "pr_review_jobs" in families(after.text)


# --- webhook deliveries ----------------------------------------------------------------------


def test_webhook_deliveries_are_counted_by_bounded_event_and_outcome(database_url: str) -> None:
    settings = settings_for(database_url)
    hostile_event = "pull_request<script>acme/widget</script>"

    async def scenario() -> str:
        async with service(settings) as client:
            assert (await deliver(client, b"{}", kind="ping")).status_code == 200
            assert (await deliver(client, pull_request_event(7))).status_code == 202
            assert (await deliver(client, pull_request_event(8, action="closed"))).json() == {
                "status": "ignored"
            }
            refused = await deliver(client, pull_request_event(9), signature="sha256=" + "0" * 64)
            assert refused.status_code == 401
            assert (await deliver(client, b"[1]")).status_code == 422
            other = await deliver(client, b"{}", kind=hostile_event)
            assert other.json() == {"status": "ignored"}
            return (await client.get("/metrics")).text

    text = asyncio.run(scenario())
    name = "pr_review_webhook_deliveries_total"
    assert value(text, name, event="ping", outcome="ok") == 1
    assert value(text, name, event="pull_request", outcome="queued") == 1
    assert value(text, name, event="pull_request", outcome="ignored") == 1
    assert value(text, name, event="pull_request", outcome="invalid_signature") == 1
    assert value(text, name, event="pull_request", outcome="invalid_request") == 1
    assert value(text, name, event="other", outcome="ignored") == 1
    assert label_values(text, "event") == {"ping", "pull_request", "other"}
    assert "script" not in text
    assert signed(b"{}") not in text


# --- a worker's own endpoint -----------------------------------------------------------------


def _worker_environment(
    database_url: str, fake: FakeGitHub, provider: ScriptedProvider, cache: Path
) -> dict[str, str]:
    return process_environment(
        review_variables(
            provider,
            github=fake,
            cache=cache,
            PR_REVIEW_DATA_DIR=os.environ[
                "PR_REVIEW_DATA_DIR"
            ],  # the test's, as clean_environment set it
            PR_REVIEW_DATABASE_URL=database_url,
            PR_REVIEW_API_KEYS=SERVICE_KEY,
        )
    )


def _listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port` (from /proc/net/tcp*)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def _scrape(url: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(url, headers=headers, timeout=5)


def _wait_for_endpoint(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, "the worker exited"
        try:
            _scrape(url, SERVICE_KEY)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("the worker's metrics endpoint never answered")


def test_a_worker_serves_its_own_metrics_on_loopback_behind_the_keys(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    fixture = fake_github.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})
    scripted_provider.script(stop_turn(REVIEW))
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    cache = Path("cache").resolve()
    process = subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--metrics-port", str(port)],
        env=_worker_environment(database_url, fake_github, scripted_provider, cache),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_endpoint(url, process)
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
        settings = settings_for(database_url)

        async def enqueue() -> uuid.UUID:
            queue = JobQueue(settings, tuning=FAST)
            async with queue.opened():
                job = pull(7, server=fake_github.server_url, head_sha=fixture.head_sha, post=True)
                return (await queue.enqueue(job, source="webhook")).job_id

        job_id = asyncio.run(enqueue())
        deadline = time.monotonic() + JOB_DEADLINE_SECONDS
        query = f"SELECT status FROM review_jobs WHERE id = '{job_id}'"
        while rows(database_url, query) != [("succeeded",)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rows(database_url, query) == [("succeeded",)]
        refused = [_scrape(url, None), _scrape(url, "wrong")]
        scrape = _scrape(url, SERVICE_KEY)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert process.returncode == 0, stderr
    assert [answer.status_code for answer in refused] == [401, 401]
    assert scrape.status_code == 200
    text = scrape.text
    assert value(text, "pr_review_reviews_total", termination_reason="final_review") == 1
    assert value(text, "pr_review_publications_total", status="published") == 1
    assert value(text, "pr_review_provider_requests_total", outcome="ok") == 1
    assert value(text, "pr_review_tokens_total", kind="completion") == 5
    assert "pr_review_jobs" not in families(text)  # serve reports the shared gauge, once
    for secret in (PROVIDER_KEY, GITHUB_TOKEN, SERVICE_KEY):
        assert secret not in stderr


# --- serve's embedded worker -----------------------------------------------------------------


def _serve_environment(
    data_dir: Path, fake: FakeGitHub, provider: ScriptedProvider, cache: Path
) -> dict[str, str]:
    return process_environment(
        review_variables(provider, github=fake, cache=cache, PR_REVIEW_DATA_DIR=str(data_dir))
    )


def _wait_until_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not start: " + log.read_text(errors="replace"))


def _review_through_serve(base: str, url: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{base}/v1/review-jobs", json={"pull_request_url": url, "post": True}, timeout=10
    )
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    deadline = time.monotonic() + JOB_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        document: dict[str, Any] = httpx.get(f"{base}/v1/review-jobs/{job_id}", timeout=10).json()
        if document["status"] in ("succeeded", "failed"):
            return document
        time.sleep(0.2)
    raise AssertionError("the job did not finish")


def test_serves_scrape_counts_the_reviews_its_embedded_worker_ran(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    fixture = fake_github.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})
    scripted_provider.script(stop_turn(REVIEW))
    data_dir = Path(tempfile.mkdtemp(prefix="prr-metrics-"))  # short: the socket lives there
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    environment = _serve_environment(data_dir, fake_github, scripted_provider, tmp_path / "cache")
    try:
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "pr_review_api.cli", "serve", "--port", str(port)],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
            )
        try:
            _wait_until_healthy(base, process, log)
            document = _review_through_serve(base, fixture.url)
            scrape = httpx.get(f"{base}/metrics", timeout=10)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            finally:
                if process.poll() is None:
                    process.kill()
    finally:
        EmbeddedPostgres(data_dir).stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    assert document["status"] == "succeeded", document
    text = scrape.text
    # The review ran in the worker process; serve's one scrape has it, and the gauge.
    assert value(text, "pr_review_reviews_total", termination_reason="final_review") == 1
    assert value(text, "pr_review_review_seconds_count") == 1
    assert value(text, "pr_review_publications_total", status="published") == 1
    assert value(text, "pr_review_tokens_total", kind="prompt") == 10
    assert value(text, "pr_review_jobs", status="succeeded") == 1
    assert "Traceback" not in log.read_text(errors="replace")
