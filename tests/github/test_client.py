"""The GitHub REST client (github/client.py) against the fake GitHub: headers, statuses,
rate limits, timeouts, redirects, the capped reader and one pooled connection.
"""

from __future__ import annotations

import gzip
import json
import logging
import traceback
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pr_review_api.errors import GitHubUnavailable, PullRequestNotFound
from pr_review_api.fetch.metadata import MAX_METADATA_RESPONSE_BYTES
from pr_review_api.github import client as github
from pr_review_api.github.client import GitHubClient, fetch_metadata
from pr_review_api.github.urls import parse_pull_request_url
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_documents import pull_json
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import gzip_bomb_bytes
from tests.github.support import BASE, HEAD, metadata_error, pull_ref


@pytest.mark.anyio
async def test_metadata_comes_from_the_pulls_endpoint(fake_github: FakeGitHub) -> None:
    fake_github.set_pull(
        "acme",
        "widget",
        7,
        base_sha=BASE,
        head_sha=HEAD,
        base_ref="release/1.x",
        title="T",
        body="B",
    )
    metadata = await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    assert (metadata.base_sha, metadata.head_sha, metadata.base_ref) == (BASE, HEAD, "release/1.x")
    assert (metadata.title, metadata.body) == ("T", "B")
    (request,) = fake_github.requests
    assert (request.method, request.path) == ("GET", "/api/v3/repos/acme/widget/pulls/7")


@pytest.mark.anyio
async def test_api_request_names_the_media_type_and_api_version(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    headers = fake_github.requests[0].headers
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == github.GITHUB_API_VERSION
    assert headers["user-agent"].startswith("pr-review/")


@pytest.mark.anyio
async def test_token_is_sent_as_a_bearer_header_when_set(fake_github: FakeGitHub) -> None:
    fake_github.require_token = GITHUB_TOKEN
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(
        pull_ref(fake_github), fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    )
    assert fake_github.requests[0].authorization == f"Bearer {GITHUB_TOKEN}"


@pytest.mark.anyio
async def test_no_authorization_header_without_a_token(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    assert "authorization" not in fake_github.requests[0].headers


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 410])
async def test_404_is_pull_request_not_found(fake_github: FakeGitHub, status: int) -> None:
    fake_github.respond("acme", "widget", 7, status, '{"message":"Not Found"}')
    error = await metadata_error(fake_github)
    assert isinstance(error, PullRequestNotFound)


@pytest.mark.anyio
async def test_unknown_pull_request_is_not_found(fake_github: FakeGitHub) -> None:
    assert isinstance(await metadata_error(fake_github), PullRequestNotFound)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_error_is_github_unavailable(fake_github: FakeGitHub, status: int) -> None:
    fake_github.respond("acme", "widget", 7, status, "<html>upstream error</html>")
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert str(status) in error.message
    assert "upstream" not in error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "60"}, None),
        (403, {"retry-after": "30"}, "in 30 seconds"),
        (429, {}, None),
        (429, {"retry-after": "7", "x-ratelimit-remaining": "0"}, "in 7 seconds"),
        (429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
    ],
)
async def test_rate_limit_answer_says_so(
    fake_github: FakeGitHub, status: int, headers: dict[str, str], wait: str | None
) -> None:
    fake_github.respond(
        "acme", "widget", 7, status, '{"message":"API rate limit exceeded"}', headers=headers
    )
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "rate limit" in error.message
    assert "GITHUB_TOKEN" in error.message  # no token was set: say how to raise the limit
    if wait is not None:
        assert wait in error.message


@pytest.mark.anyio
async def test_rate_limit_reset_time_gives_the_wait(fake_github: FakeGitHub) -> None:
    import time

    reset = str(int(time.time()) + 120)
    fake_github.respond(
        "acme",
        "widget",
        7,
        403,
        "{}",
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
    )
    error = await metadata_error(fake_github, token=GITHUB_TOKEN)
    assert "rate limit" in error.args[0]
    assert "seconds" in error.args[0]
    assert "GITHUB_TOKEN" not in error.args[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "phrase"),
    [(401, "credentials"), (403, "refused"), (418, "unexpected"), (204, "unexpected")],
)
async def test_other_failures_are_github_unavailable(
    fake_github: FakeGitHub, status: int, phrase: str
) -> None:
    fake_github.respond("acme", "widget", 7, status, "" if status == 204 else "nope")
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert phrase in error.message


