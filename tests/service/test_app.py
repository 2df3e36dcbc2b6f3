"""The whole service (service/app.py): the real `run_review` against the scripted provider
and the fake GitHub, end to end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget
from pr_review_api.model import ReviewResult
from pr_review_api.service.app import create_app
from pr_review_api.service.dependencies import get_reviewer
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import provider_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo
from tests.results import PR_URL
from tests.results import SERVICE_REVIEW as REVIEW
from tests.service.support import assert_error, live_server, post_review, settings

# Every test here reviews through the service and the fakes from end to end: the default run's.
pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


# --- end to end: the real review loop ----------------------------------------------------------

BASE_FILES = {"src/service.py": "def save(x):\n    store(x)\n", "README.md": "# widget\n"}
HEAD_FILES = {"src/service.py": "def save(x):\n    store(x)\n    validate(x)\n"}


def e2e_settings(
    fake_github: FakeGitHub, provider: ScriptedProvider, tmp_path: Path, **overrides: Any
) -> Settings:
    return fake_github.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        review_timeout_seconds=60,
        **overrides,
    )


async def ten_at_once(
    provider: ScriptedProvider, review: Callable[[], Awaitable[httpx.Response]]
) -> None:
    """Send ten reviews at once; the provider holds its replies until all ten ask together.

    Served one after another, only one request would be in flight: the count proves
    concurrency whatever the load on the machine (speed is bench/'s business)."""
    provider.gather = 10
    responses = await asyncio.gather(*(review() for _ in range(10)))
    assert [r.status_code for r in responses] == [200] * 10, [r.text for r in responses]
    assert provider.peak_in_flight == 10


async def test_end_to_end_review_of_a_pull_request(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    scripted_provider.script(
        tool_call_turn([("call_1", "read_repository_file", {"path": "src/service.py"})]),
        stop_turn(REVIEW),
    )
    app = create_app(e2e_settings(fake_github, scripted_provider, tmp_path))
    with live_server(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            response = await post_review(
                client, {"pull_request_url": pull.url + "/files", "include_trace": True}
            )
    assert response.status_code == 200, response.text
    document = response.json()
    scripted_provider.assert_complete()
    assert document["termination_reason"] == "final_review"
    assert document["pull_request"] == {
        "url": pull.url,
        "owner": "acme",
        "repo": "widget",
        "number": 7,
        "forge": "github",
    }
    assert document["revisions"]["head_sha"] == pull.head_sha
    assert document["revisions"]["base_sha"] == pull.base_sha
    assert document["review"] == REVIEW
    assert document["rounds"] == 2
    assert document["tool_calls"] == 1
    assert [turn["protocol_action"] for turn in document["trace"]] == [
        "execute_tools",
        "final_review",
    ]
    for secret in (PROVIDER_KEY, GITHUB_TOKEN, str(tmp_path)):
        assert secret not in response.text


async def test_end_to_end_failures_keep_the_contract(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    scripted_provider.script(
        stop_turn(REVIEW, finish_reason="length"),
        provider_server.Fault.rate_limited("12"),
    )
    app = create_app(e2e_settings(fake_github, scripted_provider, tmp_path))
    with live_server(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            stopped = await post_review(
                client, {"pull_request_url": pull.url, "include_trace": True}
            )
            limited = await post_review(client, {"pull_request_url": pull.url})
            foreign = await post_review(client, {"pull_request_url": PR_URL})
            missing = await post_review(client, {"pull_request_url": pull.url[:-1] + "8"})
    stopped_document = assert_error(stopped, 502, "unsupported_finish_reason")
    assert stopped_document["termination_reason"] == "unsupported_finish_reason"
    assert stopped_document["trace"] is None
    assert_error(limited, 503, "opencode_rate_limited")
    assert limited.headers["retry-after"] == "12"
    assert_error(foreign, 422, "invalid_pull_request_url")  # github.com is not this host
    assert_error(missing, 404, "pull_request_not_found")


async def test_end_to_end_ten_reviews_share_the_server_concurrently(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    body = {"pull_request_url": pull.url}
    with ScriptedProvider(responder=lambda _: stop_turn(REVIEW)) as provider:
        app = create_app(e2e_settings(fake_github, provider, tmp_path))
        with live_server(app) as base_url:
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
                warm = await post_review(client, body)
                assert warm.status_code == 200, warm.text  # the cache now holds the repository
                await ten_at_once(provider, lambda: post_review(client, body))


async def test_end_to_end_ten_local_reviews_share_the_server_concurrently(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files(BASE_FILES)
    head = repo.commit_files(HEAD_FILES)

    def local_reviewer() -> Any:
        async def reviewer(
            target: ChangeTarget, settings: Settings, options: ReviewOptions
        ) -> ReviewResult:
            return await run_review(LocalTarget(repo.path, base, head), settings, options)

        return reviewer

    with ScriptedProvider(responder=lambda _: stop_turn(REVIEW)) as provider:
        app = create_app(settings(opencode_base_url=provider.base_url))
        app.dependency_overrides[get_reviewer] = local_reviewer
        with live_server(app) as base_url:
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
                assert (await post_review(client)).status_code == 200
                await ten_at_once(provider, lambda: post_review(client))
