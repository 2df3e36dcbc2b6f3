"""`GET /metrics` (specification §18) on the real application: reviews through the scripted provider
and the fake GitHub, then a scrape that must count exactly what happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import Reply, ScriptedProvider, stop_turn, tool_call_turn
from tests.in_process import service
from tests.scrape import families, label_values, samples, value

fake_github = github_server.fake_github
pytestmark = pytest.mark.anyio

REVIEW = {"summary": "Looks fine.", "findings": [], "notes": []}
FAMILIES = {
    "pr_review_reviews",
    "pr_review_review_seconds",
    "pr_review_tokens",
    "pr_review_tool_calls",
    "pr_review_provider_requests",
    "pr_review_publications",
    "pr_review_webhook_deliveries",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _settings(fake: FakeGitHub, provider: ScriptedProvider, **overrides: Any) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, "pr-review-bot")  # GET /user: the publishing identity
    return fake.settings(
        Path("cache").resolve(),
        token=GITHUB_TOKEN,
        opencode_api_key=SecretStr(PROVIDER_KEY),
        opencode_base_url=provider.base_url,
        opencode_max_retries=1,
        **overrides,
    )


def _script_ten_reviews(fake: FakeGitHub, provider: ScriptedProvider) -> list[str]:
    """Pull requests 1-10: eight read a file then finish, the ninth meets one 503 first, the
    tenth asks for a tool that does not exist (invalid_tool_call)."""
    urls = []
    for number in range(1, 11):
        fixture = fake.pull_request("acme", "widget", number, head={f"f{number}.py": "x = 1\n"})
        urls.append(fixture.url)
    for number in range(1, 9):
        call = ("call_1", "read_repository_file", {"path": f"f{number}.py"})
        provider.script(tool_call_turn([call]), stop_turn(REVIEW))
    provider.script(Reply(status=503), stop_turn(REVIEW))
    provider.script(tool_call_turn([("call_1", "delete_everything", {})]))
    return urls


@pytest.mark.e2e  # ten reviews through the service and the fakes
async def test_a_scrape_after_ten_reviews_counts_every_family(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    urls = _script_ten_reviews(fake_github, scripted_provider)
    async with service(_settings(fake_github, scripted_provider)) as client:
        statuses = []
        for url in urls:
            answer = await client.post("/v1/reviews", json={"pull_request_url": url, "post": True})
            statuses.append(answer.status_code)
        scrape = await client.get("/metrics")
    scripted_provider.assert_complete()
    assert statuses == [200] * 9 + [502]
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = scrape.text
    assert families(text) >= FAMILIES
    assert "pr_review_jobs" not in families(text)  # no database: no job gauge
    assert value(text, "pr_review_reviews_total", termination_reason="final_review") == 9
    assert value(text, "pr_review_reviews_total", termination_reason="invalid_tool_call") == 1
    assert value(text, "pr_review_review_seconds_count") == 10
    assert value(text, "pr_review_review_seconds_bucket", le="+Inf") == 10
    # 18 turns answered (8 x 2, the ninth's second attempt, the tenth's one), 10 + 5 tokens each.
    assert value(text, "pr_review_tokens_total", kind="prompt") == 180
    assert value(text, "pr_review_tokens_total", kind="completion") == 90
    assert value(text, "pr_review_tool_calls_total", tool="read_repository_file", ok="true") == 8
    assert label_values(text, "tool") == {"read_repository_file"}  # the unknown tool never ran
    assert value(text, "pr_review_provider_requests_total", outcome="ok") == 18
    unavailable = value(text, "pr_review_provider_requests_total", outcome="opencode_unavailable")
    assert unavailable == 1
    assert value(text, "pr_review_publications_total", status="published") == 9
    posted = [r for r in fake_github.api_requests() if r.method == "POST"]
    assert len([r for r in posted if r.path.endswith("/reviews")]) == 9
    for secret in (GITHUB_TOKEN, PROVIDER_KEY, "acme", "widget", "f1.py"):
        assert secret not in text  # no repository, file or secret in any label


async def test_metrics_need_a_service_key_when_keys_are_set(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    settings = _settings(
        fake_github, scripted_provider, pr_review_api_keys=[SecretStr("key-one"), SecretStr("k2")]
    )
    async with service(settings) as client:
        missing = await client.get("/metrics")
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        twice = await client.get(
            "/metrics",
            headers=[("Authorization", "Bearer key-one"), ("Authorization", "Bearer key-one")],
        )
        right = await client.get("/metrics", headers={"Authorization": "Bearer k2"})
    for refused in (missing, wrong, twice):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
    assert right.status_code == 200
    assert "pr_review_reviews" in families(right.text)


async def test_metrics_are_open_like_v1_when_no_key_is_set(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    async with service(_settings(fake_github, scripted_provider)) as client:
        scrape = await client.get("/metrics")
    assert scrape.status_code == 200
    # Nothing happened yet: the families are declared, with no sample invented.
    assert families(scrape.text) >= FAMILIES
    assert not [key for key in samples(scrape.text) if key[0] == "pr_review_reviews_total"]


async def test_a_review_that_fails_before_the_loop_is_counted_by_its_error_code(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    fake_github.respond("acme", "widget", 404, 404, json.dumps({"message": "Not Found"}))
    url = f"{fake_github.server_url}/acme/widget/pull/404"
    async with service(_settings(fake_github, scripted_provider)) as client:
        answer = await client.post("/v1/reviews", json={"pull_request_url": url})
        scrape = await client.get("/metrics")
    assert answer.json()["error"]["code"] == "pull_request_not_found"
    reason = "pull_request_not_found"
    assert value(scrape.text, "pr_review_reviews_total", termination_reason=reason) == 1
    assert value(scrape.text, "pr_review_provider_requests_total", outcome="ok") == 0


async def test_a_query_string_is_ignored_and_post_is_refused(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    async with service(_settings(fake_github, scripted_provider)) as client:
        with_query = await client.get("/metrics?name[]=pr_review_reviews_total&x=<script>")
        posted = await client.post("/metrics", content=b"x")
    assert with_query.status_code == 200
    assert families(with_query.text) >= FAMILIES
    assert "<script>" not in with_query.text
    assert posted.status_code == 405
    assert set(posted.json()) == {"error", "termination_reason", "trace"}