@pytest.mark.anyio
async def test_slow_api_is_cut_off_by_the_total_timeout(
    fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(github, "METADATA_TIMEOUT_SECONDS", 0.3)
    fake_github.respond(
        "acme", "widget", 7, 200, json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD)), delay=5
    )
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "in time" in error.message


@pytest.mark.anyio
async def test_unreachable_api_is_github_unavailable(tmp_path: Path) -> None:
    with __import__("socket").socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(
        github_server_url=f"http://127.0.0.1:{port}", github_api_url=f"http://127.0.0.1:{port}/api"
    )
    ref = parse_pull_request_url(f"http://127.0.0.1:{port}/acme/widget/pull/7", settings)
    with pytest.raises(GitHubUnavailable, match="could not be reached"):
        await fetch_metadata(ref, settings)


@pytest.mark.anyio
async def test_oversized_response_is_refused_by_its_declared_length(
    fake_github: FakeGitHub,
) -> None:
    document = pull_json(7, base_sha=BASE, head_sha=HEAD, body="x" * (2 * 1024 * 1024))
    fake_github.respond("acme", "widget", 7, 200, json.dumps(document))
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "larger than allowed" in error.message


@pytest.mark.anyio
async def test_oversized_streamed_response_is_cut_off(fake_github: FakeGitHub) -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(10_000):  # 640 MB if nobody stops reading
            sent.append(1)
            yield b" " * 65536

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(GitHubUnavailable, match="larger than allowed"):
            await fetch_metadata(
                pull_ref(fake_github), fake_github.settings(Path("unused")), client
            )
    assert len(sent) <= MAX_METADATA_RESPONSE_BYTES // 65536 + 2


@pytest.mark.anyio
async def test_a_given_client_is_used_with_the_same_headers(fake_github: FakeGitHub) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pull_json(7, base_sha=BASE, head_sha=HEAD))

    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        metadata = await fetch_metadata(pull_ref(fake_github), settings, client)
    assert metadata.head_sha == HEAD
    assert seen[0].headers["authorization"] == f"Bearer {GITHUB_TOKEN}"
    assert seen[0].headers["accept"] == "application/vnd.github+json"


