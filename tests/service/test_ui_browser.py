"""The `/ui` pages in a real browser: Debian's headless Chromium loads each page from a running
`pr-review serve` (real uvicorn, its embedded PostgreSQL and worker process) whose jobs were
created through the job routes and reviewed with the scripted provider and the fake GitHub.
The test asserts on the DOM the browser built and saves screenshots under its tmp folder.

Skipped, saying why, when no Chromium is installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn
from tests.service.devtools import browser_environment, chromium
from tests.service.support import (
    SERVICE_KEY,
    serve_data_dir,
    serve_environment,
    serve_process,
    wait_until_jobs_answer,
)

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
_JOB_DEADLINE_SECONDS = 90


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with serve_data_dir() as folder:
        yield folder


def _environment(
    provider: ScriptedProvider, fake: FakeGitHub, data: Path, cache: Path, **more: str
) -> dict[str, str]:
    return serve_environment(
        data,
        cache,
        OPENCODE_API_KEY=PROVIDER_KEY,
        OPENCODE_BASE_URL=provider.base_url,
        GITHUB_SERVER_URL=fake.server_url,
        GITHUB_API_URL=fake.api_url,
        GITHUB_TOKEN=GITHUB_TOKEN,
        **more,
    )


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
        env=browser_environment(profile),
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
    with serve_process(environment, log) as base:
        with httpx.Client(base_url=base, timeout=30) as client:
            wait_until_jobs_answer(client)
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
    assert "0 of 1 changed file inspected." in detail
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


def test_a_browser_signs_in_with_a_key_sees_the_jobs_and_signs_out(
    data_dir: Path,
    tmp_path: Path,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
) -> None:
    """specification §18: with PR_REVIEW_API_KEYS set, a browser types a key into the sign-in
    form, gets a session cookie that is not the key, sees the jobs, and signs out."""
    fake_github.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})
    scripted_provider.script(stop_turn(REVIEW))
    log = tmp_path / "serve.log"
    environment = _environment(
        scripted_provider,
        fake_github,
        data_dir,
        tmp_path / "cache",
        PR_REVIEW_API_KEYS=f"another-key,{SERVICE_KEY}",
    )
    key = {"Authorization": f"Bearer {SERVICE_KEY}"}
    assert CHROMIUM is not None
    with serve_process(environment, log) as base:
        with httpx.Client(base_url=base, timeout=30, headers=key) as client:
            wait_until_jobs_answer(client)
            url = f"{fake_github.server_url}/acme/widget/pull/7"
            job = _finished(
                client,
                client.post("/v1/review-jobs", json={"pull_request_url": url}).json()["job_id"],
            )
            refused = httpx.get(f"{base}/v1/review-jobs", timeout=30)
        # The 401 of /v1 says which header to send.
        assert refused.status_code == 401
        assert "Authorization: Bearer <key>" in refused.json()["error"]["message"]
        with chromium(CHROMIUM, tmp_path / "profile") as browser:
            browser.open(f"{base}/ui/jobs/{job['job_id']}")
            assert browser.location().startswith(f"{base}/ui/sign-in?")  # sent to the form
            browser.type_into("#key", "not-a-key")
            browser.click("#sign-in")
            assert 'id="refused"' in browser.html()
            assert not browser.cookies()

            browser.type_into("#key", SERVICE_KEY)
            browser.click("#sign-in")
            # Back on the page first asked for, its job shown.
            assert browser.location() == f"{base}/ui/jobs/{job['job_id']}"
            assert browser.html().count('<tr class="finding">') == 1
            (cookie,) = browser.cookies()
            assert cookie["httpOnly"] is True
            assert cookie["sameSite"] == "Strict"
            assert cookie["secure"] is False  # plain HTTP on loopback; Secure over TLS
            assert cookie["path"] == "/ui"
            assert SERVICE_KEY not in cookie["value"]
            browser.open(f"{base}/ui")
            assert browser.html().count('<tr class="job"') == 1

            browser.click("#sign-out")
            assert browser.location().startswith(f"{base}/ui/sign-in?")
            assert not browser.cookies()
            browser.open(f"{base}/ui")
            assert browser.location().startswith(f"{base}/ui/sign-in?")
            requested = list(browser.requested)
    assert requested
    assert not [address for address in requested if SERVICE_KEY in address]
    assert SERVICE_KEY not in log.read_text(errors="replace")
