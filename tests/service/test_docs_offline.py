"""`/docs` without internet (service/routes.py): Swagger UI's files come from the package.

The page names no other host; each file it loads is served here; and Debian's headless
Chromium, on a machine without internet, renders the operations from a real uvicorn server
(skipped, saying why, when no Chromium is installed).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
import uvicorn
from pydantic import SecretStr

from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings
from tests.conftest import PROVIDER_KEY
from tests.service.devtools import browser_environment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class References(HTMLParser):
    """Every URL a page loads or links to."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls.extend(value or "" for name, value in attrs if name in ("src", "href"))


def _settings() -> Settings:
    return Settings(opencode_api_key=SecretStr(PROVIDER_KEY))


def test_docs_loads_only_files_this_service_serves() -> None:
    app = create_app(_settings())

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            page = await client.get("/docs")
            assert page.status_code == 200
            assert "://" not in page.text  # no scheme, so no other host
            assert "validatorUrl" in page.text  # the public validator's badge is off
            urls = References(page.text).urls
            assert sorted(urls) == [
                "/docs/assets/favicon.png",
                "/docs/assets/swagger-ui-bundle.js",
                "/docs/assets/swagger-ui.css",
            ]
            kinds = {}
            for url in urls:
                asset = await client.get(url)
                assert asset.status_code == 200, url
                kinds[url.rsplit(".", 1)[1]] = asset.headers["content-type"].split(";")[0]
            assert kinds == {"png": "image/png", "js": "text/javascript", "css": "text/css"}
            escape = await client.get("/docs/assets/../../settings.py")
            assert escape.status_code == 404

    asyncio.run(scenario())


@pytest.fixture
def running_server() -> Iterator[str]:
    """The application on real uvicorn, on a free loopback port, in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(_settings()), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


@pytest.mark.e2e
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium: install Debian's package (apt-get install -y chromium) to run it",
)
def test_swagger_ui_renders_the_operations_in_a_browser_without_internet(
    running_server: str, tmp_path: Path
) -> None:
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",  # let the page's script run before the dump
            "--dump-dom",
            f"{running_server}/docs",
        ],
        capture_output=True,
        text=True,
        env=browser_environment(profile),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'class="swagger-ui' in dom
    assert "/v1/reviews" in dom  # an operation, rendered from /openapi.json by the script
    assert "Review a pull request" in dom
