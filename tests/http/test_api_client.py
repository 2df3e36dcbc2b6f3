"""The forge-neutral API client base (http/api_client.py): one pooled client, the common
headers, bodies kept only for a 2xx, and every transport failure as the forge's own error in a
fixed sentence. GitHub's and GitLab's clients are tested on top of it (tests/github,
tests/gitlab); these tests hold the base to its own word with a probe forge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import ClassVar

import httpx
import pytest

from pr_review_api.errors import GitLabUnavailable
from pr_review_api.http.api_client import (
    DEFAULT_RATE_LIMIT_WAIT_SECONDS,
    USER_AGENT,
    ApiClient,
    rate_limit_pause,
    same_origin,
    try_again_when,
)
from pr_review_api.http.body import ACCEPTED_ENCODINGS
from pr_review_api.settings import Settings

URL = httpx.URL("https://forge.example/api/thing")


class _Probe(ApiClient):
    forge: ClassVar[str] = "Probe"
    unavailable: ClassVar[type[GitLabUnavailable]] = GitLabUnavailable

    async def get(self, *, limit: int = 1024, content: bytes | None = None) -> tuple[int, bytes]:
        with self._failures():
            client = await self._pool()
            headers = self._plain_headers("application/probe", content is not None, {"X-P": "1"})
            response, body = await self._send(client, "GET", URL, headers, content, limit)
            return response.status_code, body


def _probe(handler: httpx.MockTransport) -> _Probe:
    return _Probe(Settings(), transport=handler)


@pytest.mark.anyio
async def test_every_request_carries_the_common_headers_and_the_forges_own() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"ok")

    async with _probe(httpx.MockTransport(handler)) as probe:
        assert await probe.get(content=b"{}") == (200, b"ok")
        assert await probe.get() == (200, b"ok")
    sent = seen[0].headers
    assert sent["accept"] == "application/probe"
    assert sent["accept-encoding"] == ACCEPTED_ENCODINGS
    assert sent["x-p"] == "1"
    assert sent["user-agent"] == USER_AGENT
    assert sent["content-type"] == "application/json"
    assert "content-type" not in seen[1].headers  # no body, no type


@pytest.mark.anyio
async def test_only_a_2xx_body_is_read() -> None:
    chunks_read: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        chunks_read.append(1)
        yield b"refused"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, content=body())

    async with _probe(httpx.MockTransport(handler)) as probe:
        assert await probe.get() == (403, b"")
    assert chunks_read == []


@pytest.mark.anyio
async def test_a_body_over_the_cap_is_the_forges_error_and_reading_stops() -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(1000):
            sent.append(1)
            yield b" " * 4096

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    async with _probe(httpx.MockTransport(handler)) as probe:
        with pytest.raises(GitLabUnavailable, match=r"^Probe's answer was larger than allowed\.$"):
            await probe.get(limit=10_000)
    assert len(sent) <= 4


@pytest.mark.parametrize(
    ("failure", "sentence"),
    [
        (httpx.ConnectError("refused"), "Probe could not be reached."),
        (httpx.ReadTimeout("slow"), "Probe did not answer in time."),
        (httpx.RemoteProtocolError("garbled"), "Probe could not be reached."),
    ],
)
@pytest.mark.anyio
async def test_transport_failures_are_the_forges_error_in_a_fixed_sentence(
    failure: Exception, sentence: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise failure

    async with _probe(httpx.MockTransport(handler)) as probe:
        with pytest.raises(GitLabUnavailable) as raised:
            await probe.get()
    assert raised.value.message == sentence
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__  # no httpx error chained to it


@pytest.mark.anyio
async def test_a_corrupt_compressed_body_is_the_forges_error() -> None:
    async def not_gzip() -> AsyncIterator[bytes]:
        yield b"not gzip at all"

    def handler(request: httpx.Request) -> httpx.Response:
        # Streamed: httpx's own decoder never sees it, only the capped reader's.
        return httpx.Response(200, content=not_gzip(), headers={"Content-Encoding": "gzip"})

    async with _probe(httpx.MockTransport(handler)) as probe:
        with pytest.raises(GitLabUnavailable, match=r"^Probe's answer could not be decoded\.$"):
            await probe.get()


@pytest.mark.anyio
async def test_the_pool_is_made_once_and_a_lent_client_is_not_closed() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(204))
    probe = _probe(transport)
    first = await probe._pool()
    assert await probe._pool() is first
    await probe.aclose()
    assert first.is_closed
    lent = httpx.AsyncClient(transport=transport)
    borrower = _Probe(Settings(), http=lent)
    assert await borrower._pool() is lent
    await borrower.aclose()
    assert not lent.is_closed
    await lent.aclose()


def test_an_origin_is_scheme_host_and_port() -> None:
    base = httpx.URL("https://forge.example/api")
    assert same_origin(base, httpx.URL("https://forge.example:443/other?x=1"))
    assert not same_origin(base, httpx.URL("http://forge.example/api"))
    assert not same_origin(base, httpx.URL("https://forge.example:8443/api"))
    assert not same_origin(base, httpx.URL("https://forge.example.evil/api"))


def test_try_again_says_seconds_up_to_a_day_then_later() -> None:
    assert try_again_when(30) == "in 30 seconds"
    assert try_again_when(86_400) == "in 86400 seconds"
    assert try_again_when(86_401) == "later"
    assert try_again_when(None) == "later"


def test_a_rate_limit_pause_is_at_least_a_second_a_minute_unsaid_and_none_past_the_end() -> None:
    async def pauses() -> list[int | None]:
        now = asyncio.get_running_loop().time()
        return [
            rate_limit_pause(0, now + 100),
            rate_limit_pause(5, now + 100),
            rate_limit_pause(None, now + 100),
            rate_limit_pause(None, now + 10),
            rate_limit_pause(50, now + 10),
        ]

    assert asyncio.run(pauses()) == [1, 5, DEFAULT_RATE_LIMIT_WAIT_SECONDS, None, None]
