"""The `/ui` pages in a real browser: Debian's headless Chromium loads each page from a running
`pr-review serve` (real uvicorn, its embedded PostgreSQL and worker process) whose jobs were
created through the job routes and reviewed with the scripted provider and the fake GitHub.
The test asserts on the DOM the browser built and saves screenshots under its tmp folder.

Skipped, saying why, when no Chromium is installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pr_review_api.jobs.embedded import EmbeddedPostgres
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn

fake_github = github_server.fake_github

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# A real browser and a real `pr-review serve` process: the default run, not --fast.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium: install Debian's package (apt-get install -y chromium) to run it",
    ),
]

FINDING = {
    "severity": "high",
    "title": "<script>alert(1)</script> runs on import",
    "explanation": "See [the docs](javascript:alert(2)) and <a href='javascript:alert(3)'>x</a>.",
    "path": "app.py",
    "line": 1,
    "evidence": "print('hi')",
    "recommendation": "Guard it with if __name__ == '__main__'.",
}
REVIEW = {
    "summary": "One problem <img src=x onerror=alert(4)>.",
    "findings": [FINDING],
    "notes": ["[phish](https://evil.example/)"],
}
_SERVE_DEADLINE_SECONDS = 120
_JOB_DEADLINE_SECONDS = 90


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Short: the embedded server's socket lives in the data folder.
    folder = Path(tempfile.mkdtemp(prefix="prr-"))
    try:
        yield folder
    finally:
        EmbeddedPostgres(folder).stop()
        shutil.rmtree(folder, ignore_errors=True)


def _environment(
    provider: ScriptedProvider, fake: FakeGitHub, data: Path, cache: Path
) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "GITHUB_"))},
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": provider.base_url,
        "GITHUB_SERVER_URL": fake.server_url,
        "GITHUB_API_URL": fake.api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PR_REVIEW_CACHE_DIR": str(cache),
        "PR_REVIEW_DATA_DIR": str(data),
    }


def _wait_for_port(log: Path, process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + _SERVE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("serve never said where it listens:\n" + log.read_text(errors="replace"))


def _wait_until_ready(client: httpx.Client) -> None:
    """The jobs routes answer once the embedded database and the queue are up."""
    deadline = time.monotonic() + _SERVE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        try:
            if client.get("/v1/review-jobs").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve's job routes never answered")


def _finished(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + _JOB_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/review-jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} never finished")


def _chromium(*args: str, profile: Path) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # tests run as root in CI
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_each_page_renders_in_a_real_browser_from_a_running_serve(
    data_dir: Path,
    tmp_path: Path,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
) -> None:
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    fake_github.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})
    fake_github.pull_request("acme", "widget", 8, head={"app.py": "print('bye')\n"})
    # The first job's review, then a provider that refuses the key: the second job fails.
    scripted_provider.script(stop_turn(REVIEW), Fault.status(401))
    log = tmp_path / "serve.log"
    environment = _environment(scripted_provider, fake_github, data_dir, tmp_path / "cache")
    with log.open("wb") as output:
        serve = subprocess.Popen(
            [sys.executable, "-m", "pr_review_api.cli", "serve", "--port", "0"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{_wait_for_port(log, serve)}"
        with httpx.Client(base_url=base, timeout=30) as client:
            _wait_until_ready(client)
            url = f"{fake_github.server_url}/acme/widget/pull"
            first = client.post(
                "/v1/review-jobs", json={"pull_request_url": f"{url}/7", "post": True}
            )
            published = _finished(client, first.json()["job_id"])
            second = client.post("/v1/review-jobs", json={"pull_request_url": f"{url}/8"})
            failed = _finished(client, second.json()["job_id"])
        assert published["status"] == "succeeded", published["result"]
        assert failed["status"] == "failed"
        _check_pages(base, published, failed, tmp_path)
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
    text = log.read_text(errors="replace")
    for secret in (GITHUB_TOKEN, PROVIDER_KEY):
        assert secret not in text


def _check_pages(
    base: str, published: dict[str, Any], failed: dict[str, Any], tmp_path: Path
) -> None:
    profile = tmp_path / "chromium-profile"
    review_url = published["result"]["publication"]["url"]

    listing = _chromium("--dump-dom", f"{base}/ui", profile=profile)
    assert listing.count('<tr class="job"') == 2
    assert f'href="{review_url}"' in listing  # the link to the published review
    assert f"/ui/jobs/{published['job_id']}" in listing
    assert '<span class="sev sev-high" title="high">1 high</span>' in listing
    assert "opencode_authentication_failed" in listing
    assert "<script" not in listing

    detail = _chromium("--dump-dom", f"{base}/ui/jobs/{published['job_id']}", profile=profile)
    assert detail.count('<tr class="finding">') == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt; runs on import" in detail
    assert "[the docs](javascript:alert(2))" in detail
    assert "&lt;img src=x onerror=alert(4)&gt;" in detail
    assert "<script" not in detail
    assert "<img" not in detail
    assert 'href="javascript:' not in detail.lower()
    # The scripted model read nothing: the one changed file is listed as not inspected.
    assert "0 of 1 changed files inspected." in detail
    assert '<li class="mono">app.py</li>' in detail

    failure = _chromium("--dump-dom", f"{base}/ui/jobs/{failed['job_id']}", profile=profile)
    assert "opencode_authentication_failed" in failure

    dismissals = _chromium(
        "--dump-dom", f"{base}/ui/repositories/acme/widget/dismissals", profile=profile
    )
    assert 'id="none-recorded"' in dismissals

    for name, path in (("ui.png", "/ui"), ("job.png", f"/ui/jobs/{published['job_id']}")):
        shot = tmp_path / name
        _chromium(
            "--hide-scrollbars",
            "--window-size=1280,800",
            f"--screenshot={shot}",
            f"{base}{path}",
            profile=profile,
        )
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