@pytest.mark.anyio
async def test_same_host_redirect_of_a_renamed_repository_is_followed(
    fake_github: FakeGitHub,
) -> None:
    fake_github.respond(
        "acme",
        "widget",
        7,
        301,
        headers={"Location": f"{fake_github.api_url}/repos/acme/renamed/pulls/7"},
    )
    fake_github.set_pull("acme", "renamed", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    metadata = await fetch_metadata(pull_ref(fake_github), settings)
    assert metadata.head_sha == HEAD
    assert [r.path for r in fake_github.requests] == [
        "/api/v3/repos/acme/widget/pulls/7",
        "/api/v3/repos/acme/renamed/pulls/7",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["localhost", "127.0.0.2"])
async def test_redirect_to_another_host_is_not_followed(fake_github: FakeGitHub, host: str) -> None:
    target = f"http://{host}:{fake_github.port}/api/v3/repos/acme/renamed/pulls/7"
    fake_github.respond("acme", "widget", 7, 302, headers={"Location": target})
    fake_github.set_pull("acme", "renamed", 7, base_sha=BASE, head_sha=HEAD)
    error = await metadata_error(fake_github, token=GITHUB_TOKEN)
    assert isinstance(error, GitHubUnavailable)
    assert "another host" in error.message
    assert len(fake_github.requests) == 1  # the token went nowhere else


@pytest.mark.anyio
async def test_redirect_loops_are_bounded(fake_github: FakeGitHub) -> None:
    fake_github.respond(
        "acme",
        "widget",
        7,
        307,
        headers={"Location": f"{fake_github.api_url}/repos/acme/widget/pulls/7"},
    )
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert len(fake_github.requests) == github.MAX_REDIRECTS + 1


@pytest.mark.anyio
async def test_response_bodies_and_token_never_reach_messages_or_logs(
    fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    marker = "BODY-MARKER-5d1e"
    fake_github.require_token = GITHUB_TOKEN
    bodies: list[tuple[int, str, dict[str, str]]] = [
        (500, f"<h1>{marker}</h1>", {}),
        (403, f'{{"message": "{marker}"}}', {"x-ratelimit-remaining": "0"}),
        (200, f'{{"number": 7, "title": "{marker}", "base": "{marker}"}}', {}),
        (200, json.dumps(pull_json(7, base_sha=marker, head_sha=HEAD, title=marker)), {}),
        (404, marker, {}),
    ]
    for status, body, headers in bodies:
        fake_github.respond("acme", "widget", 7, status, body, headers=headers)
        error = await metadata_error(fake_github, token=GITHUB_TOKEN)
        rendered = "".join(traceback.format_exception(error))
        for secret in (marker, GITHUB_TOKEN):
            assert secret not in rendered
            assert secret not in repr(error)
    for record in caplog.records:
        text = record.getMessage() + repr(record.args)
        assert marker not in text
        assert GITHUB_TOKEN not in text
    assert GITHUB_TOKEN not in caplog.text


# --- one client, one capped reader ---

# The bound the provider's gzip-bomb test holds (tests/llm/test_provider.py, tests/hostile):
# four times the provider's 2 MiB cap. GitHub's metadata cap is half of that, so the same
# absolute bound is a stricter one here.
SHARED_BOMB_PEAK_BOUND = 4 * MAX_PROVIDER_RESPONSE_BYTES


@pytest.mark.anyio
async def test_gzip_bomb_in_metadata_stays_within_the_provider_bound(
    fake_github: FakeGitHub,
) -> None:
    bomb = gzip_bomb_bytes()  # 64 MiB of spaces in about 64 KiB
    fake_github.respond(
        "acme",
        "widget",
        7,
        200,
        bomb,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    settings = fake_github.settings(Path("unused"))
    async with GitHubClient(settings) as client:
        fake_github.set_pull("acme", "widget", 8, base_sha=BASE, head_sha=HEAD)
        await fetch_metadata(pull_ref(fake_github, number=8), settings, client)  # warm up the pool
        tracemalloc.start()
        try:
            with pytest.raises(GitHubUnavailable, match="larger than allowed"):
                await fetch_metadata(pull_ref(fake_github), settings, client)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # Before the shared reader, httpx's decoder inflated each chunk whole: about 142 MiB.
    assert peak < SHARED_BOMB_PEAK_BOUND
    assert peak < 4 * MAX_METADATA_RESPONSE_BYTES


@pytest.mark.anyio
async def test_gzip_encoded_metadata_is_decoded(fake_github: FakeGitHub) -> None:
    document = json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD)).encode()
    fake_github.respond(
        "acme",
        "widget",
        7,
        200,
        gzip.compress(document),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    metadata = await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    assert metadata.head_sha == HEAD


@pytest.mark.anyio
async def test_corrupt_or_unknown_encoding_is_github_unavailable(fake_github: FakeGitHub) -> None:
    for encoding, body in (("gzip", b"\x1f\x8b not gzip at all"), ("br", b"whatever")):
        fake_github.respond("acme", "widget", 7, 200, body, headers={"Content-Encoding": encoding})
        error = await metadata_error(fake_github)
        assert isinstance(error, GitHubUnavailable)
        assert error.message == "GitHub's answer could not be decoded."


@pytest.mark.anyio
async def test_one_client_keeps_one_connection_for_many_requests(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"))
    async with GitHubClient(settings) as client:
        for _ in range(5):
            await fetch_metadata(pull_ref(fake_github), settings, client)
    ports = {r.client_port for r in fake_github.api_requests()}
    assert len(fake_github.api_requests()) == 5
    assert len(ports) == 1


@pytest.mark.anyio
async def test_a_url_on_another_origin_never_gets_the_token(fake_github: FakeGitHub) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http,
        GitHubClient(settings, http=http) as client,
    ):
        for url in ("https://evil.example/x", f"http://127.0.0.2:{fake_github.port}/api/v3/x"):
            with pytest.raises(GitHubUnavailable):
                await client.request("GET", url)
    assert seen == []
